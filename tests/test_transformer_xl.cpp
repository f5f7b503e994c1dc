// SPDX-License-Identifier: BSD-3-Clause
// Transformer-XL and RSA-XL against the PyTorch reference (tools/torch_ref/
// mem_transformer.py via tools/goldens/make_xl_goldens.py): logits, losses, memories
// over 3 segments and every parameter gradient, in float64 (1e-9) and float32.
#include <catch2/catch.hpp>
#include <remora/remora.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <functional>
#include <set>

#include "../models/transformer_xl.h"

#include "model_golden.h"

using namespace remora;
using models::TransformerXL;
using models::XLConfig;
using models::XLState;

namespace {

const Safetensors& golden() {
  return model_test::golden_file("golden_xl.safetensors", "remora-golden-xl", "tools/goldens/make_xl_goldens.py");
}

using model_test::check_close;

XLConfig config_of(const std::string& key) {
  const nlohmann::json j = nlohmann::json::parse(golden().metadata.at("case_" + key + ".config"));
  XLConfig c;
  c.n_token = j["n_token"];
  c.n_layer = j["n_layer"];
  c.n_head = j["n_head"];
  c.d_model = j["d_model"];
  c.d_head = j["d_head"];
  c.d_inner = j["d_inner"];
  c.mem_len = j["mem_len"];
  c.clamp_len = j["clamp_len"];
  c.same_length = j["same_length"];
  c.pre_lnorm = j["pre_lnorm"];
  c.dropout = j["dropout"];
  c.dropatt = j["dropatt"];
  c.attention = j["attention"];
  c.gate = j["gate"];
  if (c.attention == "rsa") {
    const auto& r = j["rem_spec"];
    c.rem.regular = r.value("regular", 0);
    c.rem.cyclic = r.value("cyclic", 0);
    c.rem.dilated_regular = r.value("dilated_regular", 0);
    c.rem.dilated_cyclic = r.value("dilated_cyclic", 0);
    if (r.contains("dilations")) c.rem.dilations = r["dilations"].get<std::vector<int64_t>>();
  }
  return c;
}

// Loads the reference weights (converted to dt) into a fresh model.
std::shared_ptr<TransformerXL> model_of(const std::string& key, DType dt) {
  auto m = std::make_shared<TransformerXL>(config_of(key), dt);
  nn::NamedTensors sd = model_test::case_params(golden(), key);
  m->load_state_dict(sd);
  m->eval();
  return m;
}

void run_case(const std::string& key, DType dt, double rtol, double atol) {
  auto m = model_of(key, dt);
  const std::string c = "case_" + key + ".";
  const XLConfig cfg = config_of(key);
  XLState state;
  for (int s = 0; s < 3; ++s) {
    const std::string sg = c + "seg" + std::to_string(s) + ".";
    m->zero_grad();
    TransformerXL::Output out = m->forward(golden().get(sg + "ids"), state);
    Tensor loss = TransformerXL::loss(out.logits, golden().get(sg + "targets"));
    check_close(out.logits, golden().get(sg + "logits"), rtol, atol, sg + "logits");
    check_close(out.hidden, golden().get(sg + "hidden"), rtol, atol, sg + "hidden");
    check_close(loss.reshape({1}), golden().get(sg + "loss"), rtol, atol, sg + "loss");
    for (int64_t l = 0; l < cfg.n_layer; ++l)
      check_close(out.state.mems[size_t(l)], golden().get(sg + "mems." + std::to_string(l)), rtol,
                  atol, sg + "mems." + std::to_string(l));
    loss.backward();
    if (s == 2)
      for (const auto& kv : m->named_parameters())
        check_close(kv.second.grad(), golden().get(c + "grad." + kv.first), rtol, atol,
                    c + "grad." + kv.first);
    state = out.state;
  }
}

}  // namespace

TEST_CASE("Transformer-XL parameter names are the official state dict's", "[xl]") {
  XLConfig c = config_of("c");
  TransformerXL m(c, DType::f64);
  std::set<std::string> names;
  for (const auto& kv : m.named_parameters()) names.insert(kv.first);
  for (const char* n : {"word_emb.emb_layers.0.weight", "r_w_bias", "r_r_bias",
                        "crit.out_layers.0.bias", "layers.0.dec_attn.qkv_net.weight",
                        "layers.1.dec_attn.r_net.weight", "layers.0.dec_attn.o_net.weight",
                        "layers.0.dec_attn.layer_norm.weight", "layers.0.dec_attn.layer_norm.bias",
                        "layers.1.pos_ff.CoreNet.0.weight", "layers.1.pos_ff.CoreNet.3.bias",
                        "layers.0.pos_ff.layer_norm.bias", "layers.0.dec_attn.rem.eta",
                        "layers.1.dec_attn.rem.nu", "layers.1.dec_attn.rem.theta",
                        "layers.0.dec_attn.rem.mu"}) {
    INFO(n);
    CHECK(names.count(n) == 1);
  }
}

TEST_CASE("Transformer-XL matches the PyTorch reference in float64", "[xl][golden]") {
  for (const char* key : {"a", "b", "d"}) {
    INFO("case " << key);
    run_case(key, DType::f64, 1e-9, 1e-12);
  }
}

TEST_CASE("RSA-XL matches the PyTorch reference in float64", "[xl][golden][rsa]") {
  run_case("c", DType::f64, 1e-9, 1e-12);
}

TEST_CASE("Transformer-XL and RSA-XL match the reference in float32", "[xl][golden]") {
  for (const char* key : {"a", "b", "c", "d"}) {
    INFO("case " << key);
    run_case(key, DType::f32, 1e-4, 1e-5);
  }
}

TEST_CASE("RSA-XL carry mode hands the REM state from segment to segment", "[xl][rsa]") {
  XLConfig c = config_of("c");
  c.carry = true;
  c.mem_len = 0;  // no memory: only the carried REM state links the segments
  Generator g(3);
  TransformerXL m(c, DType::f64, &g);
  m.eval();
  Tensor ids = Tensor::from_vector(std::vector<int64_t>{1, 5, 7, 2, 9, 3, 3, 8, 0, 4, 6, 1}, {1, 12});
  XLState st;
  TransformerXL::Output o;
  for (int s = 0; s < 3; ++s) {
    o = m.forward(ids.slice(1, 4 * s, 4 * s + 4), st);
    REQUIRE(o.state.rem_states.size() == size_t(c.n_layer));
    // [B, Hr, dmax, 2, D]
    CHECK(o.state.rem_states[0].shape() == Shape{1, 3, 1, 2, 4});
    CHECK_FALSE(o.state.rem_states[0].requires_grad());
    st = o.state;
  }
  // The same last segment without the carried state gives other logits:
  // the REM heads really see the stream before the segment.
  TransformerXL::Output fresh = m.forward(ids.slice(1, 8, 12), XLState{});
  double diff = 0;
  const std::vector<double> a = o.logits.to_vector(), b = fresh.logits.to_vector();
  for (size_t i = 0; i < a.size(); ++i) diff = std::max(diff, std::fabs(a[i] - b[i]));
  CHECK(diff > 1e-6);
  // Layer 0's state after three segments equals one pass over all 12 tokens.
  TransformerXL::Output whole = m.forward(ids, XLState{});
  const std::vector<double> s3 = o.state.rem_states[0].to_vector(),
                            s1 = whole.state.rem_states[0].to_vector();
  REQUIRE(s3.size() == s1.size());
  for (size_t i = 0; i < s3.size(); ++i) CHECK(s3[i] == Approx(s1[i]).margin(1e-12));
}

TEST_CASE("Transformer-XL bad input gives clear errors", "[xl][errors]") {
  XLConfig c = config_of("a");
  TransformerXL m(c, DType::f32);
  CHECK_THROWS_WITH(m.forward(Tensor::zeros({2, 3})), Catch::Contains("ids must be i64 [B, L]"));
  XLState bad;
  bad.mems = {Tensor::zeros({2, 4, 16})};
  CHECK_THROWS_WITH(m.forward(Tensor::zeros({2, 3}, DType::i64), bad),
                    Catch::Contains("expected 2 memories"));
  XLConfig r = c;
  r.attention = "rsa";
  r.rem.regular = 3;  // more REM heads than heads
  CHECK_THROWS_WITH(TransformerXL(r), Catch::Contains("REM heads"));
  r.attention = "linear";
  CHECK_THROWS_WITH(TransformerXL(r), Catch::Contains("attention must be"));
}

namespace {
// The official form of rel_shift (docs/math.md#relative-attention-and-rel-shift): pad the scores with Lq zero
// columns, read them through a strided view, scale, add the bias.
Tensor rel_shift_composed(const Tensor& x, double scale, const Tensor& bias) {
  const int64_t B = x.size(0), H = x.size(1), Lq = x.size(2), Lk = x.size(3), W = Lk + Lq;
  Tensor padded = cat({x, Tensor::zeros({B, H, Lq, Lq}, x.dtype(), x.device())}, 3);
  Tensor y = affine(as_strided(padded, {B, H, Lq, Lk}, {H * Lq * W, Lq * W, W - 1, 1}, Lq - 1), scale, 0);
  return bias.defined() ? add(y, bias) : y;
}
}  // namespace

TEST_CASE("rel_shift matches the padded strided-view form, values and gradients", "[xl][ops]") {
  for (DType dt : {DType::f64, DType::f32}) {
    // [B, H, Lq, Lk]: XL's Lk = M + Lq, more queries than keys, one query, one key,
    // and rows long enough for the kernel's vector loops and threads.
    for (Shape s : {Shape{2, 3, 4, 7}, Shape{1, 2, 5, 3}, Shape{2, 1, 1, 9}, Shape{1, 1, 6, 1},
                    Shape{2, 4, 64, 128}}) {
      for (bool with_bias : {true, false}) {
        INFO(dtype_name(dt) << " " << shape_str(s) << (with_bias ? " with bias" : ""));
        Generator g(11);
        Tensor x = Tensor::randn(s, dt, Device::cpu(), &g);
        Tensor bias = with_bias ? Tensor::randn({s[2], s[3]}, dt, Device::cpu(), &g) : Tensor();
        Tensor probe = Tensor::randn(s, dt, Device::cpu(), &g);
        auto run = [&](bool fused) {
          Tensor xl = x.clone().requires_grad_(), bl = with_bias ? bias.clone().requires_grad_() : Tensor();
          Tensor y = fused ? rel_shift(xl, 0.25, bl) : rel_shift_composed(xl, 0.25, bl);
          sum(mul(y, probe)).backward();
          return std::vector<Tensor>{y, xl.grad(), with_bias ? bl.grad() : Tensor()};
        };
        const std::vector<Tensor> a = run(true), b = run(false);
        for (size_t k = 0; k < a.size(); ++k) {
          if (!b[k].defined()) continue;
          INFO("output " << k);
          REQUIRE(a[k].shape() == b[k].shape());
          const std::vector<double> va = a[k].to_vector(), vb = b[k].to_vector();
          const double tol = dt == DType::f64 ? 1e-12 : 1e-5;
          for (size_t i = 0; i < va.size(); ++i) REQUIRE(va[i] == Approx(vb[i]).margin(tol));
        }
      }
    }
  }
  // The XL mask: -inf stays -inf where the shifted column does not exist.
  Tensor mask = masked_fill(Tensor::zeros({2, 3}), triu(Tensor::ones({2, 3}, DType::i64), 2),
                            -std::numeric_limits<double>::infinity());
  const std::vector<double> y = rel_shift(Tensor::ones({1, 1, 2, 3}), 2.0, mask).to_vector();
  const double inf = std::numeric_limits<double>::infinity();
  CHECK(y == std::vector<double>{2, 2, -inf, 2, 2, 2});
  // Empty dims, and the errors.
  CHECK(rel_shift(Tensor::zeros({0, 2, 3, 4}), 1.0).shape() == Shape{0, 2, 3, 4});
  CHECK(rel_shift(Tensor::zeros({2, 0, 4}), 1.0).shape() == Shape{2, 0, 4});
  CHECK_THROWS_WITH(rel_shift(Tensor::zeros({4})), Catch::Contains("x must be [..., Lq, Lk]"));
  CHECK_THROWS_WITH(rel_shift(Tensor::zeros({2, 3, 4}), 1.0, Tensor::zeros({4, 3})),
                    Catch::Contains("bias must be [Lq, Lk] = [3, 4]"));
}

TEST_CASE("Transformer-XL with the adaptive input and softmax: names, ties, counts, losses, errors", "[xl][adaptive]") {
  auto names_of = [](const TransformerXL& m) {
    std::set<std::string> n;
    for (const auto& kv : m.named_parameters()) n.insert(kv.first);
    return n;
  };
  XLConfig base;
  base.n_token = 40;
  base.n_layer = 1;
  base.d_model = 8;
  base.n_head = 2;
  base.d_inner = 16;
  base.dropout = 0;
  // Unset: the plain tied model, as before the options existed.
  {
    TransformerXL m(base, DType::f64);
    CHECK_FALSE(base.adaptive());
    CHECK(names_of(m).count("word_emb.emb_layers.0.weight") == 1);
    CHECK(names_of(m).count("crit.out_layers.0.bias") == 1);
    CHECK(names_of(m).count("crit.out_layers.0.weight") == 0);
    CHECK(m.word_emb == nullptr);
  }
  struct Variant {
    const char* name;
    std::vector<int64_t> cutoffs;
    int64_t d_embed, div_val;
    bool tie_weight;
    std::vector<bool> tie_projs;
    std::vector<const char*> present, absent;
  };
  const std::vector<Variant> variants = {
      {"wt103 base: div_val 1, no projections", {10, 20, 30}, 0, 1, true, {false, true, true, true},
       {"word_emb.emb_layers.0.weight", "crit.out_layers.0.bias", "crit.cluster_weight", "crit.cluster_bias"},
       {"word_emb.emb_projs.0", "crit.out_projs.0", "crit.out_layers.0.weight"}},
      {"div_val 2, tied projections 1..3", {10, 20, 30}, 16, 2, true, {false, true, true, true},
       {"word_emb.emb_layers.3.weight", "word_emb.emb_projs.3", "crit.out_projs.0", "crit.out_layers.3.bias"},
       {"crit.out_projs.1", "crit.out_layers.0.weight"}},
      {"d_embed != d_model, untied", {}, 12, 1, false, {},
       {"word_emb.emb_projs.0", "crit.out_projs.0", "crit.out_layers.0.weight"}, {"crit.cluster_weight"}},
      {"untied weights alone", {}, 0, 1, false, {}, {"crit.out_layers.0.weight"}, {"word_emb.emb_projs.0"}},
  };
  for (const Variant& v : variants) {
    INFO(v.name);
    XLConfig c = base;
    c.cutoffs = v.cutoffs;
    c.d_embed = v.d_embed;
    c.div_val = v.div_val;
    c.tie_weight = v.tie_weight;
    c.tie_projs = v.tie_projs;
    REQUIRE(c.adaptive());
    Generator g(5);
    TransformerXL m(c, DType::f64, &g);
    m.eval();
    const std::set<std::string> names = names_of(m);
    for (const char* n : v.present) CHECK(names.count(n) == 1);
    for (const char* n : v.absent) CHECK(names.count(n) == 0);
    CHECK(double(m.num_parameters()) == c.parameter_count());  // exact for one layer (r_w_bias, r_r_bias)
    // Training's nll is evaluation's log-probability of the target.
    const Tensor ids = Tensor::from_vector(std::vector<int64_t>{0, 9, 10, 19, 20, 39, 5, 31}, {2, 4});
    const Tensor tgt = Tensor::from_vector(std::vector<int64_t>{39, 20, 19, 10, 9, 0, 31, 5}, {2, 4});
    TransformerXL::Output all = m.forward(ids), scored = m.forward(ids, {}, tgt);
    REQUIRE(all.logits.shape() == Shape{2, 4, 40});
    CHECK_FALSE(scored.logits.defined());
    const std::vector<double> lp = all.logits.to_vector(), nll = scored.nll.to_vector(), t = tgt.to_vector();
    for (size_t r = 0; r < 8; ++r) CHECK(-nll[r] == Approx(lp[r * 40 + size_t(t[r])]).epsilon(1e-12));
    // The gradient reaches the shared tensors once (tied weights, tied projections).
    scored.nll.mean().backward();
    for (const auto& kv : m.named_parameters())
      if (kv.first.rfind("word_emb.", 0) == 0 || kv.first.rfind("crit.", 0) == 0) CHECK(kv.second.grad().defined());
  }
  auto error = [&](const std::function<void(XLConfig&)>& edit) {
    XLConfig c = base;
    edit(c);
    try {
      TransformerXL m(c, DType::f64);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  CHECK_THAT(error([](XLConfig& c) { c.cutoffs = {10, 40}; }), Catch::Contains("below the vocabulary size 40"));
  CHECK_THAT(error([](XLConfig& c) { c.cutoffs = {20, 10}; }), Catch::Contains("cutoffs must increase strictly"));
  CHECK_THAT(error([](XLConfig& c) { c.cutoffs = {10}, c.tie_projs = {true}; }), Catch::Contains("one entry per part (2)"));
  CHECK_THAT(error([](XLConfig& c) { c.cutoffs = {10, 20, 30}, c.div_val = 4; }), Catch::Contains("no width"));
  CHECK_THAT(error([](XLConfig& c) { c.cutoffs = {10}, c.n_out = 3; }), Catch::Contains("language models over tokens"));
  XLConfig c = base;
  c.cutoffs = {10};
  TransformerXL m(c, DType::f64);
  CHECK_THROWS_WITH(m.forward(Tensor::from_vector(std::vector<int64_t>{1, 2}, {1, 2}), {},
                              Tensor::from_vector(std::vector<int64_t>{1, 2, 3}, {1, 3})),
                    Catch::Contains("targets must be i64 [1, 2]"));
}
