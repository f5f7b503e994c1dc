// SPDX-License-Identifier: BSD-3-Clause
// `remora config`: a config as the commands see it (after --set and the
// defaults), or with --keys every key a config takes.
#include <cstdio>

#include "common.h"

namespace remora {
namespace driver {
namespace {

int run_config(const Args& a) {
  if (a.flags.count("keys")) {
    if (!a.positional.empty() || !a.sets.empty()) throw UsageError("--keys takes no CONFIG and no --set");
    std::fputs(config_keys_markdown().c_str(), stdout);
    return 0;
  }
  if (a.positional.empty()) throw UsageError("config: expected a CONFIG argument or --keys");
  const Config cfg = config_of(a, "config");
  std::fputs((cfg.resolved.dump(2) + "\n").c_str(), stdout);
  return 0;
}

}  // namespace

Command config_command() {
  Command c;
  c.name = "config";
  c.summary = "print a config resolved, or every config key (--keys)";
  c.positional = "CONFIG";
  c.positional_help = "the JSON config";
  c.config = true;
  c.options = {{"keys", "", "list every key of every section, model type and task (Markdown)"}};
  c.details = R"(Prints the resolved config: every key after the --set overrides and the
defaults, as `remora train` writes it to DIR/config.json and into checkpoints.
With --keys, prints every key a config takes, per section, model type and
task: its type, default, accepted values and meaning (docs/config_keys.md is
this output).)";
  c.run = run_config;
  return c;
}

}  // namespace driver
}  // namespace remora
