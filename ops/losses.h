// SPDX-License-Identifier: BSD-3-Clause
// Losses built from other ops (so their backward comes for free and runs on
// every backend).
#pragma once
#include "../core/tensor.h"
#include "ops.h"

namespace remora {

// Multi-label / k-hot loss. logits and targets [...] (same shape and float
// dtype); mask (optional) broadcasts to logits, nonzero = counted, e.g. a
// position mask [B, L, 1] for logits [B, L, K].
//   loss = relu(x) - x * y + log(1 + exp(-|x|))   (stable for any x)
// mean divides by the number of counted elements (mask broadcast to logits;
// all of them without a mask), 0 when none is counted.
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& targets,
                                        const Tensor& mask = Tensor(),
                                        Reduction reduction = Reduction::mean);

// torch's spellings of the reductions (torch::kMean, ...).
constexpr Reduction kMean = Reduction::mean;
constexpr Reduction kSum = Reduction::sum;
constexpr Reduction kNone = Reduction::none;

// The regression losses, elementwise over input and target of one shape and
// float dtype (gradients flow to both), then reduced: mean over every element,
// sum, or none (the elementwise loss, input's shape).
//   mse_loss:       (x - y)^2
//   l1_loss:        |x - y|                       (gradient 0 where x == y)
//   smooth_l1_loss: 0.5 (x - y)^2 / beta where |x - y| < beta, else |x - y| - 0.5 beta
//                   (torch's Huber-like form; beta > 0)
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::mean);
Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::mean);
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::mean,
                      double beta = 1.0);

// Negative log-likelihood of log-probabilities log_probs [..., C] (classes on
// the LAST dim) at the classes target i64 [...]: -log_probs[..., target]. A
// target equal to ignore_index counts nothing; mean divides by the number of
// counted targets (0 when none is counted). A target outside [0, C) that is
// not ignore_index is an Error (checked where the target is on the CPU).
Tensor nll_loss(const Tensor& log_probs, const Tensor& target, int64_t ignore_index = -100,
                Reduction reduction = Reduction::mean);

// cross_entropy (ops/ops.h) with label smoothing eps in [0, 1], torch's formula:
//   loss_i = (1 - eps) * nll_i + eps / C * sum_c (-log_softmax(logits_i)_c)
// over the targets that are not ignore_index; mean divides by their number.
// eps = 0 is cross_entropy itself.
Tensor cross_entropy(const Tensor& logits, const Tensor& target, int64_t ignore_index, Reduction reduction,
                     double label_smoothing);

}  // namespace remora
