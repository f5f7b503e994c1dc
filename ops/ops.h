// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// Differentiable ops. Each checks its arguments (a remora::Error names the op,
/// the shapes or dtypes, and the fix), runs a backend kernel, and records a
/// backward written with other ops, so it runs on every backend.
///
/// Letters in shape comments: B batch, T/L time, C classes or channels, D width,
/// N rows, ... = any leading dims.
///
/// What holds for every op here unless its own comment says otherwise:
/// - Devices: the CPU and CUDA. All tensor arguments of one call must be on one
///   device (an Error names each operand's device otherwise); nothing is moved.
/// - Dtypes: f32 and f64. bf16 and f16 tensors are taken where
///   docs/precision.md lists them: on the CPU by every op of this file except
///   rel_shift (an Error) and adam_step_ (returns false); on CUDA by the
///   copies and views, the binary ops (arithmetic and comparisons), where, the
///   sum / max / min reductions and matmul / linear, while the other CUDA
///   kernels (unary functions, softmax, layer_norm, cross_entropy, random
///   draws) refuse them with an Error, and so do the ops composed from them
///   (mean, norm, var, ...); the indexing kernels are described with the
///   Indexing group. There is no type promotion: operands of one op share
///   one dtype unless the op says otherwise.
/// - Gradients: "gradient to x" means that when grad mode is on
///   (core/autograd.h) and x requires grad, the result records a backward node
///   and backward() accumulates into x's grad. "No gradient" means the result
///   never has history.
/// - An undefined tensor where a tensor is required is an Error.
#pragma once
#include <vector>

#include "../core/adam_step.h"
#include "../core/tensor.h"
#include "factories.h"

namespace remora {

/// \name Elementwise arithmetic
/// a and b broadcast as in NumPy (sizes match or one is 1, counted from the
/// last dim); the result has the broadcast shape and the operands' dtype. a and
/// b must have one dtype and one device. Dtypes: any on the CPU (f32, f64,
/// bf16, f16, i64, i32, u8, bool); f32, f64, i64, bf16, f16 on CUDA. Gradient
/// to a and b, each summed back to its own shape (floating operands).
/// @{

/// a + b.
Tensor add(const Tensor& a, const Tensor& b);
/// a - b.
Tensor sub(const Tensor& a, const Tensor& b);
/// a * b.
Tensor mul(const Tensor& a, const Tensor& b);
/// a / b (integer dtypes divide as C++ does, truncating).
Tensor div(const Tensor& a, const Tensor& b);
/// The larger of a and b; the gradient goes to the larger (split 1/2 : 1/2 on ties).
Tensor maximum(const Tensor& a, const Tensor& b);
/// The smaller of a and b; the gradient goes to the smaller (split on ties).
Tensor minimum(const Tensor& a, const Tensor& b);
/// @}

/// \name Elementwise functions
/// One input x, the result of x's shape and dtype. x must be floating (f32,
/// f64; bf16 and f16 on the CPU), else an Error; affine (and neg) also take
/// i64, computed in double and truncated toward zero. Gradient to x, except
/// sin and cos.
/// @{

/// alpha * x + beta (scalars; for 16-bit x they stay f32). neg(x) is affine(x, -1, 0).
Tensor affine(const Tensor& x, double alpha, double beta);
/// -x.
Tensor neg(const Tensor& x);
/// x^p for a scalar exponent p. The gradient is p x^(p-1), and 0 everywhere for p = 0.
Tensor pow(const Tensor& x, double p);
/// e^x.
Tensor exp(const Tensor& x);
/// Natural logarithm (NaN below 0, -inf at 0).
Tensor log(const Tensor& x);
/// Square root (NaN below 0).
Tensor sqrt(const Tensor& x);
/// Hyperbolic tangent.
Tensor tanh(const Tensor& x);
/// 1 / (1 + e^-x).
Tensor sigmoid(const Tensor& x);
/// max(x, 0); gradient 1 where x > 0, else 0.
Tensor relu(const Tensor& x);
/// Exact GELU: 0.5 x (1 + erf(x / sqrt 2)) (not the tanh approximation).
Tensor gelu(const Tensor& x);
/// |x|; gradient sign(x) (0 at x = 0).
Tensor abs(const Tensor& x);
/// The nearest bfloat16 value of each element (ties to even, NaN kept, overflow
/// to +-inf), stored in x's dtype (f32 or f64; f64 rounds once, straight to bf16).
/// Gradient: straight-through (the identity), like a cast to bf16 and back.
/// What bf16 autocast (core/autocast.h) does to gemm operands; docs/precision.md.
Tensor round_bf16(const Tensor& x);
/// sin(x). No gradient (used for positional encodings): an x that requires
/// grad while grad mode is on is an Error; pass x.detach().
Tensor sin(const Tensor& x);
/// cos(x). No gradient, as sin.
Tensor cos(const Tensor& x);
/// @}

/// \name Comparisons as numbers
/// 1 where the relation holds, else 0, in the inputs' dtype, with
/// broadcasting. a and b must have one dtype and device (dtypes as add). No
/// gradient. For a bool result, or operands of two dtypes, use the _mask forms.
/// @{

/// a == b as 1 / 0.
Tensor eq(const Tensor& a, const Tensor& b);
/// a != b as 1 / 0.
Tensor ne(const Tensor& a, const Tensor& b);
/// a < b as 1 / 0.
Tensor lt(const Tensor& a, const Tensor& b);
/// a <= b as 1 / 0.
Tensor le(const Tensor& a, const Tensor& b);
/// a > b as 1 / 0.
Tensor gt(const Tensor& a, const Tensor& b);
/// a >= b as 1 / 0.
Tensor ge(const Tensor& a, const Tensor& b);
/// @}

/// \name Comparisons as bool masks
/// A bool (DType::b8) result of the broadcast shape, as libtorch's (these are
/// the operators ==, <, ... of core/tensor.h). Any dtypes: operands of one
/// dtype among f32, f64, i64 compare in it; otherwise both are converted to
/// f64 (when either is floating) or to i64. One device. No gradient.
/// @{

/// a == b.
Tensor eq_mask(const Tensor& a, const Tensor& b);
/// a != b.
Tensor ne_mask(const Tensor& a, const Tensor& b);
/// a < b.
Tensor lt_mask(const Tensor& a, const Tensor& b);
/// a <= b.
Tensor le_mask(const Tensor& a, const Tensor& b);
/// a > b.
Tensor gt_mask(const Tensor& a, const Tensor& b);
/// a >= b.
Tensor ge_mask(const Tensor& a, const Tensor& b);
/// @}

/// \name Logical ops
/// Non-zero is true; any dtypes (the two operands may differ), one device,
/// broadcasting, a bool result. No gradient.
/// @{

/// a and b.
Tensor logical_and(const Tensor& a, const Tensor& b);
/// a or b.
Tensor logical_or(const Tensor& a, const Tensor& b);
/// Exactly one of a, b.
Tensor logical_xor(const Tensor& a, const Tensor& b);
/// Not a.
Tensor logical_not(const Tensor& a);
/// @}

/// x limited to [min, max] (either may be absent, not both: an Error). Any
/// dtype but bool; min and max are converted to x's dtype. Gradient to x: 1
/// where min <= x <= max, else 0.
Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max = std::nullopt);

/// \name Selection by a mask
/// @{

/// cond != 0 ? a : b, elementwise; all three broadcast to one shape. cond may be
/// a bool mask or any dtype (non-zero is true); a and b share one dtype (any on
/// the CPU; f32, f64, i64, bf16, f16 on CUDA), which the result has. Gradient
/// to a and b (0 where the other was chosen), none to cond.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
/// x with value where mask != 0 (mask, bool or any dtype, must broadcast to x;
/// the result has x's shape and dtype). Gradient to x (0 at the filled entries).
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);
/// The elements of x where mask (broadcast with x) is non-zero, 1-D in row-major
/// order. The mask is read on the host (a device sync off the CPU). Gradient to x.
Tensor masked_select(const Tensor& x, const Tensor& mask);
/// @}

/// \name Reductions
/// dims {} means every dim; negative dims count from the end; a dim listed
/// twice is an Error. keepdim keeps each reduced dim with size 1. Results have
/// x's dtype unless stated. Dtypes: any on the CPU; f32, f64, i64, bf16, f16 on
/// CUDA (16-bit values accumulate in f64 / f32 and round once).
/// @{

/// Sum over dims. bool, i32 and u8 inputs are summed in i64 (an i64 result, as
/// libtorch). Gradient to x (floating x). Over an empty dim: 0.
Tensor sum(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
/// Mean over dims; floating x only. Gradient to x.
Tensor mean(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
/// Max over one dim; the gradient goes to the first maximal entry. A NaN wins
/// over every number. Reducing an empty dim is an Error.
Tensor max(const Tensor& x, int64_t dim, bool keepdim = false);
/// Min over one dim; the gradient goes to the first minimal entry (otherwise as max).
Tensor min(const Tensor& x, int64_t dim, bool keepdim = false);
/// Max over every element: a 0-d tensor (x must not be empty). Gradient to the
/// first maximal entry in row-major order.
Tensor max(const Tensor& x);
/// Min over every element: a 0-d tensor (x must not be empty).
Tensor min(const Tensor& x);
/// The i64 position along dim of the first maximum (a NaN counts as the
/// maximum). No gradient.
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);
/// The i64 position along dim of the first minimum. No gradient.
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim = false);
/// (values, indices) over one dim, as libtorch's torch::max(x, dim) (the Tensor
/// forms above give the values only): values as max (with its gradient),
/// indices as argmax (i64).
std::tuple<Tensor, Tensor> max_with_indices(const Tensor& x, int64_t dim, bool keepdim = false);
/// (values, indices) over one dim, as min and argmin.
std::tuple<Tensor, Tensor> min_with_indices(const Tensor& x, int64_t dim, bool keepdim = false);
/// Running (inclusive) sum along dim, x's shape: one O(n) scan kernel on every
/// device. f32 and f64 x: f32 sums accumulate in double on the CPU; gradient to
/// x (the scan of the gradient from the end). bf16 / f16 x: scanned in f32 and
/// rounded once. Integer or bool x: summed exactly in i64 (the result is i64,
/// as torch), no gradient.
Tensor cumsum(const Tensor& x, int64_t dim);
/// (sum |x|^p)^(1/p) over dims ({} = all); p = 2 by default, p > 0. Floating x.
/// Gradient to x, composed from sqrt / pow / abs; where the norm is 0 it is 0
/// (libtorch's subgradient).
Tensor norm(const Tensor& x, double p = 2, const Shape& dims = {}, bool keepdim = false);
/// Variance over dims ({} = all), divided by N - 1 when unbiased (libtorch's
/// default), else N; floating x. With N = 1 and unbiased the result is NaN,
/// as libtorch's. Gradient to x.
Tensor var(const Tensor& x, const Shape& dims = {}, bool unbiased = true, bool keepdim = false);
/// The k largest (smallest when !largest) entries along dim and their i64
/// positions, always sorted (`sorted` is accepted for libtorch's signature and
/// has no effect); ties: the lower position first; NaN counts as the largest
/// value. k outside [0, x.size(dim)] is an Error. The order is computed on the
/// host (a device sync off the CPU); the values are a gather of x, with a
/// gradient to x.
std::tuple<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim = -1, bool largest = true,
                                bool sorted = true);
/// x sorted along dim (ascending, or descending) and the i64 positions, with
/// topk's rules (stable, NaN largest, host order, gradient to x through the values).
std::tuple<Tensor, Tensor> sort(const Tensor& x, int64_t dim = -1, bool descending = false);
/// Sums a broadcast gradient back to `shape` (the inverse of expand): sums the
/// leading dims x has beyond shape and the dims where shape has 1. An Error
/// when shape does not broadcast to x. Gradient to x.
Tensor sum_to(const Tensor& x, const Shape& shape);
/// @}

/// \name Linear algebra
/// @{

/// [..., M, K] @ [..., K, N] -> [..., M, N] with broadcast batch dims; 1-D
/// operands are promoted as in NumPy (and the added dim removed from the
/// result). Floating operands of one dtype (f32, f64, bf16, f16); 16-bit
/// operands multiply with f32 accumulation into a result of their dtype.
/// Transposed views go to BLAS as flags, without a copy. Gradient to a and b.
///
/// Under bf16 autocast (core/autocast.h, f32 operands): both operands converted
/// to bf16 tensors (kept for backward instead of the f32 ones), a bf16 product
/// with f32 accumulation and an f32 result; backward converts the incoming
/// gradient to bf16 for its two products. linear (below) is a matmul and
/// follows it. The mode is read when the forward runs. f64 is never lowered.
Tensor matmul(const Tensor& a, const Tensor& b);
/// x [..., in] @ w[out, in]^T + b[out] -> [..., out] (PyTorch's Linear
/// convention); b may be undefined. Dtypes and autocast as matmul. Gradient to
/// x, w and b.
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b = Tensor());
/// @}

/// \name Shape and views
/// Also Tensor methods. Any dtype. A view shares x's storage (writes through
/// one show in the other); the others return new tensors. Gradient to x (to
/// each input for cat and stack).
/// @{

/// x with a new shape of the same number of elements (one -1 is inferred): a
/// view when x's strides allow, else a contiguous copy.
Tensor reshape(const Tensor& x, const Shape& shape);
/// A view with dims a and b swapped (negative dims count from the end).
Tensor transpose(const Tensor& x, int64_t a, int64_t b);
/// A view with the dims reordered: result dim i is x's dim dims[i] (a
/// permutation of x's dims).
Tensor permute(const Tensor& x, const Shape& dims);
/// A view of [start, end) by step along dim, with Python's rules: negative
/// bounds count from the end, then both are clamped to the dim; step >= 1.
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
/// A view of x broadcast to shape (stride 0 on the expanded dims): size-1 dims
/// may grow, -1 keeps a dim, and new leading dims may be added (not as -1).
/// The gradient is summed back to x's shape.
Tensor expand(const Tensor& x, const Shape& shape);
/// x itself when it is contiguous, else a row-major copy.
Tensor contiguous(const Tensor& x);
/// A view of contiguous x with explicit shape/strides/offset (elements, relative
/// to x's first element; none negative). The view must not overlap itself (its
/// gradient is copied back through the same strides) and must stay inside x.
Tensor as_strided(const Tensor& x, const Shape& shape, const Shape& strides, int64_t offset = 0);
/// xs (at least one) joined along dim: one dtype and device, equal sizes
/// outside dim. A new tensor; each input gets its slice of the gradient.
Tensor cat(const std::vector<Tensor>& xs, int64_t dim);
/// xs (at least one, all of one shape) joined along a new dim at position dim
/// (in [-(n+1), n] for n-dim inputs).
Tensor stack(const std::vector<Tensor>& xs, int64_t dim);
/// x cut along dim into views of ceil(n / chunks) entries (the last may be
/// smaller, and fewer than `chunks` parts come out when n is small); chunks
/// >= 1. With a gradient the parts share one autograd node whose backward is
/// one cat.
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim);
/// The n slices of x along dim (views of x, or of a contiguous copy of a
/// non-contiguous x; that dim dropped) under ONE autograd node whose backward
/// stacks the n gradients (zeros where none arrived). Slicing one by one
/// instead gives every slice's backward a full-size gradient: O(n^2) over a
/// sequence. x needs at least one dim.
std::vector<Tensor> unbind(const Tensor& x, int64_t dim = 0);
/// x cut along dim into parts of split_size (the last one may be smaller), as
/// CONTIGUOUS copies under one autograd node whose backward is one cat
/// (unlike chunk's views: elementwise ops on the parts keep their fast path,
/// and the backward builds no zero-padded full-size gradients). E.g. the LSTM
/// gates. split_size >= 1; a dim of size 0 gives one empty part (as torch).
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
/// As split, with the parts' sizes given (each >= 0, adding up to x.size(dim)).
std::vector<Tensor> split_with_sizes(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim = 0);
/// @}

/// \name Indexing
/// The ops that gather by index (index_select, gather, scatter_add,
/// masked_select, index with a tensor index, embedding) take x of any dtype
/// on the CPU; on CUDA of a 4- or 8-byte dtype (f32, f64, i64, i32; their
/// gradient kernels f32, f64, i64). Indices are checked against the
/// indexed dim on the CPU (an Error naming the bad index). Off the CPU they
/// are not read on the host: the kernel checks them, a bad index is an Error
/// at the next sync (e.g. item()), and its entries are skipped.
/// @{

/// The entries of x along dim at positions idx (i64, 1-D): x's shape with
/// dim's size replaced by idx's length. Gradient to x (duplicates accumulate).
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& idx);
/// out[i][j][k] = x[idx[i][j][k]][j][k] for dim 0 (and so on): idx (any
/// integer dtype) has x's number of dims and, outside dim, sizes no larger
/// than x's; out has idx's shape. Gradient to x: scatter_add into zeros.
Tensor gather(const Tensor& x, int64_t dim, const Tensor& idx);
/// A copy of x with src[i][j][k] added at [idx[i][j][k]][j][k] (dim 0;
/// duplicates accumulate); x itself is not changed. idx (any integer dtype)
/// and src have one shape; x and src one dtype. Gradients: to x the identity,
/// to src gather(g, dim, idx).
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& idx, const Tensor& src);
/// x tiled repeats[d] times along each dim (repeats >= 0, at least one per dim
/// of x; extra leading repeats add dims). A new tensor; gradient to x.
Tensor repeat(const Tensor& x, const Shape& repeats);
/// libtorch's x.index({...}) (core/indexing.h): integers, Slice, None,
/// Ellipsis and at most one tensor index per call (a bool mask, read on the
/// host, or integer positions; on the CPU negative ones count from the end).
/// Differentiable: gradient to x.
Tensor index(const Tensor& x, const std::vector<indexing::TensorIndex>& indices);
/// x with v written at x.index(indices), out of place (libtorch's
/// x.index_put({...}, v)): v broadcasts to the indexed part and is converted to
/// x's dtype. Differentiable: to x, zero where v was written; to v, the
/// gradient of those places summed to v's shape. Any dtype, every device.
Tensor index_put(const Tensor& x, const std::vector<indexing::TensorIndex>& indices, const Tensor& v);
/// weight [V, D], ids i64 [...] with values in [0, V) -> [..., D]. Gradient to
/// weight only; the row padding_idx gets no gradient, as in PyTorch, where
/// padding_idx is in [0, V) (a negative padding_idx means none here; PyTorch
/// would count it from the end).
Tensor embedding(const Tensor& weight, const Tensor& ids, int64_t padding_idx = -1);
/// Lower triangle of the last two dims (entries with column - row <= diagonal
/// kept, the others zeroed), like torch.tril; x has at least 2 dims. Gradient to x.
Tensor tril(const Tensor& x, int64_t diagonal = 0);
/// Upper triangle (column - row >= diagonal kept), like torch.triu.
Tensor triu(const Tensor& x, int64_t diagonal = 0);
/// @}

/// \name Neural-network ops
/// Fused kernels with one-pass forward and backward. Floating inputs: f32 and
/// f64 everywhere, bf16 and f16 on the CPU (computed in f32, rounded once).
/// @{

/// exp(x) / sum(exp(x)) along dim, x's shape. Gradient to x.
Tensor softmax(const Tensor& x, int64_t dim);
/// log(softmax(x)) along dim, computed stably. Gradient to x.
Tensor log_softmax(const Tensor& x, int64_t dim);
/// Normalises the last dim D: (x - mean) / sqrt(var + eps) * weight + bias, var
/// the biased variance (divided by D). weight and bias [D], of x's dtype, may
/// be undefined (a bias needs a weight); eps >= 0. Gradient to x, weight, bias.
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5);
/// Inverted dropout: each element kept with probability 1 - p and scaled by
/// 1 / (1 - p), else 0. p in [0, 1). x itself (no copy, no node) when !train
/// or p == 0. The mask comes from Philox counters of gen (the global generator
/// by default), which advances by x.numel(); the CPU keeps it as bits for
/// backward, CUDA as a mask tensor. Gradient to x.
Tensor dropout(const Tensor& x, double p, bool train, Generator* gen = nullptr);
/// dropout(relu(x), p, train, gen), the same values and mask, keeping only its
/// output for backward (the pair keeps two tensors of x's size): FeedForward's
/// relu + dropout. relu(x) when !train or p == 0. Gradient to x.
Tensor relu_dropout(const Tensor& x, double p, bool train, Generator* gen = nullptr);
/// Transformer-XL's relative shift (docs/math.md, section Relative attention
/// and rel-shift) of the position scores x [..., Lq, Lk], scaled, plus an
/// optional additive bias [Lq, Lk] (the mask, x's dtype):
///   out[..., i, j] = scale * x[..., i, j + Lq - 1 - i] + bias[i, j],
/// the x term 0 where that column is past Lk (entries XL always masks). One
/// pass each way for the zero padding, strided view, scale and add of the
/// official code. f32 and f64 only (16-bit x is an Error). Gradient to x and
/// bias.
Tensor rel_shift(const Tensor& x, double scale = 1, const Tensor& bias = Tensor());
/// One Adam / AdamW step on p in place, with its state m (exp_avg) and v
/// (exp_avg_sq), in one fused pass (no autograd; the rule of AdamStep in
/// core/adam_step.h). Returns false, with nothing touched, where the device
/// has no fused kernel for p's dtype, or g, m, v do not all have p's shape,
/// dtype and device, or p, m or v is not contiguous (g may be strided): the
/// caller then runs the composed update. The fused kernels take f32 and f64.
bool adam_step_(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v, const AdamStep& s);
/// How a loss is reduced over its elements: mean (over the counted elements),
/// sum, or none (the per-element loss). libtorch's spellings kMean, kSum,
/// kNone are in ops/losses.h.
enum class Reduction { mean, sum, none };
/// logits [N, C] (or [..., C], floating), target i64 [N] (or [...]); fused
/// log_softmax + NLL. A target equal to ignore_index adds nothing; any other
/// target outside [0, C) is an Error (checked before the kernel on the CPU; on
/// other devices by the kernel, reported at the next sync). mean divides by
/// the number of non-ignored targets (NaN when there are none, as PyTorch);
/// none gives target's shape. Gradient to logits.
Tensor cross_entropy(const Tensor& logits, const Tensor& target, int64_t ignore_index = -100,
                     Reduction reduction = Reduction::mean);
/// @}

}  // namespace remora
