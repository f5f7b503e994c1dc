// SPDX-License-Identifier: BSD-3-Clause
// CPU kernels for the SRU elementwise recurrence (docs/math.md#the-sru-elementwise-recurrence).
//
// Letters: L time, B batch, D units (both directions), k columns of U per unit.
// Every (batch, unit) lane is an independent scalar recurrence over time:
//
//   f_t = σ(u1_t + v_f c_{t-1} + b_f)
//   r_t = σ(u2_t + v_r c_{t-1} + b_r)
//   c_t = u0_t + f_t (c_{t-1} - u0_t)
//   h_t = x'_t + m r_t (c_t - x'_t)
//
// m is the dropout mask on c [B, D]. Its placement is the official code's
// (sru/ops.py elementwise_recurrence_naive and the CUDA kernel:
// h = (c - x') * mask * r + x'): with m = 0 the lane passes x' through.
//
// A task is one batch row b and a chunk of up to kChunk consecutive units of one
// direction; the inner loop over the chunk is contiguous in memory, so it
// vectorises. Each pool thread sweeps time once for a contiguous run of tasks
// (see "Loop order" below).
// The reference is sru_recurrence_reference in ops/sru.cpp (composed ops).
#include "../../core/parallel.h"
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)  // GCC only: clang refuses the always_inline bodies
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <vector>

#include "../../core/error.h"
#include "../kernels.h"
#include "cpu_backend.h"
#include "simd_f32.h"
#include "vec_math.h"

namespace remora {

namespace {

constexpr int64_t kChunk = 256;

struct Task {
  int64_t b, j0, j1;
  bool rev;
};

// (b, chunk) tasks; with bidirectional, units [D/2, D) run reversed in time.
std::vector<Task> make_tasks(const SruProblem& p) {
  std::vector<Task> tasks;
  const int64_t half = p.bidirectional ? p.D / 2 : p.D;
  for (int64_t b = 0; b < p.B; ++b)
    for (int dir = 0; dir < (p.bidirectional ? 2 : 1); ++dir) {
      const int64_t lo = dir ? half : 0, hi = dir ? p.D : half;
      for (int64_t j0 = lo; j0 < hi; j0 += kChunk)
        tasks.push_back({b, j0, std::min(j0 + kChunk, hi), dir == 1});
    }
  return tasks;
}

// The two gates of a step, fa = σ(za) and fb = σ(zb). float64 (the reference
// and gradient-check dtype) divides twice with std::exp.
inline void sigm2(double za, double zb, double& fa, double& fb) {
  fa = 1.0 / (1.0 + std::exp(-za));
  fb = 1.0 / (1.0 + std::exp(-zb));
}
// float: one division for both gates (the divider, not memory, bounded the
// sweeps: vdivps issues once per ~7 cycles) and the cheaper exp for x <= 44.
// With A = 1 + e^-za, B = 1 + e^-zb: fa = B / (AB), fb = A / (AB), within
// ~1.5 ulp of 1 / A, 1 / B. z is clamped at -40 first so that AB stays finite
// (e^80 < FLT_MAX): σ(z) for z < -40 comes out as σ(-40) = 4.2e-18 instead of
// something smaller, an absolute difference below 4.3e-18. NaN stays NaN.
inline __attribute__((always_inline)) void sigm2(float za, float zb, float& fa, float& fb) {
  const float ea = vec::exp_f32_nonpos(za < -40.0f ? 40.0f : -za);
  const float eb = vec::exp_f32_nonpos(zb < -40.0f ? 40.0f : -zb);
  const float A = 1.0f + ea, B = 1.0f + eb;
  const float inv = 1.0f / (A * B);
  fa = B * inv;
  fb = A * inv;
}

// Per-unit constants v_f, v_r, b_f, b_r as four unit-stride arrays over D, and
// a row of ones standing in for the mask when there is none.
template <typename T>
struct Consts {
  std::vector<T> vf, vr, bf, br;
  alignas(64) T ones[kChunk];
  Consts(const SruProblem& p, const T* v, const T* bb)
      : vf(v, v + p.D), vr(v + p.D, v + 2 * p.D), bf(bb, bb + p.D), br(bb + p.D, bb + 2 * p.D) {
    for (int64_t i = 0; i < kChunk; ++i) ones[i] = T(1);
  }
  const T* m(const T* mask, const Task& tk, int64_t D) const {
    return mask ? mask + tk.b * D + tk.j0 : ones;
  }
};

// Prefetches n elements starting at p (one hint per 64-byte line).
template <typename T>
inline void prefetch_row(const T* p, int64_t n, bool write = false) {
  const char* c = reinterpret_cast<const char*>(p);
  const int64_t bytes = n * int64_t(sizeof(T));
  for (int64_t o = 0; o < bytes; o += 64) {
    if (write) __builtin_prefetch(c + o, 1);
    else __builtin_prefetch(c + o, 0);
  }
}

// Row stores. The AVX2 copies write the outputs with non-temporal (streaming)
// stores: h, c, dU and dx are written once and read much later, so skipping
// the read-for-ownership of every line saves a quarter of the memory traffic.
template <bool NT, typename T>
inline __attribute__((always_inline)) void store_row(T* dst, const T* src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = src[i];
}
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)  // GCC only: clang refuses the always_inline bodies
template <>
inline __attribute__((target("avx2"))) void store_row<true, float>(
    float* dst, const float* src, int64_t n) {
  int64_t i = 0;
  for (; i < n && (reinterpret_cast<uintptr_t>(dst + i) & 31); ++i) dst[i] = src[i];
  for (; i + 8 <= n; i += 8) _mm256_stream_ps(dst + i, _mm256_loadu_ps(src + i));
  for (; i < n; ++i) dst[i] = src[i];
}
template <>
inline __attribute__((target("avx2"))) void store_row<true, double>(
    double* dst, const double* src, int64_t n) {
  int64_t i = 0;
  for (; i < n && (reinterpret_cast<uintptr_t>(dst + i) & 31); ++i) dst[i] = src[i];
  for (; i + 4 <= n; i += 4) _mm256_stream_pd(dst + i, _mm256_loadu_pd(src + i));
  for (; i < n; ++i) dst[i] = src[i];
}
#endif

// U's rows hold k columns per unit, interleaved ([unit][k]); the sweeps work on
// unit-stride columns. split_u copies a row of n units out into a0, a1, a2 and
// ax (column 3 when k = 4, else x); merge_u writes the gradient columns back
// interleaved. The scalar loops are the reference; with AVX2 (the NT = true
// instantiation, f32) 8 units at a time go through registers: k = 3 as three
// blends and a lane permute per column (the 24 floats of 8 units sit in 3
// vectors at fixed lanes), k = 4 as a 4 x 4 transpose in each 128-bit half
// and a lane permute. Bit-for-bit the same data movement either way.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)  // GCC only, as above
#define REMORA_SRU_SHUFFLE 1
// The 24 floats of 8 units x 3 columns in three vectors v0, v1, v2: column j
// takes lanes of v0, v1 and v2 in a fixed pattern (blend masks 0x92, 0x24,
// 0x49), which leaves its 8 values in a scrambled lane order; the permute
// kPerm3[j] sorts them, and merge undoes it with the inverse permute kInv3[j]
// before the same blends.
alignas(32) constexpr int kPerm3[3][8] = {{0, 3, 6, 1, 4, 7, 2, 5},
                                          {1, 4, 7, 2, 5, 0, 3, 6},
                                          {2, 5, 0, 3, 6, 1, 4, 7}};
alignas(32) constexpr int kInv3[3][8] = {{0, 3, 6, 1, 4, 7, 2, 5},
                                         {5, 0, 3, 6, 1, 4, 7, 2},
                                         {2, 5, 0, 3, 6, 1, 4, 7}};
alignas(32) constexpr int kPerm4[8] = {0, 4, 1, 5, 2, 6, 3, 7};
alignas(32) constexpr int kInv4[8] = {0, 2, 4, 6, 1, 3, 5, 7};
__attribute__((target("avx2"), always_inline)) inline void split3(const float* u, float* a0, float* a1,
                                                                   float* a2) {
  const __m256 v0 = _mm256_loadu_ps(u), v1 = _mm256_loadu_ps(u + 8), v2 = _mm256_loadu_ps(u + 16);
  const __m256 ta = _mm256_blend_ps(_mm256_blend_ps(v0, v1, 0x92), v2, 0x24);
  const __m256 tb = _mm256_blend_ps(_mm256_blend_ps(v0, v1, 0x24), v2, 0x49);
  const __m256 tc = _mm256_blend_ps(_mm256_blend_ps(v0, v1, 0x49), v2, 0x92);
  _mm256_storeu_ps(a0, _mm256_permutevar8x32_ps(ta, _mm256_load_si256((const __m256i*)kPerm3[0])));
  _mm256_storeu_ps(a1, _mm256_permutevar8x32_ps(tb, _mm256_load_si256((const __m256i*)kPerm3[1])));
  _mm256_storeu_ps(a2, _mm256_permutevar8x32_ps(tc, _mm256_load_si256((const __m256i*)kPerm3[2])));
}
__attribute__((target("avx2"), always_inline)) inline void merge3(const float* g0, const float* g1,
                                                                   const float* g2, float* out) {
  const __m256 ta = _mm256_permutevar8x32_ps(_mm256_loadu_ps(g0), _mm256_load_si256((const __m256i*)kInv3[0]));
  const __m256 tb = _mm256_permutevar8x32_ps(_mm256_loadu_ps(g1), _mm256_load_si256((const __m256i*)kInv3[1]));
  const __m256 tc = _mm256_permutevar8x32_ps(_mm256_loadu_ps(g2), _mm256_load_si256((const __m256i*)kInv3[2]));
  _mm256_storeu_ps(out, _mm256_blend_ps(_mm256_blend_ps(ta, tb, 0x92), tc, 0x24));
  _mm256_storeu_ps(out + 8, _mm256_blend_ps(_mm256_blend_ps(ta, tb, 0x24), tc, 0x49));
  _mm256_storeu_ps(out + 16, _mm256_blend_ps(_mm256_blend_ps(ta, tb, 0x49), tc, 0x92));
}
__attribute__((target("avx2"), always_inline)) inline void split4(const float* u, float* a0, float* a1,
                                                                   float* a2, float* a3) {
  const __m256 v0 = _mm256_loadu_ps(u), v1 = _mm256_loadu_ps(u + 8), v2 = _mm256_loadu_ps(u + 16),
               v3 = _mm256_loadu_ps(u + 24);
  const __m256 t0 = _mm256_unpacklo_ps(v0, v1), t1 = _mm256_unpackhi_ps(v0, v1);
  const __m256 t2 = _mm256_unpacklo_ps(v2, v3), t3 = _mm256_unpackhi_ps(v2, v3);
  const __m256i p = _mm256_load_si256((const __m256i*)kPerm4);
  _mm256_storeu_ps(a0, _mm256_permutevar8x32_ps(_mm256_shuffle_ps(t0, t2, 0x44), p));
  _mm256_storeu_ps(a1, _mm256_permutevar8x32_ps(_mm256_shuffle_ps(t0, t2, 0xEE), p));
  _mm256_storeu_ps(a2, _mm256_permutevar8x32_ps(_mm256_shuffle_ps(t1, t3, 0x44), p));
  _mm256_storeu_ps(a3, _mm256_permutevar8x32_ps(_mm256_shuffle_ps(t1, t3, 0xEE), p));
}
__attribute__((target("avx2"), always_inline)) inline void merge4(const float* g0, const float* g1,
                                                                   const float* g2, const float* g3,
                                                                   float* out) {
  const __m256i q = _mm256_load_si256((const __m256i*)kInv4);
  // Back to [even units | odd units] per column; then unpack and shuffle give
  // the rows of units (0, 1), (2, 3), (4, 5), (6, 7) directly.
  const __m256 A = _mm256_permutevar8x32_ps(_mm256_loadu_ps(g0), q);
  const __m256 B = _mm256_permutevar8x32_ps(_mm256_loadu_ps(g1), q);
  const __m256 C = _mm256_permutevar8x32_ps(_mm256_loadu_ps(g2), q);
  const __m256 D = _mm256_permutevar8x32_ps(_mm256_loadu_ps(g3), q);
  const __m256 t0 = _mm256_unpacklo_ps(A, B), t1 = _mm256_unpackhi_ps(A, B);
  const __m256 t2 = _mm256_unpacklo_ps(C, D), t3 = _mm256_unpackhi_ps(C, D);
  const __m256 w0 = _mm256_shuffle_ps(t0, t2, 0x44), w1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 w2 = _mm256_shuffle_ps(t1, t3, 0x44), w3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  _mm256_storeu_ps(out, w0);  // units 0, 1
  _mm256_storeu_ps(out + 8, w1);
  _mm256_storeu_ps(out + 16, w2);
  _mm256_storeu_ps(out + 24, w3);
}
// Whole rows: one call per row of up to kChunk units; returns the units done.
template <int K>
__attribute__((target("avx2"))) int64_t split_row_avx2(const float* u, const float* x, int64_t n,
                                                       float* a0, float* a1, float* a2, float* ax) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    if constexpr (K == 3) {
      split3(u + i * 3, a0 + i, a1 + i, a2 + i);
      _mm256_storeu_ps(ax + i, _mm256_loadu_ps(x + i));
    } else {
      split4(u + i * 4, a0 + i, a1 + i, a2 + i, ax + i);
    }
  }
  return i;
}
template <int K>
__attribute__((target("avx2"))) int64_t merge_row_avx2(const float* g0, const float* g1,
                                                       const float* g2, const float* gx, int64_t n,
                                                       float* out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    if constexpr (K == 3) merge3(g0 + i, g1 + i, g2 + i, out + i * 3);
    else merge4(g0 + i, g1 + i, g2 + i, gx + i, out + i * 4);
  }
  return i;
}
#endif

#ifdef REMORA_SRU_SHUFFLE
// ---- AVX-512, f32: one forward or backward step of a task on 16-unit
// vectors, U split and dU merged in registers (no trip through stack rows),
// each gate's clamp one min, exp_nonpos of simd_exp.inc. The same arithmetic
// per unit as the loops in forward_body / backward_body, which run the tail
// of n mod 16 units and every other copy.
// Index vectors of V::permute2 (_mm512_permutex2var_ps) for the (de)interleaving of K
// columns of 16 units: split[c] (two stages for K = 3, one for K = 4, then a
// blend) and merge[k] (two stages), built once.
struct Perms {
  alignas(64) int32_t s1[4][16], s2[4][16], m1[4][16], m2[4][16];
  explicit Perms(int K) {
    for (int c = 0; c < 4; ++c)
      for (int j = 0; j < 16; ++j) {
        if (K == 3) {
          const int p = 3 * j + c;
          s1[c][j] = p < 32 ? p : 0;
          s2[c][j] = p < 32 ? j : 16 + (p - 32);
          const int q = 16 * c + j, src = q % 3, u = q / 3;  // merge: output c, lane j
          m1[c][j] = src == 0 ? u : src == 1 ? 16 + u : 0;
          m2[c][j] = src == 2 ? 16 + u : j;
        } else {
          s1[c][j] = (4 * j + c) & 31;
          const int u = 4 * c + j / 4, col = j % 4;
          m1[c][j] = col % 2 == 0 ? u : 16 + u;
        }
      }
  }
};

namespace avx512 {
using V = cpu_impl::simd::Avx512;
#define REMORA_SIMD_TARGET REMORA_AVX512_TARGET
#include "cpu_sru_simd.inc"
#undef REMORA_SIMD_TARGET
}  // namespace avx512
namespace avx512_emulated {  // REMORA_CPU_ISA=avx512_emulated: the same steps, 16 lanes in scalar code
using V = cpu_impl::simd::Emu16;
#define REMORA_SIMD_TARGET "sse2"
#include "cpu_sru_simd.inc"
#undef REMORA_SIMD_TARGET
}  // namespace avx512_emulated
#endif

template <bool AVX, typename T, int K>
inline __attribute__((always_inline)) void split_u(const T* u, const T* x, int64_t n, T* a0, T* a1,
                                                   T* a2, T* ax) {
  int64_t i = 0;
#ifdef REMORA_SRU_SHUFFLE
  if constexpr (AVX && std::is_same<T, float>::value) i = split_row_avx2<K>(u, x, n, a0, a1, a2, ax);
#endif
  for (; i < n; ++i) {
    a0[i] = u[i * K];
    a1[i] = u[i * K + 1];
    a2[i] = u[i * K + 2];
    ax[i] = K == 3 ? x[i] : u[i * K + 3];
  }
}

template <bool AVX, typename T, int K>
inline __attribute__((always_inline)) void merge_u(const T* g0, const T* g1, const T* g2,
                                                   const T* gx, int64_t n, T* out) {
  int64_t i = 0;
#ifdef REMORA_SRU_SHUFFLE
  if constexpr (AVX && std::is_same<T, float>::value) i = merge_row_avx2<K>(g0, g1, g2, gx, n, out);
#endif
  for (; i < n; ++i) {
    out[i * K] = g0[i];
    out[i * K + 1] = g1[i];
    out[i * K + 2] = g2[i];
    if (K == 4) out[i * K + 3] = gx[i];
  }
}

// Loop order. A thread owns a contiguous run of tasks (batch rows b0..b1, all
// their unit chunks) and walks time once for all of them: step s of every
// owned task, then step s + 1. The rows one step touches ([t, b0..b1) of U, x,
// h, c) are then one contiguous stretch of memory. (The first version walked
// all of time for one task, then the next, jumping B * D * k elements per
// step. Measured on the 2-core VM, the new order is faster at 2 threads and
// was slower at 1 thread on the L = 1024 bidirectional benchmark in one A/B;
// docs/benchmarks.md.) Each task's state (c, or the carried gradient and the
// dv/db sums) lives in the thread's own arrays, kChunk per task. The rows of
// the task two ahead (ahead()) are prefetched before each task's step, across
// the page boundaries the hardware prefetchers stop at.

// Row offset of step s of task tk: [t, b, j0] in [L, B, D].
inline int64_t task_row(const SruProblem& p, const Task& tk, int64_t s) {
  const int64_t t = tk.rev ? p.L - 1 - s : s;
  return (t * p.B + tk.b) * p.D + tk.j0;
}

// The (task, step) two tasks after (q, s) in a sweep that walks the steps in
// direction ds (+1 forward, -1 backward); false past the sweep's end.
inline bool ahead(int64_t q, int64_t s, int64_t ntasks, int64_t L, int64_t ds, int64_t* q2,
                  int64_t* s2) {
  *q2 = q + 2 < ntasks ? q + 2 : q + 2 - ntasks;
  *s2 = q + 2 < ntasks ? s : s + ds;
  return *q2 < ntasks && *s2 >= 0 && *s2 < L;
}

// Forward sweep of one thread's run of tasks, tasks[0 .. ntasks). Per step the chunk's U
// columns are first split into unit-stride arrays, so the arithmetic loop is
// plain SIMD.
// Fused: 0, the loops only; 1, the AVX-512 step first (avx512::); 2, its
// emulation (avx512_emulated::).
template <typename T, int K, bool NT, int Fused = 0>
inline __attribute__((always_inline)) void forward_body(
    const SruProblem& p, const Task* tasks, int64_t ntasks, const Consts<T>& k, const T* U,
    const T* x, const T* c0, const T* mask, T* h, T* c, T* c_last) {
  const int64_t L = p.L, D = p.D;
  std::vector<T> state(size_t(ntasks * kChunk));
  for (int64_t q = 0; q < ntasks; ++q) {
    const Task& tk = tasks[q];
    for (int64_t i = 0; i < tk.j1 - tk.j0; ++i)
      state[size_t(q * kChunk + i)] = c0 ? c0[tk.b * D + tk.j0 + i] : T(0);
  }
  alignas(64) T a0[kChunk], a1[kChunk], a2[kChunk], ax[kChunk], hl[kChunk];
  for (int64_t s = 0; s < L; ++s) {
    for (int64_t q = 0; q < ntasks; ++q) {
      const Task& tk = tasks[q];
      const int64_t n = tk.j1 - tk.j0, row = task_row(p, tk, s);
      int64_t q2, s2;
      if (ahead(q, s, ntasks, L, +1, &q2, &s2)) {
        const Task& tn = tasks[q2];
        const int64_t rn = task_row(p, tn, s2), nn = tn.j1 - tn.j0;
        prefetch_row(U + rn * K, nn * K);
        if (K == 3) prefetch_row(x + rn, nn);
      }
      T* cur = state.data() + q * kChunk;
      const T *vf = k.vf.data() + tk.j0, *vr = k.vr.data() + tk.j0, *bf = k.bf.data() + tk.j0,
              *br = k.br.data() + tk.j0, *m = k.m(mask, tk, D);
      // i0: the units the fused AVX-512 step did; the loop below does the rest.
      int64_t i0 = 0;
#ifdef REMORA_SRU_SHUFFLE
      if constexpr (Fused == 1 && std::is_same<T, float>::value) {
        static const Perms perms(K);
        i0 = avx512::forward_step<K>(perms, n, U + row * K, K == 3 ? x + row : nullptr, vf, vr,
                                     bf, br, m, cur, h + row, c + row);
      } else if constexpr (Fused == 2 && std::is_same<T, float>::value) {
        static const Perms perms(K);
        i0 = avx512_emulated::forward_step<K>(perms, n, U + row * K, K == 3 ? x + row : nullptr, vf,
                                              vr, bf, br, m, cur, h + row, c + row);
      }
#endif
      if (i0 < n) {
        const int64_t nr = n - i0;
        cur += i0, vf += i0, vr += i0, bf += i0, br += i0, m += i0;
        split_u<NT, T, K>(U + (row + i0) * K, K == 3 ? x + row + i0 : nullptr, nr, a0, a1, a2,
                          ax);
#pragma omp simd
        for (int64_t i = 0; i < nr; ++i) {
          T f, r;
          sigm2(a1[i] + vf[i] * cur[i] + bf[i], a2[i] + vr[i] * cur[i] + br[i], f, r);
          const T cn = a0[i] + f * (cur[i] - a0[i]);
          hl[i] = ax[i] + m[i] * r * (cn - ax[i]);
          cur[i] = cn;
        }
        store_row<NT>(h + row + i0, hl, nr);
        store_row<NT>(c + row + i0, cur, nr);
      }
    }
  }
  for (int64_t q = 0; q < ntasks; ++q) {
    const Task& tk = tasks[q];
    for (int64_t i = 0; i < tk.j1 - tk.j0; ++i)
      c_last[tk.b * D + tk.j0 + i] = state[size_t(q * kChunk + i)];
  }
}

// The reverse sweep of one thread's run of tasks. part [B, 4, D] receives each lane's
// sums of (dv_f, dv_r, db_f, db_r) over time; the caller sums them over B in
// order.
// Fused: 0, the loops only; 1, the AVX-512 step first (avx512::); 2, its
// emulation (avx512_emulated::).
template <typename T, int K, bool NT, int Fused = 0>
inline __attribute__((always_inline)) void backward_body(
    const SruProblem& p, const Task* tasks, int64_t ntasks, const Consts<T>& k, const T* U,
    const T* x, const T* c0, const T* mask, const T* c, const T* dh, const T* dc,
    const T* dc_last, T* dU, T* dx, T* part, T* dc0) {
  const int64_t L = p.L, D = p.D;
  // Per task: the carried dL/dc, c0's row, and the four parameter sums.
  constexpr int64_t kArrays = 6;
  std::vector<T> st(size_t(ntasks * kArrays * kChunk), T(0));
  auto arr = [&](int64_t q, int a) { return st.data() + (q * kArrays + a) * kChunk; };
  for (int64_t q = 0; q < ntasks; ++q) {
    const Task& tk = tasks[q];
    for (int64_t i = 0; i < tk.j1 - tk.j0; ++i) {
      arr(q, 0)[i] = dc_last ? dc_last[tk.b * D + tk.j0 + i] : T(0);
      arr(q, 1)[i] = c0 ? c0[tk.b * D + tk.j0 + i] : T(0);
    }
  }
  alignas(64) T zero[kChunk] = {};
  alignas(64) T a0[kChunk], a1[kChunk], a2[kChunk], ax[kChunk];
  alignas(64) T g0[kChunk], g1[kChunk], g2[kChunk], gx[kChunk], gi[kChunk * K];
  for (int64_t s = L - 1; s >= 0; --s) {  // s: forward step index, walked backwards
    for (int64_t q = 0; q < ntasks; ++q) {
      const Task& tk = tasks[q];
      const int64_t n = tk.j1 - tk.j0, row = task_row(p, tk, s);
      const int64_t prow = s == 0 ? -1 : task_row(p, tk, s - 1);
      int64_t q2, s2;
      if (ahead(q, s, ntasks, L, -1, &q2, &s2)) {
        const Task& tn = tasks[q2];
        const int64_t rn = task_row(p, tn, s2), nn = tn.j1 - tn.j0;
        prefetch_row(U + rn * K, nn * K);
        if (K == 3) prefetch_row(x + rn, nn);
        prefetch_row(dh + rn, nn);
        if (dc) prefetch_row(dc + rn, nn);
        if (s2 > 0) prefetch_row(c + task_row(p, tn, s2 - 1), nn);
      }
      const T* cprev = prow < 0 ? arr(q, 1) : c + prow;
      const T* cp = c + row;
      const T* dhp = dh + row;
      const T* dcp = dc ? dc + row : zero;
      const T *vf = k.vf.data() + tk.j0, *vr = k.vr.data() + tk.j0, *bf = k.bf.data() + tk.j0,
              *br = k.br.data() + tk.j0, *m = k.m(mask, tk, D);
      T *carry = arr(q, 0), *gvf = arr(q, 2), *gvr = arr(q, 3), *gbf = arr(q, 4),
        *gbr = arr(q, 5);
      // i0: the units the fused AVX-512 step did; the loop below does the rest.
      int64_t i0 = 0;
#ifdef REMORA_SRU_SHUFFLE
      if constexpr (Fused == 1 && std::is_same<T, float>::value) {
        static const Perms perms(K);
        i0 = avx512::backward_step<K>(perms, n, U + row * K, K == 3 ? x + row : nullptr, cprev,
                                      cp, dhp, dcp, vf, vr, bf, br, m, carry, gvf, gvr, gbf, gbr,
                                      dU + row * K, K == 3 ? dx + row : nullptr);
      } else if constexpr (Fused == 2 && std::is_same<T, float>::value) {
        static const Perms perms(K);
        i0 = avx512_emulated::backward_step<K>(perms, n, U + row * K, K == 3 ? x + row : nullptr,
                                               cprev, cp, dhp, dcp, vf, vr, bf, br, m, carry, gvf,
                                               gvr, gbf, gbr, dU + row * K, K == 3 ? dx + row : nullptr);
      }
#endif
      if (i0 < n) {
        const int64_t nr = n - i0;
        cprev += i0, cp += i0, dhp += i0, dcp += i0, vf += i0, vr += i0, bf += i0, br += i0;
        m += i0, carry += i0, gvf += i0, gvr += i0, gbf += i0, gbr += i0;
        split_u<NT, T, K>(U + (row + i0) * K, K == 3 ? x + row + i0 : nullptr, nr, a0, a1, a2,
                          ax);
#pragma omp simd
        for (int64_t i = 0; i < nr; ++i) {
          const T cpv = cprev[i], ct = cp[i];
          T f, r;
          sigm2(a1[i] + vf[i] * cpv + bf[i], a2[i] + vr[i] * cpv + br[i], f, r);
          const T g = dhp[i];
          const T mr = m[i] * r;
          // dL/dc_t: through h_t, from the c output, and from step t+1 (carry).
          const T gc = g * mr + dcp[i] + carry[i];
          const T gr = g * m[i] * (ct - ax[i]) * r * (T(1) - r);  // d pre-activation of r
          const T gf = gc * (cpv - a0[i]) * f * (T(1) - f);       // d pre-activation of f
          g0[i] = gc * (T(1) - f);
          g1[i] = gf;
          g2[i] = gr;
          gx[i] = g * (T(1) - mr);
          gvf[i] += gf * cpv;
          gvr[i] += gr * cpv;
          gbf[i] += gf;
          gbr[i] += gr;
          carry[i] = gc * f + gf * vf[i] + gr * vr[i];
        }
        merge_u<NT, T, K>(g0, g1, g2, gx, nr, gi);
        store_row<NT>(dU + (row + i0) * K, gi, nr * K);
        if (K == 3) store_row<NT>(dx + row + i0, gx, nr);
      }
    }
  }
  for (int64_t q = 0; q < ntasks; ++q) {
    const Task& tk = tasks[q];
    T* pb = part + tk.b * 4 * D;
    for (int64_t i = 0; i < tk.j1 - tk.j0; ++i) {
      const int64_t j = tk.j0 + i;
      pb[j] = arr(q, 2)[i];
      pb[D + j] = arr(q, 3)[i];
      pb[2 * D + j] = arr(q, 4)[i];
      pb[3 * D + j] = arr(q, 5)[i];
      if (dc0) dc0[tk.b * D + j] = arr(q, 0)[i];
    }
  }
}

// Three compiled copies of each sweep: baseline x86-64, AVX2 + FMA (8 floats
// per vector) and AVX-512 (16). They may differ in the last bits (FMA
// contraction); the widest the CPU has runs (cpu_isa, capped by REMORA_CPU_ISA).
#define SRU_FWD_ARGS                                                                          \
  const SruProblem &p, const Task *tasks, int64_t ntasks, const Consts<T> &k, const T *U,    \
      const T *x, const T *c0, const T *mask, T *h, T *c, T *c_last
#define SRU_BWD_ARGS                                                                          \
  const SruProblem &p, const Task *tasks, int64_t ntasks, const Consts<T> &k, const T *U,    \
      const T *x, const T *c0, const T *mask, const T *c, const T *dh, const T *dc,          \
      const T *dc_last, T *dU, T *dx, T *part, T *dc0

template <typename T, int K>
__attribute__((flatten)) void forward_task_base(SRU_FWD_ARGS) {
  forward_body<T, K, false>(p, tasks, ntasks, k, U, x, c0, mask, h, c, c_last);
}
template <typename T, int K>
__attribute__((flatten)) void backward_task_base(SRU_BWD_ARGS) {
  backward_body<T, K, false>(p, tasks, ntasks, k, U, x, c0, mask, c, dh, dc, dc_last, dU, dx, part,
                              dc0);
}

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)  // GCC only: clang refuses the always_inline bodies
#define REMORA_SRU_AVX2 1
template <typename T, int K>
__attribute__((target("avx2,fma"), flatten)) void forward_task_avx2(SRU_FWD_ARGS) {
  forward_body<T, K, true>(p, tasks, ntasks, k, U, x, c0, mask, h, c, c_last);
  _mm_sfence();  // order the streaming stores before the results are read
}
template <typename T, int K>
__attribute__((target("avx2,fma"), flatten)) void backward_task_avx2(SRU_BWD_ARGS) {
  backward_body<T, K, true>(p, tasks, ntasks, k, U, x, c0, mask, c, dh, dc, dc_last, dU, dx, part,
                             dc0);
  _mm_sfence();  // order the streaming stores before the results are read
}
// AVX-512: the same sweeps 16 floats per vector, with 32 vector registers
// (the backward loop's values no longer spill to the stack).
template <typename T, int K>
__attribute__((target(REMORA_AVX512_TARGET), flatten)) void forward_task_avx512(SRU_FWD_ARGS) {
  forward_body<T, K, true, 1>(p, tasks, ntasks, k, U, x, c0, mask, h, c, c_last);
  _mm_sfence();
}
template <typename T, int K>
__attribute__((target(REMORA_AVX512_TARGET), flatten)) void backward_task_avx512(SRU_BWD_ARGS) {
  backward_body<T, K, true, 1>(p, tasks, ntasks, k, U, x, c0, mask, c, dh, dc, dc_last, dU, dx, part,
                             dc0);
  _mm_sfence();
}
// REMORA_CPU_ISA=avx512_emulated: the AVX2 sweeps with the AVX-512 step's 16
// lanes in scalar code.
template <typename T, int K>
__attribute__((target("avx2,fma"))) void forward_task_avx512_emulated(SRU_FWD_ARGS) {
  forward_body<T, K, true, 2>(p, tasks, ntasks, k, U, x, c0, mask, h, c, c_last);
  _mm_sfence();
}
template <typename T, int K>
__attribute__((target("avx2,fma"))) void backward_task_avx512_emulated(SRU_BWD_ARGS) {
  backward_body<T, K, true, 2>(p, tasks, ntasks, k, U, x, c0, mask, c, dh, dc, dc_last, dU, dx, part,
                               dc0);
  _mm_sfence();
}
#endif

template <typename T, int K>
void forward_task(SRU_FWD_ARGS) {
#ifdef REMORA_SRU_AVX2
  if (cpu_impl::use_avx512())
    return forward_task_avx512<T, K>(p, tasks, ntasks, k, U, x, c0, mask, h, c, c_last);
  if (cpu_impl::use_avx512_emulated())
    return forward_task_avx512_emulated<T, K>(p, tasks, ntasks, k, U, x, c0, mask, h, c, c_last);
  if (cpu_impl::use_avx2())
    return forward_task_avx2<T, K>(p, tasks, ntasks, k, U, x, c0, mask, h, c, c_last);
#endif
  forward_task_base<T, K>(p, tasks, ntasks, k, U, x, c0, mask, h, c, c_last);
}

template <typename T, int K>
void backward_task(SRU_BWD_ARGS) {
#ifdef REMORA_SRU_AVX2
  if (cpu_impl::use_avx512())
    return backward_task_avx512<T, K>(p, tasks, ntasks, k, U, x, c0, mask, c, dh, dc, dc_last, dU,
                                      dx, part, dc0);
  if (cpu_impl::use_avx512_emulated())
    return backward_task_avx512_emulated<T, K>(p, tasks, ntasks, k, U, x, c0, mask, c, dh, dc, dc_last,
                                               dU, dx, part, dc0);
  if (cpu_impl::use_avx2())
    return backward_task_avx2<T, K>(p, tasks, ntasks, k, U, x, c0, mask, c, dh, dc, dc_last, dU,
                                    dx, part, dc0);
#endif
  backward_task_base<T, K>(p, tasks, ntasks, k, U, x, c0, mask, c, dh, dc, dc_last, dU, dx, part,
                           dc0);
}

// The tasks split into one contiguous run per thread (whole batch rows where
// there are at least as many rows as threads), each run swept by one thread.
template <typename F>
void run_split(const std::vector<Task>& tasks, int64_t work, const F& sweep) {
  const int64_t nt = int64_t(tasks.size());
  const int threads = nt > 1 && work > 4096 ? int(std::min<int64_t>(pool_threads(), nt)) : 1;
  parallel_team(threads, [&](int me, int n) {
    int64_t lo, hi;
    static_range(nt, me, n, &lo, &hi);
    if (hi > lo) sweep(tasks.data() + lo, hi - lo);
  });
}

template <typename T>
void forward_impl(const SruProblem& p, const T* U, const T* x, const T* v, const T* bb,
                  const T* c0, const T* mask, T* h, T* c, T* c_last) {
  const std::vector<Task> tasks = make_tasks(p);
  const Consts<T> k(p, v, bb);
  run_split(tasks, p.L * p.B * p.D, [&](const Task* t, int64_t n) {
    if (p.k == 3) forward_task<T, 3>(p, t, n, k, U, x, c0, mask, h, c, c_last);
    else forward_task<T, 4>(p, t, n, k, U, x, c0, mask, h, c, c_last);
  });
}

template <typename T>
void backward_impl(const SruProblem& p, const T* U, const T* x, const T* v, const T* bb,
                   const T* c0, const T* mask, const T* c, const T* dh, const T* dc,
                   const T* dc_last, T* dU, T* dx, T* dv, T* db, T* dc0) {
  const std::vector<Task> tasks = make_tasks(p);
  const int64_t D = p.D;
  const Consts<T> k(p, v, bb);
  std::vector<T> part(size_t(p.B * 4 * D), T(0));
  run_split(tasks, p.L * p.B * p.D, [&](const Task* t, int64_t n) {
    if (p.k == 3)
      backward_task<T, 3>(p, t, n, k, U, x, c0, mask, c, dh, dc, dc_last, dU, dx, part.data(), dc0);
    else
      backward_task<T, 4>(p, t, n, k, U, x, c0, mask, c, dh, dc, dc_last, dU, dx, part.data(), dc0);
  });
  // Sum the per-lane partials over B in a fixed order (deterministic).
  for (int64_t j = 0; j < D; ++j) {
    double s[4] = {0, 0, 0, 0};
    for (int64_t b = 0; b < p.B; ++b)
      for (int q = 0; q < 4; ++q) s[q] += double(part[size_t((b * 4 + q) * D + j)]);
    dv[j] = T(s[0]);
    dv[D + j] = T(s[1]);
    db[j] = T(s[2]);
    db[D + j] = T(s[3]);
  }
}

// The problem checks (k, x present, even D) run in kern::sru_forward (backends/kernels.cpp).
void sru_forward(const SruForwardArgs& a) {
  const SruProblem& p = a.p;
  const DType dt = a.dt;
  const void *U = a.U, *x = a.x, *v = a.v, *b = a.b, *c0 = a.c0, *mask = a.mask;
  void *h = a.h, *c = a.c, *c_last = a.c_last;
  auto run = [&](auto zero) {
    using T = decltype(zero);
    if (p.L == 0 || p.B == 0 || p.D == 0) {  // no steps: c_last = c0
      for (int64_t i = 0; i < p.B * p.D; ++i)
        static_cast<T*>(c_last)[i] = c0 ? static_cast<const T*>(c0)[i] : T(0);
      return;
    }
    forward_impl<T>(p, static_cast<const T*>(U), static_cast<const T*>(x),
                    static_cast<const T*>(v), static_cast<const T*>(b),
                    static_cast<const T*>(c0), static_cast<const T*>(mask), static_cast<T*>(h),
                    static_cast<T*>(c), static_cast<T*>(c_last));
  };
  if (dt == DType::f32) run(float{});
  else if (dt == DType::f64) run(double{});
  else REMORA_FAIL("sru_recurrence: expected f32 or f64, got " << dtype_name(dt));
}

void sru_backward(const SruBackwardArgs& a) {
  const SruProblem& p = a.p;
  const DType dt = a.dt;
  const void *U = a.U, *x = a.x, *v = a.v, *b = a.b, *c0 = a.c0, *mask = a.mask, *c = a.c,
             *dh = a.dh, *dc = a.dc, *dc_last = a.dc_last;
  void *dU = a.dU, *dx = a.dx, *dv = a.dv, *db = a.db, *dc0 = a.dc0;
  auto run = [&](auto zero) {
    using T = decltype(zero);
    T* dvp = static_cast<T*>(dv);
    T* dbp = static_cast<T*>(db);
    if (p.L == 0 || p.B == 0 || p.D == 0) {
      for (int64_t j = 0; j < 2 * p.D; ++j) dvp[j] = dbp[j] = T(0);
      if (dc0)
        for (int64_t i = 0; i < p.B * p.D; ++i)
          static_cast<T*>(dc0)[i] = dc_last ? static_cast<const T*>(dc_last)[i] : T(0);
      return;
    }
    backward_impl<T>(p, static_cast<const T*>(U), static_cast<const T*>(x),
                     static_cast<const T*>(v), static_cast<const T*>(b),
                     static_cast<const T*>(c0), static_cast<const T*>(mask),
                     static_cast<const T*>(c), static_cast<const T*>(dh),
                     static_cast<const T*>(dc), static_cast<const T*>(dc_last),
                     static_cast<T*>(dU), static_cast<T*>(dx), dvp, dbp, static_cast<T*>(dc0));
  };
  if (dt == DType::f32) run(float{});
  else if (dt == DType::f64) run(double{});
  else REMORA_FAIL("sru_recurrence: expected f32 or f64, got " << dtype_name(dt));
}

const SruKernels kCpuSru = {&sru_forward, &sru_backward};
const bool g_registered = [] {
  register_kernels(DeviceType::cpu, &kCpuSru);
  return true;
}();

}  // namespace

}  // namespace remora
