// SPDX-License-Identifier: BSD-3-Clause
#include "layers.h"

#include <sstream>

#include <cmath>
#include <limits>

#include "../core/autograd.h"
#include "../ops/ops.h"
#include "init.h"

namespace remora {
namespace nn {

// ---- Linear ----

Linear::Linear(const LinearOptions& o, DType dt, Generator* gen)
    : Linear(o.in_features(), o.out_features(), o.bias(), dt, gen) {}

Linear::Linear(int64_t in, int64_t out, bool has_bias, DType dt, Generator* gen)
    : in_features(in), out_features(out) {
  REMORA_CHECK(in > 0 && out > 0, "Linear: in_features and out_features must be > 0, got "
                                      << in << " and " << out);
  REMORA_CHECK(is_floating(dt), "Linear: dtype must be floating, got " << dtype_name(dt));
  weight = register_parameter("weight", Tensor::empty({out, in}, dt));
  if (has_bias) bias = register_parameter("bias", Tensor::empty({out}, dt));
  reset_parameters(gen);
}

void Linear::reset_parameters(Generator* gen) {
  // torch: kaiming_uniform_(a = sqrt(5)) gives bound sqrt(6 / ((1 + 5) in)) = 1/sqrt(in).
  const double bound = 1.0 / std::sqrt(double(in_features));
  init::uniform_(weight, -bound, bound, gen);
  if (bias.defined()) init::uniform_(bias, -bound, bound, gen);
}

Tensor Linear::forward(const Tensor& x) const {
  REMORA_CHECK(x.defined(), "Linear::forward: input x is undefined");
  REMORA_CHECK(x.dim() >= 1 && x.size(-1) == in_features,
               "Linear::forward: input x " << shape_str(x.shape()) << " must be [..., "
                                           << in_features << "] for weight "
                                           << shape_str(weight.shape()) << " [out, in]");
  return linear(x, weight, bias);
}

// ---- Embedding ----

Embedding::Embedding(const EmbeddingOptions& o, DType dt, Generator* gen)
    : Embedding(o.num_embeddings(), o.embedding_dim(), o.padding_idx(), dt, gen) {}

Embedding::Embedding(int64_t V, int64_t d, int64_t pad, DType dt, Generator* gen)
    : num_embeddings(V), embedding_dim(d), padding_idx(pad) {
  REMORA_CHECK(V > 0 && d > 0, "Embedding: num_embeddings and embedding_dim must be > 0, got "
                                   << V << " and " << d);
  REMORA_CHECK(pad >= -1 && pad < V, "Embedding: padding_idx " << pad << " must be in [0, " << V
                                                               << ") or -1 for none");
  weight = register_parameter("weight", Tensor::empty({V, d}, dt));
  init::normal_(weight, 0, 1, gen);
  if (pad >= 0) {
    NoGradGuard ng;
    weight.select(0, pad).zero_();
  }
}

Tensor Embedding::forward(const Tensor& ids) const {
  REMORA_CHECK(ids.defined() && ids.dtype() == DType::i64,
               "Embedding::forward: ids must be an i64 tensor of indices in [0, "
                   << num_embeddings << "), got " << (ids.defined() ? ids.str() : "undefined"));
  return embedding(weight, ids, padding_idx);
}

// ---- LayerNorm ----

LayerNorm::LayerNorm(const LayerNormOptions& o, DType dt) : LayerNorm(o.d(), o.eps(), dt) {}

LayerNorm::LayerNorm(int64_t d_, double eps_, DType dt) : d(d_), eps(eps_) {
  REMORA_CHECK(d > 0, "LayerNorm: d must be > 0, got " << d);
  weight = register_parameter("weight", Tensor::ones({d}, dt));
  bias = register_parameter("bias", Tensor::zeros({d}, dt));
}

Tensor LayerNorm::forward(const Tensor& x) const {
  REMORA_CHECK(x.defined() && x.dim() >= 1 && x.size(-1) == d,
               "LayerNorm::forward: input x " << (x.defined() ? shape_str(x.shape()) : "undefined")
                                              << " must be [..., " << d << "]");
  return layer_norm(x, weight, bias, eps);
}

// ---- Dropout ----

Dropout::Dropout(const DropoutOptions& o, Generator* g) : Dropout(o.p(), g) {}

Dropout::Dropout(double p_, Generator* g) : p(p_), gen(g) {
  REMORA_CHECK(p >= 0 && p < 1, "Dropout: p must be in [0, 1), got " << p);
}

Tensor Dropout::forward(const Tensor& x) const { return dropout(x, p, is_training(), gen); }

// ---- FeedForward ----

FeedForward::FeedForward(const FeedForwardOptions& o, DType dt, Generator* gen)
    : FeedForward(o.d(), o.d_inner(), o.dropout(), o.activation(), dt, gen) {}

FeedForward::FeedForward(int64_t d, int64_t d_inner, double p, const std::string& act, DType dt,
                         Generator* gen)
    : activation(act) {
  REMORA_CHECK(act == "relu" || act == "gelu",
               "FeedForward: activation must be \"relu\" or \"gelu\", got \"" << act << "\"");
  fc1 = register_module("fc1", std::make_shared<Linear>(d, d_inner, true, dt, gen));
  fc2 = register_module("fc2", std::make_shared<Linear>(d_inner, d, true, dt, gen));
  drop = register_module("dropout", std::make_shared<Dropout>(p, gen));
}

Tensor FeedForward::forward(const Tensor& x) const {
  Tensor h = fc1->forward(x);  // [..., d_inner]
  if (activation == "gelu") return fc2->forward(drop->forward(gelu(h)));
  return fc2->forward(relu_dropout(h, drop->p, drop->is_training(), drop->gen));
}

std::string Linear::extra_repr() const {
  return "in_features=" + std::to_string(in_features) + ", out_features=" + std::to_string(out_features) +
         ", bias=" + (bias.defined() ? "true" : "false");
}

std::string Embedding::extra_repr() const {
  std::string s = "num_embeddings=" + std::to_string(num_embeddings) + ", embedding_dim=" + std::to_string(embedding_dim);
  if (padding_idx >= 0) s += ", padding_idx=" + std::to_string(padding_idx);
  return s;
}

std::string LayerNorm::extra_repr() const {
  std::ostringstream os;
  os << "[" << d << "], eps=" << eps;
  return os.str();
}

std::string Dropout::extra_repr() const {
  std::ostringstream os;
  os << "p=" << p;
  return os.str();
}

}  // namespace nn
}  // namespace remora
