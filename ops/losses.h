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

}  // namespace remora
