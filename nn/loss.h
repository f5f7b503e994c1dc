// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// Losses as modules (torch::nn's names and options) and their functional forms
/// in nn::functional (functional.h), on the ops of ops/losses.h and the op table:
///
///     nn::CrossEntropyLoss ce(nn::CrossEntropyLossOptions().ignore_index(0).label_smoothing(0.1));
///     Tensor loss = ce(logits, target);                         // logits [N, C], target i64 [N]
///     nn::MSELoss mse(nn::MSELossOptions(kSum));
///
/// Class scores put the classes on the LAST dim ([..., C], target [...]), where
/// torch puts them on dim 1; for 2-D inputs the two agree. There are no class
/// weights (torch's `weight`, `pos_weight`). Devices: the CPU and CUDA, every tensor
/// of a call on one device; floating inputs (f32, f64; 16-bit where the ops take
/// it, docs/precision.md), class targets i64. A reduced loss is a 0-d tensor.
#pragma once
#include <string>

#include "../ops/losses.h"
#include "module.h"
#include "options.h"

namespace remora {
namespace nn {

/// Options of nn::MSELoss and functional::mse_loss (torch::nn::MSELossOptions).
struct MSELossOptions {
  /// Implicit from a Reduction, as torch's: `MSELoss(kSum)`; mean by default.
  MSELossOptions(Reduction r = Reduction::mean) : reduction_(r) {}  // NOLINT: implicit, as torch's
  /// mean (default) over every element, sum, or none (the elementwise loss,
  /// input's shape).
  REMORA_ARG(Reduction, reduction);
  /// \fn reduction() const
  /// \copybrief reduction(const Reduction&)
};
/// Options of nn::L1Loss and functional::l1_loss (torch::nn::L1LossOptions).
struct L1LossOptions {
  /// Implicit from a Reduction, as torch's; mean by default.
  L1LossOptions(Reduction r = Reduction::mean) : reduction_(r) {}  // NOLINT
  /// mean (default) over every element, sum, or none (the elementwise loss,
  /// input's shape).
  REMORA_ARG(Reduction, reduction);
  /// \fn reduction() const
  /// \copybrief reduction(const Reduction&)
};
/// Options of nn::SmoothL1Loss and functional::smooth_l1_loss
/// (torch::nn::SmoothL1LossOptions).
struct SmoothL1LossOptions {
  /// Implicit from a Reduction, as torch's; mean by default.
  SmoothL1LossOptions(Reduction r = Reduction::mean) : reduction_(r) {}  // NOLINT
  /// mean (default) over every element, sum, or none (the elementwise loss,
  /// input's shape).
  REMORA_ARG(Reduction, reduction);
  /// \fn reduction() const
  /// \copybrief reduction(const Reduction&)

  /// Where the loss turns from quadratic to linear (default 1). It must be > 0 (an
  /// Error at the forward), where torch takes 0 as l1_loss.
  REMORA_ARG(double, beta) = 1.0;
  /// \fn beta() const
  /// \copybrief beta(const double&)
};
/// Options of nn::CrossEntropyLoss and functional::cross_entropy
/// (torch::nn::CrossEntropyLossOptions without weight).
struct CrossEntropyLossOptions {
  /// A target value that counts nothing (default -100).
  REMORA_ARG(int64_t, ignore_index) = -100;
  /// \fn ignore_index() const
  /// \copybrief ignore_index(const int64_t&)

  /// mean (default) over the counted targets, sum, or none (target's shape).
  REMORA_ARG(Reduction, reduction) = Reduction::mean;
  /// \fn reduction() const
  /// \copybrief reduction(const Reduction&)

  /// eps in [0, 1] (default 0; outside is an Error at the forward): the target
  /// becomes (1 - eps) one-hot + eps / C uniform.
  REMORA_ARG(double, label_smoothing) = 0.0;
  /// \fn label_smoothing() const
  /// \copybrief label_smoothing(const double&)
};
/// Options of nn::NLLLoss and functional::nll_loss (torch::nn::NLLLossOptions
/// without weight).
struct NLLLossOptions {
  /// A target value that counts nothing (default -100).
  REMORA_ARG(int64_t, ignore_index) = -100;
  /// \fn ignore_index() const
  /// \copybrief ignore_index(const int64_t&)

  /// mean (default) over the counted targets, sum, or none (target's shape).
  REMORA_ARG(Reduction, reduction) = Reduction::mean;
  /// \fn reduction() const
  /// \copybrief reduction(const Reduction&)
};
/// Options of nn::BCEWithLogitsLoss and functional::binary_cross_entropy_with_logits
/// (torch::nn::BCEWithLogitsLossOptions without weight or pos_weight).
struct BCEWithLogitsLossOptions {
  /// Implicit from a Reduction, as torch's; mean by default.
  BCEWithLogitsLossOptions(Reduction r = Reduction::mean) : reduction_(r) {}  // NOLINT
  /// mean (default) over every element, sum, or none (the elementwise loss).
  REMORA_ARG(Reduction, reduction);
  /// \fn reduction() const
  /// \copybrief reduction(const Reduction&)
};

/// "mean", "sum" or "none": how extra_repr prints a Reduction.
std::string reduction_name(Reduction r);

/// mse_loss(input, target): (x - y)^2, reduced.
class MSELoss : public Module {
 public:
  /// The reduction from o (default mean).
  explicit MSELoss(const MSELossOptions& o = {}) : options(o) {}
  std::string type_name() const override { return "MSELoss"; }
  std::string extra_repr() const override { return "reduction=" + reduction_name(options.reduction()); }
  /// input and target of one shape and floating dtype (an Error otherwise) -> the
  /// loss reduced by options.reduction(). Gradient to input and target.
  Tensor forward(const Tensor& input, const Tensor& target) const {
    return mse_loss(input, target, options.reduction());
  }
  /// An empty loss (torch's `MSELoss{nullptr}`), holding no state until one is
  /// assigned to it.
  REMORA_LAYER_HANDLE(MSELoss)
  /// \fn operator->()
  /// This loss, for torch's holder spelling `m->forward(...)`.

  /// \fn operator->() const
  /// This loss, for torch's holder spelling `m->forward(...)`.

  /// \fn ptr() const
  /// A new shared_ptr to a copy of this loss, sharing its state.

  /// \fn operator()(Args&&... args) const
  /// forward(args...), torch's call spelling.

  /// The options, read at each forward.
  MSELossOptions options;
};

/// l1_loss(input, target): |x - y|, reduced.
class L1Loss : public Module {
 public:
  /// The reduction from o (default mean).
  explicit L1Loss(const L1LossOptions& o = {}) : options(o) {}
  std::string type_name() const override { return "L1Loss"; }
  std::string extra_repr() const override { return "reduction=" + reduction_name(options.reduction()); }
  /// input and target of one shape and floating dtype (an Error otherwise) -> the
  /// loss reduced by options.reduction(). Gradient to input and target.
  Tensor forward(const Tensor& input, const Tensor& target) const {
    return l1_loss(input, target, options.reduction());
  }
  /// An empty loss (torch's `L1Loss{nullptr}`), holding no state until one is
  /// assigned to it.
  REMORA_LAYER_HANDLE(L1Loss)
  /// \fn operator->()
  /// This loss, for torch's holder spelling `m->forward(...)`.

  /// \fn operator->() const
  /// This loss, for torch's holder spelling `m->forward(...)`.

  /// \fn ptr() const
  /// A new shared_ptr to a copy of this loss, sharing its state.

  /// \fn operator()(Args&&... args) const
  /// forward(args...), torch's call spelling.

  /// The options, read at each forward.
  L1LossOptions options;
};

/// smooth_l1_loss(input, target, reduction, beta).
class SmoothL1Loss : public Module {
 public:
  /// The reduction and beta from o (default mean, beta 1).
  explicit SmoothL1Loss(const SmoothL1LossOptions& o = {}) : options(o) {}
  std::string type_name() const override { return "SmoothL1Loss"; }
  std::string extra_repr() const override;
  /// input and target of one shape and floating dtype (an Error otherwise) -> the
  /// loss reduced by options.reduction(). Gradient to input and target.
  Tensor forward(const Tensor& input, const Tensor& target) const {
    return smooth_l1_loss(input, target, options.reduction(), options.beta());
  }
  /// An empty loss (torch's `SmoothL1Loss{nullptr}`), holding no state until one is
  /// assigned to it.
  REMORA_LAYER_HANDLE(SmoothL1Loss)
  /// \fn operator->()
  /// This loss, for torch's holder spelling `m->forward(...)`.

  /// \fn operator->() const
  /// This loss, for torch's holder spelling `m->forward(...)`.

  /// \fn ptr() const
  /// A new shared_ptr to a copy of this loss, sharing its state.

  /// \fn operator()(Args&&... args) const
  /// forward(args...), torch's call spelling.

  /// The options, read at each forward.
  SmoothL1LossOptions options;
};

/// cross_entropy(logits [..., C], target i64 [...]) with ignore_index and label smoothing.
class CrossEntropyLoss : public Module {
 public:
  /// ignore_index, reduction and label_smoothing from o (defaults -100, mean, 0).
  explicit CrossEntropyLoss(const CrossEntropyLossOptions& o = {}) : options(o) {}
  std::string type_name() const override { return "CrossEntropyLoss"; }
  std::string extra_repr() const override;
  /// input logits [..., C], target i64 [...] holding classes in [0, C) or
  /// ignore_index (another value is an Error; on CUDA at the next sync) -> the loss
  /// reduced by options.reduction(). A mean over no counted target is NaN without
  /// label smoothing (as torch) and 0 with it. Gradient to input.
  Tensor forward(const Tensor& input, const Tensor& target) const {
    return cross_entropy(input, target, options.ignore_index(), options.reduction(), options.label_smoothing());
  }
  /// An empty loss (torch's `CrossEntropyLoss{nullptr}`), holding no state until one is
  /// assigned to it.
  REMORA_LAYER_HANDLE(CrossEntropyLoss)
  /// \fn operator->()
  /// This loss, for torch's holder spelling `m->forward(...)`.

  /// \fn operator->() const
  /// This loss, for torch's holder spelling `m->forward(...)`.

  /// \fn ptr() const
  /// A new shared_ptr to a copy of this loss, sharing its state.

  /// \fn operator()(Args&&... args) const
  /// forward(args...), torch's call spelling.

  /// The options, read at each forward.
  CrossEntropyLossOptions options;
};

/// nll_loss(log_probs [..., C], target i64 [...]) with ignore_index.
class NLLLoss : public Module {
 public:
  /// ignore_index and reduction from o (defaults -100, mean).
  explicit NLLLoss(const NLLLossOptions& o = {}) : options(o) {}
  std::string type_name() const override { return "NLLLoss"; }
  std::string extra_repr() const override;
  /// input log-probabilities [..., C], target i64 [...] holding classes in [0, C)
  /// or ignore_index (another value is an Error where the target is on the CPU) ->
  /// -input[..., target] reduced by options.reduction(); a mean over no counted
  /// target is 0. Gradient to input.
  Tensor forward(const Tensor& input, const Tensor& target) const {
    return nll_loss(input, target, options.ignore_index(), options.reduction());
  }
  /// An empty loss (torch's `NLLLoss{nullptr}`), holding no state until one is
  /// assigned to it.
  REMORA_LAYER_HANDLE(NLLLoss)
  /// \fn operator->()
  /// This loss, for torch's holder spelling `m->forward(...)`.

  /// \fn operator->() const
  /// This loss, for torch's holder spelling `m->forward(...)`.

  /// \fn ptr() const
  /// A new shared_ptr to a copy of this loss, sharing its state.

  /// \fn operator()(Args&&... args) const
  /// forward(args...), torch's call spelling.

  /// The options, read at each forward.
  NLLLossOptions options;
};

/// binary_cross_entropy_with_logits(logits, targets) (targets: probabilities of logits' shape).
class BCEWithLogitsLoss : public Module {
 public:
  /// The reduction from o (default mean).
  explicit BCEWithLogitsLoss(const BCEWithLogitsLossOptions& o = {}) : options(o) {}
  std::string type_name() const override { return "BCEWithLogitsLoss"; }
  std::string extra_repr() const override { return "reduction=" + reduction_name(options.reduction()); }
  /// input logits and target probabilities of one shape and floating dtype ->
  /// relu(x) - x * y + log(1 + exp(-|x|)) reduced by options.reduction() (mean over
  /// every element). Gradient to input and target.
  Tensor forward(const Tensor& input, const Tensor& target) const {
    return binary_cross_entropy_with_logits(input, target, Tensor(), options.reduction());
  }
  /// An empty loss (torch's `BCEWithLogitsLoss{nullptr}`), holding no state until one is
  /// assigned to it.
  REMORA_LAYER_HANDLE(BCEWithLogitsLoss)
  /// \fn operator->()
  /// This loss, for torch's holder spelling `m->forward(...)`.

  /// \fn operator->() const
  /// This loss, for torch's holder spelling `m->forward(...)`.

  /// \fn ptr() const
  /// A new shared_ptr to a copy of this loss, sharing its state.

  /// \fn operator()(Args&&... args) const
  /// forward(args...), torch's call spelling.

  /// The options, read at each forward.
  BCEWithLogitsLossOptions options;
};

}  // namespace nn
}  // namespace remora
