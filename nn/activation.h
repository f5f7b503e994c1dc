// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// Activation modules (torch::nn's names), for Sequential and for holding as members:
///
///     nn::Sequential net(nn::Linear(4, 8), nn::GELU(), nn::Linear(8, 3), nn::Softmax(-1));
///
/// Each is a layer value with torch's holder spellings (`act(x)`, `act->forward(x)`).
/// None has parameters, and none has torch's `inplace` option.
///
/// Every forward takes one tensor x of any shape and returns a new tensor of x's
/// shape and dtype (Identity returns x itself; Flatten changes the shape), with a
/// gradient to x. Devices: the CPU and CUDA. Dtypes: floating, f32 and f64 on
/// every device, bf16 and f16 on the CPU (the ops they run, ops/ops.h;
/// docs/precision.md); Identity and Flatten take any dtype.
#pragma once
#include <string>

#include "../ops/ops.h"
#include "module.h"
#include "options.h"

namespace remora {
namespace nn {

/// Options of nn::Softmax and nn::LogSoftmax (torch::nn::SoftmaxOptions).
struct SoftmaxOptions {
  /// The dim is required. Implicit, as torch's: a plain dim converts to the
  /// options (`F::softmax(x, 1)`).
  SoftmaxOptions(int64_t dim) : dim_(dim) {}  // NOLINT: implicit, as torch's
  /// The dim to normalise over (negative counts from the end).
  REMORA_ARG(int64_t, dim);
  /// \fn dim() const
  /// \copybrief dim(const int64_t&)
};
/// Options of nn::LogSoftmax: the same as SoftmaxOptions (torch::nn::LogSoftmaxOptions).
using LogSoftmaxOptions = SoftmaxOptions;

/// Options of nn::GELU (torch::nn::GELUOptions).
struct GELUOptions {
  /// "none" (exact, erf; the default) or "tanh" (the tanh approximation); another
  /// value is an Error when the GELU is built.
  REMORA_ARG(std::string, approximate) = "none";
  /// \fn approximate() const
  /// \copybrief approximate(const std::string&)
};

/// Options of nn::Flatten (torch::nn::FlattenOptions).
struct FlattenOptions {
  /// First dim to merge (default 1, which keeps the batch dim; negative counts from
  /// the end).
  REMORA_ARG(int64_t, start_dim) = 1;
  /// \fn start_dim() const
  /// \copybrief start_dim(const int64_t&)

  /// Last dim to merge, included (default -1, the last dim).
  REMORA_ARG(int64_t, end_dim) = -1;
  /// \fn end_dim() const
  /// \copybrief end_dim(const int64_t&)
};

/// Options of nn::LeakyReLU (torch::nn::LeakyReLUOptions, without inplace).
struct LeakyReLUOptions {
  /// Slope for x < 0 (default 0.01).
  REMORA_ARG(double, negative_slope) = 0.01;
  /// \fn negative_slope() const
  /// \copybrief negative_slope(const double&)
};

/// max(x, 0).
class ReLU : public Module {
 public:
  ReLU() = default;
  std::string type_name() const override { return "ReLU"; }
  /// relu(x); the gradient is 1 where x > 0, else 0.
  Tensor forward(const Tensor& x) const { return relu(x); }
  /// An empty activation (torch's `ReLU{nullptr}`), holding no state until one is
  /// assigned to it.
  REMORA_LAYER_HANDLE(ReLU)
  /// \fn operator->()
  /// This activation, for torch's holder spelling `m->forward(...)`.

  /// \fn operator->() const
  /// This activation, for torch's holder spelling `m->forward(...)`.

  /// \fn ptr() const
  /// A new shared_ptr to a copy of this activation, sharing its state.

  /// \fn operator()(Args&&... args) const
  /// forward(args...), torch's call spelling.
};

/// max(x, 0) + negative_slope * min(x, 0).
class LeakyReLU : public Module {
 public:
  /// negative_slope from o (default 0.01).
  explicit LeakyReLU(const LeakyReLUOptions& o = {}) : options(o) {}
  std::string type_name() const override { return "LeakyReLU"; }
  std::string extra_repr() const override;
  /// relu(x) - negative_slope * relu(-x). The gradient at x = 0 is 0 (torch gives
  /// negative_slope there).
  Tensor forward(const Tensor& x) const;
  /// An empty activation (torch's `LeakyReLU{nullptr}`), holding no state until one is
  /// assigned to it.
  REMORA_LAYER_HANDLE(LeakyReLU)
  /// \fn operator->()
  /// This activation, for torch's holder spelling `m->forward(...)`.

  /// \fn operator->() const
  /// This activation, for torch's holder spelling `m->forward(...)`.

  /// \fn ptr() const
  /// A new shared_ptr to a copy of this activation, sharing its state.

  /// \fn operator()(Args&&... args) const
  /// forward(args...), torch's call spelling.

  /// The options, read at each forward.
  LeakyReLUOptions options;
};

/// Exact GELU 0.5 x (1 + erf(x / sqrt 2)), or with approximate("tanh")
/// 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))).
class GELU : public Module {
 public:
  /// An Error when o.approximate() is neither "none" nor "tanh".
  explicit GELU(const GELUOptions& o = {});
  std::string type_name() const override { return "GELU"; }
  std::string extra_repr() const override;
  /// The exact form runs the gelu op; the tanh form is composed of elementwise ops.
  Tensor forward(const Tensor& x) const;
  /// An empty activation (torch's `GELU{nullptr}`), holding no state until one is
  /// assigned to it.
  REMORA_LAYER_HANDLE(GELU)
  /// \fn operator->()
  /// This activation, for torch's holder spelling `m->forward(...)`.

  /// \fn operator->() const
  /// This activation, for torch's holder spelling `m->forward(...)`.

  /// \fn ptr() const
  /// A new shared_ptr to a copy of this activation, sharing its state.

  /// \fn operator()(Args&&... args) const
  /// forward(args...), torch's call spelling.

  /// The options, read at each forward.
  GELUOptions options;
};

/// tanh(x), elementwise (torch::nn::Tanh).
class Tanh : public Module {
 public:
  Tanh() = default;
  std::string type_name() const override { return "Tanh"; }
  /// tanh(x).
  Tensor forward(const Tensor& x) const { return tanh(x); }
  /// An empty activation (torch's `Tanh{nullptr}`), holding no state until one is
  /// assigned to it.
  REMORA_LAYER_HANDLE(Tanh)
  /// \fn operator->()
  /// This activation, for torch's holder spelling `m->forward(...)`.

  /// \fn operator->() const
  /// This activation, for torch's holder spelling `m->forward(...)`.

  /// \fn ptr() const
  /// A new shared_ptr to a copy of this activation, sharing its state.

  /// \fn operator()(Args&&... args) const
  /// forward(args...), torch's call spelling.
};

/// 1 / (1 + e^-x), elementwise (torch::nn::Sigmoid).
class Sigmoid : public Module {
 public:
  Sigmoid() = default;
  std::string type_name() const override { return "Sigmoid"; }
  /// sigmoid(x).
  Tensor forward(const Tensor& x) const { return sigmoid(x); }
  /// An empty activation (torch's `Sigmoid{nullptr}`), holding no state until one is
  /// assigned to it.
  REMORA_LAYER_HANDLE(Sigmoid)
  /// \fn operator->()
  /// This activation, for torch's holder spelling `m->forward(...)`.

  /// \fn operator->() const
  /// This activation, for torch's holder spelling `m->forward(...)`.

  /// \fn ptr() const
  /// A new shared_ptr to a copy of this activation, sharing its state.

  /// \fn operator()(Args&&... args) const
  /// forward(args...), torch's call spelling.
};

/// x * sigmoid(x) (also called swish).
class SiLU : public Module {
 public:
  SiLU() = default;
  std::string type_name() const override { return "SiLU"; }
  /// x * sigmoid(x), composed of two ops.
  Tensor forward(const Tensor& x) const { return mul(x, sigmoid(x)); }
  /// An empty activation (torch's `SiLU{nullptr}`), holding no state until one is
  /// assigned to it.
  REMORA_LAYER_HANDLE(SiLU)
  /// \fn operator->()
  /// This activation, for torch's holder spelling `m->forward(...)`.

  /// \fn operator->() const
  /// This activation, for torch's holder spelling `m->forward(...)`.

  /// \fn ptr() const
  /// A new shared_ptr to a copy of this activation, sharing its state.

  /// \fn operator()(Args&&... args) const
  /// forward(args...), torch's call spelling.
};

/// softmax over dim (torch: nn::Softmax(dim) or nn::Softmax(nn::SoftmaxOptions(dim))).
class Softmax : public Module {
 public:
  /// Softmax over o.dim().
  explicit Softmax(const SoftmaxOptions& o) : options(o) {}
  /// Softmax over dim.
  explicit Softmax(int64_t dim) : options(dim) {}
  std::string type_name() const override { return "Softmax"; }
  std::string extra_repr() const override { return "dim=" + std::to_string(options.dim()); }
  /// exp(x) / sum(exp(x)) along options.dim(), x's shape.
  Tensor forward(const Tensor& x) const { return softmax(x, options.dim()); }
  /// An empty activation (torch's `Softmax{nullptr}`), holding no state until one is
  /// assigned to it.
  REMORA_LAYER_HANDLE(Softmax)
  /// \fn operator->()
  /// This activation, for torch's holder spelling `m->forward(...)`.

  /// \fn operator->() const
  /// This activation, for torch's holder spelling `m->forward(...)`.

  /// \fn ptr() const
  /// A new shared_ptr to a copy of this activation, sharing its state.

  /// \fn operator()(Args&&... args) const
  /// forward(args...), torch's call spelling.

  /// The options (the dim), read at each forward.
  SoftmaxOptions options{-1};
};

/// log(softmax(x)) over dim, computed stably (torch::nn::LogSoftmax).
class LogSoftmax : public Module {
 public:
  /// LogSoftmax over o.dim().
  explicit LogSoftmax(const LogSoftmaxOptions& o) : options(o) {}
  /// LogSoftmax over dim.
  explicit LogSoftmax(int64_t dim) : options(dim) {}
  std::string type_name() const override { return "LogSoftmax"; }
  std::string extra_repr() const override { return "dim=" + std::to_string(options.dim()); }
  /// log_softmax(x, options.dim()), x's shape.
  Tensor forward(const Tensor& x) const { return log_softmax(x, options.dim()); }
  /// An empty activation (torch's `LogSoftmax{nullptr}`), holding no state until one is
  /// assigned to it.
  REMORA_LAYER_HANDLE(LogSoftmax)
  /// \fn operator->()
  /// This activation, for torch's holder spelling `m->forward(...)`.

  /// \fn operator->() const
  /// This activation, for torch's holder spelling `m->forward(...)`.

  /// \fn ptr() const
  /// A new shared_ptr to a copy of this activation, sharing its state.

  /// \fn operator()(Args&&... args) const
  /// forward(args...), torch's call spelling.

  /// The options (the dim), read at each forward.
  LogSoftmaxOptions options{-1};
};

/// The input unchanged.
class Identity : public Module {
 public:
  Identity() = default;
  std::string type_name() const override { return "Identity"; }
  /// x itself (the same tensor: no copy, no autograd node). Takes one tensor,
  /// where torch's Identity takes any arguments.
  Tensor forward(const Tensor& x) const { return x; }
  /// An empty module (torch's `Identity{nullptr}`), holding no state until one is
  /// assigned to it.
  REMORA_LAYER_HANDLE(Identity)
  /// \fn operator->()
  /// This module, for torch's holder spelling `m->forward(...)`.

  /// \fn operator->() const
  /// This module, for torch's holder spelling `m->forward(...)`.

  /// \fn ptr() const
  /// A new shared_ptr to a copy of this module, sharing its state.

  /// \fn operator()(Args&&... args) const
  /// forward(args...), torch's call spelling.
};

/// x.flatten(start_dim, end_dim); torch's defaults keep the batch dim.
class Flatten : public Module {
 public:
  /// Merges dims start_dim..end_dim of o (default 1..-1).
  explicit Flatten(const FlattenOptions& o = {}) : options(o) {}
  std::string type_name() const override { return "Flatten"; }
  std::string extra_repr() const override;
  /// x with dims start_dim..end_dim merged into one (a view when the strides
  /// allow, else a copy); a 0-d x gives [1]. Dims are wrapped against x.dim(); a
  /// start after the end is an Error.
  Tensor forward(const Tensor& x) const { return x.flatten(options.start_dim(), options.end_dim()); }
  /// An empty module (torch's `Flatten{nullptr}`), holding no state until one is
  /// assigned to it.
  REMORA_LAYER_HANDLE(Flatten)
  /// \fn operator->()
  /// This module, for torch's holder spelling `m->forward(...)`.

  /// \fn operator->() const
  /// This module, for torch's holder spelling `m->forward(...)`.

  /// \fn ptr() const
  /// A new shared_ptr to a copy of this module, sharing its state.

  /// \fn operator()(Args&&... args) const
  /// forward(args...), torch's call spelling.

  /// The options, read at each forward.
  FlattenOptions options;
};

}  // namespace nn
}  // namespace remora
