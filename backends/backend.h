// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// The backend interface: memory and the general kernels over raw device pointers.
/// Model-specific kernels (REM, SRU, fused RSA) are not here: they live in
/// per-feature kernel tables registered per device type (kernels.h).
///
/// ops/ resolves views, broadcasting and dtype checks, then calls one of these.
/// Kernels see contiguous buffers, except the strided elementwise family (copy,
/// binary, where), which takes an ElemIter: an output shape plus per-operand
/// strides in elements (0 = broadcast). Every kernel with more than a few
/// operands takes one named-argument struct (XxxArgs below, as the kernel
/// tables of kernels.h do): optional pointers are null and say so. A new device
/// implements this class and registers its factory (core/device_registry.h);
/// ops/ does not change.
///
/// Conventions of the argument structs: every pointer is device memory of the
/// backend's device, already offset to the operand's first element, owned by
/// the caller (a tensor it keeps alive for the call; a kernel keeps no pointer
/// after it returns). Sizes and strides count elements, not bytes. dt is the
/// dtype of every data pointer unless a field says otherwise; a dtype a kernel
/// does not take is an Error. Outputs are written whole
/// (not accumulated) unless a field says +=. Kernels may run asynchronously in
/// the device's queue (native_stream()); host reads go through
/// DeviceAllocator::copy_to_host, which orders after them.
#pragma once
#include <cstdint>
#include <string>

#include "../core/device_registry.h"
#include "../core/dtype.h"

namespace remora {

/// The most dims an ElemIter describes (after merging; ops/ merges contiguous
/// dims and drops size-1 ones first).
constexpr int kMaxDims = 8;

/// Shape of an elementwise iteration with up to 4 operands (operand 0 is the output).
struct ElemIter {
  int ndim = 0;  ///< Dims in use (0: a single element); a zero-size iteration has ndim 1, shape[0] 0.
  int64_t shape[kMaxDims] = {};  ///< The iteration (output) shape, dims [0, ndim).
  int64_t strides[4][kMaxDims] = {};  ///< strides[k][d]: operand k's stride along dim d, elements; 0 = broadcast.
  /// The number of elements, product of shape[0 .. ndim).
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < ndim; ++i) n *= shape[i];
    return n;
  }
};

/// The function of Backend::unary (UnaryArgs): out = f(x). relu, abs, sin,
/// cos are the usual functions; then one entry per REMORA_UNARY row of the op
/// table (ops/ops.def: exp, log, sqrt, tanh, sigmoid, the exact (erf) gelu, ...),
/// each the function of the same name.
enum class UnaryOp : uint8_t {
  affine,   ///< alpha * x + beta
  pow,      ///< x ^ alpha
  relu, abs, sin, cos,
/// \cond
#define REMORA_FUNCTION(...)
#define REMORA_METHOD(...)
#define REMORA_DECLARED_IN(...)
#define REMORA_UNARY(name, lo, hi) name,
#include "../ops/ops.def"
#undef REMORA_FUNCTION
#undef REMORA_METHOD
#undef REMORA_DECLARED_IN
#undef REMORA_UNARY
/// \endcond
  /// The nearest bfloat16 value (8-bit significand, f32's exponent range), ties
  /// to even; NaN stays NaN (quiet), +-inf stay, values past bf16's largest
  /// finite (3.3895e38) by half an ulp or more become +-inf; subnormals round on
  /// bf16's subnormal grid (2^-133). The result is stored in the input dtype:
  /// bf16 autocast (core/autocast.h) rounds f32 gemm operands with it.
  round_bf16,
};
/// Backward helpers: out = grad * f'(...), fused so backward makes one pass.
enum class UnaryGradOp : uint8_t {
  tanh,     ///< g * (1 - y^2)         (uses the output y)
  sigmoid,  ///< g * y * (1 - y)       (uses the output y)
  relu,     ///< g * (x > 0)           (uses the input x)
  gelu,     ///< g * gelu'(x)          (uses the input x)
  pow,      ///< g * alpha * x^(alpha-1) (uses the input x)
};
/// The operation of Backend::binary (BinaryArgs): arithmetic, maximum /
/// minimum, and the comparisons ==, !=, <, <=, >, >= (1 / 0 in the operands' dtype).
enum class BinaryOp : uint8_t { add, sub, mul, div, maximum, minimum, eq, ne, lt, le, gt, ge };
/// The reduction of Backend::reduce (ReduceArgs): sum, or max / min (the first
/// extreme wins ties; a NaN wins over every number).
enum class ReduceOp : uint8_t { sum, max, min };

// ---- the kernels' arguments ----

/// n random numbers (fills start at element 0 of out, contiguous). Counter-based
/// (Philox 4x32-10): element i uses counter offset + i, so the result does not
/// depend on thread count or device. dt floating (f32, f64; bf16, f16 on the CPU).
struct UniformArgs {
  DType dt = DType::f32;  ///< Dtype of out.
  void* out = nullptr;    ///< n contiguous elements, written.
  int64_t n = 0;          ///< Number of draws.
  double lo = 0, hi = 1;  ///< Upper bound, exclusive: out[i] in [lo, hi).
  /// \var lo
  /// Lower bound, inclusive.
  uint64_t seed = 0, offset = 0;  ///< First Philox counter; the caller reserves n counters from its Generator.
  /// \var seed
  /// Philox key (the Generator's seed).
};
/// n normal draws mean + std * N(0, 1); counters, layout and dtypes as UniformArgs.
struct NormalArgs {
  DType dt = DType::f32;  ///< Dtype of out.
  void* out = nullptr;    ///< n contiguous elements, written.
  int64_t n = 0;          ///< Number of draws.
  double mean = 0, std = 1;  ///< Standard deviation.
  /// \var mean
  /// Mean.
  uint64_t seed = 0, offset = 0;  ///< First Philox counter.
  /// \var seed
  /// Philox key (the Generator's seed).
};
/// out[i] = kept_i ? scale : 0, kept_i = philox::kept(seed, offset, i,
/// keep_threshold(keep)) (core/philox.h: one Philox call per 4 elements).
struct BernoulliMaskArgs {
  DType dt = DType::f32;  ///< Dtype of out (floating).
  void* out = nullptr;    ///< n contiguous elements, written.
  int64_t n = 0;          ///< Number of elements.
  double keep = 1;   ///< Probability of keeping an element.
  double scale = 1;  ///< The value of a kept element (1 / keep for inverted dropout).
  uint64_t seed = 0, offset = 0;  ///< First Philox counter (as dropout() reserves n counters).
  /// \var seed
  /// Philox key (the Generator's seed).
};
/// Dropout in one pass, keeping the mask as bits: mask.out = x * m with m the
/// mask bernoulli_mask(mask) would write, and bit i % 64 of bits[i / 64] set
/// where element i is kept ((mask.n + 63) / 64 words). x and mask.out are
/// mask.n contiguous elements (may alias). With relu, mask.out = relu(x) * m
/// and a bit is set where element i is kept and x > 0: the bits are then the
/// whole gradient of dropout(relu(x)) (dropout_backward).
struct DropoutArgs {
  BernoulliMaskArgs mask;  ///< The mask's parameters; its out is the output, its dt the dtype of x.
  const void* x = nullptr;  ///< The input, mask.n elements.
  uint64_t* bits = nullptr;  ///< (mask.n + 63) / 64 words, written: the kept elements' bits.
  bool relu = false;         ///< relu(x) in place of x (see above).
};
/// dx = dy * (bit ? scale : 0) with the bits dropout_forward wrote; dy and dx
/// are n contiguous elements (may alias).
struct DropoutBackwardArgs {
  DType dt = DType::f32;    ///< Dtype of dy and dx.
  const void* dy = nullptr;  ///< Incoming gradient, n elements.
  void* dx = nullptr;        ///< Output gradient, n elements, written.
  const uint64_t* bits = nullptr;  ///< The mask bits of DropoutArgs::bits.
  int64_t n = 0;             ///< Number of elements.
  double scale = 1;          ///< The kept elements' factor (dropout's scale).
};

/// out (operand 0, dtype dt_out) = in (operand 1, dtype dt_in), with conversion.
/// Every dtype on both sides (16-bit through the exact f32 value; to bool: != 0).
struct CopyArgs {
  ElemIter it;                ///< Operands 0 (out) and 1 (in).
  DType dt_out = DType::f32;  ///< Dtype of out.
  void* out = nullptr;        ///< Destination, written through operand 0's strides.
  DType dt_in = DType::f32;   ///< Dtype of in.
  const void* in = nullptr;   ///< Source, read through operand 1's strides.
};
/// out = a op b (operands 0, 1, 2 of it); comparisons write 1/0 in dt.
struct BinaryArgs {
  BinaryOp op = BinaryOp::add;  ///< The operation.
  DType dt = DType::f32;        ///< Dtype of out, a and b.
  ElemIter it;                  ///< Operands 0 (out), 1 (a), 2 (b).
  void* out = nullptr;          ///< Result (may alias a for an in-place add).
  const void* a = nullptr;      ///< Left operand.
  const void* b = nullptr;      ///< Right operand.
};
/// out = cond != 0 ? a : b (operands 0 .. 3 of it; cond has its own dtype).
struct WhereArgs {
  DType dt = DType::f32;       ///< Dtype of out, a and b.
  ElemIter it;                 ///< Operands 0 (out), 1 (cond), 2 (a), 3 (b).
  void* out = nullptr;         ///< Result.
  DType dt_cond = DType::f32;  ///< Dtype of cond (any).
  const void* cond = nullptr;  ///< Condition; non-zero picks a.
  const void* a = nullptr;     ///< Value where cond != 0.
  const void* b = nullptr;     ///< Value where cond == 0.
};
/// out = op(x) over n contiguous elements (x and out may alias); alpha and beta
/// as UnaryOp lists (affine, pow). dt floating; i64 for affine and abs.
struct UnaryArgs {
  UnaryOp op = UnaryOp::affine;  ///< The function.
  DType dt = DType::f32;         ///< Dtype of x and out.
  int64_t n = 0;                 ///< Number of elements.
  const void* x = nullptr;       ///< Input, n elements.
  void* out = nullptr;           ///< Output, n elements, written.
  double alpha = 1, beta = 0;    ///< affine's offset.
  /// \var alpha
  /// affine's factor, pow's exponent.
};
/// out = grad * f'(v) over n contiguous elements, v being x or y as listed in
/// UnaryGradOp; alpha for pow. dt floating.
struct UnaryGradArgs {
  UnaryGradOp op = UnaryGradOp::tanh;  ///< Which derivative.
  DType dt = DType::f32;       ///< Dtype of grad, v and out.
  int64_t n = 0;               ///< Number of elements.
  const void* grad = nullptr;  ///< Incoming gradient, n elements.
  const void* v = nullptr;     ///< The saved input x or output y (see UnaryGradOp), n elements.
  void* out = nullptr;         ///< Output gradient, n elements, written.
  double alpha = 1;            ///< pow's exponent.
};

/// A reduction over the middle axis of a contiguous [outer, r, inner] into
/// out [outer, inner]. r >= 1 (ops/ fills empty sums itself).
struct ReduceArgs {
  ReduceOp op = ReduceOp::sum;  ///< The reduction.
  DType dt = DType::f32;        ///< Dtype of in and out (sums of 16-bit values accumulate wider).
  int64_t outer = 1, r = 1, inner = 1;  ///< Size of the trailing (kept) axis.
  /// \var outer
  /// Size of the leading (kept) axis.
  /// \var r
  /// Size of the reduced axis.
  const void* in = nullptr;   ///< [outer, r, inner] contiguous.
  void* out = nullptr;        ///< [outer, inner], written.
  int64_t* argidx = nullptr;  ///< Optional (i64 [outer, inner]): the position in r for max/min.
};

/// Row-major, cuBLAS-style strided batch:
/// C[b] = alpha * op(A[b]) op(B[b]) + beta * C[b], op = transpose when ta/tb;
/// A[b] starts at a + b * stride_a (elements), likewise B and C. op(A) is
/// [m, k], op(B) [k, n], C [m, n]; lda, ldb, ldc are the row strides.
/// dt: f32, f64, bf16, f16.
struct GemmArgs {
  DType dt = DType::f32;       ///< Dtype of A and B (and of C unless c_f32).
  bool ta = false, tb = false;  ///< op(B) = B^T: b holds [n, k] rows.
  /// \var ta
  /// op(A) = A^T: a holds [k, m] rows.
  int64_t m = 0, n = 0, k = 0;  ///< The inner (summed) dimension.
  /// \var m
  /// Rows of op(A) and C.
  /// \var n
  /// Columns of op(B) and C.
  double alpha = 1;            ///< Factor of the product.
  const void* a = nullptr;     ///< A of batch 0.
  int64_t lda = 0, stride_a = 0;  ///< Elements between A[b] and A[b + 1] (0: one A for every batch).
  /// \var lda
  /// Row stride of A as stored (elements).
  const void* b = nullptr;     ///< B of batch 0.
  int64_t ldb = 0, stride_b = 0;  ///< Elements between B[b] and B[b + 1] (0: shared).
  /// \var ldb
  /// Row stride of B as stored (elements).
  double beta = 0;             ///< Factor of C's old value (0: C is not read).
  void* c = nullptr;           ///< C of batch 0, updated.
  int64_t ldc = 0, stride_c = 0;  ///< Elements between C[b] and C[b + 1].
  /// \var ldc
  /// Row stride of C (elements).
  int64_t batch = 1;           ///< Number of products.
  /// With 16-bit operands (dt bf16 or f16, accumulated in f32): C is f32 when
  /// set (autocast's products), else of dt (rounded once from the f32 sums).
  bool c_f32 = false;
};

/// \name Fused neural-network kernels over rows of a contiguous [rows, cols]
/// dt f32 or f64 (the CPU also bf16 and f16, computed in f32 and rounded once).
/// @{

/// y = softmax(x) per row, or log_softmax when log.
struct SoftmaxArgs {
  DType dt = DType::f32;       ///< Dtype of x and y.
  int64_t rows = 0, cols = 0;  ///< Row length (the softmax dim).
  /// \var rows
  /// Number of rows.
  const void* x = nullptr;     ///< Input [rows, cols].
  void* y = nullptr;           ///< Output [rows, cols], written.
  bool log = false;            ///< log_softmax instead of softmax.
};
/// dx = y * (dy - sum(dy * y))            (softmax)
/// dx = dy - exp(y) * sum(dy)             (log_softmax, y = log-probabilities)
struct SoftmaxBackwardArgs {
  DType dt = DType::f32;       ///< Dtype of every operand.
  int64_t rows = 0, cols = 0;  ///< Row length.
  /// \var rows
  /// Number of rows.
  const void* dy = nullptr;    ///< Incoming gradient [rows, cols].
  const void* y = nullptr;     ///< The forward's output [rows, cols].
  void* dx = nullptr;          ///< Output gradient [rows, cols], written.
  bool log = false;            ///< y is log_softmax's output.
};
/// y = (x - mean) * rstd * w + b per row, rstd = 1 / sqrt(var + eps) with the
/// biased variance (divided by cols). mean, rstd: [rows].
struct LayerNormArgs {
  DType dt = DType::f32;       ///< Dtype of every operand, mean and rstd included.
  int64_t rows = 0, cols = 0;  ///< Row length (the normalised dim).
  /// \var rows
  /// Number of rows.
  const void* x = nullptr;     ///< Input [rows, cols].
  const void* w = nullptr;  ///< Optional [cols].
  const void* b = nullptr;  ///< Optional [cols] (needs w).
  double eps = 1e-5;        ///< Added to the variance.
  void* y = nullptr;        ///< Output [rows, cols], written.
  void* mean = nullptr;     ///< [rows], written: each row's mean, for backward.
  void* rstd = nullptr;     ///< [rows], written: each row's 1 / sqrt(var + eps), for backward.
};
/// The gradients of layer_norm from its saved mean and rstd.
struct LayerNormBackwardArgs {
  DType dt = DType::f32;       ///< Dtype of every operand.
  int64_t rows = 0, cols = 0;  ///< Row length.
  /// \var rows
  /// Number of rows.
  const void* dy = nullptr;    ///< Incoming gradient [rows, cols].
  const void* x = nullptr;     ///< The forward's input [rows, cols].
  const void* mean = nullptr;  ///< The forward's mean [rows].
  const void* rstd = nullptr;  ///< The forward's rstd [rows].
  const void* w = nullptr;  ///< Optional [cols], the forward's weight.
  void* dx = nullptr;       ///< Gradient of x [rows, cols], written.
  /// Gradient of w [cols], written (summed over rows). dw and db are optional
  /// both (then w must be null too, or no affine gradient is wanted): set
  /// both or neither (ops/ passes a scratch db when the forward had no bias).
  void* dw = nullptr;
  void* db = nullptr;  ///< Gradient of b [cols], written (summed over rows); see dw.
};
/// Per row n: loss[n] = logsumexp(x[n]) - x[n, t[n]], 0 where t[n] == ignore,
/// computed as (max - x[n, t[n]]) + log(sum exp(x[n] - max)); the two parts of
/// logsumexp are saved apart for backward (their sum rounded to the dtype
/// would lose the log-sum next to a large max). A target outside [0, cols) other than
/// ignore_index is the caller's check on the CPU; a device kernel reports it
/// as an Error at the next sync.
struct CrossEntropyArgs {
  DType dt = DType::f32;       ///< Dtype of logits, loss and lse.
  int64_t rows = 0, cols = 0;  ///< Classes per row.
  /// \var rows
  /// Number of rows.
  const void* logits = nullptr;  ///< [rows, cols].
  const int64_t* target = nullptr;  ///< [rows], host or device as the logits
  int64_t ignore_index = -100;   ///< A target that contributes nothing.
  void* loss = nullptr;          ///< [rows], written.
  void* lse = nullptr;  ///< [rows, 2], written: each row's max and log(sum exp(x - max)), for backward.
};
/// dx[n, c] = g[n] * (softmax(x[n])_c - [c == t[n]]), 0 rows where t[n] == ignore.
struct CrossEntropyBackwardArgs {
  DType dt = DType::f32;       ///< Dtype of logits, lse, g and dx.
  int64_t rows = 0, cols = 0;  ///< Classes per row.
  /// \var rows
  /// Number of rows.
  const void* logits = nullptr;     ///< The forward's logits [rows, cols].
  const int64_t* target = nullptr;  ///< [rows], as CrossEntropyArgs::target.
  int64_t ignore_index = -100;      ///< As in the forward.
  const void* lse = nullptr;        ///< The forward's lse [rows, 2].
  const void* g = nullptr;  ///< [rows], each row's loss gradient (the reduction's factor included).
  void* dx = nullptr;       ///< [rows, cols], written.
};
/// @}

/// \name Gather / scatter along the middle axis of [outer, r, inner]
/// @{

/// index_select: dst[o, i, :] = src[o, idx[i], :], src [outer, r, inner],
///   dst [outer, n_idx, inner].
/// index_add: dst[o, idx[i], :] += src[o, i, :], dst [outer, r, inner],
///   src [outer, n_idx, inner] (duplicates in idx accumulate).
/// A device kernel that finds an index outside [0, r) reports an Error at the
/// next sync and skips it (the CPU's callers check indices first).
struct IndexArgs {
  DType dt = DType::f32;  ///< Dtype of src and dst.
  int64_t outer = 1, r = 0, inner = 1;  ///< Elements per indexed row (the trailing axis).
  /// \var outer
  /// Size of the leading axis.
  /// \var r
  /// Size of the indexed axis of the [outer, r, inner] side.
  const int64_t* idx = nullptr;  ///< n_idx positions in [0, r)
  int64_t n_idx = 0;             ///< Number of positions.
  const void* src = nullptr;     ///< Source (see above for its shape).
  void* dst = nullptr;           ///< Destination: written (index_select) or added to (index_add).
};
/// @}

/// \name Scans along the middle axis of [outer, n, inner]
/// @{

/// Inclusive prefix sums along the middle axis: dst[o, i, j] = sum of src[o, k, j]
/// over k <= i (over k >= i when reverse). src and dst are contiguous
/// [outer, n, inner] of dtype f32, f64 or i64 and must not overlap; f32 sums
/// accumulate in double on the CPU.
struct CumsumArgs {
  DType dt = DType::f32;                   ///< f32, f64 or i64
  int64_t outer = 1;                       ///< product of the sizes before the scanned dim
  int64_t n = 0;                           ///< size of the scanned dim
  int64_t inner = 1;                       ///< product of the sizes after it
  bool reverse = false;                    ///< sum from the end (the gradient of a forward scan)
  const void* src = nullptr;               ///< [outer, n, inner] input
  void* dst = nullptr;                     ///< [outer, n, inner] output
};
/// @}

/// \name Optional kernels: what a backend may lack, asked in one place
/// @{

struct RsaFusedProblem;  // kernels.h
/// The kernels a backend may have or not; ops/ runs a composed form of the same
/// mathematics where supports() says no.
enum class OpKind : uint8_t {
  fused_dropout,  ///< Backend::dropout_forward / dropout_backward (mask kept as bits)
  fused_rsa,      ///< RsaKernels (kernels.h): FlashAttention-style RSA attention
  fused_adam,     ///< OptimKernels (kernels.h): the one-pass Adam / AdamW step
};
/// The problem an optional kernel is asked about.
struct OpProblem {
  DType dt = DType::f32;  ///< The operands' dtype.
  const RsaFusedProblem* rsa = nullptr;  ///< fused_rsa: the attention problem (required)
};
/// @}

/// A device's kernels and memory. ops/ gets it with backend(dev) and calls
/// these methods with raw pointers (see the file's conventions). The methods
/// without a default are required; the optional kernels are asked for with
/// supports() first.
class Backend : public DeviceAllocator {
 public:
  ~Backend() override = default;
  /// A short name for messages, e.g. "cpu", "cuda:0".
  virtual const char* name() const = 0;
  /// The device this backend object serves (one object per device index).
  virtual Device device() const = 0;

  // Memory: alloc, free, copy_from_host, copy_to_host, memory_stats and
  // empty_cache come from DeviceAllocator (core/device_registry.h).

  /// Whether this backend runs an optional kernel (OpKind) for a problem: the
  /// one answer per device (the default: none). Where it says yes, the
  /// kernels are there (the Backend method, or the table registered for this
  /// device type) and take the problem.
  virtual bool supports(OpKind op, const OpProblem& p) const { return false; }

  /// \name Fills and random numbers (n elements, contiguous)
  /// @{

  /// out[i] = value (converted to dt) for i < n.
  virtual void fill(DType dt, void* out, int64_t n, double value) = 0;
  /// out[i] = start + i * step (computed in double, converted to dt) for i < n.
  virtual void arange(DType dt, void* out, int64_t n, double start, double step) = 0;
  /// Uniform draws (UniformArgs).
  virtual void uniform(const UniformArgs& a) = 0;
  /// Normal draws (NormalArgs).
  virtual void normal(const NormalArgs& a) = 0;
  /// A dropout mask of 0 and scale (BernoulliMaskArgs).
  virtual void bernoulli_mask(const BernoulliMaskArgs& a) = 0;
  /// Optional (OpKind::fused_dropout): ops/ calls them only where supports()
  /// says so, and keeps a full mask tensor (bernoulli_mask and a multiply)
  /// elsewhere. The defaults fail.
  virtual void dropout_forward(const DropoutArgs& a);
  /// The gradient of dropout_forward from its bits (DropoutBackwardArgs); optional as dropout_forward.
  virtual void dropout_backward(const DropoutBackwardArgs& a);
  /// @}

  /// \name Strided elementwise
  /// @{

  /// out = in with dtype conversion (CopyArgs).
  virtual void copy(const CopyArgs& a) = 0;
  /// out = a op b (BinaryArgs).
  virtual void binary(const BinaryArgs& a) = 0;
  /// out = cond ? a : b (WhereArgs).
  virtual void where(const WhereArgs& a) = 0;
  /// @}

  /// \name Contiguous elementwise
  /// @{

  /// out = f(x) (UnaryArgs).
  virtual void unary(const UnaryArgs& a) = 0;
  /// out = grad * f'(v) (UnaryGradArgs).
  virtual void unary_grad(const UnaryGradArgs& a) = 0;
  /// @}

  /// \name Reductions, linear algebra
  /// @{

  /// Sum, max or min over the middle axis (ReduceArgs).
  virtual void reduce(const ReduceArgs& a) = 0;
  /// Strided-batched matrix product (GemmArgs).
  virtual void gemm(const GemmArgs& a) = 0;
  /// @}

  /// \name Fused neural-network kernels
  /// @{

  /// Row softmax / log_softmax (SoftmaxArgs).
  virtual void softmax(const SoftmaxArgs& a) = 0;
  /// Its gradient (SoftmaxBackwardArgs).
  virtual void softmax_backward(const SoftmaxBackwardArgs& a) = 0;
  /// Row layer norm (LayerNormArgs).
  virtual void layer_norm(const LayerNormArgs& a) = 0;
  /// Its gradients (LayerNormBackwardArgs).
  virtual void layer_norm_backward(const LayerNormBackwardArgs& a) = 0;
  /// Row cross-entropy (CrossEntropyArgs).
  virtual void cross_entropy(const CrossEntropyArgs& a) = 0;
  /// Its gradient (CrossEntropyBackwardArgs).
  virtual void cross_entropy_backward(const CrossEntropyBackwardArgs& a) = 0;
  /// @}

  /// \name Gather / scatter
  /// @{

  /// dst[o, i, :] = src[o, idx[i], :] (IndexArgs).
  virtual void index_select(const IndexArgs& a) = 0;
  /// dst[o, idx[i], :] += src[o, i, :] (IndexArgs).
  virtual void index_add(const IndexArgs& a) = 0;
  /// Inclusive prefix sums along the middle axis (CumsumArgs).
  virtual void cumsum(const CumsumArgs& a) = 0;
  /// @}

  /// \name Device selection
  /// @{

  /// Makes this backend's device current for the calls that follow (the kernel
  /// tables of kernels.h run on the current device). A no-op on the CPU.
  virtual void activate() {}
  /// The queue this backend runs its kernels and copies on, for code outside
  /// the backend that must queue work in the same order (NCCL collectives in
  /// distributed/nccl.cpp): a cudaStream_t on CUDA, null on the CPU.
  virtual void* native_stream() { return nullptr; }
  /// @}
};

/// The backend of a device (the registry's object for its type, loading the
/// device's plugin on first use where it is one); a clear Error when that
/// device is not available.
Backend& backend(Device dev);
/// backend(dev).supports(op, p): whether dev runs that optional kernel for p.
bool supports(Device dev, OpKind op, const OpProblem& p);
/// Whether device cuda:index can be used; when not, *why (if given) says why
/// (no CUDA backend in this build, no GPU or driver, index out of range).
bool cuda_is_available(int index = 0, std::string* why = nullptr);
/// \name TF32 on CUDA
/// TF32 tensor-core math for f32 matmuls on CUDA (about 10 bits of mantissa in
/// the products). Off by default; REMORA_CUDA_TF32 set to anything but empty
/// or 0 in the environment turns it on at startup. f64 is never affected.
/// Process-wide.
/// @{

/// Turns TF32 on or off for the products that follow.
void set_cuda_tf32(bool on);
/// Whether TF32 is on.
bool cuda_tf32();
/// @}
/// Set on the calling thread by ops/ while it issues a gemm whose f32 operands
/// are bf16 values (bf16 autocast, ops/linalg.cpp): a backend may then use
/// TF32 tensor cores for it (CUDA does), since TF32's 10-bit significand holds
/// bf16's 8 bits exactly, so the products are exactly bf16 x bf16 with f32
/// accumulation, as a bf16 gemm's. Guards nest; thread-local.
class GemmBf16OperandsScope {
 public:
  /// Sets the flag on this thread, remembering its previous value.
  GemmBf16OperandsScope();
  /// Restores the previous value.
  ~GemmBf16OperandsScope();
  GemmBf16OperandsScope(const GemmBf16OperandsScope&) = delete;
  GemmBf16OperandsScope& operator=(const GemmBf16OperandsScope&) = delete;

 private:
  bool prev_;
};
/// Whether a GemmBf16OperandsScope is open on the calling thread.
bool gemm_bf16_operands();
/// The folder ("/.../", or "" if unknown) of the shared library that holds
/// `symbol`: plugins (libremora_cuda.so, libremora_nccl.so) are looked up there.
std::string library_dir(const void* symbol);

}  // namespace remora
