// SPDX-License-Identifier: BSD-3-Clause
// The gradient-accumulated hook of the autograd engine (core/grad_hooks.h).
#include <catch2/catch.hpp>

#include <algorithm>
#include <vector>

#include "../core/grad_hooks.h"
#include <remora/remora.h>

using namespace remora;

TEST_CASE("grad hook runs once per backward, after the leaf's gradient is accumulated", "[grad_hooks]") {
  Tensor w = Tensor::from_vector(std::vector<double>{1, 2, 3}, {3}, DType::f64).requires_grad_();
  std::vector<std::vector<double>> seen;
  GradHookHandle h = on_grad_accumulated(w, [&](const Tensor& leaf) {
    REQUIRE(leaf.is_same(w));
    seen.push_back(leaf.grad().to_vector());
  });
  REQUIRE(num_grad_accumulated_hooks(w) == 1);
  // w is used twice: the engine sums both paths first, the hook sees the total once.
  ((w * w).sum() + (w * 3.0).sum()).backward();
  REQUIRE(seen.size() == 1);
  CHECK(seen[0] == std::vector<double>{5, 7, 9});  // 2w + 3
  // A second backward accumulates on top; the hook sees the accumulated value.
  (w * 2.0).sum().backward();
  REQUIRE(seen.size() == 2);
  CHECK(seen[1] == std::vector<double>{7, 9, 11});
  h.reset();
  CHECK_FALSE(h.active());
  CHECK(num_grad_accumulated_hooks(w) == 0);
  (w * 2.0).sum().backward();
  CHECK(seen.size() == 2);
}

TEST_CASE("grad hooks: order, unreached leaves, handle lifetime, errors", "[grad_hooks]") {
  Tensor a = Tensor::ones({2}).requires_grad_();
  Tensor b = Tensor::ones({2}).requires_grad_();
  std::vector<std::string> log;
  {
    GradHookHandle h1 = on_grad_accumulated(a, [&](const Tensor&) { log.push_back("a1"); });
    GradHookHandle h2 = on_grad_accumulated(a, [&](const Tensor&) { log.push_back("a2"); });
    GradHookHandle hb = on_grad_accumulated(b, [&](const Tensor&) { log.push_back("b"); });
    (a * 2.0).sum().backward();  // b is not reached: its hook does not run
    CHECK(log == std::vector<std::string>{"a1", "a2"});
    GradHookHandle moved = std::move(h1);
    CHECK_FALSE(h1.active());
    CHECK(moved.active());
  }  // handles dropped: hooks removed
  CHECK(num_grad_accumulated_hooks(a) == 0);
  CHECK(num_grad_accumulated_hooks(b) == 0);
  log.clear();
  (a * b).sum().backward();
  CHECK(log.empty());

  // Not a leaf that requires grad.
  Tensor c = a * 2.0;
  CHECK_THROWS_WITH(on_grad_accumulated(c, [](const Tensor&) {}), Catch::Contains("not a leaf"));
  CHECK_THROWS_WITH(on_grad_accumulated(Tensor::ones({2}), [](const Tensor&) {}),
                    Catch::Contains("not a leaf that requires grad"));

  // An exception in a hook propagates out of backward().
  GradHookHandle bad = on_grad_accumulated(a, [](const Tensor&) { throw Error("hook failed"); });
  CHECK_THROWS_WITH((a * 2.0).sum().backward(), Catch::Contains("hook failed"));
}

TEST_CASE("grad hook of a dead leaf never runs for a new tensor", "[grad_hooks]") {
  int calls = 0;
  GradHookHandle h;
  {
    Tensor t = Tensor::ones({4}).requires_grad_();
    h = on_grad_accumulated(t, [&](const Tensor&) { ++calls; });
  }
  for (int i = 0; i < 50; ++i) {  // new leaves may reuse the dead one's address
    Tensor u = Tensor::ones({4}).requires_grad_();
    CHECK(num_grad_accumulated_hooks(u) == 0);
    (u * 2.0).sum().backward();
  }
  CHECK(calls == 0);
}

TEST_CASE("grad hooks fire in backward order: later layers first", "[grad_hooks]") {
  manual_seed(3);
  nn::Linear l1(3, 4), l2(4, 2);
  std::vector<std::string> order;
  std::vector<GradHookHandle> hs;
  for (auto* m : {&l1, &l2})
    for (const auto& kv : m->named_parameters()) {
      std::string name = (m == &l1 ? "l1." : "l2.") + kv.first;
      hs.push_back(on_grad_accumulated(kv.second, [&order, name](const Tensor&) { order.push_back(name); }));
    }
  Tensor x = Tensor::randn({5, 3});
  l2.forward(l1.forward(x).relu()).sum().backward();
  REQUIRE(order.size() == 4);
  // Both of l2's parameters are ready before either of l1's.
  auto pos = [&](const std::string& n) { return std::find(order.begin(), order.end(), n) - order.begin(); };
  CHECK(std::max(pos("l2.weight"), pos("l2.bias")) < std::min(pos("l1.weight"), pos("l1.bias")));
}
