// The CPU backend: OpenBLAS for gemm, OpenMP loops for everything else.
//
// Every kernel is a plain loop over contiguous rows; the strided elementwise
// family walks an ElemIter row by row. Accumulations of f32 data run in double.
// Loops that call exp use vec::vexp (vec_math.h): a vectorisable exp for f32,
// std::exp for f64. Row sums in double use vec::sum_f64 (8 partial sums).
#include <cblas.h>
#include <omp.h>
#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "../../core/error.h"
#include "../backend.h"
#include "../philox.h"
#include "vec_math.h"

namespace remora {

// SRU recurrence kernels (cpu_sru.cpp).
void cpu_sru_forward(DType dt, const SruProblem& p, const void* U, const void* x, const void* v,
                     const void* b, const void* c0, const void* mask, void* h, void* c,
                     void* c_last);
void cpu_sru_backward(DType dt, const SruProblem& p, const void* U, const void* x, const void* v,
                      const void* b, const void* c0, const void* mask, const void* c,
                      const void* dh, const void* dc, const void* dc_last, void* dU, void* dx,
                      void* dv, void* db, void* dc0);
// REM kernels (cpu_rem.cpp).
void cpu_rem_matrix(DType dt, const RemProblem& p, const void* a, const void* theta, void* P);
void cpu_rem_matrix_backward(DType dt, const RemProblem& p, const void* a, const void* theta,
                             const void* dP, void* da, void* dtheta);
void cpu_rem_scan(DType dt, const RemProblem& p, const void* a, const void* theta,
                  const void* v, const void* state_in, void* y, void* state_out);
void cpu_rem_scan_backward(DType dt, const RemProblem& p, const void* a, const void* theta,
                           const void* v, const void* state_in, const void* dy, void* dv,
                           void* da, void* dtheta, void* dstate_in);

namespace {

// Below this many elements a kernel runs on one thread (fork/join costs more).
constexpr int64_t kParallelGrain = 32768;

template <typename F>
void dispatch(DType dt, F&& f) {
  switch (dt) {
    case DType::f32: f(float{}); break;
    case DType::f64: f(double{}); break;
    case DType::i64: f(int64_t{}); break;
  }
}
template <typename F>
void dispatch_float(DType dt, const char* kernel, F&& f) {
  switch (dt) {
    case DType::f32: f(float{}); break;
    case DType::f64: f(double{}); break;
    default: REMORA_FAIL(kernel << ": expected f32 or f64, got " << dtype_name(dt));
  }
}

// Walks `it` in rows along the last dim, split into chunks so that both many
// short rows and one long row spread over the threads. row(off, len) gets the
// element offset of each operand at the chunk start.
template <typename F>
void iterate(const ElemIter& it, int nops, const F& row) {
  if (it.ndim == 0) {
    int64_t off[4] = {0, 0, 0, 0};
    row(off, int64_t(1));
    return;
  }
  const int nd = it.ndim;
  const int64_t inner = it.shape[nd - 1];
  const int64_t total = it.numel();
  if (total == 0) return;
  const int64_t outer = total / inner;
  constexpr int64_t kChunk = 1 << 14;
  const int64_t nch = (inner + kChunk - 1) / kChunk;
  const int64_t tasks = outer * nch;
#pragma omp parallel for schedule(static) if (total > kParallelGrain && tasks > 1)
  for (int64_t t = 0; t < tasks; ++t) {
    int64_t o = t / nch, c = t % nch;
    int64_t off[4] = {0, 0, 0, 0};
    for (int d = nd - 2; d >= 0; --d) {
      int64_t i = o % it.shape[d];
      o /= it.shape[d];
      for (int k = 0; k < nops; ++k) off[k] += i * it.strides[k][d];
    }
    const int64_t start = c * kChunk;
    for (int k = 0; k < nops; ++k) off[k] += start * it.strides[k][nd - 1];
    row(off, std::min(kChunk, inner - start));
  }
}

// o[i] = f(a[i], b[i]) with the common stride patterns as tight loops.
template <typename T, typename F>
inline void binary_row(T* o, const T* a, const T* b, int64_t n, int64_t so, int64_t sa,
                       int64_t sb, F f) {
  if (so == 1 && sa == 1 && sb == 1) {
    for (int64_t i = 0; i < n; ++i) o[i] = f(a[i], b[i]);
  } else if (so == 1 && sa == 1 && sb == 0) {
    const T bv = b[0];
    for (int64_t i = 0; i < n; ++i) o[i] = f(a[i], bv);
  } else if (so == 1 && sa == 0 && sb == 1) {
    const T av = a[0];
    for (int64_t i = 0; i < n; ++i) o[i] = f(av, b[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) o[i * so] = f(a[i * sa], b[i * sb]);
  }
}

template <typename T, typename F>
void binary_kernel(const ElemIter& it, T* out, const T* a, const T* b, F f) {
  const int nd = it.ndim;
  const int64_t so = nd ? it.strides[0][nd - 1] : 1, sa = nd ? it.strides[1][nd - 1] : 1,
                sb = nd ? it.strides[2][nd - 1] : 1;
  iterate(it, 3, [&](const int64_t* off, int64_t n) {
    binary_row(out + off[0], a + off[1], b + off[2], n, so, sa, sb, f);
  });
}

template <typename T>
inline T gelu_f(T x) {
  return T(0.5) * x * (T(1) + std::erf(x * T(0.70710678118654752440)));
}
template <typename T>
inline T gelu_grad_f(T x) {
  const T cdf = T(0.5) * (T(1) + std::erf(x * T(0.70710678118654752440)));
  const T pdf = std::exp(T(-0.5) * x * x) * T(0.39894228040143267794);
  return cdf + x * pdf;
}
template <typename T>
inline T sigmoid_f(T x) {
  // Stable on both tails.
  if (x >= 0) return T(1) / (T(1) + std::exp(-x));
  const T e = std::exp(x);
  return e / (T(1) + e);
}

template <typename T, typename F>
void map_n(int64_t n, const T* x, T* out, F f) {
#pragma omp parallel for simd schedule(static) if (n > kParallelGrain)
  for (int64_t i = 0; i < n; ++i) out[i] = f(x[i]);
}
template <typename T, typename F>
void map2_n(int64_t n, const T* g, const T* v, T* out, F f) {
#pragma omp parallel for simd schedule(static) if (n > kParallelGrain)
  for (int64_t i = 0; i < n; ++i) out[i] = f(g[i], v[i]);
}

// Rows of a [rows, cols] problem spread over threads.
template <typename F>
void parallel_rows(int64_t rows, int64_t cols, const F& f) {
#pragma omp parallel for schedule(static) if (rows * cols > kParallelGrain && rows > 1)
  for (int64_t r = 0; r < rows; ++r) f(r);
}

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

// ---- dropout masks ----
// keep[i] = uniform(philox(seed, offset + i)) < keep_p, bit for bit. uniform()
// is bits * 2^-53 with bits = (w0 << 21) | (w1 >> 11) < 2^53 (the two parts do
// not overlap), and keep_p * 2^53 is exact, so `uniform < keep_p` is the integer
// test bits < thr = ceil(keep_p * 2^53), done on 32-bit halves (hi = w0 >> 11).
// The scalar philox was 15% of a training step; the AVX2 copy runs 8 counters
// per vector (32x32->64 bit products as two vpmuludq), two vectors at a time.
struct KeepThreshold {
  uint32_t hi, lo;
  explicit KeepThreshold(double keep) {
    const uint64_t thr = uint64_t(std::ceil(std::max(0.0, std::min(1.0, keep)) * 9007199254740992.0));
    hi = uint32_t(thr >> 32);
    lo = uint32_t(thr);
  }
};

#if defined(REMORA_AVX2_ROWS)
// (lo, hi) 32-bit words of x * m per lane: even lanes from one vpmuludq,
// odd lanes from another on the shifted operand, blended back together.
__attribute__((target("avx2"))) inline __m256i mulhilo8(__m256i x, __m256i m, __m256i* h) {
  const __m256i pe = _mm256_mul_epu32(x, m);
  const __m256i po = _mm256_mul_epu32(_mm256_srli_epi64(x, 32), m);
  *h = _mm256_blend_epi32(_mm256_srli_epi64(pe, 32), po, 0xAA);
  return _mm256_blend_epi32(pe, _mm256_slli_epi64(po, 32), 0xAA);
}

// kept[l] = all ones or 0 for the 16 counters ctr0 .. ctr0 + 15, as two
// independent 8-lane streams so that one hides the other's multiply latency.
__attribute__((target("avx2"))) void philox_keep16_avx2(uint64_t seed, uint64_t ctr0,
                                                         const KeepThreshold& t, uint32_t* kept) {
  alignas(32) uint32_t lo[16], hi[16];
  for (int l = 0; l < 16; ++l) {
    lo[l] = uint32_t(ctr0 + uint64_t(l));
    hi[l] = uint32_t((ctr0 + uint64_t(l)) >> 32);
  }
  __m256i c0[2], c1[2], c2[2], c3[2];
  for (int j = 0; j < 2; ++j) {
    c0[j] = _mm256_load_si256(reinterpret_cast<const __m256i*>(lo + 8 * j));
    c1[j] = _mm256_load_si256(reinterpret_cast<const __m256i*>(hi + 8 * j));
    c2[j] = c3[j] = _mm256_setzero_si256();
  }
  const __m256i M0 = _mm256_set1_epi32(int(0xD2511F53u)), M1 = _mm256_set1_epi32(int(0xCD9E8D57u));
  uint32_t k0 = uint32_t(seed), k1 = uint32_t(seed >> 32);
  for (int r = 0; r < 10; ++r) {
    const __m256i K0 = _mm256_set1_epi32(int(k0)), K1 = _mm256_set1_epi32(int(k1));
    for (int j = 0; j < 2; ++j) {
      __m256i hi0, hi1;
      const __m256i lo0 = mulhilo8(c0[j], M0, &hi0), lo1 = mulhilo8(c2[j], M1, &hi1);
      c0[j] = _mm256_xor_si256(_mm256_xor_si256(hi1, c1[j]), K0);
      c2[j] = _mm256_xor_si256(_mm256_xor_si256(hi0, c3[j]), K1);
      c1[j] = lo1;
      c3[j] = lo0;
    }
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  // Unsigned compares as signed ones after flipping the sign bits.
  const __m256i sign = _mm256_set1_epi32(int(0x80000000u));
  const __m256i th = _mm256_set1_epi32(int(t.hi ^ 0x80000000u));
  const __m256i tl = _mm256_set1_epi32(int(t.lo ^ 0x80000000u));
  for (int j = 0; j < 2; ++j) {
    const __m256i bh = _mm256_xor_si256(_mm256_srli_epi32(c0[j], 11), sign);
    const __m256i bl = _mm256_xor_si256(
        _mm256_or_si256(_mm256_slli_epi32(c0[j], 21), _mm256_srli_epi32(c1[j], 11)), sign);
    const __m256i keep = _mm256_or_si256(
        _mm256_cmpgt_epi32(th, bh),
        _mm256_and_si256(_mm256_cmpeq_epi32(th, bh), _mm256_cmpgt_epi32(tl, bl)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(kept + 8 * j), keep);
  }
}
#endif

// The scalar reference, one counter at a time.
void philox_keep16_baseline(uint64_t seed, uint64_t ctr0, double keep, uint32_t* kept) {
  for (int l = 0; l < 16; ++l)
    kept[l] = philox::uniform(philox::philox(seed, ctr0 + uint64_t(l))) < keep ? ~0u : 0u;
}

bool force_baseline_isa() {
  const char* e = std::getenv("REMORA_CPU_BASELINE");
  return e && *e && std::strcmp(e, "0") != 0;
}

bool use_avx2() {
#ifdef REMORA_AVX2_ROWS
  __builtin_cpu_init();
  return !force_baseline_isa() && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

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

// A caching allocator: freed blocks are kept by size and handed out again, so a
// training loop that allocates the same shapes every step stops page-faulting.
class CpuAllocator {
 public:
  void* alloc(size_t nbytes) {
    const size_t sz = round(nbytes);
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = free_.find(sz);
      if (it != free_.end() && !it->second.empty()) {
        void* p = it->second.back();
        it->second.pop_back();
        cached_ -= sz;
        return p;
      }
    }
    void* p = std::aligned_alloc(64, sz);
    if (!p) {
      release_all();
      p = std::aligned_alloc(64, sz);
    }
    REMORA_CHECK(p, "cpu: out of memory allocating " << nbytes << " bytes");
    return p;
  }
  void free(void* p, size_t nbytes) {
    if (!p) return;
    const size_t sz = round(nbytes);
    std::lock_guard<std::mutex> lock(mu_);
    if (sz < kMinCached || cached_ + sz > kMaxCached) {
      std::free(p);
      return;
    }
    free_[sz].push_back(p);
    cached_ += sz;
  }
  void release_all() {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& kv : free_)
      for (void* p : kv.second) std::free(p);
    free_.clear();
    cached_ = 0;
  }
  ~CpuAllocator() { release_all(); }

 private:
  static size_t round(size_t n) { return std::max<size_t>(64, (n + 63) / 64 * 64); }
  static constexpr size_t kMinCached = 1 << 16;            // small blocks: malloc is fast
  static constexpr size_t kMaxCached = size_t(2) << 30;    // at most 2 GiB kept
  std::mutex mu_;
  std::map<size_t, std::vector<void*>> free_;
  size_t cached_ = 0;
};

class CpuBackend final : public Backend {
 public:
  const char* name() const override { return "cpu"; }

  void* alloc(size_t nbytes) override { return alloc_.alloc(nbytes); }
  void free(void* p, size_t nbytes) override { alloc_.free(p, nbytes); }
  void copy_from_host(void* dst, const void* src, size_t n) override { if (n) std::memcpy(dst, src, n); }
  void copy_to_host(void* dst, const void* src, size_t n) override { if (n) std::memcpy(dst, src, n); }

  void fill(DType dt, void* out, int64_t n, double value) override {
    dispatch(dt, [&](auto tag) {
      using T = decltype(tag);
      T* o = static_cast<T*>(out);
      const T v = T(value);
#pragma omp parallel for simd schedule(static) if (n > kParallelGrain)
      for (int64_t i = 0; i < n; ++i) o[i] = v;
    });
  }
  void arange(DType dt, void* out, int64_t n, double start, double step) override {
    dispatch(dt, [&](auto tag) {
      using T = decltype(tag);
      T* o = static_cast<T*>(out);
      for (int64_t i = 0; i < n; ++i) o[i] = T(start + double(i) * step);
    });
  }
  void uniform(DType dt, void* out, int64_t n, double lo, double hi, uint64_t seed,
               uint64_t offset) override {
    dispatch_float(dt, "uniform", [&](auto tag) {
      using T = decltype(tag);
      T* o = static_cast<T*>(out);
#pragma omp parallel for schedule(static) if (n > 4096)
      for (int64_t i = 0; i < n; ++i) {
        T v = T(lo + (hi - lo) * philox::uniform(philox::philox(seed, offset + uint64_t(i))));
        o[i] = v < T(hi) ? v : T(lo);  // rounding to f32 may reach hi
      }
    });
  }
  void normal(DType dt, void* out, int64_t n, double mean, double std, uint64_t seed,
              uint64_t offset) override {
    dispatch_float(dt, "normal", [&](auto tag) {
      using T = decltype(tag);
      T* o = static_cast<T*>(out);
#pragma omp parallel for schedule(static) if (n > 4096)
      for (int64_t i = 0; i < n; ++i)
        o[i] = T(mean + std * philox::normal(philox::philox(seed, offset + uint64_t(i))));
    });
  }
  void bernoulli_mask(DType dt, void* out, int64_t n, double keep, double scale, uint64_t seed,
                      uint64_t offset) override {
    dispatch_float(dt, "bernoulli_mask", [&](auto tag) {
      using T = decltype(tag);
      T* o = static_cast<T*>(out);
      // Blocks of 16 counters in parallel chunks, the tail (< 16) scalar.
      static const bool avx2 = use_avx2();
      const KeepThreshold thr(keep);
      const int64_t nb = n / 16;
      constexpr int64_t kBlocksPerTask = 256;
      const int64_t tasks = (nb + kBlocksPerTask - 1) / kBlocksPerTask;
#pragma omp parallel for schedule(static) if (n > kParallelGrain && tasks > 1)
      for (int64_t t = 0; t < tasks; ++t) {
        const int64_t b1 = std::min(nb, (t + 1) * kBlocksPerTask);
        for (int64_t b = t * kBlocksPerTask; b < b1; ++b) {
          uint32_t kept[16];
#if defined(REMORA_AVX2_ROWS)
          if (avx2)
            philox_keep16_avx2(seed, offset + uint64_t(b * 16), thr, kept);
          else
#endif
            philox_keep16_baseline(seed, offset + uint64_t(b * 16), keep, kept);
          for (int l = 0; l < 16; ++l) o[b * 16 + l] = kept[l] ? T(scale) : T(0);
        }
      }
      for (int64_t i = nb * 16; i < n; ++i)
        o[i] = philox::uniform(philox::philox(seed, offset + uint64_t(i))) < keep ? T(scale)
                                                                                   : T(0);
    });
  }

  void copy(const ElemIter& it, DType dt_out, void* out, DType dt_in, const void* in) override {
    const int nd = it.ndim;
    const int64_t so = nd ? it.strides[0][nd - 1] : 1, si = nd ? it.strides[1][nd - 1] : 1;
    dispatch(dt_out, [&](auto to) {
      using TO = decltype(to);
      dispatch(dt_in, [&](auto ti) {
        using TI = decltype(ti);
        TO* o = static_cast<TO*>(out);
        const TI* x = static_cast<const TI*>(in);
        iterate(it, 2, [&](const int64_t* off, int64_t n) {
          TO* oo = o + off[0];
          const TI* xx = x + off[1];
          if (so == 1 && si == 1) {
            if (std::is_same<TO, TI>::value)
              std::memcpy(oo, xx, size_t(n) * sizeof(TO));
            else
              for (int64_t i = 0; i < n; ++i) oo[i] = TO(xx[i]);
          } else {
            for (int64_t i = 0; i < n; ++i) oo[i * so] = TO(xx[i * si]);
          }
        });
      });
    });
  }

  void binary(BinaryOp op, DType dt, const ElemIter& it, void* out, const void* a,
              const void* b) override {
    dispatch(dt, [&](auto tag) {
      using T = decltype(tag);
      T* o = static_cast<T*>(out);
      const T* x = static_cast<const T*>(a);
      const T* y = static_cast<const T*>(b);
      switch (op) {
        case BinaryOp::add: binary_kernel(it, o, x, y, [](T p, T q) { return p + q; }); break;
        case BinaryOp::sub: binary_kernel(it, o, x, y, [](T p, T q) { return p - q; }); break;
        case BinaryOp::mul: binary_kernel(it, o, x, y, [](T p, T q) { return p * q; }); break;
        case BinaryOp::div: binary_kernel(it, o, x, y, [](T p, T q) { return p / q; }); break;
        case BinaryOp::maximum:
          binary_kernel(it, o, x, y, [](T p, T q) { return p > q ? p : q; });
          break;
        case BinaryOp::minimum:
          binary_kernel(it, o, x, y, [](T p, T q) { return p < q ? p : q; });
          break;
        case BinaryOp::eq: binary_kernel(it, o, x, y, [](T p, T q) { return T(p == q); }); break;
        case BinaryOp::ne: binary_kernel(it, o, x, y, [](T p, T q) { return T(p != q); }); break;
        case BinaryOp::lt: binary_kernel(it, o, x, y, [](T p, T q) { return T(p < q); }); break;
        case BinaryOp::le: binary_kernel(it, o, x, y, [](T p, T q) { return T(p <= q); }); break;
        case BinaryOp::gt: binary_kernel(it, o, x, y, [](T p, T q) { return T(p > q); }); break;
        case BinaryOp::ge: binary_kernel(it, o, x, y, [](T p, T q) { return T(p >= q); }); break;
      }
    });
  }

  void where(DType dt, const ElemIter& it, void* out, DType dt_cond, const void* cond,
             const void* a, const void* b) override {
    const int nd = it.ndim;
    int64_t s[4];
    for (int k = 0; k < 4; ++k) s[k] = nd ? it.strides[k][nd - 1] : 1;
    dispatch(dt, [&](auto tag) {
      using T = decltype(tag);
      dispatch(dt_cond, [&](auto ctag) {
        using C = decltype(ctag);
        T* o = static_cast<T*>(out);
        const C* c = static_cast<const C*>(cond);
        const T* x = static_cast<const T*>(a);
        const T* y = static_cast<const T*>(b);
        iterate(it, 4, [&](const int64_t* off, int64_t n) {
          for (int64_t i = 0; i < n; ++i)
            o[off[0] + i * s[0]] =
                c[off[1] + i * s[1]] != C(0) ? x[off[2] + i * s[2]] : y[off[3] + i * s[3]];
        });
      });
    });
  }

  void unary(UnaryOp op, DType dt, int64_t n, const void* xin, void* out, double alpha,
             double beta) override {
    if (op == UnaryOp::affine && dt == DType::i64) {
      const int64_t* x = static_cast<const int64_t*>(xin);
      int64_t* o = static_cast<int64_t*>(out);
      map_n(n, x, o, [=](int64_t v) { return int64_t(alpha * double(v) + beta); });
      return;
    }
    if (op == UnaryOp::abs && dt == DType::i64) {
      map_n(n, static_cast<const int64_t*>(xin), static_cast<int64_t*>(out),
            [](int64_t v) { return v < 0 ? -v : v; });
      return;
    }
    dispatch_float(dt, "unary", [&](auto tag) {
      using T = decltype(tag);
      const T* x = static_cast<const T*>(xin);
      T* o = static_cast<T*>(out);
      const T a = T(alpha), b = T(beta);
      switch (op) {
        case UnaryOp::affine: map_n(n, x, o, [=](T v) { return a * v + b; }); break;
        case UnaryOp::pow:
          if (alpha == 2)
            map_n(n, x, o, [](T v) { return v * v; });
          else
            map_n(n, x, o, [=](T v) { return std::pow(v, a); });
          break;
        case UnaryOp::exp: map_n(n, x, o, [](T v) { return vec::vexp(v); }); break;
        case UnaryOp::log: map_n(n, x, o, [](T v) { return std::log(v); }); break;
        case UnaryOp::sqrt: map_n(n, x, o, [](T v) { return std::sqrt(v); }); break;
        case UnaryOp::tanh: map_n(n, x, o, [](T v) { return std::tanh(v); }); break;
        case UnaryOp::sigmoid: map_n(n, x, o, [](T v) { return sigmoid_f(v); }); break;
        case UnaryOp::relu: map_n(n, x, o, [](T v) { return v > T(0) ? v : T(0); }); break;
        case UnaryOp::gelu: map_n(n, x, o, [](T v) { return gelu_f(v); }); break;
        case UnaryOp::abs: map_n(n, x, o, [](T v) { return std::abs(v); }); break;
        case UnaryOp::sin: map_n(n, x, o, [](T v) { return std::sin(v); }); break;
        case UnaryOp::cos: map_n(n, x, o, [](T v) { return std::cos(v); }); break;
      }
    });
  }

  void unary_grad(UnaryGradOp op, DType dt, int64_t n, const void* grad, const void* v,
                  void* out, double alpha) override {
    dispatch_float(dt, "unary_grad", [&](auto tag) {
      using T = decltype(tag);
      const T* g = static_cast<const T*>(grad);
      const T* x = static_cast<const T*>(v);
      T* o = static_cast<T*>(out);
      const T a = T(alpha);
      switch (op) {
        case UnaryGradOp::tanh: map2_n(n, g, x, o, [](T gg, T y) { return gg * (T(1) - y * y); }); break;
        case UnaryGradOp::sigmoid: map2_n(n, g, x, o, [](T gg, T y) { return gg * y * (T(1) - y); }); break;
        case UnaryGradOp::relu: map2_n(n, g, x, o, [](T gg, T xx) { return xx > T(0) ? gg : T(0); }); break;
        case UnaryGradOp::gelu: map2_n(n, g, x, o, [](T gg, T xx) { return gg * gelu_grad_f(xx); }); break;
        case UnaryGradOp::pow:
          map2_n(n, g, x, o, [=](T gg, T xx) { return gg * a * std::pow(xx, a - T(1)); });
          break;
      }
    });
  }

  void reduce(ReduceOp op, DType dt, int64_t outer, int64_t r, int64_t inner, const void* in,
              void* out, int64_t* argidx) override {
    dispatch(dt, [&](auto tag) {
      using T = decltype(tag);
      const T* x = static_cast<const T*>(in);
      T* o = static_cast<T*>(out);
      if (op == ReduceOp::sum)
        reduce_sum(outer, r, inner, x, o);
      else
        reduce_minmax(op == ReduceOp::max, outer, r, inner, x, o, argidx);
    });
  }

  void gemm(DType dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha,
            const void* a, int64_t lda, int64_t stride_a, const void* b, int64_t ldb,
            int64_t stride_b, double beta, void* c, int64_t ldc, int64_t stride_c,
            int64_t batch) override {
    const CBLAS_TRANSPOSE TA = ta ? CblasTrans : CblasNoTrans;
    const CBLAS_TRANSPOSE TB = tb ? CblasTrans : CblasNoTrans;
    if (dt == DType::f32) {
      for (int64_t i = 0; i < batch; ++i)
        cblas_sgemm(CblasRowMajor, TA, TB, int(m), int(n), int(k), float(alpha),
                    static_cast<const float*>(a) + i * stride_a, int(lda),
                    static_cast<const float*>(b) + i * stride_b, int(ldb), float(beta),
                    static_cast<float*>(c) + i * stride_c, int(ldc));
    } else if (dt == DType::f64) {
      for (int64_t i = 0; i < batch; ++i)
        cblas_dgemm(CblasRowMajor, TA, TB, int(m), int(n), int(k), alpha,
                    static_cast<const double*>(a) + i * stride_a, int(lda),
                    static_cast<const double*>(b) + i * stride_b, int(ldb), beta,
                    static_cast<double*>(c) + i * stride_c, int(ldc));
    } else {
      REMORA_FAIL("gemm: expected f32 or f64, got " << dtype_name(dt));
    }
  }

  void softmax(DType dt, int64_t rows, int64_t cols, const void* xin, void* yout,
               bool log) override {
    dispatch_float(dt, "softmax", [&](auto tag) {
      using T = decltype(tag);
      const T* X = static_cast<const T*>(xin);
      T* Y = static_cast<T*>(yout);
      const auto row = row_kernels<T>().softmax;
      parallel_rows(rows, cols, [&](int64_t r) { row(X + r * cols, Y + r * cols, cols, log); });
    });
  }

  void softmax_backward(DType dt, int64_t rows, int64_t cols, const void* dyin, const void* yin,
                        void* dxout, bool log) override {
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

  void layer_norm(DType dt, int64_t rows, int64_t cols, const void* xin, const void* win,
                  const void* bin, double eps, void* yout, void* mean_out,
                  void* rstd_out) override {
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

  void layer_norm_backward(DType dt, int64_t rows, int64_t cols, const void* dyin,
                           const void* xin, const void* mean_in, const void* rstd_in,
                           const void* win, void* dxout, void* dwout, void* dbout) override {
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

  void cross_entropy(DType dt, int64_t rows, int64_t cols, const void* logits,
                     const int64_t* target, int64_t ignore_index, void* loss_out,
                     void* lse_out) override {
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

  void cross_entropy_backward(DType dt, int64_t rows, int64_t cols, const void* logits,
                              const int64_t* target, int64_t ignore_index, const void* lse_in,
                              const void* g_in, void* dx_out) override {
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

  void index_select(DType dt, int64_t outer, int64_t r, int64_t inner, const void* src,
                    const int64_t* idx, int64_t n_idx, void* out) override {
    const size_t es = dtype_size(dt);
    const char* S = static_cast<const char*>(src);
    char* O = static_cast<char*>(out);
    const size_t row = size_t(inner) * es;
#pragma omp parallel for collapse(2) schedule(static) if (outer * n_idx * inner > kParallelGrain)
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < n_idx; ++i)
        std::memcpy(O + (size_t(o) * n_idx + i) * row, S + (size_t(o) * r + idx[i]) * row, row);
  }

  void index_add(DType dt, int64_t outer, int64_t r, int64_t inner, void* dst,
                 const int64_t* idx, int64_t n_idx, const void* src) override {
    dispatch(dt, [&](auto tag) {
      using T = decltype(tag);
      T* D = static_cast<T*>(dst);
      const T* S = static_cast<const T*>(src);
      // Threads own disjoint column chunks, so duplicate indices never race.
      constexpr int64_t kCols = 64;
      const int64_t nch = (inner + kCols - 1) / kCols;
#pragma omp parallel for collapse(2) schedule(static) if (outer * n_idx * inner > kParallelGrain)
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t c = 0; c < nch; ++c) {
          const int64_t j0 = c * kCols, j1 = std::min(inner, j0 + kCols);
          for (int64_t i = 0; i < n_idx; ++i) {
            T* d = D + (o * r + idx[i]) * inner;
            const T* s = S + (o * n_idx + i) * inner;
            for (int64_t j = j0; j < j1; ++j) d[j] += s[j];
          }
        }
    });
  }

  void rem_matrix(DType dt, const RemProblem& p, const void* a, const void* theta,
                  void* P) override {
    cpu_rem_matrix(dt, p, a, theta, P);
  }
  void rem_matrix_backward(DType dt, const RemProblem& p, const void* a, const void* theta,
                           const void* dP, void* da, void* dtheta) override {
    cpu_rem_matrix_backward(dt, p, a, theta, dP, da, dtheta);
  }
  void rem_scan(DType dt, const RemProblem& p, const void* a, const void* theta, const void* v,
                const void* state_in, void* y, void* state_out) override {
    cpu_rem_scan(dt, p, a, theta, v, state_in, y, state_out);
  }
  void rem_scan_backward(DType dt, const RemProblem& p, const void* a, const void* theta,
                         const void* v, const void* state_in, const void* dy, void* dv,
                         void* da, void* dtheta, void* dstate_in) override {
    cpu_rem_scan_backward(dt, p, a, theta, v, state_in, dy, dv, da, dtheta, dstate_in);
  }
  void sru_forward(DType dt, const SruProblem& p, const void* U, const void* x, const void* v,
                   const void* b, const void* c0, const void* mask, void* h, void* c,
                   void* c_last) override {
    cpu_sru_forward(dt, p, U, x, v, b, c0, mask, h, c, c_last);
  }
  void sru_backward(DType dt, const SruProblem& p, const void* U, const void* x, const void* v,
                    const void* b, const void* c0, const void* mask, const void* c,
                    const void* dh, const void* dc, const void* dc_last, void* dU, void* dx,
                    void* dv, void* db, void* dc0) override {
    cpu_sru_backward(dt, p, U, x, v, b, c0, mask, c, dh, dc, dc_last, dU, dx, dv, db, dc0);
  }

 private:
  template <typename T>
  static void reduce_sum(int64_t outer, int64_t r, int64_t inner, const T* x, T* o) {
    using Acc = typename std::conditional<std::is_same<T, int64_t>::value, int64_t, double>::type;
    if (inner == 1) {
      if (outer >= omp_get_max_threads() || outer * r <= kParallelGrain) {
#pragma omp parallel for schedule(static) if (outer * r > kParallelGrain)
        for (int64_t i = 0; i < outer; ++i) {
          const T* p = x + i * r;
          Acc s = 0;
#pragma omp simd reduction(+ : s)
          for (int64_t j = 0; j < r; ++j) s += Acc(p[j]);
          o[i] = T(s);
        }
      } else {
        // Few long rows: split each row over the threads.
        for (int64_t i = 0; i < outer; ++i) {
          const T* p = x + i * r;
          Acc s = 0;
#pragma omp parallel for simd reduction(+ : s) schedule(static)
          for (int64_t j = 0; j < r; ++j) s += Acc(p[j]);
          o[i] = T(s);
        }
      }
      return;
    }
    // [outer, r, inner]: accumulate rows of length inner.
    constexpr int64_t kCols = 256;
    const int64_t nch = (inner + kCols - 1) / kCols;
#pragma omp parallel for collapse(2) schedule(static) if (outer * r * inner > kParallelGrain)
    for (int64_t i = 0; i < outer; ++i)
      for (int64_t c = 0; c < nch; ++c) {
        const int64_t j0 = c * kCols, j1 = std::min(inner, j0 + kCols);
        Acc acc[kCols];
        for (int64_t j = j0; j < j1; ++j) acc[j - j0] = 0;
        for (int64_t k = 0; k < r; ++k) {
          const T* p = x + (i * r + k) * inner;
          for (int64_t j = j0; j < j1; ++j) acc[j - j0] += Acc(p[j]);
        }
        for (int64_t j = j0; j < j1; ++j) o[i * inner + j] = T(acc[j - j0]);
      }
  }

  template <typename T>
  static void reduce_minmax(bool is_max, int64_t outer, int64_t r, int64_t inner, const T* x,
                            T* o, int64_t* argidx) {
    // The first extreme wins ties; a NaN wins over everything (as in PyTorch).
    auto better = [is_max](T v, T best) {
      if (v != v) return best == best;
      return is_max ? v > best : v < best;
    };
#pragma omp parallel for collapse(2) schedule(static) if (outer * r * inner > kParallelGrain)
    for (int64_t i = 0; i < outer; ++i)
      for (int64_t j = 0; j < inner; ++j) {
        const T* p = x + i * r * inner + j;
        T best = p[0];
        int64_t bi = 0;
        for (int64_t k = 1; k < r; ++k)
          if (better(p[k * inner], best)) {
            best = p[k * inner];
            bi = k;
          }
        o[i * inner + j] = best;
        if (argidx) argidx[i * inner + j] = bi;
      }
  }

  CpuAllocator alloc_;
};

}  // namespace

Backend* cpu_backend() {
  static CpuBackend* b = new CpuBackend();  // never destroyed: tensors may outlive statics
  return b;
}

}  // namespace remora
