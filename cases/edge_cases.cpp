// SPDX-License-Identifier: BSD-3-Clause
// Kernel edges of the general ops: sizes that are no multiple
// of any tile or block, empty and size-1 dims, non-contiguous and stride-0
// views, more than 65,535 rows (a grid.y / grid.z limit), reductions of 10^7+
// elements and bias-shaped sums over many rows, gemm with m, n or k = 1,
// transposed operands and stride-0 batches, and one tensor over 2^31
// elements (int64 indexing). Small ones are float64 gradient-checked too; the
// rest are backend-only: [backends] compares them across devices (for matmul
// with TF32 off and on).
#include "../ops/ops.h"
#include "cases.h"

namespace remora::cases {

namespace {

constexpr bool kBackendOnly = true;

void elementwise_edges() {
  add("add", "odd_sizes_broadcast", [](Maker& m) { return Inputs{m.leaf({7, 1, 1031}), m.leaf({13, 1})}; },
      [](const Inputs& x) { return x[0] + x[1]; }, {}, kBackendOnly);
  add("mul", "empty_dim", [](Maker& m) { return Inputs{m.leaf({0, 3}), m.leaf({3})}; },
      [](const Inputs& x) { return cat({(x[0] * x[1]).reshape({-1}), x[1]}, 0); });
  add("mul", "size1_dims", [](Maker& m) { return Inputs{m.leaf({1, 1, 5}), m.leaf({1, 4, 1})}; },
      [](const Inputs& x) { return x[0] * x[1]; });
  // Stride-0 operands: an expanded view, and a strided slice of an expanded view.
  add("mul", "stride0_views", [](Maker& m) { return Inputs{m.leaf({3, 1}), m.strided_leaf({5, 3, 4})}; },
      [](const Inputs& x) { return x[0].expand({5, 3, 2}) * x[1].slice(2, 0, 4, 3); });
  add("tanh", "noncontiguous_large", [](Maker& m) { return Inputs{m.strided_leaf({517, 259})}; },
      [](const Inputs& x) { return tanh(x[0]).slice(0, 1, 517, 2); }, {}, kBackendOnly);
  add("where", "stride0_condition",
      [](Maker& m) { return Inputs{m.floats({1, 0, 0, 1, 1}, {5, 1}), m.leaf({5, 33}), m.leaf({33})}; },
      [](const Inputs& x) { return where(x[0].expand({5, 33}), x[1], x[2]); }, {}, kBackendOnly);
}

void reduction_edges() {
  add("sum", "full_10M", [](Maker& m) { return Inputs{m.leaf({10000019})}; },
      [](const Inputs& x) { return sum(x[0]); }, {}, kBackendOnly);
  add("mean", "full_10M_2d", [](Maker& m) { return Inputs{m.leaf({3163, 3163})}; },
      [](const Inputs& x) { return mean(x[0]); }, {}, kBackendOnly);
  // The bias gradient's shape: sum over many rows of a narrow matrix.
  add("sum", "bias_shaped_dim0", [](Maker& m) { return Inputs{m.leaf({200003, 7})}; },
      [](const Inputs& x) { return sum(x[0], {0}); }, {}, kBackendOnly);
  add("sum", "dim0_wide", [](Maker& m) { return Inputs{m.leaf({1025, 1031})}; },
      [](const Inputs& x) { return sum(x[0], {0}); }, {}, kBackendOnly);
  add("sum", "empty_dim", [](Maker& m) { return Inputs{m.leaf({0, 4})}; },
      [](const Inputs& x) { return sum(x[0], {0}); }, {}, kBackendOnly);
  add("max", "rows_over_65535", [](Maker& m) { return Inputs{m.leaf({70001, 3})}; },
      [](const Inputs& x) { return max(x[0], 1); }, {}, kBackendOnly);
  add("sum_to", "broadcast_grad", [](Maker& m) { return Inputs{m.leaf({4, 3, 5})}; },
      [](const Inputs& x) { return sum_to(x[0], {3, 1}); });
}

void gemm_edges() {
  auto mm = [](const Inputs& x) { return matmul(x[0], x[1]); };
  add("matmul", "k1", [](Maker& m) { return Inputs{m.leaf({5, 1}), m.leaf({1, 7})}; }, mm);
  add("matmul", "n1", [](Maker& m) { return Inputs{m.leaf({5, 6}), m.leaf({6, 1})}; }, mm);
  add("matmul", "m1", [](Maker& m) { return Inputs{m.leaf({1, 6}), m.leaf({6, 4})}; }, mm);
  add("matmul", "k0", [](Maker& m) { return Inputs{m.leaf({3, 0}), m.leaf({0, 4})}; }, mm, {}, kBackendOnly);
  add("matmul", "stride0_batch",
      [](Maker& m) { return Inputs{m.leaf({1, 3, 4}), m.leaf({6, 4, 5})}; },
      [](const Inputs& x) { return matmul(x[0].expand({6, 3, 4}), x[1]); });
  add("matmul", "stride0_batch_rhs",
      [](Maker& m) { return Inputs{m.strided_leaf({6, 3, 4}), m.leaf({4, 5})}; },
      [](const Inputs& x) { return matmul(x[0], x[1].unsqueeze(0).expand({6, 4, 5})); });
  add("matmul", "odd_sizes_transposed",
      [](Maker& m) { return Inputs{m.strided_leaf({3, 129, 65}), m.strided_leaf({3, 65, 257})}; }, mm, {},
      kBackendOnly);
  add("matmul", "large_k", [](Maker& m) { return Inputs{m.leaf({17, 4099}), m.leaf({4099, 9})}; }, mm, {},
      kBackendOnly);
  add("linear", "many_rows_bias", [](Maker& m) { return Inputs{m.leaf({100003, 5}), m.leaf({3, 5}), m.leaf({3})}; },
      [](const Inputs& x) { return linear(x[0], x[1], x[2]); }, {}, kBackendOnly);
}

void row_kernel_edges() {
  add("softmax", "odd_wide_rows", [](Maker& m) { return Inputs{m.leaf({5, 4099})}; },
      [](const Inputs& x) { return softmax(x[0], -1); }, {}, kBackendOnly);
  add("softmax", "rows_over_65535", [](Maker& m) { return Inputs{m.leaf({70001, 3})}; },
      [](const Inputs& x) { return softmax(x[0], -1); }, {}, kBackendOnly);
  add("softmax", "size1_dim", [](Maker& m) { return Inputs{m.leaf({4, 1})}; },
      [](const Inputs& x) { return softmax(x[0], -1) * x[0]; });
  add("log_softmax", "odd_wide_rows", [](Maker& m) { return Inputs{m.strided_leaf({1031, 7})}; },
      [](const Inputs& x) { return log_softmax(x[0], 0); }, {}, kBackendOnly);
  // Large logits: logsumexp's two parts (max, log-sum) must stay apart in f32
  // (tests/test_losses.cpp holds the f32 results of these to an f64 bound).
  add("log_softmax", "large_logits", [](Maker& m) { return Inputs{m.leaf({4, 9}, 1990, 2010)}; },
      [](const Inputs& x) { return log_softmax(x[0], -1); });
  add("log_softmax", "large_logits_1e5",
      [](Maker& m) {
        return Inputs{Maker::grad_leaf(m.floats({1e5, 1e5 - 1, 1e5 - 2, -1e5, -1e5 - 0.5, -1e5 + 3}, {2, 3}))};
      },
      [](const Inputs& x) { return log_softmax(x[0], -1); }, {}, kBackendOnly);
  add("cross_entropy", "large_logits",
      [](Maker& m) { return Inputs{m.leaf({4, 6}, 1990, 2010), m.ids({0, 5, 2, 3}, {4})}; },
      [](const Inputs& x) { return cross_entropy(x[0], x[1], -100, Reduction::none); });
  add("cross_entropy", "near_certain",
      [](Maker& m) {
        return Inputs{Maker::grad_leaf(m.floats({2000, 1989, 1989, 2000, -3000, -3012.5}, {3, 2})),
                      m.ids({0, 0, 0}, {3})};
      },
      [](const Inputs& x) { return cross_entropy(x[0], x[1], -100, Reduction::none); });
  add("layer_norm", "odd_width_many_rows",
      [](Maker& m) { return Inputs{m.leaf({70001, 5}), m.leaf({5}), m.leaf({5})}; },
      [](const Inputs& x) { return layer_norm(x[0], x[1], x[2], 1e-5); }, {}, kBackendOnly);
  add("layer_norm", "wide_rows",
      [](Maker& m) { return Inputs{m.leaf({3, 4097}), m.leaf({4097}), m.leaf({4097})}; },
      [](const Inputs& x) { return layer_norm(x[0], x[1], x[2], 1e-5); }, {}, kBackendOnly);
  add("cross_entropy", "many_rows_odd_vocab",
      [](Maker& m) {
        std::vector<int64_t> t;
        for (int64_t i = 0; i < 70001; ++i) t.push_back(i % 11 == 3 ? -100 : (i * 7) % 37);
        return Inputs{m.leaf({70001, 37}), m.ids(t, {70001})};
      },
      [](const Inputs& x) { return cross_entropy(x[0], x[1], -100); }, {}, kBackendOnly);
  add("cross_entropy", "large_vocab",
      [](Maker& m) { return Inputs{m.leaf({3, 50021}), m.ids({0, 50020, 1234}, {3})}; },
      [](const Inputs& x) { return cross_entropy(x[0], x[1], -100, Reduction::sum); }, {}, kBackendOnly);
  add("embedding", "many_ids",
      [](Maker& m) {
        std::vector<int64_t> t;
        for (int64_t i = 0; i < 70001; ++i) t.push_back((i * 13) % 1001);
        return Inputs{m.leaf({1001, 9}), m.ids(t, {70001})};
      },
      [](const Inputs& x) { return embedding(x[0], x[1]); }, {}, kBackendOnly);
  add("index_select", "empty_index", [](Maker& m) { return Inputs{m.leaf({4, 3}), m.ids({}, {0})}; },
      [](const Inputs& x) { return cat({index_select(x[0], 0, x[1]).reshape({-1}), x[0].reshape({-1})}, 0); },
      {}, kBackendOnly);
  add("dropout", "odd_size", [](Maker& m) { return Inputs{m.leaf({1000003})}; },
      [](const Inputs& x) {
        Generator d(77);  // Philox: the same mask on every device
        return dropout(x[0], 0.4, true, &d);
      },
      {}, kBackendOnly);
}

// One tensor of 2^31 + 2^20 + 3 elements (int64 indexing everywhere), run in
// f32 on a device only, against the CPU in f64. The output is small; the
// gradient is not.
void huge_edges() {
  add("mul", "over_2p31_elements",
      [](Maker& m) {
        const int64_t n = (int64_t(1) << 31) + (int64_t(1) << 20) + 3;
        // f32 draws on the device (Philox: the same on every device), then
        // converted: the f64 reference on the CPU sees the same values.
        return Inputs{Maker::grad_leaf(Tensor::rand({n}, DType::f32, m.dev, &m.g).to(m.dt))};
      },
      [](const Inputs& x) {
        const int64_t n = x[0].numel();
        // Forward: a reduction over 2^31 elements and a slice past 2^31;
        // backward: the broadcast and the accumulation over all of them.
        return cat({x[0].slice(0, n - 1000, n) * 2.0, sum(x[0].slice(0, 0, n - 3).reshape({-1, 1024}), {0})}, 0);
      },
      {}, kBackendOnly, /*huge=*/true);
}

}  // namespace

void register_edge_cases() {
  elementwise_edges();
  reduction_edges();
  gemm_edges();
  row_kernel_edges();
  huge_edges();
}

}  // namespace remora::cases
