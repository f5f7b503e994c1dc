// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// Training checkpoints: one safetensors file holding everything a run needs to
/// continue exactly where it stopped.
///
///   tensors   the model's state_dict under its own names, the optimizer state as
///             "optimizer.<name>", the carried sequence state as "state.mems.<l>",
///             "state.rem.<l>", "state.cells.<l>"
///   metadata  "format": "remora-checkpoint", "version": "1", "remora_version", "step", "rng_seed",
///             "rng_offset" (the default generator), "data_position", "best_valid",
///             "world_size" and "data_positions" (data-parallel runs only), and any
///             metadata the caller adds (the driver adds "vocab" and "config")
///
/// Files are written atomically (a temporary beside the file, fsync, rename), so a
/// kill at any moment leaves either the old or the new file, never a torn one.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "../core/safetensors.h"
#include "../models/sequence_model.h"
#include "../nn/module.h"
#include "../nn/optim.h"

namespace remora {
namespace train {

/// A checkpoint's metadata, as written by save_checkpoint and read by
/// checkpoint_info.
struct CheckpointInfo {
  /// A bare weights file (no "format": "remora-checkpoint" metadata, e.g. a
  /// PyTorch state dict written as safetensors): weights only, no step, no
  /// optimizer; it can be evaluated but not resumed.
  bool weights_only = false;
  int64_t step = 0;  ///< Steps completed (read back in [0, 2^50]).
  /// \var rng_seed
  /// The default generator's seed.
  /// \var rng_offset
  /// The default generator's offset (values drawn since seeding).
  uint64_t rng_seed = 0, rng_offset = 0;
  int64_t data_position = 0;  ///< DataSource::position() of rank 0 (read back in [0, 2^50]).
  double best_valid = 0;  ///< The best evaluation score so far (0 when the file has none).
  /// Data-parallel runs: the world size that wrote it and every rank's data
  /// position (one-process checkpoints: 1 and {data_position}).
  int64_t world_size = 1;
  /// Every rank's data position (read back: world_size copies of data_position
  /// when the file has none).
  std::vector<int64_t> data_positions;
  /// Metadata beyond the keys above (the driver's "vocab" and "config").
  std::map<std::string, std::string> extra;

  /// extra[key], or "" when absent.
  std::string get(const std::string& key) const;
};

/// Writes model, optimizer (may be null) and carried state with `info`'s metadata.
void save_checkpoint(const std::string& path, const nn::Module& model, const optim::Optimizer* opt,
                     const models::SequenceState& state, const CheckpointInfo& info);

/// The metadata of a loaded file; an Error naming `path` and the key when it is
/// malformed (a step, seed or position that is not an integer in range).
CheckpointInfo checkpoint_info(const Safetensors& st, const std::string& path);
/// Loads the file at \p path and returns checkpoint_info of it (remora::Error
/// naming the file when it cannot be read or is malformed).
CheckpointInfo read_checkpoint_info(const std::string& path);

/// An Error naming `path` and the first floating tensor holding NaN or Inf
/// (with how many); integer tensors pass.
void check_finite(const nn::NamedTensors& tensors, const std::string& path);

/// The parts of a loaded checkpoint file.
struct CheckpointParts {
  CheckpointInfo info;            ///< The metadata.
  nn::NamedTensors weights;       ///< The model's tensors (every tensor not named "optimizer.*" or "state.*").
  nn::NamedTensors optimizer;     ///< The optimizer state, "optimizer." stripped.
  models::SequenceState state;    ///< The carried state, in layer order.
  nn::NamedTensors state_named;   ///< The same tensors under their file names ("state.mems.0", ...).
};
/// Splits a loaded file into its parts; an Error naming `path` and the tensor
/// when a floating tensor holds NaN or Inf.
CheckpointParts split_checkpoint(Safetensors st, const std::string& path);

}  // namespace train
}  // namespace remora
