// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// In-place initialisers (torch.nn.init's names). Each runs under NoGradGuard, so
/// it may be applied to parameters that require grad, and draws from `gen`
/// (default: the global generator, seeded by manual_seed).
///
/// Each takes t by lvalue reference (torch takes it by value), writes the new
/// values into t's storage in t's dtype and on t's device (every handle of the
/// tensor sees them), and returns t. t must be a defined floating tensor (an Error
/// otherwise). Fans: fan_in = size(1) * receptive field, fan_out = size(0) *
/// receptive field, the receptive field being the product of the dims after the
/// first two.
#pragma once
#include <utility>

#include "../core/generator.h"
#include "../core/tensor.h"

namespace remora {
namespace nn {
namespace init {

/// t ~ N(mean, std^2); std >= 0, else an Error.
Tensor& normal_(Tensor& t, double mean = 0, double std = 1, Generator* gen = nullptr);
/// t ~ U[a, b); a <= b, else an Error.
Tensor& uniform_(Tensor& t, double a = 0, double b = 1, Generator* gen = nullptr);
/// Glorot: U(-bound, bound), bound = gain * sqrt(6 / (fan_in + fan_out)), with
/// fan_in = size(1) * receptive field, fan_out = size(0) * receptive field (t.dim() >= 2).
Tensor& xavier_uniform_(Tensor& t, double gain = 1, Generator* gen = nullptr);
/// Glorot normal: N(0, std^2), std = gain * sqrt(2 / (fan_in + fan_out)).
Tensor& xavier_normal_(Tensor& t, double gain = 1, Generator* gen = nullptr);

/// Which fan the kaiming initialisers divide by: fan_in keeps the variance of the
/// forward pass, fan_out that of the backward pass (torch's FanModeType; kFanIn,
/// kFanOut).
enum class FanMode { fan_in, fan_out };
/// The nonlinearity that calculate_gain and the kaiming initialisers scale for
/// (torch's NonlinearityType; kReLU, ...).
enum class Nonlinearity { linear, conv, sigmoid, tanh, relu, leaky_relu, selu };
/// FanMode::fan_in (torch::kFanIn).
constexpr FanMode kFanIn = FanMode::fan_in;
/// FanMode::fan_out (torch::kFanOut).
constexpr FanMode kFanOut = FanMode::fan_out;
/// Nonlinearity::linear (torch::kLinear).
constexpr Nonlinearity kLinear = Nonlinearity::linear;
/// Nonlinearity::conv (torch's kConv1D, kConv2D, ...: all gain 1).
constexpr Nonlinearity kConv = Nonlinearity::conv;
/// Nonlinearity::sigmoid (torch::kSigmoid).
constexpr Nonlinearity kSigmoid = Nonlinearity::sigmoid;
/// Nonlinearity::tanh (torch::kTanh).
constexpr Nonlinearity kTanh = Nonlinearity::tanh;
/// Nonlinearity::relu (torch::kReLU).
constexpr Nonlinearity kReLU = Nonlinearity::relu;
/// Nonlinearity::leaky_relu (torch::kLeakyReLU).
constexpr Nonlinearity kLeakyReLU = Nonlinearity::leaky_relu;
/// Nonlinearity::selu (torch::kSELU).
constexpr Nonlinearity kSELU = Nonlinearity::selu;

/// torch.nn.init.calculate_gain: 1 (linear, conv, sigmoid), 5/3 (tanh), sqrt(2)
/// (relu), sqrt(2 / (1 + param^2)) (leaky_relu, param = negative slope), 3/4 (selu).
double calculate_gain(Nonlinearity nonlinearity, double param = 0.01);

/// He uniform: U(-bound, bound), bound = gain * sqrt(3 / fan), gain =
/// calculate_gain(nonlinearity, a), fan = fan_in or fan_out by mode. The fan must be > 0
/// (an Error otherwise). The defaults (a = 0, leaky_relu) give gain sqrt(2).
Tensor& kaiming_uniform_(Tensor& t, double a = 0, FanMode mode = FanMode::fan_in,
                         Nonlinearity nonlinearity = Nonlinearity::leaky_relu, Generator* gen = nullptr);
/// He normal: N(0, std^2), std = gain / sqrt(fan), gain and fan as
/// kaiming_uniform_.
Tensor& kaiming_normal_(Tensor& t, double a = 0, FanMode mode = FanMode::fan_in,
                        Nonlinearity nonlinearity = Nonlinearity::leaky_relu, Generator* gen = nullptr);
/// N(mean, std^2) truncated to [a, b] (torch's method: a uniform draw between the
/// bounds' CDF values through the inverse normal CDF; every value lies in [a, b]).
/// std > 0 and a < b, else an Error. The draws are made on the CPU in f64, then
/// converted and copied to t.
Tensor& trunc_normal_(Tensor& t, double mean = 0, double std = 1, double a = -2, double b = 2,
                      Generator* gen = nullptr);

/// Fills t with value.
Tensor& constant_(Tensor& t, double value);
/// Fills t with 0.
Tensor& zeros_(Tensor& t);
/// Fills t with 1.
Tensor& ones_(Tensor& t);

/// (fan_in, fan_out) as torch computes them; an Error for fewer than 2 dims.
std::pair<int64_t, int64_t> fan_in_and_fan_out(const Tensor& t);

}  // namespace init
}  // namespace nn
}  // namespace remora
