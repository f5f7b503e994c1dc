// SPDX-License-Identifier: BSD-3-Clause
// unbind / split / split_with_sizes (ops/shape.cpp): the one-node splitting ops that
// nn/ used to define (nn::unbind_steps, nn::split_last).
#include <catch2/catch.hpp>
#include <set>

#include <remora/remora.h>

#include "helpers.h"

using namespace remora;
using remora_test::check_close;


TEST_CASE("unbind gives the slices along a dim under one autograd node", "[ops][shape][split]") {
  Tensor x = Tensor::arange(24, DType::f64).reshape({2, 3, 4}).requires_grad_();
  for (int64_t d : {0, 1, 2, -1}) {
    std::vector<Tensor> s = unbind(x, d);
    const int64_t dd = d < 0 ? d + 3 : d;
    REQUIRE(int64_t(s.size()) == x.size(dd));
    for (int64_t i = 0; i < x.size(dd); ++i) {
      Shape want_shape = x.shape();
      want_shape.erase(want_shape.begin() + dd);
      CHECK(s[size_t(i)].shape() == want_shape);
      CHECK(s[size_t(i)].to_vector() == x.select(dd, i).to_vector());
      CHECK(s[size_t(i)].grad_fn() == s[0].grad_fn());  // one node for all
    }
  }
  // Backward: only the used slices get a gradient, the rest zeros.
  std::vector<Tensor> s = unbind(x, 1);
  (s[0] * 2.0 + s[2]).sum().backward();
  const std::vector<double> g = x.grad().to_vector();
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t k = 0; k < 4; ++k) CHECK(g[size_t(b * 12 + j * 4 + k)] == (j == 0 ? 2 : j == 2 ? 1 : 0));
}

TEST_CASE("split and split_with_sizes give contiguous copies under one node", "[ops][shape][split]") {
  Tensor base = Tensor::arange(21, DType::f64).reshape({3, 7});
  Tensor x = base.t().detach().requires_grad_();  // [7, 3], non-contiguous
  std::vector<Tensor> s = split(x, 3, 0);         // rows 3, 3, 1
  REQUIRE(s.size() == 3);
  CHECK(s[0].shape() == Shape{3, 3});
  CHECK(s[2].shape() == Shape{1, 3});
  for (const Tensor& p : s) {
    CHECK(p.is_contiguous());
    CHECK(p.grad_fn() == s[0].grad_fn());
  }
  CHECK(s[1].to_vector() == x.slice(0, 3, 6).to_vector());
  CHECK(s[2].to_vector() == x.slice(0, 6, 7).to_vector());
  // A copy, not a view: writing into a part leaves x alone.
  {
    NoGradGuard ng;
    s[0].fill_(-1);
  }
  CHECK(x.at({0, 0}) == 0);

  std::vector<Tensor> w = split_with_sizes(x, {1, 2}, -1);
  REQUIRE(w.size() == 2);
  CHECK(w[0].shape() == Shape{7, 1});
  CHECK(w[1].to_vector() == x.slice(1, 1, 3).to_vector());
  (w[1] * 3.0).sum().backward();
  check_close(x.grad().slice(1, 0, 1), std::vector<double>(7, 0.0), 0, 0);
  check_close(x.grad().slice(1, 1, 3), std::vector<double>(14, 3.0), 0, 0);
}

TEST_CASE("split: empty parts and an empty dim, as torch", "[ops][shape][split]") {
  // A size-0 dim gives one empty part; a size 0 among the sizes an empty part.
  Tensor e = Tensor::zeros({0, 3}, DType::f64).requires_grad_();
  std::vector<Tensor> p = split(e, 2, 0);
  REQUIRE(p.size() == 1);
  CHECK(p[0].shape() == Shape{0, 3});
  Tensor x = Tensor::from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3}).requires_grad_();
  std::vector<Tensor> q = split_with_sizes(x, {3, 0}, 1);
  REQUIRE(q.size() == 2);
  CHECK(q[0].to_vector() == x.to_vector());
  CHECK(q[1].shape() == Shape{2, 0});
  (q[0] * 2.0).sum().backward();
  CHECK(x.grad().to_vector() == std::vector<double>(6, 2.0));
}

TEST_CASE("chunk: a size-0 dim gives `chunks` empty parts, as torch", "[ops][shape][split]") {
  for (bool grad : {false, true}) {
    CAPTURE(grad);
    Tensor e = Tensor::zeros({2, 0}, DType::f64);
    if (grad) e.requires_grad_();
    std::vector<Tensor> p = chunk(e, 3, 1);
    REQUIRE(p.size() == 3);
    for (const Tensor& t : p) CHECK(t.shape() == Shape{2, 0});
    if (grad) {
      (cat(p, 1).sum() + p[0].sum()).backward();
      CHECK(e.grad().shape() == Shape{2, 0});
    }
  }
  // Otherwise parts of ceil(n / chunks), fewer than `chunks` when n does not fill them.
  Tensor x = Tensor::arange(0, 5, 1, DType::f64);
  std::vector<Tensor> q = chunk(x, 4, 0);
  REQUIRE(q.size() == 3);
  CHECK(q[2].to_vector() == std::vector<double>{4});
}

TEST_CASE("split and unbind name the bad argument", "[ops][shape][split][errors]") {
  Tensor x = Tensor::zeros({4, 6});
  CHECK_ERROR(split(x, 0, 1), "split", "split_size must be >= 1");
  CHECK_ERROR(split_with_sizes(x, {2, 3}, 1), "split", "add up to 5", "has 6");
  CHECK_ERROR(split_with_sizes(x, {6, -1}, 1), "split", "every size must be >= 0");
  CHECK_ERROR(split(x, 2, 2), "split");
  CHECK_ERROR(unbind(Tensor::scalar(1), 0), "unbind", "at least one dim");
  CHECK_ERROR(unbind(Tensor(), 0), "unbind");
  // The former nn names keep their checks.
  CHECK_ERROR(nn::split_last(x, 4), "split_last", "4 equal parts");
}

TEST_CASE("unbind and split pass their float64 gradient checks", "[ops][shape][split][gradcheck]") {
  // The registry's cases of these ops (cases/split_cases.cpp).
  std::set<std::string> ops;
  for (const GradcheckCase& c : gradcheck_cases()) {
    if (c.op != "unbind" && c.op != "split" && c.op != "split_with_sizes") continue;
    ops.insert(c.op);
    remora_test::check_gradcheck_case(c);
  }
  CHECK(ops == std::set<std::string>{"unbind", "split", "split_with_sizes"});
}
