// SPDX-License-Identifier: BSD-3-Clause
// torch::nn::functional's spellings (use as `namespace F = remora::nn::functional;`):
//
//   Tensor loss = F::cross_entropy(logits, target, F::CrossEntropyFuncOptions().label_smoothing(0.1));
//   Tensor l = F::mse_loss(pred, y, F::MSELossFuncOptions(kSum));
//   Tensor h = F::dropout(F::gelu(x), F::DropoutFuncOptions().p(0.1).training(is_training()));
//
// Each forwards to an op of ops/ops.h or ops/losses.h (their gradient checks
// cover these).
#pragma once
#include "../ops/losses.h"
#include "../ops/ops.h"
#include "activation.h"
#include "loss.h"
#include "options.h"

namespace remora {
namespace nn {
namespace functional {

using MSELossFuncOptions = MSELossOptions;
using L1LossFuncOptions = L1LossOptions;
using SmoothL1LossFuncOptions = SmoothL1LossOptions;
using CrossEntropyFuncOptions = CrossEntropyLossOptions;
using NLLLossFuncOptions = NLLLossOptions;
using BinaryCrossEntropyWithLogitsFuncOptions = BCEWithLogitsLossOptions;
using SoftmaxFuncOptions = SoftmaxOptions;
using LogSoftmaxFuncOptions = SoftmaxOptions;
using GELUFuncOptions = GELUOptions;

struct DropoutFuncOptions {
  REMORA_ARG(double, p) = 0.5;
  REMORA_ARG(bool, training) = true;
};

inline Tensor mse_loss(const Tensor& input, const Tensor& target, const MSELossFuncOptions& o = {}) {
  return ::remora::mse_loss(input, target, o.reduction());
}
inline Tensor l1_loss(const Tensor& input, const Tensor& target, const L1LossFuncOptions& o = {}) {
  return ::remora::l1_loss(input, target, o.reduction());
}
inline Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, const SmoothL1LossFuncOptions& o = {}) {
  return ::remora::smooth_l1_loss(input, target, o.reduction(), o.beta());
}
/// logits [..., C] (classes last), target i64 [...].
inline Tensor cross_entropy(const Tensor& input, const Tensor& target, const CrossEntropyFuncOptions& o = {}) {
  return ::remora::cross_entropy(input, target, o.ignore_index(), o.reduction(), o.label_smoothing());
}
inline Tensor nll_loss(const Tensor& input, const Tensor& target, const NLLLossFuncOptions& o = {}) {
  return ::remora::nll_loss(input, target, o.ignore_index(), o.reduction());
}
inline Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                               const BinaryCrossEntropyWithLogitsFuncOptions& o = {}) {
  return ::remora::binary_cross_entropy_with_logits(input, target, Tensor(), o.reduction());
}

inline Tensor relu(const Tensor& x) { return ::remora::relu(x); }
inline Tensor gelu(const Tensor& x, const GELUFuncOptions& o = {}) { return GELU(o).forward(x); }
inline Tensor silu(const Tensor& x) { return ::remora::mul(x, ::remora::sigmoid(x)); }
inline Tensor sigmoid(const Tensor& x) { return ::remora::sigmoid(x); }
inline Tensor tanh(const Tensor& x) { return ::remora::tanh(x); }
inline Tensor leaky_relu(const Tensor& x, const LeakyReLUOptions& o = {}) { return LeakyReLU(o).forward(x); }
inline Tensor softmax(const Tensor& x, const SoftmaxFuncOptions& o) { return ::remora::softmax(x, o.dim()); }
inline Tensor log_softmax(const Tensor& x, const LogSoftmaxFuncOptions& o) {
  return ::remora::log_softmax(x, o.dim());
}
inline Tensor dropout(const Tensor& x, const DropoutFuncOptions& o = {}) {
  return ::remora::dropout(x, o.p(), o.training());
}
inline Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor()) {
  return ::remora::linear(x, weight, bias);
}

}  // namespace functional
}  // namespace nn
}  // namespace remora
