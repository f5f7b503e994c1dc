// SPDX-License-Identifier: BSD-3-Clause
// matmul with broadcast batch dims, on the backend's strided-batched gemm.
#include <algorithm>

#include "../core/autocast.h"
#include "internal.h"

namespace remora {

using namespace detail;

namespace {

// How a [.., R, C] operand reaches gemm: its last two dims as a row-major
// matrix (trans = false, ld = row stride) or as the transpose of one
// (trans = true, ld = column stride), plus one stride over the flattened batch.
struct MatArg {
  Tensor t;  // the tensor whose memory is used (maybe a contiguous copy)
  bool trans = false;
  int64_t ld = 0;
  int64_t batch_stride = 0;
};

// Whether the batch dims (all but the last two) of t walk memory with one
// stride; returns it (0 when every batch dim is broadcast or of size 1).
bool single_batch_stride(const Tensor& t, int64_t* stride) {
  const int64_t nb = t.dim() - 2;
  int64_t expect = -1, s = 0;
  for (int64_t d = nb - 1; d >= 0; --d) {
    const int64_t n = t.shape()[size_t(d)], st = t.strides()[size_t(d)];
    if (n == 1) continue;
    if (expect < 0) {
      s = st;
      expect = st * n;
    } else if (st == expect) {
      expect = st * n;
    } else if (!(st == 0 && s == 0)) {
      return false;
    }
  }
  *stride = s;
  return true;
}

MatArg mat_arg(const Tensor& t) {
  const int64_t R = t.size(-2), C = t.size(-1);
  const int64_t sr = t.strides()[size_t(t.dim() - 2)], sc = t.strides()[size_t(t.dim() - 1)];
  MatArg m;
  int64_t bs = 0;
  if (single_batch_stride(t, &bs)) {
    if ((sc == 1 || C == 1) && (sr >= std::max<int64_t>(C, 1) || R == 1)) {
      m.t = t;
      m.trans = false;
      m.ld = R == 1 ? std::max<int64_t>(C, 1) : sr;
      m.batch_stride = bs;
      return m;
    }
    if ((sr == 1 || R == 1) && (sc >= std::max<int64_t>(R, 1) || C == 1)) {
      m.t = t;
      m.trans = true;
      m.ld = C == 1 ? std::max<int64_t>(R, 1) : sc;
      m.batch_stride = bs;
      return m;
    }
  }
  m.t = t.contiguous();
  m.trans = false;
  m.ld = std::max<int64_t>(C, 1);
  m.batch_stride = R * C;
  return m;
}

// out [batch..., M, N] (contiguous) = a @ b, with a [batch..., M, K] and
// b [batch..., K, N] already expanded to the same batch dims.
void gemm_into(const Tensor& a, const Tensor& b, const Tensor& out) {
  const int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1);
  int64_t sa = 0, sb = 0;
  if (a.dim() > 3 && (!single_batch_stride(a, &sa) || !single_batch_stride(b, &sb))) {
    // Batch dims that one stride cannot walk (XL's position term: [B, H, Lq, D]
    // @ [H, D, Lk] broadcast over B): one batched gemm per index of the first
    // batch dim rather than a copy of the expanded operand.
    for (int64_t i = 0; i < a.size(0); ++i) gemm_into(a.select(0, i), b.select(0, i), out.select(0, i));
    return;
  }
  const int64_t nbatch = out.numel() / (M * N);  // the caller returned early on an empty out
  MatArg A = mat_arg(a), B = mat_arg(b);
  int64_t m = M, batch_count = nbatch;
  // [B, M, K] @ [K, N] (B broadcast): one gemm with B*M rows, far faster.
  if (nbatch > 1 && B.batch_stride == 0 && !A.trans && A.batch_stride == M * A.ld) {
    m = M * nbatch;
    batch_count = 1;
  }
  GemmArgs g;
  g.dt = a.dtype();
  g.ta = A.trans;
  g.tb = B.trans;
  g.m = m;
  g.n = N;
  g.k = K;
  g.alpha = 1.0;
  g.a = A.t.raw_data();
  g.lda = A.ld;
  g.stride_a = A.batch_stride;
  g.b = B.t.raw_data();
  g.ldb = B.ld;
  g.stride_b = B.batch_stride;
  g.beta = 0.0;
  g.c = out.raw_data();
  g.ldc = N;
  g.stride_c = M * N;
  g.batch = batch_count;
  g.c_f32 = is_half(a.dtype()) && out.dtype() == DType::f32;
  backend(a.device()).gemm(g);
}

// a [..., M, K] @ b [..., K, N], both >= 2-D, no autograd. 16-bit operands
// give an f32 result when out_f32 (autocast), else one of their dtype.
Tensor matmul_raw(const Tensor& a, const Tensor& b, bool out_f32 = false) {
  const int64_t M = a.size(-2), K = a.size(-1), K2 = b.size(-2), N = b.size(-1);
  REMORA_CHECK(K == K2, "matmul: inner dims differ: " << shape_str(a.shape()) << " @ "
                                                      << shape_str(b.shape()) << " (" << K
                                                      << " vs " << K2 << ")");
  const Shape ab(a.shape().begin(), a.shape().end() - 2), bb(b.shape().begin(), b.shape().end() - 2);
  Shape batch = broadcast_shapes("matmul", ab, bb);
  Shape out_shape = batch;
  out_shape.push_back(M);
  out_shape.push_back(N);
  Tensor out = make_tensor(out_shape, out_f32 ? DType::f32 : a.dtype(), a.device());
  if (out.numel() == 0) return out;
  if (K == 0) return out.fill_(0);

  Shape ea = batch, eb = batch;
  ea.push_back(M); ea.push_back(K);
  eb.push_back(K); eb.push_back(N);
  gemm_into(a.expand(ea), b.expand(eb), out);
  return out;
}

// t as a bf16 tensor, no autograd (t itself when bf16 already). A contiguous
// or transposed-contiguous t keeps its layout.
Tensor bf16_operand(const Tensor& t) {
  if (t.dtype() == DType::bf16) return t;
  const Tensor d = t.detach();
  if (d.dim() >= 2 && !d.is_contiguous() && d.transpose(-2, -1).is_contiguous())
    return d.transpose(-2, -1).to(DType::bf16).transpose(-2, -1);
  return d.to(DType::bf16);  // (a contiguous copy of a strided view)
}

// The product of autocast: bf16 operands (converted unless they are bf16
// already), f32 accumulation and result; else matmul_raw.
Tensor matmul_prec(const Tensor& a, const Tensor& b, bool bf16) {
  if (!bf16) return matmul_raw(a, b);
  return matmul_raw(bf16_operand(a), bf16_operand(b), true);
}

// A parameter: a leaf that requires grad (what the optimizer updates). It stays
// alive between forward and backward whatever the graph keeps.
bool is_parameter(const Tensor& t) { return t.defined() && t.is_leaf() && t.requires_grad(); }

// matmul with, for bf16 autocast, which operands are parameters: a parameter's
// f32 tensor is kept for backward and rounded again there (the same bf16
// values), so no bf16 copy of the weights stays alive between forward and
// backward; other operands are kept as the bf16 copies the product took.
Tensor matmul_impl(const Tensor& a_in, const Tensor& b_in, bool a_param, bool b_param) {
  check_defined("matmul", a_in, "a");
  check_defined("matmul", b_in, "b");
  check_same("matmul", a_in, b_in);
  check_floating("matmul", a_in);
  REMORA_CHECK(a_in.dim() >= 1 && b_in.dim() >= 1,
               "matmul: both operands need at least 1 dim, got " << shape_str(a_in.shape())
                                                                 << " and "
                                                                 << shape_str(b_in.shape()));
  // NumPy promotion of 1-D operands, undone on the result.
  const bool va = a_in.dim() == 1, vb = b_in.dim() == 1;
  Tensor a = va ? a_in.unsqueeze(0) : a_in;
  Tensor b = vb ? b_in.unsqueeze(-1) : b_in;
  // bf16 autocast: f32 only (f64 is never lowered), decided now for backward too.
  const bool bf16 = autocast_precision() == Precision::bf16 && a.dtype() == DType::f32;
  const Tensor a16 = bf16 ? bf16_operand(a) : Tensor(), b16 = bf16 ? bf16_operand(b) : Tensor();
  Tensor out = bf16 ? matmul_raw(a16, b16, true) : matmul_raw(a, b);
  if (any_requires_grad({a, b})) {
    const bool ga = a.requires_grad(), gb = b.requires_grad();
    // Under bf16 the operands are saved as the bf16 tensors the product took
    // (half the memory of f32 activations between forward and backward), a
    // parameter as itself (matmul_impl).
    Tensor ad = gb ? (bf16 && !a_param ? a16 : a.detach()) : Tensor(),
           bd = ga ? (bf16 && !b_param ? b16 : b.detach()) : Tensor();
    const Shape sa = a.shape(), sb = b.shape();
    // b a transposed contiguous matrix (a linear layer's weight.t()).
    const bool b_t = b.dim() == 2 && !b.is_contiguous() && b.transpose(0, 1).is_contiguous();
    out = record("matmul", {a, b}, out, [ad, bd, ga, gb, sa, sb, bf16, b_t](std::vector<Tensor>& g) {
      Tensor da, db;
      // Under bf16 the incoming gradient is converted once for both products.
      const Tensor dc = bf16 ? bf16_operand(g[0]) : g[0];
      // dA = dC @ B^T, dB = A^T @ dC (transposes go to BLAS as flags).
      if (ga) da = sum_to(matmul_prec(dc, bd.transpose(-2, -1), bf16), sa);
      if (gb && sb.size() == 2) {
        // A 2-D b (broadcast over a's batch: a linear layer's weight): one gemm
        // over the stacked rows, A^T [K, B*M] @ dC [B*M, N], instead of B gemms
        // into a [B, K, N] buffer and a sum over B.
        // With b = w.t(), dC^T A [N, K] is computed instead, so that w's gradient
        // (its transpose) arrives contiguous and its leaf takes it without a copy.
        const int64_t K = sa.back(), N = sb.back(), rows = shape_numel(Shape(sa.begin(), sa.end() - 1));
        const Tensor a2 = ad.reshape({rows, K}), dc2 = dc.reshape({rows, N});
        if (b_t)
          db = matmul_prec(dc2.transpose(0, 1), a2, bf16).transpose(0, 1);
        else
          db = matmul_prec(a2.transpose(0, 1), dc2, bf16);
      } else if (gb) {
        db = sum_to(matmul_prec(ad.transpose(-2, -1), dc, bf16), sb);
      }
      return std::vector<Tensor>{da, db};
    });
  }
  if (va) out = out.squeeze(-2);
  if (vb) out = out.squeeze(-1);
  return out;
}
}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) { return matmul_impl(a, b, is_parameter(a), is_parameter(b)); }

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  check_defined("linear", x, "x");
  check_defined("linear", w, "weight");
  check_devices("linear", {x, w, b}, {"input", "weight", "bias"});
  REMORA_CHECK(w.dim() == 2 && x.dim() >= 1 && x.size(-1) == w.size(1),
               "linear: input " << shape_str(x.shape()) << " does not fit weight "
                                << shape_str(w.shape()) << " (expected [..., " 
                                << (w.dim() == 2 ? w.size(1) : -1) << "] for weight [out, in])");
  Tensor y = matmul_impl(x, w.t(), is_parameter(x), is_parameter(w));
  if (!b.defined()) return y;
  REMORA_CHECK(b.dim() == 1 && b.size(0) == w.size(0),
               "linear: bias " << shape_str(b.shape()) << " does not fit weight " << shape_str(w.shape()));
  check_same("linear", y, b);
  // y + b, added into y in place: y is the product's fresh output, which its
  // backward does not keep, so no second tensor of the output's size is made
  // (at a feed-forward's first layer that second tensor would be the step's
  // peak of memory). Recorded as the add it is: the same values and gradients.
  Tensor out = y.detach();
  {
    NoGradGuard ng;
    out.add_(b);
  }
  if (!any_requires_grad({y, b})) return out;
  const Shape bs = b.shape();
  return record("add", {y, b}, out, [bs](std::vector<Tensor>& g) {
    return std::vector<Tensor>{g[0], sum_to(g[0], bs)};
  });
}

}  // namespace remora
