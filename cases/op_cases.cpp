// SPDX-License-Identifier: BSD-3-Clause
// The float64 gradient-check cases of the general ops (elementwise,
// reductions, linear algebra, shapes, neural-network ops), including
// broadcasting and non-contiguous inputs. Every index, mask and constant the
// function needs is an input, so a case runs on any device ([backends]).
#include <limits>

#include "../core/autocast.h"
#include "../ops/losses.h"
#include "../ops/ops.h"
#include "cases.h"

namespace remora::cases {

namespace {

void elementwise() {
  add("add", "same_shape", [](Maker& m) { return Inputs{m.leaf({3, 4}), m.leaf({3, 4})}; },
      [](const Inputs& x) { return x[0] + x[1]; });
  add("add", "broadcast", [](Maker& m) { return Inputs{m.leaf({3, 1, 4}), m.leaf({2, 4})}; },
      [](const Inputs& x) { return x[0] + x[1]; });
  add("add", "noncontiguous",
      [](Maker& m) { return Inputs{m.strided_leaf({3, 4}), m.leaf({4})}; },
      [](const Inputs& x) { return x[0] + x[1]; });
  add("sub", "broadcast", [](Maker& m) { return Inputs{m.leaf({2, 3}), m.leaf({3, 2, 1})}; },
      [](const Inputs& x) { return x[0] - x[1]; });
  add("mul", "broadcast", [](Maker& m) { return Inputs{m.leaf({2, 3, 4}), m.leaf({3, 1})}; },
      [](const Inputs& x) { return x[0] * x[1]; });
  add("mul", "noncontiguous",
      [](Maker& m) { return Inputs{m.strided_leaf({2, 3, 4}), m.strided_leaf({2, 3, 4})}; },
      [](const Inputs& x) { return x[0] * x[1]; });
  add("mul", "same_input", [](Maker& m) { return Inputs{m.leaf({5})}; },
      [](const Inputs& x) { return x[0] * x[0]; });
  add("div", "broadcast",
      [](Maker& m) { return Inputs{m.leaf({2, 3}), m.leaf({3}, 0.5, 2.0)}; },
      [](const Inputs& x) { return x[0] / x[1]; });
  add("div", "scalar_numerator", [](Maker& m) { return Inputs{m.leaf({4}, 0.5, 2.0)}; },
      [](const Inputs& x) { return 2.0 / x[0]; });
  add("maximum", "broadcast", [](Maker& m) { return Inputs{m.leaf({3, 4}), m.leaf({4})}; },
      [](const Inputs& x) { return maximum(x[0], x[1]); });
  add("minimum", "broadcast", [](Maker& m) { return Inputs{m.leaf({3, 4}), m.leaf({3, 1})}; },
      [](const Inputs& x) { return minimum(x[0], x[1]); });
  add("affine", "scalars", [](Maker& m) { return Inputs{m.strided_leaf({3, 2})}; },
      [](const Inputs& x) { return 3.0 - x[0] * 2.0 + 1.0; });
  add("neg", "basic", [](Maker& m) { return Inputs{m.leaf({4})}; },
      [](const Inputs& x) { return -x[0]; });
  add("pow", "fractional", [](Maker& m) { return Inputs{m.leaf({3, 3}, 0.5, 2.0)}; },
      [](const Inputs& x) { return pow(x[0], 2.5); });
  add("pow", "cube", [](Maker& m) { return Inputs{m.leaf({6})}; },
      [](const Inputs& x) { return pow(x[0], 3.0); });
  // The REMORA_UNARY rows' cases ("<name>/basic": a 3x4 input from [lo, hi)).
#define REMORA_FUNCTION(...)
#define REMORA_METHOD(...)
#define REMORA_DECLARED_IN(...)
#define REMORA_UNARY(name, lo, hi)                                                 \
  add(#name, "basic", [](Maker& m) { return Inputs{m.leaf({3, 4}, lo, hi)}; }, \
      [](const Inputs& x) { return name(x[0]); });
#include "../ops/ops.def"
#undef REMORA_FUNCTION
#undef REMORA_METHOD
#undef REMORA_DECLARED_IN
#undef REMORA_UNARY
  add("exp", "noncontiguous", [](Maker& m) { return Inputs{m.strided_leaf({3, 4})}; },
      [](const Inputs& x) { return exp(x[0]); });
  add("tanh", "noncontiguous", [](Maker& m) { return Inputs{m.strided_leaf({3, 4})}; },
      [](const Inputs& x) { return tanh(x[0]); });
  add("relu", "basic", [](Maker& m) { return Inputs{m.away_from_zero({3, 4})}; },
      [](const Inputs& x) { return relu(x[0]); });
  // Piecewise constant (a Jacobian check would see its steps): backend-only,
  // its kernel compared across devices; values and specials in test_precision.cpp.
  add("round_bf16", "values",
      [](Maker& m) { return Inputs{m.scaled_leaf({6, 7}, 1e3), m.strided_leaf({4, 5}, -1e-3, 1e-3)}; },
      [](const Inputs& x) { return cat({round_bf16(x[0]).reshape({-1}), round_bf16(x[1]).reshape({-1})}, 0); },
      {}, /*backend_only=*/true);
  add("abs", "basic", [](Maker& m) { return Inputs{m.away_from_zero({5})}; },
      [](const Inputs& x) { return abs(x[0]); });
  add("where", "broadcast",
      [](Maker& m) {
        return Inputs{m.floats({1, 0, 1, 1}, {4}), m.leaf({3, 4}), m.leaf({3, 1})};
      },
      [](const Inputs& x) { return where(x[0], x[1], x[2]); });
  add("masked_fill", "broadcast_mask",
      [](Maker& m) { return Inputs{m.leaf({2, 3, 4}), m.ids({0, 1, 0, 0, 1, 1}, {2, 3, 1})}; },
      [](const Inputs& x) { return masked_fill(x[0], x[1], -7.0); });
}

void reductions() {
  add("sum", "all", [](Maker& m) { return Inputs{m.strided_leaf({3, 4})}; },
      [](const Inputs& x) { return sum(x[0]); });
  add("sum", "dim_keepdim", [](Maker& m) { return Inputs{m.leaf({2, 3, 4})}; },
      [](const Inputs& x) { return sum(x[0], {1}, true); });
  add("sum", "scattered_dims", [](Maker& m) { return Inputs{m.strided_leaf({2, 3, 4})}; },
      [](const Inputs& x) { return sum(x[0], {0, 2}); });
  add("mean", "dims", [](Maker& m) { return Inputs{m.leaf({2, 3, 4})}; },
      [](const Inputs& x) { return mean(x[0], {-1}); });
  add("max", "dim", [](Maker& m) { return Inputs{m.leaf({3, 5})}; },
      [](const Inputs& x) { return max(x[0], 1); });
  add("max", "dim0_keepdim", [](Maker& m) { return Inputs{m.strided_leaf({4, 3})}; },
      [](const Inputs& x) { return max(x[0], 0, true); });
  add("min", "dim", [](Maker& m) { return Inputs{m.leaf({3, 5})}; },
      [](const Inputs& x) { return min(x[0], -1); });
}

void linalg() {
  add("matmul", "2d", [](Maker& m) { return Inputs{m.leaf({3, 4}), m.leaf({4, 5})}; },
      [](const Inputs& x) { return matmul(x[0], x[1]); });
  add("matmul", "batched", [](Maker& m) { return Inputs{m.leaf({2, 3, 4}), m.leaf({2, 4, 2})}; },
      [](const Inputs& x) { return matmul(x[0], x[1]); });
  add("matmul", "broadcast_batch",
      [](Maker& m) { return Inputs{m.leaf({2, 1, 3, 4}), m.leaf({3, 4, 2})}; },
      [](const Inputs& x) { return matmul(x[0], x[1]); });
  add("matmul", "shared_rhs", [](Maker& m) { return Inputs{m.leaf({2, 3, 4}), m.leaf({4, 3})}; },
      [](const Inputs& x) { return matmul(x[0], x[1]); });
  add("matmul", "transposed_operands",
      [](Maker& m) { return Inputs{m.strided_leaf({3, 4}), m.strided_leaf({4, 2})}; },
      [](const Inputs& x) { return matmul(x[0], x[1]); });
  add("matmul", "vectors", [](Maker& m) { return Inputs{m.leaf({4}), m.leaf({2, 4, 3})}; },
      [](const Inputs& x) { return matmul(x[0], x[1]); });
  add("linear", "bias",
      [](Maker& m) { return Inputs{m.leaf({2, 3, 4}), m.leaf({5, 4}), m.leaf({5})}; },
      [](const Inputs& x) { return linear(x[0], x[1], x[2]); });
  // bf16 autocast (backend-only: f64, all a Jacobian check sees, is never
  // lowered): a device's bf16 products (CUDA: TF32 tensor cores on rounded
  // operands) against the CPU's, at the bf16 rows of tests/test_backends.cpp.
  // Backward runs outside the guard: it follows the forward's mode.
  add("matmul", "bf16_autocast_batched",
      [](Maker& m) { return Inputs{m.leaf({2, 3, 24}), m.strided_leaf({24, 5})}; },
      [](const Inputs& x) {
        AutocastGuard bf16(Precision::bf16);
        return matmul(x[0], x[1]);
      },
      {}, /*backend_only=*/true);
  add("linear", "bf16_autocast",
      [](Maker& m) { return Inputs{m.leaf({2, 3, 24}), m.leaf({5, 24}), m.leaf({5})}; },
      [](const Inputs& x) {
        AutocastGuard bf16(Precision::bf16);
        return linear(x[0], x[1], x[2]);
      },
      {}, /*backend_only=*/true);
}

void shapes() {
  add("reshape", "view", [](Maker& m) { return Inputs{m.leaf({2, 6})}; },
      [](const Inputs& x) { return x[0].reshape({3, -1}) * x[0].reshape({3, 4}); });
  add("reshape", "copy", [](Maker& m) { return Inputs{m.strided_leaf({3, 4})}; },
      [](const Inputs& x) { return x[0].reshape({12}); });
  add("transpose", "basic", [](Maker& m) { return Inputs{m.leaf({2, 3, 4})}; },
      [](const Inputs& x) { return x[0].transpose(0, 2) * 2.0; });
  add("permute", "basic", [](Maker& m) { return Inputs{m.leaf({2, 3, 4})}; },
      [](const Inputs& x) { return x[0].permute({1, 2, 0}).contiguous(); });
  add("slice", "step", [](Maker& m) { return Inputs{m.leaf({5, 4})}; },
      [](const Inputs& x) { return x[0].slice(0, 1, 5, 2) * x[0].slice(0, -2, 5); });
  add("select", "basic", [](Maker& m) { return Inputs{m.leaf({3, 4})}; },
      [](const Inputs& x) { return x[0].select(1, -1) + x[0].narrow(0, 1, 2).sum({0}).slice(0, 0, 3); });
  add("expand", "basic", [](Maker& m) { return Inputs{m.leaf({3, 1})}; },
      [](const Inputs& x) { return x[0].expand({2, 3, 4}).contiguous(); });
  add("unsqueeze", "squeeze", [](Maker& m) { return Inputs{m.strided_leaf({3, 2})}; },
      [](const Inputs& x) { return x[0].unsqueeze(1).squeeze(1).flatten(); });
  add("as_strided", "relative_shift", [](Maker& m) { return Inputs{m.leaf({2, 3, 7})}; },
      [](const Inputs& x) {
        // Transformer-XL's rel_shift on a zero-padded [2, 3, 4 + 3] score block.
        return as_strided(x[0], {2, 3, 4}, {21, 6, 1}, 2);
      });
  add("clone", "basic", [](Maker& m) { return Inputs{m.strided_leaf({2, 3})}; },
      [](const Inputs& x) { return x[0].clone(); });
  add("cat", "dim1", [](Maker& m) { return Inputs{m.leaf({2, 3}), m.strided_leaf({2, 2})}; },
      [](const Inputs& x) { return cat({x[0], x[1], x[0]}, 1); });
  add("stack", "dim0", [](Maker& m) { return Inputs{m.leaf({2, 3}), m.leaf({2, 3})}; },
      [](const Inputs& x) { return stack({x[0], x[1]}, 0); });
  add("chunk", "uneven", [](Maker& m) { return Inputs{m.leaf({5, 2})}; },
      [](const Inputs& x) {
        auto c = chunk(x[0], 2, 0);
        return c[0].sum({0}) * c[1].sum({0});
      });
  add("chunk", "middle_unused_strided", [](Maker& m) { return Inputs{m.strided_leaf({2, 6})}; },
      [](const Inputs& x) {
        auto c = chunk(x[0], 3, 1);  // c[1] never reaches the loss: its gradient is zero
        return c[0] * c[2];
      });
  add("index_select", "duplicates", [](Maker& m) { return Inputs{m.leaf({4, 3}), m.ids({3, 0, 3, 1}, {4})}; },
      [](const Inputs& x) { return index_select(x[0], 0, x[1]); });
  add("index_select", "middle_dim",
      [](Maker& m) { return Inputs{m.strided_leaf({2, 4, 3}), m.ids({2, 2, 0}, {3})}; },
      [](const Inputs& x) { return index_select(x[0], 1, x[1]); });
  // (padding_idx rows get no gradient by design, so they are tested in test_ops.)
  add("embedding", "duplicates",
      [](Maker& m) { return Inputs{m.leaf({5, 3}), m.ids({1, 4, 0, 1, 2, 0}, {2, 3})}; },
      [](const Inputs& x) { return embedding(x[0], x[1]); });
  add("tril", "basic", [](Maker& m) { return Inputs{m.leaf({2, 3, 4})}; },
      [](const Inputs& x) { return tril(x[0]) + triu(x[0], 1) * 3.0; });
  add("triu", "negative_diagonal", [](Maker& m) { return Inputs{m.strided_leaf({4, 3})}; },
      [](const Inputs& x) { return triu(x[0], -1); });
  add("contiguous", "of_transpose", [](Maker& m) { return Inputs{m.leaf({3, 4})}; },
      [](const Inputs& x) { return contiguous(x[0].t()) * 2.0; });
}

void nn_ops() {
  add("softmax", "last_dim", [](Maker& m) { return Inputs{m.leaf({3, 5})}; },
      [](const Inputs& x) { return softmax(x[0], -1); });
  add("softmax", "dim0_noncontiguous", [](Maker& m) { return Inputs{m.strided_leaf({4, 3})}; },
      [](const Inputs& x) { return softmax(x[0], 0); });
  add("log_softmax", "last_dim", [](Maker& m) { return Inputs{m.leaf({3, 5})}; },
      [](const Inputs& x) { return log_softmax(x[0], -1); });
  add("layer_norm", "affine",
      [](Maker& m) { return Inputs{m.leaf({2, 3, 5}), m.leaf({5}), m.leaf({5})}; },
      [](const Inputs& x) { return layer_norm(x[0], x[1], x[2], 1e-5); });
  add("layer_norm", "no_affine", [](Maker& m) { return Inputs{m.strided_leaf({4, 6})}; },
      [](const Inputs& x) { return layer_norm(x[0], Tensor(), Tensor(), 1e-5); });
  add("dropout", "train", [](Maker& m) { return Inputs{m.leaf({4, 5})}; },
      [](const Inputs& x) {
        Generator d(1234);  // the same mask on every call
        return dropout(x[0], 0.3, true, &d);
      });
  add("relu_dropout", "train", [](Maker& m) { return Inputs{m.leaf({5, 7})}; },
      [](const Inputs& x) {
        Generator d(4321);  // the same mask on every call
        return relu_dropout(x[0], 0.3, true, &d);
      });
  add("relu_dropout", "eval", [](Maker& m) { return Inputs{m.leaf({3, 4})}; },
      [](const Inputs& x) { return relu_dropout(x[0], 0.3, false); });
  add("cross_entropy", "mean_ignore",
      [](Maker& m) { return Inputs{m.leaf({4, 5}), m.ids({1, -100, 4, 0}, {4})}; },
      [](const Inputs& x) { return cross_entropy(x[0], x[1], -100); });
  add("cross_entropy", "sum_3d",
      [](Maker& m) { return Inputs{m.strided_leaf({2, 3, 4}), m.ids({0, 3, 2, 1, 1, 0}, {2, 3})}; },
      [](const Inputs& x) { return cross_entropy(x[0], x[1], -100, Reduction::sum); });
  add("cross_entropy", "none", [](Maker& m) { return Inputs{m.leaf({3, 4}), m.ids({3, 0, 2}, {3})}; },
      [](const Inputs& x) { return cross_entropy(x[0], x[1], -100, Reduction::none); });
  add("rel_shift", "scaled_with_bias",
      [](Maker& m) { return Inputs{m.leaf({2, 3, 4, 6}), m.leaf({4, 6})}; },
      [](const Inputs& x) { return rel_shift(x[0], 0.5, x[1]); });
  add("rel_shift", "more_queries_strided", [](Maker& m) { return Inputs{m.strided_leaf({5, 3})}; },
      [](const Inputs& x) { return rel_shift(x[0]); });
  add("binary_cross_entropy_with_logits", "masked_mean",
      [](Maker& m) {
        return Inputs{m.leaf({2, 3, 4}, -4, 4), m.value({2, 3, 4}, 0, 1), m.floats({1, 0, 1, 1, 1, 0}, {2, 3, 1})};
      },
      [](const Inputs& x) { return binary_cross_entropy_with_logits(x[0], x[1], x[2]); });
  add("binary_cross_entropy_with_logits", "sum",
      [](Maker& m) { return Inputs{m.strided_leaf({3, 5}), m.value({3, 5}, 0, 1)}; },
      [](const Inputs& x) { return binary_cross_entropy_with_logits(x[0], x[1], Tensor(), Reduction::sum); });
}

}  // namespace

void register_op_cases() {
  elementwise();
  reductions();
  linalg();
  shapes();
  nn_ops();
}

}  // namespace remora::cases
