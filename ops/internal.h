// Helpers shared by the op implementations (not part of the public API).
#pragma once
#include <vector>

#include "../backends/backend.h"
#include "../backends/kernels.h"
#include "../core/autograd.h"
#include "../core/tensor_impl.h"
#include "ops.h"

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
// Every defined tensor among `ts` on one device; the error lists each operand's
// device by name (names[i] for ts[i]) and says how to move them.
void check_devices(const char* op, const std::vector<Tensor>& ts,
                   const std::vector<const char*>& names);
void check_same(const char* op, const Tensor& a, const Tensor& b);  // dtype and device
void check_floating(const char* op, const Tensor& t);
void check_defined(const char* op, const Tensor& t, const char* arg);

// Copies src (broadcast, any dtype) into the view dst. No autograd.
void copy_into(const Tensor& dst, const Tensor& src);
// Raw kernels without autograd.
Tensor unary_raw(UnaryOp op, const Tensor& x, double alpha = 0, double beta = 0);
Tensor unary_grad_raw(UnaryGradOp op, const Tensor& g, const Tensor& v, double alpha = 0);
Tensor binary_raw(BinaryOp op, const Tensor& a, const Tensor& b);

}  // namespace detail
}  // namespace remora
