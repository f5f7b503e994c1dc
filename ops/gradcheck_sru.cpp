// Float64 gradient checks of sru_recurrence (SPEC §10), for every input: U,
// x, v, b and c0, with and without the dropout mask, bidirectional and k = 4.
// The checked output joins h, c and c_last, so all three gradient paths
// (dh, dc, dc_last) enter the backward.
#include <functional>

#include "../core/generator.h"
#include "gradcheck.h"
#include "ops.h"
#include "sru.h"

namespace remora {

namespace {

using Inputs = std::vector<Tensor>;

Tensor leaf(Generator& g, const Shape& s, double lo = 0, double hi = 0) {
  Tensor t = lo < hi ? Tensor::rand(s, DType::f64, Device::cpu(), &g) * (hi - lo) + lo
                     : Tensor::randn(s, DType::f64, Device::cpu(), &g);
  return t.detach().requires_grad_();
}

// A non-contiguous leaf: the permuted view of a buffer with reversed dims.
Tensor strided_leaf(Generator& g, const Shape& s) {
  Shape rev(s.rbegin(), s.rend()), perm;
  for (int64_t i = int64_t(s.size()) - 1; i >= 0; --i) perm.push_back(i);
  return leaf(g, rev).detach().permute(perm).detach().requires_grad_();
}

// A dropout-style mask [B, D]: 0 or 1 / (1 - p) with p = 0.25 (a constant).
Tensor drop_mask(int64_t B, int64_t D) {
  std::vector<double> m;
  for (int64_t i = 0; i < B * D; ++i) m.push_back(i % 3 == 1 ? 0.0 : 1.0 / 0.75);
  return Tensor::from_vector(m, {B, D}, DType::f64);
}

Tensor joined(const SruOutput& o) {
  return cat({o.h.reshape({-1}), o.c.reshape({-1}), o.c_last.reshape({-1})}, 0);
}

void add(const std::string& variant, std::function<Inputs(Generator&)> make, GradFn fn) {
  const std::string name = "sru_recurrence/" + variant;
  const uint64_t seed = std::hash<std::string>{}(name);
  register_gradcheck({"sru_recurrence", name,
                      [make, seed]() {
                        Generator g(seed);
                        return make(g);
                      },
                      std::move(fn), GradcheckOptions{}});
}

}  // namespace

void register_sru_gradchecks() {
  constexpr int64_t L = 4, B = 2, D = 4;
  // Inputs: U, x (k = 3), v, b, then c0 where used.
  add("k3",
      [](Generator& g) {
        return Inputs{leaf(g, {L, B, D, 3}), leaf(g, {L, B, D}), leaf(g, {2, D}, -1, 1),
                      leaf(g, {2, D}, -1, 1)};
      },
      [](const Inputs& x) { return joined(sru_recurrence(x[0], x[1], x[2], x[3])); });
  add("k3_c0_mask_noncontiguous",
      [](Generator& g) {
        return Inputs{strided_leaf(g, {L, B, D, 3}), strided_leaf(g, {L, B, D}),
                      leaf(g, {2, D}, -1, 1), leaf(g, {2, D}, -1, 1), leaf(g, {B, D})};
      },
      [](const Inputs& x) {
        return joined(sru_recurrence(x[0], x[1], x[2], x[3], x[4], drop_mask(B, D)));
      });
  add("k3_bidirectional_c0",
      [](Generator& g) {
        return Inputs{leaf(g, {L, B, D, 3}), leaf(g, {L, B, D}), leaf(g, {2, D}, -1, 1),
                      leaf(g, {2, D}, -1, 1), leaf(g, {B, D})};
      },
      [](const Inputs& x) {
        return joined(sru_recurrence(x[0], x[1], x[2], x[3], x[4], Tensor(), true));
      });
  // k = 4: no x (u3 is x'), inputs U, v, b, c0.
  add("k4_c0",
      [](Generator& g) {
        return Inputs{leaf(g, {L, B, D, 4}), leaf(g, {2, D}, -1, 1), leaf(g, {2, D}, -1, 1),
                      leaf(g, {B, D})};
      },
      [](const Inputs& x) { return joined(sru_recurrence(x[0], Tensor(), x[1], x[2], x[3])); });
  add("k4_bidirectional_c0_mask",
      [](Generator& g) {
        return Inputs{leaf(g, {L, B, D, 4}), leaf(g, {2, D}, -1, 1), leaf(g, {2, D}, -1, 1),
                      leaf(g, {B, D})};
      },
      [](const Inputs& x) {
        return joined(sru_recurrence(x[0], Tensor(), x[1], x[2], x[3], drop_mask(B, D), true));
      });
  // Only h used (dc and dc_last stay undefined in the backward).
  add("k3_h_only_mask",
      [](Generator& g) {
        return Inputs{leaf(g, {L, B, D, 3}), leaf(g, {L, B, D}), leaf(g, {2, D}, -1, 1),
                      leaf(g, {2, D}, -1, 1), leaf(g, {B, D})};
      },
      [](const Inputs& x) {
        return sru_recurrence(x[0], x[1], x[2], x[3], x[4], drop_mask(B, D)).h;
      });
}

}  // namespace remora
