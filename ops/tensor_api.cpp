// SPDX-License-Identifier: BSD-3-Clause
// Tensor's libtorch-style method forms and in-place updates (declared in
// core/tensor.h), forwarding to the ops of ops/ops.h.
#include "internal.h"

namespace remora {

using namespace detail;

namespace {
void check_inplace_target(const char* op, const Tensor& t) {
  check_defined(op, t, "self");
  REMORA_CHECK(!(GradMode::is_enabled() && t.requires_grad()),
               op << ": in-place change of a tensor that requires grad (" << t.str()
                  << ") would corrupt autograd; wrap it in NoGradGuard or use the out-of-place op");
}
// Runs the out-of-place op without history and writes the result into self.
template <typename F>
Tensor& inplace(const char* op, Tensor& self, F f) {
  check_inplace_target(op, self);
  Tensor r;
  {
    NoGradGuard ng;
    r = f();
  }
  REMORA_CHECK(r.shape() == self.shape(), op << ": the result " << shape_str(r.shape())
                                             << " does not fit self " << shape_str(self.shape()));
  return self.copy_(r);
}
Shape list(std::initializer_list<int64_t> dims) { return Shape(dims.begin(), dims.end()); }
}  // namespace

// ---- reductions ----
Tensor Tensor::sum(int64_t d, bool keepdim) const { return ::remora::sum(*this, Shape{d}, keepdim); }
Tensor Tensor::sum(std::initializer_list<int64_t> d, bool keepdim) const { return ::remora::sum(*this, list(d), keepdim); }
Tensor Tensor::mean(int64_t d, bool keepdim) const { return ::remora::mean(*this, Shape{d}, keepdim); }
Tensor Tensor::mean(std::initializer_list<int64_t> d, bool keepdim) const { return ::remora::mean(*this, list(d), keepdim); }
std::tuple<Tensor, Tensor> Tensor::max(int64_t d, bool keepdim) const { return max_with_indices(*this, d, keepdim); }
std::tuple<Tensor, Tensor> Tensor::min(int64_t d, bool keepdim) const { return min_with_indices(*this, d, keepdim); }
Tensor Tensor::argmax() const { return ::remora::argmax(reshape({-1}), 0); }
Tensor Tensor::argmin() const { return ::remora::argmin(reshape({-1}), 0); }
Tensor Tensor::var(bool unbiased) const { return ::remora::var(*this, {}, unbiased); }
Tensor Tensor::var(const Shape& dims, bool unbiased, bool keepdim) const {
  return ::remora::var(*this, dims, unbiased, keepdim);
}
Tensor Tensor::std(bool unbiased) const { return ::remora::sqrt(::remora::var(*this, {}, unbiased)); }
Tensor Tensor::std(const Shape& dims, bool unbiased, bool keepdim) const {
  return ::remora::sqrt(::remora::var(*this, dims, unbiased, keepdim));
}
Tensor Tensor::argsort(int64_t d, bool descending) const { return std::get<1>(::remora::sort(*this, d, descending)); }

bool Tensor::allclose(const Tensor& other, double rtol, double atol) const {
  check_defined("allclose", *this, "self");
  check_defined("allclose", other, "other");
  const Shape s = broadcast_shapes("allclose", shape(), other.shape());
  const std::vector<double> a = detach().expand(s).to_vector(), b = other.detach().expand(s).to_vector();
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] == b[i]) continue;  // equal infinities too
    if (!(std::fabs(a[i] - b[i]) <= atol + rtol * std::fabs(b[i]))) return false;  // NaN: not close
  }
  return true;
}
bool Tensor::equal(const Tensor& other) const {
  check_defined("equal", *this, "self");
  check_defined("equal", other, "other");
  return shape() == other.shape() && to_vector() == other.to_vector();
}

// ---- indexing and selection ----
Tensor Tensor::masked_fill(const Tensor& mask, const Tensor& v) const {
  check_defined("masked_fill", v, "value");
  REMORA_CHECK(v.numel() == 1, "masked_fill: the value must have one element, got " << shape_str(v.shape()));
  return ::remora::where(mask, v.to(dtype()).reshape({}), *this);
}
Tensor Tensor::where(const Tensor& cond, const Tensor& other) const { return ::remora::where(cond, *this, other); }
Tensor Tensor::nonzero() const {
  check_defined("nonzero", *this, "self");
  const std::vector<double> v = to_vector();
  std::vector<int64_t> out;
  const Shape st = contiguous_strides(shape());
  int64_t count = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] == 0) continue;
    ++count;
    int64_t r = int64_t(i);
    for (size_t d = 0; d < st.size(); ++d) {
      out.push_back(st[d] ? r / st[d] : 0);
      r = st[d] ? r % st[d] : r;
    }
  }
  if (count == 0 || dim() == 0) return Tensor::zeros({count, dim()}, DType::i64, device());
  return Tensor::from_vector(out, {count, dim()}, DType::i64, device());
}
Tensor Tensor::squeeze() const {
  Shape s;
  for (int64_t d : shape())
    if (d != 1) s.push_back(d);
  return s.size() == shape().size() ? *this : reshape(s);
}

// ---- elementwise ----
Tensor Tensor::square() const { return ::remora::mul(*this, *this); }
bool Tensor::any() const {
  for (double v : to_vector())
    if (v != 0) return true;
  return false;
}
bool Tensor::all() const {
  for (double v : to_vector())
    if (v == 0) return false;
  return true;
}
Tensor Tensor::eq(const Tensor& o) const { return eq_mask(*this, o); }
Tensor Tensor::ne(const Tensor& o) const { return ne_mask(*this, o); }
Tensor Tensor::lt(const Tensor& o) const { return lt_mask(*this, o); }
Tensor Tensor::le(const Tensor& o) const { return le_mask(*this, o); }
Tensor Tensor::gt(const Tensor& o) const { return gt_mask(*this, o); }
Tensor Tensor::ge(const Tensor& o) const { return ge_mask(*this, o); }
Tensor Tensor::add(const Tensor& o, double alpha) const {
  return alpha == 1 ? ::remora::add(*this, o) : ::remora::add(*this, affine(o, alpha, 0));
}
Tensor Tensor::sub(const Tensor& o, double alpha) const {
  return alpha == 1 ? ::remora::sub(*this, o) : ::remora::sub(*this, affine(o, alpha, 0));
}

// ---- in place (no autograd) ----
Tensor& Tensor::add_(double s) {
  return inplace("add_", *this, [&] { return affine(*this, 1, s); });
}
Tensor& Tensor::sub_(const Tensor& other, double alpha) { return add_(other, -alpha); }
Tensor& Tensor::sub_(double s) {
  return inplace("sub_", *this, [&] { return affine(*this, 1, -s); });
}
Tensor& Tensor::mul_(const Tensor& other) {
  return inplace("mul_", *this, [&] { return ::remora::mul(*this, other.to(dtype())); });
}
Tensor& Tensor::div_(const Tensor& other) {
  return inplace("div_", *this, [&] { return ::remora::div(*this, other.to(dtype())); });
}
Tensor& Tensor::div_(double s) {
  REMORA_CHECK(is_floating(dtype()), "div_: a scalar division needs a floating tensor, got " << dtype_name(dtype()));
  return mul_(1.0 / s);
}
Tensor& Tensor::fill_(const Tensor& value) {
  check_defined("fill_", value, "value");
  REMORA_CHECK(value.numel() == 1, "fill_: the value must have one element, got " << shape_str(value.shape()));
  return fill_(value.item());
}
Tensor& Tensor::masked_fill_(const Tensor& mask, double value) {
  return inplace("masked_fill_", *this, [&] { return ::remora::masked_fill(*this, mask, value); });
}

}  // namespace remora
