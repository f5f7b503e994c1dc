// SPDX-License-Identifier: BSD-3-Clause
// model.type "rnn", "lstm", "relrnn", "rellstm": the recurrent baselines and
// the relevancy-screening cells (models/relrnn.h).
#include "../../models/relrnn.h"
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
  // The model.* keys are members of the library's models::RecurrentConfig,
  // bound by their rows, with its defaults (init's: the type's, as the library
  // resolves an empty init).
  static FieldTable<models::RecurrentConfig> fields(const std::string& type) {
    using C = models::RecurrentConfig;
    FieldTable<C> f;
    add_common_keys(f, &C::n_layer, &C::d_model, &C::dropout)
        .choice("input", &C::input, {"embedding", "onehot"}, "embedding, or onehot: the cell reads the one-hot input")
        .choice("init", &C::init,
                {"official for relrnn and rellstm, else uniform", [](const C& c) { return c.resolved_init(); }},
                {"uniform", "official"}, "uniform: U(+-1/sqrt(H)) as torch.nn.RNN; official: the MemoryNets initialisation");
    if (is_rnn_type(type))
      f.choice("recurrent_init", &C::recurrent_init, {"henaff", "cayley", "xavier", "kaiming"},
               "init official: the recurrent matrix")
          .choice("input_init", &C::input_init, {"xavier", "kaiming"}, "init official: the input matrix");
    if (is_relevancy(type))
      f.integer("short_term", &C::short_term, 1, 1 << 16, "the short-term window (nu)")
          .integer("relevant", &C::relevant, 0, 1 << 16, "relevant states kept (rho)")
          .check([](Node& m, C& c) {
            if (c.n_layer != 1)
              m.fail("n_layer", "the relevancy-screening cells are single-layer; use n_layer 1, got " +
                                    std::to_string(c.n_layer));
          });
    return f;
  }

  void read(Node& m) override {
    cfg_.type = type();
    fields(type()).read(m, cfg_);
  }
  json resolved() const override {
    json j = {{"type", type()}};
    fields(type()).write(cfg_, j);
    return j;
  }
  std::vector<KeyDoc> keys() const override { return fields(type()).docs(); }

  bool is_encoder() const override { return false; }
  // The relevancy-screening cells' attention memory restarts every segment.
  bool generation_rereads_window() const override { return relevancy(); }

  // The library's config as the keys set it, completed by the task.
  models::RecurrentConfig config_for(const ModelContext& ctx) const {
    models::RecurrentConfig rc = cfg_;
    rc.type = type();
    rc.n_token = ctx.n_token;
    rc.n_out = ctx.n_out > 0 ? ctx.n_out : ctx.n_token;
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
    if (cfg_.input == "onehot") e.add("one-hot inputs", "data.batch_size, data.seq_len and the vocabulary", a.onehot);
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
  // The keys, as the library's config (fields). A key the type does not have
  // keeps the library's default (the LSTM types build with recurrent_init
  // henaff, input_init xavier).
  models::RecurrentConfig cfg_;
};

}  // namespace

std::unique_ptr<Model> make_recurrent(const std::string& type) {
  return std::make_unique<RecurrentModel>(type);
}

}  // namespace driver
}  // namespace remora
