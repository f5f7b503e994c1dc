// SPDX-License-Identifier: BSD-3-Clause
// Fine-tuning from a pretrained model: model.init_from loads a Remora
// checkpoint (or bare safetensors weights) or a HuggingFace BERT folder
// (config.json + model.safetensors) into the model a config builds, with the
// names matched strictly; train.freeze leaves parameters out of training.
#pragma once
#include <string>
#include <vector>

#include "experiment.h"

namespace remora {
namespace driver {

// What init_from loaded: the parameters it set and those left as initialised.
struct InitReport {
  std::vector<std::string> loaded;  // set from the source
  std::vector<std::string> head;    // the task head: initialised fresh, whatever the source holds
  std::vector<std::string> fresh;   // optional parameters the source lacks (REM parameters, a pooler)
};

// The weights file model.init_from names: `source` itself, or source/model.safetensors
// for a folder; an InputError when it is not there or not a regular file (a FIFO,
// a device). Checked before the run directory is touched.
std::string init_source_file(const std::string& source);

// Copies the tensors of `source` into ex.model. Every tensor of the source must
// name a parameter or buffer of the model (through Model::pretrained_name) with
// the same shape, and every parameter must be in the source unless the type
// calls it optional (Model::optional_pretrained) or the task head
// (Model::task_head, never loaded). Otherwise an InputError lists every
// missing, unexpected and mis-shaped tensor. The values are converted to the
// model's dtype and device.
InitReport init_from(Experiment& ex, const std::string& source);

// Marks the parameters whose names match one of `globs` (fnmatch: * and ?) as
// not trained; returns their names. A glob that matches no parameter is an
// InputError naming it.
std::vector<std::string> freeze_parameters(nn::Module& m, const std::vector<std::string>& globs);

}  // namespace driver
}  // namespace remora
