// SPDX-License-Identifier: BSD-3-Clause
// model.type "starsaber": StarSaber, an encoder or (causal = true) a character LM (models/starsaber.h).
#include "../../models/starsaber.h"
#include "../model.h"

namespace remora {
namespace driver {
namespace {

class StarSaberModel : public Model {
 public:
  using Model::Model;

  // The model.* keys are members of the library's models::StarSaberConfig,
  // bound by their rows, with its defaults.
  static FieldTable<models::StarSaberConfig> fields() {
    using C = models::StarSaberConfig;
    FieldTable<C> f;
    add_common_keys(f, &C::n_layer, &C::d_model, &C::dropout)
        .boolean("gated", &C::gated, "gated layers")
        .boolean("causal", &C::causal, "a character language model (past relations only), else an encoder");
    return f;
  }

  void read(Node& m) override { fields().read(m, cfg_); }
  json resolved() const override {
    json j = {{"type", type()}};
    fields().write(cfg_, j);
    return j;
  }
  std::vector<KeyDoc> keys() const override { return fields().docs(); }

  bool is_encoder() const override { return !cfg_.causal; }
  void check_task(Node& m, bool text) const override {
    if (cfg_.causal && !text)
      m.fail("causal", "a causal starsaber is a character language model; use data.type char or bytes");
  }
  // A causal StarSaber carries no memory across calls.
  bool generation_rereads_window() const override { return true; }

  // The library's config as the keys set it, completed by the task.
  models::StarSaberConfig config_for(const ModelContext& ctx) const {
    models::StarSaberConfig sc = cfg_;
    sc.vocab_size = ctx.n_token;
    sc.num_classes = ctx.num_classes;
    sc.pad_token_id = ctx.pad_id;
    return sc;
  }

  void estimate_memory(const Config& cfg, const ModelContext& ctx, MemoryUse use, MemoryEstimate& e) const override {
    const models::StarSaberConfig sc = config_for(ctx);
    add_parameter_terms(e, cfg, use, sc.parameter_count(), "model.n_layer, model.d_model");
    const models::StarSaberConfig::ActivationBytes a = sc.activation_bytes(activation_shape(cfg, ctx, use));
    e.add("relation scores [batch, seq_len, seq_len]", "data.batch_size, data.seq_len", a.scores);
    e.add("layer activations", "data.batch_size, data.seq_len, model.d_model, model.n_layer", a.layers);
    e.add("output logits", "data.batch_size, data.seq_len and the vocabulary", a.logits);
  }

  BuiltModel build(const ModelContext& ctx) const override {
    const models::StarSaberConfig sc = config_for(ctx);
    if (cfg_.causal) {
      auto lm = std::make_shared<models::StarSaberLM>(sc);
      return {lm, lm, nullptr};
    }
    auto ss = std::make_shared<models::StarSaber>(sc);
    return {ss, nullptr, ss};
  }

  // The causal language model and the (gated) encoder.
  std::vector<TinyConfig> tiny_configs() const override {
    const json m = {{"type", type()}, {"n_layer", 2}, {"d_model", 16}, {"dropout", 0.1}};
    json causal = m, gated = m;
    causal["causal"] = true;
    gated["gated"] = true;
    return {{"causal", tiny_text_config(causal)}, {"encoder", tiny_text_config(m)},
            {"gated", tiny_text_config(gated)}};
  }

 private:
  models::StarSaberConfig cfg_;  // the keys, as the library's config (fields)
};

}  // namespace

std::unique_ptr<Model> make_starsaber(const std::string& type) {
  return std::make_unique<StarSaberModel>(type);
}

}  // namespace driver
}  // namespace remora
