// SPDX-License-Identifier: BSD-3-Clause
// BERT-style encoder (docs/math.md#bert-style-encoder) with HuggingFace BertForPreTraining semantics
// (BertModel + MLM head + NSP head), and RSA-BERT (an unmasked REM mixed into
// the first heads through the gate, docs/math.md#recurrence-encoding-matrices-rem and #rsa-attention-and-the-gate).
//
// Letters: B batch, L length, d hidden width, H heads, D = d / H head width,
// V vocabulary, I intermediate width. Batch-major [B, L, d].
//
// Parameter names are HuggingFace's, so checkpoints move both ways:
//   bert.embeddings.{word_embeddings,position_embeddings,token_type_embeddings}.weight,
//   bert.embeddings.LayerNorm.{weight,bias},
//   bert.encoder.layer.N.attention.self.{query,key,value}.{weight,bias},
//   bert.encoder.layer.N.attention.self.rem.{eta,nu,theta,mu}   (RSA-BERT),
//   bert.encoder.layer.N.attention.output.{dense,LayerNorm}.*,
//   bert.encoder.layer.N.intermediate.dense.*, bert.encoder.layer.N.output.{dense,LayerNorm}.*,
//   bert.pooler.dense.*, cls.predictions.bias, cls.predictions.transform.{dense,LayerNorm}.*,
//   cls.seq_relationship.*.
// The MLM decoder is tied to the word embeddings: there is no
// cls.predictions.decoder parameter (it is accepted and ignored on load).
//
//   auto m = models::load_hf_directory("bert-tiny/", DType::f32);
//   m->eval();
//   auto out = m->forward(ids, attention_mask);   // out.mlm_logits [B, L, V]
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

struct BertConfig {
  // ---- HuggingFace BertConfig keys ----
  int64_t vocab_size = 30522;
  int64_t hidden_size = 768;
  int64_t num_hidden_layers = 12;
  int64_t num_attention_heads = 12;
  int64_t intermediate_size = 3072;
  std::string hidden_act = "gelu";  // only exact gelu is supported
  double hidden_dropout_prob = 0.1;
  double attention_probs_dropout_prob = 0.1;
  int64_t max_position_embeddings = 512;
  int64_t type_vocab_size = 2;
  double layer_norm_eps = 1e-12;
  int64_t pad_token_id = 0;
  double initializer_range = 0.02;
  // ---- Remora's extras ("remora" key of config.json) ----
  std::string attention = "softmax";  // "softmax" | "rsa"
  RemSpec rem{0, 0, 0, 0, {}, /*masked=*/false, 0};  // RSA-BERT: unmasked (bidirectional)
  std::string gate = "head";  // head | layer
  nn::RemInit rem_init;
  /// > 0 adds a sequence classifier "classifier" (HF BertForSequenceClassification:
  /// dropout then a linear layer on the pooled output) with this many classes.
  int64_t num_classes = 0;

  /// Errors name the field and the bad value.
  void validate() const;
  /// The number of parameters this config builds, computed from the sizes alone
  /// (no allocation; a double, so that absurd sizes do not overflow): checked
  /// against the weights file and the memory available before building.
  double parameter_count() const;
  /// The activations of a batch `s` (f32 bytes) for the memory estimate
  /// (tools/driver/memory_estimate.h).
  struct ActivationBytes {
    double scores = 0;  // attention scores [batch, n_head, seq_len, seq_len], 3 per layer
    double layers = 0;  // about 12 [B, L, hidden] and 2 [B, L, intermediate] tensors per layer
    double logits = 0;  // the MLM logits over the vocabulary
  };
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
  static constexpr int kMaxJsonDepth = 512;
  /// The HF config.json text (model_type "bert", architectures ["BertForPreTraining"];
  /// the RSA settings under "remora"), indented by 2.
  std::string to_hf_config() const;
};

class BertEmbeddings : public nn::Module {
 public:
  BertEmbeddings(const BertConfig& c, DType dt, Generator* gen);
  std::string type_name() const override { return "BertEmbeddings"; }
  // ids, token_type_ids i64 [B, L] -> [B, L, d]
  Tensor forward(const Tensor& ids, const Tensor& token_type_ids) const;

  BertConfig cfg;
  std::shared_ptr<nn::Embedding> word_embeddings, position_embeddings, token_type_embeddings;
  std::shared_ptr<nn::LayerNorm> LayerNorm;
  Generator* gen;
};

class BertSelfAttention : public nn::Module {
 public:
  BertSelfAttention(const BertConfig& c, DType dt, Generator* gen);
  std::string type_name() const override { return "BertSelfAttention"; }
  // x [B, L, d]; bias additive [B, 1, 1, L] (or undefined); key_padding [B, L]
  // nonzero = padded (RSA only; may be undefined). Returns the context [B, L, d].
  Tensor forward(const Tensor& x, const Tensor& bias, const Tensor& key_padding) const;

  BertConfig cfg;
  std::shared_ptr<nn::Linear> query, key, value;
  std::shared_ptr<nn::RemParameters> rem;  // RSA-BERT only
  Generator* gen;
};

class BertLayer : public nn::Module {
 public:
  BertLayer(const BertConfig& c, DType dt, Generator* gen);
  std::string type_name() const override { return "BertLayer"; }
  Tensor forward(const Tensor& x, const Tensor& bias, const Tensor& key_padding) const;

  BertConfig cfg;
  std::shared_ptr<BertSelfAttention> self_attention;  // attention.self
  std::shared_ptr<nn::Linear> attention_dense;         // attention.output.dense
  std::shared_ptr<nn::LayerNorm> attention_ln;         // attention.output.LayerNorm
  std::shared_ptr<nn::Linear> intermediate_dense;      // intermediate.dense
  std::shared_ptr<nn::Linear> output_dense;            // output.dense
  std::shared_ptr<nn::LayerNorm> output_ln;            // output.LayerNorm
  Generator* gen;
};

/// BertForPreTraining (MLM + NSP heads); named BertForMaskedLM after its main use.
class BertForMaskedLM : public EncoderModel {
 public:
  explicit BertForMaskedLM(const BertConfig& c, DType dt = DType::f32, Generator* gen = nullptr);
  std::string type_name() const override { return "BertForMaskedLM"; }

  struct Output {
    Tensor mlm_logits;  // [B, L, V]
    Tensor nsp_logits;  // [B, 2]
    Tensor pooled;      // [B, d] tanh(W h[:, 0] + b)
    Tensor class_logits;  // [B, num_classes] (num_classes > 0 only)
    std::vector<Tensor> hidden_states;  // num_hidden_layers + 1 entries [B, L, d]: embeddings, each layer
  };
  /// input_ids i64 [B, L]; attention_mask [B, L] (any dtype, 1 = real token,
  /// 0 = padding; undefined = all real); token_type_ids i64 [B, L] (undefined = 0).
  /// Softmax scores get (1 - m) * finfo(dtype).min (HF); RSA heads also zero the
  /// padded key columns of P. Note: a sequence that is padding everywhere gives
  /// NaN rows in RSA-BERT (HF's softmax would attend uniformly there).
  Output forward(const Tensor& input_ids, const Tensor& attention_mask = Tensor(),
                 const Tensor& token_type_ids = Tensor()) const;
  Tensor token_logits(const Tensor& ids, const Tensor& attention_mask) const override {
    return forward(ids, attention_mask).mlm_logits;
  }
  Tensor class_logits(const Tensor& ids, const Tensor& attention_mask) const override;
  /// Mean cross-entropy of logits [B, L, V] against labels i64 [B, L], -100 ignored.
  static Tensor mlm_loss(const Tensor& logits, const Tensor& labels);
  /// Mean cross-entropy of nsp_logits [B, 2] against labels i64 [B] (0 = is next).
  static Tensor nsp_loss(const Tensor& nsp_logits, const Tensor& labels);
  /// HF _init_weights: N(0, initializer_range) Linear/Embedding weights, zero
  /// biases (cls.predictions.bias too), LayerNorm weight 1 bias 0, the padding row
  /// of the word embeddings zeroed; REM parameters by docs/math.md#initialisation-and-checkpoint-names (RemInit).
  void reset_parameters(Generator* gen = nullptr);

  BertConfig cfg;
  std::shared_ptr<BertEmbeddings> embeddings;   // bert.embeddings
  std::shared_ptr<nn::ModuleList> layers;       // bert.encoder.layer
  std::shared_ptr<nn::Linear> pooler;           // bert.pooler.dense
  Tensor mlm_bias;                              // cls.predictions.bias [V]
  std::shared_ptr<nn::Linear> transform_dense;  // cls.predictions.transform.dense
  std::shared_ptr<nn::LayerNorm> transform_ln;  // cls.predictions.transform.LayerNorm
  std::shared_ptr<nn::Linear> seq_relationship; // cls.seq_relationship
  std::shared_ptr<nn::Linear> classifier;       // num_classes > 0 only
  Generator* gen;
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

/// The MLM masking recipe (docs/math.md#bert-style-encoder, HF DataCollatorForLanguageModeling): each
/// token with special_mask == 0 is chosen with p = 0.15; a chosen token becomes
/// mask_token_id with p 0.8, a uniformly random id in [0, vocab_size) with p 0.1,
/// and stays with p 0.1. ids, special_mask i64 [...] (special_mask may be
/// undefined = none special). Returns (masked_ids, labels): labels = the original
/// id at chosen positions, -100 elsewhere. Deterministic given gen's state.
std::pair<Tensor, Tensor> mlm_mask(const Tensor& ids, const Tensor& special_mask, int64_t vocab_size,
                                   int64_t mask_token_id, Generator& gen);

}  // namespace models
}  // namespace remora
