// SPDX-License-Identifier: BSD-3-Clause
// Reductions and orderings beyond sum / mean / max: argmin, max and min with
// their indices, cumsum, norm, var, topk and sort.
#include <algorithm>
#include <numeric>

#include "internal.h"

namespace remora {

using namespace detail;

std::tuple<Tensor, Tensor> max_with_indices(const Tensor& x, int64_t dim, bool keepdim) {
  Tensor values = max(x, dim, keepdim);
  return {values, argmax(x, dim, keepdim)};
}

std::tuple<Tensor, Tensor> min_with_indices(const Tensor& x, int64_t dim, bool keepdim) {
  Tensor values = min(x, dim, keepdim);
  return {values, argmin(x, dim, keepdim)};
}

Tensor argmin(const Tensor& x, int64_t dim, bool keepdim) {
  check_defined("argmin", x, "x");
  NoGradGuard ng;
  Tensor xd = x.detach();
  if (!is_floating(xd.dtype())) xd = xd.to(DType::i64);
  return argmax(neg(xd), dim, keepdim);  // the first minimum is the first maximum of -x
}

namespace {
// The scan kernel along dim d (reverse: from the end); its gradient is the
// scan of the gradient in the other direction.
Tensor cumsum_along(const Tensor& x, int64_t d, bool reverse) {
  Tensor out;
  {
    NoGradGuard ng;
    Tensor xc = x.detach().contiguous();
    out = Tensor::empty(x.shape(), x.dtype(), x.device());
    CumsumArgs a;
    a.dt = x.dtype();
    a.n = x.shape()[size_t(d)];
    for (int64_t i = 0; i < d; ++i) a.outer *= x.shape()[size_t(i)];
    for (int64_t i = d + 1; i < x.dim(); ++i) a.inner *= x.shape()[size_t(i)];
    a.reverse = reverse;
    a.src = xc.raw_data();
    a.dst = out.raw_data();
    if (x.numel() > 0) backend(x.device()).cumsum(a);
  }
  return record("cumsum", {x}, out, [d, reverse](std::vector<Tensor>& g) {
    return std::vector<Tensor>{cumsum_along(g[0], d, !reverse)};
  });
}
}  // namespace

Tensor cumsum(const Tensor& x, int64_t dim) {
  check_defined("cumsum", x, "x");
  if (x.dim() == 0) return is_floating(x.dtype()) ? x.clone() : x.to(DType::i64);
  const int64_t d = wrap_dim("cumsum", dim, x.dim());
  // Integers and bools sum in i64, as torch; 16-bit floats in f32, rounded once.
  if (!is_floating(x.dtype())) return cumsum_along(x.to(DType::i64), d, false);
  if (is_half(x.dtype())) return cumsum_along(x.to(DType::f32), d, false).to(x.dtype());
  return cumsum_along(x, d, false);
}

Tensor norm(const Tensor& x, double p, const Shape& dims, bool keepdim) {
  check_defined("norm", x, "x");
  check_floating("norm", x);
  REMORA_CHECK(p > 0, "norm: p must be positive, got " << p);
  if (p == 1) return sum(abs(x), dims, keepdim);
  // s^(1/p) where s > 0, else 0 with a zero gradient (torch's subgradient at
  // 0; the plain form gives 0 * inf = NaN there).
  const Tensor s = p == 2 ? sum(mul(x, x), dims, keepdim) : sum(pow(abs(x), p), dims, keepdim);
  const Tensor zero = Tensor::scalar(0.0, s.dtype(), s.device());
  const Tensor pos = gt(s, zero);
  const Tensor safe = where(pos, s, Tensor::scalar(1.0, s.dtype(), s.device()));
  return where(pos, p == 2 ? sqrt(safe) : pow(safe, 1.0 / p), zero);
}

Tensor var(const Tensor& x, const Shape& dims, bool unbiased, bool keepdim) {
  check_defined("var", x, "x");
  check_floating("var", x);
  Shape ds = dims;
  if (ds.empty())
    for (int64_t i = 0; i < x.dim(); ++i) ds.push_back(i);
  int64_t count = 1;
  for (int64_t d : ds) count *= x.shape()[size_t(wrap_dim("var", d, x.dim()))];
  Tensor c = sub(x, mean(x, ds, true));
  const double denom = double(count - (unbiased ? 1 : 0));
  return affine(sum(mul(c, c), ds, keepdim), 1.0 / denom, 0);  // 1/0 = inf: NaN as torch for one element
}

namespace {
// The order along dim of every row, on the host: positions of the first k.
Tensor order(const char* op, const Tensor& x, int64_t dim, int64_t k, bool descending) {
  const int64_t d = wrap_dim(op, dim, x.dim());
  const int64_t n = x.dim() ? x.shape()[size_t(d)] : 1;
  REMORA_CHECK(k >= 0 && k <= n, op << ": k = " << k << " is out of range for a dim of size " << n);
  Tensor xt = x.dim() ? x.detach().transpose(d, -1).contiguous() : x.detach().reshape({1});
  const std::vector<double> v = xt.to_vector();
  const int64_t rows = n ? int64_t(v.size()) / n : 0;
  std::vector<int64_t> out(static_cast<size_t>(rows * k));
  std::vector<int64_t> ix(static_cast<size_t>(n));
  for (int64_t r = 0; r < rows; ++r) {
    std::iota(ix.begin(), ix.end(), int64_t(0));
    const double* row = v.data() + r * n;
    auto less = [&](int64_t a, int64_t b) {
      const double va = row[a], vb = row[b];
      // NaN sorts as the largest value, as in torch.
      const bool na = va != va, nb = vb != vb;
      if (na || nb) return descending ? (na && !nb) : (!na && nb);
      return descending ? va > vb : va < vb;
    };
    std::stable_sort(ix.begin(), ix.end(), less);
    std::copy(ix.begin(), ix.begin() + k, out.begin() + r * k);
  }
  Shape s = xt.shape();
  if (x.dim()) s.back() = k;
  Tensor idx = Tensor::from_vector(out, s, DType::i64, x.device());
  return x.dim() ? idx.transpose(d, -1).contiguous() : idx.reshape({});
}
}  // namespace

std::tuple<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim, bool largest, bool sorted) {
  check_defined("topk", x, "x");
  Tensor idx = order("topk", x, dim, k, largest);
  if (x.dim() == 0) return {x.clone(), idx};
  return {gather(x, dim, idx), idx};
}

std::tuple<Tensor, Tensor> sort(const Tensor& x, int64_t dim, bool descending) {
  check_defined("sort", x, "x");
  const int64_t n = x.dim() ? x.shape()[size_t(wrap_dim("sort", dim, x.dim()))] : 1;
  Tensor idx = order("sort", x, dim, n, descending);
  if (x.dim() == 0) return {x.clone(), idx};
  return {gather(x, dim, idx), idx};
}

}  // namespace remora
