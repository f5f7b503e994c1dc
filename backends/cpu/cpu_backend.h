// The CPU backend's class, shared by its translation units (never included
// outside backends/cpu/): the methods are defined by concern in
// cpu_backend.cpp (memory, gemm, reductions, gather/scatter), cpu_random.cpp
// (fills, Philox random numbers, dropout masks), cpu_elementwise.cpp (strided
// and contiguous elementwise) and cpu_rows.cpp (softmax, layer_norm,
// cross_entropy). The REM and SRU kernels are kernel tables (cpu_rem.cpp,
// cpu_sru.cpp; see backends/kernels.h).
//
// Every kernel is a plain loop over contiguous rows; the strided elementwise
// family walks an ElemIter row by row. Accumulations of f32 data run in double.
// Loops that call exp use vec::vexp (vec_math.h): a vectorisable exp for f32,
// std::exp for f64. Row sums in double use vec::sum_f64 (8 partial sums).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "../../core/error.h"
#include "../../core/parallel.h"
#include "../backend.h"
#include "../caching_allocator.h"

namespace remora {
namespace cpu_impl {

// Below this many elements a kernel runs on one thread (waking a worker costs more).
constexpr int64_t kParallelGrain = 32768;
// Below this many multiply-adds (all of a batched gemm) gemm runs on one
// thread: about 15 us of sgemm here, a few times a thread-pool fork/join.
constexpr double kParallelGemmWork = double(1 << 20);

template <typename F>
void dispatch(DType dt, F&& f) {
  switch (dt) {
    case DType::f32: f(float{}); break;
    case DType::f64: f(double{}); break;
    case DType::i64: f(int64_t{}); break;
    default: REMORA_FAIL("cpu: unknown dtype code " << int(dt));
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
// element offset of each operand at the chunk start. Each thread takes one
// contiguous share of the chunks and steps the outer index like an odometer
// (one division per share, not one per row: a permute copy of [B, L, H, 32]
// heads is rows of 32 floats, where per-row index arithmetic cost as much as
// the copy).
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
  auto share = [&](int64_t t0, int64_t t1) {
    int64_t idx[kMaxDims] = {};
    int64_t base[4] = {0, 0, 0, 0};
    int64_t o = t0 / nch, c = t0 % nch;
    for (int d = nd - 2; d >= 0; --d) {
      idx[d] = o % it.shape[d];
      o /= it.shape[d];
      for (int k = 0; k < nops; ++k) base[k] += idx[d] * it.strides[k][d];
    }
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t start = c * kChunk;
      int64_t off[4];
      for (int k = 0; k < nops; ++k) off[k] = base[k] + start * it.strides[k][nd - 1];
      row(off, std::min(kChunk, inner - start));
      if (++c < nch) continue;
      c = 0;
      for (int d = nd - 2; d >= 0; --d) {  // the next outer index
        for (int k = 0; k < nops; ++k) base[k] += it.strides[k][d];
        if (++idx[d] < it.shape[d]) break;
        for (int k = 0; k < nops; ++k) base[k] -= idx[d] * it.strides[k][d];
        idx[d] = 0;
      }
    }
  };
  if (total <= kParallelGrain || tasks <= 1 || pool_threads() <= 1) {
    share(0, tasks);
    return;
  }
  parallel_team(int(std::min<int64_t>(tasks, pool_threads())), [&](int t, int n) {
    int64_t b, e;
    static_range(tasks, t, n, &b, &e);
    if (e > b) share(b, e);
  });
}

// Rows of a [rows, cols] problem spread over threads.
template <typename F>
void parallel_rows(int64_t rows, int64_t cols, const F& f) {
  parallel_for(rows, rows * cols > kParallelGrain, f);
}

// The vector ISA of the CPU kernels' fast copies: the widest this CPU runs
// (avx2: AVX2 + FMA; avx512: AVX-512 F/VL/BW/DQ as well), capped by
// REMORA_CPU_ISA=baseline|avx2|avx512 in the environment (REMORA_CPU_BASELINE=1
// is REMORA_CPU_ISA=baseline). Read once per process; ctest runs the
// [cpu_kernels] tests under each cap, so every copy this CPU has is checked.
enum class Isa { baseline = 0, avx2 = 1, avx512 = 2 };
Isa cpu_isa();
const char* isa_name(Isa isa);
inline bool use_avx2() { return cpu_isa() >= Isa::avx2; }
inline bool use_avx512() { return cpu_isa() >= Isa::avx512; }
#if defined(__GNUC__) && defined(__x86_64__)
#define REMORA_AVX2_ROWS 1
#endif
// y = exp(x) for x <= 0 as the f32 softmax rows compute it at cpu_isa()
// (simd::exp_nonpos on full vectors, vec::exp_f32_nonpos otherwise); for tests.
void exp_nonpos_f32(const float* x, float* y, int64_t n);
// The target of the AVX-512 copies (the subsets cpu_isa requires). GCC keeps
// 256-bit vectors for auto-vectorised loops unless told otherwise; clang (the
// sanitizer build) knows no such target option and would drop the attribute.
#if defined(__clang__)
#define REMORA_AVX512_TARGET "avx512f,avx512vl,avx512bw,avx512dq,avx2,fma"
#else
#define REMORA_AVX512_TARGET "avx512f,avx512vl,avx512bw,avx512dq,avx2,fma,prefer-vector-width=512"
#endif

// Scratch of the calling thread, kept between calls (each pool thread keeps
// its own), one buffer per use so that users never share one: 64-byte
// aligned, at least `bytes`. A training step reuses it instead of faulting
// fresh pages in on every call; it is released when a call needs less than a
// quarter of it, so one large call does not pin it forever.
enum class ScratchUse { attention = 0, gemm_pack = 1 };
void* thread_scratch(ScratchUse use, size_t bytes);

// Host memory through the shared caching allocator (backends/caching_allocator.h).
struct HostRaw {
  void* alloc(size_t n) { return std::aligned_alloc(64, n); }
  void free(void* p, size_t) { std::free(p); }
  const char* name() const { return "cpu"; }
};
using CpuAllocator = CachingAllocator<HostRaw>;

class CpuBackend final : public Backend {
 public:
  CpuBackend();
  const char* name() const override { return "cpu"; }
  Device device() const override { return Device::cpu(); }

  void* alloc(size_t nbytes) override { return alloc_.alloc(nbytes); }
  void free(void* p, size_t nbytes) override { alloc_.free(p, nbytes); }
  MemoryStats memory_stats() const override { return alloc_.stats(); }
  void empty_cache() override;
  void copy_from_host(void* dst, const void* src, size_t n) override { if (n) std::memcpy(dst, src, n); }
  void copy_to_host(void* dst, const void* src, size_t n) override { if (n) std::memcpy(dst, src, n); }

  // cpu_random.cpp
  void fill(DType dt, void* out, int64_t n, double value) override;
  void arange(DType dt, void* out, int64_t n, double start, double step) override;
  void uniform(DType dt, void* out, int64_t n, double lo, double hi, uint64_t seed,
               uint64_t offset) override;
  void normal(DType dt, void* out, int64_t n, double mean, double std, uint64_t seed,
              uint64_t offset) override;
  void bernoulli_mask(DType dt, void* out, int64_t n, double keep, double scale, uint64_t seed,
                      uint64_t offset) override;
  bool dropout_forward(DType dt, const void* x, void* out, uint64_t* bits, int64_t n, double keep,
                       double scale, uint64_t seed, uint64_t offset) override;
  bool dropout_backward(DType dt, const void* dy, void* dx, const uint64_t* bits, int64_t n,
                        double scale) override;
  // cpu_elementwise.cpp
  void copy(const ElemIter& it, DType dt_out, void* out, DType dt_in, const void* in) override;
  void binary(BinaryOp op, DType dt, const ElemIter& it, void* out, const void* a,
              const void* b) override;
  void where(DType dt, const ElemIter& it, void* out, DType dt_cond, const void* cond,
             const void* a, const void* b) override;
  void unary(UnaryOp op, DType dt, int64_t n, const void* xin, void* out, double alpha,
             double beta) override;
  void unary_grad(UnaryGradOp op, DType dt, int64_t n, const void* grad, const void* v,
                  void* out, double alpha) override;
  // cpu_backend.cpp
  void reduce(ReduceOp op, DType dt, int64_t outer, int64_t r, int64_t inner, const void* in,
              void* out, int64_t* argidx) override;
  void gemm(DType dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha,
            const void* a, int64_t lda, int64_t stride_a, const void* b, int64_t ldb,
            int64_t stride_b, double beta, void* c, int64_t ldc, int64_t stride_c,
            int64_t batch) override;
  void index_select(DType dt, int64_t outer, int64_t r, int64_t inner, const void* src,
                    const int64_t* idx, int64_t n_idx, void* out) override;
  void index_add(DType dt, int64_t outer, int64_t r, int64_t inner, void* dst,
                 const int64_t* idx, int64_t n_idx, const void* src) override;
  // cpu_rows.cpp
  void softmax(DType dt, int64_t rows, int64_t cols, const void* xin, void* yout,
               bool log) override;
  void softmax_backward(DType dt, int64_t rows, int64_t cols, const void* dyin, const void* yin,
                        void* dxout, bool log) override;
  void layer_norm(DType dt, int64_t rows, int64_t cols, const void* xin, const void* win,
                  const void* bin, double eps, void* yout, void* mean_out,
                  void* rstd_out) override;
  void layer_norm_backward(DType dt, int64_t rows, int64_t cols, const void* dyin,
                           const void* xin, const void* mean_in, const void* rstd_in,
                           const void* win, void* dxout, void* dwout, void* dbout) override;
  void cross_entropy(DType dt, int64_t rows, int64_t cols, const void* logits,
                     const int64_t* target, int64_t ignore_index, void* loss_out,
                     void* lse_out) override;
  void cross_entropy_backward(DType dt, int64_t rows, int64_t cols, const void* logits,
                              const int64_t* target, int64_t ignore_index, const void* lse_in,
                              const void* g_in, void* dx_out) override;

  CpuAllocator& allocator() { return alloc_; }

 private:
  CpuAllocator alloc_;
};

}  // namespace cpu_impl
}  // namespace remora
