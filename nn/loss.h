// SPDX-License-Identifier: BSD-3-Clause
// Losses as modules (torch::nn's names and options) and their functional forms
// in nn::functional (functional.h), all on the ops of ops/losses.h:
//
//   nn::CrossEntropyLoss ce(nn::CrossEntropyLossOptions().ignore_index(0).label_smoothing(0.1));
//   Tensor loss = ce(logits, target);                         // logits [N, C], target i64 [N]
//   nn::MSELoss mse(nn::MSELossOptions(kSum));
//
// Class scores put the classes on the LAST dim ([..., C], target [...]), where
// torch puts them on dim 1; for 2-D inputs the two agree.
#pragma once
#include <string>

#include "../ops/losses.h"
#include "module.h"
#include "options.h"

namespace remora {
namespace nn {

struct MSELossOptions {
  MSELossOptions(Reduction r = Reduction::mean) : reduction_(r) {}  // NOLINT: implicit, as torch's
  REMORA_ARG(Reduction, reduction);
};
struct L1LossOptions {
  L1LossOptions(Reduction r = Reduction::mean) : reduction_(r) {}  // NOLINT
  REMORA_ARG(Reduction, reduction);
};
struct SmoothL1LossOptions {
  SmoothL1LossOptions(Reduction r = Reduction::mean) : reduction_(r) {}  // NOLINT
  REMORA_ARG(Reduction, reduction);
  REMORA_ARG(double, beta) = 1.0;
};
struct CrossEntropyLossOptions {
  REMORA_ARG(int64_t, ignore_index) = -100;
  REMORA_ARG(Reduction, reduction) = Reduction::mean;
  REMORA_ARG(double, label_smoothing) = 0.0;
};
struct NLLLossOptions {
  REMORA_ARG(int64_t, ignore_index) = -100;
  REMORA_ARG(Reduction, reduction) = Reduction::mean;
};
struct BCEWithLogitsLossOptions {
  BCEWithLogitsLossOptions(Reduction r = Reduction::mean) : reduction_(r) {}  // NOLINT
  REMORA_ARG(Reduction, reduction);
};

std::string reduction_name(Reduction r);

/// mse_loss(input, target): (x - y)^2, reduced.
class MSELoss : public Module {
 public:
  explicit MSELoss(const MSELossOptions& o = {}) : options(o) {}
  std::string type_name() const override { return "MSELoss"; }
  std::string extra_repr() const override { return "reduction=" + reduction_name(options.reduction()); }
  Tensor forward(const Tensor& input, const Tensor& target) const {
    return mse_loss(input, target, options.reduction());
  }
  REMORA_LAYER_HANDLE(MSELoss)
  MSELossOptions options;
};

/// l1_loss(input, target): |x - y|, reduced.
class L1Loss : public Module {
 public:
  explicit L1Loss(const L1LossOptions& o = {}) : options(o) {}
  std::string type_name() const override { return "L1Loss"; }
  std::string extra_repr() const override { return "reduction=" + reduction_name(options.reduction()); }
  Tensor forward(const Tensor& input, const Tensor& target) const {
    return l1_loss(input, target, options.reduction());
  }
  REMORA_LAYER_HANDLE(L1Loss)
  L1LossOptions options;
};

/// smooth_l1_loss(input, target, reduction, beta).
class SmoothL1Loss : public Module {
 public:
  explicit SmoothL1Loss(const SmoothL1LossOptions& o = {}) : options(o) {}
  std::string type_name() const override { return "SmoothL1Loss"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& input, const Tensor& target) const {
    return smooth_l1_loss(input, target, options.reduction(), options.beta());
  }
  REMORA_LAYER_HANDLE(SmoothL1Loss)
  SmoothL1LossOptions options;
};

/// cross_entropy(logits [..., C], target i64 [...]) with ignore_index and label smoothing.
class CrossEntropyLoss : public Module {
 public:
  explicit CrossEntropyLoss(const CrossEntropyLossOptions& o = {}) : options(o) {}
  std::string type_name() const override { return "CrossEntropyLoss"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& input, const Tensor& target) const {
    return cross_entropy(input, target, options.ignore_index(), options.reduction(), options.label_smoothing());
  }
  REMORA_LAYER_HANDLE(CrossEntropyLoss)
  CrossEntropyLossOptions options;
};

/// nll_loss(log_probs [..., C], target i64 [...]) with ignore_index.
class NLLLoss : public Module {
 public:
  explicit NLLLoss(const NLLLossOptions& o = {}) : options(o) {}
  std::string type_name() const override { return "NLLLoss"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& input, const Tensor& target) const {
    return nll_loss(input, target, options.ignore_index(), options.reduction());
  }
  REMORA_LAYER_HANDLE(NLLLoss)
  NLLLossOptions options;
};

/// binary_cross_entropy_with_logits(logits, targets) (targets: probabilities of logits' shape).
class BCEWithLogitsLoss : public Module {
 public:
  explicit BCEWithLogitsLoss(const BCEWithLogitsLossOptions& o = {}) : options(o) {}
  std::string type_name() const override { return "BCEWithLogitsLoss"; }
  std::string extra_repr() const override { return "reduction=" + reduction_name(options.reduction()); }
  Tensor forward(const Tensor& input, const Tensor& target) const {
    return binary_cross_entropy_with_logits(input, target, Tensor(), options.reduction());
  }
  REMORA_LAYER_HANDLE(BCEWithLogitsLoss)
  BCEWithLogitsLossOptions options;
};

}  // namespace nn
}  // namespace remora
