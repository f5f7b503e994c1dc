// SPDX-License-Identifier: BSD-3-Clause
// model.type "bert": BERT / RSA-BERT for masked LM and sequence classification (models/bert.h).
#include <cstdio>

#include "../../models/bert.h"
#include "../model.h"
#include "rem_init.h"

namespace remora {
namespace driver {
namespace {

class BertModel : public Model {
 public:
  using Model::Model;

  // The model.* keys but max_len and attention are members of the library's
  // models::BertConfig, bound by their rows, with its defaults (Hugging Face's
  // BERT-base: 12 layers of 768 with 12 heads).
  static FieldTable<models::BertConfig> bert_fields() {
    using C = models::BertConfig;
    FieldTable<C> f;
    add_common_keys(f, &C::num_hidden_layers, &C::hidden_size, &C::hidden_dropout_prob);
    add_transformer_keys(f, &C::num_attention_heads, &C::intermediate_size, &C::attention_probs_dropout_prob)
        .check([](Node& m, C& c) {
          check_heads_split(m, c.hidden_size, c.num_attention_heads, /*has_d_head=*/false);
        });
    f.number("layer_norm_eps", &C::layer_norm_eps, 1e-30, 1, "every layer norm's epsilon (Hugging Face's 1e-12)");
    return f;
  }
  static FieldTable<BertModel> fields() {
    using B = BertModel;
    FieldTable<B> f;
    f.include(&B::bert_, bert_fields())
        .integer("max_len", &B::max_len_, 0, 0, 1 << 20, "position embeddings (at least the task's longest input)")
        .add(attention_field<B>(&B::attention_, [](const B& b) { return b.bert_.num_attention_heads; },
                                /*with_carry=*/false));
    return f;
  }

  void read(Node& m) override { fields().read(m, *this); }
  json resolved() const override {
    json j = {{"type", type()}};
    fields().write(*this, j);
    return j;
  }
  std::vector<KeyDoc> keys() const override { return fields().docs(); }

  bool is_encoder() const override { return true; }
  std::string attention() const override { return attention_.type; }

  // The library's config as the keys set it, completed by the task
  // (vocabulary, positions, padding, classes) and the attention.
  models::BertConfig config_for(const ModelContext& ctx) const {
    models::BertConfig c = bert_;
    c.vocab_size = ctx.n_token;
    c.max_position_embeddings = std::max(max_len_, ctx.max_len);
    c.pad_token_id = ctx.pad_id;  // LM: fixed-length crops, no padding
    c.num_classes = ctx.num_classes;
    c.attention = attention_.type;
    if (attention_.type == "rsa") {
      c.rem = attention_.rem.spec;
      c.rem.masked = false;  // bidirectional encoder: the REM is unmasked
      c.gate = attention_.gate;
      c.rem_init = rem_init_of(attention_.rem);
    }
    return c;
  }

  // model.init_from: HuggingFace names as the library maps them; a masked-LM
  // checkpoint has no pooler or classifier, a BertModel no pretraining heads.
  std::string pretrained_name(const std::string& name) const override { return models::canonical_hf_name(name); }
  std::vector<std::string> optional_pretrained() const override { return {"*.rem.*", "bert.pooler.*", "cls.*"}; }
  std::vector<std::string> task_head() const override { return {"classifier.*"}; }

  BuiltModel build(const ModelContext& ctx) const override {
    auto bert = std::make_shared<models::BertForMaskedLM>(config_for(ctx));
    return {bert, nullptr, bert};
  }

  bool has_hidden_states() const override { return true; }
  bool forward_hidden(const BuiltModel& m, const Tensor& ids, Tensor* logits,
                      std::vector<Tensor>* hidden) const override {
    models::BertForMaskedLM::Output out = std::static_pointer_cast<models::BertForMaskedLM>(m.module)->forward(ids);
    *logits = out.mlm_logits;
    *hidden = out.hidden_states;
    return true;
  }

  void estimate_memory(const Config& cfg, const ModelContext& ctx, MemoryUse use, MemoryEstimate& e) const override {
    const models::BertConfig b = config_for(ctx);
    add_parameter_terms(e, cfg, use, b.parameter_count(),
                        "model.n_layer, model.d_model, model.d_inner, model.max_len");
    const models::BertConfig::ActivationBytes a = b.activation_bytes(activation_shape(cfg, ctx, use));
    e.add("attention scores [batch, n_head, seq_len, seq_len]", "data.batch_size, model.n_head, data.seq_len",
          a.scores);
    e.add("layer activations", "data.batch_size, data.seq_len, model.d_model, model.d_inner, model.n_layer",
          a.layers);
    // A sequence classifier (num_classes > 0) runs no MLM head: no [B, L, V] logits.
    if (ctx.num_classes == 0) e.add("output logits", "data.batch_size, data.seq_len and the vocabulary", a.logits);
  }

  std::vector<TinyConfig> tiny_configs() const override {
    const json m = {{"type", type()}, {"n_layer", 2}, {"d_model", 16}, {"n_head", 4},
                    {"d_inner", 32},  {"dropout", 0.1}, {"dropatt", 0.1}};
    json rsa = m;
    rsa["attention"] = {{"type", "rsa"}, {"rem", {{"regular", 1}, {"cyclic", 1}}}};
    return {{"softmax", tiny_text_config(m)}, {"rsa", tiny_text_config(rsa)}};
  }

  void print_info(const Config& cfg, const ModelContext& ctx, const BuiltModel& built) const override {
    const models::BertConfig b = config_for(ctx);
    std::printf("model: bert, %s attention", b.attention.c_str());
    if (b.attention == "rsa")
      std::printf(" (%lld unmasked REM heads; gate per %s)", (long long)b.rem.num_heads(), b.gate.c_str());
    std::printf("\n  layers %lld, hidden %lld, heads %lld, intermediate %lld, vocab %lld (incl. [MASK])\n",
                (long long)b.num_hidden_layers, (long long)b.hidden_size, (long long)b.num_attention_heads,
                (long long)b.intermediate_size, (long long)b.vocab_size);
    std::printf("\nparameters:\n");
    for (const auto& p : built.module->named_parameters())
      std::printf("  %-56s %10lld\n", p.first.c_str(), (long long)p.second.numel());
    std::printf("  %-56s %10lld\n", "total", (long long)built.module->num_parameters());
  }

 private:
  models::BertConfig bert_;  // the keys, as the library's config (bert_fields)
  int64_t max_len_ = 0;      // default: fields()
  AttentionConfig attention_;
};

}  // namespace

std::unique_ptr<Model> make_bert(const std::string& type) { return std::make_unique<BertModel>(type); }

}  // namespace driver
}  // namespace remora
