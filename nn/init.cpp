// SPDX-License-Identifier: BSD-3-Clause
#include "init.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "../core/autograd.h"
#include "../ops/ops.h"

namespace remora {
namespace nn {
namespace init {

namespace {
void check_float(const Tensor& t, const char* op) {
  REMORA_CHECK(t.defined(), op << ": the tensor is undefined");
  REMORA_CHECK(is_floating(t.dtype()), op << ": expected a floating tensor, got " << t.str());
}
}  // namespace

Tensor& normal_(Tensor& t, double mean, double std, Generator* gen) {
  check_float(t, "init::normal_");
  REMORA_CHECK(std >= 0, "init::normal_: std must be >= 0, got " << std);
  NoGradGuard ng;
  t.copy_(affine(Tensor::randn(t.shape(), t.dtype(), t.device(), gen), std, mean));
  return t;
}

Tensor& uniform_(Tensor& t, double a, double b, Generator* gen) {
  check_float(t, "init::uniform_");
  REMORA_CHECK(a <= b, "init::uniform_: need a <= b, got [" << a << ", " << b << ")");
  NoGradGuard ng;
  t.copy_(affine(Tensor::rand(t.shape(), t.dtype(), t.device(), gen), b - a, a));
  return t;
}

std::pair<int64_t, int64_t> fan_in_and_fan_out(const Tensor& t) {
  REMORA_CHECK(t.dim() >= 2, "init: fan in and fan out need at least 2 dims, got "
                                 << shape_str(t.shape()));
  int64_t receptive = 1;
  for (int64_t d = 2; d < t.dim(); ++d) receptive *= t.size(d);
  return {t.size(1) * receptive, t.size(0) * receptive};
}

Tensor& xavier_uniform_(Tensor& t, double gain, Generator* gen) {
  check_float(t, "init::xavier_uniform_");
  auto f = fan_in_and_fan_out(t);
  const double bound = gain * std::sqrt(6.0 / double(f.first + f.second));
  return uniform_(t, -bound, bound, gen);
}

Tensor& xavier_normal_(Tensor& t, double gain, Generator* gen) {
  check_float(t, "init::xavier_normal_");
  auto f = fan_in_and_fan_out(t);
  return normal_(t, 0, gain * std::sqrt(2.0 / double(f.first + f.second)), gen);
}

double calculate_gain(Nonlinearity nl, double param) {
  switch (nl) {
    case Nonlinearity::linear:
    case Nonlinearity::conv:
    case Nonlinearity::sigmoid: return 1;
    case Nonlinearity::tanh: return 5.0 / 3;
    case Nonlinearity::relu: return std::sqrt(2.0);
    case Nonlinearity::leaky_relu: return std::sqrt(2.0 / (1 + param * param));
    case Nonlinearity::selu: return 3.0 / 4;
  }
  return 1;
}

namespace {
double kaiming_std(const Tensor& t, double a, FanMode mode, Nonlinearity nl, const char* op) {
  check_float(t, op);
  auto f = fan_in_and_fan_out(t);
  const int64_t fan = mode == FanMode::fan_in ? f.first : f.second;
  REMORA_CHECK(fan > 0, op << ": the fan is 0 for a tensor of shape " << shape_str(t.shape()));
  return calculate_gain(nl, a) / std::sqrt(double(fan));
}

// The inverse of erf on (-1, 1): Giles' single-precision approximation refined
// by two Newton steps on erf (about 1e-15 relative).
double erfinv(double y) {
  double w = -std::log((1.0 - y) * (1.0 + y)), x;
  if (w < 5) {
    w -= 2.5;
    double p = 2.81022636e-08;
    for (double c : {3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503,
                     -0.00417768164, 0.246640727, 1.50140941})
      p = c + p * w;
    x = p * y;
  } else {
    w = std::sqrt(w) - 3;
    double p = -0.000200214257;
    for (double c : {0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613,
                     0.00943887047, 1.00167406, 2.83297682})
      p = c + p * w;
    x = p * y;
  }
  for (int i = 0; i < 2; ++i) x -= (std::erf(x) - y) / (2 / std::sqrt(M_PI) * std::exp(-x * x));
  return x;
}
}  // namespace

Tensor& kaiming_uniform_(Tensor& t, double a, FanMode mode, Nonlinearity nl, Generator* gen) {
  const double bound = std::sqrt(3.0) * kaiming_std(t, a, mode, nl, "init::kaiming_uniform_");
  return uniform_(t, -bound, bound, gen);
}

Tensor& kaiming_normal_(Tensor& t, double a, FanMode mode, Nonlinearity nl, Generator* gen) {
  return normal_(t, 0, kaiming_std(t, a, mode, nl, "init::kaiming_normal_"), gen);
}

Tensor& trunc_normal_(Tensor& t, double mean, double std, double a, double b, Generator* gen) {
  check_float(t, "init::trunc_normal_");
  REMORA_CHECK(std > 0 && a < b, "init::trunc_normal_: need std > 0 and a < b, got std " << std << ", ["
                                                                                         << a << ", " << b << "]");
  auto cdf = [](double x) { return 0.5 * (1 + std::erf(x / std::sqrt(2.0))); };
  const double l = cdf((a - mean) / std), u = cdf((b - mean) / std);
  std::vector<double> v = Tensor::rand(t.shape(), DType::f64, Device::cpu(), gen).to_vector();
  for (double& x : v) {
    const double y = std::min(std::max(2 * (l + (u - l) * x) - 1, -1 + 1e-16), 1 - 1e-16);
    x = std::min(std::max(erfinv(y) * std * std::sqrt(2.0) + mean, a), b);
  }
  NoGradGuard ng;
  t.copy_(Tensor::from_vector(v, {int64_t(v.size())}, DType::f64).reshape(t.shape()).to(t.dtype()).to(t.device()));
  return t;
}

Tensor& constant_(Tensor& t, double value) {
  check_float(t, "init::constant_");
  NoGradGuard ng;
  t.fill_(value);
  return t;
}
Tensor& zeros_(Tensor& t) { return constant_(t, 0); }
Tensor& ones_(Tensor& t) { return constant_(t, 1); }

}  // namespace init
}  // namespace nn
}  // namespace remora
