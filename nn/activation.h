// SPDX-License-Identifier: BSD-3-Clause
// Activation modules (torch::nn's names), for Sequential and for holding as members:
//
//   nn::Sequential net(nn::Linear(4, 8), nn::GELU(), nn::Linear(8, 3), nn::Softmax(-1));
//
// Each is a layer value with torch's holder spellings (`act(x)`, `act->forward(x)`).
// None has parameters.
#pragma once
#include <string>

#include "../ops/ops.h"
#include "module.h"
#include "options.h"

namespace remora {
namespace nn {

struct SoftmaxOptions {
  SoftmaxOptions(int64_t dim) : dim_(dim) {}  // NOLINT: implicit, as torch's
  REMORA_ARG(int64_t, dim);
};
using LogSoftmaxOptions = SoftmaxOptions;

struct GELUOptions {
  /// "none" (exact, erf) or "tanh" (the tanh approximation).
  REMORA_ARG(std::string, approximate) = "none";
};

struct FlattenOptions {
  REMORA_ARG(int64_t, start_dim) = 1;
  REMORA_ARG(int64_t, end_dim) = -1;
};

struct LeakyReLUOptions {
  REMORA_ARG(double, negative_slope) = 0.01;
};

/// max(x, 0).
class ReLU : public Module {
 public:
  ReLU() = default;
  std::string type_name() const override { return "ReLU"; }
  Tensor forward(const Tensor& x) const { return relu(x); }
  REMORA_LAYER_HANDLE(ReLU)
};

/// max(x, 0) + negative_slope * min(x, 0).
class LeakyReLU : public Module {
 public:
  explicit LeakyReLU(const LeakyReLUOptions& o = {}) : options(o) {}
  std::string type_name() const override { return "LeakyReLU"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) const;
  REMORA_LAYER_HANDLE(LeakyReLU)
  LeakyReLUOptions options;
};

/// Exact GELU 0.5 x (1 + erf(x / sqrt 2)), or with approximate("tanh")
/// 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))).
class GELU : public Module {
 public:
  explicit GELU(const GELUOptions& o = {});
  std::string type_name() const override { return "GELU"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) const;
  REMORA_LAYER_HANDLE(GELU)
  GELUOptions options;
};

class Tanh : public Module {
 public:
  Tanh() = default;
  std::string type_name() const override { return "Tanh"; }
  Tensor forward(const Tensor& x) const { return tanh(x); }
  REMORA_LAYER_HANDLE(Tanh)
};

class Sigmoid : public Module {
 public:
  Sigmoid() = default;
  std::string type_name() const override { return "Sigmoid"; }
  Tensor forward(const Tensor& x) const { return sigmoid(x); }
  REMORA_LAYER_HANDLE(Sigmoid)
};

/// x * sigmoid(x) (also called swish).
class SiLU : public Module {
 public:
  SiLU() = default;
  std::string type_name() const override { return "SiLU"; }
  Tensor forward(const Tensor& x) const { return mul(x, sigmoid(x)); }
  REMORA_LAYER_HANDLE(SiLU)
};

/// softmax over dim (torch: nn::Softmax(dim) or nn::Softmax(nn::SoftmaxOptions(dim))).
class Softmax : public Module {
 public:
  explicit Softmax(const SoftmaxOptions& o) : options(o) {}
  explicit Softmax(int64_t dim) : options(dim) {}
  std::string type_name() const override { return "Softmax"; }
  std::string extra_repr() const override { return "dim=" + std::to_string(options.dim()); }
  Tensor forward(const Tensor& x) const { return softmax(x, options.dim()); }
  REMORA_LAYER_HANDLE(Softmax)
  SoftmaxOptions options{-1};
};

class LogSoftmax : public Module {
 public:
  explicit LogSoftmax(const LogSoftmaxOptions& o) : options(o) {}
  explicit LogSoftmax(int64_t dim) : options(dim) {}
  std::string type_name() const override { return "LogSoftmax"; }
  std::string extra_repr() const override { return "dim=" + std::to_string(options.dim()); }
  Tensor forward(const Tensor& x) const { return log_softmax(x, options.dim()); }
  REMORA_LAYER_HANDLE(LogSoftmax)
  LogSoftmaxOptions options{-1};
};

/// The input unchanged.
class Identity : public Module {
 public:
  Identity() = default;
  std::string type_name() const override { return "Identity"; }
  Tensor forward(const Tensor& x) const { return x; }
  REMORA_LAYER_HANDLE(Identity)
};

/// x.flatten(start_dim, end_dim); torch's defaults keep the batch dim.
class Flatten : public Module {
 public:
  explicit Flatten(const FlattenOptions& o = {}) : options(o) {}
  std::string type_name() const override { return "Flatten"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) const { return x.flatten(options.start_dim(), options.end_dim()); }
  REMORA_LAYER_HANDLE(Flatten)
  FlattenOptions options;
};

}  // namespace nn
}  // namespace remora
