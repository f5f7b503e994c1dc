// SPDX-License-Identifier: BSD-3-Clause
// Tensor basics: factories, random numbers, views, element access, dtype
// conversions, printing and in-place ops.
#include <catch2/catch.hpp>
#include <cmath>
#include <sstream>

#include <remora/remora.h>

#include "../core/tensor_impl.h"
#include "helpers.h"

using namespace remora;
using remora_test::check_close;

namespace {
// Whether two tensors are views of one buffer.
bool same_storage(const Tensor& a, const Tensor& b) {
  return a.impl()->storage == b.impl()->storage;
}
}  // namespace

TEST_CASE("factories give the right shapes, dtypes and values", "[tensor]") {
  Tensor z = Tensor::zeros({2, 3});  // [2, 3] f32
  CHECK(z.shape() == Shape{2, 3});
  CHECK(z.dtype() == DType::f32);
  CHECK(z.device() == Device::cpu());
  CHECK(z.numel() == 6);
  CHECK(z.dim() == 2);
  CHECK(z.is_contiguous());
  CHECK(z.strides() == Shape{3, 1});
  CHECK(z.to_vector() == std::vector<double>(6, 0.0));

  Tensor o = Tensor::ones({4}, DType::f64);
  CHECK(o.dtype() == DType::f64);
  CHECK(o.to_vector() == std::vector<double>(4, 1.0));

  Tensor f = Tensor::full({2, 2}, -3.5, DType::f64);
  CHECK(f.to_vector() == std::vector<double>(4, -3.5));
  Tensor fi = Tensor::full({3}, 7, DType::i64);
  CHECK(fi.dtype() == DType::i64);
  CHECK(fi.to_i64_vector() == std::vector<int64_t>{7, 7, 7});

  Tensor s = Tensor::scalar(2.25, DType::f64);
  CHECK(s.dim() == 0);
  CHECK(s.shape().empty());
  CHECK(s.numel() == 1);
  CHECK(s.item() == 2.25);

  // Zero-size tensors are fine.
  Tensor e = Tensor::zeros({0, 3});
  CHECK(e.numel() == 0);
  CHECK(e.to_vector().empty());

  SECTION("arange") {
    Tensor a = Tensor::arange(5);
    CHECK(a.dtype() == DType::i64);
    CHECK(a.shape() == Shape{5});
    CHECK(a.to_i64_vector() == std::vector<int64_t>{0, 1, 2, 3, 4});
    check_close(Tensor::arange(0, 1, 0.25, DType::f32), {0, 0.25, 0.5, 0.75}, 0, 0);
    CHECK(Tensor::arange(5, 0, -2, DType::i64).to_i64_vector() == std::vector<int64_t>{5, 3, 1});
    CHECK(Tensor::arange(3, 3, 1).numel() == 0);
    CHECK(Tensor::arange(3, 0, 1).numel() == 0);  // wrong direction: empty
    CHECK(Tensor::arange(0, 1, 0.3, DType::f64).numel() == 4);  // 0, .3, .6, .9
  }

  SECTION("from_vector") {
    Tensor d = Tensor::from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3}, DType::f64);
    CHECK(d.shape() == Shape{2, 3});
    CHECK(d.at({1, 0}) == 4);
    CHECK(d.at({-1, -1}) == 6);  // negative indices count from the end
    Tensor fl = Tensor::from_vector(std::vector<float>{0.5f, 1.5f});
    CHECK(fl.shape() == Shape{2});  // empty shape: 1-D
    CHECK(fl.dtype() == DType::f32);
    Tensor iv = Tensor::from_vector(std::vector<int64_t>{3, -1, 4});
    CHECK(iv.dtype() == DType::i64);
    CHECK(iv.to_i64_vector() == std::vector<int64_t>{3, -1, 4});
    // Converted to the requested dtype.
    Tensor conv = Tensor::from_vector(std::vector<double>{1.9, -1.9}, {}, DType::i64);
    CHECK(conv.to_i64_vector() == std::vector<int64_t>{1, -1});
  }

  SECTION("rand and randn") {
    Tensor r = Tensor::rand({3, 5}, DType::f64);
    CHECK(r.shape() == Shape{3, 5});
    CHECK(r.dtype() == DType::f64);
    for (double v : r.to_vector()) {
      CHECK(v >= 0.0);
      CHECK(v < 1.0);
    }
    Tensor n = Tensor::randn({7}, DType::f32);
    CHECK(n.shape() == Shape{7});
    CHECK(n.dtype() == DType::f32);
  }
}

TEST_CASE("seeded generators are reproducible", "[tensor]") {
  Generator g1(42), g2(42), g3(43);
  Tensor a = Tensor::randn({64}, DType::f64, Device::cpu(), &g1);
  Tensor b = Tensor::randn({64}, DType::f64, Device::cpu(), &g2);
  Tensor c = Tensor::randn({64}, DType::f64, Device::cpu(), &g3);
  CHECK(a.to_vector() == b.to_vector());
  CHECK(a.to_vector() != c.to_vector());

  // Each call consumes numel counters, so the next call gives new numbers.
  CHECK(g1.offset() == 64);
  Tensor a2 = Tensor::randn({64}, DType::f64, Device::cpu(), &g1);
  CHECK(a2.to_vector() != a.to_vector());

  // (seed, offset) is the whole state.
  Generator g4(7);
  g4.set_state(42, 64);
  CHECK(Tensor::randn({64}, DType::f64, Device::cpu(), &g4).to_vector() == a2.to_vector());

  // manual_seed resets the global generator.
  manual_seed(123);
  std::vector<double> u1 = Tensor::rand({10}, DType::f64).to_vector();
  manual_seed(123);
  std::vector<double> u2 = Tensor::rand({10}, DType::f64).to_vector();
  CHECK(u1 == u2);

  // f32 and f64 draw the same underlying numbers.
  Generator h1(9), h2(9);
  check_close(Tensor::rand({16}, DType::f32, Device::cpu(), &h1),
              Tensor::rand({16}, DType::f64, Device::cpu(), &h2).to_vector(), 1e-7, 0);
}

TEST_CASE("random numbers do not depend on the thread count", "[tensor]") {
  const int before = get_num_threads();
  // 20000 elements: above the parallel threshold of the random kernels.
  auto draw = [](int threads) {
    set_num_threads(threads);
    Generator g(2024);
    std::vector<double> n = Tensor::randn({20000}, DType::f32, Device::cpu(), &g).to_vector();
    std::vector<double> u = Tensor::rand({20000}, DType::f64, Device::cpu(), &g).to_vector();
    Tensor x = Tensor::ones({20000});
    std::vector<double> m = dropout(x, 0.3, true, &g).to_vector();
    n.insert(n.end(), u.begin(), u.end());
    n.insert(n.end(), m.begin(), m.end());
    return n;
  };
  const std::vector<double> one = draw(1);
  const std::vector<double> two = draw(2);
  set_num_threads(before);
  CHECK(one == two);
}

TEST_CASE("randn and rand have the right moments", "[tensor]") {
  Generator g(1);
  // 100k samples: the standard error of the mean is ~0.003.
  const std::vector<double> n = Tensor::randn({100000}, DType::f64, Device::cpu(), &g).to_vector();
  double s = 0, s2 = 0;
  for (double v : n) s += v;
  const double mean = s / double(n.size());
  for (double v : n) s2 += (v - mean) * (v - mean);
  const double sd = std::sqrt(s2 / double(n.size()));
  CHECK(std::fabs(mean) < 0.02);
  CHECK(std::fabs(sd - 1.0) < 0.02);

  const std::vector<double> u = Tensor::rand({100000}, DType::f64, Device::cpu(), &g).to_vector();
  double su = 0;
  for (double v : u) su += v;
  CHECK(std::fabs(su / double(u.size()) - 0.5) < 0.01);
}

TEST_CASE("views share storage with their base", "[tensor]") {
  // x: [2, 3, 4] = 0 .. 23
  Tensor x = Tensor::arange(24, DType::f32).reshape({2, 3, 4});
  REQUIRE(x.is_contiguous());

  SECTION("reshape of a contiguous tensor is a view") {
    Tensor r = x.reshape({6, 4});
    CHECK(same_storage(r, x));
    CHECK(r.at({5, 3}) == 23);
    Tensor r2 = x.reshape({-1});
    CHECK(r2.shape() == Shape{24});
    CHECK(x.flatten(1).shape() == Shape{2, 12});
  }
  SECTION("transpose") {
    Tensor t = x.transpose(0, 2);  // [4, 3, 2]
    CHECK(t.shape() == Shape{4, 3, 2});
    CHECK(t.strides() == Shape{1, 4, 12});
    CHECK(same_storage(t, x));
    CHECK_FALSE(t.is_contiguous());
    CHECK(t.at({3, 1, 1}) == x.at({1, 1, 3}));
  }
  SECTION("permute") {
    Tensor p = x.permute({1, 2, 0});  // [3, 4, 2]
    CHECK(p.shape() == Shape{3, 4, 2});
    CHECK(same_storage(p, x));
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 4; ++j)
        for (int64_t k = 0; k < 2; ++k) CHECK(p.at({i, j, k}) == x.at({k, i, j}));
  }
  SECTION("slice with a step") {
    Tensor v = Tensor::arange(10, DType::f32);
    Tensor s = v.slice(0, 1, 8, 3);  // [1, 4, 7]
    CHECK(s.to_vector() == std::vector<double>{1, 4, 7});
    CHECK(s.strides() == Shape{3});
    CHECK(s.offset() == 1);
    CHECK(same_storage(s, v));
    CHECK_FALSE(s.is_contiguous());
    // Python-style negative and clamped bounds.
    CHECK(v.slice(0, -3, 100).to_vector() == std::vector<double>{7, 8, 9});
    CHECK(v.slice(0, 5, 2).numel() == 0);
    // A slice along dim 0 of a contiguous tensor stays contiguous.
    Tensor rows = x.slice(0, 1, 2);  // [1, 3, 4]
    CHECK(rows.is_contiguous());
    CHECK(rows.offset() == 12);
    Tensor cols = x.slice(2, 1, 3);  // [2, 3, 2]
    CHECK_FALSE(cols.is_contiguous());
    CHECK(cols.at({1, 2, 0}) == x.at({1, 2, 1}));
  }
  SECTION("expand") {
    Tensor c = Tensor::from_vector(std::vector<double>{1, 2, 3}, {3, 1});
    Tensor e = c.expand({2, 3, 4});  // [2, 3, 4]
    CHECK(e.shape() == Shape{2, 3, 4});
    CHECK(e.strides() == Shape{0, 1, 0});
    CHECK(same_storage(e, c));
    CHECK_FALSE(e.is_contiguous());
    CHECK(e.at({1, 2, 3}) == 3);
    CHECK(c.expand({-1, 5}).shape() == Shape{3, 5});
  }
  SECTION("select and narrow") {
    Tensor s = x.select(1, 2);  // [2, 4]
    CHECK(s.shape() == Shape{2, 4});
    CHECK(same_storage(s, x));
    CHECK(s.at({1, 0}) == x.at({1, 2, 0}));
    CHECK(x.select(0, -1).at({0, 0}) == 12);
    Tensor n = x.narrow(2, 1, 2);  // [2, 3, 2]
    CHECK(n.shape() == Shape{2, 3, 2});
    CHECK(n.at({0, 0, 0}) == 1);
    CHECK(same_storage(n, x));
  }
  SECTION("unsqueeze and squeeze") {
    Tensor u = x.unsqueeze(1);  // [2, 1, 3, 4]
    CHECK(u.shape() == Shape{2, 1, 3, 4});
    CHECK(x.unsqueeze(-1).shape() == Shape{2, 3, 4, 1});
    CHECK(same_storage(u, x));
    CHECK(u.is_contiguous());
    Tensor q = u.squeeze(1);
    CHECK(q.shape() == Shape{2, 3, 4});
    CHECK(same_storage(q, x));
    CHECK(x.squeeze(0).shape() == Shape{2, 3, 4});  // size != 1: unchanged
  }
  SECTION("writes through a view reach the base") {
    NoGradGuard ng;
    x.transpose(0, 1).select(0, 2).fill_(-1);  // x[:, 2, :] = -1
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t k = 0; k < 4; ++k) CHECK(x.at({b, 2, k}) == -1);
    CHECK(x.at({0, 1, 3}) == 7);
  }
}

TEST_CASE("contiguous, view and reshape on strided tensors", "[tensor]") {
  // a: [3, 4] = 0 .. 11; t = a^T: [4, 3] non-contiguous
  Tensor a = Tensor::arange(12, DType::f64).reshape({3, 4});
  Tensor t = a.t();
  REQUIRE_FALSE(t.is_contiguous());

  Tensor c = t.contiguous();
  CHECK(c.is_contiguous());
  CHECK_FALSE(same_storage(c, a));
  CHECK(c.to_vector() == std::vector<double>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11});
  CHECK(t.to_vector() == c.to_vector());

  // contiguous() of a contiguous tensor is itself.
  CHECK(a.contiguous().is_same(a));
  // clone() always copies.
  Tensor cl = a.clone();
  CHECK_FALSE(same_storage(cl, a));
  CHECK(cl.to_vector() == a.to_vector());

  // A transposed tensor cannot be flattened as a view...
  CHECK_THROWS_AS(t.view({12}), Error);
  CHECK_THROWS_WITH(t.view({12}), Catch::Contains("view") && Catch::Contains("[4, 3]"));
  // ...but reshape copies.
  Tensor r = t.reshape({12});
  CHECK_FALSE(same_storage(r, a));
  CHECK(r.to_vector() == c.to_vector());
  // Splitting a dim of a transposed tensor is still a view.
  Tensor v = t.view({2, 2, 3});
  CHECK(same_storage(v, a));
  CHECK(v.at({1, 0, 2}) == t.at({2, 2}));

  // Size-1 dims do not affect contiguity.
  Tensor one = Tensor::zeros({3, 1, 4}).transpose(1, 2).transpose(0, 1);  // [4, 3, 1]
  CHECK_FALSE(one.is_contiguous());
  CHECK(Tensor::zeros({1, 4}).t().is_contiguous());  // [4, 1]
}

TEST_CASE("element access: at, item, to_vector", "[tensor]") {
  Tensor x = Tensor::from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3}, DType::f64);
  CHECK(x.at({0, 2}) == 3);
  CHECK(x.t().at({2, 0}) == 3);
  CHECK(x.sum().item() == 21);
  CHECK(x.select(0, 1).select(0, 1).item() == 5);  // 0-d view
  CHECK(x.t().to_vector() == std::vector<double>{1, 4, 2, 5, 3, 6});
  CHECK(x.slice(1, 0, 3, 2).to_vector() == std::vector<double>{1, 3, 4, 6});
  Tensor i = Tensor::from_vector(std::vector<int64_t>{-5, 9});
  CHECK(i.to_vector() == std::vector<double>{-5, 9});
  CHECK(i.at({1}) == 9);
}

TEST_CASE("to(DType) converts values", "[tensor]") {
  Tensor f = Tensor::from_vector(std::vector<double>{2.7, -2.7, 0.1, 3}, {}, DType::f64);
  Tensor i = f.to(DType::i64);  // truncation toward zero, as in C++
  CHECK(i.dtype() == DType::i64);
  CHECK(i.to_i64_vector() == std::vector<int64_t>{2, -2, 0, 3});
  Tensor s = f.to(DType::f32);
  CHECK(s.dtype() == DType::f32);
  CHECK(s.to_vector()[2] == double(0.1f));
  Tensor back = i.to(DType::f64);
  CHECK(back.to_vector() == std::vector<double>{2, -2, 0, 3});
  CHECK(f.to(DType::f64).is_same(f));  // same dtype: no copy
  // Non-contiguous source.
  Tensor m = Tensor::arange(6, DType::i64).reshape({2, 3}).t().to(DType::f32);
  CHECK(m.to_vector() == std::vector<double>{0, 3, 1, 4, 2, 5});
}

TEST_CASE("printing shows values and dtype", "[tensor]") {
  std::ostringstream os;
  os << Tensor::from_vector(std::vector<double>{1, 2.5, -3}, {3}, DType::f32);
  const std::string s = os.str();
  CHECK_THAT(s, Catch::Contains("2.5"));
  CHECK_THAT(s, Catch::Contains("-3"));
  CHECK_THAT(s, Catch::Contains("f32"));

  std::ostringstream oi;
  oi << Tensor::arange(4).reshape({2, 2});
  CHECK_THAT(oi.str(), Catch::Contains("i64"));
  CHECK_THAT(oi.str(), Catch::Contains("3"));

  std::ostringstream og;
  og << Tensor::ones({2}, DType::f64).requires_grad_();
  CHECK_THAT(og.str(), Catch::Contains("f64"));
  CHECK_THAT(og.str(), Catch::Contains("requires_grad"));

  // Long dims are elided in the middle.
  std::ostringstream ol;
  ol << Tensor::arange(100);
  CHECK_THAT(ol.str(), Catch::Contains("..."));
  CHECK_THAT(ol.str(), Catch::Contains("99"));

  std::ostringstream ou;
  ou << Tensor();
  CHECK_THAT(ou.str(), Catch::Contains("undefined"));

  CHECK(Tensor::zeros({2, 3}, DType::f64).str() == "f64[2, 3] cpu");
}

TEST_CASE("in-place ops on views", "[tensor]") {
  // base: [3, 4] zeros
  Tensor base = Tensor::zeros({3, 4}, DType::f64);

  SECTION("fill_ on a strided column") {
    base.select(1, 2).fill_(7);
    CHECK(base.to_vector() == std::vector<double>{0, 0, 7, 0, 0, 0, 7, 0, 0, 0, 7, 0});
  }
  SECTION("copy_ broadcasts and converts dtype") {
    // src: [4] f32 broadcast into the transposed view [4, 3]
    Tensor src = Tensor::from_vector(std::vector<double>{1, 2, 3, 4}, {4, 1}, DType::f32);
    base.t().copy_(src);  // base[i, j] = j + 1
    CHECK(base.to_vector() == std::vector<double>{1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4});
    base.slice(0, 0, 3, 2).copy_(Tensor::from_vector(std::vector<int64_t>{9}));
    CHECK(base.to_vector() == std::vector<double>{9, 9, 9, 9, 1, 2, 3, 4, 9, 9, 9, 9});
  }
  SECTION("add_ with alpha and broadcasting on a non-contiguous view") {
    base.copy_(Tensor::arange(12, DType::f64).reshape({3, 4}));
    Tensor v = base.t();  // [4, 3]
    v.add_(Tensor::from_vector(std::vector<double>{1, 10, 100}, {3}, DType::f64), 2.0);
    // base[i, j] = 4i + j + 2 * {1, 10, 100}[i]
    std::vector<double> want;
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 4; ++j) want.push_back(4 * i + j + 2 * (i == 0 ? 1 : i == 1 ? 10 : 100));
    CHECK(base.to_vector() == want);
  }
  SECTION("mul_ on contiguous and strided views") {
    base.fill_(1);
    base.slice(1, 1, 4, 2).mul_(3);  // columns 1 and 3
    base.select(0, 0).mul_(-2);      // row 0 (contiguous)
    CHECK(base.to_vector() == std::vector<double>{-2, -6, -2, -6, 1, 3, 1, 3, 1, 3, 1, 3});
  }
  SECTION("zero_") {
    base.fill_(5).zero_();
    CHECK(base.to_vector() == std::vector<double>(12, 0.0));
  }
}

TEST_CASE("in-place ops on a tensor that requires grad need NoGradGuard", "[tensor][autograd]") {
  Tensor w = Tensor::ones({3}, DType::f64).requires_grad_();
  CHECK_THROWS_AS(w.fill_(0), Error);
  CHECK_THROWS_WITH(w.add_(w), Catch::Contains("add_") && Catch::Contains("requires grad"));
  CHECK_THROWS_WITH(w.mul_(2), Catch::Contains("mul_"));
  CHECK_THROWS_WITH(w.copy_(Tensor::zeros({3}, DType::f64)), Catch::Contains("copy_"));
  // A view of it carries history too.
  CHECK_THROWS_AS(w.slice(0, 0, 2).fill_(0), Error);
  CHECK(w.to_vector() == std::vector<double>{1, 1, 1});  // unchanged by the failed calls
  {
    NoGradGuard ng;
    w.mul_(2);
    w.add_(Tensor::ones({3}, DType::f64), 0.5);
  }
  CHECK(w.to_vector() == std::vector<double>{2.5, 2.5, 2.5});
  CHECK(w.requires_grad());
}

TEST_CASE("libtorch habits: abs, max/min/sum over everything, item<T>", "[tensor]") {
  Tensor x = Tensor::from_vector(std::vector<double>{3, -7, 2, 5, -1, 4}, {2, 3}, DType::f64);
  Tensor xt = x.t();  // non-contiguous
  CHECK(x.abs().to_vector() == std::vector<double>{3, 7, 2, 5, 1, 4});
  for (const Tensor& t : {x, xt}) {
    Tensor mx = t.max(), mn = t.min(), s = t.sum();
    CHECK(mx.dim() == 0);
    CHECK(mn.dim() == 0);
    CHECK(s.dim() == 0);
    CHECK(mx.item() == 5);
    CHECK(mn.item() == -7);
    CHECK(s.item() == 6);
  }
  CHECK(std::get<0>(x.min(1)).to_vector() == std::vector<double>{-7, -1});
  // The gradient of max over everything goes to the (first) maximal entry.
  Tensor y = Tensor::from_vector(std::vector<double>{1, 9, 9, 2}, {2, 2}, DType::f64).requires_grad_();
  y.max().backward();
  CHECK(y.grad().to_vector() == std::vector<double>{0, 1, 0, 0});
  CHECK_ERROR(Tensor::zeros({0, 3}).max(), "max", "no elements");

  // item<T>: exact for i64 (no trip through double), range-checked, floats truncate.
  const int64_t big = (int64_t(1) << 62) + 1;  // not representable in a double
  Tensor i = Tensor::from_vector(std::vector<int64_t>{big}, {}, DType::i64).reshape({});
  CHECK(i.item<int64_t>() == big);
  CHECK(Tensor::scalar(2.75, DType::f32).item<float>() == 2.75f);
  CHECK(Tensor::scalar(2.75, DType::f64).item<double>() == 2.75);
  CHECK(Tensor::scalar(-2.75, DType::f64).item<int>() == -2);
  CHECK(Tensor::scalar(0, DType::f32).item<bool>() == false);
  CHECK(Tensor::scalar(300, DType::i64).item<int>() == 300);
  CHECK_ERROR(i.item<int32_t>(), "item<T>", "does not fit");
  CHECK_ERROR(Tensor::scalar(-1, DType::i64).item<uint32_t>(), "does not fit");
  CHECK_ERROR(Tensor::scalar(1e10, DType::f64).item<int>(), "does not fit");
  CHECK_ERROR(Tensor::scalar(std::nan(""), DType::f64).item<int64_t>(), "does not fit");
  CHECK_ERROR(Tensor::zeros({2}).item<float>(), "one element");
}

TEST_CASE("set_data_ repoints every handle of a leaf at new data", "[tensor]") {
  Tensor p = Tensor::ones({2, 2}, DType::f32).requires_grad_();
  Tensor alias = p;  // another handle to the same tensor
  p.set_grad(Tensor::ones({2, 2}));
  Tensor src = Tensor::arange(6, DType::f64).reshape({3, 2});
  p.set_data_(src);
  CHECK(alias.dtype() == DType::f64);
  CHECK(alias.shape() == Shape{3, 2});
  CHECK(alias.to_vector() == std::vector<double>{0, 1, 2, 3, 4, 5});
  CHECK(same_storage(alias, src));
  CHECK(alias.requires_grad());
  CHECK_FALSE(alias.grad().defined());  // the old grad described the old data
  // It still works as a leaf afterwards.
  (alias * alias).sum().backward();
  CHECK(alias.grad().to_vector() == std::vector<double>{0, 2, 4, 6, 8, 10});
  // Errors: a non-leaf, integer data for a tensor that requires grad, undefined src.
  Tensor nonleaf = alias * 2.0;
  CHECK_ERROR(nonleaf.set_data_(src), "set_data_", "leaf");
  CHECK_ERROR(alias.set_data_(Tensor::zeros({2}, DType::i64)), "set_data_", "floating");
  CHECK_ERROR(alias.set_data_(Tensor()), "set_data_", "undefined");
}
