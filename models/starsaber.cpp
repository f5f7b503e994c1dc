// SPDX-License-Identifier: BSD-3-Clause
#include "starsaber.h"

#include <cmath>
#include <functional>

#include "../core/autograd.h"
#include "../nn/init.h"
#include "../ops/ops.h"
#include "../ops/rem.h"

namespace remora {
namespace models {

// ---------------------------------------------------------------- config

double StarSaberConfig::parameter_count() const {
  const double d = double(d_model), V = double(vocab_size), C = double(num_classes);
  const double layer = (causal ? 3 : 4) * d * d + d + (gated ? 2 * d * d + d : 1);
  return V * d + double(n_layer) * layer + (V * d + V) + (C > 0 ? C * d + C : 0);
}

StarSaberConfig::ActivationBytes StarSaberConfig::activation_bytes(const ActivationShape& s) const {
  const double d = double(d_model), B = double(s.batch), T = double(s.seq_len);
  const double layers = s.train ? double(n_layer) : 1;
  ActivationBytes a;
  a.scores = 4.0 * layers * 3 * B * T * T;
  a.layers = 4.0 * layers * 6 * B * T * d;
  a.logits = 4.0 * (s.train ? 3 : 2) * B * T * double(vocab_size);
  return a;
}

void StarSaberConfig::validate() const {
  REMORA_CHECK(vocab_size >= 1, "starsaber: vocab_size must be >= 1, got " << vocab_size
                                    << "; fix: set it to the tokenizer's vocabulary (incl. [MASK])");
  REMORA_CHECK(d_model >= 1, "starsaber: d_model must be >= 1, got " << d_model);
  REMORA_CHECK(n_layer >= 1, "starsaber: n_layer must be >= 1, got " << n_layer);
  REMORA_CHECK(dropout >= 0 && dropout < 1, "starsaber: dropout must be in [0, 1), got " << dropout);
  REMORA_CHECK(num_classes >= 0, "starsaber: num_classes must be >= 0 (0 = no classifier), got " << num_classes);
  REMORA_CHECK(pad_token_id >= -1 && pad_token_id < vocab_size,
               "starsaber: pad_token_id must be in [0, vocab_size = " << vocab_size
                                                                      << ") or -1 for none, got " << pad_token_id);
  REMORA_CHECK(init == "xavier" || init == "normal",
               "starsaber: init must be \"xavier\" or \"normal\", got \"" << init << "\"");
  REMORA_CHECK(init_range > 0 && std::isfinite(init_range),
               "starsaber: init_range must be > 0 (the std of init = \"normal\"), got " << init_range);
}

int64_t starsaber_num_parameters(const StarSaberConfig& c) {
  c.validate();
  const int64_t d = c.d_model, V = c.vocab_size, C = c.num_classes;
  // W_b, past, future, input.weight: 4 d²; input.bias d; then alpha 1 (plain) or gate d x 2d + d.
  const int64_t layer = (c.causal ? 3 : 4) * d * d + d + (c.gated ? 2 * d * d + d : 1);
  return V * d + c.n_layer * layer + (V * d + V) + (C > 0 ? C * d + C : 0);
}

// ---------------------------------------------------------------- the layer

Tensor starsaber_relation(const Tensor& h, const Tensor& W_b, const Tensor& key_padding,
                          bool scale_scores, bool causal) {
  REMORA_CHECK(h.defined() && h.dim() == 3, "starsaber: h must be [B, L, d], got "
                                                << (h.defined() ? h.str() : "undefined"));
  const int64_t B = h.size(0), L = h.size(1), d = h.size(2);
  REMORA_CHECK(W_b.defined() && W_b.shape() == Shape({d, d}),
               "starsaber: W_b must be [d, d] = [" << d << ", " << d << "], got "
                                                  << (W_b.defined() ? W_b.str() : "undefined"));
  const DType dt = h.dtype();
  // S [B, L, L]: S_ij = s · h_i W_b h_jᵀ (row i = query, column j = key).
  Tensor S = matmul(matmul(h, W_b), h.transpose(1, 2));
  if (scale_scores) S = affine(S, 1.0 / std::sqrt(double(d)), 0.0);
  // invalid [B or 1, L, L]: 1 on the diagonal and on padded key columns.
  Tensor r = Tensor::arange(L, DType::i64, h.device()).to(dt);
  // (causal: also every key after the query, j > i.)
  Tensor invalid = (causal ? le : eq)(r.reshape({L, 1}), r.reshape({1, L})).reshape({1, L, L});
  if (key_padding.defined()) {
    REMORA_CHECK(key_padding.shape() == Shape({B, L}),
                 "starsaber: key_padding must be [B, L] = [" << B << ", " << L
                                                             << "] (nonzero = padded), got " << key_padding.str());
    Tensor pad = ne(key_padding.to(dt), Tensor::scalar(0.0, dt, h.device())).reshape({B, 1, L});
    invalid = maximum(invalid, pad);
  }
  // A finite fill, then a multiply by the valid mask: a row with no admissible
  // key is exactly 0 (a_i = 0) instead of NaN, and the gradient stays finite.
  Tensor A = softmax(masked_fill(S, invalid, -1e30), -1);
  return mul(A, affine(invalid, -1.0, 1.0));
}

Tensor starsaber_layer(const Tensor& h, const Tensor& x, const Tensor& key_padding, const Tensor& W_b,
                       const Tensor& W_past, const Tensor& W_future, const Tensor& U, const Tensor& b,
                       const Tensor& alpha, const Tensor& W_z, const Tensor& b_z, bool scale_scores,
                       double p, bool train, Generator* gen, Tensor* relation) {
  REMORA_CHECK(x.defined() && h.defined() && x.shape() == h.shape(),
               "starsaber: h and x must both be [B, L, d], got " << (h.defined() ? h.str() : "undefined")
                                                               << " and " << (x.defined() ? x.str() : "undefined"));
  const bool gated = W_z.defined();
  REMORA_CHECK(gated != alpha.defined(),
               "starsaber: pass alpha (plain layer) or W_z and b_z (gated layer), not both or neither");
  // A [B, L, L]; split by direction: tril(A, -1) keeps j < i, triu(A, 1) keeps j > i.
  const bool causal = !W_future.defined();
  Tensor A = starsaber_relation(h, W_b, key_padding, scale_scores, causal);
  if (relation) *relation = A;
  // a [B, L, d] = A_past (h W_pastᵀ) + A_future (h W_futureᵀ): two masked matmuls
  // (causal: A is already zero for j >= i, the past term alone).
  Tensor a = causal ? matmul(A, linear(h, W_past))
                    : add(matmul(tril(A, -1), linear(h, W_past)), matmul(triu(A, 1), linear(h, W_future)));
  // cand [B, L, d] = tanh(a + U x + b), dropped out before the residual/gate.
  Tensor cand = dropout(tanh(add(a, linear(x, U, b))), p, train, gen);
  if (!gated) return add(h, mul(alpha, cand));  // h + α tanh(...), α [1] broadcast
  // z = σ(W_z [a; x] + b_z); (1 − z) h + z cand through the gate op.
  return gate(h, cand, linear(cat({a, x}, -1), W_z, b_z));
}

StarSaberLayer::StarSaberLayer(const StarSaberConfig& c, DType dt, Generator* g) : cfg(c), gen(g) {
  const int64_t d = c.d_model;
  W_b = register_parameter("W_b", Tensor::zeros({d, d}, dt));
  if (!c.gated) alpha = register_parameter("alpha", Tensor::zeros({1}, dt));
  past = register_module("past", std::make_shared<nn::Linear>(d, d, false, dt, g));
  if (!c.causal) future = register_module("future", std::make_shared<nn::Linear>(d, d, false, dt, g));
  input = register_module("input", std::make_shared<nn::Linear>(d, d, true, dt, g));
  if (c.gated) gate = register_module("gate", std::make_shared<nn::Linear>(2 * d, d, true, dt, g));
}

Tensor StarSaberLayer::forward(const Tensor& h, const Tensor& x, const Tensor& key_padding,
                               Tensor* relation) const {
  return starsaber_layer(h, x, key_padding, W_b, past->weight, future ? future->weight : Tensor(), input->weight,
                         input->bias,
                         alpha, gate ? gate->weight : Tensor(), gate ? gate->bias : Tensor(),
                         cfg.scale_scores, cfg.dropout, is_training(), gen, relation);
}

// ---------------------------------------------------------------- the model

StarSaber::StarSaber(const StarSaberConfig& c, DType dt, Generator* g) : cfg(c), gen(g) {
  cfg.validate();
  const int64_t d = c.d_model;
  embeddings = register_module("embeddings", std::make_shared<nn::Embedding>(c.vocab_size, d, c.pad_token_id, dt, g));
  layers = register_module("layers", std::make_shared<nn::ModuleList>());
  for (int64_t l = 0; l < c.n_layer; ++l) layers->push_back(std::make_shared<StarSaberLayer>(c, dt, g));
  mlm_head = register_module("mlm_head", std::make_shared<nn::Linear>(d, c.vocab_size, true, dt, g));
  if (c.num_classes > 0)
    classifier = register_module("classifier", std::make_shared<nn::Linear>(d, c.num_classes, true, dt, g));
  reset_parameters(g);
}

void StarSaber::reset_parameters(Generator* g) {
  NoGradGuard ng;
  const bool xavier = cfg.init == "xavier";
  for (auto& kv : named_parameters()) {
    const std::string& n = kv.first;
    Tensor& t = kv.second;
    const bool is_bias = n.size() >= 5 && n.compare(n.size() - 5, 5, ".bias") == 0;
    const bool is_alpha = n.size() >= 6 && n.compare(n.size() - 6, 6, ".alpha") == 0;
    if (is_bias || is_alpha) nn::init::zeros_(t);
    else if (n == "embeddings.weight") nn::init::normal_(t, 0.0, xavier ? 1.0 : cfg.init_range, g);
    else if (xavier) nn::init::xavier_uniform_(t, 1.0, g);
    else nn::init::normal_(t, 0.0, cfg.init_range, g);
  }
  if (cfg.pad_token_id >= 0) embeddings->weight.select(0, cfg.pad_token_id).zero_();
}

Tensor StarSaber::encode(const Tensor& ids, const Tensor& attention_mask, std::vector<Tensor>* hidden,
                         std::vector<Tensor>* relations) const {
  REMORA_CHECK(ids.defined() && ids.dtype() == DType::i64 && ids.dim() == 2 && ids.size(1) >= 1,
               "starsaber: ids must be i64 [B, L] with L >= 1, got " << (ids.defined() ? ids.str() : "undefined"));
  const DType dt = embeddings->weight.dtype();
  Tensor key_padding;
  if (attention_mask.defined()) {
    REMORA_CHECK(attention_mask.shape() == ids.shape(),
                 "starsaber: attention_mask must be " << shape_str(ids.shape())
                                                      << " like ids (1 = real token, 0 = padding), got "
                                                      << attention_mask.str());
    key_padding = eq(attention_mask.to(dt), Tensor::scalar(0.0, dt, attention_mask.device()));
  }
  // x = h^0 [B, L, d]: token embeddings only (no positions; see the header).
  Tensor x = dropout(embeddings->forward(ids), cfg.dropout, is_training(), gen);
  Tensor h = x;
  if (hidden) hidden->push_back(h);
  for (size_t l = 0; l < layers->size(); ++l) {
    Tensor A;
    h = layers->at<StarSaberLayer>(l)->forward(h, x, key_padding, relations ? &A : nullptr);
    if (hidden) hidden->push_back(h);
    if (relations) relations->push_back(A);
  }
  return h;
}

namespace {
// Mean of h [B, L, d] over real tokens -> [B, d]; a row without real tokens gives 0.
Tensor mean_pool(const Tensor& h, const Tensor& attention_mask) {
  if (!attention_mask.defined()) return mean(h, {1});
  const DType dt = h.dtype();
  Tensor m = ne(attention_mask.to(dt), Tensor::scalar(0.0, dt, h.device())).unsqueeze(2);  // [B, L, 1]
  Tensor count = maximum(sum(m, {1}), Tensor::scalar(1.0, dt, h.device()));              // [B, 1]
  return div(sum(mul(h, m), {1}), count);
}
}  // namespace

StarSaber::Output StarSaber::forward(const Tensor& ids, const Tensor& attention_mask) const {
  Output out;
  Tensor h = encode(ids, attention_mask, &out.hidden_states, &out.relations);
  out.token_logits = mlm_head->forward(h);
  out.pooled = mean_pool(h, attention_mask);
  if (classifier) out.class_logits = classifier->forward(dropout(out.pooled, cfg.dropout, is_training(), gen));
  return out;
}

Tensor StarSaber::token_logits(const Tensor& ids, const Tensor& attention_mask) const {
  return mlm_head->forward(encode(ids, attention_mask));
}

Tensor StarSaber::class_logits(const Tensor& ids, const Tensor& attention_mask) const {
  REMORA_CHECK(classifier, "starsaber: class_logits needs a model built with num_classes > 0 "
                           "(StarSaberConfig::num_classes is 0)");
  Tensor pooled = mean_pool(encode(ids, attention_mask), attention_mask);
  return classifier->forward(dropout(pooled, cfg.dropout, is_training(), gen));
}

Tensor StarSaber::mlm_loss(const Tensor& logits, const Tensor& labels) {
  REMORA_CHECK(logits.defined() && logits.dim() == 3 && labels.defined() && labels.dtype() == DType::i64 &&
                   labels.dim() == 2 && labels.size(0) == logits.size(0) && labels.size(1) == logits.size(1),
               "starsaber: mlm_loss needs logits [B, L, V] and labels i64 [B, L], got "
                   << (logits.defined() ? logits.str() : "undefined") << " and "
                   << (labels.defined() ? labels.str() : "undefined"));
  return cross_entropy(logits.reshape({-1, logits.size(2)}), labels.reshape({-1}), -100);
}

Tensor StarSaber::class_loss(const Tensor& logits, const Tensor& labels) {
  REMORA_CHECK(logits.defined() && logits.dim() == 2 && labels.defined() && labels.dtype() == DType::i64 &&
                   labels.dim() == 1 && labels.size(0) == logits.size(0),
               "starsaber: class_loss needs logits [B, C] and labels i64 [B], got "
                   << (logits.defined() ? logits.str() : "undefined") << " and "
                   << (labels.defined() ? labels.str() : "undefined"));
  return cross_entropy(logits, labels, -100);
}

// ---------------------------------------------------------------- causal LM

StarSaberLM::StarSaberLM(const StarSaberConfig& c, DType dt, Generator* g) {
  REMORA_CHECK(c.causal, "StarSaberLM: needs a config with causal = true (relations to earlier positions only)");
  model = std::make_shared<StarSaber>(c, dt, g);
  // The same modules under the same names: checkpoints are interchangeable.
  for (auto& kv : model->named_children()) register_module(kv.first, kv.second);
}

SequenceOutput StarSaberLM::run(const Tensor& ids, const SequenceState&) const {
  model->train(is_training());
  return {model->token_logits(ids, Tensor()), SequenceState{}};
}

}  // namespace models

}  // namespace remora
