// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// torch::nn::functional's spellings (use as `namespace F = remora::nn::functional;`):
///
///     Tensor loss = F::cross_entropy(logits, target, F::CrossEntropyFuncOptions().label_smoothing(0.1));
///     Tensor l = F::mse_loss(pred, y, F::MSELossFuncOptions(kSum));
///     Tensor h = F::dropout(F::gelu(x), F::DropoutFuncOptions().p(0.1).training(is_training()));
///
/// Each forwards to an op of ops/ops.h or ops/losses.h (their gradient checks
/// cover these), or to the forward of the module of the same name (activation.h,
/// loss.h): shapes, dtypes, devices and gradients are the op's.
#pragma once
#include "../ops/losses.h"
#include "../ops/ops.h"
#include "activation.h"
#include "loss.h"
#include "options.h"

namespace remora {
namespace nn {
namespace functional {

/// Options of mse_loss: nn::MSELossOptions (the reduction).
using MSELossFuncOptions = MSELossOptions;
/// Options of l1_loss: nn::L1LossOptions (the reduction).
using L1LossFuncOptions = L1LossOptions;
/// Options of smooth_l1_loss: nn::SmoothL1LossOptions (reduction, beta).
using SmoothL1LossFuncOptions = SmoothL1LossOptions;
/// Options of cross_entropy: nn::CrossEntropyLossOptions (ignore_index,
/// reduction, label_smoothing).
using CrossEntropyFuncOptions = CrossEntropyLossOptions;
/// Options of nll_loss: nn::NLLLossOptions (ignore_index, reduction).
using NLLLossFuncOptions = NLLLossOptions;
/// Options of binary_cross_entropy_with_logits: nn::BCEWithLogitsLossOptions
/// (the reduction).
using BinaryCrossEntropyWithLogitsFuncOptions = BCEWithLogitsLossOptions;
/// Options of softmax: nn::SoftmaxOptions (the dim; a plain dim converts).
using SoftmaxFuncOptions = SoftmaxOptions;
/// Options of log_softmax: nn::SoftmaxOptions (the dim; a plain dim converts).
using LogSoftmaxFuncOptions = SoftmaxOptions;
/// Options of gelu: nn::GELUOptions (approximate).
using GELUFuncOptions = GELUOptions;

/// Options of dropout (torch::nn::functional::DropoutFuncOptions without inplace).
struct DropoutFuncOptions {
  /// Probability of zeroing an element, in [0, 1) (default 0.5; outside is an Error).
  REMORA_ARG(double, p) = 0.5;
  /// \fn p() const
  /// \copybrief p(const double&)

  /// Whether to drop (default true, as torch's); false returns x. Pass the
  /// module's is_training().
  REMORA_ARG(bool, training) = true;
  /// \fn training() const
  /// \copybrief training(const bool&)
};

/// (x - y)^2 reduced by o.reduction() (ops/losses.h): input and target of one
/// shape and floating dtype. Gradient to input and target.
inline Tensor mse_loss(const Tensor& input, const Tensor& target, const MSELossFuncOptions& o = {}) {
  return ::remora::mse_loss(input, target, o.reduction());
}
/// |x - y| reduced by o.reduction() (ops/losses.h): input and target of one
/// shape and floating dtype. Gradient to input and target.
inline Tensor l1_loss(const Tensor& input, const Tensor& target, const L1LossFuncOptions& o = {}) {
  return ::remora::l1_loss(input, target, o.reduction());
}
/// smooth_l1_loss with o.reduction() and o.beta() (> 0, else an Error;
/// ops/losses.h). Gradient to input and target.
inline Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, const SmoothL1LossFuncOptions& o = {}) {
  return ::remora::smooth_l1_loss(input, target, o.reduction(), o.beta());
}
/// logits [..., C] (classes last), target i64 [...], with o's ignore_index,
/// reduction and label_smoothing (the op-table row, ops/ops.def). Gradient to input.
inline Tensor cross_entropy(const Tensor& input, const Tensor& target, const CrossEntropyFuncOptions& o = {}) {
  return ::remora::cross_entropy(input, target, o.ignore_index(), o.reduction(), o.label_smoothing());
}
/// log-probabilities [..., C] (classes last), target i64 [...], with o's
/// ignore_index and reduction (ops/losses.h). Gradient to input.
inline Tensor nll_loss(const Tensor& input, const Tensor& target, const NLLLossFuncOptions& o = {}) {
  return ::remora::nll_loss(input, target, o.ignore_index(), o.reduction());
}
/// logits and target probabilities of one shape and floating dtype, reduced by
/// o.reduction() (ops/losses.h; no mask here). Gradient to input and target.
inline Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                               const BinaryCrossEntropyWithLogitsFuncOptions& o = {}) {
  return ::remora::binary_cross_entropy_with_logits(input, target, Tensor(), o.reduction());
}

/// max(x, 0). Gradient to x.
inline Tensor relu(const Tensor& x) { return ::remora::relu(x); }
/// nn::GELU(o).forward(x): exact (default) or, with approximate "tanh", the tanh
/// form; another value is an Error. Gradient to x.
inline Tensor gelu(const Tensor& x, const GELUFuncOptions& o = {}) { return GELU(o).forward(x); }
/// x * sigmoid(x). Gradient to x.
inline Tensor silu(const Tensor& x) { return ::remora::mul(x, ::remora::sigmoid(x)); }
/// 1 / (1 + e^-x). Gradient to x.
inline Tensor sigmoid(const Tensor& x) { return ::remora::sigmoid(x); }
/// tanh(x). Gradient to x.
inline Tensor tanh(const Tensor& x) { return ::remora::tanh(x); }
/// nn::LeakyReLU(o).forward(x): max(x, 0) + negative_slope * min(x, 0).
/// Gradient to x.
inline Tensor leaky_relu(const Tensor& x, const LeakyReLUOptions& o = {}) { return LeakyReLU(o).forward(x); }
/// softmax along o.dim() (required, as in torch; `F::softmax(x, -1)`). Gradient
/// to x.
inline Tensor softmax(const Tensor& x, const SoftmaxFuncOptions& o) { return ::remora::softmax(x, o.dim()); }
/// log(softmax(x)) along o.dim(), computed stably. Gradient to x.
inline Tensor log_softmax(const Tensor& x, const LogSoftmaxFuncOptions& o) {
  return ::remora::log_softmax(x, o.dim());
}
/// Inverted dropout with probability o.p() when o.training(), else x itself;
/// the global generator draws the mask. Gradient to x.
inline Tensor dropout(const Tensor& x, const DropoutFuncOptions& o = {}) {
  return ::remora::dropout(x, o.p(), o.training());
}
/// x [..., in] @ weight[out, in]^T + bias[out] -> [..., out]; bias may be
/// undefined. Gradient to x, weight and bias.
inline Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor()) {
  return ::remora::linear(x, weight, bias);
}

}  // namespace functional
}  // namespace nn
}  // namespace remora
