// SPDX-License-Identifier: BSD-3-Clause
// Differentiable ops. Each checks its arguments (a remora::Error names the op,
// the shapes or dtypes, and the fix), runs a backend kernel, and records a
// backward written with other ops, so it runs on every backend.
//
// Letters in shape comments: B batch, T/L time, C classes or channels, D width,
// N rows, ... = any leading dims.
#pragma once
#include <vector>

#include "../core/adam_step.h"
#include "../core/tensor.h"
#include "factories.h"

namespace remora {

// ---- elementwise, with NumPy broadcasting (same dtype and device) ----
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);  // gradient to the larger (split on ties)
Tensor minimum(const Tensor& a, const Tensor& b);
// alpha * x + beta (scalars); neg = affine(x, -1, 0)
Tensor affine(const Tensor& x, double alpha, double beta);
Tensor neg(const Tensor& x);
Tensor pow(const Tensor& x, double p);  // scalar exponent
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor gelu(const Tensor& x);  // exact: 0.5 x (1 + erf(x / sqrt 2))
Tensor abs(const Tensor& x);
// The nearest bfloat16 value of each element (ties to even, NaN kept, overflow
// to +-inf), stored in x's dtype (f32 or f64; f64 rounds once, straight to bf16).
// Gradient: straight-through (the identity), like a cast to bf16 and back.
// What bf16 autocast (core/autocast.h) does to gemm operands; docs/precision.md.
Tensor round_bf16(const Tensor& x);
Tensor sin(const Tensor& x);   // no gradient (for positional encodings)
Tensor cos(const Tensor& x);   // no gradient

// Comparisons: 1/0 in the inputs' dtype, no gradient.
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);

// Comparisons with a bool (DType::b8) result, as libtorch's (the operators
// ==, <, ... of core/tensor.h). Inputs of different dtypes compare in the wider one.
Tensor eq_mask(const Tensor& a, const Tensor& b);
Tensor ne_mask(const Tensor& a, const Tensor& b);
Tensor lt_mask(const Tensor& a, const Tensor& b);
Tensor le_mask(const Tensor& a, const Tensor& b);
Tensor gt_mask(const Tensor& a, const Tensor& b);
Tensor ge_mask(const Tensor& a, const Tensor& b);
// Logical ops (non-zero is true; bool results, broadcasting, no gradient).
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_xor(const Tensor& a, const Tensor& b);
Tensor logical_not(const Tensor& a);
// x limited to [min, max] (either may be absent). Gradient 1 where min <= x <= max.
Tensor clamp(const Tensor& x, std::optional<double> min, std::optional<double> max = std::nullopt);

// cond != 0 ? a : b, all three broadcast; gradients flow to a and b. cond may
// be a bool mask or any dtype (non-zero is true).
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
// x with value where mask != 0 (mask broadcasts to x; bool or any dtype).
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);
// The elements of x where mask (broadcast to x) is non-zero, 1-D in row-major order.
Tensor masked_select(const Tensor& x, const Tensor& mask);

// ---- reductions (dims {} = all; negative dims count from the end) ----
Tensor sum(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
// Max over one dim; the gradient goes to the first maximal entry.
Tensor max(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor min(const Tensor& x, int64_t dim, bool keepdim = false);
// Max / min over every element: a 0-d tensor (x must not be empty).
Tensor max(const Tensor& x);
Tensor min(const Tensor& x);
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);  // i64
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim = false);  // i64
// (values, indices) over one dim, as libtorch's torch::max(x, dim) (the Tensor
// forms above give the values only).
std::tuple<Tensor, Tensor> max_with_indices(const Tensor& x, int64_t dim, bool keepdim = false);
std::tuple<Tensor, Tensor> min_with_indices(const Tensor& x, int64_t dim, bool keepdim = false);
// Running sum along dim (floating x; an integer x is summed in f64 and converted back).
Tensor cumsum(const Tensor& x, int64_t dim);
// (sum |x|^p)^(1/p) over dims ({} = all); p = 2 by default.
Tensor norm(const Tensor& x, double p = 2, const Shape& dims = {}, bool keepdim = false);
// Variance over dims ({} = all), divided by N - 1 when unbiased (libtorch's default), else N.
Tensor var(const Tensor& x, const Shape& dims = {}, bool unbiased = true, bool keepdim = false);
// The k largest (smallest when !largest) entries along dim and their i64
// positions, sorted (ties: the lower position first). The values are a gather
// of x (differentiable); the order is computed on the host.
std::tuple<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim = -1, bool largest = true,
                                bool sorted = true);
std::tuple<Tensor, Tensor> sort(const Tensor& x, int64_t dim = -1, bool descending = false);
// Sums a broadcast gradient back to `shape` (the inverse of expand).
Tensor sum_to(const Tensor& x, const Shape& shape);

// ---- linear algebra ----
// [..., M, K] @ [..., K, N] -> [..., M, N] with broadcast batch dims; 1-D
// operands are promoted as in NumPy. Transposed views go to BLAS as flags.
Tensor matmul(const Tensor& a, const Tensor& b);
// Under bf16 autocast (core/autocast.h, f32 operands): both operands converted
// to bf16 tensors (kept for backward instead of the f32 ones), a bf16 product
// with f32 accumulation and an f32 result; backward converts the incoming
// gradient to bf16 for its two products. linear (below) is a matmul and
// follows it. The mode is read when the forward runs. 16-bit operands (bf16,
// f16 tensors) multiply with f32 accumulation into a result of their dtype.
// x [..., in] @ w[out, in]^T + b[out]  (PyTorch's Linear convention)
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b = Tensor());

// ---- shape and views (also Tensor methods) ----
Tensor reshape(const Tensor& x, const Shape& shape);  // one -1 allowed
Tensor transpose(const Tensor& x, int64_t a, int64_t b);
Tensor permute(const Tensor& x, const Shape& dims);
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
Tensor expand(const Tensor& x, const Shape& shape);  // -1 keeps a dim
Tensor contiguous(const Tensor& x);
// A view of contiguous x with explicit shape/strides/offset (elements, relative
// to x's first element). The view must not overlap itself (its gradient is
// copied back through the same strides) and must stay inside x.
Tensor as_strided(const Tensor& x, const Shape& shape, const Shape& strides, int64_t offset = 0);
Tensor cat(const std::vector<Tensor>& xs, int64_t dim);
Tensor stack(const std::vector<Tensor>& xs, int64_t dim);
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim);
// The n slices of x along dim (views, that dim dropped) under ONE autograd node whose
// backward stacks the n gradients (zeros where none arrived). Slicing one by one
// instead gives every slice's backward a full-size gradient: O(n²) over a sequence.
std::vector<Tensor> unbind(const Tensor& x, int64_t dim = 0);
// x cut along dim into parts of split_size (the last one may be smaller), or of the
// given sizes, as CONTIGUOUS copies under one autograd node whose backward is one cat
// (unlike chunk's views: elementwise ops on the parts keep their fast path, and the
// backward builds no zero-padded full-size gradients). E.g. the LSTM gates.
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> split_with_sizes(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim = 0);
// Rows of x along dim picked by idx (i64, 1-D).
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& idx);
// out[i][j][k] = x[idx[i][j][k]][j][k] for dim 0 (and so on): idx (integer) has
// x's number of dims, out idx's shape. Gradient: scatter_add into zeros.
Tensor gather(const Tensor& x, int64_t dim, const Tensor& idx);
// x with src[i][j][k] added at x[idx[i][j][k]][j][k] (dim 0; duplicates accumulate);
// idx and src have one shape. Gradients: x the identity, src gather(g, dim, idx).
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& idx, const Tensor& src);
// x tiled repeats[d] times along each dim (extra leading repeats add dims).
Tensor repeat(const Tensor& x, const Shape& repeats);
// libtorch's x.index({...}) (core/indexing.h); differentiable.
Tensor index(const Tensor& x, const std::vector<indexing::TensorIndex>& indices);
// x with v written at x.index(indices), out of place (libtorch's x.index_put({...}, v)):
// v broadcasts to the indexed part. Differentiable: x's gradient is zero where v was
// written, v's is the gradient of those places summed to v's shape. Any dtype
// (v is converted to x's), every device.
Tensor index_put(const Tensor& x, const std::vector<indexing::TensorIndex>& indices, const Tensor& v);
// weight [V, D], ids i64 [...] -> [..., D]; rows with id == padding_idx get no gradient.
Tensor embedding(const Tensor& weight, const Tensor& ids, int64_t padding_idx = -1);
// Lower/upper triangle of the last two dims (others zeroed), like torch.tril/triu.
Tensor tril(const Tensor& x, int64_t diagonal = 0);
Tensor triu(const Tensor& x, int64_t diagonal = 0);

// ---- neural-network ops ----
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);
// Normalises the last dim; weight/bias [D] may be undefined.
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5);
// Inverted dropout; identity when !train or p == 0. Seeded from gen (default global).
Tensor dropout(const Tensor& x, double p, bool train, Generator* gen = nullptr);
// dropout(relu(x), p, train, gen), the same values and mask, keeping only its
// output for backward (the pair keeps two tensors of x's size): FeedForward's
// relu + dropout.
Tensor relu_dropout(const Tensor& x, double p, bool train, Generator* gen = nullptr);
// Transformer-XL's relative shift (docs/math.md#relative-attention-and-rel-shift) of the position scores x
// [..., Lq, Lk], scaled, plus an optional additive bias [Lq, Lk] (the mask):
//   out[..., i, j] = scale * x[..., i, j + Lq - 1 - i] + bias[i, j],
// the x term 0 where that column is past Lk (entries XL always masks). One
// pass each way for the zero padding, strided view, scale and add of the
// official code.
Tensor rel_shift(const Tensor& x, double scale = 1, const Tensor& bias = Tensor());
// One Adam / AdamW step on p in place, with its state m (exp_avg) and v
// (exp_avg_sq), in one fused pass (no autograd; the rule of AdamStep in
// core/adam_step.h). False, with nothing touched, where the device has no
// fused kernel or a tensor is not contiguous with p's shape and dtype: the
// caller then runs the composed update.
bool adam_step_(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v, const AdamStep& s);
enum class Reduction { mean, sum, none };
// logits [N, C] (or [..., C]), target i64 [N] (or [...]); fused log_softmax + NLL.
// mean divides by the number of non-ignored targets.
Tensor cross_entropy(const Tensor& logits, const Tensor& target, int64_t ignore_index = -100,
                     Reduction reduction = Reduction::mean);

}  // namespace remora
