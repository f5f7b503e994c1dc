// SPDX-License-Identifier: BSD-3-Clause
// The float64 gradient checks of the adaptive softmax (ops/adaptive_softmax.h):
// a head and two tail clusters, with projections (div_val 2 layout),
// without (div_val 1 layout: parts of one weight), and with the clusters' rows
// in the head's weight (SRU++'s layout), every part reached by a target.
#include "../ops/adaptive_softmax.h"
#include "../ops/ops.h"
#include "cases.h"

namespace remora::cases {

namespace {
// n_token 9 = shortlist [0, 4) + clusters [4, 6), [6, 9); hidden width 3.
// Inputs: hidden, w0, b0, p0, w1, b1, p1, w2, b2, p2, cluster_weight, cluster_bias.
Inputs projected(Maker& m) {
  return Inputs{m.leaf({5, 3}),                                // hidden
                m.leaf({4, 4}), m.leaf({4}), m.leaf({3, 4}),   // part 0: width 4
                m.leaf({2, 2}), m.leaf({2}), m.leaf({3, 2}),   // part 1: width 2
                m.leaf({3, 1}), m.leaf({3}), m.leaf({3, 1}),   // part 2: width 1
                m.leaf({2, 4}), m.leaf({2})};
}
AdaptiveSoftmaxWeights projected_weights(const Inputs& x) {
  AdaptiveSoftmaxWeights w;
  w.cutoffs = {4, 6, 9};
  w.weight = {x[1], x[4], x[7]};
  w.bias = {x[2], x[5], x[8]};
  w.proj = {x[3], x[6], x[9]};
  w.cluster_weight = x[10];
  w.cluster_bias = x[11];
  return w;
}
// One weight [9, 3] cut into the parts, no projections.
AdaptiveSoftmaxWeights sliced_weights(const Inputs& x) {
  AdaptiveSoftmaxWeights w;
  w.cutoffs = {4, 6, 9};
  for (auto [lo, hi] : {std::pair<int64_t, int64_t>{0, 4}, {4, 6}, {6, 9}}) {
    w.weight.push_back(slice(x[1], 0, lo, hi));
    w.bias.push_back(slice(x[2], 0, lo, hi));
    w.proj.push_back(Tensor());
  }
  w.cluster_weight = x[3];
  w.cluster_bias = x[4];
  return w;
}
// SRU++'s layout: the head's weight [4 + 2, 4] and bias [6] end with the
// clusters' rows; every part has a projection.
AdaptiveSoftmaxWeights head_rows_weights(const Inputs& x) {
  AdaptiveSoftmaxWeights w = projected_weights(x);
  w.weight[0] = cat({x[1], x[10]}, 0);
  w.bias[0] = cat({x[2], x[11]}, 0);
  w.cluster_weight = Tensor();
  w.cluster_bias = Tensor();
  return w;
}
Inputs sliced(Maker& m) { return Inputs{m.leaf({6, 3}), m.leaf({9, 3}), m.leaf({9}), m.leaf({2, 3}), m.leaf({2})}; }
}  // namespace

void register_adaptive_cases() {
  add("adaptive_log_softmax_nll", "projected_all_parts",
      [](Maker& m) {
        Inputs x = projected(m);
        x.push_back(m.ids({0, 5, 8, 3, 6}, {5}));
        return x;
      },
      [](const Inputs& x) { return adaptive_log_softmax_nll(x[0], x[12], projected_weights(x)); });
  add("adaptive_log_softmax_nll", "sliced_repeated_targets",
      [](Maker& m) {
        Inputs x = sliced(m);
        x.push_back(m.ids({7, 1, 7, 4, 1, 8}, {6}));
        return x;
      },
      [](const Inputs& x) { return adaptive_log_softmax_nll(x[0], x[5], sliced_weights(x)); });
  add("adaptive_log_softmax_nll", "head_rows_all_parts",
      [](Maker& m) {
        Inputs x = projected(m);
        x.push_back(m.ids({6, 1, 4, 8, 2}, {5}));
        return x;
      },
      [](const Inputs& x) { return adaptive_log_softmax_nll(x[0], x[12], head_rows_weights(x)); });
  add("adaptive_log_prob", "head_rows", projected,
      [](const Inputs& x) { return adaptive_log_prob(x[0], head_rows_weights(x)); });
  add("adaptive_log_prob", "projected", projected,
      [](const Inputs& x) { return adaptive_log_prob(x[0], projected_weights(x)); });
  add("adaptive_log_prob", "sliced", sliced, [](const Inputs& x) { return adaptive_log_prob(x[0], sliced_weights(x)); });
}

}  // namespace remora::cases
