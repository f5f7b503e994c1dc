// SPDX-License-Identifier: BSD-3-Clause
// An experiment: the config, the task it runs (task.h: data, loss, metrics)
// and the model (model.h). The driver's commands (train, eval, generate,
// infer, info) all start from one.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "../nn/optim.h"
#include "config.h"
#include "memory_estimate.h"
#include "model.h"
#include "task.h"

namespace remora {
namespace driver {

// Runs f, turning a remora::Error into an InputError that names `what` (the
// error's own message alone when `what` is empty); an InputError, an
// OutOfMemoryError (the run's failure, exit 1) and, when keep_config_errors, a
// ConfigError pass as they are.
template <typename F>
auto as_input_error(const std::string& what, F&& f, bool keep_config_errors = true) -> decltype(f()) {
  try {
    return f();
  } catch (const InputError&) {
    throw;
  } catch (const OutOfMemoryError&) {
    throw;
  } catch (const ConfigError& e) {
    if (keep_config_errors) throw;
    throw InputError(what.empty() ? std::string(e.what()) : what + ": " + e.what());
  } catch (const Error& e) {
    throw InputError(what.empty() ? std::string(e.what()) : what + ": " + e.what());
  }
}

struct ExperimentOptions {
  std::string vocab_json;   // a checkpoint's vocabulary (must agree with the data)
  DataShard shard;          // which part of the data this process trains on
  bool generation = false;  // built for `remora generate`
  // What the memory check before building counts (memory_estimate.h):
  // training (train, info) or inference (eval, generate, infer).
  MemoryUse memory_use = MemoryUse::train;
};

class Experiment {
 public:
  // Builds the task's data, then the model.
  explicit Experiment(const Config& cfg, const ExperimentOptions& opts = {});
  using State = driver::State;

  // One training step's loss on the next batch (graph attached), in train mode.
  Tensor train_loss(State& state, int64_t* tokens);
  // Evaluation on "valid" or "test" (up to max_batches batches, 0 = all), in
  // eval mode without gradients; the mode is restored afterwards.
  Metrics evaluate(const std::string& split, int64_t max_batches);
  json metrics_json(const Metrics& m) const { return task->metrics_json(m); }

  std::unique_ptr<optim::Optimizer> make_optimizer() const;
  optim::LRSchedule schedule() const;

  // Train data position (stream position / sampler offset), for checkpoints.
  // set_data_position refuses (InputError, exit 2) a negative position and
  // one beyond kMaxDataPosition (no run serves 2^62 batches or draws; such a
  // value in a checkpoint is corrupt and would overflow the counters).
  int64_t data_position() const { return task->data_position(); }
  void set_data_position(int64_t p);
  static constexpr int64_t kMaxDataPosition = int64_t(1) << 62;

  bool is_encoder() const { return bool(net.enc); }
  DType dtype() const;  // the parameters' dtype
  Device device() const { return cfg.device; }
  int64_t vocab_size() const { return ctx.n_token; }
  std::string vocab_json() const { return task->vocab_json(); }
  const Model& model_def() const { return *cfg.model.def; }

  Config cfg;
  std::unique_ptr<Task> task;
  ModelContext ctx;                    // what the model was built to fit
  BuiltModel net;                      // the model, through its interfaces
  std::shared_ptr<nn::Module> model;   // = net.module
};

}  // namespace driver
}  // namespace remora
