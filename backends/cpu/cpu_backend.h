// SPDX-License-Identifier: BSD-3-Clause
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
#include "../../core/half.h"
#include "../../core/parallel.h"
#include "../backend.h"
#include "../caching_allocator.h"
#include "../kernels.h"

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
    case DType::b8: f(bool{}); break;
    case DType::i32: f(int32_t{}); break;
    case DType::u8: f(uint8_t{}); break;
    case DType::bf16: f(bf16_t{}); break;
    case DType::f16: f(f16_t{}); break;
    default: REMORA_FAIL("cpu: unknown dtype code " << int(dt));
  }
}
// f32, f64 and the 16-bit types (bf16_t / f16_t: each element computed in
// float and rounded once, core/half.h), for the elementwise and random kernels.
template <typename F>
void dispatch_float_half(DType dt, const char* kernel, F&& f) {
  switch (dt) {
    case DType::f32: f(float{}); break;
    case DType::f64: f(double{}); break;
    case DType::bf16: f(bf16_t{}); break;
    case DType::f16: f(f16_t{}); break;
    default: REMORA_FAIL(kernel << ": expected a floating dtype, got " << dtype_name(dt));
  }
}
template <typename F>
void dispatch_float(DType dt, const char* kernel, F&& f) {
  switch (dt) {
    case DType::f32: f(float{}); break;
    case DType::f64: f(double{}); break;
    default:
      REMORA_FAIL(kernel << ": expected f32 or f64, got " << dtype_name(dt)
                         << (is_half(dt) ? "; this kernel takes no 16-bit input, convert with .to(DType::f32)" : ""));
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
// is REMORA_CPU_ISA=baseline). avx512_emulated (on a CPU with AVX2) runs the
// AVX-512 copies of the explicit-SIMD kernels (the f32 rows, the f32 tiles of
// cpu_sgemm.cpp) with their 16-lane vectors in scalar code (simd::Emu16), the
// AVX2 copies elsewhere: slow, so that their indexing is checked on CPUs
// without AVX-512. Read once per process; ctest runs the [cpu_kernels] tests
// under each cap, so every copy is checked on every CPU, natively where it can be.
enum class Isa { baseline = 0, avx2 = 1, avx512_emulated = 2, avx512 = 3 };
Isa cpu_isa();
const char* isa_name(Isa isa);
inline bool use_avx2() { return cpu_isa() >= Isa::avx2; }
inline bool use_avx512() { return cpu_isa() >= Isa::avx512; }
inline bool use_avx512_emulated() { return cpu_isa() == Isa::avx512_emulated; }
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

// Whether the fused RSA kernels (cpu_attention.cpp) take a problem.
bool rsa_fused_takes(DType dt, const RsaFusedProblem& p);

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
  void uniform(const UniformArgs& a) override;
  void normal(const NormalArgs& a) override;
  void bernoulli_mask(const BernoulliMaskArgs& a) override;
  void dropout_forward(const DropoutArgs& a) override;
  void dropout_backward(const DropoutBackwardArgs& a) override;
  // cpu_elementwise.cpp
  void copy(const CopyArgs& a) override;
  void binary(const BinaryArgs& a) override;
  void where(const WhereArgs& a) override;
  void unary(const UnaryArgs& a) override;
  void unary_grad(const UnaryGradArgs& a) override;
  // cpu_backend.cpp
  void reduce(const ReduceArgs& a) override;
  void gemm(const GemmArgs& a) override;
  void index_select(const IndexArgs& a) override;
  void index_add(const IndexArgs& a) override;
  void cumsum(const CumsumArgs& a) override;
  // cpu_rows.cpp
  void softmax(const SoftmaxArgs& a) override;
  void softmax_backward(const SoftmaxBackwardArgs& a) override;
  void layer_norm(const LayerNormArgs& a) override;
  void layer_norm_backward(const LayerNormBackwardArgs& a) override;
  void cross_entropy(const CrossEntropyArgs& a) override;
  void cross_entropy_backward(const CrossEntropyBackwardArgs& a) override;

  // Every optional kernel (OpKind): dropout for every problem (its kernels
  // report a dtype they do not take), Adam in f32 and f64, RSA where
  // rsa_fused_takes.
  bool supports(OpKind op, const OpProblem& p) const override;

  CpuAllocator& allocator() { return alloc_; }

 private:
  CpuAllocator alloc_;
};

}  // namespace cpu_impl
}  // namespace remora
