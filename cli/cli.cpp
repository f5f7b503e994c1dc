// SPDX-License-Identifier: BSD-3-Clause
// The `remora` command line: train, eval, generate, infer, gradcheck, info, config, plot
// (one Command each, in commands/*.cpp), parsed by CLI11.
// Exit codes: 0 success, 2 usage / config / input-file error, 1 failure during a run.
#include "cli.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <new>
#include <map>

#include "../core/version.h"
#include "../train/trainer.h"
#include "commands/common.h"

namespace remora {
namespace driver {

namespace {

const char* kTitle = "remora: train and run recurrence-in-attention models from JSON configs";
const char* kFooter = R"(Run `remora COMMAND --help` for details, `remora --version` for the build. Exit codes: 0 ok, 2 usage/config/input error,
1 failure during a run.)";

std::vector<Command> commands() {
  return {train_command(), eval_command(),  generate_command(), infer_command(),
          gradcheck_command(), info_command(), config_command(), plot_command(), export_command()};
}

// The values CLI11 fills for one command, turned into Args after parsing.
struct Bound {
  const Command* cmd = nullptr;
  CLI::App* app = nullptr;
  std::vector<std::string> positional, sets;
  std::map<std::string, std::string> values;
  std::map<std::string, bool> flags;
  std::map<std::string, CLI::Option*> options;
};

// "remora train CONFIG [--set key.path=value ...] [--out DIR] [--resume] [--until STEP]"
std::string synopsis(const Command& c) {
  std::string s = "remora " + c.name;
  if (!c.positional.empty()) s += c.many ? " [" + c.positional + " ...]" : " " + c.positional;
  if (c.config) s += " [--set key.path=value ...]";
  for (const OptionSpec& o : c.options) {
    const std::string opt = "--" + o.name + (o.value_name.empty() ? "" : " " + o.value_name);
    s += o.required ? " " + opt : " [" + opt + "]";
  }
  return s;
}

void add_command(CLI::App& root, const Command& c, Bound& b) {
  b.cmd = &c;
  b.app = root.add_subcommand(c.name, c.summary);
  b.app->group("commands");
  b.app->footer("\n" + synopsis(c) + "\n\n" + c.details);
  b.app->allow_extras(true);  // unknown options are reported by run_cli, in its words
  // Positionals are collected as a list whatever their number: the command
  // checks the count (and an unknown option's value must not end the parse).
  if (!c.positional.empty()) b.app->add_option(c.positional, b.positional, c.positional_help)->type_name("");
  if (c.config)
    b.app->add_option("--set", b.sets, "override a config key (repeatable); the value is JSON, else a string")
        ->type_name("key.path=value")
        ->allow_extra_args(false);
  for (const OptionSpec& o : c.options) {
    if (o.value_name.empty()) {
      b.options[o.name] = b.app->add_flag("--" + o.name, b.flags[o.name], o.help)->disable_flag_override();
    } else {
      b.options[o.name] = b.app->add_option("--" + o.name, b.values[o.name], o.help)
                              ->type_name(o.value_name)
                              ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    }
  }
}

Args args_of(const Bound& b) {
  Args a;
  a.positional = b.positional;
  a.sets = b.sets;
  for (const auto& kv : b.options) {
    if (kv.second->count() == 0) continue;
    if (b.flags.count(kv.first))
      a.flags.insert(kv.first);
    else
      a.opts[kv.first] = b.values.at(kv.first);
  }
  // What CLI11 did not recognise: an unknown option is an error; a bare word
  // (after "--") is one more positional.
  for (const std::string& r : b.app->remaining()) {
    if (r == "--") continue;
    if (r.size() > 1 && r[0] == '-') throw UsageError("unknown option " + r.substr(0, r.find('=')));
    a.positional.push_back(r);
  }
  return a;
}

// CLI11's parse errors in the driver's words ("--set needs a value").
std::string usage_message(const CLI::ParseError& e) {
  const std::string m = e.what();
  const size_t missing = m.find(" required ");
  if (missing != std::string::npos && m.find("missing") != std::string::npos && m.rfind("--", 0) == 0)
    return m.substr(0, m.find(':')) + " needs a value";
  const size_t over = m.find(" was given a disallowed flag override");
  if (over != std::string::npos) return "--" + m.substr(0, over) + " takes no value";
  return m;
}

}  // namespace

int run_cli(int argc, char** argv) {
  const std::vector<Command> cmds = commands();
  CLI::App root(kTitle, "remora");
  std::string usage = "\nusage:\n";
  for (const Command& c : cmds) usage += "  " + synopsis(c) + "\n";
  root.footer(usage + "\n" + kFooter);
  root.get_formatter()->column_width(34);
  // One command per run: a later word equal to a command name ("remora
  // gradcheck plot") is an argument of the first, not a second command.
  root.require_subcommand(1, 1);
  std::vector<Bound> bound(cmds.size());
  for (size_t i = 0; i < cmds.size(); ++i) add_command(root, cmds[i], bound[i]);

  const std::string first = argc > 1 ? argv[1] : "";
  if (first == "--version" || first == "-V") {
    std::fputs(version_string().c_str(), stdout);
    return 0;
  }
  if (argc < 2 || first == "--help" || first == "-h" || first == "help") {
    std::fputs(root.help().c_str(), argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  Bound* b = nullptr;
  for (Bound& x : bound)
    if (x.cmd->name == first) b = &x;
  if (!b) {
    std::fprintf(stderr, "remora: unknown command '%s'\n\n%s", first.c_str(), root.help().c_str());
    return 2;
  }
  const std::string& cmd = b->cmd->name;
  try {
    try {
      root.parse(argc, argv);
    } catch (const CLI::CallForHelp&) {
      std::fputs(b->app->help("remora").c_str(), stdout);
      return 0;
    } catch (const CLI::ParseError& e) {
      throw UsageError(usage_message(e));
    }
    return b->cmd->run(args_of(*b));
  } catch (const UsageError& e) {
    std::fprintf(stderr, "remora %s: %s (see remora %s --help)\n", cmd.c_str(), one_line(e.what()).c_str(), cmd.c_str());
    return 2;
  } catch (const ConfigError& e) {
    std::fprintf(stderr, "remora %s: config error: %s\n", cmd.c_str(), one_line(e.what()).c_str());
    return 2;
  } catch (const InputError& e) {
    std::fprintf(stderr, "remora %s: %s\n", cmd.c_str(), one_line(e.what()).c_str());
    return 2;
  } catch (const train::SetupError& e) {
    std::fprintf(stderr, "remora %s: %s\n", cmd.c_str(), one_line(e.what()).c_str());
    return 2;
  } catch (const RunError& e) {
    std::fprintf(stderr, "remora %s: %s\n", cmd.c_str(), one_line(e.what()).c_str());
    return 1;
  } catch (const OutOfMemoryError& e) {
    std::fprintf(stderr, "remora %s: %s; the config's memory estimate (remora info) did not foresee it: use a "
                         "smaller model, batch or data set, or free memory\n", cmd.c_str(), one_line(e.what()).c_str());
    return 1;
  } catch (const std::bad_alloc&) {
    // Memory ran out beyond what the config's estimate foresaw (memory_estimate.h).
    std::fprintf(stderr, "remora %s: out of memory (an allocation failed; std::bad_alloc): use a smaller model, "
                         "batch or data set, or free memory\n", cmd.c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "remora %s: %s\n", cmd.c_str(), one_line(e.what()).c_str());
    return 1;
  } catch (...) {
    std::fprintf(stderr, "remora %s: failed with an unknown exception\n", cmd.c_str());
    return 1;
  }
}

}  // namespace driver
}  // namespace remora
