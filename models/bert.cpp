// SPDX-License-Identifier: BSD-3-Clause
// BERT-style encoders (BertForMaskedLM with HuggingFace's parameter names):
// config validation and the modules. Reading and writing HuggingFace
// config.json files and checkpoint directories is in bert_hf.cpp.
#include "bert.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "../core/autograd.h"
#include "../nn/init.h"
#include "../ops/ops.h"

namespace remora {
namespace models {

// ---------------------------------------------------------------- config

double BertConfig::parameter_count() const {
  const double d = double(hidden_size), V = double(vocab_size), I = double(intermediate_size);
  const double emb = (V + double(max_position_embeddings) + double(type_vocab_size)) * d + 2 * d;
  const double layer = 4 * (d * d + d) + 2 * d + (d * I + I) + (I * d + d) + 2 * d;
  const double heads = (d * d + d) + (d * d + d) + 2 * d + V + (2 * d + 2);  // pooler, MLM transform, bias, NSP
  return emb + double(num_hidden_layers) * layer + heads + double(num_classes) * (d + 1);
}

BertConfig::ActivationBytes BertConfig::activation_bytes(const ActivationShape& s) const {
  const double B = double(s.batch), T = double(s.seq_len);
  const double d = double(hidden_size), H = double(num_attention_heads), di = double(intermediate_size);
  const double layers = s.train ? double(num_hidden_layers) : 1;
  ActivationBytes a;
  a.scores = 4.0 * layers * 3 * B * H * T * T;
  a.layers = 4.0 * layers * (12 * B * T * d + 2 * B * T * di);
  a.logits = 4.0 * (s.train ? 3 : 2) * B * T * double(vocab_size);
  return a;
}

void BertConfig::validate() const {
  REMORA_CHECK(vocab_size >= 1, "bert: vocab_size must be >= 1, got " << vocab_size);
  REMORA_CHECK(hidden_size >= 1, "bert: hidden_size must be >= 1, got " << hidden_size);
  REMORA_CHECK(num_hidden_layers >= 1, "bert: num_hidden_layers must be >= 1, got " << num_hidden_layers);
  REMORA_CHECK(num_attention_heads >= 1, "bert: num_attention_heads must be >= 1, got " << num_attention_heads);
  REMORA_CHECK(hidden_size % num_attention_heads == 0,
               "bert: hidden_size = " << hidden_size << " is not a multiple of num_attention_heads = "
                                      << num_attention_heads);
  REMORA_CHECK(num_classes >= 0, "bert: num_classes must be >= 0, got " << num_classes);
  REMORA_CHECK(intermediate_size >= 1, "bert: intermediate_size must be >= 1, got " << intermediate_size);
  REMORA_CHECK(hidden_act == "gelu",
               "bert: hidden_act must be \"gelu\" (exact erf gelu), got \"" << hidden_act << "\"");
  REMORA_CHECK(hidden_dropout_prob >= 0 && hidden_dropout_prob < 1,
               "bert: hidden_dropout_prob must be in [0, 1), got " << hidden_dropout_prob);
  REMORA_CHECK(attention_probs_dropout_prob >= 0 && attention_probs_dropout_prob < 1,
               "bert: attention_probs_dropout_prob must be in [0, 1), got " << attention_probs_dropout_prob);
  REMORA_CHECK(max_position_embeddings >= 1,
               "bert: max_position_embeddings must be >= 1, got " << max_position_embeddings);
  REMORA_CHECK(type_vocab_size >= 1, "bert: type_vocab_size must be >= 1, got " << type_vocab_size);
  REMORA_CHECK(layer_norm_eps > 0, "bert: layer_norm_eps must be > 0, got " << layer_norm_eps);
  REMORA_CHECK(pad_token_id >= -1 && pad_token_id < vocab_size,
               "bert: pad_token_id must be in [0, vocab_size) (or -1 for none), got " << pad_token_id);
  REMORA_CHECK(initializer_range >= 0, "bert: initializer_range must be >= 0, got " << initializer_range);
  REMORA_CHECK(attention == "softmax" || attention == "rsa",
               "bert: attention must be \"softmax\" or \"rsa\", got \"" << attention << "\"");
  REMORA_CHECK(gate == "head" || gate == "layer", "bert: gate must be \"head\" or \"layer\", got \"" << gate << "\"");
  if (attention == "rsa") {
    rem.validate("bert");
    REMORA_CHECK(!rem.masked, "bert: the REM of a bidirectional encoder must be unmasked (rem.masked = false)");
    REMORA_CHECK(rem.num_heads() >= 1 && rem.num_heads() <= num_attention_heads,
                 "bert: rsa needs 1.." << num_attention_heads << " REM heads, got " << rem.num_heads());
  }
}

// ---------------------------------------------------------------- modules

namespace {
std::shared_ptr<nn::Module> holder() { return std::make_shared<nn::Module>(); }
int64_t head_dim(const BertConfig& c) { return c.hidden_size / c.num_attention_heads; }

// The attention of q, k, v [B, H, L, D] -> the context [B, L, H D].
Tensor attend(const BertSelfAttention& a, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& bias,
              const Tensor& key_padding) {
  const int64_t B = q.size(0), L = q.size(2), H = q.size(1), D = q.size(3);
  RsaOptions opt;
  opt.scale = 1.0 / std::sqrt(double(D));
  opt.dropout = a.cfg.attention_probs_dropout_prob;
  opt.train = a.is_training();
  opt.gen = a.gen;
  // Softmax heads see the additive finfo.min bias; only the REM part needs
  // key_padding (it zeroes the padded key columns of P).
  Tensor o = a.rem ? rsa_attention(q, k, v, a.rem->weights(), bias, key_padding, opt)
                   : rsa_attention(q, k, v, RemWeights{}, bias, Tensor(), opt);
  return o.permute({0, 2, 1, 3}).reshape({B, L, H * D});
}

// The layer after its attention: a = LN(x + Dropout(dense(ctx))), then the
// feed-forward block; per token, so any leading shape.
Tensor after_attention(const BertLayer& l, const Tensor& ctx, const Tensor& x) {
  const bool tr = l.is_training();
  const double p = l.cfg.hidden_dropout_prob;
  Tensor a = l.attention_ln->forward(add(dropout(l.attention_dense->forward(ctx), p, tr, l.gen), x));
  Tensor i = gelu(l.intermediate_dense->forward(a));
  return l.output_ln->forward(add(dropout(l.output_dense->forward(i), p, tr, l.gen), a));
}

// The real tokens of a padded batch: a classifier's layers run their
// per-token work (projections, layer norms, feed-forward) on these rows alone,
// [T, d] instead of [B L, d]; the attention gets q, k, v placed back into
// [B, L, d] (zeros at the padding, which the mask hides from every real row)
// and its output's rows are taken again. The real rows' values are those of
// the padded computation (every per-token op treats rows alike); only the
// padded rows, which a classifier never reads, are not computed.
struct RealRows {
  int64_t B = 0, L = 0;
  Tensor rows;  // i64 [T]: the flat positions b L + i of the real tokens
  Tensor slot;  // i64 [B L]: each position's row, or T (a zero row) at the padding
  Tensor cls;   // i64 [B]: each sequence's first row (its [CLS])
  // x [B, L, n] -> its real rows [T, n].
  Tensor take(const Tensor& x) const { return index_select(x.reshape({B * L, x.size(-1)}), 0, rows); }
  // x [T, n] -> [B, L, n], zeros at the padding.
  Tensor place(const Tensor& x) const {
    const int64_t n = x.size(-1);
    return index_select(cat({x, Tensor::zeros({1, n}, x.dtype(), x.device())}, 0), 0, slot).reshape({B, L, n});
  }
};

// The rows of a mask [B, L] whose every sequence starts with a real token and
// that has padding; none (B = 0) otherwise (nothing to save, or a layout
// the rows path does not take).
RealRows real_rows(const Tensor& attention_mask) {
  RealRows r;
  const int64_t B = attention_mask.size(0), L = attention_mask.size(1);
  const std::vector<double> m = attention_mask.to(DType::f64).to(Device::cpu()).to_vector();
  std::vector<int64_t> rows, slot(size_t(B * L), 0), cls(size_t(B), 0);
  for (int64_t b = 0; b < B; ++b) {
    if (m[size_t(b * L)] == 0) return r;
    cls[size_t(b)] = int64_t(rows.size());
    for (int64_t i = 0; i < L; ++i) {
      const int64_t pos = b * L + i;
      slot[size_t(pos)] = m[size_t(pos)] != 0 ? int64_t(rows.size()) : -1;
      if (m[size_t(pos)] != 0) rows.push_back(pos);
    }
  }
  const int64_t T = int64_t(rows.size());
  if (T == B * L) return r;
  for (int64_t& s : slot)
    if (s < 0) s = T;
  const Device dev = attention_mask.device();
  r.B = B;
  r.L = L;
  r.rows = Tensor::from_vector(rows).to(dev);
  r.slot = Tensor::from_vector(slot).to(dev);
  r.cls = Tensor::from_vector(cls).to(dev);
  return r;
}

// BertLayer::forward on the real rows x [T, d].
Tensor layer_rows(const BertLayer& l, const Tensor& x, const RealRows& r, const Tensor& bias,
                  const Tensor& key_padding) {
  const BertSelfAttention& a = *l.self_attention;
  const int64_t H = a.cfg.num_attention_heads, D = head_dim(a.cfg);
  auto heads = [&](const Tensor& t) { return r.place(t).reshape({r.B, r.L, H, D}).permute({0, 2, 1, 3}); };
  Tensor ctx = attend(a, heads(a.query->forward(x)), heads(a.key->forward(x)), heads(a.value->forward(x)), bias,
                      key_padding);
  return after_attention(l, r.take(ctx), x);
}
}  // namespace

BertEmbeddings::BertEmbeddings(const BertConfig& c, DType dt, Generator* g) : cfg(c), gen(g) {
  const int64_t d = c.hidden_size;
  word_embeddings = register_module(
      "word_embeddings", std::make_shared<nn::Embedding>(c.vocab_size, d, c.pad_token_id, dt, g));
  position_embeddings = register_module(
      "position_embeddings", std::make_shared<nn::Embedding>(c.max_position_embeddings, d, -1, dt, g));
  token_type_embeddings = register_module(
      "token_type_embeddings", std::make_shared<nn::Embedding>(c.type_vocab_size, d, -1, dt, g));
  LayerNorm = register_module("LayerNorm", std::make_shared<nn::LayerNorm>(d, c.layer_norm_eps, dt));
}

Tensor BertEmbeddings::forward(const Tensor& ids, const Tensor& tt) const {
  const int64_t L = ids.size(1);
  Tensor pos = Tensor::arange(L, DType::i64, ids.device());
  // HF order: (word + token_type) + position
  Tensor e = add(add(word_embeddings->forward(ids), token_type_embeddings->forward(tt)),
                 position_embeddings->forward(pos).unsqueeze(0));
  return dropout(LayerNorm->forward(e), cfg.hidden_dropout_prob, is_training(), gen);
}

BertSelfAttention::BertSelfAttention(const BertConfig& c, DType dt, Generator* g) : cfg(c), gen(g) {
  const int64_t d = c.hidden_size;
  query = register_module("query", std::make_shared<nn::Linear>(d, d, true, dt, g));
  key = register_module("key", std::make_shared<nn::Linear>(d, d, true, dt, g));
  value = register_module("value", std::make_shared<nn::Linear>(d, d, true, dt, g));
  if (c.attention == "rsa")
    rem = register_module("rem", std::make_shared<nn::RemParameters>(c.rem, c.gate, c.rem_init, dt, g));
}

Tensor BertSelfAttention::forward(const Tensor& x, const Tensor& bias, const Tensor& key_padding) const {
  const int64_t B = x.size(0), L = x.size(1), H = cfg.num_attention_heads, D = head_dim(cfg);
  auto split = [&](const Tensor& t) { return t.reshape({B, L, H, D}).permute({0, 2, 1, 3}); };
  return attend(*this, split(query->forward(x)), split(key->forward(x)), split(value->forward(x)), bias, key_padding);
}

BertLayer::BertLayer(const BertConfig& c, DType dt, Generator* g) : cfg(c), gen(g) {
  const int64_t d = c.hidden_size, I = c.intermediate_size;
  auto attention = register_module("attention", holder());
  self_attention = attention->register_module("self", std::make_shared<BertSelfAttention>(c, dt, g));
  auto aout = attention->register_module("output", holder());
  attention_dense = aout->register_module("dense", std::make_shared<nn::Linear>(d, d, true, dt, g));
  attention_ln = aout->register_module("LayerNorm", std::make_shared<nn::LayerNorm>(d, c.layer_norm_eps, dt));
  auto inter = register_module("intermediate", holder());
  intermediate_dense = inter->register_module("dense", std::make_shared<nn::Linear>(d, I, true, dt, g));
  auto out = register_module("output", holder());
  output_dense = out->register_module("dense", std::make_shared<nn::Linear>(I, d, true, dt, g));
  output_ln = out->register_module("LayerNorm", std::make_shared<nn::LayerNorm>(d, c.layer_norm_eps, dt));
}

Tensor BertLayer::forward(const Tensor& x, const Tensor& bias, const Tensor& key_padding) const {
  return after_attention(*this, self_attention->forward(x, bias, key_padding), x);
}

BertForMaskedLM::BertForMaskedLM(const BertConfig& c, DType dt, Generator* g) : cfg(c), gen(g) {
  cfg.validate();
  const int64_t d = c.hidden_size;
  auto bert = register_module("bert", holder());
  embeddings = bert->register_module("embeddings", std::make_shared<BertEmbeddings>(c, dt, g));
  auto encoder = bert->register_module("encoder", holder());
  layers = encoder->register_module("layer", std::make_shared<nn::ModuleList>());
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) layers->push_back(std::make_shared<BertLayer>(c, dt, g));
  auto pool = bert->register_module("pooler", holder());
  pooler = pool->register_module("dense", std::make_shared<nn::Linear>(d, d, true, dt, g));
  auto cls = register_module("cls", holder());
  auto pred = cls->register_module("predictions", holder());
  mlm_bias = pred->register_parameter("bias", Tensor::zeros({c.vocab_size}, dt));
  auto transform = pred->register_module("transform", holder());
  transform_dense = transform->register_module("dense", std::make_shared<nn::Linear>(d, d, true, dt, g));
  transform_ln = transform->register_module("LayerNorm", std::make_shared<nn::LayerNorm>(d, c.layer_norm_eps, dt));
  seq_relationship = cls->register_module("seq_relationship", std::make_shared<nn::Linear>(d, 2, true, dt, g));
  if (c.num_classes > 0)
    classifier = register_module("classifier", std::make_shared<nn::Linear>(d, c.num_classes, true, dt, g));
  reset_parameters(g);
}

void BertForMaskedLM::reset_parameters(Generator* g) {
  NoGradGuard ng;
  const double s = cfg.initializer_range;
  auto ends_with = [](const std::string& n, const char* suf) {
    const size_t k = std::strlen(suf);
    return n.size() >= k && n.compare(n.size() - k, k, suf) == 0;
  };
  for (auto& kv : named_parameters()) {
    const std::string& n = kv.first;
    Tensor& t = kv.second;
    if (n.find(".rem.") != std::string::npos) continue;  // below
    if (n.find("LayerNorm.weight") != std::string::npos) nn::init::ones_(t);
    else if (ends_with(n, ".bias")) nn::init::zeros_(t);
    else nn::init::normal_(t, 0.0, s, g);
  }
  if (cfg.pad_token_id >= 0) embeddings->word_embeddings->weight.select(0, cfg.pad_token_id).zero_();
  for (size_t l = 0; l < layers->size(); ++l) {
    auto sa = layers->at<BertLayer>(l)->self_attention;
    if (sa->rem) sa->rem->reset_parameters(g);
  }
}

BertForMaskedLM::Output BertForMaskedLM::forward(const Tensor& ids, const Tensor& attention_mask,
                                                 const Tensor& token_type_ids) const {
  return run(ids, attention_mask, token_type_ids, /*pretraining_heads=*/true);
}

BertForMaskedLM::Output BertForMaskedLM::run(const Tensor& ids, const Tensor& attention_mask,
                                             const Tensor& token_type_ids, bool pretraining_heads) const {
  REMORA_CHECK(ids.defined() && ids.dtype() == DType::i64 && ids.dim() == 2,
               "bert: input_ids must be i64 [B, L], got " << (ids.defined() ? ids.str() : "undefined"));
  const int64_t B = ids.size(0), L = ids.size(1);
  REMORA_CHECK(L >= 1 && L <= cfg.max_position_embeddings,
               "bert: sequence length " << L << " must be in [1, max_position_embeddings = "
                                        << cfg.max_position_embeddings << "]");
  const Tensor& w = embeddings->word_embeddings->weight;
  const DType dt = w.dtype();
  const Device dev = w.device();
  Tensor tt = token_type_ids;
  if (tt.defined()) {
    REMORA_CHECK(tt.dtype() == DType::i64 && tt.shape() == ids.shape(),
                 "bert: token_type_ids must be i64 " << shape_str(ids.shape()) << " like input_ids, got " << tt.str());
  } else {
    tt = Tensor::zeros({B, L}, DType::i64, dev);
  }
  Tensor bias, key_padding;
  if (attention_mask.defined()) {
    REMORA_CHECK(attention_mask.shape() == ids.shape(),
                 "bert: attention_mask must be " << shape_str(ids.shape()) << " like input_ids (1 = real "
                                                 << "token, 0 = padding), got " << attention_mask.str());
    // HF's extended mask: (1 - m) * finfo(dtype).min on the keys, [B, 1, 1, L].
    // finfo(dtype).min of the parameters' dtype: a finite value there (the
    // lowest double would round to -inf in f32 / bf16 / f16, and -inf + inf = NaN).
    double fmin = std::numeric_limits<double>::lowest();
    if (dt == DType::f32) fmin = double(std::numeric_limits<float>::lowest());
    if (dt == DType::bf16) fmin = -3.3895313892515355e38;  // -(2 - 2^-7) * 2^127
    if (dt == DType::f16) fmin = -65504.0;
    Tensor m = attention_mask.to(dt).reshape({B, 1, 1, L});
    bias = affine(m, -fmin, fmin);  // fmin - m * fmin: exactly 0 for m = 1
    if (cfg.attention == "rsa")
      key_padding = eq(attention_mask.to(dt), Tensor::scalar(0.0, dt, attention_mask.device()));
  }
  Output out;
  Tensor h = embeddings->forward(ids, tt);
  // A classifier reads [CLS] alone: its layers run on the real tokens' rows
  // (RealRows), skipping the padding's (hidden_states stay empty there).
  const RealRows r = !pretraining_heads && attention_mask.defined() ? real_rows(attention_mask) : RealRows{};
  if (r.B > 0) {
    Tensor x = r.take(h);
    for (size_t l = 0; l < layers->size(); ++l) x = layer_rows(*layers->at<BertLayer>(l), x, r, bias, key_padding);
    out.pooled = tanh(pooler->forward(index_select(x, 0, r.cls)));
  } else {
    out.hidden_states.push_back(h);
    for (size_t l = 0; l < layers->size(); ++l) {
      h = layers->at<BertLayer>(l)->forward(h, bias, key_padding);
      out.hidden_states.push_back(h);
    }
    out.pooled = tanh(pooler->forward(h.slice(1, 0, 1).reshape({B, cfg.hidden_size})));
  }
  if (pretraining_heads) {
    Tensor x = transform_ln->forward(gelu(transform_dense->forward(h)));
    out.mlm_logits = add(matmul(x, w.t()), mlm_bias);  // decoder tied to the word embeddings
    out.nsp_logits = seq_relationship->forward(out.pooled);
  }
  if (classifier)
    out.class_logits = classifier->forward(dropout(out.pooled, cfg.hidden_dropout_prob, is_training(), gen));
  return out;
}

Tensor BertForMaskedLM::class_logits(const Tensor& ids, const Tensor& attention_mask) const {
  return class_logits(ids, attention_mask, Tensor());
}

Tensor BertForMaskedLM::class_logits(const Tensor& ids, const Tensor& attention_mask,
                                     const Tensor& token_type_ids) const {
  REMORA_CHECK(classifier, "bert: class_logits needs a model built with num_classes > 0");
  return run(ids, attention_mask, token_type_ids, /*pretraining_heads=*/false).class_logits;
}

Tensor BertForMaskedLM::mlm_loss(const Tensor& logits, const Tensor& labels) {
  REMORA_CHECK(logits.defined() && logits.dim() == 3 && labels.defined() && labels.dtype() == DType::i64 &&
                   labels.dim() == 2 && labels.size(0) == logits.size(0) && labels.size(1) == logits.size(1),
               "bert: mlm_loss needs logits [B, L, V] and labels i64 [B, L], got "
                   << (logits.defined() ? logits.str() : "undefined") << " and "
                   << (labels.defined() ? labels.str() : "undefined"));
  return cross_entropy(logits.reshape({-1, logits.size(2)}), labels.reshape({-1}), -100);
}

Tensor BertForMaskedLM::nsp_loss(const Tensor& logits, const Tensor& labels) {
  REMORA_CHECK(logits.defined() && logits.dim() == 2 && logits.size(1) == 2 && labels.defined() &&
                   labels.dtype() == DType::i64 && labels.dim() == 1 && labels.size(0) == logits.size(0),
               "bert: nsp_loss needs logits [B, 2] and labels i64 [B]");
  return cross_entropy(logits, labels, -100);
}

}  // namespace models
}  // namespace remora
