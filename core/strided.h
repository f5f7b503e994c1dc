// SPDX-License-Identifier: BSD-3-Clause
// Strided-memory helpers shared by core and ops (not part of the public API):
// dim wrapping, broadcasting, the elementwise iteration handed to Backend
// kernels, argument checks, the raw copy / binary kernels without autograd,
// and the view-with-history builder. core uses them for its views, copies and
// the backward engine's gradient sums; ops/internal.h re-exports them to ops.
#pragma once
#include <vector>

#include "../backends/backend.h"
#include "autograd.h"
#include "tensor_impl.h"

namespace remora {
namespace detail {

// Wraps a negative dim; errors name the op and the shape.
int64_t wrap_dim(const char* op, int64_t dim, int64_t ndim);
// NumPy broadcasting of two shapes; errors name the op and both shapes.
Shape broadcast_shapes(const char* op, const Shape& a, const Shape& b);
// Strides of t seen as `shape` (0 on broadcast dims).
Shape broadcast_strides(const Tensor& t, const Shape& shape);
// The iteration for out (operand 0, with its own strides) and inputs broadcast
// to out's shape, with size-1 dims dropped and mergeable dims coalesced.
ElemIter make_iter(const Tensor& out, const std::vector<Tensor>& ins);

void check_same_device(const char* op, const Tensor& a, const Tensor& b);
void check_same(const char* op, const Tensor& a, const Tensor& b);  // dtype and device
void check_defined(const char* op, const Tensor& t, const char* arg);

// Copies src (broadcast, any dtype) into the view dst. No autograd.
void copy_into(const Tensor& dst, const Tensor& src);
// a op b (broadcast, same dtype and device) into a new tensor. No autograd.
Tensor binary_raw(BinaryOp op, const Tensor& a, const Tensor& b);

// A view of x with history: the gradient is mapped back by `back`.
template <typename F>
Tensor view_op(const char* name, const Tensor& x, const Shape& shape, const Shape& strides,
               int64_t offset, F back) {
  Tensor v = make_view(x, shape, strides, offset);
  return record(name, {x}, v, [back](std::vector<Tensor>& g) {
    return std::vector<Tensor>{back(g[0])};
  });
}

}  // namespace detail
}  // namespace remora
