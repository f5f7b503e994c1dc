#include "layers.h"

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
  drop = register_module("dropout", std::make_shared<Dropout>(p));
}

Tensor FeedForward::forward(const Tensor& x) const {
  Tensor h = fc1->forward(x);  // [..., d_inner]
  h = activation == "gelu" ? gelu(h) : relu(h);
  return fc2->forward(drop->forward(h));
}

// ---- MultiHeadAttention ----

HeadProjections project_heads(const Tensor& query, const Tensor& key, const Tensor& value,
                              const Tensor& in_proj_weight, const Tensor& in_proj_bias,
                              int64_t H) {
  const int64_t d = query.size(2), D = d / H, B = query.size(0);
  Tensor q, k, v;  // [B, L, d]
  if (query.is_same(key) && key.is_same(value)) {
    std::vector<Tensor> qkv = chunk(linear(query, in_proj_weight, in_proj_bias), 3, -1);
    q = qkv[0], k = qkv[1], v = qkv[2];
  } else {
    auto part = [&](const Tensor& x, int64_t i) {
      Tensor b = in_proj_bias.defined() ? in_proj_bias.slice(0, i * d, (i + 1) * d) : Tensor();
      return linear(x, in_proj_weight.slice(0, i * d, (i + 1) * d), b);
    };
    q = part(query, 0), k = part(key, 1), v = part(value, 2);
  }
  // [B, L, d] -> [B, H, L, D]
  auto heads = [&](const Tensor& x) { return x.reshape({B, x.size(1), H, D}).permute({0, 2, 1, 3}); };
  return {heads(q), heads(k), heads(v)};
}

MultiHeadAttention::MultiHeadAttention(int64_t d, int64_t H, double p, bool has_bias, DType dt,
                                       Generator* gen)
    : embed_dim(d), num_heads(H), head_dim(H > 0 ? d / H : 0), dropout(p) {
  REMORA_CHECK(d > 0 && H > 0, "MultiHeadAttention: d and num_heads must be > 0, got d = "
                                   << d << ", num_heads = " << H);
  REMORA_CHECK(d % H == 0, "MultiHeadAttention: d = " << d << " is not divisible by num_heads = "
                                                      << H << "; pick H dividing d");
  REMORA_CHECK(p >= 0 && p < 1, "MultiHeadAttention: dropout must be in [0, 1), got " << p);
  in_proj_weight = register_parameter("in_proj_weight", Tensor::empty({3 * d, d}, dt));
  if (has_bias) in_proj_bias = register_parameter("in_proj_bias", Tensor::empty({3 * d}, dt));
  out_proj = register_module("out_proj", std::make_shared<Linear>(d, d, has_bias, dt, gen));
  reset_parameters(gen);
}

void MultiHeadAttention::reset_parameters(Generator* gen) {
  // torch._reset_parameters: xavier in_proj, zero biases; out_proj.weight keeps
  // the Linear default.
  init::xavier_uniform_(in_proj_weight, 1, gen);
  if (in_proj_bias.defined()) init::zeros_(in_proj_bias);
  out_proj->reset_parameters(gen);
  if (out_proj->bias.defined()) init::zeros_(out_proj->bias);
}

Tensor MultiHeadAttention::forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                   const Tensor& attn_mask, const Tensor& key_padding_mask,
                                   bool causal, Tensor* weights) const {
  const int64_t d = embed_dim, H = num_heads, D = head_dim;
  auto sh = [](const Tensor& t) { return t.defined() ? shape_str(t.shape()) : std::string("undefined"); };
  REMORA_CHECK(query.defined() && query.dim() == 3 && query.size(2) == d,
               "MultiHeadAttention: query must be [B, Lq, " << d << "], got " << sh(query));
  const int64_t B = query.size(0), Lq = query.size(1);
  REMORA_CHECK(key.defined() && key.dim() == 3 && key.size(0) == B && key.size(2) == d,
               "MultiHeadAttention: key must be [" << B << ", Lk, " << d << "] (B from query "
                                                   << sh(query) << "), got " << sh(key));
  const int64_t Lk = key.size(1);
  REMORA_CHECK(value.defined() && value.shape() == key.shape(),
               "MultiHeadAttention: value " << sh(value) << " must have key's shape " << sh(key));
  REMORA_CHECK(!attn_mask.defined() || attn_mask.shape() == Shape({Lq, Lk}),
               "MultiHeadAttention: attn_mask must be [Lq, Lk] = [" << Lq << ", " << Lk
                                                                   << "], got " << sh(attn_mask));
  REMORA_CHECK(!key_padding_mask.defined() || key_padding_mask.shape() == Shape({B, Lk}),
               "MultiHeadAttention: key_padding_mask must be [B, Lk] = ["
                   << B << ", " << Lk << "], got " << sh(key_padding_mask));

  // In-projection. Self-attention (one tensor) uses one packed matmul, as torch.
  HeadProjections hp = project_heads(query, key, value, in_proj_weight, in_proj_bias, H);
  Tensor q = hp.q, k = hp.k, v = hp.v;  // [B, H, L, D]

  // scores [B, H, Lq, Lk] = (q / sqrt(D)) kᵀ (+ additive mask)
  Tensor scores = matmul(q / std::sqrt(double(D)), k.transpose(-2, -1));
  const double ninf = -std::numeric_limits<double>::infinity();
  if (attn_mask.defined()) {
    if (is_floating(attn_mask.dtype()))
      scores = scores + attn_mask.to(scores.dtype());
    else
      scores = masked_fill(scores, attn_mask, ninf);
  }
  if (causal) {
    Tensor block = triu(Tensor::ones({Lq, Lk}, DType::i64, scores.device()), Lk - Lq + 1);  // 1 where j > i + Lk - Lq
    scores = masked_fill(scores, block, ninf);
  }
  if (key_padding_mask.defined())
    scores = masked_fill(scores, key_padding_mask.reshape({B, 1, 1, Lk}), ninf);

  Tensor probs = softmax(scores, -1);
  probs = ::remora::dropout(probs, dropout, is_training());
  if (weights) *weights = probs;
  Tensor o = matmul(probs, v);                            // [B, H, Lq, D]
  o = o.permute({0, 2, 1, 3}).reshape({B, Lq, d});        // concat heads
  return out_proj->forward(o);
}

}  // namespace nn
}  // namespace remora
