// SPDX-License-Identifier: BSD-3-Clause
// Strided-memory helpers shared by core and ops (core/strided.h).
#include "strided.h"

#include <algorithm>

namespace remora {
namespace detail {

int64_t wrap_dim(const char* op, int64_t dim, int64_t ndim) {
  const int64_t n = std::max<int64_t>(ndim, 1);
  REMORA_CHECK(dim >= -n && dim < n, op << ": dim " << dim << " is out of range for a tensor with "
                                        << ndim << " dims (expected " << -n << " ... " << n - 1
                                        << ")");
  return dim < 0 ? dim + n : dim;
}

Shape broadcast_shapes(const char* op, const Shape& a, const Shape& b) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    REMORA_CHECK(da == db || da == 1 || db == 1,
                 op << ": shapes " << shape_str(a) << " and " << shape_str(b)
                    << " cannot be broadcast (dim " << i << ": " << da << " vs " << db
                    << "); sizes must match or be 1");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Shape broadcast_strides(const Tensor& t, const Shape& shape) {
  const Shape& s = t.shape();
  const Shape& st = t.strides();
  Shape out(shape.size(), 0);
  const size_t lead = shape.size() - s.size();
  for (size_t i = 0; i < s.size(); ++i) out[lead + i] = s[i] == 1 ? 0 : st[i];
  return out;
}

ElemIter make_iter(const Tensor& out, const std::vector<Tensor>& ins) {
  const Shape& shape = out.shape();
  const int nops = int(ins.size()) + 1;
  std::vector<Shape> st(static_cast<size_t>(nops));
  st[0] = out.strides();
  for (int k = 1; k < nops; ++k) st[size_t(k)] = broadcast_strides(ins[size_t(k - 1)], shape);
  ElemIter it;
  // Walk dims left to right, dropping size-1 dims and merging dim d into the
  // previous kept dim p when stride_p == stride_d * size_d for every operand.
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (it.ndim > 0) {
      const int p = it.ndim - 1;
      bool merge = true;
      for (int k = 0; k < nops; ++k)
        merge = merge && it.strides[k][p] == st[size_t(k)][d] * shape[d];
      if (merge) {
        it.shape[p] *= shape[d];
        for (int k = 0; k < nops; ++k) it.strides[k][p] = st[size_t(k)][d];
        continue;
      }
    }
    const int q = it.ndim++;
    it.shape[q] = shape[d];
    for (int k = 0; k < nops; ++k) it.strides[k][q] = st[size_t(k)][d];
  }
  if (shape_numel(shape) == 0) {  // keep a zero-size dim so nothing runs
    it.ndim = 1;
    it.shape[0] = 0;
  }
  return it;
}

void check_defined(const char* op, const Tensor& t, const char* arg) {
  REMORA_CHECK(t.defined(), op << ": argument '" << arg << "' is an undefined tensor");
}

void check_same_device(const char* op, const Tensor& a, const Tensor& b) {
  REMORA_CHECK(a.device() == b.device(),
               op << ": tensors are on different devices (" << a.device().str() << " and "
                  << b.device().str() << "); move one with .to(Device::...)");
}

void check_same(const char* op, const Tensor& a, const Tensor& b) {
  check_same_device(op, a, b);
  REMORA_CHECK(a.dtype() == b.dtype(),
               op << ": dtypes differ (" << dtype_name(a.dtype()) << shape_str(a.shape())
                  << " and " << dtype_name(b.dtype()) << shape_str(b.shape())
                  << "); convert one with .to(DType::" << dtype_name(a.dtype()) << ")");
}

void copy_into(const Tensor& dst, const Tensor& src) {
  check_same_device("copy_", dst, src);
  broadcast_shapes("copy_", dst.shape(), src.shape());
  REMORA_CHECK(src.dim() <= dst.dim() &&
                   broadcast_shapes("copy_", dst.shape(), src.shape()) == dst.shape(),
               "copy_: source " << shape_str(src.shape()) << " does not broadcast to destination "
                                << shape_str(dst.shape()));
  ElemIter it = make_iter(dst, {src});
  CopyArgs c;
  c.it = it;
  c.dt_out = dst.dtype();
  c.out = dst.raw_data();
  c.dt_in = src.dtype();
  c.in = src.raw_data();
  backend(dst.device()).copy(c);
}

Tensor binary_raw(BinaryOp op, const Tensor& a, const Tensor& b) {
  static const char* names[] = {"add", "sub", "mul", "div", "maximum", "minimum",
                                "eq",  "ne",  "lt",  "le",  "gt",      "ge"};
  const char* name = names[int(op)];
  check_defined(name, a, "a");
  check_defined(name, b, "b");
  check_same(name, a, b);
  Tensor out = make_tensor(broadcast_shapes(name, a.shape(), b.shape()), a.dtype(), a.device());
  ElemIter it = make_iter(out, {a, b});
  BinaryArgs ba;
  ba.op = op;
  ba.dt = a.dtype();
  ba.it = it;
  ba.out = out.raw_data();
  ba.a = a.raw_data();
  ba.b = b.raw_data();
  backend(a.device()).binary(ba);
  return out;
}

}  // namespace detail
}  // namespace remora
