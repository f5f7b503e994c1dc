// model.type "srupp": SRU++ (models/srupp.h).
#include "../../../models/srupp.h"
#include "../model.h"

namespace remora {
namespace driver {
namespace {

class SRUppModel : public Model {
 public:
  using Model::Model;

  void read(Node& m) override {
    common_.read(m, 2, 0.1);
    dropatt_ = m.number("dropatt", dropatt_, 0, 0.99);
    d_attn_ = m.integer("d_attn", std::max<int64_t>(1, common_.d_model / 4), 1, 1 << 16);
    attn_every_ = m.integer("attn_every", 1, 1, 1024);
    mem_len_ = m.integer("mem_len", 0, 0, 1 << 20);
  }

  json resolved() const override {
    json j = common_.resolved(type());
    j["dropatt"] = dropatt_;
    j["d_attn"] = d_attn_;
    j["attn_every"] = attn_every_;
    j["mem_len"] = mem_len_;
    return j;
  }

  bool is_encoder() const override { return false; }
  bool real_valued_inputs() const override { return true; }

  models::SRUppConfig config_for(const ModelContext& ctx) const {
    models::SRUppConfig sc;
    sc.n_token = ctx.n_token;
    sc.d_model = common_.d_model;
    sc.d_attn = d_attn_;
    sc.n_layer = common_.n_layer;
    sc.attn_every = attn_every_;
    sc.dropout = common_.dropout;
    sc.attn_dropout = dropatt_;
    // Memory only across the segments of an LM stream; generation keeps at
    // least one segment so that each new token sees context.
    sc.mem_len = ctx.stream ? (ctx.generation ? std::max(mem_len_, ctx.seq_len) : mem_len_) : 0;
    if (!ctx.stream) sc.n_out = ctx.n_out;
    sc.n_in = ctx.n_in;
    return sc;
  }

  void estimate_memory(const Config& cfg, const ModelContext& ctx, MemoryUse use, MemoryEstimate& e) const override {
    const models::SRUppConfig sc = config_for(ctx);
    add_parameter_terms(e, cfg, use, sc.parameter_count(), "model.n_layer, model.d_model, model.d_attn");
    const models::SRUppConfig::ActivationBytes a = sc.activation_bytes(activation_shape(cfg, ctx, use));
    e.add("attention scores [batch, seq_len, seq_len + mem_len]", "data.batch_size, data.seq_len, model.mem_len",
          a.scores);
    e.add("layer activations", "data.batch_size, data.seq_len, model.d_model, model.n_layer", a.layers);
    e.add("output logits", "data.batch_size, data.seq_len and the vocabulary", a.logits);
    if (a.memory > 0) e.add("carried memory", "model.mem_len", a.memory);
  }

  BuiltModel build(const ModelContext& ctx) const override {
    auto lm = std::make_shared<models::SRUppLM>(config_for(ctx));
    return {lm, lm, nullptr};
  }

  std::vector<TinyConfig> tiny_configs() const override {
    return {{"", tiny_text_config({{"type", type()}, {"n_layer", 2}, {"d_model", 16}, {"d_attn", 8},
                                   {"dropout", 0.1}, {"dropatt", 0.1}, {"mem_len", 8}})}};
  }

 private:
  CommonModelKeys common_;
  int64_t d_attn_ = 0, attn_every_ = 1, mem_len_ = 0;
  double dropatt_ = 0.0;
};

}  // namespace

std::unique_ptr<Model> make_srupp(const std::string& type) { return std::make_unique<SRUppModel>(type); }

}  // namespace driver
}  // namespace remora
