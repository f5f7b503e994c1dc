// model.type "srupp": SRU++ (models/srupp.h).
#include "../../../models/srupp.h"
#include "../model.h"

namespace remora {
namespace driver {
namespace {

class SRUppModel : public Model {
 public:
  using Model::Model;

  static FieldTable<SRUppModel> fields() {
    using S = SRUppModel;
    FieldTable<S> f;
    f.include(&S::common_, CommonModelKeys::fields(2, 0.1))
        .number("dropatt", &S::dropatt_, 0.0, 0, 0.99, "dropout on the attention weights")
        .integer("d_attn", &S::d_attn_,
                 {"max(1, d_model / 4)", [](const S& s) { return std::max<int64_t>(1, s.common_.d_model / 4); }}, 1,
                 1 << 16, "attention width d'")
        .integer("attn_every", &S::attn_every_, 1, 1, 1024, "attention in every N-th layer")
        .integer("mem_len", &S::mem_len_, 0, 0, 1 << 20, "the previous segment's layer inputs kept (LM streams)");
    return f;
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

  void estimate_memory(const Config& cfg, const ModelContext& ctx, MemoryUse use, MemoryEstimate& e) const override {
    const double d = double(common_.d_model), da = double(d_attn_), L = double(common_.n_layer);
    const double V = double(ctx.n_token), out = double(!ctx.stream && ctx.n_out > 0 ? ctx.n_out : ctx.n_token);
    const double in = ctx.n_in > 0 ? double(ctx.n_in) * d + d : V * d;
    add_parameter_terms(e, cfg, use, in + L * (d * da + da * 3 * d + 2 * da * da + 8 * d) + out * d + out,
                        "model.n_layer, model.d_model, model.d_attn");
    const bool train = use == MemoryUse::train;
    const double B = double(train ? cfg.data.batch_size : cfg.data.eval_batch_size), T = double(ctx.seq_len);
    const double M = double(ctx.stream ? mem_len_ : 0), layers = train ? L : 1;
    e.add("attention scores [batch, seq_len, seq_len + mem_len]", "data.batch_size, data.seq_len, model.mem_len",
          4.0 * layers * 3 * B * T * (T + M));
    e.add("layer activations", "data.batch_size, data.seq_len, model.d_model, model.n_layer",
          4.0 * layers * 6 * B * T * d);
    e.add("output logits", "data.batch_size, data.seq_len and the vocabulary", 4.0 * (train ? 3 : 2) * B * T * out);
    if (M > 0) e.add("carried memory", "model.mem_len", 4.0 * L * B * M * d);
  }

  BuiltModel build(const ModelContext& ctx) const override {
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
    auto lm = std::make_shared<models::SRUppLM>(sc);
    return {lm, lm, nullptr};
  }

 private:
  CommonModelKeys common_;
  int64_t d_attn_ = 0, attn_every_ = 0, mem_len_ = 0;  // defaults: fields()
  double dropatt_ = 0;
};

}  // namespace

std::unique_ptr<Model> make_srupp(const std::string& type) { return std::make_unique<SRUppModel>(type); }

}  // namespace driver
}  // namespace remora
