// SPDX-License-Identifier: BSD-3-Clause
// Checkpoints as the driver's inference commands read them (eval, generate,
// infer). The file format, saving and resuming are the Trainer's
// (train/checkpoint.h); the driver adds the "vocab" and "config" metadata.
#pragma once
#include <string>

#include "../train/checkpoint.h"
#include "experiment.h"

namespace remora {
namespace driver {

// A checkpoint's metadata, with the driver's own keys read out.
struct Checkpoint : train::CheckpointInfo {
  std::string vocab_json, config_json;  // metadata "vocab" and "config" ("" when absent)
};

// Just the metadata (to build the Experiment with the right vocabulary). Every
// problem is an InputError naming the file.
Checkpoint read_checkpoint_info(const std::string& path);
// Loads the model weights of a checkpoint (a Remora checkpoint or bare weights:
// no "format" metadata, or "format": "pt" as the safetensors package writes a
// PyTorch state dict) into ex.model. Every problem (missing file, corrupt file,
// non-finite values, shapes that do not fit the config) is an InputError
// naming the file and the tensor.
Checkpoint load_weights(const std::string& path, Experiment& ex);

}  // namespace driver
}  // namespace remora
