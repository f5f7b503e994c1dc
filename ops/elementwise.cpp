// SPDX-License-Identifier: BSD-3-Clause
// Elementwise ops: broadcasting binaries, unaries with fused gradients, where.
#include <algorithm>

#include <sstream>

#include "internal.h"

namespace remora {
namespace detail {

void check_devices(const char* op, const std::vector<Tensor>& ts,
                   const std::vector<const char*>& names) {
  const Tensor* first = nullptr;
  bool same = true;
  for (const Tensor& t : ts) {
    if (!t.defined()) continue;
    if (!first) first = &t;
    else if (t.device() != first->device()) same = false;
  }
  if (same) return;
  std::ostringstream os;
  for (size_t i = 0; i < ts.size(); ++i) {
    if (!ts[i].defined()) continue;
    os << (os.tellp() > 0 ? ", " : "") << (i < names.size() ? names[i] : "operand") << " on "
       << ts[i].device().str();
  }
  REMORA_FAIL(op << ": operands are on different devices (" << os.str()
                 << "); move them to one device with .to(Device::cuda()) or .to(Device::cpu())");
}

void check_floating(const char* op, const Tensor& t) {
  REMORA_CHECK(is_floating(t.dtype()), op << ": expected a floating tensor (f32 or f64), got "
                                          << t.str() << "; convert with .to(DType::f32)");
}

Tensor unary_raw(UnaryOp op, const Tensor& x, double alpha, double beta) {
  Tensor xc = x.contiguous();
  Tensor out = make_tensor(x.shape(), x.dtype(), x.device());
  UnaryArgs u;
  u.op = op;
  u.dt = x.dtype();
  u.n = x.numel();
  u.x = xc.raw_data();
  u.out = out.raw_data();
  u.alpha = alpha;
  u.beta = beta;
  backend(x.device()).unary(u);
  return out;
}

Tensor unary_grad_raw(UnaryGradOp op, const Tensor& g, const Tensor& v, double alpha) {
  Tensor gc = g.contiguous(), vc = v.contiguous();
  Tensor out = make_tensor(v.shape(), v.dtype(), v.device());
  UnaryGradArgs u;
  u.op = op;
  u.dt = v.dtype();
  u.n = v.numel();
  u.grad = gc.raw_data();
  u.v = vc.raw_data();
  u.out = out.raw_data();
  u.alpha = alpha;
  backend(v.device()).unary_grad(u);
  return out;
}

}  // namespace detail

using namespace detail;

// ---- binary ----

Tensor add(const Tensor& a, const Tensor& b) {
  Tensor out = binary_raw(BinaryOp::add, a, b);
  const Shape sa = a.shape(), sb = b.shape();
  return record("add", {a, b}, out, [sa, sb](std::vector<Tensor>& g) {
    return std::vector<Tensor>{sum_to(g[0], sa), sum_to(g[0], sb)};
  });
}

Tensor sub(const Tensor& a, const Tensor& b) {
  Tensor out = binary_raw(BinaryOp::sub, a, b);
  const Shape sa = a.shape(), sb = b.shape();
  return record("sub", {a, b}, out, [sa, sb](std::vector<Tensor>& g) {
    return std::vector<Tensor>{sum_to(g[0], sa), sum_to(neg(g[0]), sb)};
  });
}

Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor out = binary_raw(BinaryOp::mul, a, b);
  if (!any_requires_grad({a, b})) return out;
  const bool ga = a.requires_grad(), gb = b.requires_grad();
  Tensor ad = gb ? a.detach() : Tensor(), bd = ga ? b.detach() : Tensor();
  const Shape sa = a.shape(), sb = b.shape();
  return record("mul", {a, b}, out, [ad, bd, ga, gb, sa, sb](std::vector<Tensor>& g) {
    Tensor da, db;
    if (ga) da = sum_to(mul(g[0], bd), sa);
    if (gb) db = sum_to(mul(g[0], ad), sb);
    return std::vector<Tensor>{da, db};
  });
}

Tensor div(const Tensor& a, const Tensor& b) {
  Tensor out = binary_raw(BinaryOp::div, a, b);
  if (!any_requires_grad({a, b})) return out;
  const bool ga = a.requires_grad(), gb = b.requires_grad();
  Tensor ad = a.detach(), bd = b.detach();
  return record("div", {a, b}, out, [ad, bd, ga, gb](std::vector<Tensor>& g) {
    Tensor da, db;
    if (ga) da = sum_to(div(g[0], bd), ad.shape());
    if (gb) db = sum_to(neg(div(mul(g[0], ad), mul(bd, bd))), bd.shape());
    return std::vector<Tensor>{da, db};
  });
}

static Tensor extremum(BinaryOp op, const char* name, const Tensor& a, const Tensor& b) {
  Tensor out = binary_raw(op, a, b);
  if (!any_requires_grad({a, b})) return out;
  // Share of the gradient that goes to a: 1 where a wins, 1/2 on ties (as in
  // PyTorch), 0 where b wins.
  Tensor wins = binary_raw(op == BinaryOp::maximum ? BinaryOp::gt : BinaryOp::lt, a, b);
  Tensor pick_a = add(wins, affine(binary_raw(BinaryOp::eq, a, b), 0.5, 0));
  const Shape sa = a.shape(), sb = b.shape();
  return record(name, {a, b}, out, [pick_a, sa, sb](std::vector<Tensor>& g) {
    return std::vector<Tensor>{sum_to(mul(g[0], pick_a), sa),
                               sum_to(mul(g[0], affine(pick_a, -1, 1)), sb)};
  });
}
Tensor maximum(const Tensor& a, const Tensor& b) {
  return extremum(BinaryOp::maximum, "maximum", a, b);
}
Tensor minimum(const Tensor& a, const Tensor& b) {
  return extremum(BinaryOp::minimum, "minimum", a, b);
}

Tensor eq(const Tensor& a, const Tensor& b) { return binary_raw(BinaryOp::eq, a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return binary_raw(BinaryOp::ne, a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return binary_raw(BinaryOp::lt, a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return binary_raw(BinaryOp::le, a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return binary_raw(BinaryOp::gt, a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return binary_raw(BinaryOp::ge, a, b); }

// ---- unary ----

Tensor affine(const Tensor& x, double alpha, double beta) {
  check_defined("affine", x, "x");
  Tensor out = unary_raw(UnaryOp::affine, x, alpha, beta);
  return record("affine", {x}, out, [alpha](std::vector<Tensor>& g) {
    return std::vector<Tensor>{affine(g[0], alpha, 0)};
  });
}
Tensor neg(const Tensor& x) { return affine(x, -1, 0); }

Tensor pow(const Tensor& x, double p) {
  check_defined("pow", x, "x");
  check_floating("pow", x);
  Tensor out = unary_raw(UnaryOp::pow, x, p);
  Tensor xd = x.detach();
  return record("pow", {x}, out, [xd, p](std::vector<Tensor>& g) {
    // x^0 is constant: its gradient is 0 everywhere, but p * x^(p-1) would be
    // 0 * inf = NaN at x = 0 (PyTorch special-cases p == 0 the same way).
    if (p == 0) return std::vector<Tensor>{Tensor::zeros(xd.shape(), xd.dtype(), xd.device())};
    return std::vector<Tensor>{unary_grad_raw(UnaryGradOp::pow, g[0], xd, p)};
  });
}

// A floating unary op whose gradient needs its input (x) or output (y).
template <typename F>
static Tensor unary_op(const char* name, UnaryOp op, const Tensor& x, F grad) {
  check_defined(name, x, "x");
  check_floating(name, x);
  Tensor out = unary_raw(op, x);
  if (!any_requires_grad({x})) return out;
  Tensor xd = x.detach(), yd = out.detach();
  return record(name, {x}, out, [xd, yd, grad](std::vector<Tensor>& g) {
    return std::vector<Tensor>{grad(g[0], xd, yd)};
  });
}

Tensor exp(const Tensor& x) {
  return unary_op("exp", UnaryOp::exp, x,
                  [](const Tensor& g, const Tensor&, const Tensor& y) { return mul(g, y); });
}
Tensor log(const Tensor& x) {
  return unary_op("log", UnaryOp::log, x,
                  [](const Tensor& g, const Tensor& x, const Tensor&) { return div(g, x); });
}
Tensor sqrt(const Tensor& x) {
  return unary_op("sqrt", UnaryOp::sqrt, x, [](const Tensor& g, const Tensor&, const Tensor& y) {
    return div(affine(g, 0.5, 0), y);
  });
}
Tensor tanh(const Tensor& x) {
  return unary_op("tanh", UnaryOp::tanh, x, [](const Tensor& g, const Tensor&, const Tensor& y) {
    return unary_grad_raw(UnaryGradOp::tanh, g, y);
  });
}
Tensor sigmoid(const Tensor& x) {
  return unary_op("sigmoid", UnaryOp::sigmoid, x,
                  [](const Tensor& g, const Tensor&, const Tensor& y) {
                    return unary_grad_raw(UnaryGradOp::sigmoid, g, y);
                  });
}
Tensor relu(const Tensor& x) {
  return unary_op("relu", UnaryOp::relu, x, [](const Tensor& g, const Tensor& x, const Tensor&) {
    return unary_grad_raw(UnaryGradOp::relu, g, x);
  });
}
Tensor gelu(const Tensor& x) {
  return unary_op("gelu", UnaryOp::gelu, x, [](const Tensor& g, const Tensor& x, const Tensor&) {
    return unary_grad_raw(UnaryGradOp::gelu, g, x);
  });
}
Tensor abs(const Tensor& x) {
  return unary_op("abs", UnaryOp::abs, x, [](const Tensor& g, const Tensor& x, const Tensor&) {
    Tensor zero = Tensor::zeros({}, x.dtype(), x.device());
    Tensor sign = sub(gt(x, zero), lt(x, zero));
    return mul(g, sign);
  });
}
Tensor erf(const Tensor& x) {
  return unary_op("erf", UnaryOp::erf, x, [](const Tensor& g, const Tensor& x, const Tensor&) {
    // d/dx erf(x) = 2/sqrt(pi) e^(-x^2)
    return mul(g, affine(exp(neg(mul(x, x))), 1.1283791670955126, 0));
  });
}
Tensor round_bf16(const Tensor& x) {
  check_defined("round_bf16", x, "x");
  check_floating("round_bf16", x);
  Tensor out = unary_raw(UnaryOp::round_bf16, x);
  // Straight-through: the gradient passes unchanged.
  return record("round_bf16", {x}, out, [](std::vector<Tensor>& g) { return std::vector<Tensor>{g[0]}; });
}
Tensor sin(const Tensor& x) {
  check_floating("sin", x);
  REMORA_CHECK(!any_requires_grad({x}), "sin: has no gradient; call it on a detached tensor");
  return unary_raw(UnaryOp::sin, x);
}
Tensor cos(const Tensor& x) {
  check_floating("cos", x);
  REMORA_CHECK(!any_requires_grad({x}), "cos: has no gradient; call it on a detached tensor");
  return unary_raw(UnaryOp::cos, x);
}

// ---- where / masked_fill ----

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  check_defined("where", cond, "cond");
  check_same("where", a, b);
  check_same_device("where", cond, a);
  const Shape shape =
      broadcast_shapes("where", cond.shape(), broadcast_shapes("where", a.shape(), b.shape()));
  Tensor out = make_tensor(shape, a.dtype(), a.device());
  WhereArgs w;
  w.dt = a.dtype();
  w.it = make_iter(out, {cond, a, b});
  w.out = out.raw_data();
  w.dt_cond = cond.dtype();
  w.cond = cond.raw_data();
  w.a = a.raw_data();
  w.b = b.raw_data();
  backend(a.device()).where(w);
  if (!any_requires_grad({a, b})) return out;
  Tensor c = cond.detach();
  const Shape sa = a.shape(), sb = b.shape();
  return record("where", {a, b}, out, [c, sa, sb](std::vector<Tensor>& g) {
    Tensor zero = Tensor::zeros({}, g[0].dtype(), g[0].device());
    return std::vector<Tensor>{sum_to(where(c, g[0], zero), sa), sum_to(where(c, zero, g[0]), sb)};
  });
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  check_defined("masked_fill", x, "x");
  check_defined("masked_fill", mask, "mask");
  REMORA_CHECK(broadcast_shapes("masked_fill", x.shape(), mask.shape()) == x.shape(),
               "masked_fill: mask " << shape_str(mask.shape()) << " must broadcast to x "
                                    << shape_str(x.shape()));
  return where(mask, Tensor::full({}, value, x.dtype(), x.device()), x);
}

// ---- operators ----

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator-(const Tensor& a) { return neg(a); }
Tensor operator+(const Tensor& a, double s) { return affine(a, 1, s); }
Tensor operator-(const Tensor& a, double s) { return affine(a, 1, -s); }
Tensor operator*(const Tensor& a, double s) { return affine(a, s, 0); }
Tensor operator/(const Tensor& a, double s) { return affine(a, 1 / s, 0); }
Tensor operator+(double s, const Tensor& a) { return affine(a, 1, s); }
Tensor operator-(double s, const Tensor& a) { return affine(a, -1, s); }
Tensor operator*(double s, const Tensor& a) { return affine(a, s, 0); }
Tensor operator/(double s, const Tensor& a) {
  return div(Tensor::full({}, s, a.dtype(), a.device()), a);
}

}  // namespace remora
