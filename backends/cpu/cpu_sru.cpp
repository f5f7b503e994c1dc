// CPU kernels for the SRU elementwise recurrence (SPEC §6).
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
// direction; it walks time once and the inner loop over the chunk is
// contiguous in memory, so it vectorises. Tasks run in parallel with OpenMP.
// The reference is sru_recurrence_reference in ops/sru.cpp (composed ops).
#include <omp.h>
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)  // GCC only: clang refuses the always_inline bodies
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "../../core/error.h"
#include "../kernels.h"
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

template <typename T>
inline T sigm(T z) {
  return T(1) / (T(1) + vec::vexp(-z));
}

// Per-chunk constants: v_f, v_r, b_f, b_r and the mask, copied to aligned locals.
template <typename T>
struct Consts {
  alignas(64) T vf[kChunk], vr[kChunk], bf[kChunk], br[kChunk], m[kChunk];
  Consts(const SruProblem& p, const Task& tk, const T* v, const T* bb, const T* mask) {
    const int64_t n = tk.j1 - tk.j0, D = p.D;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t j = tk.j0 + i;
      vf[i] = v[j];
      vr[i] = v[D + j];
      bf[i] = bb[j];
      br[i] = bb[D + j];
      m[i] = mask ? mask[tk.b * D + j] : T(1);
    }
  }
};

// Prefetches n elements starting at p (one hint per 64-byte line). The rows of
// one step of a task are far apart in memory ([t, b, j0] strides of B*D), and the
// hardware prefetchers do not cross 4 KiB pages, so each sweep asks for the
// rows of the step kPrefetch steps ahead itself.
constexpr int64_t kPrefetch = 2;
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

// One task's forward sweep. Per step the chunk's U columns are first split
// into unit-stride arrays, so the arithmetic loop is plain SIMD.
template <typename T, int K, bool NT>
inline __attribute__((always_inline)) void forward_body(
    const SruProblem& p, const Task& tk, const T* U, const T* x, const T* v, const T* bb,
    const T* c0, const T* mask, T* h, T* c, T* c_last) {
  const int64_t L = p.L, B = p.B, D = p.D, n = tk.j1 - tk.j0, b = tk.b;
  const Consts<T> k(p, tk, v, bb, mask);
  alignas(64) T cur[kChunk], a0[kChunk], a1[kChunk], a2[kChunk], ax[kChunk], hl[kChunk];
  for (int64_t i = 0; i < n; ++i) cur[i] = c0 ? c0[b * D + tk.j0 + i] : T(0);
  for (int64_t s = 0; s < L; ++s) {
    const int64_t t = tk.rev ? L - 1 - s : s;
    const int64_t row = (t * B + b) * D + tk.j0;  // [t, b, j0] in [L, B, D]
    if (s + kPrefetch < L) {
      const int64_t tn = tk.rev ? t - kPrefetch : t + kPrefetch;
      const int64_t rn = (tn * B + b) * D + tk.j0;
      prefetch_row(U + rn * K, n * K);
      if (K == 3) prefetch_row(x + rn, n);
      if (!NT) {
        prefetch_row(h + rn, n, true);
        prefetch_row(c + rn, n, true);
      }
    }
    const T* u = U + row * K;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      a0[i] = u[i * K];
      a1[i] = u[i * K + 1];
      a2[i] = u[i * K + 2];
      ax[i] = K == 3 ? x[row + i] : u[i * K + 3];
    }
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      const T f = sigm(a1[i] + k.vf[i] * cur[i] + k.bf[i]);
      const T r = sigm(a2[i] + k.vr[i] * cur[i] + k.br[i]);
      const T cn = a0[i] + f * (cur[i] - a0[i]);
      hl[i] = ax[i] + k.m[i] * r * (cn - ax[i]);
      cur[i] = cn;
    }
    store_row<NT>(h + row, hl, n);
    store_row<NT>(c + row, cur, n);
  }
  for (int64_t i = 0; i < n; ++i) c_last[b * D + tk.j0 + i] = cur[i];
}

// The reverse sweep of one task. part [B, 4, D] receives this lane's sums of
// (dv_f, dv_r, db_f, db_r) over time; the caller sums them over B in order.
template <typename T, int K, bool NT>
inline __attribute__((always_inline)) void backward_body(
    const SruProblem& p, const Task& tk, const T* U, const T* x, const T* v, const T* bb,
    const T* c0, const T* mask, const T* c, const T* dh, const T* dc, const T* dc_last, T* dU,
    T* dx, T* part, T* dc0) {
  const int64_t L = p.L, B = p.B, D = p.D, n = tk.j1 - tk.j0, b = tk.b;
  const Consts<T> k(p, tk, v, bb, mask);
  alignas(64) T carry[kChunk], cinit[kChunk], zero[kChunk] = {};
  alignas(64) T a0[kChunk], a1[kChunk], a2[kChunk], ax[kChunk];
  alignas(64) T g0[kChunk], g1[kChunk], g2[kChunk], gx[kChunk], gi[kChunk * K];
  alignas(64) T gvf[kChunk] = {}, gvr[kChunk] = {}, gbf[kChunk] = {}, gbr[kChunk] = {};
  for (int64_t i = 0; i < n; ++i) {
    carry[i] = dc_last ? dc_last[b * D + tk.j0 + i] : T(0);
    cinit[i] = c0 ? c0[b * D + tk.j0 + i] : T(0);
  }
  for (int64_t s = L - 1; s >= 0; --s) {  // s: forward step index, walked backwards
    const int64_t t = tk.rev ? L - 1 - s : s;
    const int64_t row = (t * B + b) * D + tk.j0;
    const int64_t prow = s == 0 ? -1 : ((tk.rev ? t + 1 : t - 1) * B + b) * D + tk.j0;
    const T* cprev = prow < 0 ? cinit : c + prow;
    if (s - kPrefetch >= 0) {
      const int64_t tn = tk.rev ? t + kPrefetch : t - kPrefetch;
      const int64_t rn = (tn * B + b) * D + tk.j0;
      prefetch_row(U + rn * K, n * K);
      if (K == 3) prefetch_row(x + rn, n);
      prefetch_row(c + rn, n);
      prefetch_row(dh + rn, n);
      if (dc) prefetch_row(dc + rn, n);
      if (!NT) {
        prefetch_row(dU + rn * K, n * K, true);
        if (K == 3) prefetch_row(dx + rn, n, true);
      }
    }
    const T* u = U + row * K;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      a0[i] = u[i * K];
      a1[i] = u[i * K + 1];
      a2[i] = u[i * K + 2];
      ax[i] = K == 3 ? x[row + i] : u[i * K + 3];
    }
    const T* cp = c + row;
    const T* dhp = dh + row;
    const T* dcp = dc ? dc + row : zero;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      const T cpv = cprev[i], ct = cp[i];
      const T f = sigm(a1[i] + k.vf[i] * cpv + k.bf[i]);
      const T r = sigm(a2[i] + k.vr[i] * cpv + k.br[i]);
      const T g = dhp[i];
      const T mr = k.m[i] * r;
      // dL/dc_t: through h_t, from the c output, and from step t+1 (carry).
      const T gc = g * mr + dcp[i] + carry[i];
      const T gr = g * k.m[i] * (ct - ax[i]) * r * (T(1) - r);  // d pre-activation of r
      const T gf = gc * (cpv - a0[i]) * f * (T(1) - f);         // d pre-activation of f
      g0[i] = gc * (T(1) - f);
      g1[i] = gf;
      g2[i] = gr;
      gx[i] = g * (T(1) - mr);
      gvf[i] += gf * cpv;
      gvr[i] += gr * cpv;
      gbf[i] += gf;
      gbr[i] += gr;
      carry[i] = gc * f + gf * k.vf[i] + gr * k.vr[i];
    }
    for (int64_t i = 0; i < n; ++i) {
      gi[i * K] = g0[i];
      gi[i * K + 1] = g1[i];
      gi[i * K + 2] = g2[i];
      if (K == 4) gi[i * K + 3] = gx[i];
    }
    store_row<NT>(dU + row * K, gi, n * K);
    if (K == 3) store_row<NT>(dx + row, gx, n);
  }
  for (int64_t i = 0; i < n; ++i) {
    const int64_t j = tk.j0 + i;
    T* pb = part + b * 4 * D;
    pb[j] = gvf[i];
    pb[D + j] = gvr[i];
    pb[2 * D + j] = gbf[i];
    pb[3 * D + j] = gbr[i];
    if (dc0) dc0[b * D + j] = carry[i];
  }
}

// Two compiled copies of each sweep: baseline x86-64 and AVX2 + FMA (8 floats
// per vector). They may differ in the last bits (FMA contraction); the AVX2 one
// runs when the CPU has it, unless REMORA_CPU_BASELINE=1 (as the other CPU kernels).
#define SRU_FWD_ARGS                                                                          \
  const SruProblem &p, const Task &tk, const T *U, const T *x, const T *v, const T *bb,      \
      const T *c0, const T *mask, T *h, T *c, T *c_last
#define SRU_BWD_ARGS                                                                          \
  const SruProblem &p, const Task &tk, const T *U, const T *x, const T *v, const T *bb,      \
      const T *c0, const T *mask, const T *c, const T *dh, const T *dc, const T *dc_last,    \
      T *dU, T *dx, T *part, T *dc0

template <typename T, int K>
__attribute__((flatten)) void forward_task_base(SRU_FWD_ARGS) {
  forward_body<T, K, false>(p, tk, U, x, v, bb, c0, mask, h, c, c_last);
}
template <typename T, int K>
__attribute__((flatten)) void backward_task_base(SRU_BWD_ARGS) {
  backward_body<T, K, false>(p, tk, U, x, v, bb, c0, mask, c, dh, dc, dc_last, dU, dx, part, dc0);
}

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)  // GCC only: clang refuses the always_inline bodies
#define REMORA_SRU_AVX2 1
template <typename T, int K>
__attribute__((target("avx2,fma"), flatten)) void forward_task_avx2(SRU_FWD_ARGS) {
  forward_body<T, K, true>(p, tk, U, x, v, bb, c0, mask, h, c, c_last);
  _mm_sfence();  // order the streaming stores before the results are read
}
template <typename T, int K>
__attribute__((target("avx2,fma"), flatten)) void backward_task_avx2(SRU_BWD_ARGS) {
  backward_body<T, K, true>(p, tk, U, x, v, bb, c0, mask, c, dh, dc, dc_last, dU, dx, part, dc0);
  _mm_sfence();  // order the streaming stores before the results are read
}
#endif

bool sru_use_avx2() {
#ifdef REMORA_SRU_AVX2
  static const bool on = [] {
    const char* e = std::getenv("REMORA_CPU_BASELINE");
    const bool baseline = e && *e && std::strcmp(e, "0") != 0;
    return !baseline && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  return on;
#else
  return false;
#endif
}

template <typename T, int K>
void forward_task(SRU_FWD_ARGS) {
#ifdef REMORA_SRU_AVX2
  if (sru_use_avx2()) return forward_task_avx2<T, K>(p, tk, U, x, v, bb, c0, mask, h, c, c_last);
#endif
  forward_task_base<T, K>(p, tk, U, x, v, bb, c0, mask, h, c, c_last);
}

template <typename T, int K>
void backward_task(SRU_BWD_ARGS) {
#ifdef REMORA_SRU_AVX2
  if (sru_use_avx2())
    return backward_task_avx2<T, K>(p, tk, U, x, v, bb, c0, mask, c, dh, dc, dc_last, dU, dx,
                                    part, dc0);
#endif
  backward_task_base<T, K>(p, tk, U, x, v, bb, c0, mask, c, dh, dc, dc_last, dU, dx, part, dc0);
}

template <typename T>
void forward_impl(const SruProblem& p, const T* U, const T* x, const T* v, const T* bb,
                  const T* c0, const T* mask, T* h, T* c, T* c_last) {
  const std::vector<Task> tasks = make_tasks(p);
  const int64_t nt = int64_t(tasks.size());
#pragma omp parallel for schedule(dynamic, 1) if (nt > 1 && p.L * p.B * p.D > 4096)
  for (int64_t i = 0; i < nt; ++i) {
    if (p.k == 3) forward_task<T, 3>(p, tasks[size_t(i)], U, x, v, bb, c0, mask, h, c, c_last);
    else forward_task<T, 4>(p, tasks[size_t(i)], U, x, v, bb, c0, mask, h, c, c_last);
  }
}

template <typename T>
void backward_impl(const SruProblem& p, const T* U, const T* x, const T* v, const T* bb,
                   const T* c0, const T* mask, const T* c, const T* dh, const T* dc,
                   const T* dc_last, T* dU, T* dx, T* dv, T* db, T* dc0) {
  const std::vector<Task> tasks = make_tasks(p);
  const int64_t nt = int64_t(tasks.size()), D = p.D;
  std::vector<T> part(size_t(p.B * 4 * D), T(0));
#pragma omp parallel for schedule(dynamic, 1) if (nt > 1 && p.L * p.B * p.D > 4096)
  for (int64_t i = 0; i < nt; ++i) {
    const Task& tk = tasks[size_t(i)];
    if (p.k == 3)
      backward_task<T, 3>(p, tk, U, x, v, bb, c0, mask, c, dh, dc, dc_last, dU, dx, part.data(), dc0);
    else
      backward_task<T, 4>(p, tk, U, x, v, bb, c0, mask, c, dh, dc, dc_last, dU, dx, part.data(), dc0);
  }
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
