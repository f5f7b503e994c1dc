// SPDX-License-Identifier: BSD-3-Clause
// What the `remora` commands share (cli/commands/*.cpp): the parsed
// arguments, the error kinds and their exit codes, config loading, helpers.
#pragma once
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "../checkpoint.h"
#include "../experiment.h"

namespace remora {
namespace driver {

// A usage error (exit 2).
class UsageError : public Error {
 public:
  explicit UsageError(const std::string& m) : Error(m) {}
};
// A failure during a run (exit 1).
class RunError : public Error {
 public:
  explicit RunError(const std::string& m) : Error(m) {}
};

// One command's arguments as the command line gave them (cli.cpp fills it
// from CLI11): positionals, the --set assignments in order, options with a
// value (by name without dashes) and the boolean flags given.
struct Args {
  std::vector<std::string> positional;
  std::vector<std::string> sets;
  std::map<std::string, std::string> opts;
  std::set<std::string> flags;
};

// An option of a command: "--name VALUE" (value_name empty: a boolean flag).
struct OptionSpec {
  std::string name, value_name, help;
  bool required = false;  // the command reports "missing --name" when absent
};

// A command: its name, help texts, arguments and what runs it. Each
// commands/*.cpp defines one or more; cli.cpp lists them.
struct Command {
  std::string name;
  std::string summary;     // one line, in `remora --help`
  std::string positional;  // "CONFIG", "OUT_DIR", "OP" (empty: none)
  std::string positional_help;
  bool many = false;       // any number of positionals (else one)
  bool config = false;     // takes --set key.path=value (a Remora config command)
  std::vector<OptionSpec> options;
  std::string details;     // the explanation below the options
  std::function<int(const Args&)> run;
};

Command export_command();
Command train_command();
Command eval_command();
Command generate_command();
Command infer_command();
Command gradcheck_command();
Command info_command();
Command config_command();
Command plot_command();

int64_t to_int(const std::string& opt, const std::string& v, int64_t lo, int64_t hi);
double to_double(const std::string& opt, const std::string& v, double lo, double hi);
// The value of a required option (UsageError "missing --opt").
std::string need(const Args& a, const std::string& opt);
// The one CONFIG positional, loaded with the --set overrides.
Config config_of(const Args& a, const std::string& cmd, const ParseOptions& po = {});
// The config of an inference command: the CONFIG positional when given, else
// the "config" metadata of --checkpoint (as `remora train` and `remora export`
// store it), else the config.json beside it (a run directory); --set applies.
// po: how it is parsed (corpus_optional: a missing corpus is noted, not an error).
Config config_of_checkpoint(const Args& a, const std::string& cmd, const ParseOptions& po = {});
// train.threads and a device check before any work.
void apply_threads(const Config& c);
// Runs f, turning a remora::Error into an InputError (exit 2) naming `what`,
// a ConfigError included.
template <typename F>
auto as_input(const std::string& what, F&& f) -> decltype(f()) {
  return as_input_error(what, std::forward<F>(f), /*keep_config_errors=*/false);
}
// Builds the experiment for a checkpoint (--checkpoint) and loads its
// weights; adjust may change the config first (settings that do not touch
// the weights); generation builds the model for `remora generate`. A command
// that reads no data split (reads_data false: generate, infer, export) runs
// without the corpus when the checkpoint holds the vocabulary.
Experiment load_for_inference(const Args& a, const std::string& cmd, Config* cfg_out,
                              const std::function<void(Config&)>& adjust = nullptr, bool generation = false,
                              bool reads_data = true);
// An error message on one line (a multi-line message's lines joined by "; ").
std::string one_line(const std::string& msg);

// A file of the command's inputs, named as messages name it ("the config", "--checkpoint").
struct NamedPath {
  std::string what, path;
};
// The inputs every command that writes must leave alone: its CONFIG, --checkpoint
// and --input, and the weights beside a HuggingFace config.json.
std::vector<NamedPath> command_inputs(const Args& a);
// The input that `path` is (the same device and inode: another spelling or a
// hard link is caught too), or nullptr.
const NamedPath* same_file_as(const std::string& path, const std::vector<NamedPath>& inputs);
// An output file `out` (`flag` names it in messages) may be written: never
// when it is one of `inputs` (even with force), a directory or not a regular
// file; when it exists, only with `force` (messages name `force_flag`).
// InputError (exit 2) otherwise; checked before anything is written.
void check_output_file(const std::string& flag, const std::string& out, const std::vector<NamedPath>& inputs,
                       bool force, const std::string& force_flag = "--force");

}  // namespace driver
}  // namespace remora
