// SPDX-License-Identifier: BSD-3-Clause
#include "checkpoint.h"

#include "input_checks.h"

namespace remora {
namespace driver {
namespace {

Checkpoint with_driver_keys(const train::CheckpointInfo& info) {
  Checkpoint c;
  static_cast<train::CheckpointInfo&>(c) = info;
  c.vocab_json = info.get("vocab");
  c.config_json = info.get("config");
  return c;
}

}  // namespace

Checkpoint read_checkpoint_info(const std::string& path) {
  return as_input_error("checkpoint", [&] { return with_driver_keys(train::read_checkpoint_info(path)); });
}

Checkpoint load_weights(const std::string& path, Experiment& ex) {
  train::CheckpointParts p = as_input_error("checkpoint", [&] {
    Safetensors st = load_safetensors(path);
    check_stored_dtypes(st, *ex.model, path);  // an I32 weight is named as I32, not as the i64 it loads as
    return train::split_checkpoint(std::move(st), path);
  });
  as_input_error(path + " does not fit the config", [&] {
    ex.model->load_state_dict(p.weights);
    return 0;
  });
  return with_driver_keys(p.info);
}

}  // namespace driver
}  // namespace remora
