// SPDX-License-Identifier: BSD-3-Clause
// Fused neural-network ops: softmax, log_softmax, layer_norm, dropout,
// cross_entropy, rel_shift. Each has a one-pass forward and backward kernel.
#include "../backends/kernels.h"
#include "../core/autocast.h"
#include "../core/generator.h"
#include "internal.h"

namespace remora {

using namespace detail;

namespace {

// softmax / log_softmax over the last dim of a contiguous tensor; other dims
// are moved last first and moved back after.
Tensor softmax_impl(const Tensor& x, int64_t dim, bool log) {
  const char* name = log ? "log_softmax" : "softmax";
  check_defined(name, x, "x");
  check_floating(name, x);
  const int64_t d = wrap_dim(name, dim, x.dim());
  if (x.dim() > 0 && d != x.dim() - 1)
    return softmax_impl(x.transpose(d, -1), -1, log).transpose(d, -1);
  Tensor xc = x.contiguous();
  const int64_t cols = x.dim() ? x.size(-1) : 1, rows = cols ? x.numel() / cols : 0;
  Tensor y = make_tensor(x.shape(), x.dtype(), x.device());
  SoftmaxArgs sa;
  sa.dt = x.dtype();
  sa.rows = rows;
  sa.cols = cols;
  sa.x = xc.raw_data();
  sa.y = y.raw_data();
  sa.log = log;
  backend(x.device()).softmax(sa);
  if (!any_requires_grad({x})) return y;
  Tensor yd = y.detach();
  return record(name, {x}, y, [yd, rows, cols, log](std::vector<Tensor>& g) {
    Tensor gc = g[0].contiguous();
    Tensor dx = make_tensor(yd.shape(), yd.dtype(), yd.device());
    SoftmaxBackwardArgs sb;
    sb.dt = yd.dtype();
    sb.rows = rows;
    sb.cols = cols;
    sb.dy = gc.raw_data();
    sb.y = yd.raw_data();
    sb.dx = dx.raw_data();
    sb.log = log;
    backend(yd.device()).softmax_backward(sb);
    return std::vector<Tensor>{dx};
  });
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) { return softmax_impl(x, dim, false); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return softmax_impl(x, dim, true); }

Tensor layer_norm(const Tensor& x, const Tensor& w, const Tensor& b, double eps) {
  check_defined("layer_norm", x, "x");
  check_floating("layer_norm", x);
  REMORA_CHECK(x.dim() >= 1, "layer_norm: expected at least 1 dim, got a scalar");
  const int64_t D = x.size(-1), N = D ? x.numel() / D : 0;
  for (const Tensor* p : {&w, &b})
    if (p->defined()) {
      check_same("layer_norm", x, *p);
      REMORA_CHECK(p->dim() == 1 && p->size(0) == D,
                   "layer_norm: weight/bias must be [" << D << "] for input "
                                                       << shape_str(x.shape()) << ", got "
                                                       << shape_str(p->shape()));
    }
  REMORA_CHECK(!b.defined() || w.defined(), "layer_norm: a bias needs a weight too");
  REMORA_CHECK(eps >= 0, "layer_norm: eps must be >= 0, got " << eps);
  Tensor xc = x.contiguous();
  Tensor wc = w.defined() ? w.contiguous() : Tensor(), bc = b.defined() ? b.contiguous() : Tensor();
  Tensor y = make_tensor(x.shape(), x.dtype(), x.device());
  Tensor mean = make_tensor({N}, x.dtype(), x.device()), rstd = make_tensor({N}, x.dtype(), x.device());
  LayerNormArgs ln;
  ln.dt = x.dtype();
  ln.rows = N;
  ln.cols = D;
  ln.x = xc.raw_data();
  ln.w = wc.defined() ? wc.raw_data() : nullptr;
  ln.b = bc.defined() ? bc.raw_data() : nullptr;
  ln.eps = eps;
  ln.y = y.raw_data();
  ln.mean = mean.raw_data();
  ln.rstd = rstd.raw_data();
  backend(x.device()).layer_norm(ln);
  if (!any_requires_grad({x, w, b})) return y;
  // bf16 autocast: the input is kept for backward in bf16, centred first
  // ((x - mean) rounded once: half the memory of x, and the rounding is
  // relative to the row's spread rather than to its mean); backward widens it
  // and reads a zero mean.
  const bool centred = autocast_precision() == Precision::bf16 && x.dtype() == DType::f32;
  Tensor xd, md = mean;
  if (centred) {
    NoGradGuard ng;
    xd = sub(xc.reshape({N, D}), mean.reshape({N, 1})).to(DType::bf16).reshape(xc.shape());
    md = Tensor::zeros({N}, x.dtype(), x.device());
  } else {
    xd = xc.detach();
  }
  Tensor wd = wc.defined() ? wc.detach() : Tensor();
  const bool has_b = b.defined();
  return record("layer_norm", {x, w, b}, y, [xd, wd, md, rstd, N, D, has_b, centred](std::vector<Tensor>& g) {
    Tensor gc = g[0].contiguous();
    const Tensor xk = centred ? xd.to(DType::f32) : xd;
    Tensor dx = make_tensor(xk.shape(), xk.dtype(), xk.device());
    Tensor dw, db;
    if (wd.defined()) dw = make_tensor({D}, xk.dtype(), xk.device());
    if (has_b) db = make_tensor({D}, xk.dtype(), xk.device());
    else if (wd.defined()) db = make_tensor({D}, xk.dtype(), xk.device());  // scratch
    LayerNormBackwardArgs lb;
    lb.dt = xk.dtype();
    lb.rows = N;
    lb.cols = D;
    lb.dy = gc.raw_data();
    lb.x = xk.raw_data();
    lb.mean = md.raw_data();
    lb.rstd = rstd.raw_data();
    lb.w = wd.defined() ? wd.raw_data() : nullptr;
    lb.dx = dx.raw_data();
    lb.dw = dw.defined() ? dw.raw_data() : nullptr;
    lb.db = db.defined() ? db.raw_data() : nullptr;
    backend(xk.device()).layer_norm_backward(lb);
    return std::vector<Tensor>{dx, dw, has_b ? db : Tensor()};
  });
}

namespace {
// dx = dy * mask, the mask kept as bits (Backend::dropout_forward). Linear in
// dy, so its own backward is itself.
Tensor dropout_bits_backward(const Tensor& dy, const Tensor& bits, double scale) {
  Tensor src = dy.contiguous();
  Tensor dx = make_tensor(src.shape(), src.dtype(), src.device());
  DropoutBackwardArgs a;
  a.dt = src.dtype();
  a.dy = src.raw_data();
  a.dx = dx.raw_data();
  a.bits = static_cast<const uint64_t*>(bits.raw_data());
  a.n = src.numel();
  a.scale = scale;
  backend(src.device()).dropout_backward(a);
  if (!any_requires_grad({dy})) return dx;
  return record("dropout_backward", {dy}, dx, [bits, scale](std::vector<Tensor>& g) {
    return std::vector<Tensor>{dropout_bits_backward(g[0], bits, scale)};
  });
}

// Dropout's mask into out (contiguous): the composed form writes it as is,
// the fused kernel multiplies x by it in place of writing it.
BernoulliMaskArgs dropout_mask(const Tensor& out, double keep, double scale, uint64_t seed, uint64_t offset) {
  BernoulliMaskArgs a;
  a.dt = out.dtype();
  a.out = out.raw_data();
  a.n = out.numel();
  a.keep = keep;
  a.scale = scale;
  a.seed = seed;
  a.offset = offset;
  return a;
}
// y = x * mask (relu: relu(x) * mask) in one pass (x contiguous), the mask
// kept as bits (relu: the bits of the kept elements with x > 0).
Tensor dropout_fused(Backend& be, const Tensor& x, const BernoulliMaskArgs& mask, bool relu = false) {
  Tensor bits = make_tensor({(x.numel() + 63) / 64}, DType::i64, x.device());
  DropoutArgs a;
  a.mask = mask;
  a.x = x.raw_data();
  a.bits = static_cast<uint64_t*>(bits.raw_data());
  a.relu = relu;
  be.dropout_forward(a);
  return bits;
}
}  // namespace

Tensor dropout(const Tensor& x, double p, bool train, Generator* gen) {
  check_defined("dropout", x, "x");
  REMORA_CHECK(p >= 0 && p < 1, "dropout: p must be in [0, 1), got " << p);
  if (!train || p == 0) return x;
  check_floating("dropout", x);
  Generator& g = gen ? *gen : default_generator();
  const double keep = 1 - p, scale = 1 / (1 - p);
  const uint64_t seed = g.seed(), offset = g.advance(uint64_t(x.numel()));
  Backend& be = backend(x.device());
  Tensor src = x.contiguous();
  Tensor y = make_tensor(src.shape(), src.dtype(), src.device());
  const BernoulliMaskArgs mask = dropout_mask(y, keep, scale, seed, offset);
  if (!be.supports(OpKind::fused_dropout, {src.dtype()})) {
    // y's buffer becomes the mask (kept by mul for backward): no more memory
    // than the fused path's output.
    be.bernoulli_mask(mask);
    return mul(x, y);
  }
  // One pass, the mask kept as bits for backward (1/32 of an f32 mask tensor):
  Tensor bits = dropout_fused(be, src, mask);
  if (!any_requires_grad({x})) return y;
  return record("dropout", {x}, y, [bits, scale](std::vector<Tensor>& gr) {
    return std::vector<Tensor>{dropout_bits_backward(gr[0], bits, scale)};
  });
}

Tensor relu_dropout(const Tensor& x, double p, bool train, Generator* gen) {
  check_defined("relu_dropout", x, "x");
  REMORA_CHECK(p >= 0 && p < 1, "relu_dropout: p must be in [0, 1), got " << p);
  if (!train || p == 0) return relu(x);
  check_floating("relu_dropout", x);
  Generator& g = gen ? *gen : default_generator();
  const double keep = 1 - p, scale = 1 / (1 - p);
  Backend& be = backend(x.device());
  // The same counters as dropout(relu(x)): the same mask, the same y bit for bit.
  const uint64_t seed = g.seed(), offset = g.advance(uint64_t(x.numel()));
  if (!be.supports(OpKind::fused_dropout, {x.dtype()})) {
    // The composed form, same counters.
    Tensor m = make_tensor(x.shape(), x.dtype(), x.device());
    be.bernoulli_mask(dropout_mask(m, keep, scale, seed, offset));
    return mul(relu(x), m);
  }
  // One pass from x; a bit is set where the element is kept and x > 0, which
  // is the whole gradient: d relu_dropout = dy * bit * scale. The node keeps
  // the bits alone (1/32 of an f32 tensor), neither x nor y.
  Tensor y = make_tensor(x.shape(), x.dtype(), x.device());
  Tensor bits = dropout_fused(be, x.contiguous(), dropout_mask(y, keep, scale, seed, offset), /*relu=*/true);
  if (!any_requires_grad({x})) return y;
  return record("relu_dropout", {x}, y, [bits, scale](std::vector<Tensor>& gr) {
    return std::vector<Tensor>{dropout_bits_backward(gr[0], bits, scale)};
  });
}

Tensor cross_entropy(const Tensor& logits, const Tensor& target, int64_t ignore_index,
                     Reduction reduction, double label_smoothing) {
  REMORA_CHECK(label_smoothing >= 0 && label_smoothing <= 1,
               "cross_entropy: label_smoothing must be in [0, 1], got " << label_smoothing);
  if (label_smoothing != 0) return detail::cross_entropy_smoothed(logits, target, ignore_index, reduction,
                                                                  label_smoothing);
  check_defined("cross_entropy", logits, "logits");
  check_defined("cross_entropy", target, "target");
  check_floating("cross_entropy", logits);
  check_same_device("cross_entropy", logits, target);
  REMORA_CHECK(target.dtype() == DType::i64,
               "cross_entropy: target must hold i64 class indices, got " << target.str());
  REMORA_CHECK(logits.dim() >= 1, "cross_entropy: logits must be [..., C]");
  const int64_t C = logits.size(-1), N = C ? logits.numel() / C : 0;
  Shape expect(logits.shape().begin(), logits.shape().end() - 1);
  REMORA_CHECK(target.shape() == expect,
               "cross_entropy: target shape " << shape_str(target.shape()) << " does not match logits "
                                              << shape_str(logits.shape()) << " (expected "
                                              << shape_str(expect) << ")");
  Tensor tc = target.contiguous();
  // On the CPU the targets are checked and counted here (reading them is free).
  // Elsewhere that would be a host sync per call: the kernel checks them (a
  // bad target is an Error at the next sync, e.g. .item(); see the device
  // backend) and the mean divides by a count computed on the device.
  const bool host_check = logits.device().is_cpu();
  int64_t count = 0;
  Tensor dev_count;  // [] in the logits' dtype, off the CPU with Reduction::mean
  if (host_check) {
    const std::vector<int64_t> tv = tc.to_i64_vector();
    for (int64_t t : tv) {
      if (t == ignore_index) continue;
      REMORA_CHECK(t >= 0 && t < C, "cross_entropy: target " << t << " is out of range [0, " << C
                                                             << ") (ignore_index is " << ignore_index
                                                             << ")");
      ++count;
    }
  } else if (reduction == Reduction::mean) {
    NoGradGuard ng;
    dev_count = sum(ne(tc, Tensor::full({}, double(ignore_index), DType::i64, tc.device())))
                    .to(logits.dtype());
  }
  Tensor xc = logits.contiguous();
  Tensor loss = make_tensor(expect, logits.dtype(), logits.device());
  Tensor lse = make_tensor({N, 2}, logits.dtype(), logits.device());  // max, log-sum
  CrossEntropyArgs ce;
  ce.dt = logits.dtype();
  ce.rows = N;
  ce.cols = C;
  ce.logits = xc.raw_data();
  ce.target = tc.data_ptr<int64_t>();
  ce.ignore_index = ignore_index;
  ce.loss = loss.raw_data();
  ce.lse = lse.raw_data();
  backend(logits.device()).cross_entropy(ce);
  Tensor out;
  {
    NoGradGuard ng;
    if (reduction == Reduction::none) out = loss;
    else if (reduction == Reduction::sum) out = sum(loss);
    else if (host_check) out = affine(sum(loss), 1.0 / double(count), 0);  // count 0 gives NaN, as in PyTorch
    else out = div(sum(loss), dev_count);  // 0 / 0 = NaN likewise
  }
  if (!any_requires_grad({logits})) return out;
  Tensor xd = xc.detach();
  const Shape ls = logits.shape();
  return record("cross_entropy", {logits}, out,
                [xd, tc, lse, N, C, ignore_index, reduction, count, dev_count, expect,
                 ls](std::vector<Tensor>& g) {
                  // Per-row upstream gradient.
                  Tensor gr;
                  if (reduction == Reduction::none)
                    gr = g[0].contiguous();
                  else if (dev_count.defined())
                    gr = div(g[0], dev_count).expand(expect).contiguous();
                  else
                    gr = affine(g[0], reduction == Reduction::mean ? 1.0 / double(count) : 1.0, 0)
                             .expand(expect)
                             .contiguous();
                  Tensor dx = make_tensor(ls, xd.dtype(), xd.device());
                  CrossEntropyBackwardArgs cb;
                  cb.dt = xd.dtype();
                  cb.rows = N;
                  cb.cols = C;
                  cb.logits = xd.raw_data();
                  cb.target = tc.data_ptr<int64_t>();
                  cb.ignore_index = ignore_index;
                  cb.lse = lse.raw_data();
                  cb.g = gr.raw_data();
                  cb.dx = dx.raw_data();
                  backend(xd.device()).cross_entropy_backward(cb);
                  return std::vector<Tensor>{dx};
                });
}

Tensor rel_shift(const Tensor& x, double scale, const Tensor& bias) {
  check_defined("rel_shift", x, "x");
  check_floating("rel_shift", x);
  REMORA_CHECK(x.dim() >= 2, "rel_shift: x must be [..., Lq, Lk], got " << shape_str(x.shape()));
  const int64_t Lq = x.size(-2), Lk = x.size(-1);
  const Shape lead(x.shape().begin(), x.shape().end() - 2);
  if (bias.defined()) {
    check_same("rel_shift", x, bias);
    REMORA_CHECK(bias.shape() == Shape({Lq, Lk}), "rel_shift: bias must be [Lq, Lk] = ["
                                                      << Lq << ", " << Lk << "], got "
                                                      << shape_str(bias.shape()));
  }
  Tensor xc = x.contiguous(), bc = bias.defined() ? bias.contiguous() : Tensor();
  Tensor out = make_tensor(x.shape(), x.dtype(), x.device());
  RelShiftArgs a;
  a.dt = x.dtype();
  a.N = shape_numel(lead);
  a.Lq = Lq;
  a.Lk = Lk;
  a.scale = scale;
  a.x = xc.raw_data();
  a.bias = bc.defined() ? bc.raw_data() : nullptr;
  a.out = out.raw_data();
  kern::rel_shift(x.device(), a);
  if (!any_requires_grad({x, bias})) return out;
  const bool gx = x.requires_grad(), gb = bias.defined() && bias.requires_grad();
  RelShiftBackwardArgs ba;  // the sizes; backward fills in the buffers
  ba.dt = a.dt;
  ba.N = a.N;
  ba.Lq = Lq;
  ba.Lk = Lk;
  ba.scale = scale;
  return record("rel_shift", {x, bias}, out, [ba, gx, gb](std::vector<Tensor>& g) {
    Tensor dx, db;
    if (gx) {
      Tensor gc = g[0].contiguous();
      dx = make_tensor(gc.shape(), gc.dtype(), gc.device());
      RelShiftBackwardArgs b = ba;
      b.dout = gc.raw_data();
      b.dx = dx.raw_data();
      kern::rel_shift_backward(gc.device(), b);
    }
    if (gb) db = sum_to(g[0], {ba.Lq, ba.Lk});
    return std::vector<Tensor>{dx, db};
  });
}

bool adam_step_(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v, const AdamStep& s) {
  const Device dev = p.device();
  // The composed step (the caller's) where the device has no fused one.
  if (!supports(dev, OpKind::fused_adam, {p.dtype()})) return false;
  for (const Tensor* t : {&g, &m, &v})
    if (!t->defined() || t->shape() != p.shape() || t->dtype() != p.dtype() || !(t->device() == dev))
      return false;
  if (!p.is_contiguous() || !m.is_contiguous() || !v.is_contiguous()) return false;
  Tensor gc = g.contiguous();
  AdamArgs a;
  a.dt = p.dtype();
  a.n = p.numel();
  a.s = s;
  a.p = p.raw_data();
  a.g = gc.raw_data();
  a.m = m.raw_data();
  a.v = v.raw_data();
  kern::adam(dev, a);
  return true;
}

}  // namespace remora
