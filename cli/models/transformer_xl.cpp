// SPDX-License-Identifier: BSD-3-Clause
// model.type "transformer_xl": Transformer-XL / RSA-XL (models/transformer_xl.h).
#include <cstdio>

#include "../../models/transformer_xl.h"
#include "../model.h"
#include "rem_init.h"

namespace remora {
namespace driver {
namespace {

class TransformerXLModel : public Model {
 public:
  using Model::Model;

  // Every model.* key of this type but `attention` is a member of the
  // library's models::XLConfig, bound by its row, with the library's default.
  static FieldTable<models::XLConfig> xl_fields() {
    using C = models::XLConfig;
    FieldTable<C> f;
    add_common_keys(f, &C::n_layer, &C::d_model, &C::dropout);
    add_transformer_keys(f, &C::n_head, &C::d_inner, &C::dropatt)
        .integer("d_head", &C::d_head, 0, 1 << 16, "head width (0 = d_model / n_head)")
        .boolean("pre_ln", &C::pre_lnorm, "layer norm before each sublayer (else after)")
        .integer("mem_len", &C::mem_len, 0, 1 << 20, "hidden states kept from past segments (LM streams)")
        .integer("clamp_len", &C::clamp_len, 0, 1 << 20, "relative positions clamped to this (0 = off)")
        .boolean("same_length", &C::same_length, "every query attends to the same number of keys")
        .boolean("recompute_ff", &C::recompute_ff,
                 "training keeps only each feed-forward block's input and runs the block again in backward "
                 "(activation checkpointing: less memory, one more feed-forward pass)")
        .check([](Node& m, C& c) {
          if (c.d_head == 0) check_heads_split(m, c.d_model, c.n_head, /*has_d_head=*/true);
        });
    return f;
  }
  // The adaptive input and softmax (models/transformer_xl.h, XLConfig): the
  // official train.py's --adaptive (cutoffs, tie_projs), --div_val, --d_embed
  // and --not_tied. The vocabulary is known once the data is read: a cutoff at
  // or above it is an error when the model is built.
  static FieldTable<models::XLConfig> adaptive_fields() {
    using C = models::XLConfig;
    FieldTable<C> f;
    f.integers("cutoffs", &C::cutoffs, std::vector<int64_t>{}, 1, int64_t(1) << 40,
               "adaptive softmax: the vocabulary's cluster ends, increasing, below the vocabulary size "
               "([] = one softmax over the vocabulary)")
        .integer("div_val", &C::div_val, 1, 1 << 10, "adaptive input: part i of the vocabulary has width d_embed / div_val^i")
        .integer("d_embed", &C::d_embed, 0, 1 << 20, "embedding width (0 = d_model; else projected to d_model)")
        .boolean("tie_weight", &C::tie_weight, "the output layer's weights are the embedding's tables")
        .add(tie_projs_field())
        .check([](Node& m, C& c) {
          check_adaptive_parts(m, c.cutoffs, c.d_embed, c.d_model, c.div_val);
          if (!c.tie_projs.empty() && c.tie_projs.size() != c.cutoffs.size() + 1)
            m.fail("tie_projs", "needs one entry per part of the vocabulary (len(cutoffs) + 1 = " +
                                    std::to_string(c.cutoffs.size() + 1) + "), got " + std::to_string(c.tie_projs.size()));
        });
    return f;
  }
  static FieldTable<TransformerXLModel> fields() {
    using X = TransformerXLModel;
    FieldTable<X> f;
    f.include(&X::xl_, xl_fields())
        .add(attention_field<X>(&X::attention_, [](const X& x) { return x.xl_.n_head; }, /*with_carry=*/true))
        .include(&X::xl_, adaptive_fields());
    return f;
  }

  // tie_projs: a list of booleans (FieldTable has no row for those).
  static Field<models::XLConfig> tie_projs_field() {
    return {{"tie_projs", "booleans", "[]", "",
             "adaptive softmax: output projection i is the embedding's (one per part of the vocabulary; [] = none "
             "tied; the projections exist where d_embed != d_model or div_val > 1)"},
            [](Node& n, models::XLConfig& c) {
              const json v = n.raw("tie_projs");
              c.tie_projs.clear();
              if (v.is_null()) return;
              if (!v.is_array()) n.fail("tie_projs", "expected a list of booleans, got " + v.dump());
              for (const json& b : v) {
                if (!b.is_boolean()) n.fail("tie_projs", "expected a list of booleans, got " + v.dump());
                c.tie_projs.push_back(b.get<bool>());
              }
            },
            [](const models::XLConfig& c, json& out) {
              json a = json::array();
              for (bool b : c.tie_projs) a.push_back(b);
              out["tie_projs"] = a;
            }};
  }

  void read(Node& m) override { fields().read(m, *this); }
  json resolved() const override {
    json j = {{"type", type()}};
    fields().write(*this, j);
    return j;
  }
  std::vector<KeyDoc> keys() const override { return fields().docs(); }

  bool is_encoder() const override { return false; }
  bool real_valued_inputs() const override { return true; }
  std::string attention() const override { return attention_.type; }

  // The library's config as the keys set it, completed by what the task
  // decides (vocabulary, outputs, memory) and the attention.
  models::XLConfig config_for(const ModelContext& ctx) const {
    models::XLConfig c = xl_;
    c.n_token = ctx.n_token;
    // Memory only across the segments of an LM stream; generation keeps at
    // least one segment so that each new token sees context.
    c.mem_len = ctx.stream ? (ctx.generation ? std::max(xl_.mem_len, ctx.seq_len) : xl_.mem_len) : 0;
    c.attention = attention_.type;
    if (attention_.type == "rsa") {
      c.rem = attention_.rem.spec;
      c.rem.masked = true;  // causal models: the REM is masked
      c.gate = attention_.gate;
      c.rem_init = rem_init_of(attention_.rem);
      c.carry = attention_.carry;
    }
    if (!ctx.stream) c.n_out = ctx.n_out;
    c.n_in = ctx.n_in;
    return c;
  }

  BuiltModel build(const ModelContext& ctx) const override {
    auto xl = std::make_shared<models::TransformerXL>(config_for(ctx));
    return {xl, xl, nullptr};
  }

  bool has_hidden_states() const override { return true; }
  bool forward_hidden(const BuiltModel& m, const Tensor& ids, Tensor* logits,
                      std::vector<Tensor>* hidden) const override {
    models::TransformerXL::Output out = std::static_pointer_cast<models::TransformerXL>(m.module)->forward(ids);
    *logits = out.logits;
    *hidden = out.layer_inputs;
    return true;
  }

  // The config as the estimate sees it: the positional term is computed
  // inside the fused kernel on the CPU (linear memory) and materialised as
  // [B, H, L, L + M] scores on devices whose fused kernels lack it.
  models::XLConfig estimate_config(const Config& cfg, const ModelContext& ctx) const {
    models::XLConfig m = config_for(ctx);
    m.fused_position = cfg.device.type == DeviceType::cpu;
    return m;
  }

  void estimate_memory(const Config& cfg, const ModelContext& ctx, MemoryUse use, MemoryEstimate& e) const override {
    const models::XLConfig m = estimate_config(cfg, ctx);
    add_parameter_terms(e, cfg, use, m.parameter_count(),
                        m.adaptive() ? "model.n_layer, model.d_model, model.n_head x model.d_head, model.d_inner, "
                                       "model.cutoffs, model.d_embed, model.div_val, model.tie_weight, model.tie_projs"
                                     : "model.n_layer, model.d_model, model.n_head x model.d_head, model.d_inner");
    const models::XLConfig::ActivationBytes a = m.activation_bytes(activation_shape(cfg, ctx, use));
    if (a.scores > 0)
      e.add("positional scores [batch, n_head, seq_len, seq_len + mem_len]",
            "data.batch_size, model.n_head, data.seq_len, model.mem_len", a.scores);
    e.add("layer activations",
          "data.batch_size, data.seq_len, model.mem_len, model.d_model, model.d_inner, model.n_layer", a.layers);
    add_output_term(e, use, m.adaptive(), a.logits);
    if (a.memory > 0) e.add("carried memory [n_layer, batch, mem_len, d_model]", "model.mem_len", a.memory);
  }

  std::vector<TinyConfig> tiny_configs() const override {
    const json m = {{"type", type()}, {"n_layer", 2},  {"d_model", 16},     {"n_head", 4},
                    {"d_inner", 32},  {"dropout", 0.1}, {"dropatt", 0.1}, {"mem_len", 8}};
    json rsa = m;
    rsa["attention"] = {{"type", "rsa"}, {"rem", {{"regular", 1}, {"cyclic", 1}}}, {"gate", "head"}, {"carry", true}};
    rsa["recompute_ff"] = true;  // the checkpointed feed-forward blocks in every registry check (softmax keeps them)
    // The adaptive input and softmax on words, tied as the WikiText-103
    // recipe ties them (the vocabulary of tests/data/wikitext: 1100 or so).
    json adaptive = m;
    adaptive["cutoffs"] = {100, 300};
    adaptive["div_val"] = 2;
    adaptive["tie_projs"] = {false, true, true};
    json words = tiny_text_config(adaptive);
    words["data"]["type"] = "words";
    words["data"]["path"] = "tests/data/wikitext";
    return {{"softmax", tiny_text_config(m)}, {"rsa", tiny_text_config(rsa)}, {"adaptive", words}};
  }

  void print_info(const Config& cfg, const ModelContext& ctx, const BuiltModel& built) const override {
    const models::XLConfig m = config_for(ctx);
    std::printf("model: %s, %s attention", type().c_str(), m.attention.c_str());
    if (m.attention == "rsa")
      std::printf(" (%lld REM heads: regular %lld, cyclic pairs %lld, dilated regular %lld, dilated cyclic pairs %lld; gate per %s%s)",
                  (long long)m.rem.num_heads(), (long long)m.rem.regular, (long long)m.rem.cyclic,
                  (long long)m.rem.dilated_regular, (long long)m.rem.dilated_cyclic, m.gate.c_str(),
                  m.carry ? ", carry" : "");
    std::printf("\n  layers %lld, d_model %lld, heads %lld x %lld, d_inner %lld, mem_len %lld, vocab %lld\n",
                (long long)m.n_layer, (long long)m.d_model, (long long)m.n_head,
                (long long)(m.d_head > 0 ? m.d_head : m.d_model / m.n_head), (long long)m.d_inner,
                (long long)m.mem_len, (long long)m.n_token);
    std::printf("\nparameters:\n");
    for (const auto& ch : built.module->named_children()) {
      int64_t n = ch.second->num_parameters();
      std::printf("  %-28s %12lld\n", ch.first.c_str(), (long long)n);
      if (ch.first == "layers")
        for (const auto& l : ch.second->named_children())
          std::printf("    layers.%-19s %12lld\n", l.first.c_str(), (long long)l.second->num_parameters());
    }
    int64_t own = 0;
    for (const auto& p : built.module->named_parameters(false)) own += p.second.numel();
    std::printf("  %-28s %12lld\n", "(own: r_w_bias, r_r_bias)", (long long)own);
    const int64_t total = built.module->num_parameters();
    std::printf("  %-28s %12lld\n", "total", (long long)total);
    // Memory estimate (f32): weights + gradients + two Adam moments, and the
    // activations kept for backward (XLConfig::activation_bytes) with logits
    // over the vocabulary.
    const double B = double(cfg.data.batch_size), L = double(ctx.seq_len);
    const double weights = 4.0 * double(total) * 4;
    const models::XLConfig me = estimate_config(cfg, ctx);
    auto activations = [&](int64_t seq_len, int64_t mem_len) {
      models::XLConfig c = me;
      c.mem_len = mem_len;
      const models::XLConfig::ActivationBytes a = c.activation_bytes({cfg.data.batch_size, seq_len, true});
      return a.layers + a.scores + a.logits + a.memory;
    };
    std::printf("\nmemory estimate (f32, batch %lld x %lld): parameters+gradients+Adam %.1f MiB, activations %.1f MiB\n",
                (long long)B, (long long)L, weights / 1048576.0, activations(ctx.seq_len, me.mem_len) / 1048576.0);
    // How the activations grow with the segment length L (memory mem_len as
    // configured, and mem_len = L as long-context runs use).
    std::printf("activations by segment length (positional term %s on %s: %s in L):\n",
                me.fused_position ? "inside the fused attention" : "materialised",
                cfg.device.str().c_str(), me.fused_position ? "linear" : "quadratic");
    std::printf("  %10s %18s %18s\n", "seq_len", "mem_len as set", "mem_len = seq_len");
    for (int64_t f : {int64_t(1), int64_t(4), int64_t(16), int64_t(64)}) {
      const int64_t l = ctx.seq_len * f;
      std::printf("  %10lld %14.1f MiB %14.1f MiB\n", (long long)l, activations(l, me.mem_len) / 1048576.0,
                  activations(l, l) / 1048576.0);
    }
  }

 private:
  models::XLConfig xl_;  // the keys, as the library's config (xl_fields, adaptive_fields)
  AttentionConfig attention_;
};

}  // namespace

std::unique_ptr<Model> make_transformer_xl(const std::string& type) {
  return std::make_unique<TransformerXLModel>(type);
}

}  // namespace driver
}  // namespace remora
