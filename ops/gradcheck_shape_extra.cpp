// Float64 gradient checks of the one-node splitting ops unbind, split and
// split_with_sizes (ops/shape.cpp): some outputs unused (their gradient is zeros),
// non-contiguous inputs, a middle dim, an uneven last part.
//
// Kept out of gradcheck_cases.cpp so the registry files need no edit here:
// register_shape_extra_gradchecks() adds these cases to the registry (called once
// where the registry is built, ops/gradcheck.cpp); shape_extra_gradcheck_cases() hands
// them to a test directly (tests/test_ops.cpp runs them either way).
#include <functional>
#include <string>
#include <vector>

#include "../core/generator.h"
#include "gradcheck.h"
#include "ops.h"

namespace remora {

namespace {

using Inputs = std::vector<Tensor>;

Tensor leaf(Generator& g, const Shape& s) {
  return Tensor::randn(s, DType::f64, Device::cpu(), &g).detach().requires_grad_();
}

// A non-contiguous leaf of shape s: the transpose of a [s reversed] buffer.
Tensor strided_leaf(Generator& g, const Shape& s) {
  Shape rev(s.rbegin(), s.rend()), perm;
  for (int64_t i = int64_t(s.size()) - 1; i >= 0; --i) perm.push_back(i);
  return leaf(g, rev).detach().permute(perm).detach().requires_grad_();
}

GradcheckCase make_case(const std::string& op, const std::string& variant,
                        std::function<Inputs(Generator&)> make, GradFn fn) {
  const std::string name = op + "/" + variant;
  const uint64_t seed = std::hash<std::string>{}(name);
  return {op, name,
          [make, seed]() {
            Generator g(seed);
            return make(g);
          },
          std::move(fn), GradcheckOptions{}};
}

}  // namespace

std::vector<GradcheckCase> shape_extra_gradcheck_cases() {
  std::vector<GradcheckCase> cs;
  cs.push_back(make_case("unbind", "dim0_some_unused", [](Generator& g) { return Inputs{leaf(g, {4, 2, 3})}; },
                         [](const Inputs& x) {
                           std::vector<Tensor> s = unbind(x[0], 0);
                           return cat({mul(s[0], s[3]), tanh(s[1])}, 0);
                         }));
  cs.push_back(make_case("unbind", "middle_dim_strided", [](Generator& g) { return Inputs{strided_leaf(g, {2, 3, 4})}; },
                         [](const Inputs& x) {
                           std::vector<Tensor> s = unbind(x[0], 1);  // 3 x [2, 4]
                           return mul(s[0], s[2]) + s[1];
                         }));
  cs.push_back(make_case("split", "uneven_some_unused", [](Generator& g) { return Inputs{leaf(g, {2, 7})}; },
                         [](const Inputs& x) {
                           std::vector<Tensor> s = split(x[0], 2, -1);  // widths 2, 2, 2, 1
                           return cat({mul(s[0], s[2]), sigmoid(s[3])}, -1);
                         }));
  cs.push_back(make_case("split_with_sizes", "dim0_strided", [](Generator& g) { return Inputs{strided_leaf(g, {5, 3})}; },
                         [](const Inputs& x) {
                           std::vector<Tensor> s = split_with_sizes(x[0], {1, 3, 1}, 0);
                           return cat({mul(s[1], s[1]), s[0] + s[2]}, 0);
                         }));
  return cs;
}

void register_shape_extra_gradchecks() {
  for (GradcheckCase& c : shape_extra_gradcheck_cases()) register_gradcheck(std::move(c));
}

}  // namespace remora
