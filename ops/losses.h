// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// Losses built from other ops (so their backward comes for free and runs on
/// every backend). Devices: the CPU and CUDA, every tensor argument on one
/// device. Dtypes: floating inputs (f32, f64; 16-bit where the ops they are
/// built from take it, docs/precision.md). Class targets are i64.
#pragma once
#include "../core/tensor.h"
#include "ops.h"

namespace remora {

/// Multi-label / k-hot loss. logits and targets [...] (same shape and float
/// dtype); mask (optional, any dtype, converted to the logits' dtype)
/// broadcasts to logits, nonzero = counted, e.g. a position mask [B, L, 1]
/// for logits [B, L, K]; its value multiplies the loss.
///   loss = relu(x) - x * y + log(1 + exp(-|x|))   (stable for any x)
/// mean divides by the number of counted elements (mask broadcast to logits;
/// all of them without a mask), 0 when none is counted; none gives the
/// elementwise loss, logits' shape. Gradient to logits and targets.
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& targets,
                                        const Tensor& mask = Tensor(),
                                        Reduction reduction = Reduction::mean);

/// \name libtorch's spellings of the reductions
/// torch::kMean, torch::kSum, torch::kNone.
/// @{

/// Reduction::mean.
constexpr Reduction kMean = Reduction::mean;
/// Reduction::sum.
constexpr Reduction kSum = Reduction::sum;
/// Reduction::none.
constexpr Reduction kNone = Reduction::none;
/// @}

/// \name Regression losses
/// Elementwise over input and target of one shape and float dtype (an Error
/// otherwise; gradients flow to both), then reduced: mean over every element,
/// sum, or none (the elementwise loss, input's shape).
/// @{

/// (x - y)^2.
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::mean);
/// |x - y| (gradient 0 where x == y).
Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::mean);
/// 0.5 (x - y)^2 / beta where |x - y| < beta, else |x - y| - 0.5 beta
/// (torch's Huber-like form); beta > 0, else an Error (beta = 0 is l1_loss).
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::mean,
                      double beta = 1.0);
/// @}

/// Negative log-likelihood of log-probabilities log_probs [..., C] (classes on
/// the LAST dim) at the classes target i64 [...]: -log_probs[..., target]. A
/// target equal to ignore_index counts nothing; mean divides by the number of
/// counted targets (0 when none is counted). A target outside [0, C) that is
/// not ignore_index is an Error (checked where the target is on the CPU).
/// Gradient to log_probs.
Tensor nll_loss(const Tensor& log_probs, const Tensor& target, int64_t ignore_index = -100,
                Reduction reduction = Reduction::mean);

}  // namespace remora
