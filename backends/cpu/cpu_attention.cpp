// SPDX-License-Identifier: BSD-3-Clause
// Fused RSA attention on the CPU (the RsaKernels table of backends/kernels.h):
// the same contract as the CUDA kernels (backends/cuda/cuda_attention.cu),
// worked out per (batch, head) so that everything of size Lq x Lk lives one
// block of query rows at a time in a thread's cache.
//
// A task is one head (b, h). For each block of up to kRows query rows that
// see keys [0, kl):
//   forward   S = scale q_blk k[:kl]^T                          (product)
//             E = exp(S + bias + kp - max) rowwise, lse kept    (one fused row pass)
//             O_att_blk = (E * dropmask) v[:kl] / rowsum(E)     (product, then a row scale)
//             REM heads: O = O_att + g (Y - O_att)
//   backward  P = exp(scale q k^T + bias + kp - lse)            (recomputed: product)
//             dV[:kl] += f (P * mask)^T dO_blk
//             dP = f dO_blk v[:kl]^T * mask
//             dS = P (dP - D_i),  D_i = f rowsum(dO * O_att)
//             dQ_blk = scale dS k[:kl];  dK[:kl] += scale dS^T q_blk
// with f = 1 - g on REM heads (their softmax part is (1 - g) of the output)
// and 1 elsewhere. Nothing of size Lq x Lk is stored between forward and
// backward (only lse, [B, H, Lq]), as in FlashAttention; unlike it, a whole
// block row of scores is formed at once (the CPU's caches hold it), so the
// softmax needs no running rescale.
//
// The products: f32 on AVX2 + FMA runs sgemm_tiles below (6 x 16 register
// tiles over a head's K and V packed once), whose per-tile limits skip what
// the causal mask hides inside a block; f64 (the reference dtype) and other
// CPUs call OpenBLAS on whole blocks.
//
// Causal skipping: row r of a block sees keys [0, ext_r), ext_r being 1 + its
// last column whose bias is not -inf (exp(-inf) = 0, so the rest contributes
// nothing); kl is the block's largest. A bias shared by every head is scanned
// once, and when it is nothing but such a mask the row passes never read it.
// Fully masked rows follow FlashAttention-2: O_att = 0, lse = +inf, no gradient.
// A causal window given as numbers (RsaFusedProblem::causal, window) sets
// ext_r itself, and the keys before the window's start are -inf in the row.
//
// Transformer-XL's positional term (RsaFusedProblem::pos_q, pos_r): a block of
// rows i0 .. i0 + rows - 1 against keys [0, kl) needs the pos_r rows
// c = j + Lq - 1 - i, a band of kl + rows - 1 rows starting at Lq - i0 - rows.
// One product scale pos_q_blk band^T [rows, band] gives them all; row r's
// scores are its diagonal band[r, j + rows - 1 - r], added before the row
// pass. Backward recomputes it the same way and scatters dS back onto the
// band: d pos_q_blk = scale dB band, d band += scale dB^T pos_q_blk (per
// batch row; the op sums over B). The extra memory is one band per thread.
//
// Threads: the heads (forward: head-blocks) are split statically over the
// pool; every product runs single-threaded inside its task, so a head's
// products, softmax and mixing run back to back on one core with no barrier
// between them. The composed path (rsa_attention_reference, ops/rsa.cpp) is
// the reference: tests/test_rem.cpp, tests/test_cpu_kernels.cpp (f32, both
// ISAs) and the f64 gradient checks hold this one to it.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <memory>
#include <type_traits>
#include <vector>

#include "../../core/error.h"
#include "../../core/half.h"
#include "../../core/parallel.h"
#include "../kernels.h"
#include "../../core/philox.h"
#include "cpu_backend.h"
#include "cpu_sgemm.h"
#include "vec_math.h"

namespace remora {

namespace {

// Query rows per block: a block of scores (kRows x Lk) stays in L2 up to
// Lk ~ 1k, and the products stay large enough to run at full speed.
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
// f32 rows also compiled for AVX2 + FMA and for AVX-512, picked once
// (cpu_isa, cpu_backend.h; REMORA_CPU_ISA caps it). f64 stays baseline.
#if defined(__GNUC__) && defined(__x86_64__)
#define REMORA_ATT_ROW_COPIES(SUFFIX, TARGET)                                                \
  __attribute__((target(TARGET))) float exp_lse_##SUFFIX(float* s, int64_t n,                 \
                                                         const Extra<float>& x, float* inv) { \
    return exp_lse_row(s, n, x, inv);                                                        \
  }                                                                                          \
  __attribute__((target(TARGET))) void prob_##SUFFIX(float* s, int64_t n,                     \
                                                     const Extra<float>& x, float lse) {      \
    prob_row(s, n, x, lse);                                                                  \
  }                                                                                          \
  __attribute__((target(TARGET))) void dscore_##SUFFIX(float* dp, const float* p, int64_t n,  \
                                                       float di) {                           \
    dscore_row(dp, p, n, di);                                                                \
  }
REMORA_ATT_ROW_COPIES(avx2, "avx2,fma")
REMORA_ATT_ROW_COPIES(avx512, REMORA_AVX512_TARGET)
template <>
const RowFns<float>& row_fns<float>() {
  static const RowFns<float> f = [] {
    if (cpu_impl::use_avx512()) return RowFns<float>{&exp_lse_avx512, &prob_avx512, &dscore_avx512};
    if (cpu_impl::use_avx2()) return RowFns<float>{&exp_lse_avx2, &prob_avx2, &dscore_avx2};
    return RowFns<float>{&exp_lse_row<float>, &prob_row<float>, &dscore_row<float>};
  }();
  return f;
}
#endif

// ---- single-threaded BLAS on row-major operands ----

// f32: sgemm_tiles where it runs (the positional band's products, whose B
// operand changes with every block: OpenBLAS spends a third of a long-context
// step packing it and on its beta pass), else OpenBLAS.
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
#ifdef REMORA_SGEMM_TILES
  if (cpu_impl::use_sgemm_tiles()) return cpu_impl::sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
#endif
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              int(m), int(n), int(k), alpha, a, int(lda), b, int(ldb), beta, c, int(ldc));
}
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
          int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              int(m), int(n), int(k), alpha, a, int(lda), b, int(ldb), beta, c, int(ldc));
}

// ---- the f32 products: sgemm_tiles (backends/cpu/cpu_sgemm.h) ----
//
// OpenBLAS's sgemm reaches 45-70 GFLOP/s on one core for this kernel's
// shapes (64 rows, D = 64, a few hundred keys): each call packs both operands
// and runs a beta pass over C. sgemm_tiles takes B packed once per head and
// runs register tiles straight over A, with per-tile limits: a tile of 6 query
// rows computes only the columns (S = q k^T, dP) or the depth (P v, dS k) its
// rows can see, which skips the masked upper triangle of each diagonal block
// (a 64-row block computes 1.25x the causal pairs at L = 256 with whole-block
// products). f64 (the reference dtype) and CPUs without AVX2 keep OpenBLAS on
// whole blocks; tests/test_cpu_kernels.cpp holds both to the reference.
constexpr int64_t kKC = cpu_impl::kTileKC;  // the largest D packed per head
#ifdef REMORA_SGEMM_TILES
#define REMORA_ATT_AVX2 1
using cpu_impl::pack_b;
using cpu_impl::pack_bt;
using cpu_impl::sgemm_tiles;
using cpu_impl::use_sgemm_tiles;
constexpr int64_t kNR = cpu_impl::kTileNR;
#endif

// ---- the problem as the tasks see it ----

// Rows of one register tile of sgemm_tiles: the unit of the per-tile limits.
constexpr int64_t kTileRows = cpu_impl::kTileMR;
// The keys a block of query rows sees: row r sees [0, ext[r]) (past it the
// bias is -inf), kl is the largest; tile t of kTileRows rows sees [0, lim[t])
// (lim16: rounded up to a whole panel of 16, at most kl).
struct BlockKeys {
  int64_t ext[kRows];
  int64_t lo[kRows];  // the causal window's first visible key of each row (0: none)
  int64_t lim[(kRows + kTileRows - 1) / kTileRows];
  int64_t lim16[(kRows + kTileRows - 1) / kTileRows];
  int64_t kl = 0;
};

template <typename T>
struct Att {
  const RsaFusedProblem& p;
  const T* bias;
  const T* kp;
  std::vector<int64_t> shared_ext;  // [Lq] when the bias is shared by every head, else empty
  // A shared bias that is 0 before each row's ext and -inf after (a causal
  // mask): ext says everything, and the row passes never read it (at L = 1024
  // it is 4 MiB, out of L2, and every head would stream it again).
  bool mask_only = false;

  explicit Att(const RsaFusedProblem& pr)
      : p(pr), bias(static_cast<const T*>(pr.bias)), kp(static_cast<const T*>(pr.kp_bias)) {
    if (bias && p.bias_strides[0] == 0 && p.bias_strides[1] == 0) {
      shared_ext.resize(size_t(p.Lq));
      mask_only = true;
      for (int64_t i = 0; i < p.Lq; ++i) {
        const int64_t e = row_ext(bias, i);
        shared_ext[size_t(i)] = e;
        const T* r = bias + i * p.bias_strides[2];
        for (int64_t j = 0; j < e && mask_only; ++j) mask_only = r[j * p.bias_strides[3]] == T(0);
      }
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
  // The keys rows [i0, i0 + rows) of head (b, h) see.
  void block_keys(int64_t b, int64_t h, int64_t i0, int64_t rows, BlockKeys* bk) const {
    bk->kl = 0;
    const T* hb = bias && shared_ext.empty() ? bias_row(b, h, 0) : nullptr;
    const int64_t shift = p.Lk - p.Lq;
    for (int64_t r = 0; r < rows; ++r) {
      int64_t e = !bias ? p.Lk : hb ? row_ext(hb, i0 + r) : shared_ext[size_t(i0 + r)];
      int64_t lo = 0;
      if (p.causal) {
        e = std::min(e, std::max<int64_t>(0, i0 + r + shift + 1));
        if (p.window >= 0) lo = std::max<int64_t>(0, i0 + r + shift - p.window + 1);
        if (lo >= e) e = lo = 0;  // no visible key: a fully masked row
      }
      bk->ext[r] = e;
      bk->lo[r] = lo;
      bk->kl = std::max(bk->kl, e);
    }
    for (int64_t t = 0; t * kTileRows < rows; ++t) {
      int64_t lim = 0;
      for (int64_t r = t * kTileRows; r < std::min(rows, (t + 1) * kTileRows); ++r)
        lim = std::max(lim, bk->ext[r]);
      bk->lim[t] = lim;
      bk->lim16[t] = std::min(bk->kl, (lim + 15) / 16 * 16);
    }
  }
  Extra<T> extra(int64_t b, int64_t h, int64_t i) const {
    Extra<T> x;
    if (bias && !mask_only) {
      x.bias = bias_row(b, h, i);
      x.bstride = p.bias_strides[3];
    }
    if (kp) x.kp = kp + b * p.Lk;
    return x;
  }
  // Transformer-XL's positional term of a block of query rows i0.. (rows of
  // them) against keys [0, kl): the band of pos_r rows c = j + Lq - 1 - i
  // they reach, [c0, c0 + bw), c0 = Lq - i0 - rows, clipped to Lk.
  int64_t band_start(int64_t i0, int64_t rows) const { return p.Lq - i0 - rows; }
  int64_t band_width(int64_t i0, int64_t rows, int64_t kl) const {
    return std::min(p.Lk, kl - 1 + p.Lq - i0) - band_start(i0, rows);
  }
  // s[r, j] (ld kl) += pb[r, j + rows - 1 - r] (ld bw) for j in [lo_r, ext_r)
  // where that column is in the band; then the keys before the row's window
  // start are set to -inf.
  void add_band(T* s, int64_t kl, const T* pb, int64_t bw, int64_t rows, const BlockKeys& bk) const {
    for (int64_t r = 0; r < rows; ++r) {
      T* row = s + r * kl;
      if (pb) {
        const T* band = pb + r * bw + (rows - 1 - r);
        const int64_t end = std::min(bk.ext[r], bw - (rows - 1 - r));
#pragma omp simd
        for (int64_t j = bk.lo[r]; j < end; ++j) row[j] += band[j];
      }
      std::fill(row, row + bk.lo[r], T(-INFINITY));
    }
  }
  // Multiplies a block of scores [rows i0.., kl keys, leading dim ld] by the
  // dropout factors of head bh (bernoulli_mask's counters over [B, H, Lq, Lk]).
  void apply_dropout(T* s, int64_t ld, int64_t bh, int64_t i0, int64_t rows, int64_t kl) const {
    const double keep = 1 - p.dropout;
    const uint64_t thr = philox::keep_threshold(keep);
    const T inv = T(1.0 / keep);
    for (int64_t r = 0; r < rows; ++r) {
      const uint64_t base = uint64_t((bh * p.Lq + i0 + r) * p.Lk);
      T* row = s + r * ld;
      for (int64_t j = 0; j < kl; ++j)
        row[j] *= philox::kept(p.seed, p.offset, base + uint64_t(j), thr) ? inv : T(0);
    }
  }
};

// The calling thread's scratch (cpu_backend.h): the score blocks (at most 3
// kRows Lk elements) and the packed slots of a pass (about 3 Lk D), reused by
// every call of a training step.
template <typename T>
T* thread_scratch(int64_t n) {
  return static_cast<T*>(cpu_impl::thread_scratch(cpu_impl::ScratchUse::attention,
                                                  size_t(std::max<int64_t>(n, 1)) * sizeof(T)));
}

// An operand's rows as the passes read them. Under bf16 autocast
// (RsaFusedProblem::bf16_operands; T is float) q, k, v, dO and the positional
// operands are bf16, widened (exactly) into the thread's scratch as a pass
// reaches them: a head's keys, values and positional rows once per head, a
// block's query rows and dO per block. No f32 copy of a whole operand exists.
template <typename T>
struct Rows {
  const void* base = nullptr;
  bool half = false;
  T* buf = nullptr;  // room for the widest read (half only)
  // n elements from element off: in place, or widened into buf.
  const T* at(int64_t off, int64_t n) const {
    if (!base) return nullptr;
    if (!half) return static_cast<const T*>(base) + off;
    const uint16_t* src = static_cast<const uint16_t*>(base) + off;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) buf[i] = T(f32_from_bf16_bits(src[i]));
    return buf;
  }
};
// Elements of scratch the widened rows need: a head's k, v and positional
// rows, a block's q, pos_q and dO.
inline int64_t widened_floats(const RsaFusedProblem& p) {
  return p.bf16_operands ? (3 * p.Lk + 3 * kRows) * p.D : 0;
}

// The block products of a task: sgemm_tiles with the block's per-tile limits
// (f32 on AVX2), else one BLAS call on the whole block. On the sgemm_tiles
// path the transposed B operands (K^T, V^T) are a whole head's, packed once
// per head into their slot (pack_head) and shared by the head's row blocks;
// the others (K, V, a block's dO or q: row-major [., D]) are read in place
// when D is a multiple of 16 (whole panels), else packed as well.
enum Slot { kKt = 0, kVt = 1, kKn = 2, kVn = 3, kBlock = 4 };  // K^T, V^T (S, dP); K, V (dQ, P v); a block's dO or q
constexpr int kSlots = 5;

// Whether sgemm_tiles reads the row-major operands of head width D in place.
inline bool in_place(Slot slot, int64_t D) {
  return (slot == kKn || slot == kVn || slot == kBlock) && D % 16 == 0;
}

template <typename T>
struct Products {
  bool tiles = false;      // sgemm_tiles (else BLAS)
  T* packed[kSlots] = {};  // per slot: its packed copy, or null when read in place
  int64_t Lk = 0, D = 0;

  // Packs a head's K or V [Lk, D] into `slot` (a no-op on the BLAS path).
  void pack_head(Slot slot, const T* x) const {
#ifdef REMORA_ATT_AVX2
    if constexpr (std::is_same<T, float>::value)
      if (packed[slot]) {  // set only on the sgemm_tiles path
        if (slot == kKt || slot == kVt) pack_bt(D, Lk, x, D, packed[slot]);
        else pack_b(Lk, D, x, D, packed[slot]);
      }
#endif
  }
#ifdef REMORA_ATT_AVX2
  // sgemm_tiles' view of a row-major B = x [k, D] in `slot`: its packed copy
  // (panels of k rows), or x itself, read in place.
  struct RowMajorB {
    const float* b;
    int64_t panel, rs;
  };
  RowMajorB row_major_b(Slot slot, const float* x, int64_t k) const {
    if (packed[slot]) return {packed[slot], k * kNR, kNR};
    return {x, kNR, D};
  }
#endif
  // C[rows, kl] (ldc) = alpha a[rows, D] x[kl, D]^T: S = scale q k^T, dP = f dO v^T.
  void a_bt(const BlockKeys& bk, int64_t rows, T alpha, const T* a, const T* x, Slot slot, T* c,
            int64_t ldc) const {
#ifdef REMORA_ATT_AVX2
    if constexpr (std::is_same<T, float>::value)
      if (tiles) {
        sgemm_tiles(rows, bk.kl, D, alpha, a, D, 1, packed[slot], D * kNR, kNR, 0.f, c, ldc,
                    bk.lim16, nullptr);
        return;
      }
#endif
    gemm(false, true, rows, bk.kl, D, alpha, a, D, x, D, T(0), c, ldc);
  }
  // C[kl, D] += alpha a[rows, kl]^T x[rows, D]: dV += f P^T dO, dK += scale dS^T q.
  // Key tile t (keys [6t, 6t + 6)) adds rows [kstart[t], rows) only: the rows
  // before see none of its keys.
  void at_b(const BlockKeys& bk, int64_t rows, T alpha, const T* a, const T* x, const int64_t* kstart,
            T* c) const {
#ifdef REMORA_ATT_AVX2
    if constexpr (std::is_same<T, float>::value)
      if (tiles) {
        if (packed[kBlock]) pack_b(rows, D, x, D, packed[kBlock]);
        const RowMajorB b = row_major_b(kBlock, x, rows);
        sgemm_tiles(bk.kl, D, rows, alpha, a, 1, bk.kl, b.b, b.panel, b.rs, 1.f, c, D, nullptr,
                    nullptr, kstart);
        return;
      }
#endif
    (void)kstart;
    gemm(true, false, bk.kl, D, rows, alpha, a, bk.kl, x, D, T(1), c, D);
  }
  // C[rows, D] = alpha a[rows, kl] (lda) x[kl, D]: O_att = P v, dQ = scale dS k.
  void a_b(const BlockKeys& bk, int64_t rows, T alpha, const T* a, int64_t lda, const T* x,
           Slot slot, T* c) const {
#ifdef REMORA_ATT_AVX2
    if constexpr (std::is_same<T, float>::value)
      if (tiles) {
        const RowMajorB b = row_major_b(slot, x, Lk);
        sgemm_tiles(rows, D, bk.kl, alpha, a, lda, 1, b.b, b.panel, b.rs, 0.f, c, D, nullptr,
                    bk.lim);
        return;
      }
#endif
    gemm(false, false, rows, D, bk.kl, alpha, a, lda, x, D, T(0), c, D);
  }
};

// Whether the products of dtype T run on sgemm_tiles.
template <typename T>
bool tiles_for() {
#ifdef REMORA_ATT_AVX2
  return std::is_same<T, float>::value && use_sgemm_tiles();
#else
  return false;
#endif
}

// Elements of a packed slot, room to align it to 32 bytes included (0: the
// BLAS path packs nothing, nor does a slot read in place).
template <typename T>
int64_t slot_floats(const RsaFusedProblem& p, Slot slot) {
#ifdef REMORA_ATT_AVX2
  if (tiles_for<T>() && !in_place(slot, p.D)) {
    auto r16 = [](int64_t x) { return (x + 15) / 16 * 16; };
    if (slot == kBlock) return kRows * r16(p.D) + 8;
    return (slot == kKt || slot == kVt ? p.D * r16(p.Lk) : p.Lk * r16(p.D)) + 8;
  }
#endif
  return 0;
}
// Elements of the slots a pass uses.
template <typename T>
int64_t slots_floats(const RsaFusedProblem& p, std::initializer_list<Slot> slots) {
  int64_t n = 0;
  for (Slot s : slots) n += slot_floats<T>(p, s);
  return n;
}
// The products of one thread, the slots a pass uses laid out from buf.
template <typename T>
Products<T> products(T* buf, const RsaFusedProblem& p, std::initializer_list<Slot> slots) {
  Products<T> pr;
  pr.tiles = tiles_for<T>();
  pr.Lk = p.Lk;
  pr.D = p.D;
  for (Slot s : slots) {
    const int64_t n = slot_floats<T>(p, s);
    if (n == 0) continue;
    pr.packed[s] = reinterpret_cast<T*>((reinterpret_cast<uintptr_t>(buf) + 31) & ~uintptr_t(31));
    buf += n;
  }
  return pr;
}

template <typename T>
void forward(const RsaForwardArgs& a) {
  const RsaFusedProblem& p = a.p;
  const Att<T> att(p);
  const RowFns<T>& rf = row_fns<T>();
  const int64_t D = p.D, Lq = p.Lq, Lk = p.Lk;
  const int64_t nblk = (Lq + kRows - 1) / kRows, tasks = p.B * p.H * nblk;
  const T* G = static_cast<const T*>(a.gs);
  const T* Y = static_cast<const T*>(a.Y);
  T* O = static_cast<T*>(a.O);
  T* OR = static_cast<T*>(a.Oatt_r);
  T* LSE = static_cast<T*>(a.lse);
  const T scale = T(p.scale);
  const bool drop = p.dropout > 0;
  const bool pos = p.pos_q != nullptr;
  const int64_t band_n = pos ? kRows * (Lk + kRows) : 0;  // the positional band's scores
  const std::initializer_list<Slot> slots = {kKt, kVn};
  const int64_t slot_n = slots_floats<T>(p, slots);
  parallel_team(int(std::min<int64_t>(tasks, pool_threads())), [&](int t, int n) {
    int64_t first, last;
    static_range(tasks, t, n, &first, &last);
    if (first >= last) return;
    T* s = thread_scratch<T>(kRows * Lk + kRows + slot_n + band_n + widened_floats(p));
    T* inv = s + kRows * Lk;  // 1 / row sum
    const Products<T> pr = products(inv + kRows, p, slots);
    T* pb = inv + kRows + slot_n;
    T* wide = pb + band_n;
    const bool half = p.bf16_operands;
    const Rows<T> Q{a.q, half, wide}, K{a.k, half, wide + kRows * D}, V{a.v, half, wide + (kRows + Lk) * D},
        PR{p.pos_r, half, wide + (kRows + 2 * Lk) * D}, PQ{p.pos_q, half, wide + (kRows + 3 * Lk) * D};
    BlockKeys bk;
    int64_t packed_head = -1, pos_head = -1;
    const T *k = nullptr, *v = nullptr, *pr_h = nullptr;  // head bh's keys and values, head h's positional rows
    for (int64_t task = first; task < last; ++task) {
      const int64_t bh = task / nblk, b = bh / p.H, h = bh % p.H;
      const int64_t i0 = (task % nblk) * kRows, rows = std::min(kRows, Lq - i0);
      const T* q = Q.at((bh * Lq + i0) * D, rows * D);
      const bool rem = h < p.Hr;
      T* oa = rem ? OR + ((b * p.Hr + h) * Lq + i0) * D : O + (bh * Lq + i0) * D;
      T* lse = LSE + bh * Lq + i0;
      att.block_keys(b, h, i0, rows, &bk);
      const int64_t kl = bk.kl;
      if (kl == 0) {  // every row fully masked
        std::fill(oa, oa + rows * D, T(0));
        std::fill(lse, lse + rows, T(INFINITY));
      } else {
        if (packed_head != bh) {  // a thread's tasks run head by head
          k = K.at(bh * Lk * D, Lk * D);
          v = V.at(bh * Lk * D, Lk * D);
          pr.pack_head(kKt, k);
          pr.pack_head(kVn, v);
          packed_head = bh;
        }
        pr.a_bt(bk, rows, scale, q, k, kKt, s, kl);
        if (pos || p.causal) {
          int64_t bw = 0;
          if (pos) {  // the positional band: scale (q + r_r_bias) R[c0 .. c0 + bw)^T
            if (pos_head != h) {
              pr_h = PR.at(h * Lk * D, Lk * D);
              pos_head = h;
            }
            const int64_t c0 = att.band_start(i0, rows);
            bw = att.band_width(i0, rows, kl);
            gemm(false, true, rows, bw, D, scale, PQ.at((bh * Lq + i0) * D, rows * D), D, pr_h + c0 * D, D,
                 T(0), pb, bw);
          }
          att.add_band(s, kl, pos ? pb : nullptr, bw, rows, bk);
        }
        for (int64_t r = 0; r < rows; ++r) {
          T* row = s + r * kl;
          lse[r] = rf.exp_lse(row, bk.ext[r], att.extra(b, h, i0 + r), inv + r);
          std::fill(row + bk.ext[r], row + kl, T(0));
        }
        if (drop) att.apply_dropout(s, kl, bh, i0, rows, kl);
        pr.a_b(bk, rows, T(1), s, kl, v, kVn, oa);
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
  const T* G = static_cast<const T*>(a.gs);
  const T* O = static_cast<const T*>(a.O);
  const T* OR = static_cast<const T*>(a.Oatt_r);
  const T* LSE = static_cast<const T*>(a.lse);
  T* dQ = static_cast<T*>(a.dq);
  T* dK = static_cast<T*>(a.dk);
  T* dV = static_cast<T*>(a.dv);
  T* dS = static_cast<T*>(a.dS);
  const T scale = T(p.scale);
  const bool drop = p.dropout > 0;
  const bool pos = p.pos_q != nullptr;
  T* dPQ = static_cast<T*>(a.dpos_q);
  T* dPR = static_cast<T*>(a.dpos_r);
  const int64_t band_n = pos ? kRows * (Lk + kRows) : 0;  // the positional band's scores
  const std::initializer_list<Slot> slots = {kKt, kVt, kKn, kBlock};
  const int64_t slot_n = slots_floats<T>(p, slots);
  parallel_team(int(std::min<int64_t>(BH, pool_threads())), [&](int t, int n) {
    int64_t first, last;
    static_range(BH, t, n, &first, &last);
    if (first >= last) return;
    T* P = thread_scratch<T>((drop ? 3 : 2) * kRows * Lk + kRows + slot_n + band_n + widened_floats(p));
    T* dP = P + kRows * Lk;
    T* di = dP + kRows * Lk;  // [kRows]
    const Products<T> pr = products(di + kRows, p, slots);
    T* Pd = di + kRows + slot_n;  // with dropout: P * mask
    T* pb = Pd + (drop ? kRows * Lk : 0);  // the positional band (scores, then their gradient)
    T* wide = pb + band_n;
    const bool half = p.bf16_operands;
    const Rows<T> Q{a.q, half, wide}, K{a.k, half, wide + kRows * D}, V{a.v, half, wide + (kRows + Lk) * D},
        PR{p.pos_r, half, wide + (kRows + 2 * Lk) * D}, PQ{p.pos_q, half, wide + (kRows + 3 * Lk) * D},
        dO{a.dO, half, wide + (2 * kRows + 3 * Lk) * D};
    std::vector<int64_t> kstart(size_t(Lk / kTileRows + 1));  // per key tile: the first row that sees it
    BlockKeys bk;
    int64_t pos_head = -1;
    const T* pr_h = nullptr;  // head h's positional rows
    for (int64_t bh = first; bh < last; ++bh) {
      const int64_t b = bh / p.H, h = bh % p.H;
      const bool rem = h < p.Hr;
      const T f = rem ? T(1) - G[h] : T(1);
      const T* k = K.at(bh * Lk * D, Lk * D);
      const T* v = V.at(bh * Lk * D, Lk * D);
      if (pos && pos_head != h) {
        pr_h = PR.at(h * Lk * D, Lk * D);
        pos_head = h;
      }
      T* dk = dK + bh * Lk * D;
      T* dv = dV + bh * Lk * D;
      std::fill(dk, dk + Lk * D, T(0));
      std::fill(dv, dv + Lk * D, T(0));
      T* dpr = pos ? dPR + bh * Lk * D : nullptr;  // this batch row's share of dR
      if (dpr) std::fill(dpr, dpr + Lk * D, T(0));
      pr.pack_head(kKt, k);
      pr.pack_head(kVt, v);
      pr.pack_head(kKn, k);
      for (int64_t i0 = 0; i0 < Lq; i0 += kRows) {
        const int64_t rows = std::min(kRows, Lq - i0);
        const T* q = Q.at((bh * Lq + i0) * D, rows * D);
        const T* go = dO.at((bh * Lq + i0) * D, rows * D);
        const T* oa = rem ? OR + ((b * p.Hr + h) * Lq + i0) * D : O + (bh * Lq + i0) * D;
        const T* lse = LSE + bh * Lq + i0;
        T* dq = dQ + (bh * Lq + i0) * D;
        T* ds_out = dS ? dS + (bh * Lq + i0) * Lk : nullptr;
        att.block_keys(b, h, i0, rows, &bk);
        const int64_t kl = bk.kl;
        T* dpq = pos ? dPQ + (bh * Lq + i0) * D : nullptr;
        if (kl == 0) {
          std::fill(dq, dq + rows * D, T(0));
          if (dpq) std::fill(dpq, dpq + rows * D, T(0));
          if (ds_out) std::fill(ds_out, ds_out + rows * Lk, T(0));
          continue;
        }
        // D_i = f rowsum(dO * O_att): the softmax-backward row term.
        for (int64_t r = 0; r < rows; ++r) {
          const T* x = go + r * D;
          const T* y = oa + r * D;
          di[r] = T(f * vec::sum_f64(D, [x, y](int64_t d) { return x[d] * y[d]; }));
        }
        pr.a_bt(bk, rows, scale, q, k, kKt, P, kl);
        const int64_t c0 = pos ? att.band_start(i0, rows) : 0;
        const int64_t bw = pos ? att.band_width(i0, rows, kl) : 0;
        const T* pq = pos ? PQ.at((bh * Lq + i0) * D, rows * D) : nullptr;
        const T* band_r = pos ? pr_h + c0 * D : nullptr;
        if (pos || p.causal) {
          if (pos) gemm(false, true, rows, bw, D, scale, pq, D, band_r, D, T(0), pb, bw);
          att.add_band(P, kl, pos ? pb : nullptr, bw, rows, bk);
        }
        for (int64_t r = 0; r < rows; ++r) {
          T* row = P + r * kl;
          rf.prob(row, bk.ext[r], att.extra(b, h, i0 + r), lse[r]);
          std::fill(row + bk.ext[r], row + kl, T(0));
        }
        const T* pv = P;  // the probabilities as they reached V (dropped out)
        if (drop) {
          std::copy(P, P + rows * kl, Pd);
          att.apply_dropout(Pd, kl, bh, i0, rows, kl);
          pv = Pd;
        }
        // Key tile t is seen from the first row whose ext passes 6t on.
        for (int64_t t = 0, r = 0, seen = 0; t * kTileRows < kl; ++t) {
          while (r < rows && seen <= t * kTileRows) seen = std::max(seen, bk.ext[r++]);
          kstart[size_t(t)] = seen > t * kTileRows ? r - 1 : rows;
        }
        pr.at_b(bk, rows, f, pv, go, kstart.data(), dv);
        pr.a_bt(bk, rows, f, go, v, kVt, dP, kl);
        if (drop) att.apply_dropout(dP, kl, bh, i0, rows, kl);
        for (int64_t r = 0; r < rows; ++r) {
          T* row = dP + r * kl;
          rf.dscore(row, P + r * kl, bk.ext[r], di[r]);
          std::fill(row + bk.ext[r], row + kl, T(0));
        }
        if (ds_out)
          for (int64_t r = 0; r < rows; ++r) {
            std::copy(dP + r * kl, dP + (r + 1) * kl, ds_out + r * Lk);
            std::fill(ds_out + r * Lk + kl, ds_out + (r + 1) * Lk, T(0));
          }
        pr.a_b(bk, rows, scale, dP, kl, k, kKn, dq);
        pr.at_b(bk, rows, scale, dP, q, kstart.data(), dk);
        if (pos) {
          // The band's gradient: dS gathered back onto the diagonals it came
          // from, then d pos_q = scale dB R_band, dR_band += scale dB^T pos_q.
          std::fill(pb, pb + rows * bw, T(0));
          for (int64_t r = 0; r < rows; ++r) {
            T* band = pb + r * bw + (rows - 1 - r);
            const T* row = dP + r * kl;
            const int64_t end = std::min(bk.ext[r], bw - (rows - 1 - r));
#pragma omp simd
            for (int64_t j = bk.lo[r]; j < end; ++j) band[j] = row[j];
          }
          gemm(false, false, rows, D, bw, scale, pb, bw, band_r, D, T(0), dpq, D);
          gemm(true, false, bw, D, rows, scale, pb, bw, pq, D, T(1), dpr + c0 * D, D);
        }
      }
    }
  });
}

void rsa_forward(const RsaForwardArgs& a) {
  cpu_impl::dispatch_float(a.dt, "rsa_attention", [&](auto tag) { forward<decltype(tag)>(a); });
}
void rsa_backward(const RsaBackwardArgs& a) {
  cpu_impl::dispatch_float(a.dt, "rsa_attention backward",
                           [&](auto tag) { backward<decltype(tag)>(a); });
}

const RsaKernels kCpuRsa = {&rsa_forward, &rsa_backward, nullptr};
const bool g_registered = [] {
  register_kernels(DeviceType::cpu, &kCpuRsa);
  return true;
}();

}  // namespace

namespace cpu_impl {
// Any head width and length in f32 and f64: the BLAS calls take int sizes.
bool rsa_fused_takes(DType dt, const RsaFusedProblem& p) {
  constexpr int64_t kIntMax = (int64_t(1) << 31) - 1;
  // bf16 operands (autocast) with f32 everything else: widened as read (Rows).
  return (dt == DType::f32 || (dt == DType::f64 && !p.bf16_operands)) && p.D >= 1 && p.Lq >= 1 && p.Lk >= 1 &&
         p.Lk * std::max(p.D, kRows) <= kIntMax;
}
}  // namespace cpu_impl

}  // namespace remora
