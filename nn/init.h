// SPDX-License-Identifier: BSD-3-Clause
// In-place initialisers (torch.nn.init's names). Each runs under NoGradGuard, so
// it may be applied to parameters that require grad, and draws from `gen`
// (default: the global generator, seeded by manual_seed).
#pragma once
#include <utility>

#include "../core/generator.h"
#include "../core/tensor.h"

namespace remora {
namespace nn {
namespace init {

/// t ~ N(mean, std^2).
Tensor& normal_(Tensor& t, double mean = 0, double std = 1, Generator* gen = nullptr);
/// t ~ U[a, b).
Tensor& uniform_(Tensor& t, double a = 0, double b = 1, Generator* gen = nullptr);
/// Glorot: U(-bound, bound), bound = gain * sqrt(6 / (fan_in + fan_out)), with
/// fan_in = size(1) * receptive field, fan_out = size(0) * receptive field (t.dim() >= 2).
Tensor& xavier_uniform_(Tensor& t, double gain = 1, Generator* gen = nullptr);
/// Glorot normal: N(0, std^2), std = gain * sqrt(2 / (fan_in + fan_out)).
Tensor& xavier_normal_(Tensor& t, double gain = 1, Generator* gen = nullptr);

/// torch's FanModeType and NonlinearityType (kFanIn, kReLU, ...).
enum class FanMode { fan_in, fan_out };
enum class Nonlinearity { linear, conv, sigmoid, tanh, relu, leaky_relu, selu };
constexpr FanMode kFanIn = FanMode::fan_in;
constexpr FanMode kFanOut = FanMode::fan_out;
constexpr Nonlinearity kLinear = Nonlinearity::linear;
constexpr Nonlinearity kConv = Nonlinearity::conv;
constexpr Nonlinearity kSigmoid = Nonlinearity::sigmoid;
constexpr Nonlinearity kTanh = Nonlinearity::tanh;
constexpr Nonlinearity kReLU = Nonlinearity::relu;
constexpr Nonlinearity kLeakyReLU = Nonlinearity::leaky_relu;
constexpr Nonlinearity kSELU = Nonlinearity::selu;

/// torch.nn.init.calculate_gain: 1 (linear, conv, sigmoid), 5/3 (tanh), sqrt(2)
/// (relu), sqrt(2 / (1 + param^2)) (leaky_relu, param = negative slope), 3/4 (selu).
double calculate_gain(Nonlinearity nonlinearity, double param = 0.01);

/// He uniform: U(-bound, bound), bound = gain * sqrt(3 / fan), gain =
/// calculate_gain(nonlinearity, a), fan = fan_in or fan_out by mode.
Tensor& kaiming_uniform_(Tensor& t, double a = 0, FanMode mode = FanMode::fan_in,
                         Nonlinearity nonlinearity = Nonlinearity::leaky_relu, Generator* gen = nullptr);
/// He normal: N(0, std^2), std = gain / sqrt(fan).
Tensor& kaiming_normal_(Tensor& t, double a = 0, FanMode mode = FanMode::fan_in,
                        Nonlinearity nonlinearity = Nonlinearity::leaky_relu, Generator* gen = nullptr);
/// N(mean, std^2) truncated to [a, b] (torch's method: a uniform draw between the
/// bounds' CDF values through the inverse normal CDF; every value lies in [a, b]).
Tensor& trunc_normal_(Tensor& t, double mean = 0, double std = 1, double a = -2, double b = 2,
                      Generator* gen = nullptr);

Tensor& constant_(Tensor& t, double value);
Tensor& zeros_(Tensor& t);
Tensor& ones_(Tensor& t);

/// (fan_in, fan_out) as torch computes them; an Error for fewer than 2 dims.
std::pair<int64_t, int64_t> fan_in_and_fan_out(const Tensor& t);

}  // namespace init
}  // namespace nn
}  // namespace remora
