// SPDX-License-Identifier: BSD-3-Clause
// model.type "rnn", "lstm", "relrnn", "rellstm": the recurrent baselines and
// the relevancy-screening cells (models/relrnn.h).
#include "../../../models/relrnn.h"
#include "../model.h"

namespace remora {
namespace driver {
namespace {

bool is_relevancy(const std::string& type) { return type == "relrnn" || type == "rellstm"; }
bool is_rnn_type(const std::string& type) { return type == "rnn" || type == "relrnn"; }

class RecurrentModel : public Model {
 public:
  using Model::Model;

  bool relevancy() const { return is_relevancy(type()); }
  bool rnn_type() const { return is_rnn_type(type()); }

  // The official MemoryNets options (docs/relevancy.md §5): input encoding and
  // initialisation. recurrent_init / input_init are keys of the RNN-type cells
  // (the LSTM types have none); they are read under init "uniform" too, and
  // then ignored, so that one config can switch with --set model.init=...
  static FieldTable<RecurrentModel> fields(const std::string& type) {
    using R = RecurrentModel;
    FieldTable<R> f;
    f.include(&R::common_, CommonModelKeys::fields(1, 0.0))
        .choice("input", &R::input_, "embedding", {"embedding", "onehot"},
                "embedding, or onehot: the cell reads the one-hot input")
        .choice("init", &R::init_, is_relevancy(type) ? "official" : "uniform", {"uniform", "official"},
                "uniform: U(+-1/sqrt(H)) as torch.nn.RNN; official: the MemoryNets initialisation");
    if (is_rnn_type(type))
      f.choice("recurrent_init", &R::recurrent_init_, "henaff", {"henaff", "cayley", "xavier", "kaiming"},
               "init official: the recurrent matrix")
          .choice("input_init", &R::input_init_, "xavier", {"xavier", "kaiming"}, "init official: the input matrix");
    if (is_relevancy(type))
      f.integer("short_term", &R::short_term_, 10, 1, 1 << 16, "the short-term window (nu)")
          .integer("relevant", &R::relevant_, 5, 0, 1 << 16, "relevant states kept (rho)")
          .check([](Node& m, R& r) {
            if (r.common_.n_layer != 1)
              m.fail("n_layer", "the relevancy-screening cells are single-layer; use n_layer 1, got " +
                                    std::to_string(r.common_.n_layer));
          });
    return f;
  }

  void read(Node& m) override { fields(type()).read(m, *this); }
  json resolved() const override {
    json j = {{"type", type()}};
    fields(type()).write(*this, j);
    return j;
  }
  std::vector<KeyDoc> keys() const override { return fields(type()).docs(); }

  bool is_encoder() const override { return false; }
  // The relevancy-screening cells' attention memory restarts every segment.
  bool generation_rereads_window() const override { return relevancy(); }

  models::RecurrentConfig config_for(const ModelContext& ctx) const {
    models::RecurrentConfig rc;
    rc.type = type();
    rc.n_token = ctx.n_token;
    rc.d_model = common_.d_model;
    rc.n_layer = common_.n_layer;
    rc.short_term = short_term_;
    rc.relevant = relevant_;
    rc.dropout = common_.dropout;
    rc.n_out = ctx.n_out > 0 ? ctx.n_out : ctx.n_token;
    rc.input = input_;
    rc.init = init_;
    rc.recurrent_init = recurrent_init_;
    rc.input_init = input_init_;
    return rc;
  }

  void estimate_memory(const Config& cfg, const ModelContext& ctx, MemoryUse use, MemoryEstimate& e) const override {
    const models::RecurrentConfig rc = config_for(ctx);
    add_parameter_terms(e, cfg, use, rc.parameter_count(), "model.n_layer, model.d_model");
    const models::RecurrentConfig::ActivationBytes a = rc.activation_bytes(activation_shape(cfg, ctx, use));
    e.add("recurrent states", "data.batch_size, data.seq_len, model.d_model, model.n_layer", a.states);
    if (relevancy())
      e.add("relevancy memory [batch, short_term + relevant, d_model] per step",
            "model.short_term, model.relevant, data.batch_size, model.d_model", a.relevancy);
    if (input_ == "onehot") e.add("one-hot inputs", "data.batch_size, data.seq_len and the vocabulary", a.onehot);
    e.add("output logits", "data.batch_size, data.seq_len and the outputs", a.logits);
  }

  BuiltModel build(const ModelContext& ctx) const override {
    auto r = std::make_shared<models::RecurrentLM>(config_for(ctx));
    return {r, r, nullptr};
  }

  std::vector<TinyConfig> tiny_configs() const override {
    json m = {{"type", type()}, {"d_model", 16}, {"n_layer", relevancy() ? 1 : 2}, {"dropout", 0.1}};
    if (relevancy()) {
      m["short_term"] = 3;
      m["relevant"] = 2;
    }
    return {{"", tiny_text_config(m)}};
  }

 private:
  CommonModelKeys common_;
  // Defaults: fields(). A key the type does not have keeps its default here
  // (the LSTM types build with recurrent_init henaff, input_init xavier).
  int64_t short_term_ = 10, relevant_ = 5;
  std::string input_, init_, recurrent_init_ = "henaff", input_init_ = "xavier";
};

}  // namespace

std::unique_ptr<Model> make_recurrent(const std::string& type) {
  return std::make_unique<RecurrentModel>(type);
}

}  // namespace driver
}  // namespace remora
