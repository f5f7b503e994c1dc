// SPDX-License-Identifier: BSD-3-Clause
// Learning-rate schedulers as classes (torch.optim.lr_scheduler's names and
// formulas), working on any optimizer's parameter groups:
//
//   optim::AdamW opt(model->parameters(), optim::AdamWOptions(1e-3));
//   optim::LinearLR warmup(opt, /*start_factor=*/0.1, /*end_factor=*/1.0, /*total_iters=*/100);
//   for (...) { ...; opt.step(); warmup.step(); }
//
// Constructing a scheduler records each group's current rate as its base rate
// and sets the rate of epoch 0; each step() advances the epoch by one and sets
// every group's rate from the closed form of that epoch:
//   StepLR:            base * gamma^floor(epoch / step_size)
//   ExponentialLR:     base * gamma^epoch
//   CosineAnnealingLR: eta_min + (base - eta_min) * (1 + cos(pi * epoch / T_max)) / 2
//   LambdaLR:          base * lambda(epoch)
//   LinearLR:          base * (start + (end - start) * min(epoch, total_iters) / total_iters)
//                      (the usual linear warmup)
// (torch's recursive forms give the same values when nothing else changes the
// rates.) For warmup followed by cosine or linear decay, LambdaLR over an
// optim::LRSchedule: LambdaLR(opt, [s](int64_t e) { return s.lr_at(e); }).
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "optim.h"

namespace remora {
namespace optim {

class LRScheduler {
 public:
  explicit LRScheduler(Optimizer& optimizer);
  virtual ~LRScheduler() = default;
  /// Advances one epoch (or step) and sets every group's learning rate.
  void step();
  /// The rates set last, one per parameter group (torch's get_last_lr()).
  const std::vector<double>& get_last_lr() const { return last_lr_; }
  /// The number of step() calls so far (torch's last_epoch).
  int64_t last_epoch() const { return epoch_; }
  const std::vector<double>& base_lrs() const { return base_lrs_; }

 protected:
  /// The rate of group k at `epoch` from its base rate.
  virtual double lr_at(int64_t epoch, double base_lr) const = 0;
  /// Sets the rates of the current epoch (subclass constructors call it last).
  void apply();

  Optimizer& optimizer_;
  std::vector<double> base_lrs_, last_lr_;
  int64_t epoch_ = 0;
};

class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);

 protected:
  double lr_at(int64_t epoch, double base_lr) const override;
  int64_t step_size_;
  double gamma_;
};

class ExponentialLR : public LRScheduler {
 public:
  ExponentialLR(Optimizer& optimizer, double gamma);

 protected:
  double lr_at(int64_t epoch, double base_lr) const override;
  double gamma_;
};

class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min = 0);

 protected:
  double lr_at(int64_t epoch, double base_lr) const override;
  int64_t T_max_;
  double eta_min_;
};

class LambdaLR : public LRScheduler {
 public:
  LambdaLR(Optimizer& optimizer, std::function<double(int64_t)> lr_lambda);

 protected:
  double lr_at(int64_t epoch, double base_lr) const override;
  std::function<double(int64_t)> lambda_;
};

/// Linear warmup (torch.optim.lr_scheduler.LinearLR): the factor goes from
/// start_factor to end_factor over total_iters steps, then stays.
class LinearLR : public LRScheduler {
 public:
  LinearLR(Optimizer& optimizer, double start_factor = 1.0 / 3, double end_factor = 1.0, int64_t total_iters = 5);

 protected:
  double lr_at(int64_t epoch, double base_lr) const override;
  double start_, end_;
  int64_t total_;
};

}  // namespace optim
}  // namespace remora
