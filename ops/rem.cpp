// SPDX-License-Identifier: BSD-3-Clause
// REM ops: rem_matrix (dense reference), rem_apply (the O(L) scan) and gate.
// RSA attention, which builds on the scan, is ops/rsa.cpp.
#include "rem.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "../core/generator.h"
#include "internal.h"
#include "rem_internal.h"

namespace remora {

using namespace detail;

void RemSpec::validate(const char* op) const {
  REMORA_CHECK(regular >= 0 && cyclic >= 0 && dilated_regular >= 0 && dilated_cyclic >= 0,
               op << ": REM head counts must be >= 0, got regular=" << regular << " cyclic="
                  << cyclic << " dilated_regular=" << dilated_regular
                  << " dilated_cyclic=" << dilated_cyclic);
  const int64_t want = dilated_regular + dilated_cyclic;
  REMORA_CHECK(int64_t(dilations.size()) == want,
               op << ": dilations: expected " << want << " entries (one per dilated head or pair: "
                  << dilated_regular << " dilated_regular + " << dilated_cyclic
                  << " dilated_cyclic), got " << dilations.size());
  for (size_t i = 0; i < dilations.size(); ++i)
    REMORA_CHECK(dilations[i] >= 2, op << ": dilations[" << i << "] = " << dilations[i]
                                       << "; a dilation must be >= 2");
  REMORA_CHECK(max_distance >= 0, op << ": max_distance must be >= 0 (0 = no limit), got "
                                     << max_distance);
}

std::vector<RemHead> rem_heads(const RemSpec& s) {
  std::vector<RemHead> h;
  for (int64_t i = 0; i < s.regular; ++i) h.push_back({RemKind::regular, 1, i});
  for (int64_t i = 0; i < s.cyclic; ++i) {
    h.push_back({RemKind::cos, 1, i});
    h.push_back({RemKind::sin, 1, i});
  }
  size_t d = 0;
  for (int64_t i = 0; i < s.dilated_regular; ++i)
    h.push_back({RemKind::regular, s.dilations[d++], s.regular + i});
  for (int64_t i = 0; i < s.dilated_cyclic; ++i, ++d) {
    h.push_back({RemKind::cos, s.dilations[d], s.cyclic + i});
    h.push_back({RemKind::sin, s.dilations[d], s.cyclic + i});
  }
  return h;
}

namespace rem_detail {


// Checks the parameter tensors against the spec and maps them to per-head
// (a, theta), differentiably: lambda = tanh(eta), gamma = sigmoid(nu).
HeadParams head_params(const char* op, const RemSpec& spec, const Tensor& eta, const Tensor& nu,
                       const Tensor& theta, DType dt, Device dev) {
  spec.validate(op);
  auto check_param = [&](const Tensor& t, const char* name, int64_t n) {
    if (n == 0 && !t.defined()) return;
    REMORA_CHECK(t.defined(), op << ": rem." << name << " is undefined but the spec needs " << n
                                 << " entries");
    REMORA_CHECK(t.dim() == 1 && t.size(0) == n,
                 op << ": rem." << name << " must have shape [" << n << "], got "
                    << shape_str(t.shape()));
    REMORA_CHECK(t.dtype() == dt && t.device() == dev,
                 op << ": rem." << name << " is " << t.str() << " but the values are "
                    << dtype_name(dt) << " on " << dev.str());
  };
  check_param(eta, "eta", spec.num_eta());
  check_param(nu, "nu", spec.num_cyclic());
  check_param(theta, "theta", spec.num_cyclic());
  HeadParams hp;
  const std::vector<RemHead> heads = rem_heads(spec);
  std::vector<int64_t> ia, it;
  for (const RemHead& h : heads) {
    RemHeadDesc d;
    d.complex = h.kind != RemKind::regular;
    d.reads_imag = h.kind == RemKind::sin;
    d.dilation = h.dilation;
    hp.desc.push_back(d);
    hp.dmax = std::max(hp.dmax, h.dilation);
    // a = cat([lambda, gamma]); theta_all = cat([0 * lambda, theta])
    ia.push_back(d.complex ? spec.num_eta() + h.param : h.param);
  }
  if (heads.empty()) return hp;
  std::vector<Tensor> as, ts;
  if (spec.num_eta() > 0) {
    as.push_back(tanh(eta));
    ts.push_back(Tensor::zeros({spec.num_eta()}, dt, dev));
  }
  if (spec.num_cyclic() > 0) {
    as.push_back(sigmoid(nu));
    ts.push_back(theta);
  }
  Tensor idx = Tensor::from_vector(ia, {}, DType::i64, dev);
  hp.a = index_select(cat(as, 0), 0, idx);
  hp.theta = index_select(cat(ts, 0), 0, idx);
  return hp;
}

RemProblem problem(const RemSpec& spec, const HeadParams& hp, int64_t B, int64_t Lq, int64_t Lk,
                   int64_t D) {
  RemProblem p;
  p.B = B;
  p.H = int64_t(hp.desc.size());
  p.Lq = Lq;
  p.Lk = Lk;
  p.D = D;
  p.masked = spec.masked;
  p.max_distance = spec.max_distance;
  p.dmax = hp.dmax;
  p.heads = hp.desc.data();
  return p;
}

// A kernel argument that may be absent: null for an undefined tensor.
void* opt_ptr(const Tensor& t) { return t.defined() ? t.raw_data() : nullptr; }

RemScanBackwardArgs scan_backward_args(const RemProblem& p, const Tensor& a, const Tensor& theta,
                                       const Tensor& v, const Tensor& state_in, const Tensor& dy,
                                       const Tensor& dv, const Tensor& da, const Tensor& dtheta,
                                       const Tensor& dstate_in) {
  RemScanBackwardArgs b;
  b.dt = v.dtype();
  b.p = p;
  b.a = a.raw_data();
  b.theta = theta.raw_data();
  b.v = v.raw_data();
  b.state_in = opt_ptr(state_in);
  b.dy = dy.raw_data();
  b.dv = dv.raw_data();
  b.da = da.raw_data();
  b.dtheta = dtheta.raw_data();
  b.dstate_in = opt_ptr(dstate_in);
  return b;
}

// key_padding [B, Lk] (nonzero = padded) -> keep mask in dt, shaped `shape`.
Tensor keep_mask(const char* op, const Tensor& kp, int64_t Lk, DType dt, const Shape& shape) {
  REMORA_CHECK(kp.dim() == 2 && kp.size(1) == Lk,
               op << ": key_padding must be [B, Lk] = [B, " << Lk << "], got "
                  << shape_str(kp.shape()));
  Tensor keep = eq(kp.to(dt), Tensor::zeros({}, dt, kp.device()));
  return keep.reshape(shape);
}

// The scan as an op on per-head parameters: y = rows M.. of P v.
Tensor scan_op(const RemSpec& spec, const HeadParams& hp, const Tensor& v, int64_t Lq,
               const Tensor& state_in, Tensor* state_out) {
  const int64_t B = v.size(0), Hr = v.size(1), Lk = v.size(2), D = v.size(3);
  // The node outlives this call, so it keeps its own copy of the head table.
  const auto desc = std::make_shared<std::vector<RemHeadDesc>>(hp.desc);
  RemProblem p = problem(spec, hp, B, Lq, Lk, D);
  p.heads = desc->data();
  Tensor vc = v.contiguous(), ac = hp.a.contiguous(), tc = hp.theta.contiguous();
  Tensor sc = state_in.defined() ? state_in.contiguous() : Tensor();
  Tensor y = make_tensor({B, Hr, Lq, D}, v.dtype(), v.device());
  Tensor so;
  if (state_out) so = make_tensor({B, Hr, p.dmax, 2, D}, v.dtype(), v.device());
  RemScanArgs sa;
  sa.dt = v.dtype();
  sa.p = p;
  sa.a = ac.raw_data();
  sa.theta = tc.raw_data();
  sa.v = vc.raw_data();
  sa.state_in = opt_ptr(sc);
  sa.y = y.raw_data();
  sa.state_out = opt_ptr(so);
  kern::rem_scan(v.device(), sa);
  if (state_out) *state_out = so;  // carried like XL memory: no gradient flows back through it
  if (!any_requires_grad({hp.a, hp.theta, v, state_in})) return y;
  Tensor vd = vc.detach(), ad = ac.detach(), td = tc.detach(),
         sd = sc.defined() ? sc.detach() : Tensor();
  const bool want_state = state_in.defined() && state_in.requires_grad();
  return record("rem_apply", {hp.a, hp.theta, v, state_in}, y,
                [p, desc, vd, ad, td, sd, want_state](std::vector<Tensor>& g) {
                  RemProblem q = p;
                  q.heads = desc->data();
                  Tensor dy = g[0].contiguous();
                  Tensor dv = make_tensor(vd.shape(), vd.dtype(), vd.device());
                  Tensor da = make_tensor({q.H}, vd.dtype(), vd.device());
                  Tensor dth = make_tensor({q.H}, vd.dtype(), vd.device());
                  Tensor ds = want_state ? make_tensor(sd.shape(), vd.dtype(), vd.device()) : Tensor();
                  kern::rem_scan_backward(vd.device(), scan_backward_args(q, ad, td, vd, sd, dy,
                                                                          dv, da, dth, ds));
                  return std::vector<Tensor>{da, dth, dv, ds};
                });
}

void check_qkv(const char* op, const Tensor& v, int64_t Hr, int64_t Lq) {
  REMORA_CHECK(v.dim() == 4, op << ": v must be [B, H, Lk, D], got " << shape_str(v.shape()));
  REMORA_CHECK(v.size(1) == Hr, op << ": v has " << v.size(1) << " heads but the spec has " << Hr
                                   << " REM heads");
  REMORA_CHECK(Lq >= 0 && Lq <= v.size(2), op << ": Lq = " << Lq << " must be in [0, Lk = "
                                              << v.size(2) << "]");
}

}  // namespace rem_detail

using namespace rem_detail;

Tensor rem_matrix(const RemSpec& spec, const Tensor& eta, const Tensor& nu, const Tensor& theta,
                  int64_t Lq, int64_t Lk, const Tensor& key_padding) {
  // 16-bit parameters: computed in f32, the result converted back.
  if ((eta.defined() && is_half(eta.dtype())) || (nu.defined() && is_half(nu.dtype()))) {
    auto f32 = [](const Tensor& t) { return t.defined() && is_half(t.dtype()) ? t.to(DType::f32) : t; };
    const DType dt = eta.defined() ? eta.dtype() : nu.dtype();
    return rem_matrix(spec, f32(eta), f32(nu), f32(theta), Lq, Lk, f32(key_padding)).to(dt);
  }
  const Tensor& ref = eta.defined() ? eta : nu;
  REMORA_CHECK(ref.defined(), "rem_matrix: no REM parameters given (eta, nu are undefined)");
  REMORA_CHECK(Lq >= 0 && Lk >= Lq, "rem_matrix: need 0 <= Lq <= Lk, got Lq = " << Lq
                                                                           << ", Lk = " << Lk);
  check_floating("rem_matrix", ref);
  check_devices("rem_matrix", {eta, nu, theta, key_padding}, {"eta", "nu", "theta", "key_padding"});
  HeadParams hp = head_params("rem_matrix", spec, eta, nu, theta, ref.dtype(), ref.device());
  const int64_t Hr = spec.num_heads();
  REMORA_CHECK(Hr > 0, "rem_matrix: the spec has no REM heads");
  auto desc = std::make_shared<std::vector<RemHeadDesc>>(hp.desc);
  RemProblem p = problem(spec, hp, 1, Lq, Lk, 0);
  p.heads = desc->data();
  Tensor ac = hp.a.contiguous(), tc = hp.theta.contiguous();
  Tensor P = make_tensor({Hr, Lq, Lk}, ref.dtype(), ref.device());
  RemMatrixArgs ma;
  ma.dt = ref.dtype();
  ma.p = p;
  ma.a = ac.raw_data();
  ma.theta = tc.raw_data();
  ma.P = P.raw_data();
  kern::rem_matrix(ref.device(), ma);
  if (any_requires_grad({hp.a, hp.theta})) {
    Tensor ad = ac.detach(), td = tc.detach();
    P = record("rem_matrix", {hp.a, hp.theta}, P, [p, desc, ad, td](std::vector<Tensor>& g) {
      RemProblem q = p;
      q.heads = desc->data();
      Tensor dP = g[0].contiguous();
      Tensor da = make_tensor({q.H}, ad.dtype(), ad.device());
      Tensor dth = make_tensor({q.H}, ad.dtype(), ad.device());
      RemMatrixBackwardArgs mb;
      mb.dt = ad.dtype();
      mb.p = q;
      mb.a = ad.raw_data();
      mb.theta = td.raw_data();
      mb.dP = dP.raw_data();
      mb.da = da.raw_data();
      mb.dtheta = dth.raw_data();
      kern::rem_matrix_backward(ad.device(), mb);
      return std::vector<Tensor>{da, dth};
    });
  }
  if (!key_padding.defined()) return P;
  const int64_t B = key_padding.size(0);
  return mul(P.unsqueeze(0), keep_mask("rem_matrix", key_padding, Lk, ref.dtype(), {B, 1, 1, Lk}));
}

Tensor rem_apply(const RemSpec& spec, const Tensor& eta, const Tensor& nu, const Tensor& theta,
                 const Tensor& v, int64_t Lq, const Tensor& key_padding, const Tensor& state_in,
                 Tensor* state_out) {
  // 16-bit v: the scan runs in f32 (its kernels take f32 and f64), the result
  // converted back; a carried state stays f32.
  if (v.defined() && is_half(v.dtype())) {
    auto f32 = [](const Tensor& t) { return t.defined() && is_half(t.dtype()) ? t.to(DType::f32) : t; };
    return rem_apply(spec, f32(eta), f32(nu), f32(theta), f32(v), Lq, f32(key_padding), f32(state_in), state_out)
        .to(v.dtype());
  }
  check_defined("rem_apply", v, "v");
  check_floating("rem_apply", v);
  const int64_t Hr = spec.num_heads();
  check_qkv("rem_apply", v, Hr, Lq);
  check_devices("rem_apply", {v, eta, nu, theta, key_padding, state_in},
                {"v", "eta", "nu", "theta", "key_padding", "state_in"});
  HeadParams hp = head_params("rem_apply", spec, eta, nu, theta, v.dtype(), v.device());
  REMORA_CHECK(Hr > 0, "rem_apply: the spec has no REM heads");
  const int64_t B = v.size(0), Lk = v.size(2), D = v.size(3);
  if (state_in.defined() || state_out) {
    REMORA_CHECK(spec.masked && spec.max_distance == 0,
                 "rem_apply: a carried state needs a masked REM without max_distance");
  }
  if (state_in.defined()) {
    const Shape want{B, Hr, hp.dmax, 2, D};
    REMORA_CHECK(state_in.shape() == want, "rem_apply: state_in must be " << shape_str(want)
                                                                         << ", got "
                                                                         << shape_str(state_in.shape()));
    check_same("rem_apply", v, state_in);
  }
  Tensor vv = v;
  if (key_padding.defined())
    vv = mul(v, keep_mask("rem_apply", key_padding, Lk, v.dtype(), {B, 1, Lk, 1}));
  return scan_op(spec, hp, vv, Lq, state_in, state_out);
}

Tensor gate(const Tensor& a, const Tensor& b, const Tensor& mu) {
  check_defined("gate", a, "a");
  check_defined("gate", b, "b");
  check_defined("gate", mu, "mu");
  check_devices("gate", {a, b, mu}, {"a", "b", "mu"});
  REMORA_CHECK(a.shape() == b.shape(), "gate: a " << shape_str(a.shape()) << " and b "
                                                  << shape_str(b.shape()) << " must match");
  REMORA_CHECK(broadcast_shapes("gate", a.shape(), mu.shape()) == a.shape(),
               "gate: mu " << shape_str(mu.shape()) << " must broadcast to " << shape_str(a.shape()));
  // (1 - s) a + s b = a + s (b - a)
  return add(a, mul(sigmoid(mu), sub(b, a)));
}

}  // namespace remora
