// SPDX-License-Identifier: BSD-3-Clause
// Helpers shared by the op implementations (not part of the public API); the
// strided helpers ops share with core (wrap_dim, make_iter, copy_into, ...) are
// in core/strided.h.
#pragma once
#include <vector>

#include "../backends/backend.h"
#include "../backends/kernels.h"
#include "../core/autograd.h"
#include "../core/strided.h"
#include "../core/tensor_impl.h"
#include "ops.h"

namespace remora {
namespace detail {

// Every defined tensor among `ts` on one device; the error lists each operand's
// device by name (names[i] for ts[i]) and says how to move them.
void check_devices(const char* op, const std::vector<Tensor>& ts,
                   const std::vector<const char*>& names);
void check_floating(const char* op, const Tensor& t);
// cross_entropy with label_smoothing in (0, 1] (ops/losses.cpp), composed of
// cross_entropy and log_softmax.
Tensor cross_entropy_smoothed(const Tensor& logits, const Tensor& target, int64_t ignore_index,
                              Reduction reduction, double label_smoothing);
// Raw kernels without autograd.
Tensor unary_raw(UnaryOp op, const Tensor& x, double alpha = 0, double beta = 0);
Tensor unary_grad_raw(UnaryGradOp op, const Tensor& g, const Tensor& v, double alpha = 0);

}  // namespace detail
}  // namespace remora
