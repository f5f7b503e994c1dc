// SPDX-License-Identifier: BSD-3-Clause
// Layers with PyTorch's parameter names, shapes, default initialisation and math,
// so a torch state_dict loads with load_state_dict and gives the same numbers.
//
// Letters: B batch, L length (Lq queries, Lk keys), d model width, H heads,
// D = d / H head width, V vocabulary, ... any leading dims.
// Every constructor takes a DType (default f32; f64 for references) and draws its
// initial values from `gen` (default: the global generator).
#pragma once
#include <memory>
#include <string>

#include "../core/generator.h"
#include "module.h"
#include "options.h"

namespace remora {
namespace nn {

/// y = x Wᵀ + b. weight [out, in], bias [out]; x [..., in] -> [..., out].
/// Init as torch: W, b ~ U(-1/sqrt(in), 1/sqrt(in)).
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true, DType dt = DType::f32,
         Generator* gen = nullptr);
  explicit Linear(const LinearOptions& o, DType dt = DType::f32, Generator* gen = nullptr);
  std::string type_name() const override { return "Linear"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) const;
  /// Re-draws the torch default initialisation.
  void reset_parameters(Generator* gen = nullptr);
  REMORA_LAYER_HANDLE(Linear)

  int64_t in_features = 0, out_features = 0;
  Tensor weight, bias;  // bias undefined when bias = false
};

/// ids i64 [...] -> [..., d]. weight [V, d] ~ N(0, 1); the row padding_idx (when
/// >= 0) is zeroed and gets no gradient. padding_idx = -1 means none.
class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim, int64_t padding_idx = -1,
            DType dt = DType::f32, Generator* gen = nullptr);
  explicit Embedding(const EmbeddingOptions& o, DType dt = DType::f32, Generator* gen = nullptr);
  std::string type_name() const override { return "Embedding"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& ids) const;
  REMORA_LAYER_HANDLE(Embedding)

  int64_t num_embeddings = 0, embedding_dim = 0, padding_idx = -1;
  Tensor weight;
};

/// Normalises the last dim: x [..., d]. weight ones, bias zeros.
class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t d, double eps = 1e-5, DType dt = DType::f32);
  explicit LayerNorm(const LayerNormOptions& o, DType dt = DType::f32);
  std::string type_name() const override { return "LayerNorm"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) const;
  REMORA_LAYER_HANDLE(LayerNorm)

  int64_t d = 0;
  double eps = 1e-5;
  Tensor weight, bias;
};

/// Inverted dropout in training mode, identity in eval mode.
class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5, Generator* gen = nullptr);
  explicit Dropout(const DropoutOptions& o, Generator* gen = nullptr);
  std::string type_name() const override { return "Dropout"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) const;
  REMORA_LAYER_HANDLE(Dropout)

  double p = 0.5;
  Generator* gen = nullptr;  // null: the global generator
};

/// fc2(dropout(act(fc1(x)))), x [..., d] -> [..., d]; act "relu" or "gelu" (exact erf).
class FeedForward : public Module {
 public:
  FeedForward(int64_t d, int64_t d_inner, double dropout = 0, const std::string& activation = "relu",
              DType dt = DType::f32, Generator* gen = nullptr);
  explicit FeedForward(const FeedForwardOptions& o, DType dt = DType::f32, Generator* gen = nullptr);
  std::string type_name() const override { return "FeedForward"; }
  Tensor forward(const Tensor& x) const;
  REMORA_LAYER_HANDLE(FeedForward)

  std::string activation;
  std::shared_ptr<Linear> fc1, fc2;
  std::shared_ptr<Dropout> drop;
};

// Attention layers (MultiHeadAttention, RSAAttention) live in rsa.h.

}  // namespace nn
}  // namespace remora
