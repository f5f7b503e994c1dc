// SPDX-License-Identifier: BSD-3-Clause
#include "experiment.h"

#include "../core/autograd.h"

namespace remora {
namespace driver {

Experiment::Experiment(const Config& c, const ExperimentOptions& opts) : cfg(c) {
  manual_seed(cfg.seed);
  const DataShard& sh = opts.shard;
  if (sh.world < 1 || sh.rank < 0 || sh.rank >= sh.world)
    throw InputError("data shard: rank " + std::to_string(sh.rank) + " of world " + std::to_string(sh.world) +
                     " is not a shard");
  if (cfg.data.batch_size % sh.world != 0)
    throw InputError("data.batch_size " + std::to_string(cfg.data.batch_size) + " does not divide among " +
                     std::to_string(sh.world) + " ranks: the config's batch is the global batch, split evenly "
                     "across the ranks; use a multiple of " + std::to_string(sh.world));
  // Before anything is allocated: a config whose parameters, optimizer state,
  // activations and data cannot fit is a config error naming its biggest term.
  check_memory(cfg, opts.memory_use);
  task = task_named(cfg.task).make();
  task->set_shard(sh);
  task->build_data(cfg, opts.shard, opts.vocab_json);
  ctx = task->model_context(cfg);
  ctx.generation = opts.generation;
  net = as_input_error("model", [&] { return cfg.model.def->build(ctx); });
  model = net.module;
  if (!cfg.device.is_cpu()) model->to_(cfg.device);
}

void Experiment::set_data_position(int64_t p) {
  if (p < 0 || p > kMaxDataPosition)
    throw InputError("checkpoint metadata \"data_position\" is " + std::to_string(p) + ", outside [0, 2^62]: " +
                     "the checkpoint is corrupt (a position counts the batches or draws served)");
  as_input_error("checkpoint metadata \"data_position\"", [&] {
    task->set_data_position(p);
    return 0;
  });
}

DType Experiment::dtype() const { return model->parameters().front().dtype(); }

Tensor Experiment::train_loss(State& state, int64_t* tokens) {
  model->train();
  return task->train_loss(*this, state, tokens);
}

Metrics Experiment::evaluate(const std::string& split, int64_t max_batches) {
  NoGradGuard ng;
  nn::ModeGuard eval_mode(*model, false);  // restored also when the task throws
  return task->evaluate(*this, split, max_batches);
}

std::unique_ptr<optim::Optimizer> Experiment::make_optimizer() const {
  const OptimizerConfig& o = cfg.train.optimizer;
  // The parameters in training (train.freeze leaves some out).
  std::vector<Tensor> p;
  for (const Tensor& t : model->parameters())
    if (t.requires_grad()) p.push_back(t);
  if (o.type == "sgd") return std::make_unique<optim::SGD>(p, o.lr, o.momentum, 0.0, o.weight_decay, o.nesterov);
  if (o.type == "rmsprop") return std::make_unique<optim::RMSprop>(p, o.lr, o.alpha, o.eps, o.weight_decay, o.momentum);
  if (o.type == "adam") return std::make_unique<optim::Adam>(p, o.lr, o.beta1, o.beta2, o.eps, o.weight_decay);
  if (o.type == "radam")
    return std::make_unique<optim::RAdam>(p, o.lr, o.beta1, o.beta2, o.eps, o.weight_decay, o.decoupled_weight_decay);
  return std::make_unique<optim::AdamW>(p, o.lr, o.beta1, o.beta2, o.eps, o.weight_decay);
}

optim::LRSchedule Experiment::schedule() const {
  optim::LRSchedule s;
  const ScheduleConfig& c = cfg.train.schedule;
  s.kind = c.type == "cosine" ? optim::LRSchedule::warmup_cosine
           : c.type == "linear" ? optim::LRSchedule::warmup_linear
                                : optim::LRSchedule::constant;
  s.warmup_steps = c.warmup;
  s.total_steps = cfg.train.trainer.steps;
  s.min_lr_ratio = c.min_lr_ratio;
  return s;
}

}  // namespace driver
}  // namespace remora
