// SPDX-License-Identifier: BSD-3-Clause
// Gradient-check and backend-check cases of the losses of ops/losses.h that are
// built from other ops: mse_loss, l1_loss, smooth_l1_loss, nll_loss and
// cross_entropy with label smoothing.
#include "../ops/losses.h"
#include "../ops/ops.h"
#include "cases.h"

namespace remora::cases {

void register_loss_cases() {
  add("mse_loss", "mean", [](Maker& m) { return Inputs{m.leaf({3, 4}), m.leaf({3, 4})}; },
      [](const Inputs& x) { return mse_loss(x[0], x[1]); });
  add("mse_loss", "none_strided", [](Maker& m) { return Inputs{m.strided_leaf({2, 5}), m.value({2, 5})}; },
      [](const Inputs& x) { return mse_loss(x[0], x[1], Reduction::none); });
  add("l1_loss", "sum", [](Maker& m) { return Inputs{m.away_from_zero({3, 4}), m.floats(std::vector<double>(12, 0.0), {3, 4})}; },
      [](const Inputs& x) { return l1_loss(x[0], x[1], Reduction::sum); });
  add("l1_loss", "mean_both", [](Maker& m) { return Inputs{m.leaf({5}), m.leaf({5})}; },
      [](const Inputs& x) { return l1_loss(x[0], x[1]); });
  // Differences on both sides of beta (the two branches).
  add("smooth_l1_loss", "mean_beta",
      [](Maker& m) {
        return Inputs{m.floats({-2.0, -0.3, 0.1, 0.45, 1.7, 3.0}, {2, 3}), m.leaf({2, 3}, -0.2, 0.2)};
      },
      [](const Inputs& x) { return smooth_l1_loss(x[1], x[0], Reduction::mean, 0.8); });
  add("smooth_l1_loss", "none", [](Maker& m) { return Inputs{m.leaf({4, 3}, -3, 3), m.value({4, 3})}; },
      [](const Inputs& x) { return smooth_l1_loss(x[0], x[1], Reduction::none); });
  add("nll_loss", "mean_ignore",
      [](Maker& m) { return Inputs{m.leaf({4, 5}), m.ids({1, -100, 4, 0}, {4})}; },
      [](const Inputs& x) { return nll_loss(x[0], x[1]); });
  add("nll_loss", "sum_3d_strided",
      [](Maker& m) { return Inputs{m.strided_leaf({2, 3, 4}), m.ids({0, 3, 2, 1, 1, 0}, {2, 3})}; },
      [](const Inputs& x) { return nll_loss(x[0], x[1], -100, Reduction::sum); });
  add("nll_loss", "none_ignore_class",
      [](Maker& m) { return Inputs{m.leaf({3, 4}), m.ids({3, 0, 2}, {3})}; },
      [](const Inputs& x) { return nll_loss(x[0], x[1], 0, Reduction::none); });
  add("cross_entropy", "label_smoothing_mean_ignore",
      [](Maker& m) { return Inputs{m.leaf({4, 5}), m.ids({1, -100, 4, 0}, {4})}; },
      [](const Inputs& x) { return cross_entropy(x[0], x[1], -100, Reduction::mean, 0.1); });
  add("cross_entropy", "label_smoothing_none_3d",
      [](Maker& m) { return Inputs{m.strided_leaf({2, 3, 4}), m.ids({0, 3, 2, 1, 1, 0}, {2, 3})}; },
      [](const Inputs& x) { return cross_entropy(x[0], x[1], -100, Reduction::none, 0.25); });
}

}  // namespace remora::cases
