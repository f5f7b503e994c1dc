// SPDX-License-Identifier: BSD-3-Clause
// The float64 gradient checks of the one-node splitting ops unbind, split and
// split_with_sizes (ops/split.cpp): some outputs unused (their gradient is
// zeros), non-contiguous inputs, a middle dim, an uneven last part.
#include "../ops/ops.h"
#include "cases.h"

namespace remora::cases {

void register_split_cases() {
  add("unbind", "dim0_some_unused", [](Maker& m) { return Inputs{m.leaf({4, 2, 3})}; },
      [](const Inputs& x) {
        std::vector<Tensor> s = unbind(x[0], 0);
        return cat({mul(s[0], s[3]), tanh(s[1])}, 0);
      });
  add("unbind", "middle_dim_strided", [](Maker& m) { return Inputs{m.strided_leaf({2, 3, 4})}; },
      [](const Inputs& x) {
        std::vector<Tensor> s = unbind(x[0], 1);  // 3 x [2, 4]
        return mul(s[0], s[2]) + s[1];
      });
  add("split", "uneven_some_unused", [](Maker& m) { return Inputs{m.leaf({2, 7})}; },
      [](const Inputs& x) {
        std::vector<Tensor> s = split(x[0], 2, -1);  // widths 2, 2, 2, 1
        return cat({mul(s[0], s[2]), sigmoid(s[3])}, -1);
      });
  add("split_with_sizes", "dim0_strided", [](Maker& m) { return Inputs{m.strided_leaf({5, 3})}; },
      [](const Inputs& x) {
        std::vector<Tensor> s = split_with_sizes(x[0], {1, 3, 1}, 0);
        return cat({mul(s[1], s[1]), s[0] + s[2]}, 0);
      });
}

}  // namespace remora::cases
