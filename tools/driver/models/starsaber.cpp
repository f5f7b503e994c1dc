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

  void estimate_memory(const Config& cfg, const ModelContext& ctx, MemoryUse use, MemoryEstimate& e) const override {
    // models::starsaber_num_parameters in doubles (no overflow, no validation).
    const double d = double(common_.d_model), V = double(ctx.n_token), C = double(ctx.num_classes);
    const double layer = (causal_ ? 3 : 4) * d * d + d + (gated_ ? 2 * d * d + d : 1);
    add_parameter_terms(e, cfg, use, V * d + double(common_.n_layer) * layer + (V * d + V) + (C > 0 ? C * d + C : 0),
                        "model.n_layer, model.d_model");
    const bool train = use == MemoryUse::train;
    const double B = double(train ? cfg.data.batch_size : cfg.data.eval_batch_size), T = double(ctx.seq_len);
    const double layers = train ? double(common_.n_layer) : 1;
    e.add("relation scores [batch, seq_len, seq_len]", "data.batch_size, data.seq_len", 4.0 * layers * 3 * B * T * T);
    e.add("layer activations", "data.batch_size, data.seq_len, model.d_model, model.n_layer",
          4.0 * layers * 6 * B * T * d);
    e.add("output logits", "data.batch_size, data.seq_len and the vocabulary", 4.0 * (train ? 3 : 2) * B * T * V);
  }

  BuiltModel build(const ModelContext& ctx) const override {
    models::StarSaberConfig sc;
    sc.vocab_size = ctx.n_token;
    sc.d_model = common_.d_model;
    sc.n_layer = common_.n_layer;
    sc.gated = gated_;
    sc.causal = causal_;
    sc.dropout = common_.dropout;
    sc.num_classes = ctx.num_classes;
    sc.pad_token_id = ctx.pad_id;
    if (causal_) {
      auto lm = std::make_shared<models::StarSaberLM>(sc);
      return {lm, lm, nullptr};
    }
    auto ss = std::make_shared<models::StarSaber>(sc);
    return {ss, nullptr, ss};
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
