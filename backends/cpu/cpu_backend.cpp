// SPDX-License-Identifier: BSD-3-Clause
// The CPU backend: OpenBLAS for gemm (f32 on AVX-512 CPUs: sgemm, cpu_sgemm.h), loops on the thread pool (core/parallel.h) for everything else.
// This file: the backend object, memory, gemm, reductions, gather/scatter.
// The other kernels are in cpu_random.cpp, cpu_elementwise.cpp, cpu_rows.cpp
// (see cpu_backend.h); REM and SRU are kernel tables (cpu_rem.cpp, cpu_sru.cpp).
#include "cpu_backend.h"
#include "cpu_bgemm.h"
#include "cpu_sgemm.h"
#include "vec_math.h"
#include "../../core/version.h"
#include <cblas.h>
#ifdef __GLIBC__
#include <malloc.h>
#include <type_traits>
#endif

#include <memory>
#include <type_traits>
#include <vector>

namespace remora {
namespace cpu_impl {

namespace {

// p[0] + ... + p[n - 1] in Acc: floating types through vec::sum_f64 (eight
// independent double partial sums: one accumulator made a 2M-element sum
// add-latency-bound, 1.4 ms at 2 threads where the read takes 0.3).
template <typename T, typename Acc>
Acc sum_range(const T* p, int64_t n) {
  if constexpr (std::is_floating_point<Acc>::value) {
    return vec::sum_f64(n, [p](int64_t j) { return p[j]; });
  } else {
    Acc s = 0;
    for (int64_t j = 0; j < n; ++j) s += Acc(p[j]);
    return s;
  }
}

template <typename T>
void reduce_sum(int64_t outer, int64_t r, int64_t inner, const T* x, T* o) {
  using Acc = typename std::conditional<std::is_same<T, int64_t>::value, int64_t, double>::type;
  if (inner == 1) {
    const int nt = pool_threads();
    if (outer >= nt || outer * r <= kParallelGrain) {
      parallel_for(outer, outer * r > kParallelGrain, [&](int64_t i) {
        o[i] = T(sum_range<T, Acc>(x + i * r, r));
      });
    } else {
      // Few long rows: split each row over the threads, partial sums added in
      // thread order (the same bits every run at a given thread count).
      std::vector<Acc> part(size_t(nt), Acc(0));
      for (int64_t i = 0; i < outer; ++i) {
        const T* p = x + i * r;
        // Zeroed per row: a team may come out smaller (a busy pool runs it on
        // the caller alone), leaving slots of the previous row behind.
        std::fill(part.begin(), part.end(), Acc(0));
        parallel_team(nt, [&](int t, int n) {
          int64_t b, e;
          static_range(r, t, n, &b, &e);
          part[size_t(t)] = sum_range<T, Acc>(p + b, e - b);
        });
        Acc s = 0;
        for (int t = 0; t < nt; ++t) s += part[size_t(t)];
        o[i] = T(s);
      }
    }
    return;
  }
  // [outer, r, inner]: accumulate rows of length inner.
  constexpr int64_t kCols = 256;
  const int64_t nch = (inner + kCols - 1) / kCols;
  parallel_for(outer * nch, outer * r * inner > kParallelGrain, [&](int64_t ic) {
    const int64_t i = ic / nch, c = ic % nch;
    const int64_t j0 = c * kCols, j1 = std::min(inner, j0 + kCols);
    Acc acc[kCols];
    for (int64_t j = j0; j < j1; ++j) acc[j - j0] = 0;
    for (int64_t k = 0; k < r; ++k) {
      const T* p = x + (i * r + k) * inner;
      for (int64_t j = j0; j < j1; ++j) acc[j - j0] += Acc(p[j]);
    }
    for (int64_t j = j0; j < j1; ++j) o[i * inner + j] = T(acc[j - j0]);
  });
}

template <typename T>
void reduce_minmax(bool is_max, int64_t outer, int64_t r, int64_t inner, const T* x,
                          T* o, int64_t* argidx) {
  // The first extreme wins ties; a NaN wins over everything (as in PyTorch).
  auto better = [is_max](T v, T best) {
    if (v != v) return best == best;
    return is_max ? v > best : v < best;
  };
  parallel_for(outer * inner, outer * r * inner > kParallelGrain, [&](int64_t ij) {
    const int64_t i = ij / inner, j = ij % inner;
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
  });
}



}  // namespace

void CpuBackend::reduce(const ReduceArgs& args) {
  dispatch(args.dt, [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(args.in);
    T* o = static_cast<T*>(args.out);
    if (args.op == ReduceOp::sum)
      reduce_sum(args.outer, args.r, args.inner, x, o);
    else
      reduce_minmax(args.op == ReduceOp::max, args.outer, args.r, args.inner, x, o, args.argidx);
  });
}

void CpuBackend::gemm(const GemmArgs& args) {
  const int64_t m = args.m, n = args.n, k = args.k, lda = args.lda, ldb = args.ldb, ldc = args.ldc;
  // CBLAS takes int dimensions: a larger one is an Error, not a silent wrap.
  constexpr int64_t kIntMax = (int64_t(1) << 31) - 1;
  REMORA_CHECK(m <= kIntMax && n <= kIntMax && k <= kIntMax && lda <= kIntMax &&
                   ldb <= kIntMax && ldc <= kIntMax,
               "cpu gemm: m = " << m << ", n = " << n << ", k = " << k << ", lda = " << lda
                                << ", ldb = " << ldb << ", ldc = " << ldc
                                << " exceed BLAS's int range; split the matmul");
  const CBLAS_TRANSPOSE TA = args.ta ? CblasTrans : CblasNoTrans;
  const CBLAS_TRANSPOSE TB = args.tb ? CblasTrans : CblasNoTrans;
  if (args.dt != DType::f32 && args.dt != DType::f64 && !is_half(args.dt))
    REMORA_FAIL("gemm: expected f32, f64, bf16 or f16, got " << dtype_name(args.dt));
  const size_t es = dtype_size(args.dt);
  const bool half = is_half(args.dt);
  const size_t es_c = half && args.c_f32 ? sizeof(float) : es;
  // C[i] rows [m0, m1) x columns [n0, n1) of batch element i, one
  // single-threaded BLAS call (row-major: A is [m, k] or, transposed, [k, m];
  // B is [k, n] or [n, k]).
  auto block = [&](int64_t i, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
    const char* A =
        static_cast<const char*>(args.a) + (i * args.stride_a + (args.ta ? m0 : m0 * lda)) * int64_t(es);
    const char* B =
        static_cast<const char*>(args.b) + (i * args.stride_b + (args.tb ? n0 * ldb : n0)) * int64_t(es);
    char* C = static_cast<char*>(args.c) + (i * args.stride_c + m0 * ldc + n0) * int64_t(es_c);
    if (half) {  // cpu_bgemm.h: f32 accumulation
      if (args.c_f32) {
        half_gemm_f32(args.dt, args.ta, args.tb, m1 - m0, n1 - n0, k, float(args.alpha), A, lda, B, ldb,
                      float(args.beta), reinterpret_cast<float*>(C), ldc);
        return;
      }
      // A 16-bit C: the block in f32, rounded once.
      const int64_t rows = m1 - m0, cols = n1 - n0;
      thread_local std::vector<float> cf;
      cf.resize(size_t(std::max<int64_t>(rows * cols, 1)));
      dispatch(args.dt, [&](auto tag) {
        using T = decltype(tag);
        if constexpr (is_half_storage<T>::value) {
          T* ct = reinterpret_cast<T*>(C);
          if (args.beta != 0)
            for (int64_t r = 0; r < rows; ++r)
              for (int64_t j = 0; j < cols; ++j) cf[size_t(r * cols + j)] = ct[r * ldc + j];
          half_gemm_f32(args.dt, args.ta, args.tb, rows, cols, k, float(args.alpha), A, lda, B, ldb,
                        float(args.beta), cf.data(), cols);
          for (int64_t r = 0; r < rows; ++r)
            for (int64_t j = 0; j < cols; ++j) ct[r * ldc + j] = cf[size_t(r * cols + j)];
        }
      });
      return;
    }
#ifdef REMORA_SGEMM_TILES
    if (args.dt == DType::f32 && use_sgemm()) {
      sgemm(args.ta, args.tb, m1 - m0, n1 - n0, k, float(args.alpha), reinterpret_cast<const float*>(A), lda,
            reinterpret_cast<const float*>(B), ldb, float(args.beta), reinterpret_cast<float*>(C), ldc);
      return;
    }
#endif
    if (args.dt == DType::f32)
      cblas_sgemm(CblasRowMajor, TA, TB, int(m1 - m0), int(n1 - n0), int(k), float(args.alpha),
                  reinterpret_cast<const float*>(A), int(lda), reinterpret_cast<const float*>(B), int(ldb),
                  float(args.beta), reinterpret_cast<float*>(C), int(ldc));
    else
      cblas_dgemm(CblasRowMajor, TA, TB, int(m1 - m0), int(n1 - n0), int(k), args.alpha,
                  reinterpret_cast<const double*>(A), int(lda), reinterpret_cast<const double*>(B), int(ldb),
                  args.beta, reinterpret_cast<double*>(C), int(ldc));
  };
  // One thread pool (see blas_single_threaded): the batch is spread over the
  // pool's threads when it has at least one element per thread; otherwise
  // each product is cut into one panel per thread along its longer side of C.
  // The batch split gives the one-thread result bit for bit; a panel edge can
  // move a row or column to another BLAS micro-kernel, so panel splits may
  // differ from one thread in rounding (as OpenBLAS's own threading does).
  // For a given thread count every run gives the same bits.
  const int nt = pool_threads();
  const double work = double(m) * double(n) * double(k) * double(args.batch);
  if (nt <= 1 || work < kParallelGemmWork || m == 0 || n == 0) {
    for (int64_t i = 0; i < args.batch; ++i) block(i, 0, m, 0, n);
  } else if (args.batch >= nt) {
    parallel_for(args.batch, true, [&](int64_t i) { block(i, 0, m, 0, n); });
  } else {
    const bool by_rows = m >= n;
    const int64_t len = by_rows ? m : n;
    const int64_t parts = std::min<int64_t>(nt, std::max<int64_t>(1, len / 16));
    for (int64_t i = 0; i < args.batch; ++i) {
      parallel_team(int(parts), [&](int p, int np) {
        const int64_t lo = len * p / np, hi = len * (p + 1) / np;
        if (by_rows) block(i, lo, hi, 0, n);
        else block(i, 0, m, lo, hi);
      });
    }
  }
}

void CpuBackend::index_select(const IndexArgs& args) {
  const size_t es = dtype_size(args.dt);
  const char* S = static_cast<const char*>(args.src);
  char* O = static_cast<char*>(args.dst);
  const size_t row = size_t(args.inner) * es;
  parallel_for(args.outer * args.n_idx, args.outer * args.n_idx * args.inner > kParallelGrain,
               [&](int64_t oi) {
                 const int64_t o = oi / args.n_idx, i = oi % args.n_idx;
                 std::memcpy(O + (size_t(o) * args.n_idx + i) * row,
                             S + (size_t(o) * args.r + args.idx[i]) * row, row);
               });
}

void CpuBackend::index_add(const IndexArgs& args) {
  dispatch(args.dt, [&](auto tag) {
    using T = decltype(tag);
    T* D = static_cast<T*>(args.dst);
    const T* S = static_cast<const T*>(args.src);
    // Threads own disjoint column chunks, so duplicate indices never race.
    constexpr int64_t kCols = 64;
    const int64_t nch = (args.inner + kCols - 1) / kCols;
    parallel_for(args.outer * nch, args.outer * args.n_idx * args.inner > kParallelGrain, [&](int64_t oc) {
      const int64_t o = oc / nch, c = oc % nch;
      const int64_t j0 = c * kCols, j1 = std::min(args.inner, j0 + kCols);
      for (int64_t i = 0; i < args.n_idx; ++i) {
        T* d = D + (o * args.r + args.idx[i]) * args.inner;
        const T* s = S + (o * args.n_idx + i) * args.inner;
        for (int64_t j = j0; j < j1; ++j) d[j] += s[j];
      }
    });
  });
}

void CpuBackend::cumsum(const CumsumArgs& args) {
  REMORA_CHECK(args.dt == DType::f32 || args.dt == DType::f64 || args.dt == DType::i64,
               "cumsum kernel: expected f32, f64 or i64, got " << dtype_name(args.dt));
  dispatch(args.dt, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, int64_t>) {
      using Acc = std::conditional_t<std::is_same_v<T, int64_t>, int64_t, double>;
      const T* S = static_cast<const T*>(args.src);
      T* D = static_cast<T*>(args.dst);
      // A thread owns a chunk of up to kCols lines (adjacent j) of one o and runs
      // them down the n axis together, its sums in a small local array.
      constexpr int64_t kCols = 64;
      const int64_t nch = (args.inner + kCols - 1) / kCols;
      parallel_for(args.outer * nch, args.outer * args.n * args.inner > kParallelGrain, [&](int64_t oc) {
        const int64_t o = oc / nch, c = oc % nch;
        const int64_t j0 = c * kCols, w = std::min(args.inner, j0 + kCols) - j0;
        Acc acc[kCols] = {};
        for (int64_t step = 0; step < args.n; ++step) {
          const int64_t i = args.reverse ? args.n - 1 - step : step;
          const int64_t off = (o * args.n + i) * args.inner + j0;
          for (int64_t j = 0; j < w; ++j) {
            acc[j] += Acc(S[off + j]);
            D[off + j] = T(acc[j]);
          }
        }
      });
    }
  });
}

// Blocks are 64-byte aligned; below 64 KiB malloc is fast and they bypass the
// cache; at most 2 GiB is kept (REMORA_CPU_CACHE_MB overrides the cap).
namespace {
CpuAllocator::Options cpu_cache_options() {
  CpuAllocator::Options o;
  o.round = 64;
  o.min_cached = size_t(1) << 16;
  o.min_split = size_t(1) << 16;
  o.cap = size_t(2) << 30;
  return CpuAllocator::Options::from_env("REMORA_CPU_CACHE_MB", o);
}
}  // namespace

// Every wholly free cached segment goes back to malloc, and malloc hands the
// whole free pages back to the system: the segments are heap blocks, and a
// freed block in the middle of the heap would otherwise stay resident.
void CpuBackend::empty_cache() {
  alloc_.release_cached();
#ifdef __GLIBC__
  malloc_trim(0);
#endif
}

CpuBackend::CpuBackend() : alloc_(HostRaw{}, cpu_cache_options()) {
  // One thread pool: OpenBLAS runs every call on the calling thread and gemm
  // spreads the work over Remora's pool (core/parallel.h; set_num_threads
  // keeps it so).
  openblas_set_num_threads(1);
}

void* thread_scratch(ScratchUse use, size_t bytes) {
  thread_local std::vector<unsigned char> bufs[2];
  std::vector<unsigned char>& buf = bufs[int(use)];
  const size_t need = bytes + 64;
  if (buf.size() < need || buf.size() > 4 * need) {
    std::vector<unsigned char>().swap(buf);
    buf.resize(need);
  }
  void* p = buf.data();
  size_t space = buf.size();
  return std::align(64, 1, p, space);
}

Isa cpu_isa() {
  static const Isa isa = [] {
    Isa cap = Isa::avx512;
    const char* b = std::getenv("REMORA_CPU_BASELINE");
    const char* e = std::getenv("REMORA_CPU_ISA");
    if (b && *b && std::strcmp(b, "0") != 0) cap = Isa::baseline;
    else if (e && *e) {
      if (std::strcmp(e, "baseline") == 0) cap = Isa::baseline;
      else if (std::strcmp(e, "avx2") == 0) cap = Isa::avx2;
      else if (std::strcmp(e, "avx512_emulated") == 0) cap = Isa::avx512_emulated;
      else if (std::strcmp(e, "avx512") != 0)
        REMORA_FAIL("REMORA_CPU_ISA: expected baseline, avx2, avx512 or avx512_emulated, got '" << e << "'");
    }
    Isa have = Isa::baseline;
#if defined(__GNUC__) && defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
      have = Isa::avx2;
      if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
          __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq"))
        have = Isa::avx512;
    }
#endif
    // The emulated AVX-512 copies need only AVX2 (the kernels around them).
    if (cap == Isa::avx512_emulated) return have >= Isa::avx2 ? cap : have;
    return std::min(cap, have);
  }();
  return isa;
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::avx512: return "avx512";
    case Isa::avx512_emulated: return "avx512_emulated";
    case Isa::avx2: return "avx2";
    default: return "baseline";
  }
}

bool CpuBackend::supports(OpKind op, const OpProblem& p) const {
  switch (op) {
    case OpKind::fused_dropout: return true;
    case OpKind::fused_adam: return is_floating(p.dt) && !is_half(p.dt);
    case OpKind::fused_rsa: return p.rsa && rsa_fused_takes(p.dt, *p.rsa);
  }
  return false;
}

}  // namespace cpu_impl

Backend* cpu_backend() {
  static cpu_impl::CpuBackend* b = new cpu_impl::CpuBackend();  // never destroyed: tensors may outlive statics
  return b;
}

std::string cpu_isa_level() { return cpu_impl::isa_name(cpu_impl::cpu_isa()); }

}  // namespace remora
