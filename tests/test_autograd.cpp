// SPDX-License-Identifier: BSD-3-Clause
// The autograd engine: gradient summation, accumulation, retain_graph,
// detach, no-grad mode, release of saved tensors.
#include <catch2/catch.hpp>
#include <pthread.h>

#include <memory>

#include <remora/remora.h>

#include "../core/tensor_impl.h"
#include "helpers.h"

using namespace remora;
using remora_test::check_close;

namespace {
Tensor leaf(const std::vector<double>& v, const Shape& s = {}) {
  return Tensor::from_vector(v, s, DType::f64).requires_grad_();
}
}  // namespace

TEST_CASE("a reused tensor gets the sum of its gradients", "[autograd]") {
  Tensor a = leaf({1, 2, 3});
  Tensor b = a + a;  // db/da = 2
  b.sum().backward();
  check_close(a.grad(), {2, 2, 2}, 0, 0);

  // x * x: both inputs of one node are the same leaf.
  Tensor x = leaf({3, -1});
  (x * x).sum().backward();
  check_close(x.grad(), {6, -2}, 0, 0);
}

TEST_CASE("a diamond graph sums both paths", "[autograd]") {
  // x -> h = 2x -> (h^2, 3h) -> y = sum(h^2 + 3h); dy/dx = 2 * (2h + 3)
  Tensor x = leaf({0.5, -1, 2});
  Tensor h = x * 2.0;
  Tensor left = h * h;
  Tensor right = h * 3.0;
  Tensor y = (left + right).sum();
  y.backward();
  std::vector<double> want;
  for (double v : {0.5, -1.0, 2.0}) want.push_back(2 * (2 * (2 * v) + 3));
  check_close(x.grad(), want, 1e-12, 0);
}

TEST_CASE("a deep chain backpropagates through every node", "[autograd]") {
  // y = x * 1.0001^5000 through 5000 nodes: no recursion limits, no lost factors.
  Tensor x = leaf({1.5});
  Tensor h = x;
  for (int i = 0; i < 5000; ++i) h = h * 1.0001;
  h.sum().backward();
  check_close(x.grad(), {std::pow(1.0001, 5000)}, 0, 1e-10);

  // g_{i+1} = tanh(g_i) + 0.1, 300 times; dg/dz is the product of tanh'.
  Tensor z = leaf({0.3});
  Tensor g = z;
  double v = 0.3, d = 1.0;
  for (int i = 0; i < 300; ++i) {
    g = tanh(g) + 0.1;
    d *= 1 - std::tanh(v) * std::tanh(v);
    v = std::tanh(v) + 0.1;
  }
  g.sum().backward();
  check_close(g, {v}, 1e-12, 0);
  REQUIRE(d > 1e-100);  // the reference has not underflowed
  check_close(z.grad(), {d}, 0, 1e-9);
}

TEST_CASE("dropping a very deep graph does not overflow the stack", "[autograd]") {
  // A 100k-node chain freed on a thread with a 256 KiB stack: destroying it
  // recursively (one frame group per node) would need megabytes.
  Tensor x = leaf({1});
  auto* h = new Tensor(x);
  for (int i = 0; i < 100000; ++i) *h = *h * 1.0;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  REQUIRE(pthread_attr_setstacksize(&attr, 256 * 1024) == 0);
  pthread_t t;
  REQUIRE(pthread_create(&t, &attr, [](void* p) -> void* {
            delete static_cast<Tensor*>(p);
            return nullptr;
          }, h) == 0);
  pthread_join(t, nullptr);
  pthread_attr_destroy(&attr);
  CHECK(x.grad_fn() == nullptr);
}

TEST_CASE("leaf gradients accumulate until zero_grad", "[autograd]") {
  Tensor w = leaf({1, 2});
  (w * 3.0).sum().backward();
  check_close(w.grad(), {3, 3}, 0, 0);
  (w * w).sum().backward();  // adds 2w
  check_close(w.grad(), {5, 7}, 0, 0);
  w.zero_grad();
  CHECK_FALSE(w.grad().defined());
  (w * 3.0).sum().backward();
  check_close(w.grad(), {3, 3}, 0, 0);

  // The first gradient is a private copy: changing it does not touch graph buffers.
  Tensor u = leaf({1, 1});
  Tensor gout = Tensor::from_vector(std::vector<double>{4, 5}, {2}, DType::f64);
  (u * 1.0).backward(gout);
  check_close(u.grad(), {4, 5}, 0, 0);
  CHECK_FALSE(u.grad().is_same(gout));
  CHECK(u.grad().impl()->storage != gout.impl()->storage);
}

TEST_CASE("a leaf's first gradient is taken over only when nothing else can reach it",
          "[autograd]") {
  // Copied: the root gradient the caller passed, reaching the leaf through a
  // reshape (a view of the caller's tensor), and through identity-like ops.
  Tensor x = leaf({1, 2, 3, 4}, {2, 2});
  Tensor gout = Tensor::from_vector(std::vector<double>{4, 5, 6, 7}, {4}, DType::f64);
  x.reshape({4}).backward(gout);
  CHECK(x.grad().impl()->storage != gout.impl()->storage);
  gout.fill_(0);
  check_close(x.grad(), {4, 5, 6, 7}, 0, 0);

  // a + b passes one gradient to both leaves: each gets its own memory.
  Tensor a = leaf({1, 2}), b = leaf({3, 4});
  (a + b).backward(Tensor::from_vector(std::vector<double>{1, 1}, {2}, DType::f64));
  CHECK(a.grad().impl()->storage != b.grad().impl()->storage);
  Tensor ga = a.grad();
  ga.fill_(9);
  check_close(b.grad(), {1, 1}, 0, 0);

  // A slice's backward writes into a larger zero buffer: a view of part of a
  // storage is copied, never kept (it would pin the rest).
  Tensor w = leaf({1, 2, 3, 4});
  (w.slice(0, 1, 3) * 2.0).sum().backward();
  check_close(w.grad(), {0, 2, 2, 0}, 0, 0);

  // Taken over: a fresh product (mul's backward allocates it; nothing else
  // holds it), so the gradient's memory is that tensor's, and later
  // accumulation adds into it.
  Tensor u = leaf({1, -1, 2});
  Tensor c = Tensor::from_vector(std::vector<double>{3, 4, 5}, {3}, DType::f64);
  (u * c).backward(Tensor::from_vector(std::vector<double>{1, 2, 3}, {3}, DType::f64));
  check_close(u.grad(), {3, 8, 15}, 0, 0);
  CHECK(u.grad().impl()->storage.use_count() == 1);
  (u * c).sum().backward();
  check_close(u.grad(), {6, 12, 20}, 0, 0);
  check_close(c, {3, 4, 5}, 0, 0);  // the saved operand untouched
}

TEST_CASE("an output the loss does not reach gets zeros, or nothing when the node takes that",
          "[autograd]") {
  for (bool optional : {false, true}) {
    Tensor x = leaf({1, 2, 3});
    bool saw_second = false, second_zero = false;
    // Two outputs (2x, 3x); the loss uses only the first.
    auto fn = [&](std::vector<Tensor>& g) {
      saw_second = g[1].defined();
      if (saw_second) second_zero = g[1].abs().sum().item() == 0;
      Tensor d = g[0] * 2.0;
      if (g[1].defined()) d = d + g[1] * 3.0;
      return std::vector<Tensor>{d};
    };
    std::vector<Tensor> outs = {x.detach() * 2.0, x.detach() * 3.0};
    outs = optional ? record_optional_grads("two", {x}, outs, fn) : record("two", {x}, outs, fn);
    outs[0].sum().backward();
    CHECK(saw_second == !optional);
    if (!optional) CHECK(second_zero);
    check_close(x.grad(), {2, 2, 2}, 0, 0);
  }
}

TEST_CASE("NoGradGuard records no history", "[autograd]") {
  Tensor x = leaf({1, 2});
  {
    NoGradGuard ng;
    CHECK_FALSE(GradMode::is_enabled());
    Tensor y = x * x + 1.0;
    CHECK_FALSE(y.requires_grad());
    CHECK(y.grad_fn() == nullptr);
    CHECK(y.is_leaf());
    Tensor m = matmul(x.reshape({1, 2}), x.reshape({2, 1}));
    CHECK_FALSE(m.requires_grad());
    {
      NoGradGuard nested;
      CHECK_FALSE(GradMode::is_enabled());
    }
    CHECK_FALSE(GradMode::is_enabled());  // nested guard restores "off"
  }
  CHECK(GradMode::is_enabled());
  Tensor z = x * x;
  CHECK(z.requires_grad());
  CHECK(z.grad_fn() != nullptr);
  CHECK(z.grad_fn()->name() == "mul");
}

TEST_CASE("retain_graph allows a second backward", "[autograd]") {
  Tensor x = leaf({1, 2, 3});
  Tensor y = (x * x).sum();
  y.backward(Tensor(), /*retain_graph=*/true);
  y.backward();
  check_close(x.grad(), {4, 8, 12}, 0, 0);

  Tensor x2 = leaf({1, 2, 3});
  Tensor y2 = exp(x2).sum();
  y2.backward();
  CHECK_THROWS_AS(y2.backward(), Error);
  CHECK_THROWS_WITH(y2.backward(), Catch::Contains("retain_graph"));
}

TEST_CASE("detach cuts history", "[autograd]") {
  Tensor x = leaf({1, 2});
  Tensor h = x * 3.0;
  Tensor d = h.detach();
  CHECK_FALSE(d.requires_grad());
  CHECK(d.is_leaf());
  CHECK(d.impl()->storage == h.impl()->storage);  // shares memory
  // y = x * detach(3x): only the direct path carries gradient.
  Tensor y = (x * d).sum();
  y.backward();
  check_close(x.grad(), {3, 6}, 0, 0);
  // A detached tensor can become a new leaf.
  Tensor n = h.detach().requires_grad_();
  (n * n).sum().backward();
  check_close(n.grad(), {6, 12}, 0, 0);
}

TEST_CASE("backward of a non-scalar needs an explicit gradient", "[autograd]") {
  Tensor x = leaf({1, 2, 3, 4}, {2, 2});
  Tensor y = x * 2.0;  // [2, 2]
  CHECK_THROWS_AS(y.backward(), Error);
  CHECK_THROWS_WITH(y.backward(), Catch::Contains("[2, 2]") && Catch::Contains("scalar"));
  // A gradient of the wrong shape is rejected too.
  CHECK_THROWS_WITH(y.backward(Tensor::ones({4}, DType::f64)), Catch::Contains("backward"));

  Tensor g = Tensor::from_vector(std::vector<double>{1, 0, -1, 2}, {2, 2}, DType::f64);
  y.backward(g);
  check_close(x.grad(), {2, 0, -2, 4}, 0, 0);

  // A [1]-shaped output counts as a scalar.
  Tensor z = leaf({5});
  (z * z).backward();
  check_close(z.grad(), {10}, 0, 0);
}

TEST_CASE("broadcast gradients are reduced to the input shape", "[autograd]") {
  // a: [2, 1, 3], b: [4, 1] -> a * b: [2, 4, 3]
  Tensor a = Tensor::randn({2, 1, 3}, DType::f64).requires_grad_();
  Tensor b = Tensor::randn({4, 1}, DType::f64).requires_grad_();
  Tensor s = Tensor::scalar(2.0, DType::f64).requires_grad_();
  Tensor y = (a * b + s).sum();
  y.backward();
  REQUIRE(a.grad().shape() == Shape{2, 1, 3});
  REQUIRE(b.grad().shape() == Shape{4, 1});
  REQUIRE(s.grad().shape() == Shape{});
  // da[i, 0, k] = sum_j b[j]; db[j] = sum_{i,k} a[i, 0, k]; ds = 2 * 4 * 3
  const std::vector<double> av = a.to_vector(), bv = b.to_vector();
  double sb = 0, sa = 0;
  for (double v : bv) sb += v;
  for (double v : av) sa += v;
  check_close(a.grad(), std::vector<double>(6, sb), 1e-12, 1e-12);
  check_close(b.grad(), std::vector<double>(4, sa), 1e-12, 1e-12);
  check_close(s.grad(), {24}, 0, 0);
}

TEST_CASE("only inputs that require grad get gradients", "[autograd]") {
  Tensor x = leaf({1, 2});
  Tensor c = Tensor::from_vector(std::vector<double>{3, 4}, {2}, DType::f64);  // constant
  Tensor y = (x * c + c * c).sum();
  y.backward();
  check_close(x.grad(), {3, 4}, 0, 0);
  CHECK_FALSE(c.grad().defined());
  CHECK_FALSE(c.requires_grad());

  // A leaf switched off with requires_grad_(false) is a constant.
  Tensor w = leaf({1, 1});
  w.requires_grad_(false);
  Tensor x2 = leaf({2, 2});
  (w * x2).sum().backward();
  CHECK_FALSE(w.grad().defined());
  check_close(x2.grad(), {1, 1}, 0, 0);

  // backward from something that does not require grad is an error.
  CHECK_THROWS_WITH((c * c).sum().backward(), Catch::Contains("does not require grad"));
}

TEST_CASE("non-leaf tensors do not get .grad", "[autograd]") {
  Tensor x = leaf({1, 2});
  Tensor h = x * 2.0;
  CHECK_FALSE(h.is_leaf());
  CHECK(h.requires_grad());
  (h * h).sum().backward();
  CHECK_FALSE(h.grad().defined());
  check_close(x.grad(), {8, 16}, 0, 0);
  // requires_grad_ on a non-leaf is refused.
  CHECK_THROWS_WITH(h.requires_grad_(), Catch::Contains("leaf"));
}

TEST_CASE("saved tensors are released after backward", "[autograd]") {
  Tensor x = Tensor::randn({4, 3}, DType::f64).requires_grad_();

  SECTION("an index tensor captured by index_select") {
    std::weak_ptr<TensorImpl> idx_impl;
    Tensor loss;
    {
      Tensor idx = Tensor::from_vector(std::vector<int64_t>{2, 0, 2});
      idx_impl = idx.impl_ptr();
      loss = index_select(x, 0, idx).sum();
    }
    // Only the graph holds the index now.
    CHECK_FALSE(idx_impl.expired());
    loss.backward();
    CHECK(idx_impl.expired());
  }
  SECTION("the storage of a constant captured by mul") {
    std::weak_ptr<Storage> store;
    Tensor loss;
    {
      Tensor c = Tensor::randn({4, 3}, DType::f64);
      store = c.impl()->storage;
      loss = (x * c).sum();
    }
    CHECK_FALSE(store.expired());
    loss.backward();
    CHECK(store.expired());
  }
  SECTION("retain_graph keeps them alive") {
    std::weak_ptr<TensorImpl> idx_impl;
    Tensor loss;
    {
      Tensor idx = Tensor::from_vector(std::vector<int64_t>{1});
      idx_impl = idx.impl_ptr();
      loss = index_select(x, 0, idx).sum();
    }
    loss.backward(Tensor(), true);
    CHECK_FALSE(idx_impl.expired());
    loss.backward();
    CHECK(idx_impl.expired());
    // Two backwards: row 1 got 2 per element.
    check_close(x.grad().select(0, 1), {2, 2, 2}, 0, 0);
  }
  SECTION("the graph is freed with its last handle") {
    std::weak_ptr<Node> node;
    {
      Tensor y = exp(x).sum();
      node = y.grad_fn();
      CHECK_FALSE(node.expired());
    }
    CHECK(node.expired());
  }
}

TEST_CASE("multi-output ops: chunk and cat", "[autograd]") {
  // x: [6]; chunks of 2 used with different weights
  Tensor x = leaf({1, 2, 3, 4, 5, 6});
  std::vector<Tensor> parts = chunk(x, 3, 0);
  REQUIRE(parts.size() == 3);
  Tensor y = (parts[0] * 1.0).sum() + (parts[2] * 3.0).sum();  // parts[1] unused
  y.backward();
  check_close(x.grad(), {1, 1, 0, 0, 3, 3}, 0, 0);

  // cat of a tensor with itself: both slices flow back to it.
  Tensor a = leaf({1, 2}, {1, 2});
  Tensor b = leaf({3, 4, 5, 6}, {2, 2});
  Tensor c = cat({a, b, a}, 0);  // [4, 2]
  REQUIRE(c.shape() == Shape{4, 2});
  Tensor w = Tensor::from_vector(std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8}, {4, 2}, DType::f64);
  (c * w).sum().backward();
  check_close(a.grad(), {1 + 7, 2 + 8}, 0, 0);
  check_close(b.grad(), {3, 4, 5, 6}, 0, 0);

  // stack + views: the gradient of a select flows to one slot only.
  Tensor p = leaf({1, 2});
  Tensor q = leaf({3, 4});
  Tensor st = stack({p, q}, 1);  // [2, 2]
  st.select(1, 1).sum().backward();
  check_close(q.grad(), {1, 1}, 0, 0);
  // p is an input of stack: it gets zeros (or no gradient at all).
  if (p.grad().defined()) check_close(p.grad(), {0, 0}, 0, 0);
}

TEST_CASE("backward from several roots at once", "[autograd]") {
  Tensor x = leaf({1, 2});
  Tensor y1 = (x * x).sum();
  Tensor y2 = (x * 5.0).sum();
  backward({y1, y2}, {Tensor(), Tensor()});
  check_close(x.grad(), {7, 9}, 0, 0);
}

TEST_CASE("integer tensors cannot require grad", "[autograd]") {
  Tensor i = Tensor::arange(3);
  CHECK_THROWS_AS(i.requires_grad_(), Error);
  CHECK_THROWS_WITH(i.requires_grad_(), Catch::Contains("i64"));
  CHECK_FALSE(i.requires_grad());
  i.requires_grad_(false);  // turning it off is fine
  // argmax of a tensor with history is an integer tensor without history.
  Tensor x = leaf({1, 3, 2});
  Tensor am = argmax(x, 0);
  CHECK(am.dtype() == DType::i64);
  CHECK_FALSE(am.requires_grad());
  CHECK(am.item() == 1);
}

TEST_CASE("gradients through views and dtype conversions", "[autograd]") {
  // x: [2, 3]; y = sum(x^T[1:, :] * w) through transpose + slice
  Tensor x = leaf({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor v = x.t().slice(0, 1, 3);  // [2, 2] = x[:, 1:]^T
  Tensor w = Tensor::from_vector(std::vector<double>{1, 2, 3, 4}, {2, 2}, DType::f64);
  (v * w).sum().backward();
  // v[a, b] = x[b, a + 1], so d/dx[b, a + 1] = w[a, b]
  check_close(x.grad(), {0, 1, 3, 0, 2, 4}, 0, 0);

  // f64 -> f32 -> f64 carries gradient in the leaf's dtype.
  Tensor z = leaf({1.5, 2.5});
  Tensor zz = z.to(DType::f32) * 2.0;
  zz.to(DType::f64).sum().backward();
  REQUIRE(z.grad().dtype() == DType::f64);
  check_close(z.grad(), {2, 2}, 0, 0);
}

TEST_CASE("checkpoint: the gradients of the block's inputs and of what it reads, as without it", "[autograd][checkpoint]") {
  Generator g0(3);
  Tensor w = Tensor::randn({4, 3}, DType::f64, Device::cpu(), &g0).requires_grad_();  // read, not an input
  Tensor x0 = Tensor::randn({5, 4}, DType::f64, Device::cpu(), &g0);
  Generator drop(9);
  auto block = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{tanh(dropout(matmul(in[0], w), 0.5, true, &drop))};
  };
  auto run = [&](bool recompute, Tensor* dx, Tensor* dw) {
    w.zero_grad();
    Tensor x = x0.detach().requires_grad_();
    drop.manual_seed(21);
    Tensor y = recompute ? checkpoint(block, {mul(x, x)}, &drop)[0] : block({mul(x, x)})[0];
    const uint64_t after = drop.offset();
    sum(mul(y, y)).backward();
    CHECK(drop.offset() == after);  // the recomputation restores the generator
    *dx = x.grad();
    *dw = w.grad();
    return y.detach();
  };
  Tensor dx1, dw1, dx2, dw2;
  Tensor y1 = run(false, &dx1, &dw1), y2 = run(true, &dx2, &dw2);
  check_close(y2, y1, 0, 0);
  check_close(dx2, dx1, 1e-15, 1e-15);
  check_close(dw2, dw1, 1e-15, 1e-15);
}

TEST_CASE("checkpoint: keeps no intermediate tensor, records nothing without grad mode, and takes edge cases",
          "[autograd][checkpoint]") {
  Tensor x = Tensor::randn({64, 64}, DType::f64).requires_grad_();
  std::weak_ptr<TensorImpl> inner;
  auto block = [&](const std::vector<Tensor>& in) {
    Tensor h = exp(in[0]);  // an intermediate that exp's backward would keep
    inner = h.impl_ptr();
    return std::vector<Tensor>{sum(h)};
  };
  Tensor y = checkpoint(block, {x})[0];
  CHECK(inner.expired());  // nothing holds the block's intermediate until backward
  CHECK(y.requires_grad());
  y.backward();
  check_close(x.grad(), exp(x.detach()), 1e-15, 1e-15);
  {
    NoGradGuard ng;
    CHECK_FALSE(checkpoint(block, {x})[0].requires_grad());
  }
  // An input returned as it is gets its own node output, not the input's handle.
  Tensor z = checkpoint([](const std::vector<Tensor>& in) { return in; }, {x})[0];
  CHECK(x.is_leaf());
  CHECK_FALSE(z.is_leaf());
  CHECK_THROWS_WITH(checkpoint([](const std::vector<Tensor>&) { return std::vector<Tensor>{Tensor()}; }, {x}),
                    Catch::Contains("output 0 of the block is undefined"));
  // No input requires grad: the block runs recorded as usual (the parameter still gets its gradient).
  Tensor w = Tensor::ones({3}, DType::f64).requires_grad_();
  Tensor c = Tensor::full({3}, 2.0, DType::f64);
  sum(checkpoint([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{mul(in[0], w)}; }, {c})[0])
      .backward();
  check_close(w.grad(), c, 0, 0);
}

TEST_CASE("checkpoint: a block that fails when it runs again leaves the generator as it was", "[autograd][checkpoint]") {
  Generator gen(5);
  bool fail = false;
  Tensor x = Tensor::randn({4}, DType::f64).requires_grad_();
  auto block = [&](const std::vector<Tensor>& in) {
    if (fail) throw Error("the block failed");
    return std::vector<Tensor>{dropout(in[0], 0.5, true, &gen)};
  };
  Tensor y = checkpoint(block, {x}, &gen)[0];
  const uint64_t offset = gen.offset();
  fail = true;
  CHECK_THROWS_WITH(sum(y).backward(), Catch::Contains("the block failed"));
  CHECK(gen.offset() == offset);
}
