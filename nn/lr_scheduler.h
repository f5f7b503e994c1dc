// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// Learning-rate schedulers as classes (torch.optim.lr_scheduler's names and
/// formulas), working on any optimizer's parameter groups:
///
///     optim::AdamW opt(model->parameters(), optim::AdamWOptions(1e-3));
///     optim::LinearLR warmup(opt, /*start_factor=*/0.1, /*end_factor=*/1.0, /*total_iters=*/100);
///     for (...) { ...; opt.step(); warmup.step(); }
///
/// Constructing a scheduler records each group's current rate as its base rate
/// and sets the rate of epoch 0; each step() advances the epoch by one and sets
/// every group's rate from the closed form of that epoch:
///
///     StepLR:            base * gamma^floor(epoch / step_size)
///     ExponentialLR:     base * gamma^epoch
///     CosineAnnealingLR: eta_min + (base - eta_min) * (1 + cos(pi * epoch / T_max)) / 2
///     LambdaLR:          base * lambda(epoch)
///     LinearLR:          base * (start + (end - start) * min(epoch, total_iters) / total_iters)
///                        (the usual linear warmup)
///
/// (torch's recursive forms give the same values when nothing else changes the
/// rates.) For warmup followed by cosine or linear decay, LambdaLR over an
/// optim::LRSchedule: LambdaLR(opt, [s](int64_t e) { return s.lr_at(e); }).
/// A scheduler keeps a reference to its optimizer, which must outlive it; groups
/// added to the optimizer after the scheduler was built keep their rates.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "optim.h"

namespace remora {
namespace optim {

/// The base of the schedulers (torch.optim.lr_scheduler.LRScheduler): sets every
/// group's rate to lr_at(epoch, the group's base rate).
class LRScheduler {
 public:
  /// Records each group's current rate as its base rate; the subclass constructor
  /// then sets the rates of epoch 0.
  explicit LRScheduler(Optimizer& optimizer);
  virtual ~LRScheduler() = default;
  /// Advances one epoch (or step) and sets every group's learning rate. An Error
  /// when a rate is not finite and >= 0, or the optimizer has fewer groups than
  /// when the scheduler was built.
  void step();
  /// The rates set last, one per parameter group (torch's get_last_lr()).
  const std::vector<double>& get_last_lr() const { return last_lr_; }
  /// The number of step() calls so far (torch's last_epoch).
  int64_t last_epoch() const { return epoch_; }
  /// The base rates, one per group the scheduler was built with.
  const std::vector<double>& base_lrs() const { return base_lrs_; }

 protected:
  /// The rate at `epoch` of a group whose base rate is base_lr.
  virtual double lr_at(int64_t epoch, double base_lr) const = 0;
  /// Sets the rates of the current epoch (subclass constructors call it last).
  void apply();

  /// The optimizer whose groups it sets.
  Optimizer& optimizer_;
  /// The base rates, one per group.
  std::vector<double> base_lrs_, last_lr_;  ///< The rates set last.
  /// The current epoch: step() calls so far.
  int64_t epoch_ = 0;
};

/// torch.optim.lr_scheduler.StepLR: base * gamma^floor(epoch / step_size).
class StepLR : public LRScheduler {
 public:
  /// step_size > 0 and gamma >= 0 (an Error otherwise); sets the rates of epoch 0.
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);

 protected:
  double lr_at(int64_t epoch, double base_lr) const override;
  /// Epochs between two decays.
  int64_t step_size_;
  /// Decay factor.
  double gamma_;
};

/// torch.optim.lr_scheduler.ExponentialLR: base * gamma^epoch.
class ExponentialLR : public LRScheduler {
 public:
  /// gamma >= 0 (an Error otherwise); sets the rates of epoch 0.
  ExponentialLR(Optimizer& optimizer, double gamma);

 protected:
  double lr_at(int64_t epoch, double base_lr) const override;
  /// Decay factor per epoch.
  double gamma_;
};

/// torch.optim.lr_scheduler.CosineAnnealingLR without restarts:
/// eta_min + (base - eta_min) * (1 + cos(pi * epoch / T_max)) / 2, which reaches
/// eta_min at epoch T_max and rises again after it (the cosine goes on, as in
/// torch).
class CosineAnnealingLR : public LRScheduler {
 public:
  /// T_max > 0 and eta_min >= 0 (an Error otherwise); sets the rates of epoch 0.
  CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min = 0);

 protected:
  double lr_at(int64_t epoch, double base_lr) const override;
  /// Half period in epochs.
  int64_t T_max_;
  /// The lowest rate.
  double eta_min_;
};

/// torch.optim.lr_scheduler.LambdaLR: base * lr_lambda(epoch), one function for
/// every group.
class LambdaLR : public LRScheduler {
 public:
  /// lr_lambda must not be empty (an Error otherwise); sets the rates of epoch 0,
  /// so lr_lambda(0) is called here.
  LambdaLR(Optimizer& optimizer, std::function<double(int64_t)> lr_lambda);

 protected:
  double lr_at(int64_t epoch, double base_lr) const override;
  /// The factor by epoch.
  std::function<double(int64_t)> lambda_;
};

/// Linear warmup (torch.optim.lr_scheduler.LinearLR): the factor goes from
/// start_factor to end_factor over total_iters steps, then stays.
class LinearLR : public LRScheduler {
 public:
  /// start_factor in (0, 1], end_factor in [0, 1] and total_iters > 0 (an Error
  /// otherwise); sets the rates of epoch 0.
  LinearLR(Optimizer& optimizer, double start_factor = 1.0 / 3, double end_factor = 1.0, int64_t total_iters = 5);

 protected:
  double lr_at(int64_t epoch, double base_lr) const override;
  /// start_factor.
  double start_, end_;  ///< end_factor.
  /// total_iters.
  int64_t total_;
};

}  // namespace optim
}  // namespace remora
