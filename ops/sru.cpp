// SPDX-License-Identifier: BSD-3-Clause
// sru_recurrence: argument checks, the fused backend kernels with one autograd
// node, and the composite reference (a loop over t of sigmoid / mul / add).
#include "sru.h"

#include "internal.h"

namespace remora {

using namespace detail;

namespace {

// Checks every argument; errors name the op, the argument, the shapes and the fix.
SruProblem check_args(const char* op, const Tensor& U, const Tensor& x, const Tensor& v,
                      const Tensor& b, const Tensor& c0, const Tensor& mask, bool bidirectional) {
  check_defined(op, U, "U");
  REMORA_CHECK(U.dtype() == DType::f32 || U.dtype() == DType::f64,
               op << ": U must be f32 or f64, got " << U.str());
  REMORA_CHECK(U.dim() == 4 && (U.size(3) == 3 || U.size(3) == 4),
               op << ": U must be [L, B, D, k] with k = 3 (u0, u1, u2) or 4 (and u3 = x'), got "
                  << shape_str(U.shape()));
  SruProblem p;
  p.L = U.size(0);
  p.B = U.size(1);
  p.D = U.size(2);
  p.k = U.size(3);
  p.bidirectional = bidirectional;
  const Shape lbd{p.L, p.B, p.D}, two_d{2, p.D}, bd{p.B, p.D};
  auto same = [&](const Tensor& t, const char* name) {
    REMORA_CHECK(t.dtype() == U.dtype(), op << ": " << name << " is " << dtype_name(t.dtype())
                                            << " but U is " << dtype_name(U.dtype())
                                            << "; convert it with .to(" << dtype_name(U.dtype())
                                            << ")");
    REMORA_CHECK(t.device() == U.device(), op << ": " << name << " is on " << t.device().str()
                                              << " but U is on " << U.device().str());
  };
  if (p.k == 3) {
    REMORA_CHECK(x.defined(), op << ": x is undefined but U has k = 3 columns, so x' = x "
                                    "[L, B, D] = " << shape_str(lbd) << " is needed");
    REMORA_CHECK(x.shape() == lbd, op << ": x must be [L, B, D] = " << shape_str(lbd)
                                      << " to match U " << shape_str(U.shape()) << ", got "
                                      << shape_str(x.shape()));
    same(x, "x");
  } else {
    REMORA_CHECK(!x.defined(), op << ": U has k = 4 columns, so x' is u3 and x must be undefined "
                                     "(pass Tensor()), got " << x.str());
  }
  check_defined(op, v, "v");
  REMORA_CHECK(v.shape() == two_d, op << ": v must be [2, D] = " << shape_str(two_d)
                                      << " (v_f; v_r), got " << shape_str(v.shape()));
  same(v, "v");
  check_defined(op, b, "b");
  REMORA_CHECK(b.shape() == two_d, op << ": b must be [2, D] = " << shape_str(two_d)
                                      << " (b_f; b_r), got " << shape_str(b.shape()));
  same(b, "b");
  if (c0.defined()) {
    REMORA_CHECK(c0.shape() == bd, op << ": c0 must be [B, D] = " << shape_str(bd) << ", got "
                                      << shape_str(c0.shape()));
    same(c0, "c0");
  }
  if (mask.defined()) {
    REMORA_CHECK(mask.shape() == bd, op << ": mask must be [B, D] = " << shape_str(bd)
                                        << ", got " << shape_str(mask.shape()));
    same(mask, "mask");
  }
  REMORA_CHECK(!bidirectional || p.D % 2 == 0,
               op << ": bidirectional needs an even number of units D (the first half runs "
                     "forward, the second backward), got D = " << p.D);
  return p;
}

const void* ptr(const Tensor& t) { return t.defined() ? t.raw_data() : nullptr; }

}  // namespace

SruOutput sru_recurrence(const Tensor& U, const Tensor& x, const Tensor& v, const Tensor& b,
                         const Tensor& c0, const Tensor& mask, bool bidirectional) {
  const char* op = "sru_recurrence";
  const SruProblem p = check_args(op, U, x, v, b, c0, mask, bidirectional);
  const DType dt = U.dtype();
  const Device dev = U.device();
  Tensor Uc = U.contiguous(), vc = v.contiguous(), bc = b.contiguous();
  Tensor xc = x.defined() ? x.contiguous() : Tensor();
  Tensor c0c = c0.defined() ? c0.contiguous() : Tensor();
  Tensor mc = mask.defined() ? mask.detach().contiguous() : Tensor();
  SruOutput o;
  o.h = make_tensor({p.L, p.B, p.D}, dt, dev);
  o.c = make_tensor({p.L, p.B, p.D}, dt, dev);
  o.c_last = make_tensor({p.B, p.D}, dt, dev);
  SruForwardArgs fa;
  fa.dt = dt;
  fa.p = p;
  fa.U = Uc.raw_data();
  fa.x = ptr(xc);
  fa.v = vc.raw_data();
  fa.b = bc.raw_data();
  fa.c0 = ptr(c0c);
  fa.mask = ptr(mc);
  fa.h = o.h.raw_data();
  fa.c = o.c.raw_data();
  fa.c_last = o.c_last.raw_data();
  kern::sru_forward(dev, fa);
  if (!any_requires_grad({U, x, v, b, c0})) return o;

  // The node keeps detached inputs and every c_t; the reverse sweep recomputes
  // the gates from them.
  Tensor Ud = Uc.detach(), xd = xc.defined() ? xc.detach() : Tensor(), vd = vc.detach(),
         bd = bc.detach(), c0d = c0c.defined() ? c0c.detach() : Tensor(), cd = o.c.detach();
  const bool want_c0 = c0.defined() && c0.requires_grad();
  std::vector<Tensor> outs = record_optional_grads(
      op, {U, x, v, b, c0}, {o.h, o.c, o.c_last},
      [p, Ud, xd, vd, bd, c0d, mc, cd, want_c0](std::vector<Tensor>& g) {
        const DType dt = Ud.dtype();
        const Device dev = Ud.device();
        // dh undefined (h unused) means zero; dc and dc_last may stay null.
        Tensor dh = g[0].defined() ? g[0].contiguous() : Tensor::zeros({p.L, p.B, p.D}, dt, dev);
        Tensor dc = g[1].defined() ? g[1].contiguous() : Tensor();
        Tensor dcl = g[2].defined() ? g[2].contiguous() : Tensor();
        Tensor dU = make_tensor(Ud.shape(), dt, dev);
        Tensor dx = p.k == 3 ? make_tensor({p.L, p.B, p.D}, dt, dev) : Tensor();
        Tensor dv = make_tensor({2, p.D}, dt, dev);
        Tensor db = make_tensor({2, p.D}, dt, dev);
        Tensor dc0 = want_c0 ? make_tensor({p.B, p.D}, dt, dev) : Tensor();
        SruBackwardArgs ba;
        ba.dt = dt;
        ba.p = p;
        ba.U = Ud.raw_data();
        ba.x = ptr(xd);
        ba.v = vd.raw_data();
        ba.b = bd.raw_data();
        ba.c0 = ptr(c0d);
        ba.mask = ptr(mc);
        ba.c = cd.raw_data();
        ba.dh = dh.raw_data();
        ba.dc = ptr(dc);
        ba.dc_last = ptr(dcl);
        ba.dU = dU.raw_data();
        ba.dx = dx.defined() ? dx.raw_data() : nullptr;
        ba.dv = dv.raw_data();
        ba.db = db.raw_data();
        ba.dc0 = dc0.defined() ? dc0.raw_data() : nullptr;
        kern::sru_backward(dev, ba);
        return std::vector<Tensor>{dU, dx, dv, db, dc0};
      });
  return {outs[0], outs[1], outs[2]};
}

SruOutput sru_recurrence_reference(const Tensor& U, const Tensor& x, const Tensor& v,
                                   const Tensor& b, const Tensor& c0, const Tensor& mask,
                                   bool bidirectional) {
  const SruProblem p =
      check_args("sru_recurrence_reference", U, x, v, b, c0, mask, bidirectional);
  const int64_t L = p.L, B = p.B, D = p.D;
  // Each direction is a range of units [j0, j1); the second one runs reversed.
  struct Dir {
    int64_t j0, j1;
    bool rev;
  };
  std::vector<Dir> dirs;
  dirs.push_back({0, bidirectional ? D / 2 : D, false});
  if (bidirectional) dirs.push_back({D / 2, D, true});
  std::vector<Tensor> hs_all, cs_all, last_all;
  for (const Dir& d : dirs) {
    const int64_t n = d.j1 - d.j0;
    Tensor Ud = U.slice(2, d.j0, d.j1);  // [L, B, n, k]
    auto col = [&](int64_t m) { return Ud.select(3, m); };  // [L, B, n]
    Tensor u0 = col(0), u1 = col(1), u2 = col(2);
    Tensor xp = p.k == 3 ? x.slice(2, d.j0, d.j1) : col(3);
    Tensor vf = v.select(0, 0).slice(0, d.j0, d.j1), vr = v.select(0, 1).slice(0, d.j0, d.j1);
    Tensor bf = b.select(0, 0).slice(0, d.j0, d.j1), br = b.select(0, 1).slice(0, d.j0, d.j1);
    Tensor c = c0.defined() ? c0.slice(1, d.j0, d.j1) : Tensor::zeros({B, n}, U.dtype(), U.device());
    Tensor m = mask.defined() ? mask.detach().slice(1, d.j0, d.j1) : Tensor();
    std::vector<Tensor> hs(static_cast<size_t>(L)), cs(static_cast<size_t>(L));
    for (int64_t s = 0; s < L; ++s) {
      const int64_t t = d.rev ? L - 1 - s : s;
      Tensor u0t = u0.select(0, t), xt = xp.select(0, t);                    // [B, n]
      Tensor f = sigmoid(add(add(u1.select(0, t), mul(vf, c)), bf));
      Tensor r = sigmoid(add(add(u2.select(0, t), mul(vr, c)), br));
      c = add(u0t, mul(f, sub(c, u0t)));
      Tensor gate = m.defined() ? mul(m, r) : r;
      hs[size_t(t)] = add(xt, mul(gate, sub(c, xt)));
      cs[size_t(t)] = c;
    }
    if (L > 0) {
      hs_all.push_back(stack(hs, 0));
      cs_all.push_back(stack(cs, 0));
    } else {
      hs_all.push_back(Tensor::zeros({0, B, n}, U.dtype(), U.device()));
      cs_all.push_back(Tensor::zeros({0, B, n}, U.dtype(), U.device()));
    }
    last_all.push_back(c);
  }
  return {cat(hs_all, 2), cat(cs_all, 2), cat(last_all, 1)};
}

}  // namespace remora
