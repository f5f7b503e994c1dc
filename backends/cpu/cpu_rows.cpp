// CPU backend: the row kernels of the fused NN ops (softmax, layer_norm,
// cross_entropy), with AVX2 + FMA copies of the f32 rows.
#include "cpu_backend.h"
#include <vector>

#include "vec_math.h"

namespace remora {
namespace cpu_impl {

namespace {

// ---- row kernels of the fused NN ops, one row of `n` contiguous elements ----
// Each loop is `omp simd`, exp is vec::vexp and double sums use vec::sum_f64,
// so every pass vectorises; a row (a few KiB) stays in L1 between passes.

// y = softmax(x) or log_softmax(x). Three passes: max, exp and sum, scale.
// (The first version called std::exp per element: a scalar libm call that kept
// the exp pass from vectorising, at ~8% of memcpy bandwidth.)
template <typename T>
inline void softmax_row(const T* x, T* y, int64_t n, bool log) {
  T mx = -INFINITY;
#pragma omp simd reduction(max : mx)
  for (int64_t j = 0; j < n; ++j) mx = x[j] > mx ? x[j] : mx;
  // A fully masked row (all -inf) gives NaN, as in PyTorch.
  T s = 0;
  if (log) {
#pragma omp simd reduction(+ : s)
    for (int64_t j = 0; j < n; ++j) s += vec::vexp(x[j] - mx);
    const T lse = mx + std::log(s);
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) y[j] = x[j] - lse;
  } else {
#pragma omp simd reduction(+ : s)
    for (int64_t j = 0; j < n; ++j) {
      y[j] = vec::vexp(x[j] - mx);
      s += y[j];
    }
    const T inv = T(1) / s;
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) y[j] *= inv;
  }
}

// dx = y * (dy - sum(dy * y))            (softmax)
// dx = dy - exp(y) * sum(dy)             (log_softmax)
template <typename T>
inline void softmax_backward_row(const T* dy, const T* y, T* dx, int64_t n, bool log) {
  T s = 0;
  if (log) {
#pragma omp simd reduction(+ : s)
    for (int64_t j = 0; j < n; ++j) s += dy[j];
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) dx[j] = dy[j] - vec::vexp(y[j]) * s;
  } else {
#pragma omp simd reduction(+ : s)
    for (int64_t j = 0; j < n; ++j) s += dy[j] * y[j];
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) dx[j] = y[j] * (dy[j] - s);
  }
}

// y = (x - mean) * rstd * w + b (w, b may be null); writes *mean_out, *rstd_out.
// Two-pass mean and variance summed in double; vec::sum_f64 replaces a single
// `omp simd` double accumulator (one serial add chain per row).
template <typename T>
inline void layer_norm_row(const T* x, const T* W, const T* B, double eps, T* y, T* mean_out,
                           T* rstd_out, int64_t n) {
  const T mean = T(vec::sum_f64(n, [x](int64_t j) { return x[j]; }) / double(n));
  const double v = vec::sum_f64(n, [x, mean](int64_t j) { return (x[j] - mean) * (x[j] - mean); });
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

// With xhat = (x - mean) * rstd and g = dy * w (dy when w is null):
//   dx = rstd * (g - mean(g) - xhat * mean(g * xhat))   (dx may be null)
//   pdw += dy * xhat, pdb += dy                         (in T; may be null)
// Three vectorised passes (row sums, dw/db partials, dx) replace one fused
// scalar loop whose serial double sums kept it from vectorising.
template <typename T>
inline void layer_norm_backward_row(const T* dy, const T* x, T mean, T rstd, const T* W, T* dx,
                                    T* pdw, T* pdb, int64_t n) {
  auto xhat = [=](int64_t j) { return (x[j] - mean) * rstd; };
  auto g = [=](int64_t j) { return W ? dy[j] * W[j] : dy[j]; };
  double s1, s2;  // sum(g), sum(g * xhat)
  vec::sum2_f64(n, g, [&](int64_t j) { return g(j) * xhat(j); }, &s1, &s2);
  if (pdw) {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) {
      pdw[j] += dy[j] * xhat(j);
      pdb[j] += dy[j];
    }
  }
  if (!dx) return;
  const T m1 = T(s1 / double(n)), m2 = T(s2 / double(n));
  if (W) {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) dx[j] = rstd * (dy[j] * W[j] - m1 - xhat(j) * m2);
  } else {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) dx[j] = rstd * (dy[j] - m1 - xhat(j) * m2);
  }
}

// The row kernels of one dtype, as function pointers.
template <typename T>
struct RowKernels {
  void (*softmax)(const T* x, T* y, int64_t n, bool log);
  void (*softmax_backward)(const T* dy, const T* y, T* dx, int64_t n, bool log);
  void (*layer_norm)(const T* x, const T* W, const T* B, double eps, T* y, T* mean, T* rstd,
                     int64_t n);
  void (*layer_norm_backward)(const T* dy, const T* x, T mean, T rstd, const T* W, T* dx,
                              T* pdw, T* pdb, int64_t n);
};
template <typename T>
RowKernels<T> baseline_rows() {
  return {&softmax_row<T>, &softmax_backward_row<T>, &layer_norm_row<T>,
          &layer_norm_backward_row<T>};
}

// f32 rows are compiled a second time for AVX2 + FMA and picked once from the
// CPU's features: the build targets baseline x86-64 (SSE2, 4 floats wide), where
// the exp polynomial and the double sums are compute-bound; AVX2 + FMA runs them
// about 3x faster. The body is the same template, inlined into each copy. f64
// (the reference dtype) always takes the baseline copy, so gradient checks do
// not depend on the CPU; f32 results may differ in the last bits between the
// copies (FMA contraction, vector width in the sums). REMORA_CPU_BASELINE=1 in
// the environment forces the baseline copy (tests run both).
#if defined(__GNUC__) && defined(__x86_64__)
#define REMORA_AVX2_ROWS 1
__attribute__((target("avx2,fma"))) void softmax_row_avx2(const float* x, float* y, int64_t n,
                                                           bool log) {
  softmax_row(x, y, n, log);
}
__attribute__((target("avx2,fma"))) void softmax_backward_row_avx2(const float* dy,
                                                                    const float* y, float* dx,
                                                                    int64_t n, bool log) {
  softmax_backward_row(dy, y, dx, n, log);
}
__attribute__((target("avx2,fma"))) void layer_norm_row_avx2(const float* x, const float* W,
                                                              const float* B, double eps,
                                                              float* y, float* mean,
                                                              float* rstd, int64_t n) {
  layer_norm_row(x, W, B, eps, y, mean, rstd, n);
}
__attribute__((target("avx2,fma"))) void layer_norm_backward_row_avx2(
    const float* dy, const float* x, float mean, float rstd, const float* W, float* dx,
    float* pdw, float* pdb, int64_t n) {
  layer_norm_backward_row(dy, x, mean, rstd, W, dx, pdw, pdb, n);
}
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
    __builtin_cpu_init();
    if (!force_baseline_isa() && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
      return RowKernels<float>{&softmax_row_avx2, &softmax_backward_row_avx2,
                               &layer_norm_row_avx2, &layer_norm_backward_row_avx2};
#endif
    return baseline_rows<float>();
  }();
  return k;
}


}  // namespace

void CpuBackend::softmax(DType dt, int64_t rows, int64_t cols, const void* xin, void* yout,
             bool log) {
  dispatch_float(dt, "softmax", [&](auto tag) {
    using T = decltype(tag);
    const T* X = static_cast<const T*>(xin);
    T* Y = static_cast<T*>(yout);
    const auto row = row_kernels<T>().softmax;
    parallel_rows(rows, cols, [&](int64_t r) { row(X + r * cols, Y + r * cols, cols, log); });
  });
}

void CpuBackend::softmax_backward(DType dt, int64_t rows, int64_t cols, const void* dyin, const void* yin,
                      void* dxout, bool log) {
  dispatch_float(dt, "softmax_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* DY = static_cast<const T*>(dyin);
    const T* Y = static_cast<const T*>(yin);
    T* DX = static_cast<T*>(dxout);
    const auto row = row_kernels<T>().softmax_backward;
    parallel_rows(rows, cols, [&](int64_t r) {
      row(DY + r * cols, Y + r * cols, DX + r * cols, cols, log);
    });
  });
}

void CpuBackend::layer_norm(DType dt, int64_t rows, int64_t cols, const void* xin, const void* win,
                const void* bin, double eps, void* yout, void* mean_out,
                void* rstd_out) {
  dispatch_float(dt, "layer_norm", [&](auto tag) {
    using T = decltype(tag);
    const T* X = static_cast<const T*>(xin);
    const T* W = static_cast<const T*>(win);
    const T* B = static_cast<const T*>(bin);
    T* Y = static_cast<T*>(yout);
    T* MEAN = static_cast<T*>(mean_out);
    T* RSTD = static_cast<T*>(rstd_out);
    const auto row = row_kernels<T>().layer_norm;
    parallel_rows(rows, cols, [&](int64_t r) {
      row(X + r * cols, W, B, eps, Y + r * cols, MEAN + r, RSTD + r, cols);
    });
  });
}

void CpuBackend::layer_norm_backward(DType dt, int64_t rows, int64_t cols, const void* dyin,
                         const void* xin, const void* mean_in, const void* rstd_in,
                         const void* win, void* dxout, void* dwout, void* dbout) {
  dispatch_float(dt, "layer_norm_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* DY = static_cast<const T*>(dyin);
    const T* X = static_cast<const T*>(xin);
    const T* MEAN = static_cast<const T*>(mean_in);
    const T* RSTD = static_cast<const T*>(rstd_in);
    const T* W = static_cast<const T*>(win);
    T* DX = static_cast<T*>(dxout);
    T* DW = static_cast<T*>(dwout);
    T* DB = static_cast<T*>(dbout);
    const int nt = (rows * cols > kParallelGrain) ? omp_get_max_threads() : 1;
    // dw and db: each thread sums its rows in blocks of kBlock rows in T
    // (vectorises at full width), adds each block into its double partials,
    // and the partials are reduced at the end. (It replaces adding every row
    // straight into the double partials: a float->double conversion and
    // twice the vector ops per element, at f32.) An f32 block sums 16 terms
    // before they reach double, a relative error of order 16 * 2^-24 at worst.
    constexpr int64_t kBlock = 16;
    const bool want_dwdb = DW || DB;
    std::vector<double> part(size_t(want_dwdb ? nt : 0) * size_t(2 * cols), 0.0);
    const auto row = row_kernels<T>().layer_norm_backward;
#pragma omp parallel num_threads(nt)
    {
      const int tid = omp_get_thread_num();
      double* pdw = want_dwdb ? part.data() + size_t(tid) * 2 * cols : nullptr;
      double* pdb = want_dwdb ? pdw + cols : nullptr;
      std::vector<T> block(want_dwdb ? size_t(2 * cols) : 0, T(0));
      T* bdw = want_dwdb ? block.data() : nullptr;
      T* bdb = want_dwdb ? bdw + cols : nullptr;
      int64_t in_block = 0;
      auto flush = [&] {
        for (int64_t j = 0; j < cols; ++j) {
          pdw[j] += double(bdw[j]);
          pdb[j] += double(bdb[j]);
          bdw[j] = bdb[j] = T(0);
        }
        in_block = 0;
      };
#pragma omp for schedule(static) nowait
      for (int64_t r = 0; r < rows; ++r) {
        row(DY + r * cols, X + r * cols, MEAN[r], RSTD[r], W, DX ? DX + r * cols : nullptr,
            bdw, bdb, cols);
        if (want_dwdb && ++in_block == kBlock) flush();
      }
      if (want_dwdb && in_block) flush();
    }
    if (!part.empty()) {
      for (int64_t j = 0; j < cols; ++j) {
        double dw = 0, db = 0;
        for (int t = 0; t < nt; ++t) {
          dw += part[size_t(t) * 2 * cols + j];
          db += part[size_t(t) * 2 * cols + cols + j];
        }
        if (DW) DW[j] = T(dw);
        if (DB) DB[j] = T(db);
      }
    }
  });
}

void CpuBackend::cross_entropy(DType dt, int64_t rows, int64_t cols, const void* logits,
                   const int64_t* target, int64_t ignore_index, void* loss_out,
                   void* lse_out) {
  dispatch_float(dt, "cross_entropy", [&](auto tag) {
    using T = decltype(tag);
    const T* X = static_cast<const T*>(logits);
    T* L = static_cast<T*>(loss_out);
    T* LSE = static_cast<T*>(lse_out);
    parallel_rows(rows, cols, [&](int64_t r) {
      const T* x = X + r * cols;
      T mx = -INFINITY;
#pragma omp simd reduction(max : mx)
      for (int64_t j = 0; j < cols; ++j) mx = x[j] > mx ? x[j] : mx;
      const double s = vec::sum_f64(cols, [x, mx](int64_t j) { return vec::vexp(x[j] - mx); });
      const T lse = mx + T(std::log(s));
      LSE[r] = lse;
      const int64_t t = target[r];
      L[r] = t == ignore_index ? T(0) : lse - x[t];
    });
  });
}

void CpuBackend::cross_entropy_backward(DType dt, int64_t rows, int64_t cols, const void* logits,
                            const int64_t* target, int64_t ignore_index, const void* lse_in,
                            const void* g_in, void* dx_out) {
  dispatch_float(dt, "cross_entropy_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* X = static_cast<const T*>(logits);
    const T* LSE = static_cast<const T*>(lse_in);
    const T* G = static_cast<const T*>(g_in);
    T* DX = static_cast<T*>(dx_out);
    parallel_rows(rows, cols, [&](int64_t r) {
      const T* x = X + r * cols;
      T* dx = DX + r * cols;
      const int64_t t = target[r];
      if (t == ignore_index) {
        for (int64_t j = 0; j < cols; ++j) dx[j] = 0;
        return;
      }
      const T g = G[r], lse = LSE[r];
#pragma omp simd
      for (int64_t j = 0; j < cols; ++j) dx[j] = g * vec::vexp(x[j] - lse);
      dx[t] -= g;
    });
  });
}

}  // namespace cpu_impl
}  // namespace remora
