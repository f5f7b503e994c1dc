// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// BERT-style encoder (`docs/math.md#bert-style-encoder`) with HuggingFace BertForPreTraining semantics
/// (BertModel + MLM head + NSP head), and RSA-BERT (an unmasked REM mixed into
/// the first heads through the gate, `docs/math.md#recurrence-encoding-matrices-rem` and `#rsa-attention-and-the-gate`).
///
/// Letters: B batch, L length, d hidden width, H heads, D = d / H head width,
/// V vocabulary, I intermediate width. Batch-major [B, L, d].
///
/// Parameter names are HuggingFace's, so checkpoints move both ways:
///   bert.embeddings.{word_embeddings,position_embeddings,token_type_embeddings}.weight,
///   bert.embeddings.LayerNorm.{weight,bias},
///   bert.encoder.layer.N.attention.self.{query,key,value}.{weight,bias},
///   bert.encoder.layer.N.attention.self.rem.{eta,nu,theta,mu}   (RSA-BERT),
///   bert.encoder.layer.N.attention.output.{dense,LayerNorm}.*,
///   bert.encoder.layer.N.intermediate.dense.*, bert.encoder.layer.N.output.{dense,LayerNorm}.*,
///   bert.pooler.dense.*, cls.predictions.bias, cls.predictions.transform.{dense,LayerNorm}.*,
///   cls.seq_relationship.*.
/// The MLM decoder is tied to the word embeddings: there is no
/// cls.predictions.decoder parameter (it is accepted and ignored on load).
///
/// \code
///   auto m = models::load_hf_directory("bert-tiny/", DType::f32);
///   m->eval();
///   auto out = m->forward(ids, attention_mask);   // out.mlm_logits [B, L, V]
/// \endcode
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "../core/generator.h"
#include "../nn/layers.h"
#include "../nn/rsa.h"
#include "sequence_model.h"

namespace remora {
namespace models {

/// The sizes and options of a BertForMaskedLM: HuggingFace's BertConfig keys
/// (defaults: bert-base) and Remora's extras. validate() checks the ranges
/// stated here. The driver's model.type bert fills it from its keys
/// (docs/config_keys.md): d_model -> hidden_size, n_layer -> num_hidden_layers,
/// n_head -> num_attention_heads, d_inner -> intermediate_size, dropout ->
/// hidden_dropout_prob, dropatt -> attention_probs_dropout_prob, max_len (or the
/// task's longest input) -> max_position_embeddings.
struct BertConfig {
  /// \name HuggingFace BertConfig keys
  /// @{
  int64_t vocab_size = 30522;        ///< Vocabulary V (>= 1).
  int64_t hidden_size = 768;         ///< Hidden width d (>= 1; a multiple of num_attention_heads).
  int64_t num_hidden_layers = 12;    ///< Encoder layers (>= 1).
  int64_t num_attention_heads = 12;  ///< Attention heads H (>= 1); head width D = d / H.
  int64_t intermediate_size = 3072;  ///< Feed-forward width I (>= 1).
  std::string hidden_act = "gelu";  ///< Only "gelu" (exact, erf) is supported.
  /// Dropout probability in [0, 1) on the embeddings, each sublayer's output and
  /// before the classifier.
  double hidden_dropout_prob = 0.1;
  double attention_probs_dropout_prob = 0.1;  ///< Dropout probability in [0, 1) on the attention weights.
  int64_t max_position_embeddings = 512;  ///< Position embeddings (>= 1): the longest input L.
  int64_t type_vocab_size = 2;       ///< Token types (segments; >= 1).
  double layer_norm_eps = 1e-12;     ///< Every layer norm's epsilon (> 0).
  /// The word embeddings' padding row, in [0, vocab_size), or -1 for none
  /// (config.json null); zeroed by reset_parameters().
  int64_t pad_token_id = 0;
  double initializer_range = 0.02;   ///< Standard deviation of the normal initialisation (>= 0).
  /// @}
  /// \name Remora's extras ("remora" key of config.json)
  /// @{
  std::string attention = "softmax";  ///< "softmax" | "rsa" (RSA-BERT).
  /// attention "rsa": the REM heads (1..num_attention_heads; must be unmasked,
  /// bidirectional).
  RemSpec rem{0, 0, 0, 0, {}, /*masked=*/false, 0};
  std::string gate = "head";  ///< attention "rsa": one REM gate per head ("head") or per layer ("layer").
  nn::RemInit rem_init;       ///< attention "rsa": the REM parameters' initialisation.
  /// > 0 adds a sequence classifier "classifier" (HF BertForSequenceClassification:
  /// dropout then a linear layer on the pooled output) with this many classes.
  int64_t num_classes = 0;
  /// @}

  /// Throws remora::Error when a value is outside its range; errors name the
  /// field and the bad value.
  void validate() const;
  /// The number of parameters this config builds, computed from the sizes alone
  /// (no allocation; a double, so that absurd sizes do not overflow): checked
  /// against the weights file and the memory available before building.
  double parameter_count() const;
  /// The activations of a batch `s` (f32 bytes) for the memory estimate
  /// (cli/memory_estimate.h).
  struct ActivationBytes {
    double scores = 0;  ///< Attention scores [batch, n_head, seq_len, seq_len], 3 per layer.
    double layers = 0;  ///< About 12 [B, L, hidden] and 2 [B, L, intermediate] tensors per layer.
    double logits = 0;  ///< The MLM logits over the vocabulary.
  };
  /// The activation bytes of a batch of shape \p s (training keeps every layer's).
  ActivationBytes activation_bytes(const ActivationShape& s) const;
  /// Reads the text of a HuggingFace config.json (a JSON object). Unknown keys are an
  /// error, except the generic PretrainedConfig keys HF writes (architectures,
  /// model_type, transformers_version, torch_dtype, ...) and keys starting with "_".
  /// `what` names the source in errors (e.g. the file path).
  static BertConfig from_hf_config(const std::string& json_text, const std::string& what = "config.json");
  /// For a caller that already holds a parsed JSON value (nlohmann::json or anything
  /// with dump()): a template, so this installed header needs no JSON library.
  /// A value nested deeper than kMaxJsonDepth levels is an Error (checked without
  /// recursion: dump() recurses once per level and would overflow the stack).
  template <class Json>
  static BertConfig from_hf_json(const Json& j, const std::string& what = "config.json") {
    using It = typename Json::const_iterator;
    std::vector<std::pair<It, It>> open;  // the containers being walked
    if (j.is_structured()) open.emplace_back(j.cbegin(), j.cend());
    while (!open.empty()) {
      if (open.size() > size_t(kMaxJsonDepth))
        throw Error(what + ": JSON nested more than " + std::to_string(kMaxJsonDepth) + " levels");
      if (open.back().first == open.back().second) {
        open.pop_back();
        continue;
      }
      const Json& v = open.back().first.value();
      ++open.back().first;
      if (v.is_structured()) open.emplace_back(v.cbegin(), v.cend());
    }
    return from_hf_config(j.dump(), what);
  }
  static constexpr int kMaxJsonDepth = 512;  ///< The deepest JSON nesting from_hf_json accepts.
  /// The HF config.json text (model_type "bert", architectures ["BertForPreTraining"];
  /// the RSA settings under "remora"), indented by 2.
  std::string to_hf_config() const;
};

/// The embeddings: LayerNorm(word + token type + position), then dropout
/// (bert.embeddings).
class BertEmbeddings : public nn::Module {
 public:
  /// Tables of c.vocab_size, c.max_position_embeddings and c.type_vocab_size
  /// rows of width d, dtype \p dt on the CPU (initialised by
  /// BertForMaskedLM::reset_parameters).
  BertEmbeddings(const BertConfig& c, DType dt, Generator* gen);
  /// "BertEmbeddings".
  std::string type_name() const override { return "BertEmbeddings"; }
  /// ids, token_type_ids i64 [B, L] -> [B, L, d] (positions 0..L-1). Dropout in
  /// training mode only. Records gradients to the tables and the layer norm.
  Tensor forward(const Tensor& ids, const Tensor& token_type_ids) const;

  BertConfig cfg;  ///< The model's configuration.
  /// \var word_embeddings
  /// [V, d], padding row pad_token_id.
  /// \var position_embeddings
  /// [max_position_embeddings, d].
  /// \var token_type_embeddings
  /// [type_vocab_size, d].
  std::shared_ptr<nn::Embedding> word_embeddings, position_embeddings, token_type_embeddings;
  std::shared_ptr<nn::LayerNorm> LayerNorm;  ///< Over d, eps layer_norm_eps.
  Generator* gen;  ///< Draws the dropout masks (null: the default generator).
};

/// Multi-head self-attention (attention.self): softmax heads, and with
/// attention "rsa" a REM in the first heads through the gate.
class BertSelfAttention : public nn::Module {
 public:
  /// query, key, value d -> d with biases, and rem for attention "rsa"; dtype
  /// \p dt on the CPU.
  BertSelfAttention(const BertConfig& c, DType dt, Generator* gen);
  /// "BertSelfAttention".
  std::string type_name() const override { return "BertSelfAttention"; }
  /// x [B, L, d]; bias additive [B, 1, 1, L] (or undefined); key_padding [B, L]
  /// nonzero = padded (RSA only; may be undefined). Returns the context [B, L, d]
  /// (before the output projection). Dropout on the attention weights in
  /// training mode only. Records gradients to x and the parameters.
  Tensor forward(const Tensor& x, const Tensor& bias, const Tensor& key_padding) const;

  BertConfig cfg;  ///< The model's configuration.
  /// \var query
  /// d -> d (H heads of D), with bias.
  /// \var key
  /// d -> d, with bias.
  /// \var value
  /// d -> d, with bias.
  std::shared_ptr<nn::Linear> query, key, value;
  std::shared_ptr<nn::RemParameters> rem;  ///< RSA-BERT only (null for softmax attention).
  Generator* gen;  ///< Draws the dropout masks (null: the default generator).
};

/// One encoder layer (post-LN, HF BertLayer): a = LN(x + Dropout(dense(attn(x))));
/// out = LN(a + Dropout(output_dense(gelu(intermediate_dense(a))))).
class BertLayer : public nn::Module {
 public:
  /// The layer of \p c, dtype \p dt on the CPU.
  BertLayer(const BertConfig& c, DType dt, Generator* gen);
  /// "BertLayer".
  std::string type_name() const override { return "BertLayer"; }
  /// x [B, L, d] -> [B, L, d]; bias and key_padding as BertSelfAttention::forward.
  /// Dropout in training mode only. Records gradients to x and the parameters.
  Tensor forward(const Tensor& x, const Tensor& bias, const Tensor& key_padding) const;

  BertConfig cfg;  ///< The model's configuration.
  std::shared_ptr<BertSelfAttention> self_attention;  ///< attention.self
  std::shared_ptr<nn::Linear> attention_dense;         ///< attention.output.dense, d -> d.
  std::shared_ptr<nn::LayerNorm> attention_ln;         ///< attention.output.LayerNorm
  std::shared_ptr<nn::Linear> intermediate_dense;      ///< intermediate.dense, d -> I.
  std::shared_ptr<nn::Linear> output_dense;            ///< output.dense, I -> d.
  std::shared_ptr<nn::LayerNorm> output_ln;            ///< output.LayerNorm
  Generator* gen;  ///< Draws the dropout masks (null: the default generator).
};

/// BertForPreTraining (MLM + NSP heads); named BertForMaskedLM after its main use.
class BertForMaskedLM : public EncoderModel {
 public:
  /// Builds the model of \p c (validated first: remora::Error on a bad field),
  /// parameters of dtype \p dt on the CPU, initialised by reset_parameters(gen);
  /// \p gen also draws the dropout masks.
  explicit BertForMaskedLM(const BertConfig& c, DType dt = DType::f32, Generator* gen = nullptr);
  /// "BertForMaskedLM".
  std::string type_name() const override { return "BertForMaskedLM"; }

  /// The result of forward().
  struct Output {
    Tensor mlm_logits;  ///< [B, L, V], the decoder tied to the word embeddings.
    Tensor nsp_logits;  ///< [B, 2], next-sentence logits (0 = is next).
    Tensor pooled;      ///< [B, d] tanh(W h[:, 0] + b)
    Tensor class_logits;  ///< [B, num_classes] (num_classes > 0 only; else undefined).
    /// num_hidden_layers + 1 entries [B, L, d]: embeddings, each layer.
    std::vector<Tensor> hidden_states;
  };
  /// input_ids i64 [B, L]; attention_mask [B, L] (any dtype, 1 = real token,
  /// 0 = padding; undefined = all real); token_type_ids i64 [B, L] (undefined = 0).
  /// Softmax scores get (1 - m) * finfo(dtype).min (HF); RSA heads also zero the
  /// padded key columns of P. Note: a sequence that is padding everywhere gives
  /// NaN rows in RSA-BERT (HF's softmax would attend uniformly there).
  /// L must be in [1, max_position_embeddings]; a wrong dtype or shape throws
  /// remora::Error. CPU or CUDA; records gradients to every parameter. Dropout
  /// in training mode only.
  Output forward(const Tensor& input_ids, const Tensor& attention_mask = Tensor(),
                 const Tensor& token_type_ids = Tensor()) const;
  /// forward(ids, attention_mask).mlm_logits, [B, L, V].
  Tensor token_logits(const Tensor& ids, const Tensor& attention_mask) const override {
    return forward(ids, attention_mask).mlm_logits;
  }
  /// forward(ids, attention_mask).class_logits, [B, num_classes]; remora::Error
  /// when built without classes. The MLM and next-sentence heads are not run
  /// (the same numbers, without the [B, L, V] logits).
  Tensor class_logits(const Tensor& ids, const Tensor& attention_mask) const override;
  /// The same with the segment ids of a pair, token_type_ids i64 [B, L] (0: the
  /// first text, 1: the second; undefined = 0), as forward() takes them.
  Tensor class_logits(const Tensor& ids, const Tensor& attention_mask, const Tensor& token_type_ids) const;
  /// Mean cross-entropy of logits [B, L, V] against labels i64 [B, L], -100 ignored.
  static Tensor mlm_loss(const Tensor& logits, const Tensor& labels);
  /// Mean cross-entropy of nsp_logits [B, 2] against labels i64 [B] (0 = is next).
  static Tensor nsp_loss(const Tensor& nsp_logits, const Tensor& labels);
  /// HF _init_weights: N(0, initializer_range) Linear/Embedding weights, zero
  /// biases (cls.predictions.bias too), LayerNorm weight 1 bias 0, the padding row
  /// of the word embeddings zeroed; REM parameters by `docs/math.md#initialisation-and-checkpoint-names` (RemInit).
  void reset_parameters(Generator* gen = nullptr);

  BertConfig cfg;  ///< The configuration, as built.
  std::shared_ptr<BertEmbeddings> embeddings;   ///< bert.embeddings
  std::shared_ptr<nn::ModuleList> layers;       ///< bert.encoder.layer: num_hidden_layers BertLayer modules.
  std::shared_ptr<nn::Linear> pooler;           ///< bert.pooler.dense, d -> d.
  Tensor mlm_bias;                              ///< cls.predictions.bias [V]
  std::shared_ptr<nn::Linear> transform_dense;  ///< cls.predictions.transform.dense, d -> d (then gelu).
  std::shared_ptr<nn::LayerNorm> transform_ln;  ///< cls.predictions.transform.LayerNorm
  std::shared_ptr<nn::Linear> seq_relationship; ///< cls.seq_relationship, d -> 2.
  std::shared_ptr<nn::Linear> classifier;       ///< d -> num_classes; num_classes > 0 only.
  Generator* gen;  ///< Draws the dropout masks (null: the default generator).

 private:
  // forward(); without the MLM and next-sentence heads unless pretraining_heads.
  Output run(const Tensor& ids, const Tensor& attention_mask, const Tensor& token_type_ids,
             bool pretraining_heads) const;
};

/// Maps a HuggingFace checkpoint name onto the model's: LayerNorm ".gamma"/".beta"
/// -> ".weight"/".bias", "cls.predictions.decoder.bias" -> "cls.predictions.bias",
/// unprefixed BertModel names ("embeddings.*", "encoder.*", "pooler.*") -> "bert.*".
/// Returns "" for names that are ignored (the tied cls.predictions.decoder.weight,
/// *.position_ids buffers).
std::string canonical_hf_name(const std::string& name);

/// Copies an HF state (names as above) into the model. Every encoder/embedding/MLM
/// parameter must be present; bert.pooler.* and cls.seq_relationship.* may be
/// missing (HF BertForMaskedLM checkpoints have no pooler/NSP head) and keep their
/// values. Unknown keys, duplicates after aliasing and shape mismatches are errors
/// naming `what` (the file) and the key.
void load_hf_state(BertForMaskedLM& m, const std::vector<std::pair<std::string, Tensor>>& state,
                   const std::string& what = "state");

/// The largest config.json read (HF configs are a few KiB; a label map can be more).
constexpr uint64_t kMaxHfConfigBytes = 16 << 20;
/// Before a model is built from a downloaded config: an Error naming cfg_path
/// when the config describes more parameters than the weights file can hold (2
/// bytes each at the least) or more than the memory available (parameters of
/// bytes_per_parameter bytes plus the weights file, read whole).
void check_hf_size(const BertConfig& c, const std::string& cfg_path, const std::string& weights_path,
                   uint64_t weights_bytes, int bytes_per_parameter);

/// Reads DIR/config.json (BertConfig keys) and DIR/model.safetensors (HF names)
/// into a model with parameters of dtype dt. Errors name the file and key.
/// Neither file may be a FIFO or another special file (an Error, never a wait),
/// and the config must fit the weights file and the memory (check_hf_size)
/// before anything is built.
std::shared_ptr<BertForMaskedLM> load_hf_directory(const std::string& dir, DType dt = DType::f32);
/// Writes DIR/config.json and DIR/model.safetensors (HF names, the model's dtype,
/// atomic writes); creates DIR when missing.
void save_hf_directory(const BertForMaskedLM& m, const std::string& dir);

/// The MLM masking recipe (`docs/math.md#bert-style-encoder`, HF DataCollatorForLanguageModeling): each
/// token with special_mask == 0 is chosen with p = 0.15; a chosen token becomes
/// mask_token_id with p 0.8, a uniformly random id in [0, vocab_size) with p 0.1,
/// and stays with p 0.1. ids, special_mask i64 [...] (special_mask may be
/// undefined = none special). Returns (masked_ids, labels): labels = the original
/// id at chosen positions, -100 elsewhere. Deterministic given gen's state.
std::pair<Tensor, Tensor> mlm_mask(const Tensor& ids, const Tensor& special_mask, int64_t vocab_size,
                                   int64_t mask_token_id, Generator& gen);

/// Whole-word masking (HF DataCollatorForWholeWordMask): the same recipe as
/// mlm_mask with a word, not a token, as the unit that is chosen. A word is a
/// token with word_start != 0 and the tokens after it with word_start == 0 up
/// to the next word start; a special token (special_mask != 0, never chosen)
/// ends a word, and the first token of a row (the last dimension), or the first
/// after a special token, starts one whatever its word_start. Each word is
/// chosen with p = \p probability (in [0, 1]); every token of a chosen word gets
/// its label and becomes mask_token_id with p 0.8, a uniformly random id in [0,
/// vocab_size) with p 0.1, and stays with p 0.1, each token on its own.
/// ids, special_mask, word_start i64 [...] (special_mask undefined = none
/// special; word_start undefined = every token starts a word, which is
/// token-level masking: with probability 0.15 the result equals mlm_mask's for
/// the same generator state). Returns (masked_ids, labels) as mlm_mask does;
/// the generator advances as in mlm_mask. Deterministic given gen's state.
std::pair<Tensor, Tensor> mlm_mask_whole_words(const Tensor& ids, const Tensor& special_mask, const Tensor& word_start,
                                               int64_t vocab_size, int64_t mask_token_id, Generator& gen,
                                               double probability = 0.15);

}  // namespace models
}  // namespace remora
