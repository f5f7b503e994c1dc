// SPDX-License-Identifier: BSD-3-Clause
// model.type "bert": BERT / RSA-BERT for masked LM and sequence classification (models/bert.h).
#include <cstdio>

#include "../../../models/bert.h"
#include "../model.h"
#include "rem_init.h"

namespace remora {
namespace driver {
namespace {

class BertModel : public Model {
 public:
  using Model::Model;

  static FieldTable<BertModel> fields() {
    using B = BertModel;
    FieldTable<B> f;
    f.include(&B::common_, CommonModelKeys::fields(2, 0.1));
    add_transformer_keys(f, &B::n_head_, &B::d_inner_, &B::dropatt_)
        .integer("max_len", &B::max_len_, 0, 0, 1 << 20, "position embeddings (at least the task's longest input)")
        .check([](Node& m, B& b) { check_heads_split(m, b.common_.d_model, b.n_head_, /*has_d_head=*/false); })
        .add(attention_field(&B::attention_, &B::n_head_, /*with_carry=*/false));
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

  models::BertConfig config_for(const ModelContext& ctx) const {
    models::BertConfig c;
    c.vocab_size = ctx.n_token;
    c.hidden_size = common_.d_model;
    c.num_hidden_layers = common_.n_layer;
    c.num_attention_heads = n_head_;
    c.intermediate_size = d_inner_;
    c.hidden_dropout_prob = common_.dropout;
    c.attention_probs_dropout_prob = dropatt_;
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
    e.add("output logits", "data.batch_size, data.seq_len and the vocabulary", a.logits);
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
  CommonModelKeys common_;
  int64_t n_head_ = 0, d_inner_ = 0, max_len_ = 0;  // defaults: fields()
  double dropatt_ = 0;
  AttentionConfig attention_;
};

}  // namespace

std::unique_ptr<Model> make_bert(const std::string& type) { return std::make_unique<BertModel>(type); }

}  // namespace driver
}  // namespace remora
