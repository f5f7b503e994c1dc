// SPDX-License-Identifier: BSD-3-Clause
// A tiny official Transformer-XL (MemTransformerLM with the adaptive input and
// softmax, tied as the WikiText-103 recipe ties them) converted by
// tools/convert_official_xl.py (tests/data/xl_official/, written by
// tools/goldens/make_xl_official_goldens.py): Remora's TransformerXL built from
// the converted config, with the converted weights, gives the official
// log-probabilities over 3 segments that carry memory, in float64 to 1e-10
// absolute and relative (float32: 1e-4), through the nll of the targets
// (training) and every token's log-probability (evaluation, generation).
#include <catch2/catch.hpp>
#include <remora/remora.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "../models/transformer_xl.h"
#include "cli/config.h"
#include "model_golden.h"

using namespace remora;
using models::TransformerXL;
using models::XLConfig;
using models::XLState;

namespace {

const std::string kDir = std::string(REMORA_TEST_DATA) + "/xl_official/";

const Safetensors& expected() {
  return model_test::golden_file("xl_official/expected.safetensors", "remora-golden-xl-official",
                                 "tools/goldens/make_xl_official_goldens.py");
}

nlohmann::json converted_config() {
  std::ifstream f(kDir + "config.json");
  REQUIRE(f.good());
  return nlohmann::json::parse(f);
}

// The converted config's model section as the driver maps it (config_for).
XLConfig config_of(const nlohmann::json& m, int64_t n_token) {
  XLConfig c;
  c.n_token = n_token;
  c.n_layer = m["n_layer"];
  c.n_head = m["n_head"];
  c.d_model = m["d_model"];
  c.d_head = m["d_head"];
  c.d_inner = m["d_inner"];
  c.dropout = m["dropout"];
  c.dropatt = m["dropatt"];
  c.mem_len = m["mem_len"];
  c.clamp_len = m["clamp_len"];
  c.same_length = m["same_length"];
  c.pre_lnorm = m["pre_ln"];
  c.cutoffs = m["cutoffs"].get<std::vector<int64_t>>();
  c.div_val = m["div_val"];
  c.d_embed = m["d_embed"];
  c.tie_weight = m["tie_weight"];
  c.tie_projs = m["tie_projs"].get<std::vector<bool>>();
  return c;
}

std::shared_ptr<TransformerXL> converted_model(DType dt, bool fused_position) {
  const Tensor& lp = expected().get("log_prob");
  XLConfig c = config_of(converted_config()["model"], lp.size(-1));
  c.fused_position = fused_position;
  REQUIRE(c.adaptive());
  auto m = std::make_shared<TransformerXL>(c, dt);
  const Safetensors w = load_safetensors(kDir + "model.safetensors");
  nn::NamedTensors sd(w.tensors.begin(), w.tensors.end());
  m->load_state_dict(sd);  // strict: every name is Remora's, none left over
  m->to_(dt);
  m->eval();
  return m;
}

void check_segments(DType dt, double tol, bool fused_position = true) {
  auto m = converted_model(dt, fused_position);
  const Tensor& ids = expected().get("ids");
  const Tensor& targets = expected().get("targets");
  XLState st, st_nll;
  for (int64_t s = 0; s < ids.size(0); ++s) {
    INFO("segment " << s);
    NoGradGuard ng;
    const std::string seg = "segment " + std::to_string(s);
    // Evaluation and generation: every log-probability (adaptive_log_prob).
    TransformerXL::Output o = m->forward(ids.select(0, s), st);
    model_test::check_close(o.logits, expected().get("log_prob").select(0, s).to(dt), tol, tol, seg + " log_prob");
    // Training: the targets' -log p alone (adaptive_log_softmax_nll).
    TransformerXL::Output n = m->forward(ids.select(0, s), st_nll, targets.select(0, s));
    CHECK_FALSE(n.logits.defined());
    model_test::check_close(neg(n.nll), expected().get("logp").select(0, s).to(dt), tol, tol, seg + " logp");
    model_test::check_close(n.nll.mean().reshape({1}), expected().get("loss").slice(0, s, s + 1).to(dt), tol, tol,
                            seg + " loss");
    st = o.state;
    st_nll = n.state;
  }
}

}  // namespace

TEST_CASE("a converted official Transformer-XL with adaptive softmax matches its log-probabilities in float64",
          "[xl_official][xl][adaptive]") {
  SECTION("positional term inside the fused attention") { check_segments(DType::f64, 1e-10, true); }
  SECTION("positional term materialised") { check_segments(DType::f64, 1e-10, false); }
}

TEST_CASE("a converted official Transformer-XL with adaptive softmax matches in float32", "[xl_official][xl][adaptive]") {
  check_segments(DType::f32, 1e-4);
}

TEST_CASE("the converter's config is a valid Remora config with the official settings", "[xl_official][driver]") {
  nlohmann::json j = converted_config();
  const driver::Config cfg = driver::parse_config(j, std::string(REMORA_SOURCE_DIR));
  const nlohmann::json& r = cfg.resolved["model"];
  for (const char* k : {"n_layer", "d_model", "n_head", "d_head", "d_inner", "mem_len", "cutoffs", "div_val", "d_embed",
                        "tie_weight", "tie_projs"}) {
    INFO(k);
    CHECK(r[k] == j["model"][k]);
  }
  CHECK(r["tie_projs"] == nlohmann::json::array({false, true, true, true}));
}
