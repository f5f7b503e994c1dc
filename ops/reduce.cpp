// SPDX-License-Identifier: BSD-3-Clause
// Reductions: sum, mean, max/min/argmax over dims, and sum_to for broadcasts.
#include <algorithm>

#include "internal.h"

namespace remora {

using namespace detail;

namespace {

// Sorted, unique, wrapped dims; {} means every dim.
std::vector<int64_t> norm_dims(const char* op, const Tensor& x, const Shape& dims) {
  std::vector<int64_t> d;
  if (dims.empty()) {
    for (int64_t i = 0; i < x.dim(); ++i) d.push_back(i);
    return d;
  }
  for (int64_t v : dims) d.push_back(wrap_dim(op, v, x.dim()));
  std::sort(d.begin(), d.end());
  REMORA_CHECK(std::adjacent_find(d.begin(), d.end()) == d.end(),
               op << ": dim listed twice in " << shape_str(dims));
  return d;
}

Shape reduced_shape(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  Shape out;
  for (int64_t i = 0; i < x.dim(); ++i) {
    const bool red = std::find(dims.begin(), dims.end(), i) != dims.end();
    if (!red)
      out.push_back(x.shape()[size_t(i)]);
    else if (keepdim)
      out.push_back(1);
  }
  return out;
}

// Runs a reduction kernel over `dims`. A contiguous block of dims reduces in
// place as [outer, r, inner]; otherwise the reduced dims are permuted last.
Tensor reduce_raw(ReduceOp op, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim,
                  Tensor* argidx) {
  const Shape out_shape = reduced_shape(x, dims, keepdim);
  const bool block = dims.empty() || dims.back() - dims.front() + 1 == int64_t(dims.size());
  if (!block && op == ReduceOp::sum && !argidx && x.is_contiguous()) {
    // Dims that are not adjacent (a bias gradient's {0, 2} of [B, H, L, D]):
    // the last run of adjacent dims first, a block reduction of x in place,
    // then the others on that smaller result, instead of a permuted copy of x.
    size_t k = dims.size() - 1;
    while (k > 0 && dims[k - 1] == dims[k] - 1) --k;
    Tensor part = reduce_raw(op, x, std::vector<int64_t>(dims.begin() + int64_t(k), dims.end()), true, nullptr);
    Tensor all = reduce_raw(op, part, std::vector<int64_t>(dims.begin(), dims.begin() + int64_t(k)), true, nullptr);
    return keepdim ? all : all.reshape(out_shape);
  }
  Tensor out = make_tensor(out_shape, x.dtype(), x.device());
  Tensor src = x;
  int64_t outer = 1, r = 1, inner = 1;
  if (block) {
    src = x.contiguous();
    for (int64_t i = 0; i < x.dim(); ++i) {
      const int64_t s = x.shape()[size_t(i)];
      if (!dims.empty() && i < dims.front()) outer *= s;
      else if (!dims.empty() && i > dims.back()) inner *= s;
      else r *= s;
    }
  } else {
    Shape perm;
    for (int64_t i = 0; i < x.dim(); ++i)
      if (std::find(dims.begin(), dims.end(), i) == dims.end()) {
        perm.push_back(i);
        outer *= x.shape()[size_t(i)];
      }
    for (int64_t d : dims) {
      perm.push_back(d);
      r *= x.shape()[size_t(d)];
    }
    NoGradGuard ng;
    src = x.permute(perm).contiguous();
  }
  if (argidx) *argidx = make_tensor(out_shape, DType::i64, x.device());
  if (r == 0) {
    REMORA_CHECK(op == ReduceOp::sum, "max/min: cannot reduce over an empty dim of shape "
                                          << shape_str(x.shape()));
    backend(x.device()).fill(x.dtype(), out.raw_data(), out.numel(), 0);
    return out;
  }
  ReduceArgs ra;
  ra.op = op;
  ra.dt = x.dtype();
  ra.outer = outer;
  ra.r = r;
  ra.inner = inner;
  ra.in = src.raw_data();
  ra.out = out.raw_data();
  ra.argidx = argidx ? argidx->data_ptr<int64_t>() : nullptr;
  backend(x.device()).reduce(ra);
  return out;
}

// g has the reduced shape; returns it broadcast back to x's shape.
Tensor unreduce(const Tensor& g, const Shape& x_shape, const std::vector<int64_t>& dims,
                bool keepdim) {
  Shape kd = x_shape;
  for (int64_t d : dims) kd[size_t(d)] = 1;
  Tensor gk = keepdim ? g : g.reshape(kd);
  return gk.expand(x_shape);
}

Tensor extreme(ReduceOp op, const char* name, const Tensor& x, int64_t dim, bool keepdim,
               Tensor* indices) {
  check_defined(name, x, "x");
  const std::vector<int64_t> dims{wrap_dim(name, dim, x.dim())};
  Tensor idx;
  Tensor out = reduce_raw(op, x, x.dim() ? dims : std::vector<int64_t>{}, keepdim, &idx);
  if (indices) *indices = idx;
  if (!any_requires_grad({x})) return out;
  const Shape xs = x.shape();
  const DType dt = x.dtype();
  return record(name, {x}, out, [idx, xs, dims, keepdim, dt](std::vector<Tensor>& g) {
    if (xs.empty()) return std::vector<Tensor>{g[0]};
    // One-hot along dim at the winning index, times the broadcast gradient.
    const int64_t d = dims[0];
    Shape ar_shape(xs.size(), 1);
    ar_shape[size_t(d)] = xs[size_t(d)];
    Tensor ar = Tensor::arange(xs[size_t(d)], DType::i64, g[0].device()).reshape(ar_shape);
    Tensor ik = keepdim ? idx : idx.unsqueeze(d);
    Tensor onehot = eq(ar, ik).to(dt);
    return std::vector<Tensor>{mul(onehot, unreduce(g[0], xs, dims, keepdim))};
  });
}

}  // namespace

Tensor sum(const Tensor& x, const Shape& dims_in, bool keepdim) {
  check_defined("sum", x, "x");
  // bool, i32 and u8 sum in i64, as torch (no overflow at 255 or 2^31).
  if (x.dtype() == DType::b8 || x.dtype() == DType::i32 || x.dtype() == DType::u8)
    return sum(x.to(DType::i64), dims_in, keepdim);
  const std::vector<int64_t> dims = norm_dims("sum", x, dims_in);
  Tensor out = reduce_raw(ReduceOp::sum, x, dims, keepdim, nullptr);
  const Shape xs = x.shape();
  return record("sum", {x}, out, [xs, dims, keepdim](std::vector<Tensor>& g) {
    return std::vector<Tensor>{unreduce(g[0], xs, dims, keepdim)};
  });
}

Tensor mean(const Tensor& x, const Shape& dims_in, bool keepdim) {
  check_defined("mean", x, "x");
  check_floating("mean", x);
  const std::vector<int64_t> dims = norm_dims("mean", x, dims_in);
  int64_t count = 1;
  for (int64_t d : dims) count *= x.shape()[size_t(d)];
  return affine(sum(x, Shape(dims.begin(), dims.end()), keepdim), 1.0 / double(count), 0);
}

Tensor max(const Tensor& x, int64_t dim, bool keepdim) {
  return extreme(ReduceOp::max, "max", x, dim, keepdim, nullptr);
}
Tensor min(const Tensor& x, int64_t dim, bool keepdim) {
  return extreme(ReduceOp::min, "min", x, dim, keepdim, nullptr);
}
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) {
  NoGradGuard ng;
  Tensor idx;
  extreme(ReduceOp::max, "argmax", x, dim, keepdim, &idx);
  return idx;
}

Tensor sum_to(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  REMORA_CHECK(x.dim() >= int64_t(shape.size()),
               "sum_to: cannot sum " << shape_str(x.shape()) << " to " << shape_str(shape));
  const size_t lead = size_t(x.dim()) - shape.size();
  Shape dims;
  for (size_t i = 0; i < size_t(x.dim()); ++i) {
    if (i < lead) {
      dims.push_back(int64_t(i));
    } else if (shape[i - lead] == 1 && x.shape()[i] != 1) {
      dims.push_back(int64_t(i));
    } else {
      REMORA_CHECK(shape[i - lead] == x.shape()[i],
                   "sum_to: cannot sum " << shape_str(x.shape()) << " to " << shape_str(shape));
    }
  }
  Tensor s = dims.empty() ? x : sum(x, dims, true);
  return s.reshape(shape);
}

}  // namespace remora
