// SPDX-License-Identifier: BSD-3-Clause
// StarSaber (docs/math.md#starsaber-our-reading) against the PyTorch reference (tools/torch_ref/starsaber.py
// via tools/goldens/make_starsaber_goldens.py): token/class logits, pooled vector, every
// hidden state and relation graph, both losses and every parameter gradient, in
// float64 (1e-9) and float32 (1e-4); the layer against a naive loop reference;
// α = 0 at init; the relation graph never looks at i itself or at padding;
// config errors; parameter names and counts.
#include <catch2/catch.hpp>
#include <remora/remora.h>

#include <cmath>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "../models/bert.h"
#include "../models/starsaber.h"

#include "model_golden.h"

using namespace remora;
using models::StarSaber;
using models::StarSaberConfig;
using json = nlohmann::json;

namespace {

const Safetensors& golden() {
  return model_test::golden_file("starsaber_golden.safetensors", "remora-golden-starsaber",
                                 "tools/goldens/make_starsaber_goldens.py");
}

using model_test::check_close;

StarSaberConfig config_of(const std::string& key) {
  const json j = json::parse(golden().metadata.at("case_" + key + ".config"));
  StarSaberConfig c;
  c.vocab_size = j.at("vocab_size");
  c.d_model = j.at("d_model");
  c.n_layer = j.at("n_layer");
  c.gated = j.at("gated");
  c.dropout = j.at("dropout");
  c.num_classes = j.at("num_classes");
  c.pad_token_id = j.at("pad_token_id");
  c.scale_scores = j.at("scale_scores");
  return c;
}

std::shared_ptr<StarSaber> model_of(const std::string& key, DType dt) {
  auto m = std::make_shared<StarSaber>(config_of(key), dt);
  nn::NamedTensors sd = model_test::case_params(golden(), key);
  m->load_state_dict(sd);  // strict: the reference uses exactly our names
  m->eval();
  return m;
}

void run_case(const std::string& key, DType dt, double rtol, double atol) {
  auto m = model_of(key, dt);
  const std::string c = "case_" + key + ".";
  const auto& g = golden();
  StarSaber::Output out = m->forward(g.get(c + "input_ids"), g.get(c + "attention_mask"));
  check_close(out.token_logits, g.get(c + "token_logits"), rtol, atol, c + "token_logits");
  check_close(out.pooled, g.get(c + "pooled"), rtol, atol, c + "pooled");
  check_close(out.class_logits, g.get(c + "class_logits"), rtol, atol, c + "class_logits");
  REQUIRE(out.hidden_states.size() == size_t(m->cfg.n_layer + 1));
  REQUIRE(out.relations.size() == size_t(m->cfg.n_layer));
  for (size_t l = 0; l < out.hidden_states.size(); ++l)
    check_close(out.hidden_states[l], g.get(c + "hidden." + std::to_string(l)), rtol, atol,
                c + "hidden." + std::to_string(l));
  for (size_t l = 0; l < out.relations.size(); ++l)
    check_close(out.relations[l], g.get(c + "relation." + std::to_string(l)), rtol, atol,
                c + "relation." + std::to_string(l));
  Tensor mlm = StarSaber::mlm_loss(out.token_logits, g.get(c + "mlm_labels"));
  Tensor cls = StarSaber::class_loss(out.class_logits, g.get(c + "class_labels"));
  check_close(mlm.reshape({1}), g.get(c + "mlm_loss"), rtol, atol, c + "mlm_loss");
  check_close(cls.reshape({1}), g.get(c + "class_loss"), rtol, atol, c + "class_loss");
  add(mlm, cls).backward();
  model_test::check_param_grads(*m, g, c, rtol, atol);
}

StarSaberConfig small(bool gated) {
  StarSaberConfig c;
  c.vocab_size = 13;
  c.d_model = 6;
  c.n_layer = 3;
  c.gated = gated;
  c.dropout = 0;
  c.num_classes = 2;
  c.pad_token_id = 0;
  return c;
}

// ids [2, 5] with row 1's last two positions padded (id 0), and its mask.
Tensor small_ids() {
  return Tensor::from_vector(std::vector<int64_t>{3, 1, 4, 1, 5, 9, 2, 6, 0, 0}, {2, 5}, DType::i64);
}
Tensor small_mask() {
  return Tensor::from_vector(std::vector<int64_t>{1, 1, 1, 1, 1, 1, 1, 1, 0, 0}, {2, 5}, DType::i64);
}

void set_alpha(StarSaber& m, double v) {
  NoGradGuard ng;
  for (size_t l = 0; l < m.layers->size(); ++l) {
    auto layer = m.layers->at<models::StarSaberLayer>(l);
    if (layer->alpha.defined()) layer->alpha.fill_(v);
  }
}

}  // namespace

TEST_CASE("StarSaber matches the PyTorch reference in float64", "[starsaber][golden]") {
  for (const char* key : {"plain", "gated", "plain_unscaled"}) {
    INFO("case " << key);
    run_case(key, DType::f64, 1e-9, 1e-12);
  }
}

TEST_CASE("StarSaber matches the PyTorch reference in float32", "[starsaber][golden]") {
  for (const char* key : {"plain", "gated", "plain_unscaled"}) {
    INFO("case " << key);
    run_case(key, DType::f32, 1e-4, 1e-5);
  }
}

TEST_CASE("StarSaber layer equals a naive loop transcription of docs/math.md#starsaber-our-reading", "[starsaber]") {
  for (bool gated : {false, true}) {
    for (bool scaled : {true, false}) {
      INFO("gated " << gated << ", scaled " << scaled);
      const int64_t B = 3, L = 5, d = 4;
      Generator g(gated * 2 + scaled + 100);
      auto rnd = [&](const Shape& s, double k) { return Tensor::randn(s, DType::f64, Device::cpu(), &g) * k; };
      Tensor h = rnd({B, L, d}, 1), x = rnd({B, L, d}, 1), Wb = rnd({d, d}, 0.5), Wp = rnd({d, d}, 0.5),
             Wf = rnd({d, d}, 0.5), U = rnd({d, d}, 0.5), b = rnd({d}, 0.3), Wz = rnd({d, 2 * d}, 0.5),
             bz = rnd({d}, 0.3), alpha = Tensor::from_vector(std::vector<double>{0.8}, {1}, DType::f64);
      // row 1: last position padded; row 2: only position 0 real
      Tensor pad = Tensor::from_vector(
          std::vector<int64_t>{0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 1, 1, 1}, {B, L}, DType::i64);
      Tensor got = models::starsaber_layer(h, x, pad, Wb, Wp, Wf, U, b, gated ? Tensor() : alpha,
                                           gated ? Wz : Tensor(), gated ? bz : Tensor(), scaled);
      const auto H = h.to_vector(), X = x.to_vector(), WB = Wb.to_vector(), WP = Wp.to_vector(),
                 WF = Wf.to_vector(), UU = U.to_vector(), BB = b.to_vector(), WZ = Wz.to_vector(),
                 BZ = bz.to_vector(), P = pad.to(DType::f64).to_vector();
      const double s = scaled ? 1.0 / std::sqrt(double(d)) : 1.0;
      auto hv = [&](int64_t bb, int64_t i, int64_t k) { return H[size_t((bb * L + i) * d + k)]; };
      auto xv = [&](int64_t bb, int64_t i, int64_t k) { return X[size_t((bb * L + i) * d + k)]; };
      std::vector<double> want;
      for (int64_t bb = 0; bb < B; ++bb)
        for (int64_t i = 0; i < L; ++i) {
          std::vector<int64_t> keys;
          std::vector<double> sc;
          for (int64_t j = 0; j < L; ++j) {
            if (j == i || P[size_t(bb * L + j)] != 0) continue;
            double v = 0;
            for (int64_t k = 0; k < d; ++k)
              for (int64_t q = 0; q < d; ++q) v += hv(bb, i, k) * WB[size_t(k * d + q)] * hv(bb, j, q);
            keys.push_back(j);
            sc.push_back(s * v);
          }
          double mx = -1e300, den = 0;
          for (double v : sc) mx = std::max(mx, v);
          for (double& v : sc) den += (v = std::exp(v - mx));
          std::vector<double> a(size_t(d), 0.0);
          for (size_t t = 0; t < keys.size(); ++t) {
            const int64_t j = keys[t];
            const auto& W = j < i ? WP : WF;
            for (int64_t o = 0; o < d; ++o)
              for (int64_t k = 0; k < d; ++k) a[size_t(o)] += sc[t] / den * W[size_t(o * d + k)] * hv(bb, j, k);
          }
          for (int64_t o = 0; o < d; ++o) {
            double u = BB[size_t(o)] + a[size_t(o)];
            for (int64_t k = 0; k < d; ++k) u += UU[size_t(o * d + k)] * xv(bb, i, k);
            const double c = std::tanh(u);
            if (!gated) {
              want.push_back(hv(bb, i, o) + 0.8 * c);
            } else {
              double zz = BZ[size_t(o)];
              for (int64_t k = 0; k < d; ++k)
                zz += WZ[size_t(o * 2 * d + k)] * a[size_t(k)] + WZ[size_t(o * 2 * d + d + k)] * xv(bb, i, k);
              const double z = 1 / (1 + std::exp(-zz));
              want.push_back((1 - z) * hv(bb, i, o) + z * c);
            }
          }
        }
      check_close(got, Tensor::from_vector(want, {B, L, d}, DType::f64), 1e-12, 1e-13, "layer vs loops");
    }
  }
}

TEST_CASE("StarSaber: alpha = 0 at init makes h^L = x (plain variant)", "[starsaber]") {
  Generator g(5);
  StarSaber m(small(false), DType::f64, &g);
  m.eval();
  StarSaber::Output o = m.forward(small_ids(), small_mask());
  REQUIRE(o.hidden_states.size() == 4);
  for (size_t l = 1; l < o.hidden_states.size(); ++l)
    check_close(o.hidden_states[l], o.hidden_states[0], 0, 0, "h^" + std::to_string(l) + " vs x");
  // x is the embedding lookup itself (no positions, no LayerNorm) and the head reads h^L = x.
  check_close(o.hidden_states[0], m.embeddings->forward(small_ids()), 0, 0, "x = E[ids]");
  check_close(o.token_logits, m.mlm_head->forward(o.hidden_states[0]), 0, 0, "logits = head(x)");
  for (const auto& kv : m.named_parameters()) {
    const std::string& n = kv.first;
    if (n.find(".alpha") != std::string::npos || n.find(".bias") != std::string::npos)
      for (double v : kv.second.to_vector()) CHECK(v == 0.0);
  }
  for (int64_t k = 0; k < 6; ++k) CHECK(m.embeddings->weight.to_vector()[size_t(k)] == 0.0);  // pad row
  // With alpha != 0 the layers do act.
  set_alpha(m, 0.5);
  StarSaber::Output o2 = m.forward(small_ids(), small_mask());
  const auto a = o2.hidden_states.back().to_vector(), b = o2.hidden_states[0].to_vector();
  double diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff = std::max(diff, std::fabs(a[i] - b[i]));
  CHECK(diff > 1e-3);
}

TEST_CASE("StarSaber's relation graph never looks at i itself or at padding", "[starsaber]") {
  for (bool gated : {false, true}) {
    INFO("gated " << gated);
    Generator g(6);
    StarSaber m(small(gated), DType::f64, &g);
    m.eval();
    set_alpha(m, 0.7);
    Tensor ids = small_ids(), mask = small_mask();
    StarSaber::Output o = m.forward(ids, mask);
    const int64_t B = 2, L = 5;
    const auto M = mask.to_vector();
    for (const Tensor& A : o.relations) {
      REQUIRE(A.shape() == Shape({B, L, L}));
      const auto v = A.to_vector();
      for (int64_t b = 0; b < B; ++b)
        for (int64_t i = 0; i < L; ++i) {
          double row = 0;
          for (int64_t j = 0; j < L; ++j) {
            const double w = v[size_t((b * L + i) * L + j)];
            if (j == i || M[size_t(b * L + j)] == 0) CHECK(w == 0.0);
            else CHECK(w > 0.0);
            row += w;
          }
          CHECK(row == Approx(1.0).epsilon(1e-12));
        }
    }
    // Different ids at the padded positions change nothing at the real ones.
    Tensor ids2 = Tensor::from_vector(std::vector<int64_t>{3, 1, 4, 1, 5, 9, 2, 6, 7, 11}, {2, 5}, DType::i64);
    StarSaber::Output o2 = m.forward(ids2, mask);
    check_close(o2.class_logits, o.class_logits, 0, 0, "class logits with other padding ids");
    check_close(o2.pooled, o.pooled, 0, 0, "pooled with other padding ids");
    check_close(o2.token_logits.slice(1, 0, 3), o.token_logits.slice(1, 0, 3), 0, 0,
                "token logits at real positions");
    check_close(o2.token_logits.slice(0, 0, 1), o.token_logits.slice(0, 0, 1), 0, 0, "row without padding");
    // A one-token sequence has no admissible key: a = 0, no NaN.
    Tensor one = Tensor::from_vector(std::vector<int64_t>{4}, {1, 1}, DType::i64);
    StarSaber::Output o1 = m.forward(one);
    for (double v : o1.token_logits.to_vector()) CHECK(std::isfinite(v));
    for (double v : o1.relations[0].to_vector()) CHECK(v == 0.0);
  }
}

TEST_CASE("StarSaber: no mask equals the all-ones mask; the EncoderModel entry points agree", "[starsaber]") {
  Generator g(7);
  StarSaber m(small(true), DType::f64, &g);
  m.eval();
  Tensor ids = small_ids();
  StarSaber::Output a = m.forward(ids), b = m.forward(ids, Tensor::ones(ids.shape(), DType::f64));
  check_close(a.token_logits, b.token_logits, 0, 0, "token logits");
  check_close(a.class_logits, b.class_logits, 1e-12, 1e-14, "class logits (mean vs masked sum / count)");
  models::EncoderModel& e = m;
  StarSaber::Output c = m.forward(ids, small_mask());
  check_close(e.token_logits(ids, small_mask()), c.token_logits, 0, 0, "token_logits()");
  check_close(e.class_logits(ids, small_mask()), c.class_logits, 0, 0, "class_logits()");
  StarSaberConfig nc = small(false);
  nc.num_classes = 0;
  StarSaber m0(nc, DType::f64, &g);
  CHECK(m0.classifier == nullptr);
  CHECK_THROWS_WITH(m0.class_logits(ids, Tensor()), Catch::Contains("num_classes > 0"));
  CHECK_THROWS_WITH(m.forward(ids, Tensor::ones({2, 4}, DType::i64)), Catch::Contains("attention_mask"));
  CHECK_THROWS_WITH(m.forward(ids.to(DType::f64)), Catch::Contains("ids must be i64"));
}

TEST_CASE("StarSaber dropout acts in training mode only", "[starsaber]") {
  StarSaberConfig c = small(false);
  c.dropout = 0.3;
  Generator g(8), dg(9);
  StarSaber m(c, DType::f64, &g);
  set_alpha(m, 0.6);
  m.eval();
  Tensor e1 = m.token_logits(small_ids(), small_mask()), e2 = m.token_logits(small_ids(), small_mask());
  check_close(e1, e2, 0, 0, "eval is deterministic");
  m.train();
  Tensor t1 = m.token_logits(small_ids(), small_mask());
  const auto a = t1.to_vector(), b = e1.to_vector();
  double diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff = std::max(diff, std::fabs(a[i] - b[i]));
  CHECK(diff > 1e-6);
}

TEST_CASE("StarSaber config errors name the field", "[starsaber]") {
  auto bad = [](std::function<void(StarSaberConfig&)> edit, const char* field) {
    StarSaberConfig c = small(false);
    edit(c);
    INFO(field);
    CHECK_THROWS_AS(c.validate(), Error);
    CHECK_THROWS_WITH(c.validate(), Catch::Contains(field));
    CHECK_THROWS_WITH(StarSaber(c, DType::f64), Catch::Contains(field));
  };
  bad([](StarSaberConfig& c) { c.vocab_size = 0; }, "vocab_size");
  bad([](StarSaberConfig& c) { c.d_model = 0; }, "d_model");
  bad([](StarSaberConfig& c) { c.n_layer = 0; }, "n_layer");
  bad([](StarSaberConfig& c) { c.dropout = 1.0; }, "dropout");
  bad([](StarSaberConfig& c) { c.dropout = -0.1; }, "dropout");
  bad([](StarSaberConfig& c) { c.num_classes = -1; }, "num_classes");
  bad([](StarSaberConfig& c) { c.pad_token_id = 13; }, "pad_token_id");
  bad([](StarSaberConfig& c) { c.pad_token_id = -2; }, "pad_token_id");
  bad([](StarSaberConfig& c) { c.init = "kaiming"; }, "init");
  bad([](StarSaberConfig& c) { c.init_range = 0; }, "init_range");
  StarSaberConfig ok = small(true);
  ok.pad_token_id = -1;
  CHECK_NOTHROW(ok.validate());
}

TEST_CASE("StarSaber parameter names, shapes and counts", "[starsaber]") {
  for (bool gated : {false, true}) {
    INFO("gated " << gated);
    StarSaberConfig c = small(gated);
    StarSaber m(c, DType::f32);
    std::map<std::string, Shape> got;
    for (const auto& kv : m.named_parameters()) got[kv.first] = kv.second.shape();
    const int64_t d = 6, V = 13;
    std::map<std::string, Shape> want = {{"embeddings.weight", {V, d}},
                                         {"mlm_head.weight", {V, d}},
                                         {"mlm_head.bias", {V}},
                                         {"classifier.weight", {2, d}},
                                         {"classifier.bias", {2}}};
    for (int l = 0; l < 3; ++l) {
      const std::string p = "layers." + std::to_string(l) + ".";
      want[p + "W_b"] = {d, d};
      want[p + "past.weight"] = {d, d};
      want[p + "future.weight"] = {d, d};
      want[p + "input.weight"] = {d, d};
      want[p + "input.bias"] = {d};
      if (gated) {
        want[p + "gate.weight"] = {d, 2 * d};
        want[p + "gate.bias"] = {d};
      } else {
        want[p + "alpha"] = {1};
      }
    }
    CHECK(got == want);
    CHECK(m.num_parameters() == models::starsaber_num_parameters(c));
  }
  // init = "normal": N(0, init_range) everywhere (embeddings included).
  StarSaberConfig c = small(false);
  c.vocab_size = 300;
  c.d_model = 64;
  c.init = "normal";
  c.init_range = 0.05;
  Generator g(12);
  StarSaber m(c, DType::f64, &g);
  for (const Tensor* t : {&m.embeddings->weight, &m.layers->at<models::StarSaberLayer>(1)->W_b}) {
    const auto w = t->to_vector();
    double s2 = 0;
    for (double v : w) s2 += v * v;
    CHECK(std::sqrt(s2 / double(w.size())) == Approx(0.05).epsilon(0.05));
  }
}

TEST_CASE("StarSaber size matched to configs/bert.json (BERT-style, char tinyshakespeare)", "[starsaber]") {
  // configs/bert.json: d_model 128, n_layer 3, n_head 4, d_inner 512, seq_len 64;
  // vocabulary = 65 corpus chars + <unk> + [MASK] = 67; no padding; no classes.
  models::BertConfig bc;
  bc.vocab_size = 67;
  bc.hidden_size = 128;
  bc.num_hidden_layers = 3;
  bc.num_attention_heads = 4;
  bc.intermediate_size = 512;
  bc.max_position_embeddings = 64;
  bc.pad_token_id = -1;
  const int64_t bert = models::BertForMaskedLM(bc).num_parameters();
  CHECK(bert == 645701);
  StarSaberConfig plain;
  plain.vocab_size = 67;
  plain.d_model = 132;
  plain.n_layer = 9;
  StarSaberConfig gated = plain;
  gated.gated = true;
  gated.n_layer = 6;
  CHECK(models::starsaber_num_parameters(plain) == 646216);
  CHECK(models::starsaber_num_parameters(gated) == 646603);
  for (const StarSaberConfig* c : {&plain, &gated})
    CHECK(std::fabs(double(models::starsaber_num_parameters(*c)) / double(bert) - 1.0) < 0.002);
}

TEST_CASE("StarSaber gradient checks (float64, registered cases)", "[starsaber][gradcheck]") {
  size_t n = 0;
  for (const GradcheckCase& c : gradcheck_cases()) {
    if (c.op.rfind("starsaber", 0) != 0) continue;
    ++n;
    remora_test::check_gradcheck_case(c);
  }
  CHECK(n == 6);  // 3 encoder layers, 1 causal layer, 2 models
}

TEST_CASE("causal StarSaber: a language model whose logits never see the future", "[starsaber]") {
  StarSaberConfig c;
  c.vocab_size = 11;
  c.d_model = 8;
  c.n_layer = 2;
  c.dropout = 0;
  c.causal = true;
  Generator g(4);
  models::StarSaberLM lm(c, DType::f64, &g);
  // Make the layers do something (alpha = 0 would make h^L = x whatever A is).
  {
    NoGradGuard ng;
    for (auto& kv : lm.named_parameters())
      if (kv.first.find("alpha") != std::string::npos) kv.second.fill_(0.8);
  }
  // No future projection: one d x d matrix per layer fewer than the encoder.
  CHECK(lm.num_parameters() == models::starsaber_num_parameters(c));
  StarSaberConfig enc = c;
  enc.causal = false;
  CHECK(models::starsaber_num_parameters(enc) - lm.num_parameters() == c.n_layer * c.d_model * c.d_model);
  for (auto& kv : lm.named_parameters()) CHECK(kv.first.find("future") == std::string::npos);

  Tensor ids = Tensor::from_vector(std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8}, {1, 8});
  Tensor changed = Tensor::from_vector(std::vector<int64_t>{1, 2, 3, 4, 9, 9, 9, 9}, {1, 8});
  models::SequenceOutput a = lm.run(ids, {}), b = lm.run(changed, {});
  REQUIRE(a.logits.shape() == Shape{1, 8, 11});
  CHECK(a.state.empty());
  // Positions 0..3 see the same prefix: identical logits; position 4 differs.
  CHECK(sum(abs(sub(a.logits.slice(1, 0, 4), b.logits.slice(1, 0, 4)))).item() == 0.0);
  CHECK(sum(abs(sub(a.logits.slice(1, 4, 5), b.logits.slice(1, 4, 5)))).item() > 1e-6);
  // Position 0 has no earlier key: a_0 = 0 and everything stays finite.
  CHECK(std::isfinite(sum(a.logits).item()));
  // The relation graph is strictly lower triangular, rows summing to 1 (row 0: 0).
  Tensor h = Tensor::randn({2, 5, 8}, DType::f64, Device::cpu(), &g);
  Tensor W = Tensor::randn({8, 8}, DType::f64, Device::cpu(), &g);
  Tensor A = models::starsaber_relation(h, W, Tensor(), true, /*causal=*/true);
  CHECK(sum(abs(triu(A, 0))).item() == 0.0);
  check_close(sum(A, {-1}).slice(1, 1, 5), Tensor::ones({2, 4}, DType::f64), 0, 1e-12, "row sums");
  CHECK_THROWS_WITH(models::StarSaberLM(enc), Catch::Contains("causal = true"));
}
