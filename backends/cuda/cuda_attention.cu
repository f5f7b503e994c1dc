// SPDX-License-Identifier: BSD-3-Clause
// Fused RSA attention on CUDA, FlashAttention style (Dao et al. 2022, FA-2's
// split of the backward into a dK/dV pass and a dQ pass).
//
// Forward, one thread block per (64 query rows, b, h), one thread per query
// row: K and V tiles of 32 keys are staged in shared memory, each thread keeps
// its row's running max m, sum l and output accumulator acc[D] (registers) and
// rescales them as the max grows (the online softmax). The scores and the
// probabilities exist only one tile at a time; nothing of size Lq x Lk is
// written. The REM heads mix in Y (P V from the O(L) scan) in the epilogue:
// O = O_att + g (Y - O_att). The row log-sum-exp is kept for backward.
//
// Backward recomputes the probabilities from lse: P_ij = exp(S_ij - lse_i).
// With dO_att = dO (1 - g) on REM heads, D_i = rowsum(dO_att * O_att) and
// dS = P * (dO_att V^T * dropmask - D_i):
//   pass 1, a thread per key row:   dV_j = sum_i P~_ij dO_i, dK_j = scale sum_i dS_ij q_i
//   pass 2, a thread per query row: dQ_i = scale sum_j dS_ij k_j  (and dS itself
//           when the additive bias needs its gradient)
// (rowsum(dA * A) = dO . O_att holds with dropout too, since O_att = (A * m) V.)
//
// Causal skipping: when the bias is one [Lq, Lk] matrix shared by every (b, h),
// a pre-pass finds ext_i = 1 + the last column of row i that is not -inf;
// tiles at or beyond the largest ext of their rows are skipped (exp(-inf) = 0,
// so the result is the same up to summation order).
//
// Fully masked query rows: O_att = 0 and no gradient (FlashAttention-2's rule),
// as on the composed path.
//
// Transformer-XL's positional term (RsaFusedProblem::pos_q, pos_r) joins each
// score as it is formed: scale pos_q_i . pos_r_c, c = j + Lq - 1 - i (nothing
// where c >= Lk), and the causal window given as numbers masks it likewise;
// no [Lq, Lk] tensor is read or written. Backward: the dQ pass also sums
// d pos_q_i = scale sum_j dS_ij pos_r_c, and a third pass, a thread per
// positional row c, sums d pos_r_c = scale sum_i dS_ij pos_q_i along its
// diagonal (per batch row; ops/ sums over B), so no atomics are needed.
//
// The composed path in ops/rem.cpp is the reference. Registered as the cuda
// RsaKernels table (backends/kernels.h).
//
// With TF32 allowed (cuda_tf32()), f32 problems with D = 64 or 128 go to the
// tensor-core FlashAttention-2 kernels of cuda_flash.cu instead: rsa_forward
// and rsa_backward below ask them first (the one place the choice is made);
// everything they decline runs here. These kernels stay the reference.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <type_traits>
#include <vector>

#include "../kernels.h"
#include "../../core/philox.h"
#include "cuda_common.cuh"
#include "cuda_flash.cuh"

namespace remora {
namespace cuda {

namespace {

constexpr int kBK = 32;   // keys per tile (forward, dQ)
constexpr int kBQB = 32;  // queries per tile (dK/dV)

struct Args {
  int64_t B, H, Hr, Lq, Lk, D;
  double scale;
  const void* bias;
  int64_t bs0, bs1, bs2, bs3;
  const void* kp;
  bool drop;
  double keep;
  uint64_t seed, offset;
  const int* ext;  // [Lq] or null
  const void* pq;  // the positional term (RsaFusedProblem::pos_q, pos_r), or null
  const void* pr;
  bool causal;
  int64_t window;
};

// The positional term of score (i, j) of head (b, h): scale pos_q_i . pos_r_c.
template <typename T>
__device__ __forceinline__ T score_pos(const Args& a, int64_t bh, int64_t h, int64_t i, int64_t j) {
  const int64_t c = j + a.Lq - 1 - i;
  if (!a.pq || c >= a.Lk) return T(0);
  const T* pq = static_cast<const T*>(a.pq) + (bh * a.Lq + i) * a.D;
  const T* pr = static_cast<const T*>(a.pr) + (h * a.Lk + c) * a.D;
  T dot = 0;
  for (int64_t d = 0; d < a.D; ++d) dot += pq[d] * pr[d];
  return dot * T(a.scale);
}
// Whether the causal window (when given as numbers) lets query i see key j.
__device__ __forceinline__ bool window_sees(const Args& a, int64_t i, int64_t j) {
  if (!a.causal) return true;
  const int64_t last = i + a.Lk - a.Lq;
  return j <= last && (a.window < 0 || j > last - a.window);
}

template <typename T>
__device__ __forceinline__ T score_extra(const Args& a, int64_t b, int64_t h, int64_t i,
                                         int64_t j) {
  if (!window_sees(a, i, j)) return T(-INFINITY);
  T e = score_pos<T>(a, b * a.H + h, h, i, j);
  if (a.bias) e += static_cast<const T*>(a.bias)[b * a.bs0 + h * a.bs1 + i * a.bs2 + j * a.bs3];
  if (a.kp) e += static_cast<const T*>(a.kp)[b * a.Lk + j];
  return e;
}
// The dropout factor of A[b, h, i, j]: 1/keep or 0, from the bernoulli_mask counters.
template <typename T>
__device__ __forceinline__ T drop_factor(const Args& a, int64_t bh, int64_t i, int64_t j) {
  const uint64_t idx = uint64_t((bh * a.Lq + i) * a.Lk + j);
  return philox::kept(a.seed, a.offset, idx, philox::keep_threshold(a.keep)) ? T(1.0 / a.keep)
                                                                             : T(0);
}
// The largest ext over rows [i0, i1) (Lk when there is no ext table).
__device__ __forceinline__ int64_t tile_end(const Args& a, int64_t i0, int64_t i1) {
  int64_t e = a.Lk;
  if (a.ext) {
    e = 0;
    for (int64_t i = i0; i < i1 && i < a.Lq; ++i) e = max(e, int64_t(a.ext[i]));
  }
  // The causal window: the tile's last row sees keys up to its index + Lk - Lq.
  if (a.causal) e = min(e, max(int64_t(0), min(i1, a.Lq) + a.Lk - a.Lq));
  return e;
}

// ext_i for a shared [Lq, Lk] bias: a warp per row.
template <typename T>
__global__ void k_row_ext(int64_t Lq, int64_t Lk, const T* bias, int64_t s2, int64_t s3,
                          int* ext) {
  const int64_t row = blockIdx.x * int64_t(blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= Lq) return;
  int64_t last = -1;
  for (int64_t j = lane; j < Lk; j += 32) {
    const T v = bias[row * s2 + j * s3];
    if (!(isinf(v) && v < T(0))) last = j;
  }
  for (int o = 16; o > 0; o >>= 1) last = max(last, __shfl_xor_sync(0xffffffffu, last, o));
  if (lane == 0) ext[row] = int(last + 1);
}

template <typename T, int DMAX>
__global__ void k_attn_fwd(Args a, const T* Q, const T* K, const T* V, const T* G, const T* Y,
                           T* O, T* OR, T* LSE) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int64_t D = a.D, BQ = blockDim.x;
  T* Qs = reinterpret_cast<T*>(smem);  // [BQ][D + 1]
  T* Ks = Qs + BQ * (D + 1);           // [kBK][D]
  T* Vs = Ks + kBK * D;                // [kBK][D]
  T* Ss = Vs + kBK * D;                // [BQ][kBK + 1]  this thread's scores of the tile
  const int64_t bh = blockIdx.y, b = bh / a.H, h = bh % a.H;
  const int64_t i0 = int64_t(blockIdx.x) * BQ, i = i0 + threadIdx.x;
  const bool row = i < a.Lq;
  const T* q = Q + bh * a.Lq * D;
  const T* k = K + bh * a.Lk * D;
  const T* v = V + bh * a.Lk * D;
  for (int64_t e = threadIdx.x; e < BQ * D; e += BQ) {
    const int64_t r = e / D, d = e % D;
    Qs[r * (D + 1) + d] = i0 + r < a.Lq ? q[(i0 + r) * D + d] : T(0);
  }
  const T* qs = Qs + threadIdx.x * (D + 1);
  T* s = Ss + threadIdx.x * (kBK + 1);
  const T scale = T(a.scale);
  T m = -INFINITY, l = 0;
  T acc[DMAX];
#pragma unroll
  for (int d = 0; d < DMAX; ++d) acc[d] = 0;
  const int64_t kend = tile_end(a, i0, i0 + BQ);
  for (int64_t j0 = 0; j0 < kend; j0 += kBK) {
    __syncthreads();
    for (int64_t e = threadIdx.x; e < kBK * D; e += BQ) {
      const int64_t r = e / D;
      Ks[e] = j0 + r < a.Lk ? k[j0 * D + e] : T(0);
      Vs[e] = j0 + r < a.Lk ? v[j0 * D + e] : T(0);
    }
    __syncthreads();
    if (!row) continue;
    T smax = -INFINITY;
    for (int jj = 0; jj < kBK; ++jj) {
      const int64_t j = j0 + jj;
      T dot = 0;
      for (int64_t d = 0; d < D; ++d) dot += qs[d] * Ks[jj * D + d];
      s[jj] = j < a.Lk ? dot * scale + score_extra<T>(a, b, h, i, j) : T(-INFINITY);
      smax = s[jj] > smax ? s[jj] : smax;
    }
    const T mnew = smax > m ? smax : m;
    if (mnew == T(-INFINITY)) continue;  // everything so far is masked
    const T corr = exp(m - mnew);        // m = -inf gives 0
    l *= corr;
#pragma unroll
    for (int d = 0; d < DMAX; ++d) acc[d] *= corr;
    for (int jj = 0; jj < kBK; ++jj) {
      const T p = exp(s[jj] - mnew);
      l += p;
      T pd = p;
      if (a.drop && j0 + jj < a.Lk) pd *= drop_factor<T>(a, bh, i, j0 + jj);
#pragma unroll
      for (int d = 0; d < DMAX; ++d)
        if (d < D) acc[d] += pd * Vs[jj * D + d];
    }
    m = mnew;
  }
  if (!row) return;
  // A fully masked row (every score -inf, so l = 0) follows FlashAttention-2:
  // its softmax part is 0, and lse = +inf makes every P_ij = exp(S_ij - lse) = 0
  // in backward, so the row contributes no gradient (ops/rem.cpp's composed
  // path does the same).
  const bool empty = !(l > T(0));
  const T inv = empty ? T(0) : T(1) / l;
  LSE[bh * a.Lq + i] = empty ? T(INFINITY) : m + log(l);
  T* o = O + (bh * a.Lq + i) * D;
  if (h < a.Hr) {
    const T g = G[h];
    const T* y = Y + ((b * a.Hr + h) * a.Lq + i) * D;
    T* orr = OR + ((b * a.Hr + h) * a.Lq + i) * D;
#pragma unroll
    for (int d = 0; d < DMAX; ++d)
      if (d < D) {
        const T oa = acc[d] * inv;
        orr[d] = oa;
        o[d] = oa + g * (y[d] - oa);
      }
  } else {
#pragma unroll
    for (int d = 0; d < DMAX; ++d)
      if (d < D) o[d] = acc[d] * inv;
  }
}

// Di = rowsum(dO_att * O_att): a thread per (b, h, i).
template <typename T>
__global__ void k_attn_delta(Args a, const T* G, const T* O, const T* OR, const T* dO, T* Di) {
  const int64_t n = a.B * a.H * a.Lq;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < n;
       t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = t % a.Lq, bh = t / a.Lq, b = bh / a.H, h = bh % a.H;
    const T* go = dO + t * a.D;
    const T* oa = h < a.Hr ? OR + ((b * a.Hr + h) * a.Lq + i) * a.D : O + t * a.D;
    const T f = h < a.Hr ? T(1) - G[h] : T(1);
    T s = 0;
    for (int64_t d = 0; d < a.D; ++d) s += go[d] * oa[d];
    Di[t] = s * f;
  }
}

// dK, dV: a thread per key row, query tiles of kBQB rows in shared memory.
template <typename T, int DMAX>
__global__ void k_attn_dkdv(Args a, const T* Q, const T* K, const T* V, const T* G,
                            const T* LSE, const T* Di, const T* dO, T* dK, T* dV) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int64_t D = a.D, BK = blockDim.x;
  T* Ks = reinterpret_cast<T*>(smem);  // [BK][D + 1]
  T* Vs = Ks + BK * (D + 1);           // [BK][D + 1]
  T* Qs = Vs + BK * (D + 1);           // [kBQB][D]
  T* Gs = Qs + kBQB * D;               // [kBQB][D]  dO_att
  T* Ls = Gs + kBQB * D;               // [kBQB]
  T* Ds = Ls + kBQB;                   // [kBQB]
  const int64_t bh = blockIdx.y, b = bh / a.H, h = bh % a.H;
  const int64_t j0 = int64_t(blockIdx.x) * BK, j = j0 + threadIdx.x;
  const bool col = j < a.Lk;
  const T* q = Q + bh * a.Lq * D;
  const T* k = K + bh * a.Lk * D;
  const T* v = V + bh * a.Lk * D;
  const T* go = dO + bh * a.Lq * D;
  const T f = h < a.Hr ? T(1) - G[h] : T(1);
  for (int64_t e = threadIdx.x; e < BK * D; e += BK) {
    const int64_t r = e / D, d = e % D;
    Ks[r * (D + 1) + d] = j0 + r < a.Lk ? k[(j0 + r) * D + d] : T(0);
    Vs[r * (D + 1) + d] = j0 + r < a.Lk ? v[(j0 + r) * D + d] : T(0);
  }
  const T* ks = Ks + threadIdx.x * (D + 1);
  const T* vs = Vs + threadIdx.x * (D + 1);
  const T scale = T(a.scale);
  T dk[DMAX], dv[DMAX];
#pragma unroll
  for (int d = 0; d < DMAX; ++d) dk[d] = dv[d] = 0;
  for (int64_t i0 = 0; i0 < a.Lq; i0 += kBQB) {
    if (tile_end(a, i0, i0 + kBQB) <= j0) continue;  // the whole tile is masked for these keys
    __syncthreads();
    for (int64_t e = threadIdx.x; e < kBQB * D; e += BK) {
      const int64_t r = e / D;
      const bool ok = i0 + r < a.Lq;
      Qs[e] = ok ? q[i0 * D + e] : T(0);
      Gs[e] = ok ? go[i0 * D + e] * f : T(0);
    }
    for (int64_t r = threadIdx.x; r < kBQB; r += BK) {
      Ls[r] = i0 + r < a.Lq ? LSE[bh * a.Lq + i0 + r] : T(0);
      Ds[r] = i0 + r < a.Lq ? Di[bh * a.Lq + i0 + r] : T(0);
    }
    __syncthreads();
    if (!col) continue;
    for (int ii = 0; ii < kBQB; ++ii) {
      const int64_t i = i0 + ii;
      if (i >= a.Lq) break;
      const T* qi = Qs + ii * D;
      const T* gi = Gs + ii * D;
      T dot = 0, dp = 0;
      for (int64_t d = 0; d < D; ++d) {
        dot += qi[d] * ks[d];
        dp += gi[d] * vs[d];
      }
      const T s = dot * scale + score_extra<T>(a, b, h, i, j);
      const T p = exp(s - Ls[ii]);
      if (!(p > T(0))) continue;  // masked (p = 0); also skips a NaN row
      T pd = p;
      if (a.drop) {
        const T fac = drop_factor<T>(a, bh, i, j);
        pd *= fac;
        dp *= fac;
      }
      const T ds = p * (dp - Ds[ii]) * scale;
#pragma unroll
      for (int d = 0; d < DMAX; ++d)
        if (d < D) {
          dv[d] += pd * gi[d];
          dk[d] += ds * qi[d];
        }
    }
  }
  if (!col) return;
  T* okk = dK + (bh * a.Lk + j) * D;
  T* ovv = dV + (bh * a.Lk + j) * D;
#pragma unroll
  for (int d = 0; d < DMAX; ++d)
    if (d < D) {
      okk[d] = dk[d];
      ovv[d] = dv[d];
    }
}

// dQ (and dS): a thread per query row, key tiles of kBK in shared memory.
template <typename T, int DMAX>
__global__ void k_attn_dq(Args a, const T* Q, const T* K, const T* V, const T* G, const T* LSE,
                          const T* Di, const T* dO, T* dQ, T* dS, T* dPQ) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int64_t D = a.D, BQ = blockDim.x;
  T* Qs = reinterpret_cast<T*>(smem);  // [BQ][D + 1]
  T* Gs = Qs + BQ * (D + 1);           // [BQ][D + 1]  dO_att
  T* Ks = Gs + BQ * (D + 1);           // [kBK][D]
  T* Vs = Ks + kBK * D;                // [kBK][D]
  const int64_t bh = blockIdx.y, b = bh / a.H, h = bh % a.H;
  const int64_t i0 = int64_t(blockIdx.x) * BQ, i = i0 + threadIdx.x;
  const bool row = i < a.Lq;
  const T* q = Q + bh * a.Lq * D;
  const T* k = K + bh * a.Lk * D;
  const T* v = V + bh * a.Lk * D;
  const T* go = dO + bh * a.Lq * D;
  const T f = h < a.Hr ? T(1) - G[h] : T(1);
  for (int64_t e = threadIdx.x; e < BQ * D; e += BQ) {
    const int64_t r = e / D, d = e % D;
    const bool ok = i0 + r < a.Lq;
    Qs[r * (D + 1) + d] = ok ? q[(i0 + r) * D + d] : T(0);
    Gs[r * (D + 1) + d] = ok ? go[(i0 + r) * D + d] * f : T(0);
  }
  const T* qs = Qs + threadIdx.x * (D + 1);
  const T* gs = Gs + threadIdx.x * (D + 1);
  const T lse = row ? LSE[bh * a.Lq + i] : T(0), di = row ? Di[bh * a.Lq + i] : T(0);
  const T scale = T(a.scale);
  T dq[DMAX], dpq[DMAX];
#pragma unroll
  for (int d = 0; d < DMAX; ++d) dq[d] = dpq[d] = 0;
  const int64_t kend = tile_end(a, i0, i0 + BQ);
  for (int64_t j0 = 0; j0 < kend; j0 += kBK) {
    __syncthreads();
    for (int64_t e = threadIdx.x; e < kBK * D; e += BQ) {
      const int64_t r = e / D;
      Ks[e] = j0 + r < a.Lk ? k[j0 * D + e] : T(0);
      Vs[e] = j0 + r < a.Lk ? v[j0 * D + e] : T(0);
    }
    __syncthreads();
    if (!row) continue;
    for (int jj = 0; jj < kBK; ++jj) {
      const int64_t j = j0 + jj;
      if (j >= a.Lk) break;
      T dot = 0, dp = 0;
      for (int64_t d = 0; d < D; ++d) {
        dot += qs[d] * Ks[jj * D + d];
        dp += gs[d] * Vs[jj * D + d];
      }
      const T s = dot * scale + score_extra<T>(a, b, h, i, j);
      const T p = exp(s - lse);
      T ds = 0;
      if (p > T(0)) {
        if (a.drop) dp *= drop_factor<T>(a, bh, i, j);
        ds = p * (dp - di);
      }
      if (dS) dS[(bh * a.Lq + i) * a.Lk + j] = ds;
      if (ds != T(0)) {
        const T dss = ds * scale;
#pragma unroll
        for (int d = 0; d < DMAX; ++d)
          if (d < D) dq[d] += dss * Ks[jj * D + d];
        const int64_t c = j + a.Lq - 1 - i;
        if (dPQ && c < a.Lk) {
          const T* pr = static_cast<const T*>(a.pr) + (h * a.Lk + c) * D;
#pragma unroll
          for (int d = 0; d < DMAX; ++d)
            if (d < D) dpq[d] += dss * pr[d];
        }
      }
    }
  }
  if (!row) return;
  T* o = dQ + (bh * a.Lq + i) * D;
#pragma unroll
  for (int d = 0; d < DMAX; ++d)
    if (d < D) o[d] = dq[d];
  if (dPQ) {
    T* op = dPQ + (bh * a.Lq + i) * D;
#pragma unroll
    for (int d = 0; d < DMAX; ++d)
      if (d < D) op[d] = dpq[d];
  }
}

// d pos_r: a thread per (b, h, positional row c), summing along its diagonal
// (i, j = c - (Lq - 1 - i)) the recomputed dS_ij times scale pos_q_i.
template <typename T, int DMAX>
__global__ void k_attn_dpos(Args a, const T* Q, const T* K, const T* V, const T* G, const T* LSE,
                            const T* Di, const T* dO, T* dPR) {
  const int64_t bh = blockIdx.y, b = bh / a.H, h = bh % a.H;
  const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= a.Lk) return;
  const int64_t D = a.D;
  const T f = h < a.Hr ? T(1) - G[h] : T(1);
  const T scale = T(a.scale);
  const T* pqs = static_cast<const T*>(a.pq) + bh * a.Lq * D;
  T acc[DMAX];
#pragma unroll
  for (int d = 0; d < DMAX; ++d) acc[d] = 0;
  // j = c - (Lq - 1 - i) in [0, Lk): i in [max(0, Lq - 1 - c), Lq).
  for (int64_t i = max(int64_t(0), a.Lq - 1 - c); i < a.Lq; ++i) {
    const int64_t j = c - (a.Lq - 1 - i);
    const T lse = LSE[bh * a.Lq + i];
    const T* qi = Q + (bh * a.Lq + i) * D;
    const T* kj = K + (bh * a.Lk + j) * D;
    const T* vj = V + (bh * a.Lk + j) * D;
    const T* gi = dO + (bh * a.Lq + i) * D;
    T dot = 0, dp = 0;
    for (int64_t d = 0; d < D; ++d) {
      dot += qi[d] * kj[d];
      dp += gi[d] * f * vj[d];
    }
    const T p = exp(dot * scale + score_extra<T>(a, b, h, i, j) - lse);
    if (!(p > T(0))) continue;
    if (a.drop) dp *= drop_factor<T>(a, bh, i, j);
    const T dss = p * (dp - Di[bh * a.Lq + i]) * scale;
    const T* pq = pqs + i * D;
#pragma unroll
    for (int d = 0; d < DMAX; ++d)
      if (d < D) acc[d] += dss * pq[d];
  }
  T* o = dPR + (bh * a.Lk + c) * D;
#pragma unroll
  for (int d = 0; d < DMAX; ++d)
    if (d < D) o[d] = acc[d];
}

Args make_args(const RsaFusedProblem& p, const int* ext) {
  Args a;
  a.B = p.B; a.H = p.H; a.Hr = p.Hr; a.Lq = p.Lq; a.Lk = p.Lk; a.D = p.D;
  a.scale = p.scale;
  a.bias = p.bias;
  a.bs0 = p.bias_strides[0]; a.bs1 = p.bias_strides[1];
  a.bs2 = p.bias_strides[2]; a.bs3 = p.bias_strides[3];
  a.kp = p.kp_bias;
  a.drop = p.dropout > 0;
  a.keep = 1 - p.dropout;
  a.seed = p.seed;
  a.offset = p.offset;
  a.ext = ext;
  a.pq = p.pos_q;
  a.pr = p.pos_r;
  a.causal = p.causal;
  a.window = p.window;
  return a;
}

// The row-ext table, when the bias is one matrix shared by every (b, h).
template <typename T>
void row_ext(const RsaFusedProblem& p, Scratch& s) {
  if (!p.bias || p.bias_strides[0] != 0 || p.bias_strides[1] != 0) return;
  s.allocate(size_t(p.Lq) * sizeof(int));
  k_row_ext<T><<<unsigned((p.Lq + 7) / 8), 256, 0, stream()>>>(p.Lq, p.Lk, static_cast<const T*>(p.bias),
                                                  p.bias_strides[2], p.bias_strides[3],
                                                  s.as<int>());
  check_launch("rsa_attention (mask scan)");
}

template <typename K>
void set_smem(K kernel, size_t bytes) {
  if (bytes > 48 * 1024)
    REMORA_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           int(bytes)));
}

template <typename T, int DMAX>
void fwd(const RsaFusedProblem& p, const Args& a, const T* q, const T* k, const T* v, const T* g,
         const T* Y, T* O, T* OR, T* lse) {
  const int BQ = sizeof(T) == 4 ? 64 : 32;
  const size_t sm = size_t(BQ * (p.D + 1) + 2 * kBK * p.D + BQ * (kBK + 1)) * sizeof(T);
  set_smem(k_attn_fwd<T, DMAX>, sm);
  dim3 grid(unsigned((p.Lq + BQ - 1) / BQ), unsigned(p.B * p.H));
  k_attn_fwd<T, DMAX><<<grid, BQ, sm, stream()>>>(a, q, k, v, g, Y, O, OR, lse);
  check_launch("rsa_attention (fused forward)");
}

template <typename T, int DMAX>
void bwd(const RsaFusedProblem& p, const Args& a, const T* q, const T* k, const T* v, const T* g,
         const T* lse, const T* Di, const T* dO, T* dq, T* dk, T* dv, T* dS, T* dpq, T* dpr) {
  const int BR = sizeof(T) == 4 ? 64 : 32;
  const size_t sm1 = size_t(2 * BR * (p.D + 1) + 2 * kBQB * p.D + 2 * kBQB) * sizeof(T);
  set_smem(k_attn_dkdv<T, DMAX>, sm1);
  dim3 g1(unsigned((p.Lk + BR - 1) / BR), unsigned(p.B * p.H));
  k_attn_dkdv<T, DMAX><<<g1, BR, sm1, stream()>>>(a, q, k, v, g, lse, Di, dO, dk, dv);
  check_launch("rsa_attention (fused backward, dK dV)");
  const size_t sm2 = size_t(2 * BR * (p.D + 1) + 2 * kBK * p.D) * sizeof(T);
  set_smem(k_attn_dq<T, DMAX>, sm2);
  dim3 g2(unsigned((p.Lq + BR - 1) / BR), unsigned(p.B * p.H));
  k_attn_dq<T, DMAX><<<g2, BR, sm2, stream()>>>(a, q, k, v, g, lse, Di, dO, dq, dS, dpq);
  check_launch("rsa_attention (fused backward, dQ)");
  if (dpr) {
    dim3 g3(unsigned((p.Lk + 127) / 128), unsigned(p.B * p.H));
    k_attn_dpos<T, DMAX><<<g3, 128, 0, stream()>>>(a, q, k, v, g, lse, Di, dO, dpr);
    check_launch("rsa_attention (fused backward, positional rows)");
  }
}

// bf16 operands (RsaFusedProblem::bf16_operands) that the tensor-core kernels
// decline: widened to f32 (exact) for the kernels below.
__global__ void k_widen_bf16(const bf16_t* in, float* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = float(in[i]);
}
struct Widened {
  std::vector<std::unique_ptr<Scratch>> bufs;
  const void* add(const void* p, int64_t n) {
    if (!p) return nullptr;
    bufs.push_back(std::make_unique<Scratch>(size_t(n) * sizeof(float)));
    float* out = bufs.back()->as<float>();
    k_widen_bf16<<<grid_for(n), kThreads, 0, stream()>>>(static_cast<const bf16_t*>(p), out, n);
    check_launch("rsa_attention (bf16 operands to f32)");
    return out;
  }
};

void rsa_forward(const RsaForwardArgs& args);
void rsa_backward(const RsaBackwardArgs& args);

// The f32 problem of a bf16-operand one, its operands widened into w.
RsaFusedProblem widened(const RsaFusedProblem& p, Widened& w) {
  RsaFusedProblem f = p;
  f.bf16_operands = false;
  f.pos_q = w.add(p.pos_q, p.B * p.H * p.Lq * p.D);
  f.pos_r = w.add(p.pos_r, p.H * p.Lk * p.D);
  return f;
}
void rsa_forward_widened(const RsaForwardArgs& args) {
  const RsaFusedProblem& p = args.p;
  Widened w;
  RsaForwardArgs f = args;
  f.p = widened(p, w);
  f.q = w.add(args.q, p.B * p.H * p.Lq * p.D);
  f.k = w.add(args.k, p.B * p.H * p.Lk * p.D);
  f.v = w.add(args.v, p.B * p.H * p.Lk * p.D);
  rsa_forward(f);
}
void rsa_backward_widened(const RsaBackwardArgs& args) {
  const RsaFusedProblem& p = args.p;
  Widened w;
  RsaBackwardArgs g = args;
  g.p = widened(p, w);
  g.q = w.add(args.q, p.B * p.H * p.Lq * p.D);
  g.k = w.add(args.k, p.B * p.H * p.Lk * p.D);
  g.v = w.add(args.v, p.B * p.H * p.Lk * p.D);
  g.dO = w.add(args.dO, p.B * p.H * p.Lq * p.D);
  rsa_backward(g);
}

// kern::rsa_forward / rsa_backward (backends/kernels.cpp) call these only
// for problems that rsa_fused_takes() takes.
void rsa_forward(const RsaForwardArgs& args) {
  if (flash_rsa_forward(args)) return;  // tensor cores (cuda_flash.cu), when they take it
  if (args.p.bf16_operands) return rsa_forward_widened(args);
  const DType dt = args.dt;
  const RsaFusedProblem& p = args.p;
  const void *q = args.q, *k = args.k, *v = args.v, *gs = args.gs, *Y = args.Y;
  void *O = args.O, *Oatt_r = args.Oatt_r, *lse = args.lse;
  dispatch_float(dt, "rsa_attention", [&](auto tag) {
    using T = decltype(tag);
    Scratch ext(0);
    row_ext<T>(p, ext);
    const Args a = make_args(p, ext.as<int>());
    auto run = [&](auto dmax) {
      constexpr int DM = decltype(dmax)::value;
      fwd<T, DM>(p, a, static_cast<const T*>(q), static_cast<const T*>(k),
                 static_cast<const T*>(v), static_cast<const T*>(gs), static_cast<const T*>(Y),
                 static_cast<T*>(O), static_cast<T*>(Oatt_r), static_cast<T*>(lse));
    };
    if (p.D <= 64) run(std::integral_constant<int, 64>{});
    else if constexpr (std::is_same<T, float>::value) run(std::integral_constant<int, 128>{});
  });
}

void rsa_backward(const RsaBackwardArgs& args) {
  if (flash_rsa_backward(args)) return;  // tensor cores (cuda_flash.cu), when they take it
  if (args.p.bf16_operands) return rsa_backward_widened(args);
  const DType dt = args.dt;
  const RsaFusedProblem& p = args.p;
  const void *q = args.q, *k = args.k, *v = args.v, *gs = args.gs, *O = args.O,
             *Oatt_r = args.Oatt_r, *lse = args.lse, *dO = args.dO;
  void *dq = args.dq, *dk = args.dk, *dv = args.dv, *dS = args.dS;
  dispatch_float(dt, "rsa_attention backward", [&](auto tag) {
    using T = decltype(tag);
    Scratch ext(0);
    row_ext<T>(p, ext);
    const Args a = make_args(p, ext.as<int>());
    if (dS && (ext.p || p.causal))  // skipped tiles are not written
      REMORA_CUDA_CHECK(cudaMemsetAsync(dS, 0, size_t(p.B * p.H * p.Lq * p.Lk) * sizeof(T), stream()));
    Scratch di(size_t(p.B * p.H * p.Lq) * sizeof(T));
    k_attn_delta<T><<<grid_for(p.B * p.H * p.Lq), kThreads, 0, stream()>>>(
        a, static_cast<const T*>(gs), static_cast<const T*>(O), static_cast<const T*>(Oatt_r),
        static_cast<const T*>(dO), di.as<T>());
    check_launch("rsa_attention (fused backward, delta)");
    auto run = [&](auto dmax) {
      constexpr int DM = decltype(dmax)::value;
      bwd<T, DM>(p, a, static_cast<const T*>(q), static_cast<const T*>(k),
                 static_cast<const T*>(v), static_cast<const T*>(gs), static_cast<const T*>(lse),
                 di.as<T>(), static_cast<const T*>(dO), static_cast<T*>(dq), static_cast<T*>(dk),
                 static_cast<T*>(dv), static_cast<T*>(dS), static_cast<T*>(args.dpos_q),
                 static_cast<T*>(args.dpos_r));
    };
    if (p.D <= 64) run(std::integral_constant<int, 64>{});
    else if constexpr (std::is_same<T, float>::value) run(std::integral_constant<int, 128>{});
  });
}

const RsaKernels kCudaRsa = {&rsa_forward, &rsa_backward, &flash_rsa_launches};
const bool g_registered = [] {
  register_kernels(DeviceType::cuda, &kCudaRsa);
  return true;
}();

}  // namespace

// Whether the fused kernels take this problem: head width up to 128 in f32 and
// 64 in f64 (f64 is the reference dtype: one instantiation fewer keeps nvcc's
// time down), the grid's dims within CUDA's limits; bf16 operands with f32
// (the tensor-core kernels take them, or they are widened for the others).
bool rsa_fused_takes(DType dt, const RsaFusedProblem& p) {
  if (p.bf16_operands && dt != DType::f32) return false;
  return (dt == DType::f32 || dt == DType::f64) && p.D >= 1 && p.D <= (dt == DType::f32 ? 128 : 64) &&
         p.Lq >= 1 && p.Lk >= 1 && p.B * p.H <= 65535;
}

}  // namespace cuda
}  // namespace remora
