// The backend interface: memory and the general kernels over raw device pointers.
// Model-specific kernels (REM, SRU, fused RSA) are not here: they live in
// per-feature kernel tables registered per device type (kernels.h).
//
// ops/ resolves views, broadcasting and dtype checks, then calls one of these.
// Kernels see contiguous buffers, except the strided elementwise family (copy,
// binary, where), which takes an ElemIter: an output shape plus per-operand
// strides in elements (0 = broadcast). A new device implements this class and
// registers itself; ops/ does not change.
#pragma once
#include <cstdint>
#include <string>

#include "../core/dtype.h"

namespace remora {

constexpr int kMaxDims = 8;

// Shape of an elementwise iteration with up to 4 operands (operand 0 is the output).
struct ElemIter {
  int ndim = 0;
  int64_t shape[kMaxDims] = {};
  int64_t strides[4][kMaxDims] = {};
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < ndim; ++i) n *= shape[i];
    return n;
  }
};

enum class UnaryOp : uint8_t {
  affine,   // alpha * x + beta
  pow,      // x ^ alpha
  exp, log, sqrt, tanh, sigmoid, relu, gelu, abs, sin, cos,
  // The nearest bfloat16 value (8-bit significand, f32's exponent range), ties
  // to even; NaN stays NaN (quiet), +-inf stay, values past bf16's largest
  // finite (3.3895e38) by half an ulp or more become +-inf; subnormals round on
  // bf16's subnormal grid (2^-133). The result is stored in the input dtype:
  // bf16 autocast (core/autocast.h) rounds f32 gemm operands with it.
  round_bf16,
};
// Backward helpers: out = grad * f'(...), fused so backward makes one pass.
enum class UnaryGradOp : uint8_t {
  tanh,     // g * (1 - y^2)         (uses the output y)
  sigmoid,  // g * y * (1 - y)       (uses the output y)
  relu,     // g * (x > 0)           (uses the input x)
  gelu,     // g * gelu'(x)          (uses the input x)
  pow,      // g * alpha * x^(alpha-1)
};
enum class BinaryOp : uint8_t { add, sub, mul, div, maximum, minimum, eq, ne, lt, le, gt, ge };
enum class ReduceOp : uint8_t { sum, max, min };

// A device allocator's statistics (bytes; backends/caching_allocator.h keeps them).
struct MemoryStats {
  size_t in_use = 0;         // bytes handed out (rounded), cached-size blocks only
  size_t small_in_use = 0;   // bytes handed out below min_cached (straight from Raw)
  size_t cached = 0;         // free bytes kept in segments
  size_t reserved = 0;       // bytes held from Raw in segments (in_use + cached)
  size_t peak_reserved = 0;
  size_t peak_in_use = 0;    // peak of in_use
  size_t peak_live = 0;      // peak of in_use + small_in_use: every live tensor byte
  uint64_t raw_allocs = 0;   // segments (and bypassed blocks) taken from Raw
  uint64_t raw_frees = 0;    // segments (and bypassed blocks) given back
  uint64_t hits = 0;         // requests served from the cache
  uint64_t splits = 0;       // cached blocks split on a hit
  uint64_t oom_retries = 0;  // Raw failures answered by releasing the cache
  size_t segments = 0;       // live segments
  size_t cap = 0;            // the cache's bound on cached bytes (its options)
  size_t min_cached = 0;     // smaller requests bypass the cache
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  virtual Device device() const = 0;

  // ---- memory ----
  virtual void* alloc(size_t nbytes) = 0;
  virtual void free(void* p, size_t nbytes) = 0;
  virtual void copy_from_host(void* dst, const void* src, size_t nbytes) = 0;
  virtual void copy_to_host(void* dst, const void* src, size_t nbytes) = 0;
  // The allocator's statistics (zeros for a backend without one) and its
  // release: every wholly free cached segment goes back to the system.
  virtual MemoryStats memory_stats() const { return {}; }
  virtual void empty_cache() {}

  // ---- fills and random numbers (n elements, contiguous) ----
  virtual void fill(DType dt, void* out, int64_t n, double value) = 0;
  virtual void arange(DType dt, void* out, int64_t n, double start, double step) = 0;
  // Counter-based (Philox 4x32-10): element i uses counter offset + i, so the
  // result does not depend on thread count or device.
  virtual void uniform(DType dt, void* out, int64_t n, double lo, double hi, uint64_t seed,
                       uint64_t offset) = 0;
  virtual void normal(DType dt, void* out, int64_t n, double mean, double std, uint64_t seed,
                      uint64_t offset) = 0;
  // out[i] = kept_i ? scale : 0, kept_i = philox::kept(seed, offset, i,
  // keep_threshold(keep)) (core/philox.h: one Philox call per 4 elements).
  virtual void bernoulli_mask(DType dt, void* out, int64_t n, double keep, double scale,
                              uint64_t seed, uint64_t offset) = 0;
  // Dropout in one pass, keeping the mask as bits: out = x * m with m the mask
  // bernoulli_mask(dt, ., n, keep, scale, seed, offset) would write, and bit
  // i % 64 of bits[i / 64] set where element i is kept ((n + 63) / 64 words).
  // dropout_backward: dx = dy * (bit ? scale : 0). x / out and dy / dx are n
  // contiguous elements (may alias). Return false where the backend has no such
  // kernels: the op then keeps a full mask tensor (bernoulli_mask and a multiply).
  virtual bool dropout_forward(DType dt, const void* x, void* out, uint64_t* bits, int64_t n,
                               double keep, double scale, uint64_t seed, uint64_t offset) {
    return false;
  }
  virtual bool dropout_backward(DType dt, const void* dy, void* dx, const uint64_t* bits, int64_t n,
                                double scale) {
    return false;
  }

  // ---- strided elementwise ----
  // out (operand 0, dtype dt_out) = in (operand 1, dtype dt_in), with conversion.
  virtual void copy(const ElemIter& it, DType dt_out, void* out, DType dt_in,
                    const void* in) = 0;
  // out = a op b; comparisons write 1/0 in dt.
  virtual void binary(BinaryOp op, DType dt, const ElemIter& it, void* out, const void* a,
                      const void* b) = 0;
  // out = cond != 0 ? a : b (cond has its own dtype).
  virtual void where(DType dt, const ElemIter& it, void* out, DType dt_cond, const void* cond,
                     const void* a, const void* b) = 0;

  // ---- contiguous elementwise ----
  virtual void unary(UnaryOp op, DType dt, int64_t n, const void* x, void* out, double alpha,
                     double beta) = 0;
  // out = grad * f'(v) where v is x or y as listed in UnaryGradOp.
  virtual void unary_grad(UnaryGradOp op, DType dt, int64_t n, const void* grad, const void* v,
                          void* out, double alpha) = 0;

  // ---- reductions over the middle axis of a contiguous [outer, r, inner] ----
  // out: [outer, inner]; argidx (i64, may be null) gets the position in r for max/min.
  virtual void reduce(ReduceOp op, DType dt, int64_t outer, int64_t r, int64_t inner,
                      const void* in, void* out, int64_t* argidx) = 0;

  // ---- linear algebra (row-major, cuBLAS-style strided batch) ----
  // C[b] = alpha * op(A[b]) op(B[b]) + beta * C[b], op = transpose when ta/tb;
  // A[b] starts at A + b * stride_a (elements), likewise B and C.
  virtual void gemm(DType dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha,
                    const void* a, int64_t lda, int64_t stride_a, const void* b, int64_t ldb,
                    int64_t stride_b, double beta, void* c, int64_t ldc, int64_t stride_c,
                    int64_t batch) = 0;

  // ---- fused neural-network kernels over rows of a contiguous [rows, cols] ----
  virtual void softmax(DType dt, int64_t rows, int64_t cols, const void* x, void* y,
                       bool log) = 0;
  // dx = y * (dy - sum(dy * y))            (softmax)
  // dx = dy - exp(y) * sum(dy)             (log_softmax, y = log-probabilities)
  virtual void softmax_backward(DType dt, int64_t rows, int64_t cols, const void* dy,
                                const void* y, void* dx, bool log) = 0;
  // y = (x - mean) * rstd * w + b; w, b may be null. mean, rstd: [rows].
  virtual void layer_norm(DType dt, int64_t rows, int64_t cols, const void* x, const void* w,
                          const void* b, double eps, void* y, void* mean, void* rstd) = 0;
  // dw, db may be null (then w must be null too, or no affine gradient is wanted).
  virtual void layer_norm_backward(DType dt, int64_t rows, int64_t cols, const void* dy,
                                   const void* x, const void* mean, const void* rstd,
                                   const void* w, void* dx, void* dw, void* db) = 0;
  // Per row n: loss[n] = logsumexp(x[n]) - x[n, t[n]], 0 where t[n] == ignore;
  // lse[n] saved for backward.
  virtual void cross_entropy(DType dt, int64_t rows, int64_t cols, const void* logits,
                             const int64_t* target, int64_t ignore_index, void* loss,
                             void* lse) = 0;
  // dx[n, c] = g[n] * (softmax(x[n])_c - [c == t[n]]), 0 rows where t[n] == ignore.
  virtual void cross_entropy_backward(DType dt, int64_t rows, int64_t cols, const void* logits,
                                      const int64_t* target, int64_t ignore_index,
                                      const void* lse, const void* g, void* dx) = 0;

  // ---- gather / scatter along the middle axis of [outer, r, inner] ----
  // out[o, i, :] = src[o, idx[i], :], out: [outer, n_idx, inner]
  virtual void index_select(DType dt, int64_t outer, int64_t r, int64_t inner, const void* src,
                            const int64_t* idx, int64_t n_idx, void* out) = 0;
  // dst[o, idx[i], :] += src[o, i, :]  (duplicates in idx accumulate)
  virtual void index_add(DType dt, int64_t outer, int64_t r, int64_t inner, void* dst,
                         const int64_t* idx, int64_t n_idx, const void* src) = 0;

  // ---- device selection ----
  // Makes this backend's device current for the calls that follow (the kernel
  // tables of kernels.h run on the current device). A no-op on the CPU.
  virtual void activate() {}
  // The queue this backend runs its kernels and copies on, for code outside
  // the backend that must queue work in the same order (NCCL collectives in
  // dist/nccl.cpp): a cudaStream_t on CUDA, null on the CPU.
  virtual void* native_stream() { return nullptr; }
};

// The backend of a device; a clear Error when that device is not available.
Backend& backend(Device dev);
// Whether device cuda:index can be used; when not, *why (if given) says why
// (no CUDA backend in this build, no GPU or driver, index out of range).
bool cuda_is_available(int index = 0, std::string* why = nullptr);
// TF32 tensor-core math for f32 matmuls on CUDA (about 10 bits of mantissa in
// the products). Off by default; REMORA_CUDA_TF32=1 in the environment turns
// it on at startup. f64 is never affected.
void set_cuda_tf32(bool on);
bool cuda_tf32();
// Set on the calling thread by ops/ while it issues a gemm whose f32 operands
// are bf16 values (bf16 autocast, ops/linalg.cpp): a backend may then use
// TF32 tensor cores for it (CUDA does), since TF32's 10-bit significand holds
// bf16's 8 bits exactly, so the products are exactly bf16 x bf16 with f32
// accumulation, as a bf16 gemm's. Guards nest; thread-local.
class GemmBf16OperandsScope {
 public:
  GemmBf16OperandsScope();
  ~GemmBf16OperandsScope();
  GemmBf16OperandsScope(const GemmBf16OperandsScope&) = delete;
  GemmBf16OperandsScope& operator=(const GemmBf16OperandsScope&) = delete;

 private:
  bool prev_;
};
bool gemm_bf16_operands();
// For device backends that register themselves (the CUDA library does).
void register_backend(DeviceType type, Backend* (*get)(int index));
// The folder ("/.../", or "" if unknown) of the shared library that holds
// `symbol`: plugins (libremora_cuda.so, libremora_nccl.so) are looked up there.
std::string library_dir(const void* symbol);

}  // namespace remora
