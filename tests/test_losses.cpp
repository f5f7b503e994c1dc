// SPDX-License-Identifier: BSD-3-Clause
// binary_cross_entropy_with_logits (ops/losses.h): values against the naive
// formula, masking, and float64 gradient checks.
#include <catch2/catch.hpp>
#include <cmath>
#include <remora/remora.h>

using namespace remora;

namespace {
double naive_bce(double x, double y) {
  const double s = 1.0 / (1.0 + std::exp(-x));
  return -(y * std::log(s) + (1 - y) * std::log(1 - s));
}
}  // namespace

TEST_CASE("bce_with_logits: values, stability, reductions, mask", "[losses]") {
  const std::vector<double> xs{-3, -0.5, 0.25, 2, 4}, ys{0, 1, 0.3, 1, 0};
  Tensor x = Tensor::from_vector(xs, {5}, DType::f64), y = Tensor::from_vector(ys, {5}, DType::f64);
  const auto none = binary_cross_entropy_with_logits(x, y, Tensor(), Reduction::none).to_vector();
  double total = 0;
  for (size_t i = 0; i < 5; ++i) {
    CHECK(none[i] == Approx(naive_bce(xs[i], ys[i])).epsilon(1e-12));
    total += none[i];
  }
  CHECK(binary_cross_entropy_with_logits(x, y, Tensor(), Reduction::sum).item() == Approx(total));
  CHECK(binary_cross_entropy_with_logits(x, y).item() == Approx(total / 5));
  // Large logits stay finite (the naive form gives inf/nan here).
  Tensor big = Tensor::from_vector(std::vector<double>{1000, -1000}, {2}, DType::f64);
  Tensor zy = Tensor::from_vector(std::vector<double>{0, 0}, {2}, DType::f64);
  const auto b = binary_cross_entropy_with_logits(big, zy, Tensor(), Reduction::none).to_vector();
  CHECK(b[0] == Approx(1000));
  CHECK(b[1] == Approx(0).margin(1e-300));
  // A [2, 1] mask over [2, 3] logits: mean over the 3 counted elements.
  Tensor x2 = Tensor::from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3}, DType::f64);
  Tensor y2 = Tensor::zeros({2, 3}, DType::f64);
  Tensor m = Tensor::from_vector(std::vector<double>{1, 0}, {2, 1}, DType::f64);
  const double want = (naive_bce(1, 0) + naive_bce(2, 0) + naive_bce(3, 0)) / 3;
  CHECK(binary_cross_entropy_with_logits(x2, y2, m).item() == Approx(want));
  // An f32 mask converts; a mask that does not broadcast is an error naming the fix.
  CHECK(binary_cross_entropy_with_logits(x2, y2, m.to(DType::f32)).item() == Approx(want));
  CHECK_THROWS_AS(binary_cross_entropy_with_logits(x2, y2, Tensor::ones({3, 1}, DType::f64)), Error);
  CHECK_THROWS_WITH(binary_cross_entropy_with_logits(x2, Tensor::zeros({3, 2}, DType::f64)),
                    Catch::Contains("must have the logits' shape"));
  CHECK_THROWS_WITH(binary_cross_entropy_with_logits(x2, Tensor::zeros({2, 3})),
                    Catch::Contains("targets.to(logits.dtype())"));
}

TEST_CASE("bce_with_logits: float64 gradient check", "[losses][gradcheck]") {
  Generator g(21);
  // logits away from 0 (the |x| kink), targets in [0, 1].
  auto make = [&g]() {
    Tensor mag = Tensor::rand({3, 4, 2}, DType::f64, Device::cpu(), &g) * 2.0 + 0.2;
    Tensor sgn = Tensor::rand({3, 4, 2}, DType::f64, Device::cpu(), &g);
    Tensor x = where(gt(sgn, Tensor::scalar(0.5, DType::f64)), mag, neg(mag)).detach().requires_grad_();
    Tensor y = Tensor::rand({3, 4, 2}, DType::f64, Device::cpu(), &g).detach().requires_grad_();
    return std::vector<Tensor>{x, y};
  };
  Tensor mask = Tensor::from_vector(std::vector<double>{1, 1, 0, 1, 1, 1, 0, 0, 1, 1, 1, 0},
                                    {3, 4, 1}, DType::f64);
  for (Reduction r : {Reduction::mean, Reduction::sum, Reduction::none}) {
    GradcheckResult plain = gradcheck(
        [r](const std::vector<Tensor>& v) {
          return binary_cross_entropy_with_logits(v[0], v[1], Tensor(), r);
        },
        make());
    INFO(plain.message);
    CHECK(plain.ok);
    GradcheckResult masked = gradcheck(
        [r, mask](const std::vector<Tensor>& v) {
          return binary_cross_entropy_with_logits(v[0], v[1], mask, r);
        },
        make());
    INFO(masked.message);
    CHECK(masked.ok);
  }
}

// ---- f32 rows at large logits ----
// logsumexp = max + log(sum) rounded to f32 loses log(sum) next to a large
// max; the kernels keep the two parts apart. The registry's large-logit cases
// of log_softmax and cross_entropy run here in f32 on the CPU against f64 on
// the same (f32-representable) inputs, each output and gradient held to the
// bound of f32 rounding on the terms it is made of (u = 2^-24): the error of
// (x - max) - log(sum) is a few u of |y| + 1, where the rounded lse would
// leave u |max| (1.2e-4 at logits of 2,000).
TEST_CASE("f32 log_softmax and cross_entropy keep their precision at large logits", "[losses][precision]") {
  const double u = std::ldexp(1.0, -24);
  int ran = 0;
  for (const GradcheckCase& c : gradcheck_cases()) {
    if (c.op != "log_softmax" && c.op != "cross_entropy") continue;
    if (c.name.find("large_logits") == std::string::npos && c.name.find("near_certain") == std::string::npos)
      continue;
    CAPTURE(c.name);
    ++ran;
    CaseInstance f = c.make(Device::cpu(), DType::f32);
    std::vector<Tensor> wide;
    for (const Tensor& t : f.inputs)
      wide.push_back(is_floating(t.dtype()) ? t.detach().to(DType::f64).requires_grad_(t.requires_grad()) : t);
    Tensor y32 = f.fn(f.inputs), y64 = f.fn(wide);
    // An upstream gradient with entries of both signs, exact in f32.
    Tensor dy = affine(Tensor::arange(0, double(y64.numel()), 1, DType::f64), 0.25, -1.0).reshape(y64.shape());
    y32.backward(dy.to(DType::f32));
    y64.backward(dy);
    const Tensor x64 = wide[0].detach();
    const int64_t n = x64.size(-1), rows = x64.numel() / n;
    const std::vector<double> x = x64.to_vector(), yv = y32.to_vector(), yw = y64.to_vector(),
                              gx = f.inputs[0].grad().to_vector(), gw = wide[0].grad().to_vector(),
                              dyv = dy.to_vector();
    if (c.op == "log_softmax") {
      for (size_t i = 0; i < yw.size(); ++i) REQUIRE(std::fabs(yv[i] - yw[i]) <= 4 * u * (std::fabs(yw[i]) + 1));
      // dx = dy - p sum(dy): each p (from y) to its bound, the sums exact at these sizes.
      for (int64_t r = 0; r < rows; ++r) {
        double s = 0, sa = 0;
        for (int64_t j = 0; j < n; ++j) s += dyv[size_t(r * n + j)], sa += std::fabs(dyv[size_t(r * n + j)]);
        for (int64_t j = 0; j < n; ++j) {
          const size_t i = size_t(r * n + j);
          const double p = std::exp(yw[i]);
          REQUIRE(std::fabs(gx[i] - gw[i]) <= 4 * u * (std::fabs(dyv[i]) + p * (std::fabs(s) * (std::fabs(yw[i]) + 2) + sa)));
        }
      }
    } else {
      // loss = (max - x_t) + log(sum); dx_j = dy p_j, dy (p_t - 1) at the target.
      for (size_t i = 0; i < yw.size(); ++i) REQUIRE(std::fabs(yv[i] - yw[i]) <= 4 * u * (std::fabs(yw[i]) + 1));
      for (int64_t r = 0; r < rows; ++r) {
        double mx = -INFINITY, s = 0;
        for (int64_t j = 0; j < n; ++j) mx = std::max(mx, x[size_t(r * n + j)]);
        for (int64_t j = 0; j < n; ++j) s += std::exp(x[size_t(r * n + j)] - mx);
        for (int64_t j = 0; j < n; ++j) {
          const size_t i = size_t(r * n + j);
          const double nlp = (mx - x[i]) + std::log(s), p = std::exp(-nlp);
          REQUIRE(std::fabs(gx[i] - gw[i]) <= 4 * u * (nlp + 2) * (std::fabs(gw[i]) + p * std::fabs(dyv[size_t(r)])));
        }
      }
    }
  }
  CHECK(ran >= 4);
}

TEST_CASE("f32 cross_entropy at logits [2000, 1989]: the loss and its gradient to 1e-3 of the exact ones",
          "[losses][precision]") {
  Tensor x = Tensor::from_vector(std::vector<float>{2000, 1989}, {1, 2}, DType::f32).requires_grad_();
  Tensor t = Tensor::from_vector(std::vector<int64_t>{0}, {1});
  Tensor loss = cross_entropy(x, t, -100);
  loss.backward();
  const double exact = std::log1p(std::exp(-11.0)), p1 = std::exp(-11.0) / (1 + std::exp(-11.0));
  CHECK(std::fabs(loss.item() - exact) <= 1e-3 * exact);
  const std::vector<double> g = x.grad().to_vector();
  CHECK(std::fabs(g[0] + p1) <= 1e-3 * p1);  // d/dx_t = p_t - 1 = -p_1
  CHECK(std::fabs(g[1] - p1) <= 1e-3 * p1);
  // log_softmax of [1e5, 1e5 - 1, 1e5 - 2] within a few f32 roundings of its values.
  Tensor z = Tensor::from_vector(std::vector<float>{1e5f, 1e5f - 1, 1e5f - 2}, {3}, DType::f32);
  const std::vector<double> y = log_softmax(z, 0).to_vector();
  const double ls = std::log(1 + std::exp(-1.0) + std::exp(-2.0));
  for (int j = 0; j < 3; ++j) CHECK(std::fabs(y[size_t(j)] - (-j - ls)) <= 4 * std::ldexp(1.0, -24) * (j + ls + 1));
}
