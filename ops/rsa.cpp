// SPDX-License-Identifier: BSD-3-Clause
// RSA attention (docs/math.md#rsa-attention-and-the-gate): one fused autograd node (the device's fused kernels
// when they take the problem, else the composed path), and its composite
// reference. The REM part goes through the O(L) scan of ops/rem.cpp.
#include <algorithm>
#include <cmath>
#include <limits>

#include "../core/autocast.h"
#include "../core/generator.h"
#include "internal.h"
#include "rem.h"
#include "rem_internal.h"

namespace remora {

using namespace detail;
using namespace rem_detail;

// ---- RSA attention ----

namespace {

struct RsaShapes {
  int64_t B, H, Lq, Lk, D, Hr;
  double scale;
};

RsaShapes check_rsa(const Tensor& q, const Tensor& k, const Tensor& v, const RemSpec& spec,
                    const Tensor& mu, const RsaOptions& opt) {
  const char* op = "rsa_attention";
  for (const Tensor* t : {&q, &k, &v}) {
    check_defined(op, *t, "q/k/v");
    REMORA_CHECK(t->dim() == 4, op << ": q, k, v must be [B, H, L, D], got " << shape_str(t->shape()));
  }
  check_same(op, q, k);
  check_same(op, q, v);
  check_floating(op, q);
  RsaShapes s{q.size(0), q.size(1), q.size(2), k.size(2), q.size(3), spec.num_heads(), opt.scale};
  REMORA_CHECK(k.shape() == v.shape() && k.size(0) == s.B && k.size(1) == s.H && k.size(3) == s.D,
               op << ": k " << shape_str(k.shape()) << " and v " << shape_str(v.shape())
                  << " must be [B, H, Lk, D] matching q " << shape_str(q.shape()));
  REMORA_CHECK(s.Hr <= s.H, op << ": the spec has " << s.Hr << " REM heads but attention has only "
                               << s.H << " heads; use at most " << s.H);
  if (s.Hr > 0) {
    check_defined(op, mu, "mu");
    REMORA_CHECK(mu.dim() == 1 && (mu.size(0) == s.Hr || mu.size(0) == 1),
                 op << ": mu must be [" << s.Hr << "] (per head) or [1] (per layer), got "
                    << shape_str(mu.shape()));
  }
  // The REM lines queries up with the last Lq keys; plain softmax heads take any lengths.
  REMORA_CHECK(s.Lq <= s.Lk || s.Hr == 0,
               op << ": query length " << s.Lq << " exceeds key length " << s.Lk
                  << " (allowed only without REM heads)");
  if (s.scale == 0) s.scale = 1.0 / std::sqrt(double(s.D));
  REMORA_CHECK(opt.dropout >= 0 && opt.dropout < 1, op << ": dropout must be in [0, 1), got "
                                                       << opt.dropout);
  return s;
}

// Fully masked query rows (every score -inf) follow FlashAttention-2: their
// attention row is 0 instead of softmax's NaN, so O_att = 0 there and no
// gradient flows from them; the fused CUDA kernels do the same. Cheap on the
// common path: softmax makes a whole row NaN, so only rows whose first
// probability is NaN are examined (a NaN that comes from the inputs, where the
// scores are not all -inf, stays NaN). A, S: [..., Lq, Lk], no history.
Tensor zero_masked_rows(const Tensor& A, const Tensor& S) {
  if (A.numel() == 0 || A.size(-1) == 0) return A;
  if (A.device().is_cpu()) {  // the shortcut costs a host sync elsewhere: masks always there
    Tensor first = A.select(-1, 0);
    if (sum(ne(first, first)).item() == 0) return A;
  }
  Tensor dead = eq(max(S, -1, true), Tensor::full({}, -std::numeric_limits<double>::infinity(),
                                                  S.dtype(), S.device()));
  return masked_fill(A, dead, 0.0);
}

// Scores with masks applied: [B, H, Lq, Lk].
Tensor masked_scores(const Tensor& q, const Tensor& k, double scale, const Tensor& attn_mask,
                     const Tensor& key_padding) {
  Tensor S = affine(matmul(q, k.transpose(-2, -1)), scale, 0);
  if (attn_mask.defined()) {
    REMORA_CHECK(attn_mask.dim() <= 4 && broadcast_shapes("rsa_attention", S.shape(), attn_mask.shape()) == S.shape(),
                 "rsa_attention: attn_mask " << shape_str(attn_mask.shape())
                                             << " must broadcast to the scores [B, H, Lq, Lk] = "
                                             << shape_str(S.shape()));
    S = add(S, attn_mask);
  }
  if (key_padding.defined()) {
    REMORA_CHECK(key_padding.dim() == 2 && key_padding.size(0) == q.size(0) &&
                     key_padding.size(1) == k.size(2),
                 "rsa_attention: key_padding must be [B, Lk] = [" << q.size(0) << ", " << k.size(2)
                                                                  << "], got "
                                                                  << shape_str(key_padding.shape()));
    S = masked_fill(S, key_padding.reshape({q.size(0), 1, 1, k.size(2)}),
                    -std::numeric_limits<double>::infinity());
  }
  return S;
}

// Checks the positional term and the causal window of opt (RsaOptions);
// true when either is asked for.
bool check_position(const RsaShapes& s, const Tensor& q, const RsaOptions& opt) {
  const char* op = "rsa_attention";
  const bool pos = opt.pos_q.defined() || opt.pos_r.defined();
  if (pos) {
    REMORA_CHECK(opt.pos_q.defined() && opt.pos_r.defined(),
                 op << ": the positional term needs both pos_q and pos_r (one is undefined)");
    check_same(op, q, opt.pos_q);
    check_same(op, q, opt.pos_r);
    REMORA_CHECK(opt.pos_q.shape() == Shape({s.B, s.H, s.Lq, s.D}),
                 op << ": pos_q must be [B, H, Lq, D] = " << shape_str({s.B, s.H, s.Lq, s.D})
                    << " like q, got " << shape_str(opt.pos_q.shape()));
    REMORA_CHECK(opt.pos_r.shape() == Shape({s.H, s.Lk, s.D}),
                 op << ": pos_r must be [H, Lk, D] = " << shape_str({s.H, s.Lk, s.D})
                    << " (one row per relative distance), got " << shape_str(opt.pos_r.shape()));
  }
  REMORA_CHECK(opt.window < 0 || opt.causal,
               op << ": window = " << opt.window << " needs causal = true (it narrows the causal mask)");
  REMORA_CHECK(!(pos || opt.causal) || s.Lq <= s.Lk,
               op << ": the positional term and the causal window need Lq <= Lk, got Lq = " << s.Lq
                  << ", Lk = " << s.Lk);
  return pos || opt.causal;
}

// The composed form of the positional term and the causal window: one
// additive bias (attn_mask included), [B, H, Lq, Lk] with the positional term,
// [Lq, Lk] (or attn_mask's shape) without; and the options without them.
Tensor composed_position_bias(const RsaShapes& s, const Tensor& q, const Tensor& attn_mask,
                              const RsaOptions& opt, RsaOptions* rest) {
  const Device dev = q.device();
  Tensor bias;
  if (opt.causal) {
    const int64_t shift = s.Lk - s.Lq;
    Tensor blocked = triu(Tensor::ones({s.Lq, s.Lk}, DType::i64, dev), 1 + shift);
    if (opt.window >= 0)
      blocked = add(blocked, tril(Tensor::ones({s.Lq, s.Lk}, DType::i64, dev), shift - opt.window));
    bias = masked_fill(Tensor::zeros({s.Lq, s.Lk}, q.dtype(), dev), blocked,
                       -std::numeric_limits<double>::infinity());
  }
  if (opt.pos_q.defined())
    bias = rel_shift(matmul(opt.pos_q, opt.pos_r.transpose(-2, -1)), s.scale, bias);
  if (attn_mask.defined()) bias = bias.defined() ? add(bias, attn_mask) : attn_mask;
  *rest = opt;
  rest->pos_q = rest->pos_r = Tensor();
  rest->causal = false;
  rest->window = -1;
  return bias;
}

void check_rsa_devices(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& eta,
                       const Tensor& nu, const Tensor& theta, const Tensor& mu,
                       const Tensor& attn_mask, const Tensor& key_padding, const RsaOptions& opt) {
  check_devices("rsa_attention",
                {q, k, v, eta, nu, theta, mu, attn_mask, key_padding, opt.rem_state_in},
                {"q", "k", "v", "rem.eta", "rem.nu", "rem.theta", "mu", "attn_mask",
                 "key_padding", "rem_state_in"});
}

// What the fused and composed paths share, worked out once from the problem:
// the REM heads' parameters, the gate, the key-padding keep mask, dropout and
// the carried scan state.
struct RsaPlan {
  RsaShapes s;
  HeadParams hp;
  Tensor gs;        // sigmoid(mu) per REM head [Hr]
  Tensor keep;      // [B, 1, Lk, 1], where key padding meets REM heads
  Tensor state_in;  // carry mode's scan state (detached), else undefined
  bool drop = false;
  Generator* gen = nullptr;
  int64_t scan_from = 0;  // carry mode: the scan covers the current segment only
};

// The gate's value per REM head, sigmoid(mu) (* gate_scale), differentiable.
Tensor gate_value(const RemWeights& rem, const Tensor& q) {
  Tensor g = sigmoid(rem.mu);
  if (!rem.gate_scale.defined()) return g;
  REMORA_CHECK(rem.gate_scale.shape() == rem.mu.shape(), "rsa_attention: gate_scale must have mu's shape "
                                                             << shape_str(rem.mu.shape()) << ", got "
                                                             << shape_str(rem.gate_scale.shape()));
  check_devices("rsa_attention", {q, rem.gate_scale}, {"q", "gate_scale"});
  return mul(g, rem.gate_scale.dtype() == g.dtype() ? rem.gate_scale : rem.gate_scale.to(g.dtype()));
}

RsaPlan plan_rsa(const RsaProblem& p, const RsaShapes& s) {
  const RsaOptions& opt = p.opt;
  RsaPlan plan;
  plan.s = s;
  if (s.Hr > 0) {
    plan.hp = head_params("rsa_attention", p.rem.spec, p.rem.eta, p.rem.nu, p.rem.theta, p.q.dtype(), p.q.device());
    plan.gs = gate_value(p.rem, p.q).expand({s.Hr}).contiguous();
  }
  if (p.key_padding.defined() && s.Hr > 0)
    plan.keep = keep_mask("rsa_attention", p.key_padding, s.Lk, p.q.dtype(), {s.B, 1, s.Lk, 1});
  plan.drop = opt.train && opt.dropout > 0;
  plan.gen = opt.gen ? opt.gen : &default_generator();
  plan.scan_from = opt.carry ? s.Lk - s.Lq : 0;
  if (opt.carry && s.Hr > 0) {
    REMORA_CHECK(p.rem.spec.masked && p.rem.spec.max_distance == 0,
                 "rsa_attention: carry mode needs a masked REM without max_distance");
    const int64_t dmax = plan.hp.dmax;
    REMORA_CHECK(!opt.rem_state_in.defined() ||
                     opt.rem_state_in.shape() == Shape({s.B, s.Hr, dmax, 2, s.D}),
                 "rsa_attention: rem_state_in must be " << shape_str({s.B, s.Hr, dmax, 2, s.D})
                                                        << ", got "
                                                        << shape_str(opt.rem_state_in.shape()));
  }
  if (opt.carry && opt.rem_state_in.defined()) plan.state_in = opt.rem_state_in.detach().contiguous();
  return plan;
}

// A bf16 tensor widened to f32 (exact), anything else as it is.
Tensor wide_f32(const Tensor& t) { return t.defined() && t.dtype() == DType::bf16 ? t.to(DType::f32) : t; }

// RSA attention through the backend's fused kernel (FlashAttention style; see
// backends/cuda/cuda_attention.cu): the same mathematics as the composed path
// below (which stays the reference), without A or S in memory. The REM part
// Y = P v still comes from the scan; the kernel mixes it in. Returns an
// undefined tensor when the device has no fused kernels for this problem
// (supports(dev, OpKind::fused_rsa, ...)): the one place the composed path is
// chosen.
Tensor rsa_fused(const RsaProblem& rp, const RsaPlan& plan, Tensor* state_out) {
  const RsaShapes& s = plan.s;
  const Tensor &q = rp.q, &k = rp.k, &v = rp.v, &attn_mask = rp.attn_mask, &key_padding = rp.key_padding;
  const RemSpec& spec = rp.rem.spec;
  const RsaOptions& opt = rp.opt;
  const HeadParams& hp = plan.hp;
  const Tensor &gs = plan.gs, &keep = plan.keep, &state_in = plan.state_in;
  const bool drop = plan.drop;
  Generator& gen = *plan.gen;
  const int64_t scan_from = plan.scan_from;
  const DType dt = q.dtype();
  const Device dev = q.device();
  const Shape score_shape{s.B, s.H, s.Lq, s.Lk};
  if (s.Lq > s.Lk) return Tensor();  // cross attention with more queries than keys: composed
  RsaFusedProblem fp;
  fp.B = s.B; fp.H = s.H; fp.Hr = s.Hr; fp.Lq = s.Lq; fp.Lk = s.Lk; fp.D = s.D;
  fp.scale = s.scale;
  fp.causal = opt.causal;
  fp.window = opt.window;
  const bool pos = opt.pos_q.defined();
  if (pos) {  // placeholders for the question; the operands are set below
    fp.pos_q = q.raw_data();
    fp.pos_r = q.raw_data();
  }
  Tensor bias, kpb;
  if (attn_mask.defined()) {
    // A mask of another dtype goes the composed way (whose add() says what is wrong).
    if (attn_mask.dtype() != dt || attn_mask.dim() > 4 ||
        broadcast_shapes("rsa_attention", score_shape, attn_mask.shape()) != score_shape)
      return Tensor();
    bias = attn_mask.detach();
    const Shape st = broadcast_strides(bias, score_shape);  // 0 on broadcast dims
    for (int d = 0; d < 4; ++d) fp.bias_strides[d] = st[size_t(d)];
    fp.bias = bias.raw_data();
  }
  if (key_padding.defined()) {
    REMORA_CHECK(key_padding.dim() == 2 && key_padding.size(0) == s.B &&
                     key_padding.size(1) == s.Lk,
                 "rsa_attention: key_padding must be [B, Lk] = [" << s.B << ", " << s.Lk
                                                                  << "], got "
                                                                  << shape_str(key_padding.shape()));
    NoGradGuard ng;
    kpb = masked_fill(Tensor::zeros({s.B, s.Lk}, dt, dev), key_padding,
                      -std::numeric_limits<double>::infinity())
              .contiguous();
    fp.kp_bias = kpb.raw_data();
  }
  if (drop) {
    // The counters dropout() would take; reserved only once the kernel ran.
    fp.dropout = opt.dropout;
    fp.seed = gen.seed();
    fp.offset = gen.offset();
  }
  if (!supports(dev, OpKind::fused_rsa, {dt, &fp})) return Tensor();
  // bf16 autocast: the kernel gets q, k, v (and the positional term's operands,
  // and in backward dO) rounded to bf16 (docs/precision.md). They are kept for
  // backward as bf16 tensors (half the memory). A device that takes bf16
  // operands (RsaFusedProblem::bf16_operands: the CPU, which widens them as it
  // reads them, P and dS in f32; CUDA's tensor-core kernels, P and dS rounded
  // to bf16 for their products) gets them as they are; elsewhere they are
  // widened to f32 copies for each kernel call (exact).
  const bool bf16 = autocast_precision() == Precision::bf16 && dt == DType::f32;
  if (bf16) {
    RsaFusedProblem b = fp;
    b.bf16_operands = true;
    fp.bf16_operands = supports(dev, OpKind::fused_rsa, {dt, &b});
  }
  const bool native = fp.bf16_operands;
  auto operand = [bf16](const Tensor& t) {
    return bf16 ? t.detach().to(DType::bf16) : t.detach().contiguous();
  };
  auto wide = [native](const Tensor& t) { return native ? t : wide_f32(t); };
  Tensor qc = operand(q), kc = operand(k), vc = operand(v);
  Tensor pqc = pos ? operand(opt.pos_q) : Tensor(), prc = pos ? operand(opt.pos_r) : Tensor();
  Tensor qf = wide(qc), kf = wide(kc), vf = wide(vc), pqf = wide(pqc), prf = wide(prc);
  if (pos) {
    fp.pos_q = pqf.raw_data();
    fp.pos_r = prf.raw_data();
  }
  Tensor Y, vr, Oatt_r, gsd = gs.defined() ? gs.detach() : Tensor();
  {
    NoGradGuard ng;
    if (s.Hr > 0) {
      vr = v.slice(1, 0, s.Hr).slice(2, scan_from, s.Lk);
      if (keep.defined()) vr = mul(vr, keep.slice(2, scan_from, s.Lk));
      vr = vr.contiguous();
      Y = scan_op(spec, hp, vr, s.Lq, state_in, opt.carry ? state_out : nullptr);
      Oatt_r = make_tensor({s.B, s.Hr, s.Lq, s.D}, dt, dev);
    }
  }
  Tensor O = make_tensor({s.B, s.H, s.Lq, s.D}, dt, dev);
  Tensor lse = make_tensor({s.B, s.H, s.Lq}, dt, dev);
  RsaForwardArgs fa;
  fa.dt = dt;
  fa.p = fp;
  fa.q = qf.raw_data();
  fa.k = kf.raw_data();
  fa.v = vf.raw_data();
  fa.gs = opt_ptr(gsd);
  fa.Y = opt_ptr(Y);
  fa.O = O.raw_data();
  fa.Oatt_r = opt_ptr(Oatt_r);
  fa.lse = lse.raw_data();
  kern::rsa_forward(dev, fa);
  if (drop) gen.advance(uint64_t(s.B * s.H * s.Lq * s.Lk));
  if (!any_requires_grad({q, k, v, hp.a, hp.theta, gs, attn_mask, opt.pos_q, opt.pos_r})) return O;

  auto desc = std::make_shared<std::vector<RemHeadDesc>>(hp.desc);
  RemProblem p = problem(spec, hp, s.B, s.Lq, s.Lk - scan_from, s.D);
  Tensor a_d = hp.a.defined() ? hp.a.detach() : Tensor();
  Tensor t_d = hp.theta.defined() ? hp.theta.detach() : Tensor();
  Tensor vrd = vr.defined() ? vr.detach() : Tensor();
  Tensor Od = O.detach();  // not O itself: the node must not own its output
  const bool has_bias = attn_mask.defined() && attn_mask.requires_grad();
  const Shape bias_shape = has_bias ? attn_mask.shape() : Shape{};
  return record(
      "rsa_attention", {q, k, v, hp.a, hp.theta, gs, attn_mask, opt.pos_q, opt.pos_r}, O,
      [=](std::vector<Tensor>& g) {
        RemProblem pp = p;
        pp.heads = desc->data();
        Tensor dO = g[0].contiguous();
        // The kernel's dO: bf16 values (as bf16 for a device that takes them).
        Tensor dOk = native ? dO.to(DType::bf16) : bf16 ? unary_raw(UnaryOp::round_bf16, dO) : dO;
        Tensor dgs, da, dth, dvr;
        if (s.Hr > 0) {
          // REM heads: dY = g dO, dg = sum dO (Y - O_att); the kernels take (1 - g) dO.
          Tensor dOr = dO.slice(1, 0, s.Hr);
          // Over the trailing dims first (contiguous rows), then over B: one
          // reduction over {0, 2, 3} would first copy the product into [Hr, B, L, D].
          dgs = sum(sum(mul(dOr, sub(Y, Oatt_r)), {2, 3}), {0});
          Tensor dY = mul(dOr, gsd.reshape({1, s.Hr, 1, 1})).contiguous();
          dvr = make_tensor(vrd.shape(), dt, dev);
          da = make_tensor({s.Hr}, dt, dev);
          dth = make_tensor({s.Hr}, dt, dev);
          kern::rem_scan_backward(dev, scan_backward_args(pp, a_d, t_d, vrd, state_in, dY, dvr,
                                                          da, dth, Tensor()));
          if (keep.defined()) dvr = mul(dvr, keep.slice(2, scan_from, s.Lk));
        }
        Tensor dQ = make_tensor(qc.shape(), dt, dev), dK = make_tensor(kc.shape(), dt, dev),
               dV = make_tensor(vc.shape(), dt, dev);
        Tensor dS = has_bias ? make_tensor(score_shape, dt, dev) : Tensor();
        Tensor dPQ = pos ? make_tensor(pqc.shape(), dt, dev) : Tensor();
        Tensor dPRb = pos ? make_tensor({s.B, s.H, s.Lk, s.D}, dt, dev) : Tensor();  // per batch row
        const Tensor qw = wide(qc), kw = wide(kc), vw = wide(vc), pqw = wide(pqc), prw = wide(prc);
        RsaBackwardArgs ba;
        ba.dt = dt;
        ba.p = fp;
        if (pos) {
          ba.p.pos_q = pqw.raw_data();
          ba.p.pos_r = prw.raw_data();
        }
        ba.q = qw.raw_data();
        ba.k = kw.raw_data();
        ba.v = vw.raw_data();
        ba.gs = opt_ptr(gsd);
        ba.O = Od.raw_data();
        ba.Oatt_r = opt_ptr(Oatt_r);
        ba.lse = lse.raw_data();
        ba.dO = dOk.raw_data();
        ba.dq = dQ.raw_data();
        ba.dk = dK.raw_data();
        ba.dv = dV.raw_data();
        ba.dS = opt_ptr(dS);
        ba.dpos_q = opt_ptr(dPQ);
        ba.dpos_r = opt_ptr(dPRb);
        kern::rsa_backward(dev, ba);
        if (dvr.defined()) dV.slice(1, 0, s.Hr).slice(2, scan_from, s.Lk).add_(dvr);
        // The additive bias enters S unscaled: its gradient is dS summed to its shape.
        Tensor dbias = has_bias ? sum_to(dS, bias_shape) : Tensor();
        (void)bias;  // kept alive for fp.bias
        (void)kpb;   // kept alive for fp.kp_bias
        Tensor dPR = pos ? sum(dPRb, {0}) : Tensor();
        return std::vector<Tensor>{dQ, dK, dV, da, dth, dgs, dbias, dPQ, dPR};
      });
}

}  // namespace

RsaResult rsa_attention_reference(const RsaProblem& p) {
  const Tensor &q = p.q, &k = p.k, &v = p.v, &attn_mask = p.attn_mask, &key_padding = p.key_padding;
  const RemSpec& spec = p.rem.spec;
  const Tensor &eta = p.rem.eta, &nu = p.rem.nu, &theta = p.rem.theta, &mu = p.rem.mu;
  const RsaOptions& opt = p.opt;
  const RsaShapes s = check_rsa(q, k, v, spec, mu, opt);
  check_rsa_devices(q, k, v, eta, nu, theta, mu, attn_mask, key_padding, opt);
  if (check_position(s, q, opt)) {  // the positional term and the window as a bias
    RsaProblem rest = p;
    rest.attn_mask = composed_position_bias(s, q, attn_mask, opt, &rest.opt);
    return rsa_attention_reference(rest);
  }
  Tensor S = masked_scores(q, k, s.scale, attn_mask, key_padding);
  Tensor A;
  Tensor dead;  // fully masked rows [B, H, Lq, 1]: attention 0 (FlashAttention-2's rule)
  if (attn_mask.defined() || key_padding.defined()) {
    NoGradGuard ng;
    dead = eq(max(S.detach(), -1, true),
              Tensor::full({}, -std::numeric_limits<double>::infinity(), S.dtype(), S.device()));
    // With no dead row the masked path gives the same values; on the CPU it is
    // skipped (free to test), elsewhere taken (testing would be a host sync).
    if (S.device().is_cpu() && sum(dead).item() == 0) dead = Tensor();
  }
  if (dead.defined()) {
    // Scores of dead rows are replaced by 0 before the softmax (no NaN, no
    // gradient to them) and their probabilities by 0 after it.
    A = masked_fill(softmax(masked_fill(S, dead, 0.0), -1), dead, 0.0);
  } else {
    A = softmax(S, -1);
  }
  A = dropout(A, opt.dropout, opt.train, opt.gen);
  Tensor O = matmul(A, v);
  if (s.Hr == 0) return {O, Tensor()};
  Tensor Y, state_out;
  if (opt.carry) {  // the scan from the carried state over the current segment
    const int64_t M = s.Lk - s.Lq;
    Tensor kp = key_padding.defined() ? key_padding.slice(1, M, s.Lk) : Tensor();
    Y = rem_apply(spec, eta, nu, theta, v.slice(1, 0, s.Hr).slice(2, M, s.Lk), s.Lq, kp,
                  opt.rem_state_in.defined() ? opt.rem_state_in.detach() : Tensor(), &state_out);
  } else {
    Tensor P = rem_matrix(spec, eta, nu, theta, s.Lq, s.Lk, key_padding);  // [Hr|B,Hr, Lq, Lk]
    Y = matmul(P, v.slice(1, 0, s.Hr));
  }
  Tensor mixed = p.rem.gate_scale.defined()
                     ? add(O.slice(1, 0, s.Hr), mul(gate_value(p.rem, q).reshape({1, -1, 1, 1}),
                                                    sub(Y, O.slice(1, 0, s.Hr))))
                     : gate(O.slice(1, 0, s.Hr), Y, mu.reshape({1, -1, 1, 1}));
  if (s.Hr == s.H) return {mixed, state_out};
  return {cat({mixed, O.slice(1, s.Hr, s.H)}, 1), state_out};
}

namespace {

// The composed path: devices without fused kernels, problems they decline
// (more queries than keys); the reference's mathematics in one autograd node,
// with dropout's mask drawn once and regenerated in backward, keeping the
// [B, H, Lq, Lk] probabilities for backward.
Tensor rsa_composed(const RsaProblem& rp, const RsaPlan& plan, Tensor* state_out) {
  const RsaShapes& s = plan.s;
  const Tensor &q = rp.q, &k = rp.k, &v = rp.v, &attn_mask = rp.attn_mask, &key_padding = rp.key_padding;
  const RemSpec& spec = rp.rem.spec;
  const RsaOptions& opt = rp.opt;
  const HeadParams& hp = plan.hp;
  const Tensor &gs = plan.gs, &keep = plan.keep, &state_in = plan.state_in;
  const bool drop = plan.drop;
  Generator& gen = *plan.gen;
  const int64_t scan_from = plan.scan_from;
  const DType dt = q.dtype();
  const Device dev = q.device();
  Tensor A, O, Y, Oatt_r, vr;
  uint64_t drop_seed = 0, drop_offset = 0;
  {
    NoGradGuard ng;
    {
      Tensor S = masked_scores(q, k, s.scale, attn_mask, key_padding);
      A = softmax(S, -1);
      if (attn_mask.defined() || key_padding.defined()) A = zero_masked_rows(A, S);
    }
    Tensor Ad = A;
    if (drop) {
      // Same draws as dropout(): one mask of numel(A) counters, regenerated in backward.
      drop_seed = gen.seed();
      drop_offset = gen.advance(uint64_t(A.numel()));
      Tensor m = make_tensor(A.shape(), dt, dev);
      BernoulliMaskArgs ma;
      ma.dt = dt;
      ma.out = m.raw_data();
      ma.n = m.numel();
      ma.keep = 1 - opt.dropout;
      ma.scale = 1 / (1 - opt.dropout);
      ma.seed = drop_seed;
      ma.offset = drop_offset;
      backend(dev).bernoulli_mask(ma);
      Ad = mul(A, m);
    }
    O = matmul(Ad, v);  // [B, H, Lq, D], fresh and contiguous
    if (s.Hr > 0) {
      vr = v.slice(1, 0, s.Hr).slice(2, scan_from, s.Lk);
      if (keep.defined()) vr = mul(vr, keep.slice(2, scan_from, s.Lk));
      Y = scan_op(spec, hp, vr.contiguous(), s.Lq, state_in,
                  opt.carry ? state_out : nullptr);  // [B, Hr, Lq, D]
      Tensor Or = O.slice(1, 0, s.Hr);
      Oatt_r = Or.clone();
      // O_r = A V + s (Y - A V), in place on the REM heads' rows.
      Or.copy_(add(Oatt_r, mul(gs.reshape({1, s.Hr, 1, 1}), sub(Y, Oatt_r))));
    }
  }
  if (!any_requires_grad({q, k, v, hp.a, hp.theta, gs, attn_mask})) return O;

  Tensor qd = q.detach(), kd = k.detach(), vd = v.detach(), gsd = gs.defined() ? gs.detach() : Tensor();
  Tensor a_d = hp.a.defined() ? hp.a.detach() : Tensor(), t_d = hp.theta.defined() ? hp.theta.detach() : Tensor();
  auto desc = std::make_shared<std::vector<RemHeadDesc>>(hp.desc);
  RemProblem p = problem(spec, hp, s.B, s.Lq, s.Lk - scan_from, s.D);
  const double keep_p = 1 - opt.dropout;
  Tensor vrd = vr.defined() ? vr.detach().contiguous() : Tensor();
  const bool has_bias = attn_mask.defined() && attn_mask.requires_grad();
  const Shape bias_shape = has_bias ? attn_mask.shape() : Shape{};
  // bf16 autocast: the forward's products ran under it (matmul reads the mode);
  // the backward's products follow the forward's mode, whatever runs backward.
  const Precision prec = autocast_precision();
  return record(
      "rsa_attention", {q, k, v, hp.a, hp.theta, gs, attn_mask}, O,
      [=](std::vector<Tensor>& g) {
        AutocastGuard autocast(prec);
        RemProblem pp = p;
        pp.heads = desc->data();
        Tensor dO = g[0].contiguous();
        Tensor dOatt = dO, dgs, da, dth, dvr;
        if (s.Hr > 0) {
          // REM heads: dO_att = (1 - s) dO, dY = s dO, ds = sum dO (Y - O_att).
          Tensor dOr = dO.slice(1, 0, s.Hr);
          Tensor sr = gsd.reshape({1, s.Hr, 1, 1});
          // Over the trailing dims first (contiguous rows), then over B: one
          // reduction over {0, 2, 3} would first copy the product into [Hr, B, L, D].
          dgs = sum(sum(mul(dOr, sub(Y, Oatt_r)), {2, 3}), {0});
          Tensor dY = mul(dOr, sr).contiguous();
          dOatt = dO.clone();
          dOatt.slice(1, 0, s.Hr).copy_(mul(dOr, affine(sr, -1, 1)));
          dvr = make_tensor(vrd.shape(), vrd.dtype(), vrd.device());
          da = make_tensor({s.Hr}, vrd.dtype(), vrd.device());
          dth = make_tensor({s.Hr}, vrd.dtype(), vrd.device());
          kern::rem_scan_backward(vrd.device(), scan_backward_args(pp, a_d, t_d, vrd, state_in,
                                                                   dY, dvr, da, dth, Tensor()));
          if (keep.defined()) dvr = mul(dvr, keep.slice(2, scan_from, s.Lk));
        }
        Tensor Ad = A, m;
        if (drop) {
          m = make_tensor(A.shape(), A.dtype(), A.device());
          BernoulliMaskArgs ma;
          ma.dt = A.dtype();
          ma.out = m.raw_data();
          ma.n = m.numel();
          ma.keep = keep_p;
          ma.scale = 1 / keep_p;
          ma.seed = drop_seed;
          ma.offset = drop_offset;
          backend(A.device()).bernoulli_mask(ma);
          Ad = mul(A, m);
        }
        Tensor dV = matmul(Ad.transpose(-2, -1), dOatt);  // [B, H, Lk, D]
        if (dvr.defined()) dV.slice(1, 0, s.Hr).slice(2, scan_from, s.Lk).add_(dvr);
        Tensor dA = matmul(dOatt, vd.transpose(-2, -1));  // [B, H, Lq, Lk]
        if (drop) dA = mul(dA, m);
        Tensor dS = make_tensor(A.shape(), A.dtype(), A.device());
        const int64_t cols = s.Lk, rows = A.numel() / std::max<int64_t>(cols, 1);
        const Tensor dAc = dA.contiguous();
        SoftmaxBackwardArgs sb;
        sb.dt = A.dtype();
        sb.rows = rows;
        sb.cols = cols;
        sb.dy = dAc.raw_data();
        sb.y = A.raw_data();
        sb.dx = dS.raw_data();
        backend(A.device()).softmax_backward(sb);
        // The additive bias enters S unscaled: its gradient is dS summed to its shape.
        Tensor dbias = has_bias ? sum_to(dS, bias_shape) : Tensor();
        dS = affine(dS, s.scale, 0);
        Tensor dQ = matmul(dS, kd);
        Tensor dK = matmul(dS.transpose(-2, -1), qd);
        return std::vector<Tensor>{dQ, dK, dV, da, dth, dgs, dbias};
      });
}

// 16-bit inputs (bf16, f16): the attention and its REM scan compute in f32
// (their kernels take f32 and f64); widened here, the output narrowed back.
RsaResult rsa_widened(const RsaProblem& p) {
  auto f32 = [](const Tensor& t) { return t.defined() && is_half(t.dtype()) ? t.to(DType::f32) : t; };
  RsaProblem w = p;
  for (Tensor* t : {&w.q, &w.k, &w.v, &w.rem.eta, &w.rem.nu, &w.rem.theta, &w.rem.mu, &w.rem.gate_scale, &w.attn_mask,
                    &w.key_padding, &w.opt.rem_state_in, &w.opt.pos_q, &w.opt.pos_r})
    *t = f32(*t);
  RsaResult r = rsa_attention(w);
  r.out = r.out.to(p.q.dtype());
  return r;
}

// Transformer-XL's positional term and the causal window where the fused
// kernels do not take them: composed into one additive bias, then the
// composed path.
RsaResult rsa_positional(const RsaProblem& p, const RsaShapes& s) {
  RsaProblem rest = p;
  rest.attn_mask = composed_position_bias(s, p.q, p.attn_mask, p.opt, &rest.opt);
  return rsa_attention(rest);
}

}  // namespace

RsaResult rsa_attention(const RsaProblem& p) {
  if (p.q.defined() && is_half(p.q.dtype())) return rsa_widened(p);
  const RsaShapes s = check_rsa(p.q, p.k, p.v, p.rem.spec, p.rem.mu, p.opt);
  check_rsa_devices(p.q, p.k, p.v, p.rem.eta, p.rem.nu, p.rem.theta, p.rem.mu, p.attn_mask, p.key_padding,
                    p.opt);
  const bool position = check_position(s, p.q, p.opt);
  const RsaPlan plan = plan_rsa(p, s);
  RsaResult r;
  // The device's fused kernels (backends/cpu/cpu_attention.cpp,
  // backends/cuda/cuda_attention.cu) where it has them for this problem: no
  // [Lq, Lk] tensor kept for backward.
  r.out = rsa_fused(p, plan, &r.rem_state);
  if (r.out.defined()) return r;
  if (position) return rsa_positional(p, s);
  r.out = rsa_composed(p, plan, &r.rem_state);
  return r;
}

Tensor rsa_attention(const Tensor& q, const Tensor& k, const Tensor& v, const RemSpec& spec,
                     const Tensor& eta, const Tensor& nu, const Tensor& theta, const Tensor& mu,
                     const Tensor& attn_mask, const Tensor& key_padding, const RsaOptions& opt) {
  return rsa_attention(RsaProblem{q, k, v, RemWeights{spec, eta, nu, theta, mu}, attn_mask, key_padding, opt}).out;
}

Tensor rsa_attention(const Tensor& q, const Tensor& k, const Tensor& v, const RemWeights& rem,
                     const Tensor& attn_mask, const Tensor& key_padding, const RsaOptions& opt) {
  return rsa_attention(RsaProblem{q, k, v, rem, attn_mask, key_padding, opt}).out;
}

Tensor rsa_attention_reference(const Tensor& q, const Tensor& k, const Tensor& v,
                               const RemSpec& spec, const Tensor& eta, const Tensor& nu,
                               const Tensor& theta, const Tensor& mu, const Tensor& attn_mask,
                               const Tensor& key_padding, const RsaOptions& opt) {
  return rsa_attention_reference(
             RsaProblem{q, k, v, RemWeights{spec, eta, nu, theta, mu}, attn_mask, key_padding, opt})
      .out;
}

}  // namespace remora
