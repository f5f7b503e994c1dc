// model.type "rnn", "lstm", "relrnn", "rellstm": the recurrent baselines and
// the relevancy-screening cells (models/relrnn.h).
#include "../../../models/relrnn.h"
#include "../model.h"

namespace remora {
namespace driver {
namespace {

class RecurrentModel : public Model {
 public:
  using Model::Model;

  bool relevancy() const { return type() == "relrnn" || type() == "rellstm"; }

  void read(Node& m) override {
    common_.read(m, 1, 0.0);
    if (relevancy()) {
      short_term_ = m.integer("short_term", short_term_, 1, 1 << 16);
      relevant_ = m.integer("relevant", relevant_, 0, 1 << 16);
      if (common_.n_layer != 1)
        m.fail("n_layer", "the relevancy-screening cells are single-layer; use n_layer 1, got " +
                              std::to_string(common_.n_layer));
    }
  }

  json resolved() const override {
    json j = common_.resolved(type());
    if (relevancy()) {
      j["short_term"] = short_term_;
      j["relevant"] = relevant_;
    }
    return j;
  }

  bool is_encoder() const override { return false; }
  // The relevancy-screening cells' attention memory restarts every segment.
  bool generation_rereads_window() const override { return relevancy(); }

  BuiltModel build(const ModelContext& ctx) const override {
    models::RecurrentConfig rc;
    rc.type = type();
    rc.n_token = ctx.n_token;
    rc.d_model = common_.d_model;
    rc.n_layer = common_.n_layer;
    rc.short_term = short_term_;
    rc.relevant = relevant_;
    rc.dropout = common_.dropout;
    rc.n_out = ctx.n_out > 0 ? ctx.n_out : ctx.n_token;
    auto r = std::make_shared<models::RecurrentLM>(rc);
    return {r, r, nullptr};
  }

 private:
  CommonModelKeys common_;
  int64_t short_term_ = 10, relevant_ = 5;
};

}  // namespace

std::unique_ptr<Model> make_recurrent(const std::string& type) {
  return std::make_unique<RecurrentModel>(type);
}

}  // namespace driver
}  // namespace remora
