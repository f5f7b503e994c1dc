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
Tensor& constant_(Tensor& t, double value);
Tensor& zeros_(Tensor& t);
Tensor& ones_(Tensor& t);

/// (fan_in, fan_out) as torch computes them; an Error for fewer than 2 dims.
std::pair<int64_t, int64_t> fan_in_and_fan_out(const Tensor& t);

}  // namespace init
}  // namespace nn
}  // namespace remora
