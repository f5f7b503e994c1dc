// SPDX-License-Identifier: BSD-3-Clause
// model.type "starsaber": StarSaber, an encoder or (causal = true) a character LM (models/starsaber.h).
#include "../../../models/starsaber.h"
#include "../model.h"

namespace remora {
namespace driver {
namespace {

class StarSaberModel : public Model {
 public:
  using Model::Model;

  static FieldTable<StarSaberModel> fields() {
    using S = StarSaberModel;
    FieldTable<S> f;
    f.include(&S::common_, CommonModelKeys::fields(2, 0.1))
        .boolean("gated", &S::gated_, false, "gated layers")
        .boolean("causal", &S::causal_, false, "a character language model (past relations only), else an encoder");
    return f;
  }

  void read(Node& m) override { fields().read(m, *this); }
  json resolved() const override {
    json j = {{"type", type()}};
    fields().write(*this, j);
    return j;
  }
  std::vector<KeyDoc> keys() const override { return fields().docs(); }

  bool is_encoder() const override { return !causal_; }
  void check_task(Node& m, bool text) const override {
    if (causal_ && !text)
      m.fail("causal", "a causal starsaber is a character language model; use data.type char or bytes");
  }
  // A causal StarSaber carries no memory across calls.
  bool generation_rereads_window() const override { return true; }

  models::StarSaberConfig config_for(const ModelContext& ctx) const {
    models::StarSaberConfig sc;
    sc.vocab_size = ctx.n_token;
    sc.d_model = common_.d_model;
    sc.n_layer = common_.n_layer;
    sc.gated = gated_;
    sc.causal = causal_;
    sc.dropout = common_.dropout;
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
    if (causal_) {
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
  CommonModelKeys common_;
  bool gated_ = false, causal_ = false;
};

}  // namespace

std::unique_ptr<Model> make_starsaber(const std::string& type) {
  return std::make_unique<StarSaberModel>(type);
}

}  // namespace driver
}  // namespace remora
