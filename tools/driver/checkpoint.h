// Checkpoints of the driver (SPEC §9 safetensors). Saving, loading and the
// metadata format are all in checkpoint.cpp.
#pragma once
#include <string>
#include <vector>

#include "experiment.h"

namespace remora {
namespace driver {

// The checkpoint file (SPEC §9 safetensors): the weights under their model
// names, optimizer state as "optimizer.*", carried state as "state.*", and
// metadata: format, step, rng, data position, vocab, the resolved config.
struct Checkpoint {
  // A bare weights file (no "format": "remora-checkpoint" metadata, e.g. a
  // PyTorch state dict written as safetensors): only the model weights, so it
  // serves eval / generate / infer but cannot be resumed from.
  bool weights_only = false;
  int64_t step = 0;
  uint64_t rng_seed = 0, rng_offset = 0;
  int64_t data_position = 0;
  double best_valid = 0;
  std::string vocab_json, config_json;
  // Data-parallel runs (docs/distributed.md): the world size that wrote it and
  // every rank's data position (metadata "world_size", "data_positions"; absent
  // in a one-process checkpoint, read as 1 and {data_position}).
  int64_t world_size = 1;
  std::vector<int64_t> data_positions;
};

void save_checkpoint(const std::string& path, const Experiment& ex, const optim::Optimizer* opt,
                     const Experiment::State& state, const Checkpoint& info);
// Loads weights into ex.model (and optimizer/state when given). Every problem
// (missing file, corrupt file, shapes that do not fit the config) is an
// InputError naming the file and the key.
//
// Two kinds of file are accepted:
//   - a Remora checkpoint: metadata "format": "remora-checkpoint" with step,
//     rng_seed, rng_offset and data_position (what `remora train` writes);
//   - bare weights: no "format" metadata, or "format": "pt" (what the
//     safetensors package writes for a PyTorch state dict). Only the model's
//     weights, under their official names; the vocabulary then comes from the
//     config's data. Loading one with an optimizer or state (train --resume) is
//     an InputError. Any other "format" is an InputError naming it.
Checkpoint load_checkpoint(const std::string& path, Experiment& ex, optim::Optimizer* opt,
                           Experiment::State* state);
// Just the metadata (to build the Experiment with the right vocabulary).
Checkpoint read_checkpoint_info(const std::string& path);

}  // namespace driver
}  // namespace remora
