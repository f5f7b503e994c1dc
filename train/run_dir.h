// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// The run directory of a training: where `last.safetensors`, `best.safetensors`,
/// `metrics.jsonl` and `config.json` go, with the rules that keep a finished or
/// running training safe from careless commands:
///
///   - an empty path, "/" and paths that name an existing non-directory are refused;
///   - one training at a time: an exclusive lock (flock on DIR/.lock, which holds
///     the owner's pid) is taken for the life of the RunDirectory; a second
///     training into the same directory fails at once naming the holder's pid;
///   - a directory that holds an earlier run (a checkpoint or metrics.jsonl) is
///     refused unless the run is resumed or `overwrite` is set (which removes the
///     earlier run's files first);
///   - temporaries left by a killed run (*.tmp) are removed;
///   - special files (FIFOs, devices) where a run's file belongs are refused, so
///     nothing ever blocks opening them.
#pragma once
#include <memory>
#include <string>
#include <vector>

namespace remora {
namespace train {

/// How RunDirectory::open treats an earlier run, and how its messages name things.
struct RunDirectoryOptions {
  bool resume = false;     ///< The run continues from DIR/last.safetensors (which must exist).
  /// An earlier run in DIR is replaced (its last.safetensors, best.safetensors,
  /// metrics.jsonl and config.json are removed).
  bool overwrite = false;
  /// How the user names the directory and these options in messages (the
  /// driver: "--out", "--resume", "--overwrite").
  std::string name = "run directory";
  /// \var resume_flag
  /// How messages name the resume option.
  /// \var overwrite_flag
  /// How messages name the overwrite option.
  std::string resume_flag = "resume = true", overwrite_flag = "overwrite = true";
  /// Files the run reads (its config, its data): a run file that is one of
  /// them (the same device and inode) is refused, never replaced or removed.
  std::vector<std::string> inputs;
};

/// An opened run directory: holds its lock until destroyed.
class RunDirectory {
 public:
  /// Creates the directory (and its parents), checks that it is writable,
  /// takes the lock and applies the rules above. Throws SetupError (trainer.h).
  static std::unique_ptr<RunDirectory> open(const std::string& dir, const RunDirectoryOptions& o = {});
  ~RunDirectory();  // releases the lock
  RunDirectory(const RunDirectory&) = delete;
  RunDirectory& operator=(const RunDirectory&) = delete;

  const std::string& path() const { return dir_; }  ///< The directory, as given to open().
  /// DIR/\p name.
  std::string file(const std::string& name) const { return dir_ + "/" + name; }
  /// Whether DIR/last.safetensors exists (a run to resume).
  static bool has_checkpoint(const std::string& dir);
  /// The kept checkpoints of TrainerOptions::keep_best in `dir`
  /// (best-step<N>.safetensors), as paths; --overwrite removes them with the run.
  static std::vector<std::string> kept_best_files(const std::string& dir);

 private:
  RunDirectory(std::string dir, int lock_fd) : dir_(std::move(dir)), lock_fd_(lock_fd) {}
  std::string dir_;
  int lock_fd_ = -1;
};

/// Removes the temporaries a killed run left in `dir` (*.safetensors.tmp,
/// metrics.jsonl.tmp, config.json.tmp), one line each on stderr; other files
/// stay. Returns how many were removed.
int clean_stale_tmp(const std::string& dir);

}  // namespace train
}  // namespace remora
