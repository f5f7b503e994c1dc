// SPDX-License-Identifier: BSD-3-Clause
#include "lr_scheduler.h"

#include <algorithm>
#include <cmath>

namespace remora {
namespace optim {

LRScheduler::LRScheduler(Optimizer& optimizer) : optimizer_(optimizer) {
  for (const auto& g : optimizer_.param_groups()) base_lrs_.push_back(g.options().get_lr());
}

void LRScheduler::apply() {
  auto& groups = optimizer_.param_groups();
  REMORA_CHECK(groups.size() >= base_lrs_.size(),
               "LRScheduler: the optimizer has fewer parameter groups than when the scheduler was built");
  last_lr_.clear();
  for (size_t k = 0; k < base_lrs_.size(); ++k) {
    const double lr = lr_at(epoch_, base_lrs_[k]);
    REMORA_CHECK(std::isfinite(lr) && lr >= 0, "LRScheduler: the rate of group " << k << " at epoch " << epoch_
                                                                               << " is " << lr
                                                                               << "; it must be finite and >= 0");
    groups[k].options().set_lr(lr);
    last_lr_.push_back(lr);
  }
}

void LRScheduler::step() {
  ++epoch_;
  apply();
}

StepLR::StepLR(Optimizer& o, int64_t step_size, double gamma) : LRScheduler(o), step_size_(step_size), gamma_(gamma) {
  REMORA_CHECK(step_size > 0, "StepLR: step_size must be > 0, got " << step_size);
  REMORA_CHECK(gamma >= 0, "StepLR: gamma must be >= 0, got " << gamma);
  apply();
}
double StepLR::lr_at(int64_t e, double base) const { return base * std::pow(gamma_, double(e / step_size_)); }

ExponentialLR::ExponentialLR(Optimizer& o, double gamma) : LRScheduler(o), gamma_(gamma) {
  REMORA_CHECK(gamma >= 0, "ExponentialLR: gamma must be >= 0, got " << gamma);
  apply();
}
double ExponentialLR::lr_at(int64_t e, double base) const { return base * std::pow(gamma_, double(e)); }

CosineAnnealingLR::CosineAnnealingLR(Optimizer& o, int64_t T_max, double eta_min)
    : LRScheduler(o), T_max_(T_max), eta_min_(eta_min) {
  REMORA_CHECK(T_max > 0, "CosineAnnealingLR: T_max must be > 0, got " << T_max);
  REMORA_CHECK(eta_min >= 0, "CosineAnnealingLR: eta_min must be >= 0, got " << eta_min);
  apply();
}
double CosineAnnealingLR::lr_at(int64_t e, double base) const {
  return eta_min_ + (base - eta_min_) * (1 + std::cos(M_PI * double(e) / double(T_max_))) / 2;
}

LambdaLR::LambdaLR(Optimizer& o, std::function<double(int64_t)> f) : LRScheduler(o), lambda_(std::move(f)) {
  REMORA_CHECK(lambda_ != nullptr, "LambdaLR: lr_lambda is empty");
  apply();
}
double LambdaLR::lr_at(int64_t e, double base) const { return base * lambda_(e); }

LinearLR::LinearLR(Optimizer& o, double start, double end, int64_t total)
    : LRScheduler(o), start_(start), end_(end), total_(total) {
  REMORA_CHECK(start > 0 && start <= 1 && end >= 0 && end <= 1,
               "LinearLR: start_factor must be in (0, 1] and end_factor in [0, 1], got " << start << " and " << end);
  REMORA_CHECK(total > 0, "LinearLR: total_iters must be > 0, got " << total);
  apply();
}
double LinearLR::lr_at(int64_t e, double base) const {
  return base * (start_ + (end_ - start_) * double(std::min(e, total_)) / double(total_));
}

}  // namespace optim
}  // namespace remora
