// SPDX-License-Identifier: BSD-3-Clause
// The backend interface: memory and the general kernels over raw device pointers.
// Model-specific kernels (REM, SRU, fused RSA) are not here: they live in
// per-feature kernel tables registered per device type (kernels.h).
//
// ops/ resolves views, broadcasting and dtype checks, then calls one of these.
// Kernels see contiguous buffers, except the strided elementwise family (copy,
// binary, where), which takes an ElemIter: an output shape plus per-operand
// strides in elements (0 = broadcast). Every kernel with more than a few
// operands takes one named-argument struct (XxxArgs below, as the kernel
// tables of kernels.h do): optional pointers are null and say so. A new device
// implements this class and registers its factory (core/device_registry.h);
// ops/ does not change.
#pragma once
#include <cstdint>
#include <string>

#include "../core/device_registry.h"
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

// ---- the kernels' arguments ----

// n random numbers (fills start at element 0 of out, contiguous). Counter-based
// (Philox 4x32-10): element i uses counter offset + i, so the result does not
// depend on thread count or device.
struct UniformArgs {
  DType dt = DType::f32;
  void* out = nullptr;
  int64_t n = 0;
  double lo = 0, hi = 1;  // out[i] in [lo, hi)
  uint64_t seed = 0, offset = 0;
};
struct NormalArgs {
  DType dt = DType::f32;
  void* out = nullptr;
  int64_t n = 0;
  double mean = 0, std = 1;
  uint64_t seed = 0, offset = 0;
};
// out[i] = kept_i ? scale : 0, kept_i = philox::kept(seed, offset, i,
// keep_threshold(keep)) (core/philox.h: one Philox call per 4 elements).
struct BernoulliMaskArgs {
  DType dt = DType::f32;
  void* out = nullptr;
  int64_t n = 0;
  double keep = 1;   // probability of keeping an element
  double scale = 1;  // the value of a kept element
  uint64_t seed = 0, offset = 0;
};
// Dropout in one pass, keeping the mask as bits: mask.out = x * m with m the
// mask bernoulli_mask(mask) would write, and bit i % 64 of bits[i / 64] set
// where element i is kept ((mask.n + 63) / 64 words). x and mask.out are
// mask.n contiguous elements (may alias).
struct DropoutArgs {
  BernoulliMaskArgs mask;  // its out is the output
  const void* x = nullptr;
  uint64_t* bits = nullptr;
};
// dx = dy * (bit ? scale : 0) with the bits dropout_forward wrote; dy and dx
// are n contiguous elements (may alias).
struct DropoutBackwardArgs {
  DType dt = DType::f32;
  const void* dy = nullptr;
  void* dx = nullptr;
  const uint64_t* bits = nullptr;
  int64_t n = 0;
  double scale = 1;
};

// out (operand 0, dtype dt_out) = in (operand 1, dtype dt_in), with conversion.
struct CopyArgs {
  ElemIter it;
  DType dt_out = DType::f32;
  void* out = nullptr;
  DType dt_in = DType::f32;
  const void* in = nullptr;
};
// out = a op b (operands 0, 1, 2 of it); comparisons write 1/0 in dt.
struct BinaryArgs {
  BinaryOp op = BinaryOp::add;
  DType dt = DType::f32;
  ElemIter it;
  void* out = nullptr;
  const void* a = nullptr;
  const void* b = nullptr;
};
// out = cond != 0 ? a : b (operands 0 .. 3 of it; cond has its own dtype).
struct WhereArgs {
  DType dt = DType::f32;
  ElemIter it;
  void* out = nullptr;
  DType dt_cond = DType::f32;
  const void* cond = nullptr;
  const void* a = nullptr;
  const void* b = nullptr;
};
// out = op(x) over n contiguous elements (x and out may alias); alpha and beta
// as UnaryOp lists (affine, pow).
struct UnaryArgs {
  UnaryOp op = UnaryOp::affine;
  DType dt = DType::f32;
  int64_t n = 0;
  const void* x = nullptr;
  void* out = nullptr;
  double alpha = 1, beta = 0;
};
// out = grad * f'(v) over n contiguous elements, v being x or y as listed in
// UnaryGradOp; alpha for pow.
struct UnaryGradArgs {
  UnaryGradOp op = UnaryGradOp::tanh;
  DType dt = DType::f32;
  int64_t n = 0;
  const void* grad = nullptr;
  const void* v = nullptr;
  void* out = nullptr;
  double alpha = 1;
};

// A reduction over the middle axis of a contiguous [outer, r, inner] into
// out [outer, inner].
struct ReduceArgs {
  ReduceOp op = ReduceOp::sum;
  DType dt = DType::f32;
  int64_t outer = 1, r = 1, inner = 1;
  const void* in = nullptr;
  void* out = nullptr;
  int64_t* argidx = nullptr;  // optional (i64 [outer, inner]): the position in r for max/min
};

// Row-major, cuBLAS-style strided batch:
// C[b] = alpha * op(A[b]) op(B[b]) + beta * C[b], op = transpose when ta/tb;
// A[b] starts at a + b * stride_a (elements), likewise B and C. op(A) is
// [m, k], op(B) [k, n], C [m, n]; lda, ldb, ldc are the row strides.
struct GemmArgs {
  DType dt = DType::f32;
  bool ta = false, tb = false;
  int64_t m = 0, n = 0, k = 0;
  double alpha = 1;
  const void* a = nullptr;
  int64_t lda = 0, stride_a = 0;
  const void* b = nullptr;
  int64_t ldb = 0, stride_b = 0;
  double beta = 0;
  void* c = nullptr;
  int64_t ldc = 0, stride_c = 0;
  int64_t batch = 1;
  // With 16-bit operands (dt bf16 or f16, accumulated in f32): C is f32 when
  // set (autocast's products), else of dt (rounded once from the f32 sums).
  bool c_f32 = false;
};

// ---- fused neural-network kernels over rows of a contiguous [rows, cols] ----

// y = softmax(x) per row, or log_softmax when log.
struct SoftmaxArgs {
  DType dt = DType::f32;
  int64_t rows = 0, cols = 0;
  const void* x = nullptr;
  void* y = nullptr;
  bool log = false;
};
// dx = y * (dy - sum(dy * y))            (softmax)
// dx = dy - exp(y) * sum(dy)             (log_softmax, y = log-probabilities)
struct SoftmaxBackwardArgs {
  DType dt = DType::f32;
  int64_t rows = 0, cols = 0;
  const void* dy = nullptr;
  const void* y = nullptr;
  void* dx = nullptr;
  bool log = false;
};
// y = (x - mean) * rstd * w + b per row. mean, rstd: [rows].
struct LayerNormArgs {
  DType dt = DType::f32;
  int64_t rows = 0, cols = 0;
  const void* x = nullptr;
  const void* w = nullptr;  // optional [cols]
  const void* b = nullptr;  // optional [cols] (needs w)
  double eps = 1e-5;
  void* y = nullptr;
  void* mean = nullptr;
  void* rstd = nullptr;
};
// The gradients of layer_norm from its saved mean and rstd.
struct LayerNormBackwardArgs {
  DType dt = DType::f32;
  int64_t rows = 0, cols = 0;
  const void* dy = nullptr;
  const void* x = nullptr;
  const void* mean = nullptr;
  const void* rstd = nullptr;
  const void* w = nullptr;  // optional
  void* dx = nullptr;
  // Optional both (then w must be null too, or no affine gradient is wanted).
  void* dw = nullptr;
  void* db = nullptr;
};
// Per row n: loss[n] = logsumexp(x[n]) - x[n, t[n]], 0 where t[n] == ignore;
// lse[n] saved for backward.
struct CrossEntropyArgs {
  DType dt = DType::f32;
  int64_t rows = 0, cols = 0;
  const void* logits = nullptr;
  const int64_t* target = nullptr;  // [rows], host or device as the logits
  int64_t ignore_index = -100;
  void* loss = nullptr;
  void* lse = nullptr;
};
// dx[n, c] = g[n] * (softmax(x[n])_c - [c == t[n]]), 0 rows where t[n] == ignore.
struct CrossEntropyBackwardArgs {
  DType dt = DType::f32;
  int64_t rows = 0, cols = 0;
  const void* logits = nullptr;
  const int64_t* target = nullptr;
  int64_t ignore_index = -100;
  const void* lse = nullptr;
  const void* g = nullptr;  // [rows]
  void* dx = nullptr;
};

// ---- gather / scatter along the middle axis of [outer, r, inner] ----

// index_select: dst[o, i, :] = src[o, idx[i], :], src [outer, r, inner],
//   dst [outer, n_idx, inner].
// index_add: dst[o, idx[i], :] += src[o, i, :], dst [outer, r, inner],
//   src [outer, n_idx, inner] (duplicates in idx accumulate).
struct IndexArgs {
  DType dt = DType::f32;
  int64_t outer = 1, r = 0, inner = 1;
  const int64_t* idx = nullptr;  // n_idx positions in [0, r)
  int64_t n_idx = 0;
  const void* src = nullptr;
  void* dst = nullptr;
};

// ---- scans along the middle axis of [outer, n, inner] ----

/// Inclusive prefix sums along the middle axis: dst[o, i, j] = sum of src[o, k, j]
/// over k <= i (over k >= i when reverse). src and dst are contiguous
/// [outer, n, inner] of dtype f32, f64 or i64 and must not overlap; f32 sums
/// accumulate in double on the CPU.
struct CumsumArgs {
  DType dt = DType::f32;                   ///< f32, f64 or i64
  int64_t outer = 1, n = 0, inner = 1;     ///< the [outer, n, inner] layout; the scan runs along n
  bool reverse = false;                    ///< sum from the end (the gradient of a forward scan)
  const void* src = nullptr;               ///< [outer, n, inner] input
  void* dst = nullptr;                     ///< [outer, n, inner] output
};

// ---- optional kernels: what a backend may lack, asked in one place ----

struct RsaFusedProblem;  // kernels.h
// The kernels a backend may have or not; ops/ runs a composed form of the same
// mathematics where supports() says no.
enum class OpKind : uint8_t {
  fused_dropout,  // Backend::dropout_forward / dropout_backward (mask kept as bits)
  fused_rsa,      // RsaKernels (kernels.h): FlashAttention-style RSA attention
  fused_adam,     // OptimKernels (kernels.h): the one-pass Adam / AdamW step
};
// The problem an optional kernel is asked about.
struct OpProblem {
  DType dt = DType::f32;
  const RsaFusedProblem* rsa = nullptr;  // fused_rsa: the attention problem (required)
};

class Backend : public DeviceAllocator {
 public:
  ~Backend() override = default;
  virtual const char* name() const = 0;
  virtual Device device() const = 0;

  // Memory: alloc, free, copy_from_host, copy_to_host, memory_stats and
  // empty_cache come from DeviceAllocator (core/device_registry.h).

  // Whether this backend runs an optional kernel (OpKind) for a problem: the
  // one answer per device (the default: none). Where it says yes, the
  // kernels are there (the Backend method, or the table registered for this
  // device type) and take the problem.
  virtual bool supports(OpKind op, const OpProblem& p) const { return false; }

  // ---- fills and random numbers (n elements, contiguous) ----
  virtual void fill(DType dt, void* out, int64_t n, double value) = 0;
  virtual void arange(DType dt, void* out, int64_t n, double start, double step) = 0;
  virtual void uniform(const UniformArgs& a) = 0;
  virtual void normal(const NormalArgs& a) = 0;
  virtual void bernoulli_mask(const BernoulliMaskArgs& a) = 0;
  // Optional (OpKind::fused_dropout): ops/ calls them only where supports()
  // says so, and keeps a full mask tensor (bernoulli_mask and a multiply)
  // elsewhere. The defaults fail.
  virtual void dropout_forward(const DropoutArgs& a);
  virtual void dropout_backward(const DropoutBackwardArgs& a);

  // ---- strided elementwise ----
  virtual void copy(const CopyArgs& a) = 0;
  virtual void binary(const BinaryArgs& a) = 0;
  virtual void where(const WhereArgs& a) = 0;

  // ---- contiguous elementwise ----
  virtual void unary(const UnaryArgs& a) = 0;
  virtual void unary_grad(const UnaryGradArgs& a) = 0;

  // ---- reductions, linear algebra ----
  virtual void reduce(const ReduceArgs& a) = 0;
  virtual void gemm(const GemmArgs& a) = 0;

  // ---- fused neural-network kernels ----
  virtual void softmax(const SoftmaxArgs& a) = 0;
  virtual void softmax_backward(const SoftmaxBackwardArgs& a) = 0;
  virtual void layer_norm(const LayerNormArgs& a) = 0;
  virtual void layer_norm_backward(const LayerNormBackwardArgs& a) = 0;
  virtual void cross_entropy(const CrossEntropyArgs& a) = 0;
  virtual void cross_entropy_backward(const CrossEntropyBackwardArgs& a) = 0;

  // ---- gather / scatter ----
  virtual void index_select(const IndexArgs& a) = 0;
  virtual void index_add(const IndexArgs& a) = 0;
  virtual void cumsum(const CumsumArgs& a) = 0;

  // ---- device selection ----
  // Makes this backend's device current for the calls that follow (the kernel
  // tables of kernels.h run on the current device). A no-op on the CPU.
  virtual void activate() {}
  // The queue this backend runs its kernels and copies on, for code outside
  // the backend that must queue work in the same order (NCCL collectives in
  // dist/nccl.cpp): a cudaStream_t on CUDA, null on the CPU.
  virtual void* native_stream() { return nullptr; }
};

// The backend of a device (the registry's object for its type, loading the
// device's plugin on first use where it is one); a clear Error when that
// device is not available.
Backend& backend(Device dev);
// backend(dev).supports(op, p): whether dev runs that optional kernel for p.
bool supports(Device dev, OpKind op, const OpProblem& p);
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
// The folder ("/.../", or "" if unknown) of the shared library that holds
// `symbol`: plugins (libremora_cuda.so, libremora_nccl.so) are looked up there.
std::string library_dir(const void* symbol);

}  // namespace remora
