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
