// model.type "starsaber": StarSaber, an encoder or (causal = true) a character LM (models/starsaber.h).
#include "../../../models/starsaber.h"
#include "../model.h"

namespace remora {
namespace driver {
namespace {

class StarSaberModel : public Model {
 public:
  using Model::Model;

  void read(Node& m) override {
    common_.read(m, 2, 0.1);
    gated_ = m.boolean("gated", false);
    causal_ = m.boolean("causal", false);
  }

  json resolved() const override {
    json j = common_.resolved(type());
    j["gated"] = gated_;
    j["causal"] = causal_;
    return j;
  }

  bool is_encoder() const override { return !causal_; }
  void check_task(Node& m, bool text) const override {
    if (causal_ && !text)
      m.fail("causal", "a causal starsaber is a character language model; use data.type char or bytes");
  }
  // A causal StarSaber carries no memory across calls.
  bool generation_rereads_window() const override { return true; }

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
