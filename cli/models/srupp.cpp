// SPDX-License-Identifier: BSD-3-Clause
// model.type "srupp": SRU++ (models/srupp.h).
#include "../../models/srupp.h"
#include "../model.h"

namespace remora {
namespace driver {
namespace {

class SRUppModel : public Model {
 public:
  using Model::Model;

  // The model.* keys are members of the library's models::SRUppConfig, bound
  // by their rows, with its defaults (d_attn's: d_model / 4, as the library's).
  static FieldTable<models::SRUppConfig> fields() {
    using C = models::SRUppConfig;
    FieldTable<C> f;
    add_common_keys(f, &C::n_layer, &C::d_model, &C::dropout)
        .number("dropatt", &C::attn_dropout, 0, 0.99, "dropout on the attention weights")
        .integer("d_attn", &C::d_attn,
                 {"max(1, d_model / 4)", [](const C& c) { return std::max<int64_t>(1, c.d_model / 4); }}, 1,
                 1 << 16, "attention width d'")
        .integer("attn_every", &C::attn_every, 1, 1024, "attention in every N-th layer")
        .integer("mem_len", &C::mem_len, 0, 1 << 20, "the previous segment's layer inputs kept (LM streams)")
        .boolean("same_length", &C::same_length,
                 "every query attends to itself and the mem_len keys before it (the official evaluation's mask)")
        .boolean("layer_norm", &C::layer_norm,
                 "a layer norm over each layer's input before its transform (the official --layer_norm)")
        // The adaptive input and softmax of the official WikiText-103 model
        // (train_wt103.py): --n_e, --div_val, --emb_dropout and its cutoffs.
        .integers("cutoffs", &C::cutoffs, std::vector<int64_t>{}, 1, int64_t(1) << 40,
                  "adaptive softmax: the vocabulary's cluster ends, increasing, below the vocabulary size "
                  "([] and d_embed 0 = a plain embedding and output layer)")
        .integer("d_embed", &C::d_embed, 0, 1 << 20,
                 "adaptive input and softmax: width of the first part's table, projected to d_model "
                 "(0 = d_model when cutoffs are set)")
        .integer("div_val", &C::div_val, 1, 1 << 10,
                 "adaptive input and softmax: part i of the vocabulary has width d_embed / div_val^i")
        .number("emb_dropout", &C::emb_dropout, 0, 0.99,
                "adaptive input and softmax: dropout on the embedding rows and the projected hidden rows")
        .check([](Node& m, C& c) { check_adaptive_parts(m, c.cutoffs, c.d_embed, c.d_model, c.div_val); });
    return f;
  }

  void read(Node& m) override { fields().read(m, cfg_); }
  json resolved() const override {
    json j = {{"type", type()}};
    fields().write(cfg_, j);
    return j;
  }
  std::vector<KeyDoc> keys() const override { return fields().docs(); }

  bool is_encoder() const override { return false; }
  bool real_valued_inputs() const override { return true; }

  // The library's config as the keys set it, completed by the task.
  models::SRUppConfig config_for(const ModelContext& ctx) const {
    models::SRUppConfig sc = cfg_;
    sc.n_token = ctx.n_token;
    // Memory only across the segments of an LM stream; generation keeps at
    // least one segment so that each new token sees context.
    sc.mem_len = ctx.stream ? (ctx.generation ? std::max(cfg_.mem_len, ctx.seq_len) : cfg_.mem_len) : 0;
    if (!ctx.stream) sc.n_out = ctx.n_out;
    sc.n_in = ctx.n_in;
    return sc;
  }

  void estimate_memory(const Config& cfg, const ModelContext& ctx, MemoryUse use, MemoryEstimate& e) const override {
    const models::SRUppConfig sc = config_for(ctx);
    add_parameter_terms(e, cfg, use, sc.parameter_count(),
                        sc.adaptive() ? "model.n_layer, model.d_model, model.d_attn, model.cutoffs, model.d_embed, "
                                        "model.div_val"
                                      : "model.n_layer, model.d_model, model.d_attn");
    const models::SRUppConfig::ActivationBytes a = sc.activation_bytes(activation_shape(cfg, ctx, use));
    e.add("attention inputs and output [batch, seq_len (+ mem_len), d_attn]",
          "data.batch_size, data.seq_len, model.mem_len, model.d_attn", a.scores);
    e.add("layer activations", "data.batch_size, data.seq_len, model.d_model, model.n_layer", a.layers);
    add_output_term(e, use, sc.adaptive(), a.logits);
    if (a.memory > 0) e.add("carried memory", "model.mem_len", a.memory);
  }

  BuiltModel build(const ModelContext& ctx) const override {
    auto lm = std::make_shared<models::SRUppLM>(config_for(ctx));
    return {lm, lm, nullptr};
  }

  std::vector<TinyConfig> tiny_configs() const override {
    const json m = {{"type", type()}, {"n_layer", 2}, {"d_model", 16}, {"d_attn", 8},
                    {"dropout", 0.1}, {"dropatt", 0.1}, {"mem_len", 8}};
    // The official WikiText-103 form: layer norm, the adaptive input and
    // softmax on words (tests/data/wikitext: a vocabulary of about 1,100).
    json adaptive = m;
    adaptive["layer_norm"] = true;
    adaptive["cutoffs"] = {100, 300};
    adaptive["d_embed"] = 8;
    adaptive["div_val"] = 2;
    adaptive["emb_dropout"] = 0.1;
    json words = tiny_text_config(adaptive);
    words["data"]["type"] = "words";
    words["data"]["path"] = "tests/data/wikitext";
    return {{"", tiny_text_config(m)}, {"adaptive", words}};
  }

 private:
  models::SRUppConfig cfg_;  // the keys, as the library's config (fields)
};

}  // namespace

std::unique_ptr<Model> make_srupp(const std::string& type) { return std::make_unique<SRUppModel>(type); }

}  // namespace driver
}  // namespace remora
