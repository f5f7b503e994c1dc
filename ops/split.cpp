// SPDX-License-Identifier: BSD-3-Clause
// unbind, split, split_with_sizes: one tensor into many under ONE autograd node,
// so the backward is one stack / cat instead of a full-size gradient per part
// (the recurrent layers take their time steps and LSTM gates this way).
#include <algorithm>

#include "../core/autograd.h"
#include "internal.h"

namespace remora {

using namespace detail;

std::vector<Tensor> unbind(const Tensor& x, int64_t dim) {
  check_defined("unbind", x, "x");
  REMORA_CHECK(x.dim() >= 1, "unbind: x must have at least one dim, got " << x.str());
  const int64_t d = wrap_dim("unbind", dim, x.dim());
  const int64_t n = x.size(d);
  std::vector<Tensor> parts;
  {
    NoGradGuard ng;
    Tensor xd = x.contiguous().detach();
    for (int64_t i = 0; i < n; ++i) parts.push_back(xd.select(d, i));
  }
  Shape part_shape = x.shape();
  part_shape.erase(part_shape.begin() + d);
  const DType dt = x.dtype();
  const Device dev = x.device();
  return record("unbind", {x}, parts, [n, d, part_shape, dt, dev](std::vector<Tensor>& g) {
    std::vector<Tensor> gs;
    for (int64_t i = 0; i < n; ++i)
      gs.push_back(g[size_t(i)].defined() ? g[size_t(i)] : Tensor::zeros(part_shape, dt, dev));
    return std::vector<Tensor>{stack(gs, d)};
  });
}

std::vector<Tensor> split_with_sizes(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim) {
  check_defined("split", x, "x");
  REMORA_CHECK(x.dim() >= 1, "split: x must have at least one dim, got " << x.str());
  const int64_t d = wrap_dim("split", dim, x.dim());
  int64_t total = 0;
  for (int64_t s : sizes) {
    REMORA_CHECK(s >= 0, "split: every size must be >= 0, got " << s);
    total += s;
  }
  REMORA_CHECK(!sizes.empty() && total == x.size(d),
               "split: sizes add up to " << total << " but dim " << d << " of " << x.str() << " has "
                                         << x.size(d));
  std::vector<Tensor> parts;
  {
    NoGradGuard ng;
    Tensor xd = x.detach();
    int64_t off = 0;
    for (int64_t s : sizes) {
      parts.push_back(xd.slice(d, off, off + s).clone());
      off += s;
    }
  }
  std::vector<Shape> shapes;
  for (const Tensor& p : parts) shapes.push_back(p.shape());
  const DType dt = x.dtype();
  const Device dev = x.device();
  return record("split", {x}, parts, [d, shapes, dt, dev](std::vector<Tensor>& g) {
    std::vector<Tensor> gs;
    for (size_t i = 0; i < shapes.size(); ++i)
      gs.push_back(g[i].defined() ? g[i] : Tensor::zeros(shapes[i], dt, dev));
    return std::vector<Tensor>{cat(gs, d)};
  });
}

std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  check_defined("split", x, "x");
  REMORA_CHECK(x.dim() >= 1, "split: x must have at least one dim, got " << x.str());
  REMORA_CHECK(split_size >= 1, "split: split_size must be >= 1, got " << split_size);
  const int64_t n = x.size(wrap_dim("split", dim, x.dim()));
  std::vector<int64_t> sizes;
  for (int64_t s = 0; s < n; s += split_size) sizes.push_back(std::min(split_size, n - s));
  if (n == 0) sizes.push_back(0);  // one empty part, as torch
  return split_with_sizes(x, sizes, dim);
}

}  // namespace remora
