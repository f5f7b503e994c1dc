// Fused RSA attention on the CPU (the RsaKernels table of backends/kernels.h):
// the same contract as the CUDA kernels (backends/cuda/cuda_attention.cu),
// worked out per (batch, head) so that everything of size Lq x Lk lives one
// block of query rows at a time in a thread's cache.
//
// A task is one head (b, h). For each block of up to kRows query rows i0..i1
// that see keys [0, kl):
//   forward   S = scale q_blk k[:kl]^T          one single-threaded BLAS gemm
//             P = softmax(S + bias + kp) rowwise, lse kept    (one fused row pass)
//             O_att_blk = (P * dropmask) v[:kl]               (gemm)
//             REM heads: O = O_att + g (Y - O_att)
//   backward  P = exp(scale q k^T + bias + kp - lse)          (recomputed: gemm)
//             dV[:kl] += f (P * mask)^T dO_blk                (gemm, beta = 1)
//             dP = f dO_blk v[:kl]^T * mask                   (gemm)
//             dS = P (dP - D_i),  D_i = f rowsum(dO * O_att)
//             dQ_blk = scale dS k[:kl];  dK[:kl] += scale dS^T q_blk   (gemms)
// with f = 1 - g on REM heads (their softmax part is (1 - g) of the output)
// and 1 elsewhere. Nothing of size Lq x Lk is stored between forward and
// backward (only lse, [B, H, Lq]), as in FlashAttention; unlike it, a whole
// block row of scores is formed at once (the CPU's caches hold it), so the
// softmax needs no running rescale.
//
// Causal skipping: kl is 1 + the last column of the block's rows whose bias
// is not -inf (exp(-inf) = 0, so the rest contributes nothing); a bias shared
// by every head is scanned once. Fully masked rows follow FlashAttention-2:
// O_att = 0, lse = +inf, no gradient.
//
// Threads: the heads (forward: head-blocks) are split statically over the
// pool; each BLAS call runs single-threaded inside its task, so a head's
// products, softmax and mixing run back to back on one core with no barrier
// between them. The composed path of ops/rsa.cpp (rsa_attention_reference) is
// the reference; tests/test_ops.cpp and the gradient checks hold this one to it.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "../../core/error.h"
#include "../../core/parallel.h"
#include "../kernels.h"
#include "../philox.h"
#include "cpu_backend.h"
#include "vec_math.h"

namespace remora {

namespace {

// Query rows per block: a block of scores (kRows x Lk) stays in L2 up to
// Lk ~ 1k, and the gemms stay large enough for BLAS's kernels.
constexpr int64_t kRows = 64;

#define REMORA_ATT_INLINE __attribute__((always_inline)) inline

// ---- the row passes, one row of n <= Lk scores ----

// The bias row (element stride bstride) and the key-padding row, either null.
template <typename T>
struct Extra {
  const T* bias = nullptr;
  int64_t bstride = 1;
  const T* kp = nullptr;
  REMORA_ATT_INLINE T at(int64_t j) const {
    T e = 0;
    if (bias) e += bias[j * bstride];
    if (kp) e += kp[j];
    return e;
  }
};

// s += extra; then s = exp(s - max) in place (unnormalised: the caller
// scales O's rows by 1 / sum instead of every probability). Returns the row's
// log-sum-exp, +inf for a fully masked row (whose entries are then all 0).
// The sum runs in T per chunk of 256 and in double across chunks.
template <typename T>
REMORA_ATT_INLINE T exp_lse_row(T* s, int64_t n, const Extra<T>& x, T* inv) {
  T mx = -INFINITY;
  if (x.bias && x.bstride == 1 && !x.kp) {
    const T* bias = x.bias;
#pragma omp simd reduction(max : mx)
    for (int64_t j = 0; j < n; ++j) {
      s[j] += bias[j];
      mx = s[j] > mx ? s[j] : mx;
    }
  } else if (x.bias || x.kp) {
    for (int64_t j = 0; j < n; ++j) {
      s[j] += x.at(j);
      mx = s[j] > mx ? s[j] : mx;
    }
  } else {
#pragma omp simd reduction(max : mx)
    for (int64_t j = 0; j < n; ++j) mx = s[j] > mx ? s[j] : mx;
  }
  if (!(mx > -INFINITY)) {  // every score -inf or NaN (the max skips NaN)
    for (int64_t j = 0; j < n; ++j)
      if (s[j] != s[j]) {  // a NaN from the inputs is not hidden: the row stays NaN
        *inv = s[j];
        std::fill(s, s + n, s[j]);
        return s[j];
      }
    std::memset(s, 0, size_t(n) * sizeof(T));  // an empty row: attention 0
    *inv = 0;
    return T(INFINITY);
  }
  double l = 0;
  for (int64_t j0 = 0; j0 < n; j0 += 256) {
    const int64_t j1 = std::min(n, j0 + 256);
    T c = 0;
#pragma omp simd reduction(+ : c)
    for (int64_t j = j0; j < j1; ++j) {
      s[j] = vec::vexp_nonpos(s[j] - mx);
      c += s[j];
    }
    l += double(c);
  }
  *inv = T(1.0 / l);
  return mx + T(std::log(l));
}

// s = exp(s + extra - lse) in place (the probabilities again, from lse).
template <typename T>
REMORA_ATT_INLINE void prob_row(T* s, int64_t n, const Extra<T>& x, T lse) {
  if (x.bias && x.bstride == 1 && !x.kp) {
    const T* bias = x.bias;
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) s[j] = vec::vexp_nonpos(s[j] + bias[j] - lse);
  } else if (x.bias || x.kp) {
    for (int64_t j = 0; j < n; ++j) s[j] = vec::vexp_nonpos(s[j] + x.at(j) - lse);
  } else {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) s[j] = vec::vexp_nonpos(s[j] - lse);
  }
}

// dp = p (dp - di) in place; 0 where p = 0 (masked or dead: no gradient).
template <typename T>
REMORA_ATT_INLINE void dscore_row(T* dp, const T* p, int64_t n, T di) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) dp[j] = p[j] > T(0) ? p[j] * (dp[j] - di) : T(0);
}

template <typename T>
struct RowFns {
  T (*exp_lse)(T* s, int64_t n, const Extra<T>& x, T* inv);
  void (*prob)(T* s, int64_t n, const Extra<T>& x, T lse);
  void (*dscore)(T* dp, const T* p, int64_t n, T di);
};
template <typename T>
const RowFns<T>& row_fns() {
  static const RowFns<T> f{&exp_lse_row<T>, &prob_row<T>, &dscore_row<T>};
  return f;
}
// f32 rows also compiled for AVX2 + FMA, picked once (as cpu_rows.cpp does;
// REMORA_CPU_BASELINE=1 forces the baseline copy). f64 stays baseline.
#if defined(__GNUC__) && defined(__x86_64__)
__attribute__((target("avx2,fma"))) float exp_lse_avx2(float* s, int64_t n,
                                                         const Extra<float>& x, float* inv) {
  return exp_lse_row(s, n, x, inv);
}
__attribute__((target("avx2,fma"))) void prob_avx2(float* s, int64_t n, const Extra<float>& x,
                                                    float lse) {
  prob_row(s, n, x, lse);
}
__attribute__((target("avx2,fma"))) void dscore_avx2(float* dp, const float* p, int64_t n,
                                                      float di) {
  dscore_row(dp, p, n, di);
}
template <>
const RowFns<float>& row_fns<float>() {
  static const RowFns<float> f = [] {
    __builtin_cpu_init();
    if (!cpu_impl::force_baseline_isa() && __builtin_cpu_supports("avx2") &&
        __builtin_cpu_supports("fma"))
      return RowFns<float>{&exp_lse_avx2, &prob_avx2, &dscore_avx2};
    return RowFns<float>{&exp_lse_row<float>, &prob_row<float>, &dscore_row<float>};
  }();
  return f;
}
#endif

// ---- single-threaded BLAS on row-major operands ----

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              int(m), int(n), int(k), alpha, a, int(lda), b, int(ldb), beta, c, int(ldc));
}
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
          int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              int(m), int(n), int(k), alpha, a, int(lda), b, int(ldb), beta, c, int(ldc));
}

// ---- the problem as the tasks see it ----

template <typename T>
struct Att {
  const RsaFusedProblem& p;
  const T* bias;
  const T* kp;
  std::vector<int64_t> shared_ext;  // [Lq] when the bias is shared by every head, else empty

  explicit Att(const RsaFusedProblem& pr)
      : p(pr), bias(static_cast<const T*>(pr.bias)), kp(static_cast<const T*>(pr.kp_bias)) {
    if (bias && p.bias_strides[0] == 0 && p.bias_strides[1] == 0) {
      shared_ext.resize(size_t(p.Lq));
      for (int64_t i = 0; i < p.Lq; ++i) shared_ext[size_t(i)] = row_ext(bias, i);
    }
  }
  const T* bias_row(int64_t b, int64_t h, int64_t i) const {
    return bias + b * p.bias_strides[0] + h * p.bias_strides[1] + i * p.bias_strides[2];
  }
  // 1 + the last column of row i (of the head whose bias starts at `hb`) that is not -inf.
  int64_t row_ext(const T* hb, int64_t i) const {
    const T* r = hb + i * p.bias_strides[2];
    int64_t j = p.Lk;
    while (j > 0 && std::isinf(r[(j - 1) * p.bias_strides[3]]) && r[(j - 1) * p.bias_strides[3]] < 0)
      --j;
    return j;
  }
  // The keys rows [i0, i1) of head (b, h) see: [0, kl).
  int64_t keys(int64_t b, int64_t h, int64_t i0, int64_t i1) const {
    if (!bias) return p.Lk;
    int64_t kl = 0;
    if (!shared_ext.empty()) {
      for (int64_t i = i0; i < i1; ++i) kl = std::max(kl, shared_ext[size_t(i)]);
    } else {
      const T* hb = bias_row(b, h, 0);
      for (int64_t i = i0; i < i1 && kl < p.Lk; ++i) kl = std::max(kl, row_ext(hb, i));
    }
    return kl;
  }
  Extra<T> extra(int64_t b, int64_t h, int64_t i) const {
    Extra<T> x;
    if (bias) {
      x.bias = bias_row(b, h, i);
      x.bstride = p.bias_strides[3];
    }
    if (kp) x.kp = kp + b * p.Lk;
    return x;
  }
  // Multiplies a block of scores [rows i0.., kl keys, leading dim ld] by the
  // dropout factors of head bh (bernoulli_mask's counters over [B, H, Lq, Lk]).
  void apply_dropout(T* s, int64_t ld, int64_t bh, int64_t i0, int64_t rows, int64_t kl) const {
    const double keep = 1 - p.dropout;
    const T inv = T(1.0 / keep);
    for (int64_t r = 0; r < rows; ++r) {
      const uint64_t base = uint64_t((bh * p.Lq + i0 + r) * p.Lk);
      T* row = s + r * ld;
      for (int64_t j = 0; j < kl; ++j)
        row[j] *= philox::uniform(philox::philox(p.seed, p.offset + base + uint64_t(j))) < keep
                      ? inv
                      : T(0);
    }
  }
};

// Scratch of the calling thread, kept between calls (each pool thread keeps
// its own): the score blocks, at most 3 kRows Lk + kRows elements, so a training step reuses it instead of
// faulting fresh pages in on every call. It is released when a call needs
// less than a quarter of it, so one long sequence does not pin it forever.
template <typename T>
T* thread_scratch(int64_t n) {
  thread_local std::vector<unsigned char> buf;
  const size_t bytes = size_t(std::max<int64_t>(n, 1)) * sizeof(T) + 64;
  if (buf.size() < bytes || buf.size() > 4 * bytes) {
    std::vector<unsigned char>().swap(buf);
    buf.resize(bytes);
  }
  void* p = buf.data();
  size_t space = buf.size();
  return static_cast<T*>(std::align(64, sizeof(T), p, space));
}

template <typename T>
void forward(const RsaForwardArgs& a) {
  const RsaFusedProblem& p = a.p;
  const Att<T> att(p);
  const RowFns<T>& rf = row_fns<T>();
  const int64_t D = p.D, Lq = p.Lq, Lk = p.Lk;
  const int64_t nblk = (Lq + kRows - 1) / kRows, tasks = p.B * p.H * nblk;
  const T* Q = static_cast<const T*>(a.q);
  const T* K = static_cast<const T*>(a.k);
  const T* V = static_cast<const T*>(a.v);
  const T* G = static_cast<const T*>(a.gs);
  const T* Y = static_cast<const T*>(a.Y);
  T* O = static_cast<T*>(a.O);
  T* OR = static_cast<T*>(a.Oatt_r);
  T* LSE = static_cast<T*>(a.lse);
  const T scale = T(p.scale);
  const bool drop = p.dropout > 0;
  parallel_team(int(std::min<int64_t>(tasks, pool_threads())), [&](int t, int n) {
    int64_t first, last;
    static_range(tasks, t, n, &first, &last);
    if (first >= last) return;
    T* s = thread_scratch<T>(kRows * Lk + kRows);
    T* inv = s + kRows * Lk;  // 1 / row sum
    for (int64_t task = first; task < last; ++task) {
      const int64_t bh = task / nblk, b = bh / p.H, h = bh % p.H;
      const int64_t i0 = (task % nblk) * kRows, rows = std::min(kRows, Lq - i0);
      const T* q = Q + (bh * Lq + i0) * D;
      const T* k = K + bh * Lk * D;
      const T* v = V + bh * Lk * D;
      const bool rem = h < p.Hr;
      T* oa = rem ? OR + ((b * p.Hr + h) * Lq + i0) * D : O + (bh * Lq + i0) * D;
      T* lse = LSE + bh * Lq + i0;
      const int64_t kl = att.keys(b, h, i0, i0 + rows);
      if (kl == 0) {  // every row fully masked
        std::fill(oa, oa + rows * D, T(0));
        std::fill(lse, lse + rows, T(INFINITY));
      } else {
        gemm(false, true, rows, kl, D, scale, q, D, k, D, T(0), s, kl);
        for (int64_t r = 0; r < rows; ++r)
          lse[r] = rf.exp_lse(s + r * kl, kl, att.extra(b, h, i0 + r), inv + r);
        if (drop) att.apply_dropout(s, kl, bh, i0, rows, kl);
        gemm(false, false, rows, D, kl, T(1), s, kl, v, D, T(0), oa, D);
        for (int64_t r = 0; r < rows; ++r) {
          T* o = oa + r * D;
          const T c = inv[r];
#pragma omp simd
          for (int64_t d = 0; d < D; ++d) o[d] *= c;
        }
      }
      if (rem) {
        const T g = G[h];
        const T* y = Y + ((b * p.Hr + h) * Lq + i0) * D;
        T* o = O + (bh * Lq + i0) * D;
#pragma omp simd
        for (int64_t e = 0; e < rows * D; ++e) o[e] = oa[e] + g * (y[e] - oa[e]);
      }
    }
  });
}

template <typename T>
void backward(const RsaBackwardArgs& a) {
  const RsaFusedProblem& p = a.p;
  const Att<T> att(p);
  const RowFns<T>& rf = row_fns<T>();
  const int64_t D = p.D, Lq = p.Lq, Lk = p.Lk, BH = p.B * p.H;
  const T* Q = static_cast<const T*>(a.q);
  const T* K = static_cast<const T*>(a.k);
  const T* V = static_cast<const T*>(a.v);
  const T* G = static_cast<const T*>(a.gs);
  const T* O = static_cast<const T*>(a.O);
  const T* OR = static_cast<const T*>(a.Oatt_r);
  const T* LSE = static_cast<const T*>(a.lse);
  const T* dO = static_cast<const T*>(a.dO);
  T* dQ = static_cast<T*>(a.dq);
  T* dK = static_cast<T*>(a.dk);
  T* dV = static_cast<T*>(a.dv);
  T* dS = static_cast<T*>(a.dS);
  const T scale = T(p.scale);
  const bool drop = p.dropout > 0;
  parallel_team(int(std::min<int64_t>(BH, pool_threads())), [&](int t, int n) {
    int64_t first, last;
    static_range(BH, t, n, &first, &last);
    if (first >= last) return;
    T* P = thread_scratch<T>((drop ? 3 : 2) * kRows * Lk + kRows);
    T* dP = P + kRows * Lk;
    T* di = dP + kRows * Lk;  // [kRows]
    T* Pd = di + kRows;       // with dropout: P * mask
    for (int64_t bh = first; bh < last; ++bh) {
      const int64_t b = bh / p.H, h = bh % p.H;
      const bool rem = h < p.Hr;
      const T f = rem ? T(1) - G[h] : T(1);
      const T* k = K + bh * Lk * D;
      const T* v = V + bh * Lk * D;
      T* dk = dK + bh * Lk * D;
      T* dv = dV + bh * Lk * D;
      std::fill(dk, dk + Lk * D, T(0));
      std::fill(dv, dv + Lk * D, T(0));
      for (int64_t i0 = 0; i0 < Lq; i0 += kRows) {
        const int64_t rows = std::min(kRows, Lq - i0);
        const T* q = Q + (bh * Lq + i0) * D;
        const T* go = dO + (bh * Lq + i0) * D;
        const T* oa = rem ? OR + ((b * p.Hr + h) * Lq + i0) * D : O + (bh * Lq + i0) * D;
        const T* lse = LSE + bh * Lq + i0;
        T* dq = dQ + (bh * Lq + i0) * D;
        T* ds_out = dS ? dS + (bh * Lq + i0) * Lk : nullptr;
        const int64_t kl = att.keys(b, h, i0, i0 + rows);
        if (kl == 0) {
          std::fill(dq, dq + rows * D, T(0));
          if (ds_out) std::fill(ds_out, ds_out + rows * Lk, T(0));
          continue;
        }
        // D_i = f rowsum(dO * O_att): the softmax-backward row term.
        for (int64_t r = 0; r < rows; ++r) {
          const T* x = go + r * D;
          const T* y = oa + r * D;
          di[r] = T(f * vec::sum_f64(D, [x, y](int64_t d) { return x[d] * y[d]; }));
        }
        gemm(false, true, rows, kl, D, scale, q, D, k, D, T(0), P, kl);
        for (int64_t r = 0; r < rows; ++r) rf.prob(P + r * kl, kl, att.extra(b, h, i0 + r), lse[r]);
        const T* pv = P;  // the probabilities as they reached V (dropped out)
        if (drop) {
          std::copy(P, P + rows * kl, Pd);
          att.apply_dropout(Pd, kl, bh, i0, rows, kl);
          pv = Pd;
        }
        gemm(true, false, kl, D, rows, f, pv, kl, go, D, T(1), dv, D);
        gemm(false, true, rows, kl, D, f, go, D, v, D, T(0), dP, kl);
        if (drop) att.apply_dropout(dP, kl, bh, i0, rows, kl);
        for (int64_t r = 0; r < rows; ++r) rf.dscore(dP + r * kl, P + r * kl, kl, di[r]);
        if (ds_out)
          for (int64_t r = 0; r < rows; ++r) {
            std::copy(dP + r * kl, dP + (r + 1) * kl, ds_out + r * Lk);
            std::fill(ds_out + r * Lk + kl, ds_out + (r + 1) * Lk, T(0));
          }
        gemm(false, false, rows, D, kl, scale, dP, kl, k, D, T(0), dq, D);
        gemm(true, false, kl, D, rows, scale, dP, kl, q, D, T(1), dk, D);
      }
    }
  });
}

// Any head width and length in f32 and f64: the BLAS calls take int sizes.
bool supported(DType dt, const RsaFusedProblem& p) {
  constexpr int64_t kIntMax = (int64_t(1) << 31) - 1;
  return (dt == DType::f32 || dt == DType::f64) && p.D >= 1 && p.Lq >= 1 && p.Lk >= 1 &&
         p.Lk * std::max(p.D, kRows) <= kIntMax;
}

void rsa_forward(const RsaForwardArgs& a) {
  cpu_impl::dispatch_float(a.dt, "rsa_attention", [&](auto tag) { forward<decltype(tag)>(a); });
}
void rsa_backward(const RsaBackwardArgs& a) {
  cpu_impl::dispatch_float(a.dt, "rsa_attention backward",
                           [&](auto tag) { backward<decltype(tag)>(a); });
}

const RsaKernels kCpuRsa = {&supported, &rsa_forward, &rsa_backward, nullptr};
const bool g_registered = [] {
  register_kernels(DeviceType::cpu, &kCpuRsa);
  return true;
}();

}  // namespace

}  // namespace remora
