// SPDX-License-Identifier: BSD-3-Clause
// The float64 gradient checks of the ops behind the libtorch-style Tensor API:
// gather, scatter_add, masked_select, index (basic indices, integer and mask
// tensors), repeat, clamp, cumsum, norm, var, topk and sort; and activation
// checkpointing (core/activation_checkpoint.h), whose recomputed block draws dropout.
#include "../core/activation_checkpoint.h"
#include "../ops/ops.h"
#include "cases.h"

namespace remora::cases {

void register_api_cases() {
  using namespace remora::indexing;
  // The block runs twice (forward without history, backward again with it): its
  // dropout mask must come out the same, from the generator the checkpoint rewinds.
  add("checkpoint", "block_with_dropout", [](Maker& m) { return Inputs{m.leaf({3, 4}), m.leaf({4, 5})}; },
      [](const Inputs& x) {
        static Generator g;
        g.manual_seed(11);
        auto block = [](const std::vector<Tensor>& in) {
          return std::vector<Tensor>{tanh(dropout(matmul(in[0], in[1]), 0.4, true, &g)), mul(in[0], in[0])};
        };
        std::vector<Tensor> y = checkpoint(block, {x[0], x[1]}, &g);
        return add(sum(y[0], {1}), sum(y[1], {1}));
      });
  add("checkpoint", "second_output_unused", [](Maker& m) { return Inputs{m.leaf({2, 3}), m.leaf({3})}; },
      [](const Inputs& x) {
        auto block = [](const std::vector<Tensor>& in) {
          return std::vector<Tensor>{sigmoid(add(in[0], in[1])), exp(in[1])};
        };
        return checkpoint(block, {x[0], x[1]})[0];
      });
  add("gather", "dim1", [](Maker& m) { return Inputs{m.leaf({3, 4}), m.ids({0, 3, 3, 1, 2, 2, 0, 0, 1}, {3, 3})}; },
      [](const Inputs& x) { return gather(x[0], 1, x[1]); });
  add("gather", "dim0_strided_smaller", [](Maker& m) { return Inputs{m.strided_leaf({3, 4}), m.ids({2, 0, 1, 2}, {1, 4})}; },
      [](const Inputs& x) { return gather(x[0], 0, x[1]); });
  add("scatter_add", "dim1_duplicates",
      [](Maker& m) { return Inputs{m.leaf({2, 4}), m.ids({0, 0, 3, 1, 1, 2}, {2, 3}), m.leaf({2, 3})}; },
      [](const Inputs& x) { return scatter_add(x[0], 1, x[1], x[2]); });
  add("scatter_add", "dim0", [](Maker& m) { return Inputs{m.leaf({3, 2}), m.ids({2, 0, 2, 2}, {2, 2}), m.leaf({2, 2})}; },
      [](const Inputs& x) { return mul(scatter_add(x[0], 0, x[1], x[2]), x[0]); });
  add("masked_select", "broadcast_mask",
      [](Maker& m) { return Inputs{m.leaf({2, 3}), m.floats({1, 0, 1}, {3})}; },
      [](const Inputs& x) { return masked_select(x[0], x[1]); });
  add("index", "basic", [](Maker& m) { return Inputs{m.leaf({4, 3, 2})}; },
      [](const Inputs& x) { return index(x[0], {Slice(1, None), None, -1, Ellipsis}); });
  add("index", "step_slice", [](Maker& m) { return Inputs{m.strided_leaf({5, 3})}; },
      [](const Inputs& x) { return index(x[0], {Slice(None, None, 2), Slice(1)}); });
  add("index", "integer_tensor", [](Maker& m) { return Inputs{m.leaf({3, 4}), m.ids({3, 0, 3}, {3})}; },
      [](const Inputs& x) { return index(x[0], {Slice(), x[1]}); });
  add("index", "bool_mask", [](Maker& m) {
        return Inputs{m.leaf({2, 3, 2}), m.on(Tensor::from_vector(std::vector<double>{1, 0, 1, 0, 0, 1}, {2, 3}, DType::b8))};
      },
      [](const Inputs& x) { return index(x[0], {x[1]}); });
  add("index_put", "slice_broadcast_value",
      [](Maker& m) { return Inputs{m.leaf({4, 3}), m.leaf({3})}; },
      [](const Inputs& x) { return mul(index_put(x[0], {Slice(1, 3)}, x[1]), x[0]); });
  add("index_put", "integer_tensor", [](Maker& m) { return Inputs{m.leaf({3, 4}), m.ids({2, 0}, {2}), m.leaf({3, 2})}; },
      [](const Inputs& x) { return index_put(x[0], {Slice(), x[1]}, x[2]); });
  add("index_put", "bool_mask", [](Maker& m) {
        return Inputs{m.strided_leaf({2, 3}), m.on(Tensor::from_vector(std::vector<double>{1, 0, 1, 0, 0, 1}, {2, 3}, DType::b8)),
                      m.leaf({})};
      },
      [](const Inputs& x) { return index_put(x[0], {x[1]}, x[2]); });
  add("repeat", "extra_dim", [](Maker& m) { return Inputs{m.strided_leaf({2, 3})}; },
      [](const Inputs& x) { return repeat(x[0], {2, 1, 3}); });
  add("clamp", "both", [](Maker& m) { return Inputs{m.leaf({3, 4}, -2, 2)}; },
      [](const Inputs& x) { return clamp(x[0], -0.5, 0.7); });
  add("clamp", "min_only", [](Maker& m) { return Inputs{m.strided_leaf({3, 2}, -2, 2)}; },
      [](const Inputs& x) { return clamp(x[0], 0.1, std::nullopt); });
  add("cumsum", "middle_dim", [](Maker& m) { return Inputs{m.leaf({2, 4, 3})}; },
      [](const Inputs& x) { return cumsum(x[0], 1); });
  add("cumsum", "last_strided", [](Maker& m) { return Inputs{m.strided_leaf({3, 4})}; },
      [](const Inputs& x) { return cumsum(x[0], -1); });
  add("norm", "p2_all", [](Maker& m) { return Inputs{m.leaf({3, 4})}; },
      [](const Inputs& x) { return norm(x[0]); });
  add("norm", "p3_dim", [](Maker& m) { return Inputs{m.away_from_zero({3, 4})}; },
      [](const Inputs& x) { return norm(x[0], 3, {1}, true); });
  add("var", "unbiased_dim", [](Maker& m) { return Inputs{m.leaf({3, 5})}; },
      [](const Inputs& x) { return var(x[0], {1}); });
  add("var", "biased_all", [](Maker& m) { return Inputs{m.strided_leaf({3, 4})}; },
      [](const Inputs& x) { return var(x[0], {}, false); });
  add("topk", "largest_last_dim", [](Maker& m) { return Inputs{m.leaf({3, 5})}; },
      [](const Inputs& x) { return std::get<0>(topk(x[0], 2)); });
  add("topk", "smallest_dim0", [](Maker& m) { return Inputs{m.strided_leaf({4, 3})}; },
      [](const Inputs& x) { return std::get<0>(topk(x[0], 3, 0, false)); });
  add("sort", "descending", [](Maker& m) { return Inputs{m.leaf({2, 5})}; },
      [](const Inputs& x) { return std::get<0>(sort(x[0], -1, true)); });
}

}  // namespace remora::cases
