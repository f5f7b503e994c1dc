// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// Layers with PyTorch's parameter names, shapes, default initialisation and math,
/// so a torch state_dict loads with load_state_dict and gives the same numbers.
///
/// Letters: B batch, L length (Lq queries, Lk keys), d model width, H heads,
/// D = d / H head width, V vocabulary, ... any leading dims.
/// Every constructor takes a DType (default f32; f64 for references) and draws its
/// initial values from `gen` (default: the global generator). The parameters are
/// created on the CPU; Module::to moves them. A forward's input must be on the
/// parameters' device, and floating inputs of their dtype.
#pragma once
#include <memory>
#include <string>

#include "../core/generator.h"
#include "module.h"
#include "options.h"

namespace remora {
namespace nn {

/// y = x W^T + b. weight [out, in], bias [out]; x [..., in] -> [..., out].
/// Init as torch: W, b ~ U(-1/sqrt(in), 1/sqrt(in)).
class Linear : public Module {
 public:
  /// in_features, out_features > 0 and a floating dt, else an Error; no bias when
  /// bias = false.
  Linear(int64_t in_features, int64_t out_features, bool bias = true, DType dt = DType::f32,
         Generator* gen = nullptr);
  /// From LinearOptions (in_features, out_features, bias).
  explicit Linear(const LinearOptions& o, DType dt = DType::f32, Generator* gen = nullptr);
  std::string type_name() const override { return "Linear"; }
  std::string extra_repr() const override;
  /// x [..., in_features] -> [..., out_features] (the linear op; an Error when the
  /// last dim is not in_features). Gradient to x, weight and bias.
  Tensor forward(const Tensor& x) const;
  /// Re-draws the torch default initialisation.
  void reset_parameters(Generator* gen = nullptr);
  /// An empty layer (torch's `Linear{nullptr}`), holding no state until one is
  /// assigned to it.
  REMORA_LAYER_HANDLE(Linear)
  /// \fn operator->()
  /// This layer, for torch's holder spelling `m->forward(...)`.

  /// \fn operator->() const
  /// This layer, for torch's holder spelling `m->forward(...)`.

  /// \fn ptr() const
  /// A new shared_ptr to a copy of this layer, sharing its state.

  /// \fn operator()(Args&&... args) const
  /// forward(args...), torch's call spelling.

  /// Input width (the last dim of x).
  int64_t in_features = 0, out_features = 0;  ///< Output width.
  /// Weight [out_features, in_features], registered as "weight".
  Tensor weight, bias;  ///< Bias [out_features], registered as "bias"; undefined when bias = false.
};

/// ids i64 [...] -> [..., d]. weight [V, d] ~ N(0, 1); the row padding_idx (when
/// >= 0) is zeroed and gets no gradient. padding_idx = -1 means none.
class Embedding : public Module {
 public:
  /// num_embeddings, embedding_dim > 0 and padding_idx in [-1, num_embeddings),
  /// else an Error; dt must be floating.
  Embedding(int64_t num_embeddings, int64_t embedding_dim, int64_t padding_idx = -1,
            DType dt = DType::f32, Generator* gen = nullptr);
  /// From EmbeddingOptions (num_embeddings, embedding_dim, padding_idx).
  explicit Embedding(const EmbeddingOptions& o, DType dt = DType::f32, Generator* gen = nullptr);
  std::string type_name() const override { return "Embedding"; }
  std::string extra_repr() const override;
  /// ids i64 [...] with values in [0, V) -> [..., d] (the embedding op). ids of
  /// another dtype are an Error, and so is an id out of range (on CUDA at the
  /// next sync: ops/ops.h, Indexing). Gradient to weight only, none to the row
  /// padding_idx.
  Tensor forward(const Tensor& ids) const;
  /// An empty layer (torch's `Embedding{nullptr}`), holding no state until one is
  /// assigned to it.
  REMORA_LAYER_HANDLE(Embedding)
  /// \fn operator->()
  /// This layer, for torch's holder spelling `m->forward(...)`.

  /// \fn operator->() const
  /// This layer, for torch's holder spelling `m->forward(...)`.

  /// \fn ptr() const
  /// A new shared_ptr to a copy of this layer, sharing its state.

  /// \fn operator()(Args&&... args) const
  /// forward(args...), torch's call spelling.

  /// Number of rows V.
  int64_t num_embeddings = 0, embedding_dim = 0, padding_idx = -1;  ///< The zero row, or -1 for none.
  /// \var embedding_dim
  /// Width d of each row.

  /// The table [V, d], registered as "weight".
  Tensor weight;
};

/// Normalises the last dim: x [..., d]. weight ones, bias zeros.
class LayerNorm : public Module {
 public:
  /// d > 0, else an Error; eps is added to the variance. weight starts at ones,
  /// bias at zeros.
  explicit LayerNorm(int64_t d, double eps = 1e-5, DType dt = DType::f32);
  /// From LayerNormOptions (d, eps).
  explicit LayerNorm(const LayerNormOptions& o, DType dt = DType::f32);
  std::string type_name() const override { return "LayerNorm"; }
  std::string extra_repr() const override;
  /// (x - mean) / sqrt(var + eps) * weight + bias over the last dim, var the
  /// biased variance (the layer_norm op): x [..., d] -> x's shape; an Error when
  /// the last dim is not d. Gradient to x, weight and bias.
  Tensor forward(const Tensor& x) const;
  /// An empty layer (torch's `LayerNorm{nullptr}`), holding no state until one is
  /// assigned to it.
  REMORA_LAYER_HANDLE(LayerNorm)
  /// \fn operator->()
  /// This layer, for torch's holder spelling `m->forward(...)`.

  /// \fn operator->() const
  /// This layer, for torch's holder spelling `m->forward(...)`.

  /// \fn ptr() const
  /// A new shared_ptr to a copy of this layer, sharing its state.

  /// \fn operator()(Args&&... args) const
  /// forward(args...), torch's call spelling.

  /// Width of the normalised last dim.
  int64_t d = 0;
  /// Added to the variance, read at each forward.
  double eps = 1e-5;
  /// Scale [d], registered as "weight".
  Tensor weight, bias;  ///< Shift [d], registered as "bias".
};

/// Inverted dropout in training mode, identity in eval mode.
class Dropout : public Module {
 public:
  /// p in [0, 1), else an Error. gen draws the masks (null: the global
  /// generator); it must outlive the layer.
  explicit Dropout(double p = 0.5, Generator* gen = nullptr);
  /// From DropoutOptions (p).
  explicit Dropout(const DropoutOptions& o, Generator* gen = nullptr);
  std::string type_name() const override { return "Dropout"; }
  std::string extra_repr() const override;
  /// In training mode each element is kept with probability 1 - p and scaled by
  /// 1 / (1 - p), else 0 (the dropout op); in eval mode, or with p = 0, x itself.
  /// x's shape and dtype. Gradient to x.
  Tensor forward(const Tensor& x) const;
  /// An empty layer (torch's `Dropout{nullptr}`), holding no state until one is
  /// assigned to it.
  REMORA_LAYER_HANDLE(Dropout)
  /// \fn operator->()
  /// This layer, for torch's holder spelling `m->forward(...)`.

  /// \fn operator->() const
  /// This layer, for torch's holder spelling `m->forward(...)`.

  /// \fn ptr() const
  /// A new shared_ptr to a copy of this layer, sharing its state.

  /// \fn operator()(Args&&... args) const
  /// forward(args...), torch's call spelling.

  /// Drop probability, read at each forward.
  double p = 0.5;
  Generator* gen = nullptr;  ///< The masks' generator; null: the global generator.
};

/// fc2(dropout(act(fc1(x)))), x [..., d] -> [..., d]; act "relu" or "gelu" (exact erf).
class FeedForward : public Module {
 public:
  /// fc1 [d -> d_inner] and fc2 [d_inner -> d] with biases, initialised as
  /// Linear from gen; activation "relu" or "gelu", else an Error. gen also
  /// draws the dropout masks (null: the global generator).
  FeedForward(int64_t d, int64_t d_inner, double dropout = 0, const std::string& activation = "relu",
              DType dt = DType::f32, Generator* gen = nullptr);
  /// From FeedForwardOptions (d, d_inner, dropout, activation).
  explicit FeedForward(const FeedForwardOptions& o, DType dt = DType::f32, Generator* gen = nullptr);
  std::string type_name() const override { return "FeedForward"; }
  /// x [..., d] -> [..., d]. With "relu" the activation and dropout run as one op
  /// (relu_dropout). Gradient to x and every parameter.
  Tensor forward(const Tensor& x) const;
  /// An empty layer (torch's `FeedForward{nullptr}`), holding no state until one is
  /// assigned to it.
  REMORA_LAYER_HANDLE(FeedForward)
  /// \fn operator->()
  /// This layer, for torch's holder spelling `m->forward(...)`.

  /// \fn operator->() const
  /// This layer, for torch's holder spelling `m->forward(...)`.

  /// \fn ptr() const
  /// A new shared_ptr to a copy of this layer, sharing its state.

  /// \fn operator()(Args&&... args) const
  /// forward(args...), torch's call spelling.

  /// "relu" or "gelu" (exact, erf), read at each forward.
  std::string activation;
  /// The first projection, d -> d_inner (child "fc1").
  std::shared_ptr<Linear> fc1, fc2;  ///< The second projection, d_inner -> d (child "fc2").
  /// The dropout after the activation (child "dropout"); its p, training mode and
  /// generator apply.
  std::shared_ptr<Dropout> drop;
};

// Attention layers (MultiHeadAttention, RSAAttention) live in rsa.h.

}  // namespace nn
}  // namespace remora
