// SPDX-License-Identifier: BSD-3-Clause
// Comparisons with bool results (the operators ==, <, ... and eq_mask ..
// ge_mask), logical ops, clamp, and the compound-assignment operators.
#include <cmath>

#include "internal.h"

namespace remora {

using namespace detail;

namespace {

// The dtype two operands are compared in: their own when they agree and it is
// f32, f64 or i64 (the dtypes every backend's binary kernel takes); else f64 if
// either is floating, i64 otherwise.
DType common_dtype(const Tensor& a, const Tensor& b) {
  const auto kernel = [](DType t) { return t == DType::f32 || t == DType::f64 || t == DType::i64; };
  if (a.dtype() == b.dtype() && kernel(a.dtype())) return a.dtype();
  return is_floating(a.dtype()) || is_floating(b.dtype()) ? DType::f64 : DType::i64;
}

Tensor compare(BinaryOp op, const char* name, const Tensor& a, const Tensor& b) {
  check_defined(name, a, "a");
  check_defined(name, b, "b");
  check_same_device(name, a, b);
  NoGradGuard ng;
  const DType dt = common_dtype(a, b);
  return binary_raw(op, a.detach().to(dt), b.detach().to(dt)).to(DType::b8);
}

Tensor scalar_like(const Tensor& a, double s) {
  // An integer tensor against a fractional scalar compares in f64 (x < 0.5 on i64).
  const DType dt = is_floating(a.dtype()) || s == std::floor(s) ? a.dtype() : DType::f64;
  return Tensor::scalar(s, dt == DType::b8 || dt == DType::u8 || dt == DType::i32 ? DType::f64 : dt, a.device());
}

// a != 0 as 1/0 in f64 (f64 inputs) or f32: a dtype every backend computes in.
Tensor truth(const char* name, const Tensor& a) {
  check_defined(name, a, "a");
  NoGradGuard ng;
  const DType dt = a.dtype() == DType::f64 ? DType::f64 : DType::f32;
  return binary_raw(BinaryOp::ne, a.detach().to(dt), Tensor::zeros({}, dt, a.device()));
}

}  // namespace

Tensor eq_mask(const Tensor& a, const Tensor& b) { return compare(BinaryOp::eq, "eq", a, b); }
Tensor ne_mask(const Tensor& a, const Tensor& b) { return compare(BinaryOp::ne, "ne", a, b); }
Tensor lt_mask(const Tensor& a, const Tensor& b) { return compare(BinaryOp::lt, "lt", a, b); }
Tensor le_mask(const Tensor& a, const Tensor& b) { return compare(BinaryOp::le, "le", a, b); }
Tensor gt_mask(const Tensor& a, const Tensor& b) { return compare(BinaryOp::gt, "gt", a, b); }
Tensor ge_mask(const Tensor& a, const Tensor& b) { return compare(BinaryOp::ge, "ge", a, b); }

Tensor operator==(const Tensor& a, const Tensor& b) { return eq_mask(a, b); }
Tensor operator!=(const Tensor& a, const Tensor& b) { return ne_mask(a, b); }
Tensor operator<(const Tensor& a, const Tensor& b) { return lt_mask(a, b); }
Tensor operator<=(const Tensor& a, const Tensor& b) { return le_mask(a, b); }
Tensor operator>(const Tensor& a, const Tensor& b) { return gt_mask(a, b); }
Tensor operator>=(const Tensor& a, const Tensor& b) { return ge_mask(a, b); }
Tensor operator==(const Tensor& a, double s) { return eq_mask(a, scalar_like(a, s)); }
Tensor operator!=(const Tensor& a, double s) { return ne_mask(a, scalar_like(a, s)); }
Tensor operator<(const Tensor& a, double s) { return lt_mask(a, scalar_like(a, s)); }
Tensor operator<=(const Tensor& a, double s) { return le_mask(a, scalar_like(a, s)); }
Tensor operator>(const Tensor& a, double s) { return gt_mask(a, scalar_like(a, s)); }
Tensor operator>=(const Tensor& a, double s) { return ge_mask(a, scalar_like(a, s)); }
Tensor operator==(double s, const Tensor& a) { return eq_mask(scalar_like(a, s), a); }
Tensor operator!=(double s, const Tensor& a) { return ne_mask(scalar_like(a, s), a); }
Tensor operator<(double s, const Tensor& a) { return lt_mask(scalar_like(a, s), a); }
Tensor operator<=(double s, const Tensor& a) { return le_mask(scalar_like(a, s), a); }
Tensor operator>(double s, const Tensor& a) { return gt_mask(scalar_like(a, s), a); }
Tensor operator>=(double s, const Tensor& a) { return ge_mask(scalar_like(a, s), a); }

Tensor logical_and(const Tensor& a, const Tensor& b) {
  check_same_device("logical_and", a, b);
  Tensor x = truth("logical_and", a), y = truth("logical_and", b).to(x.dtype());
  return binary_raw(BinaryOp::mul, x, y).to(DType::b8);
}
Tensor logical_or(const Tensor& a, const Tensor& b) {
  check_same_device("logical_or", a, b);
  Tensor x = truth("logical_or", a), y = truth("logical_or", b).to(x.dtype());
  return binary_raw(BinaryOp::maximum, x, y).to(DType::b8);
}
Tensor logical_xor(const Tensor& a, const Tensor& b) {
  check_same_device("logical_xor", a, b);
  Tensor x = truth("logical_xor", a), y = truth("logical_xor", b).to(x.dtype());
  return binary_raw(BinaryOp::ne, x, y).to(DType::b8);
}
Tensor logical_not(const Tensor& a) {
  Tensor x = truth("logical_not", a);
  return binary_raw(BinaryOp::eq, x, Tensor::zeros({}, x.dtype(), x.device())).to(DType::b8);
}
Tensor operator&(const Tensor& a, const Tensor& b) { return logical_and(a, b); }
Tensor operator|(const Tensor& a, const Tensor& b) { return logical_or(a, b); }
Tensor operator^(const Tensor& a, const Tensor& b) { return logical_xor(a, b); }
Tensor operator~(const Tensor& a) {
  REMORA_CHECK(a.defined() && a.dtype() == DType::b8,
               "operator~: defined for bool tensors only (bitwise not of integers is not supported); "
               "use logical_not for a mask of another dtype");
  return logical_not(a);
}
Tensor operator!(const Tensor& a) { return logical_not(a); }

// ---- clamp ----

Tensor clamp(const Tensor& x, std::optional<double> lo, std::optional<double> hi) {
  check_defined("clamp", x, "x");
  REMORA_CHECK(lo || hi, "clamp: give a min, a max or both");
  REMORA_CHECK(x.dtype() != DType::b8, "clamp: not defined for bool tensors");
  const bool needs_grad = any_requires_grad({x});
  Tensor out;
  Tensor keep;  // where the gradient passes: lo <= x <= hi
  {
    NoGradGuard ng;
    Tensor xd = x.detach();
    out = xd;
    if (lo) out = binary_raw(BinaryOp::maximum, out, Tensor::scalar(*lo, x.dtype(), x.device()));
    if (hi) out = binary_raw(BinaryOp::minimum, out, Tensor::scalar(*hi, x.dtype(), x.device()));
    if (out.is_same(xd)) out = xd.clone();
    if (needs_grad) {
      Tensor k = Tensor::ones(x.shape(), x.dtype(), x.device());
      if (lo) k = mul(k, binary_raw(BinaryOp::ge, xd, Tensor::scalar(*lo, x.dtype(), x.device())));
      if (hi) k = mul(k, binary_raw(BinaryOp::le, xd, Tensor::scalar(*hi, x.dtype(), x.device())));
      keep = k;
    }
  }
  if (!needs_grad) return out;
  return record("clamp", {x}, out, [keep](std::vector<Tensor>& g) {
    return std::vector<Tensor>{mul(g[0], keep)};
  });
}

Tensor& Tensor::clamp_(std::optional<double> lo, std::optional<double> hi) {
  Tensor c;
  {
    NoGradGuard ng;
    c = ::remora::clamp(*this, lo, hi);
  }
  return copy_(c);
}

// ---- compound assignment ----

Tensor& operator+=(Tensor& a, const Tensor& b) { return a.add_(b); }
Tensor& operator-=(Tensor& a, const Tensor& b) { return a.sub_(b); }
Tensor& operator*=(Tensor& a, const Tensor& b) { return a.mul_(b); }
Tensor& operator/=(Tensor& a, const Tensor& b) { return a.div_(b); }
Tensor& operator+=(Tensor& a, double s) { return a.add_(s); }
Tensor& operator-=(Tensor& a, double s) { return a.sub_(s); }
Tensor& operator*=(Tensor& a, double s) { return a.mul_(s); }
Tensor& operator/=(Tensor& a, double s) { return a.div_(s); }

}  // namespace remora
