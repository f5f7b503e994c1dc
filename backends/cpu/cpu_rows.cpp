// SPDX-License-Identifier: BSD-3-Clause
// CPU backend: the row kernels of the fused NN ops (softmax, layer_norm,
// cross_entropy), with AVX2 + FMA copies of the f32 rows.
#include "cpu_backend.h"
#include <memory>
#include <type_traits>
#include <vector>
#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#endif

#include "simd_f32.h"
#include "vec_math.h"

namespace remora {
namespace cpu_impl {

namespace {

// ---- row kernels of the fused NN ops, one row of `n` contiguous elements ----
// Each loop is `omp simd`, exp is vec::vexp (vexp_nonpos where x <= 0) and
// row sums are cascaded (vec::sum_lanes per chunk, chunk sums in double), so
// every pass vectorises; a row (a few KiB) stays in L1 between passes.
//
// Passes and memory do not overlap by themselves: the first pass over a row
// waits on DRAM while the FPUs idle, the later ones compute from L1 while the
// memory bus idles. So one compute-heavy pass of row r also prefetches row
// r + 1 (its inputs for reading, its output for writing), a slice before each
// chunk of kChunk elements (prefetch_slice). On the AMD EPYC VM, 1 thread,
// 16384 x 1024 f32: softmax f+b went from 59 % to 76 % of memcpy bandwidth
// with the prefetch alone.

// The row templates are inlined by force: the AVX2 copies below are wrappers
// that inline them to compile their bodies for AVX2 + FMA. Left to the
// inliner's size heuristics, a wrapper can end up a jump to the baseline body.
#define REMORA_ROW_INLINE __attribute__((always_inline)) inline

// Row r + 1's arrays, to prefetch while row r computes (null: none).
template <typename T>
struct NextRow {
  const T* in0 = nullptr;
  const T* in1 = nullptr;
  T* out = nullptr;
};

// A prefetching pass runs over [0, n) in chunks of kChunk elements and calls
// prefetch_slice(next, j0, j1) before each: a chunk is 1 KiB of f32, so its
// few prefetches fit the core's outstanding-miss buffers and the chunk's
// compute covers them.
constexpr int64_t kChunk = 256;
inline int64_t chunk_end(int64_t j0, int64_t n) { return j0 + kChunk < n ? j0 + kChunk : n; }
// (Inlined by force: GCC counts a prefetch as no side effect, so a call to an
// out-of-line prefetch_slice is deleted as dead code.)
template <typename T>
REMORA_ROW_INLINE void prefetch_slice(const NextRow<T>& next, int64_t j0, int64_t j1) {
  constexpr int64_t kLine = 64 / int64_t(sizeof(T));
  for (int64_t k = j0; k < j1; k += kLine) {
    if (next.in0) __builtin_prefetch(next.in0 + k, 0, 3);
    if (next.in1) __builtin_prefetch(next.in1 + k, 0, 3);
    if (next.out) __builtin_prefetch(next.out + k, 1, 3);
  }
}

// sum over j < n of f(j), cascaded: each chunk of kChunk elements summed in T
// by vec::sum_lanes (four interleaved accumulators), the chunk sums in double.
// A plain f32 `omp simd` sum over a long row lost too much: log_softmax's
// backward at 3,000 columns missed the f32-vs-f64 tolerance under clang.
// With `next`, each chunk first prefetches that slice of row r + 1.
template <typename T, typename F>
REMORA_ROW_INLINE double cascade_sum(int64_t n, const F& f, const NextRow<T>& next = {}) {
  double s = 0;
  for (int64_t j0 = 0; j0 < n; j0 += kChunk) {
    const int64_t j1 = chunk_end(j0, n);
    prefetch_slice(next, j0, j1);
    s += double(vec::sum_lanes<T>(j1 - j0, [&f, j0](int64_t j) { return f(j0 + j); }));
  }
  return s;
}

// y = softmax(x) or log_softmax(x). Three passes: max, exp and sum, scale.
// x - max <= 0 (or NaN), so exp is vexp_nonpos (the same results as vexp,
// fewer instructions).
// (The first version called std::exp per element: a scalar libm call that kept
// the exp pass from vectorising, at ~8% of memcpy bandwidth.)
template <typename T>
REMORA_ROW_INLINE void softmax_row(const T* x, T* y, int64_t n, bool log, const NextRow<T>& next) {
  T mx = -INFINITY;
#pragma omp simd reduction(max : mx)
  for (int64_t j = 0; j < n; ++j) mx = x[j] > mx ? x[j] : mx;
  // A fully masked row (all -inf) gives NaN, as in PyTorch.
  double s = 0;  // the chunk sums of the exp pass, in double
  if (log) {
    for (int64_t j0 = 0; j0 < n; j0 += kChunk) {
      const int64_t j1 = chunk_end(j0, n);
      prefetch_slice(next, j0, j1);
      T c = 0;
#pragma omp simd reduction(+ : c)
      for (int64_t j = j0; j < j1; ++j) c += vec::vexp_nonpos(x[j] - mx);
      s += c;
    }
    // (x - max) - log(s): the two parts of logsumexp kept apart, as their
    // rounded sum would lose log(s) next to a large max.
    const T ls = T(std::log(s));
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) y[j] = (x[j] - mx) - ls;
  } else {
    for (int64_t j0 = 0; j0 < n; j0 += kChunk) {
      const int64_t j1 = chunk_end(j0, n);
      prefetch_slice(next, j0, j1);
      T c = 0;
#pragma omp simd reduction(+ : c)
      for (int64_t j = j0; j < j1; ++j) {
        y[j] = vec::vexp_nonpos(x[j] - mx);
        c += y[j];
      }
      s += c;
    }
    const T inv = T(1.0 / s);
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) y[j] *= inv;
  }
}

// dx = y * (dy - sum(dy * y))            (softmax)
// dx = dy - exp(y) * sum(dy)             (log_softmax)
template <typename T>
REMORA_ROW_INLINE void softmax_backward_row(const T* dy, const T* y, T* dx, int64_t n, bool log,
                                 const NextRow<T>& next) {
  if (log) {
    const T s = T(cascade_sum<T>(n, [dy](int64_t j) { return dy[j]; }));
    for (int64_t j0 = 0; j0 < n; j0 += kChunk) {
      const int64_t j1 = chunk_end(j0, n);
      prefetch_slice(next, j0, j1);
#pragma omp simd
      for (int64_t j = j0; j < j1; ++j) dx[j] = dy[j] - vec::vexp_nonpos(y[j]) * s;
    }
  } else {
    const T s = T(cascade_sum<T>(n, [dy, y](int64_t j) { return dy[j] * y[j]; }));
    for (int64_t j0 = 0; j0 < n; j0 += kChunk) {
      const int64_t j1 = chunk_end(j0, n);
      prefetch_slice(next, j0, j1);
#pragma omp simd
      for (int64_t j = j0; j < j1; ++j) dx[j] = y[j] * (dy[j] - s);
    }
  }
}

// y = (x - mean) * rstd * w + b (w, b may be null); writes *mean_out, *rstd_out.
// Two-pass mean and variance. Row sums are cascaded: each chunk of kChunk
// elements is summed in T across the vector lanes (kChunk / lanes terms per
// lane, so f32 loses at most ~32 ulp of the chunk's sum of |terms|), and the
// chunk sums are added in double. (Summing every element in double, as
// before, cost a float -> double conversion and twice the vector adds per
// element: the row passes were compute-bound. PyTorch's CPU layer_norm sums
// f32 in f32.)
template <typename T>
REMORA_ROW_INLINE void layer_norm_row(const T* x, const T* W, const T* B, double eps, T* y, T* mean_out,
                           T* rstd_out, int64_t n, const NextRow<T>& next) {
  const T mean = T(cascade_sum<T>(n, [x](int64_t j) { return x[j]; }) / double(n));
  const double v =
      cascade_sum<T>(n, [x, mean](int64_t j) { return (x[j] - mean) * (x[j] - mean); }, next);
  const T rstd = T(1.0 / std::sqrt(v / double(n) + eps));
  if (W && B) {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) y[j] = (x[j] - mean) * rstd * W[j] + B[j];
  } else if (W) {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) y[j] = (x[j] - mean) * rstd * W[j];
  } else {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) y[j] = (x[j] - mean) * rstd;
  }
  *mean_out = mean;
  *rstd_out = rstd;
}

// layer_norm backward of one row, with xhat = (x - mean) * rstd and
// g = dy * w (dy when w is null):
//   dx = rstd * (g - mean(g) - xhat * mean(g * xhat))   (dx may be null)
//   pdw += dy * xhat, pdb += dy                         (in T; may be null)
// Two vectorised passes: the row sums (cascaded as in layer_norm_row; this
// pass prefetches row r + 1), then dx and the dw/db partials together, so dy
// and x are loaded twice per row, not three times. HasW / HasDX / HasDW are
// template flags: each combination is one branch-free vector loop. (The
// first version was one fused scalar loop whose serial double sums kept it
// from vectorising.)
template <typename T, bool HasW, bool HasDX, bool HasDW>
REMORA_ROW_INLINE void layer_norm_backward_out(const T* dy, const T* x, T mean, T rstd,
                                               const T* W, T m1, T m2, T* dx, T* pdw, T* pdb,
                                               int64_t n) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) {
    const T xh = (x[j] - mean) * rstd;
    if (HasDX) dx[j] = rstd * ((HasW ? dy[j] * W[j] : dy[j]) - m1 - xh * m2);
    if (HasDW) {
      pdw[j] += dy[j] * xh;
      pdb[j] += dy[j];
    }
  }
}
template <typename T, bool HasW>
REMORA_ROW_INLINE void layer_norm_backward_row_w(const T* dy, const T* x, T mean, T rstd,
                                                 const T* W, T* dx, T* pdw, T* pdb, int64_t n,
                                                 const NextRow<T>& next) {
  double s1 = 0, s2 = 0;  // sum(g), sum(g * xhat)
  if (dx) {
    for (int64_t j0 = 0; j0 < n; j0 += kChunk) {
      const int64_t j1 = chunk_end(j0, n);
      prefetch_slice(next, j0, j1);
      const T *dyc = dy + j0, *xc = x + j0, *Wc = HasW ? W + j0 : nullptr;
      auto g = [dyc, Wc](int64_t j) { return HasW ? dyc[j] * Wc[j] : dyc[j]; };
      T ca, cb;
      vec::sum2_lanes<T>(
          j1 - j0, g, [g, xc, mean, rstd](int64_t j) { return g(j) * ((xc[j] - mean) * rstd); },
          &ca, &cb);
      s1 += double(ca);
      s2 += double(cb);
    }
  }
  const T m1 = T(s1 / double(n)), m2 = T(s2 / double(n));
  if (dx && pdw)
    layer_norm_backward_out<T, HasW, true, true>(dy, x, mean, rstd, W, m1, m2, dx, pdw, pdb, n);
  else if (dx)
    layer_norm_backward_out<T, HasW, true, false>(dy, x, mean, rstd, W, m1, m2, dx, pdw, pdb, n);
  else if (pdw)
    layer_norm_backward_out<T, HasW, false, true>(dy, x, mean, rstd, W, m1, m2, dx, pdw, pdb, n);
}
template <typename T>
REMORA_ROW_INLINE void layer_norm_backward_row(const T* dy, const T* x, T mean, T rstd, const T* W, T* dx,
                                    T* pdw, T* pdb, int64_t n, const NextRow<T>& next) {
  if (W)
    layer_norm_backward_row_w<T, true>(dy, x, mean, rstd, W, dx, pdw, pdb, n, next);
  else
    layer_norm_backward_row_w<T, false>(dy, x, mean, rstd, W, dx, pdw, pdb, n, next);
}

#ifdef REMORA_SIMD_F32
// ---- the explicit-SIMD f32 rows (cpu_rows_simd.inc), one copy per ISA ----
namespace avx2 {
using V = simd::Avx2;
#define REMORA_SIMD_TARGET "avx2,fma"
#include "cpu_rows_simd.inc"
#undef REMORA_SIMD_TARGET
}  // namespace avx2
namespace avx512 {
using V = simd::Avx512;
#define REMORA_SIMD_TARGET REMORA_AVX512_TARGET
#include "cpu_rows_simd.inc"
#undef REMORA_SIMD_TARGET
}  // namespace avx512
namespace avx512_emulated {  // the AVX-512 copy's lanes in scalar code (REMORA_CPU_ISA=avx512_emulated)
using V = simd::Emu16;
#define REMORA_SIMD_TARGET "sse2"
#include "cpu_rows_simd.inc"
#undef REMORA_SIMD_TARGET
}  // namespace avx512_emulated
#endif

// The row kernels of one dtype, as function pointers. The forward kernels
// take a non-temporal hint (layer_norm's nt; softmax's nt_scratch, non-null
// with a scratch row of n elements): the output row is 64-byte aligned and
// may be written with non-temporal stores. The SIMD kernels do; the
// reference ones ignore it.
template <typename T>
struct RowKernels {
  void (*softmax)(const T* x, T* y, int64_t n, bool log, const NextRow<T>& next,
                  T* nt_scratch);
  void (*softmax_backward)(const T* dy, const T* y, T* dx, int64_t n, bool log,
                           const NextRow<T>& next);
  void (*layer_norm)(const T* x, const T* W, const T* B, double eps, T* y, T* mean, T* rstd,
                     int64_t n, const NextRow<T>& next, bool nt);
  void (*layer_norm_backward)(const T* dy, const T* x, T mean, T rstd, const T* W, T* dx,
                              T* pdw, T* pdb, int64_t n, const NextRow<T>& next, bool nt);
};
template <typename T>
void softmax_row_ref(const T* x, T* y, int64_t n, bool log, const NextRow<T>& next,
                     T* /*nt_scratch*/) {
  softmax_row(x, y, n, log, next);
}
template <typename T>
void layer_norm_row_ref(const T* x, const T* W, const T* B, double eps, T* y, T* mean, T* rstd,
                        int64_t n, const NextRow<T>& next, bool /*nt*/) {
  layer_norm_row(x, W, B, eps, y, mean, rstd, n, next);
}
template <typename T>
void layer_norm_backward_row_ref(const T* dy, const T* x, T mean, T rstd, const T* W, T* dx,
                                 T* pdw, T* pdb, int64_t n, const NextRow<T>& next, bool /*nt*/) {
  layer_norm_backward_row(dy, x, mean, rstd, W, dx, pdw, pdb, n, next);
}
template <typename T>
RowKernels<T> baseline_rows() {
  return {&softmax_row_ref<T>, &softmax_backward_row<T>, &layer_norm_row_ref<T>,
          &layer_norm_backward_row_ref<T>};
}

// f32 rows have a copy for AVX2 + FMA and one for AVX-512, picked once
// (cpu_isa, cpu_backend.h): the build targets baseline x86-64 (SSE2, 4 floats
// wide), where the exp polynomial and the sums are compute-bound. f64 (the
// reference dtype) always takes the baseline templates, so gradient checks do
// not depend on the CPU; f32 results may differ in the last bits between the
// copies (FMA contraction, vector width and order in the sums).
// REMORA_CPU_ISA caps the copy (tests run each).
#if defined(__GNUC__) && defined(__x86_64__)
#define REMORA_AVX2_ROWS 1
#endif

template <typename T>
const RowKernels<T>& row_kernels() {
  static const RowKernels<T> k = baseline_rows<T>();
  return k;
}
template <>
const RowKernels<float>& row_kernels<float>() {
  static const RowKernels<float> k = [] {
#ifdef REMORA_AVX2_ROWS
    if (use_avx512())
      return RowKernels<float>{&avx512::softmax_forward, &avx512::softmax_backward,
                               &avx512::layer_norm_forward, &avx512::layer_norm_backward};
    if (use_avx512_emulated())
      return RowKernels<float>{&avx512_emulated::softmax_forward, &avx512_emulated::softmax_backward,
                               &avx512_emulated::layer_norm_forward, &avx512_emulated::layer_norm_backward};
    if (use_avx2())
      return RowKernels<float>{&avx2::softmax_forward, &avx2::softmax_backward,
                               &avx2::layer_norm_forward, &avx2::layer_norm_backward};
#endif
    return baseline_rows<float>();
  }();
  return k;
}


// Streaming stores for outputs that cannot stay in cache anyway (at least
// the 32 MiB L3 of the 2-core EPYC VM): each row is computed into a scratch
// row in L1 and then written with non-temporal stores, which skip the
// read-for-ownership of every output line (a normal store first reads the
// line it overwrites: 7 bytes of traffic per 5 the kernel needs, for softmax
// forward + backward). f32 on AVX2 and up (the copies that run at memory speed).
constexpr int64_t kStreamBytes = int64_t(32) << 20;
#ifdef REMORA_AVX2_ROWS
__attribute__((target("avx2"))) void stream_store(float* dst, const float* src, int64_t n) {
  int64_t i = 0;
  for (; i < n && (reinterpret_cast<uintptr_t>(dst + i) & 31); ++i) dst[i] = src[i];
  for (; i + 8 <= n; i += 8) _mm256_stream_ps(dst + i, _mm256_loadu_ps(src + i));
  for (; i < n; ++i) dst[i] = src[i];
}
#endif
template <typename T>
bool stream_output(int64_t rows, int64_t cols) {
#ifdef REMORA_AVX2_ROWS
  return std::is_same<T, float>::value && rows * cols * int64_t(sizeof(T)) >= kStreamBytes &&
         use_avx2();
#else
  (void)rows;
  (void)cols;
  return false;
#endif
}
// How for_output_rows has row r's output written: in place (plain), into a
// scratch row that is then streamed there (scratch), or in place with
// non-temporal stores by the row kernel itself (stream: the kernel takes the
// non-temporal hint and the row is 64-byte aligned).
enum class OutRow { plain, scratch, stream };
inline bool aligned64(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 63) == 0; }

// row(r, dst, mode, scratch) for every row r: computes output row r into dst,
// which is OUT + r * cols, or with OutRow::scratch the scratch row. `nt`: the
// row kernel takes the non-temporal hint (with OutRow::stream it gets dst and
// a scratch row of cols elements it may use).
template <typename T, typename F>
void for_output_rows(int64_t rows, int64_t cols, T* OUT, bool nt, const F& row) {
#ifdef REMORA_AVX2_ROWS
  if constexpr (std::is_same<T, float>::value) {
    if (stream_output<T>(rows, cols)) {
      parallel_team(pool_threads(), [&](int t, int n) {
        std::vector<float> tmp(static_cast<size_t>(cols));
        int64_t r0, r1;
        static_range(rows, t, n, &r0, &r1);
        for (int64_t r = r0; r < r1; ++r) {
          float* dst = OUT + r * cols;
          if (nt && aligned64(dst)) {
            row(r, dst, OutRow::stream, tmp.data());
          } else {
            row(r, tmp.data(), OutRow::scratch, tmp.data());
            stream_store(dst, tmp.data(), cols);
          }
        }
        _mm_sfence();  // the streamed rows are visible before the region ends
      });
      return;
    }
  }
#endif
  (void)nt;
  parallel_rows(rows, cols,
                [&](int64_t r) { row(r, OUT + r * cols, OutRow::plain, static_cast<T*>(nullptr)); });
}

// Prefetch row r + 1 only while its arrays (up to three) fit in L1 beside
// row r's: rows of at most 8 KiB. Longer rows are left to the hardware
// prefetcher, which streams within a pass.
constexpr int64_t kPrefetchRowBytes = 8 << 10;
template <typename T>
bool prefetch_next(int64_t r, int64_t rows, int64_t cols) {
  return r + 1 < rows && cols * int64_t(sizeof(T)) <= kPrefetchRowBytes;
}

// The row kernels of the 16-bit types: operands converted to f32, the f32
// kernel, results rounded back once (f32 internals, as PyTorch's CPU kernels).
class HalfRows {
 public:
  explicit HalfRows(DType dt) : dt_(dt) {}
  HalfRows(const HalfRows&) = delete;
  HalfRows& operator=(const HalfRows&) = delete;
  // An f32 copy of n elements at p (null stays null).
  const float* in(const void* p, int64_t n) {
    if (!p) return nullptr;
    float* f = buffer(n);
    parallel_ranges(n, n > kParallelGrain, [&](int64_t b, int64_t e) {
      if (dt_ == DType::bf16)
        for (int64_t i = b; i < e; ++i) f[i] = static_cast<const bf16_t*>(p)[i];
      else
        for (int64_t i = b; i < e; ++i) f[i] = static_cast<const f16_t*>(p)[i];
    });
    return f;
  }
  // An f32 buffer for n results, rounded into p by the destructor.
  float* out(void* p, int64_t n) {
    if (!p) return nullptr;
    float* f = buffer(n);
    outs_.push_back({p, f, n});
    return f;
  }
  ~HalfRows() {
    for (const Out& o : outs_)
      parallel_ranges(o.n, o.n > kParallelGrain, [&](int64_t b, int64_t e) {
        if (dt_ == DType::bf16)
          for (int64_t i = b; i < e; ++i) static_cast<bf16_t*>(o.dst)[i] = o.src[i];
        else
          for (int64_t i = b; i < e; ++i) static_cast<f16_t*>(o.dst)[i] = o.src[i];
      });
  }

 private:
  struct Out {
    void* dst;
    const float* src;
    int64_t n;
  };
  float* buffer(int64_t n) {
    bufs_.emplace_back(new float[size_t(std::max<int64_t>(n, 1))]);
    return bufs_.back().get();
  }
  DType dt_;
  std::vector<std::unique_ptr<float[]>> bufs_;
  std::vector<Out> outs_;
};

}  // namespace

void exp_nonpos_f32(const float* x, float* y, int64_t n) {
#ifdef REMORA_SIMD_F32
  if (use_avx512()) return avx512::exp_nonpos_array(x, y, n);
  if (use_avx512_emulated()) return avx512_emulated::exp_nonpos_array(x, y, n);
  if (use_avx2()) return avx2::exp_nonpos_array(x, y, n);
#endif
  for (int64_t j = 0; j < n; ++j) y[j] = vec::vexp_nonpos(x[j]);
}

void CpuBackend::softmax(const SoftmaxArgs& args) {
  if (is_half(args.dt)) {
    HalfRows h(args.dt);
    SoftmaxArgs f = args;
    f.dt = DType::f32;
    f.x = h.in(args.x, args.rows * args.cols);
    f.y = h.out(args.y, args.rows * args.cols);
    return softmax(f);
  }
  dispatch_float(args.dt, "softmax", [&](auto tag) {
    using T = decltype(tag);
    const T* X = static_cast<const T*>(args.x);
    T* Y = static_cast<T*>(args.y);
    const auto row = row_kernels<T>().softmax;
    for_output_rows(args.rows, args.cols, Y, true, [&](int64_t r, T* y, OutRow mode, T* scratch) {
      NextRow<T> next;
      if (prefetch_next<T>(r, args.rows, args.cols))
        next = {X + (r + 1) * args.cols, nullptr, mode == OutRow::plain ? Y + (r + 1) * args.cols : nullptr};
      row(X + r * args.cols, y, args.cols, args.log, next, mode == OutRow::stream ? scratch : nullptr);
    });
  });
}

void CpuBackend::softmax_backward(const SoftmaxBackwardArgs& args) {
  if (is_half(args.dt)) {
    HalfRows h(args.dt);
    SoftmaxBackwardArgs f = args;
    f.dt = DType::f32;
    f.dy = h.in(args.dy, args.rows * args.cols);
    f.y = h.in(args.y, args.rows * args.cols);
    f.dx = h.out(args.dx, args.rows * args.cols);
    return softmax_backward(f);
  }
  dispatch_float(args.dt, "softmax_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* DY = static_cast<const T*>(args.dy);
    const T* Y = static_cast<const T*>(args.y);
    T* DX = static_cast<T*>(args.dx);
    const auto row = row_kernels<T>().softmax_backward;
    for_output_rows(args.rows, args.cols, DX, false, [&](int64_t r, T* dx, OutRow mode, T*) {
      NextRow<T> next;
      if (prefetch_next<T>(r, args.rows, args.cols))
        next = {DY + (r + 1) * args.cols, Y + (r + 1) * args.cols,
                mode == OutRow::plain ? DX + (r + 1) * args.cols : nullptr};
      row(DY + r * args.cols, Y + r * args.cols, dx, args.cols, args.log, next);
    });
  });
}

void CpuBackend::layer_norm(const LayerNormArgs& args) {
  if (is_half(args.dt)) {
    HalfRows h(args.dt);
    LayerNormArgs f = args;
    f.dt = DType::f32;
    f.x = h.in(args.x, args.rows * args.cols);
    f.w = h.in(args.w, args.cols);
    f.b = h.in(args.b, args.cols);
    f.y = h.out(args.y, args.rows * args.cols);
    f.mean = h.out(args.mean, args.rows);
    f.rstd = h.out(args.rstd, args.rows);
    return layer_norm(f);
  }
  dispatch_float(args.dt, "layer_norm", [&](auto tag) {
    using T = decltype(tag);
    const T* X = static_cast<const T*>(args.x);
    const T* W = static_cast<const T*>(args.w);
    const T* B = static_cast<const T*>(args.b);
    T* Y = static_cast<T*>(args.y);
    T* MEAN = static_cast<T*>(args.mean);
    T* RSTD = static_cast<T*>(args.rstd);
    const auto row = row_kernels<T>().layer_norm;
    for_output_rows(args.rows, args.cols, Y, true, [&](int64_t r, T* y, OutRow mode, T*) {
      NextRow<T> next;
      if (prefetch_next<T>(r, args.rows, args.cols))
        next = {X + (r + 1) * args.cols, nullptr, mode == OutRow::plain ? Y + (r + 1) * args.cols : nullptr};
      row(X + r * args.cols, W, B, args.eps, y, MEAN + r, RSTD + r, args.cols, next, mode == OutRow::stream);
    });
  });
}

void CpuBackend::layer_norm_backward(const LayerNormBackwardArgs& args) {
  if (is_half(args.dt)) {
    HalfRows h(args.dt);
    LayerNormBackwardArgs f = args;
    f.dt = DType::f32;
    f.dy = h.in(args.dy, args.rows * args.cols);
    f.x = h.in(args.x, args.rows * args.cols);
    f.mean = h.in(args.mean, args.rows);
    f.rstd = h.in(args.rstd, args.rows);
    f.w = h.in(args.w, args.cols);
    f.dx = h.out(args.dx, args.rows * args.cols);
    f.dw = h.out(args.dw, args.cols);
    f.db = h.out(args.db, args.cols);
    return layer_norm_backward(f);
  }
  dispatch_float(args.dt, "layer_norm_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* DY = static_cast<const T*>(args.dy);
    const T* X = static_cast<const T*>(args.x);
    const T* MEAN = static_cast<const T*>(args.mean);
    const T* RSTD = static_cast<const T*>(args.rstd);
    const T* W = static_cast<const T*>(args.w);
    T* DX = static_cast<T*>(args.dx);
    T* DW = static_cast<T*>(args.dw);
    T* DB = static_cast<T*>(args.db);
    const int nt = (args.rows * args.cols > kParallelGrain) ? pool_threads() : 1;
    // dw and db: each thread sums its rows in blocks of kBlock rows in T
    // (vectorises at full width), adds each block into its double partials,
    // and the partials are reduced at the end. (It replaces adding every row
    // straight into the double partials: a float->double conversion and
    // twice the vector ops per element, at f32.) An f32 block sums 16 terms
    // before they reach double, a relative error of order 16 * 2^-24 at worst.
    constexpr int64_t kBlock = 16;
    const bool want_dwdb = DW || DB;
    std::vector<double> part(size_t(want_dwdb ? nt : 0) * size_t(2 * args.cols), 0.0);
    const auto row = row_kernels<T>().layer_norm_backward;
    // Streamed dx: by the row kernel itself where the row is 64-byte aligned,
    // else through a scratch row (as for_output_rows).
    const bool streaming = DX && stream_output<T>(args.rows, args.cols);
    parallel_team(nt, [&](int tid, int team) {
      std::vector<T> tmp;
      double* pdw = want_dwdb ? part.data() + size_t(tid) * 2 * args.cols : nullptr;
      double* pdb = want_dwdb ? pdw + args.cols : nullptr;
      std::vector<T> block(want_dwdb ? size_t(2 * args.cols) : 0, T(0));
      T* bdw = want_dwdb ? block.data() : nullptr;
      T* bdb = want_dwdb ? bdw + args.cols : nullptr;
      int64_t in_block = 0;
      auto flush = [&] {
        for (int64_t j = 0; j < args.cols; ++j) {
          pdw[j] += double(bdw[j]);
          pdb[j] += double(bdb[j]);
          bdw[j] = bdb[j] = T(0);
        }
        in_block = 0;
      };
      int64_t r0, r1;
      static_range(args.rows, tid, team, &r0, &r1);
      for (int64_t r = r0; r < r1; ++r) {
        T* dx = DX ? DX + r * args.cols : nullptr;
        const OutRow mode = !streaming ? OutRow::plain
                            : aligned64(dx) ? OutRow::stream : OutRow::scratch;
        if (mode == OutRow::scratch) {
          tmp.resize(size_t(args.cols));
          dx = tmp.data();
        }
        NextRow<T> next;
        if (prefetch_next<T>(r, args.rows, args.cols))
          next = {DY + (r + 1) * args.cols, X + (r + 1) * args.cols,
                  DX && mode == OutRow::plain ? DX + (r + 1) * args.cols : nullptr};
        row(DY + r * args.cols, X + r * args.cols, MEAN[r], RSTD[r], W, dx, bdw, bdb, args.cols, next,
            mode == OutRow::stream);
#ifdef REMORA_AVX2_ROWS
        if constexpr (std::is_same<T, float>::value)
          if (mode == OutRow::scratch) stream_store(DX + r * args.cols, tmp.data(), args.cols);
#endif
        if (want_dwdb && ++in_block == kBlock) flush();
      }
      if (want_dwdb && in_block) flush();
#ifdef REMORA_AVX2_ROWS
      if (streaming) _mm_sfence();
#endif
    });
    if (!part.empty()) {
      for (int64_t j = 0; j < args.cols; ++j) {
        double dw = 0, db = 0;
        for (int t = 0; t < nt; ++t) {
          dw += part[size_t(t) * 2 * args.cols + j];
          db += part[size_t(t) * 2 * args.cols + args.cols + j];
        }
        if (DW) DW[j] = T(dw);
        if (DB) DB[j] = T(db);
      }
    }
  });
}

void CpuBackend::cross_entropy(const CrossEntropyArgs& args) {
  if (is_half(args.dt)) {
    HalfRows h(args.dt);
    CrossEntropyArgs f = args;
    f.dt = DType::f32;
    f.logits = h.in(args.logits, args.rows * args.cols);
    f.loss = h.out(args.loss, args.rows);
    f.lse = h.out(args.lse, 2 * args.rows);
    return cross_entropy(f);
  }
  dispatch_float(args.dt, "cross_entropy", [&](auto tag) {
    using T = decltype(tag);
    const T* X = static_cast<const T*>(args.logits);
    T* L = static_cast<T*>(args.loss);
    T* LSE = static_cast<T*>(args.lse);
    parallel_rows(args.rows, args.cols, [&](int64_t r) {
      const T* x = X + r * args.cols;
      T mx = -INFINITY;
#pragma omp simd reduction(max : mx)
      for (int64_t j = 0; j < args.cols; ++j) mx = x[j] > mx ? x[j] : mx;
      const double s = vec::sum_f64(args.cols, [x, mx](int64_t j) { return vec::vexp_nonpos(x[j] - mx); });
      // logsumexp = mx + log(s), kept as its two parts: their sum rounded to T
      // would lose log(s) next to a large max (at logits near 2,000 an f32
      // loss of 1.7e-5 would come out as 0).
      const T ls = T(std::log(s));
      LSE[2 * r] = mx;
      LSE[2 * r + 1] = ls;
      const int64_t t = args.target[r];
      L[r] = t == args.ignore_index ? T(0) : (mx - x[t]) + ls;
    });
  });
}

void CpuBackend::cross_entropy_backward(const CrossEntropyBackwardArgs& args) {
  if (is_half(args.dt)) {
    HalfRows h(args.dt);
    CrossEntropyBackwardArgs f = args;
    f.dt = DType::f32;
    f.logits = h.in(args.logits, args.rows * args.cols);
    f.lse = h.in(args.lse, 2 * args.rows);
    f.g = h.in(args.g, args.rows);
    f.dx = h.out(args.dx, args.rows * args.cols);
    return cross_entropy_backward(f);
  }
  dispatch_float(args.dt, "cross_entropy_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* X = static_cast<const T*>(args.logits);
    const T* LSE = static_cast<const T*>(args.lse);
    const T* G = static_cast<const T*>(args.g);
    T* DX = static_cast<T*>(args.dx);
    parallel_rows(args.rows, args.cols, [&](int64_t r) {
      const T* x = X + r * args.cols;
      T* dx = DX + r * args.cols;
      const int64_t t = args.target[r];
      if (t == args.ignore_index) {
        for (int64_t j = 0; j < args.cols; ++j) dx[j] = 0;
        return;
      }
      const T g = G[r], mx = LSE[2 * r], ls = LSE[2 * r + 1];
#pragma omp simd
      for (int64_t j = 0; j < args.cols; ++j) dx[j] = g * vec::vexp_nonpos((x[j] - mx) - ls);
      // g (p_t - 1) without the cancellation of p_t - 1 where p_t is near 1.
      dx[t] = g * T(std::expm1(double((x[t] - mx) - ls)));
    });
  });
}

}  // namespace cpu_impl
}  // namespace remora
