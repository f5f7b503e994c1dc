// SPDX-License-Identifier: BSD-3-Clause
// BERT and RSA-BERT against the hand-written HuggingFace-semantics PyTorch
// reference (tools/torch_ref/bert.py via tools/goldens/make_bert_goldens.py): MLM/NSP
// logits, pooled output, hidden states, losses and every parameter gradient, in
// float64 (1e-9) and float32 (1e-4); the HF directory fixture; checkpoints; the
// MLM masking recipe.
#include <catch2/catch.hpp>
#include <remora/remora.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "../models/bert.h"

#include "model_golden.h"

using namespace remora;
using models::BertConfig;
using models::BertForMaskedLM;
using json = nlohmann::json;

namespace {

const Safetensors& golden() {
  return model_test::golden_file("golden_bert.safetensors", "remora-golden-bert", "tools/goldens/make_bert_goldens.py");
}

using model_test::check_close;

BertConfig config_of(const std::string& key) {
  return BertConfig::from_hf_json(json::parse(golden().metadata.at("case_" + key + ".config")),
                                  "case_" + key + ".config");
}

std::shared_ptr<BertForMaskedLM> model_of(const std::string& key, DType dt) {
  auto m = std::make_shared<BertForMaskedLM>(config_of(key), dt);
  nn::NamedTensors sd = model_test::case_params(golden(), key);
  m->load_state_dict(sd);  // strict: the names are exactly HF's
  m->eval();
  return m;
}

void run_case(const std::string& key, DType dt, double rtol, double atol) {
  auto m = model_of(key, dt);
  const std::string c = "case_" + key + ".";
  const auto& g = golden();
  // The mask as the float dtype for one case, i64 for the other: both are accepted.
  Tensor mask = g.get(c + "attention_mask");
  if (key == "b") mask = mask.to(dt);
  BertForMaskedLM::Output out = m->forward(g.get(c + "input_ids"), mask, g.get(c + "token_type_ids"));
  check_close(out.mlm_logits, g.get(c + "mlm_logits"), rtol, atol, c + "mlm_logits");
  check_close(out.nsp_logits, g.get(c + "nsp_logits"), rtol, atol, c + "nsp_logits");
  check_close(out.pooled, g.get(c + "pooled"), rtol, atol, c + "pooled");
  REQUIRE(out.hidden_states.size() == size_t(m->cfg.num_hidden_layers + 1));
  for (size_t l = 0; l < out.hidden_states.size(); ++l)
    check_close(out.hidden_states[l], g.get(c + "hidden." + std::to_string(l)), rtol, atol,
                c + "hidden." + std::to_string(l));
  Tensor mlm = BertForMaskedLM::mlm_loss(out.mlm_logits, g.get(c + "mlm_labels"));
  Tensor nsp = BertForMaskedLM::nsp_loss(out.nsp_logits, g.get(c + "next_sentence_label"));
  check_close(mlm.reshape({1}), g.get(c + "mlm_loss"), rtol, atol, c + "mlm_loss");
  check_close(nsp.reshape({1}), g.get(c + "nsp_loss"), rtol, atol, c + "nsp_loss");
  add(mlm, nsp).backward();
  model_test::check_param_grads(*m, g, c, rtol, atol);
}

std::string temp_dir(const std::string& tag) {
  char buf[] = "/tmp/remora_bert_XXXXXX";
  const char* d = ::mkdtemp(buf);
  REQUIRE(d != nullptr);
  return std::string(d) + "_" + tag;
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::trunc);
  f << text;
}

std::string hf_dir() { return std::string(REMORA_TEST_DATA) + "/hf_bert_tiny"; }

}  // namespace

TEST_CASE("BERT parameter names are HuggingFace's", "[bert]") {
  BertForMaskedLM m(config_of("b"), DType::f64);
  std::set<std::string> names;
  for (const auto& kv : m.named_parameters()) names.insert(kv.first);
  for (const char* n :
       {"bert.embeddings.word_embeddings.weight", "bert.embeddings.position_embeddings.weight",
        "bert.embeddings.token_type_embeddings.weight", "bert.embeddings.LayerNorm.weight",
        "bert.embeddings.LayerNorm.bias", "bert.encoder.layer.0.attention.self.query.weight",
        "bert.encoder.layer.0.attention.self.query.bias", "bert.encoder.layer.1.attention.self.key.weight",
        "bert.encoder.layer.1.attention.self.value.bias", "bert.encoder.layer.0.attention.output.dense.weight",
        "bert.encoder.layer.0.attention.output.LayerNorm.bias", "bert.encoder.layer.1.intermediate.dense.weight",
        "bert.encoder.layer.1.output.dense.bias", "bert.encoder.layer.0.output.LayerNorm.weight",
        "bert.encoder.layer.0.attention.self.rem.eta", "bert.encoder.layer.0.attention.self.rem.nu",
        "bert.encoder.layer.1.attention.self.rem.theta", "bert.encoder.layer.1.attention.self.rem.mu",
        "bert.pooler.dense.weight", "bert.pooler.dense.bias", "cls.predictions.bias",
        "cls.predictions.transform.dense.weight", "cls.predictions.transform.LayerNorm.weight",
        "cls.predictions.transform.LayerNorm.bias", "cls.seq_relationship.weight",
        "cls.seq_relationship.bias"}) {
    INFO(n);
    CHECK(names.count(n) == 1);
  }
  CHECK(names.count("cls.predictions.decoder.weight") == 0);  // tied
  // 5 embedding tensors + per layer (6 Linear x 2 + 2 LN x 2 + 4 REM) + pooler 2 + cls 1 + 4 + 2
  CHECK(names.size() == size_t(5 + 2 * (12 + 4 + 4) + 2 + 1 + 4 + 2));
  // RSA-BERT's REM is unmasked.
  CHECK_FALSE(m.layers->at<models::BertLayer>(0)->self_attention->rem->spec.masked);
}

TEST_CASE("BERT initialisation follows HF _init_weights", "[bert]") {
  BertConfig c = config_of("a");
  c.vocab_size = 400;
  c.hidden_size = 64;
  c.num_attention_heads = 4;
  c.initializer_range = 0.05;
  Generator g(11);
  BertForMaskedLM m(c, DType::f64, &g);
  const std::vector<double> w = m.embeddings->word_embeddings->weight.to_vector();
  double s2 = 0;
  for (size_t i = size_t(c.hidden_size); i < w.size(); ++i) s2 += w[i] * w[i];
  CHECK(std::sqrt(s2 / double(w.size() - size_t(c.hidden_size))) == Approx(0.05).epsilon(0.05));
  for (int64_t i = 0; i < c.hidden_size; ++i) CHECK(w[size_t(i)] == 0.0);  // padding row 0
  for (double v : m.mlm_bias.to_vector()) CHECK(v == 0.0);
  for (double v : m.transform_ln->weight.to_vector()) CHECK(v == 1.0);
  for (double v : m.layers->at<models::BertLayer>(1)->output_dense->bias.to_vector()) CHECK(v == 0.0);
}

TEST_CASE("BERT matches the PyTorch HF-semantics reference in float64", "[bert][golden]") {
  run_case("a", DType::f64, 1e-9, 1e-12);
}

TEST_CASE("RSA-BERT matches the PyTorch reference in float64", "[bert][golden][rsa]") {
  run_case("b", DType::f64, 1e-9, 1e-12);
}

TEST_CASE("BERT and RSA-BERT match the reference in float32", "[bert][golden]") {
  for (const char* key : {"a", "b"}) {
    INFO("case " << key);
    run_case(key, DType::f32, 1e-4, 1e-5);
  }
}

TEST_CASE("BERT without attention_mask and token types equals all-ones / zeros", "[bert]") {
  auto m = model_of("b", DType::f64);
  Tensor ids = golden().get("case_b.input_ids").slice(0, 0, 1).contiguous();  // row 0 has no padding
  auto a = m->forward(ids);
  auto b = m->forward(ids, Tensor::ones(ids.shape(), DType::i64), Tensor::zeros(ids.shape(), DType::i64));
  check_close(a.mlm_logits, b.mlm_logits, 0, 0, "mlm_logits");
}

TEST_CASE("HF directory fixture loads (gamma/beta names) and reproduces the expected logits", "[bert][hf]") {
  const Safetensors exp = load_safetensors(std::string(REMORA_TEST_DATA) + "/hf_bert_tiny_expected.safetensors");
  // The fixture really uses the legacy names somewhere.
  const Safetensors raw = load_safetensors(hf_dir() + "/model.safetensors");
  CHECK(raw.contains("bert.encoder.layer.0.attention.output.LayerNorm.gamma"));
  CHECK(raw.contains("bert.embeddings.LayerNorm.beta"));
  auto m32 = models::load_hf_directory(hf_dir(), DType::f32);
  m32->eval();
  check_close(m32->forward(exp.get("input_ids")).mlm_logits, exp.get("mlm_logits"), 1e-4, 1e-5, "f32 logits");
  auto m64 = models::load_hf_directory(hf_dir() + "/", DType::f64);
  m64->eval();
  check_close(m64->forward(exp.get("input_ids")).mlm_logits, exp.get("mlm_logits_f64"), 1e-9, 1e-12,
              "f64 logits");
}

TEST_CASE("save_hf_directory -> load_hf_directory round trip is identical", "[bert][hf]") {
  for (const char* key : {"a", "b"}) {
    INFO("case " << key);
    auto m = model_of(key, DType::f64);
    const std::string dir = temp_dir(key);
    models::save_hf_directory(*m, dir);
    auto back = models::load_hf_directory(dir, DType::f64);
    back->eval();
    CHECK(back->cfg.to_hf_config() == m->cfg.to_hf_config());
    const auto p0 = m->named_parameters(), p1 = back->named_parameters();
    REQUIRE(p0.size() == p1.size());
    for (size_t i = 0; i < p0.size(); ++i) {
      CHECK(p0[i].first == p1[i].first);
      check_close(p1[i].second, p0[i].second, 0, 0, p0[i].first);
    }
    const std::string c = std::string("case_") + key + ".";
    auto o0 = m->forward(golden().get(c + "input_ids"), golden().get(c + "attention_mask"));
    auto o1 = back->forward(golden().get(c + "input_ids"), golden().get(c + "attention_mask"));
    check_close(o1.mlm_logits, o0.mlm_logits, 0, 0, "logits after the round trip");
    std::remove((dir + "/config.json").c_str());
    std::remove((dir + "/model.safetensors").c_str());
    ::rmdir(dir.c_str());
  }
}

TEST_CASE("HF checkpoint name aliases", "[bert][hf]") {
  CHECK(models::canonical_hf_name("bert.encoder.layer.3.output.LayerNorm.gamma") ==
        "bert.encoder.layer.3.output.LayerNorm.weight");
  CHECK(models::canonical_hf_name("bert.embeddings.LayerNorm.beta") == "bert.embeddings.LayerNorm.bias");
  CHECK(models::canonical_hf_name("encoder.layer.0.attention.self.query.weight") ==
        "bert.encoder.layer.0.attention.self.query.weight");
  CHECK(models::canonical_hf_name("cls.predictions.decoder.weight").empty());
  CHECK(models::canonical_hf_name("bert.embeddings.position_ids").empty());
  CHECK(models::canonical_hf_name("cls.predictions.decoder.bias") == "cls.predictions.bias");
  // A BertForMaskedLM-style state (no pooler / NSP head, unprefixed encoder names) loads.
  auto src = model_of("a", DType::f64);
  nn::NamedTensors sd;
  for (const auto& kv : src->named_parameters()) {
    const std::string& n = kv.first;
    if (n.rfind("bert.pooler.", 0) == 0 || n.rfind("cls.seq_relationship.", 0) == 0) continue;
    sd.emplace_back(n.rfind("bert.", 0) == 0 ? n.substr(5) : n, kv.second);
  }
  BertForMaskedLM dst(config_of("a"), DType::f64);
  models::load_hf_state(dst, sd, "test state");
  check_close(dst.embeddings->word_embeddings->weight, src->embeddings->word_embeddings->weight, 0, 0, "E");
  // Missing required tensor / unknown tensor / duplicate after aliasing.
  nn::NamedTensors missing(sd.begin() + 1, sd.end());
  CHECK_THROWS_WITH(models::load_hf_state(dst, missing, "test state"),
                    Catch::Contains("test state") && Catch::Contains("missing tensor") &&
                        Catch::Contains(sd[0].first.substr(0)));
  nn::NamedTensors unknown = sd;
  unknown.emplace_back("bert.encoder.layer.9.output.dense.weight", Tensor::zeros({2}, DType::f64));
  CHECK_THROWS_WITH(models::load_hf_state(dst, unknown, "test state"),
                    Catch::Contains("unknown tensor \"bert.encoder.layer.9.output.dense.weight\""));
  nn::NamedTensors dup = sd;
  dup.emplace_back("embeddings.LayerNorm.gamma", src->embeddings->LayerNorm->weight);
  CHECK_THROWS_WITH(models::load_hf_state(dst, dup, "test state"), Catch::Contains("both name"));
}

TEST_CASE("BERT config.json and checkpoint errors name the file and key", "[bert][hf][errors]") {
  const json good = json::parse(std::ifstream(hf_dir() + "/config.json"));
  auto expect_cfg_error = [&](json j, const std::string& needle) {
    INFO(j.dump());
    CHECK_THROWS_AS(BertConfig::from_hf_json(j, "x/config.json"), Error);
    CHECK_THROWS_WITH(BertConfig::from_hf_json(j, "x/config.json"),
                      Catch::Contains("x/config.json") && Catch::Contains(needle));
  };
  CHECK_NOTHROW(BertConfig::from_hf_json(good));
  CHECK_NOTHROW(BertConfig::from_hf_config(good.dump()));
  CHECK_THROWS_WITH(BertConfig::from_hf_config("{\"vocab_size\": 30,", "x/config.json"),
                    Catch::Contains("x/config.json") && Catch::Contains("not valid JSON"));
  json j = good;
  j["hiden_size"] = 16;
  expect_cfg_error(j, "hiden_size");
  // Integers outside int64 (fuzz_hf found a float 4.2e35 cast to int64: UB).
  j = good;
  j["max_position_embeddings"] = 4.2e35;
  expect_cfg_error(j, "\"max_position_embeddings\": integer 4.2e+35 is outside the 64-bit range");
  j = good;
  j["vocab_size"] = uint64_t(1) << 63;
  expect_cfg_error(j, "\"vocab_size\": integer 9223372036854775808 is too large");
  j = good;
  j["hidden_size"] = "16";
  expect_cfg_error(j, "hidden_size");
  j = good;
  j["hidden_size"] = 15;  // not a multiple of the heads
  expect_cfg_error(j, "hidden_size");
  j = good;
  j["hidden_act"] = "relu";
  expect_cfg_error(j, "hidden_act");
  j = good;
  j["position_embedding_type"] = "relative_key";
  expect_cfg_error(j, "position_embedding_type");
  j = good;
  j["hidden_dropout_prob"] = 1.5;
  expect_cfg_error(j, "hidden_dropout_prob");
  j = good;
  j["remora"] = {{"attention", {{"type", "rsa"}, {"rem", {{"regular", 3}}}}}};  // 3 REM heads > 2
  expect_cfg_error(j, "REM heads");
  j = good;
  j["remora"] = {{"attention", {{"type", "rsa"}, {"rem", {{"regular", 1}, {"cyclc", 1}}}}}};
  expect_cfg_error(j, "remora.attention.rem.cyclc");
  j = good;
  j["remora"] = {{"attention", {{"type", "rsa"}, {"rem", {{"regular", 1}, {"masked", true}}}}}};
  expect_cfg_error(j, "masked");
  // HF's generic keys are accepted.
  j = good;
  j["transformers_version"] = "4.30.0";
  j["torch_dtype"] = "float32";
  j["_name_or_path"] = "bert-tiny";
  CHECK_NOTHROW(BertConfig::from_hf_json(j));
  // to_hf_config -> from_hf_config round trip, RSA included.
  BertConfig rc = config_of("b");
  rc.rem_init.mu = {0.5, -0.5, 1.0};
  CHECK(BertConfig::from_hf_config(rc.to_hf_config()).to_hf_config() == rc.to_hf_config());

  // Directory errors.
  const std::string dir = temp_dir("err");
  ::mkdir(dir.c_str(), 0755);
  CHECK_THROWS_WITH(models::load_hf_directory(dir), Catch::Contains(dir + "/config.json"));
  write_file(dir + "/config.json", good.dump());
  CHECK_THROWS_WITH(models::load_hf_directory(dir), Catch::Contains(dir + "/model.safetensors"));
  write_file(dir + "/config.json", "{\"vocab_size\": 30,");
  write_file(dir + "/model.safetensors", "");
  CHECK_THROWS_WITH(models::load_hf_directory(dir),
                    Catch::Contains(dir + "/config.json") && Catch::Contains("not valid JSON"));
  // Shape mismatch: a config with a bigger vocabulary than the checkpoint.
  json big = good;
  big["vocab_size"] = 31;
  write_file(dir + "/config.json", big.dump());
  {
    std::ifstream in(hf_dir() + "/model.safetensors", std::ios::binary);
    std::ofstream out(dir + "/model.safetensors", std::ios::binary | std::ios::trunc);
    out << in.rdbuf();
  }
  CHECK_THROWS_AS(models::load_hf_directory(dir), Error);
  CHECK_THROWS_WITH(models::load_hf_directory(dir),
                    Catch::Contains(dir + "/model.safetensors") &&
                        Catch::Contains("bert.embeddings.word_embeddings.weight") && Catch::Contains("[30, 16]"));
  CHECK_THROWS_WITH(models::load_hf_directory(dir + "/nope"), Catch::Contains("not a directory"));
  std::remove((dir + "/config.json").c_str());
  std::remove((dir + "/model.safetensors").c_str());
  ::rmdir(dir.c_str());
}

TEST_CASE("BERT bad input gives clear errors", "[bert][errors]") {
  BertForMaskedLM m(config_of("a"), DType::f32);
  CHECK_THROWS_WITH(m.forward(Tensor::zeros({2, 3})), Catch::Contains("input_ids must be i64 [B, L]"));
  CHECK_THROWS_WITH(m.forward(Tensor::zeros({2, 11}, DType::i64)), Catch::Contains("max_position_embeddings"));
  CHECK_THROWS_WITH(m.forward(Tensor::zeros({2, 3}, DType::i64), Tensor::ones({2, 4}, DType::i64)),
                    Catch::Contains("attention_mask"));
  CHECK_THROWS_WITH(m.forward(Tensor::zeros({2, 3}, DType::i64), Tensor(), Tensor::ones({3, 3}, DType::i64)),
                    Catch::Contains("token_type_ids"));
  BertConfig c = config_of("a");
  c.attention = "rsa";
  c.rem.regular = 1;
  c.rem.masked = true;
  CHECK_THROWS_WITH(BertForMaskedLM(c), Catch::Contains("unmasked"));
  c.attention = "linear";
  CHECK_THROWS_WITH(BertForMaskedLM(c), Catch::Contains("attention must be"));
}

TEST_CASE("MLM masking recipe: 15% chosen, 80/10/10, specials untouched, deterministic", "[bert][mlm]") {
  const int64_t V = 1000, MASK = 3, N = 200000;
  std::vector<int64_t> idv(static_cast<size_t>(N)), spv(static_cast<size_t>(N), 0);
  for (int64_t i = 0; i < N; ++i) idv[size_t(i)] = 10 + (i * 7919) % (V - 10);
  for (int64_t i = 0; i < N; i += 10) spv[size_t(i)] = 1;  // 10% special tokens
  Tensor ids = Tensor::from_vector(idv, {N / 100, 100});
  Tensor special = Tensor::from_vector(spv, {N / 100, 100});
  Generator g(42);
  auto r = models::mlm_mask(ids, special, V, MASK, g);
  REQUIRE(r.first.shape() == ids.shape());
  REQUIRE(r.second.shape() == ids.shape());
  const std::vector<int64_t> x = r.first.to_i64_vector(), lab = r.second.to_i64_vector();
  int64_t chosen = 0, masked = 0, kept = 0, randomised = 0, eligible = 0;
  for (int64_t i = 0; i < N; ++i) {
    const size_t k = size_t(i);
    if (spv[k]) {
      CHECK(lab[k] == -100);
      CHECK(x[k] == idv[k]);
      continue;
    }
    ++eligible;
    if (lab[k] == -100) {
      REQUIRE(x[k] == idv[k]);  // unchosen tokens are never changed
      continue;
    }
    REQUIRE(lab[k] == idv[k]);
    REQUIRE(x[k] >= 0);
    REQUIRE(x[k] < V);
    ++chosen;
    if (x[k] == MASK) ++masked;
    else if (x[k] == idv[k]) ++kept;
    else ++randomised;
  }
  // Binomial bounds at about 5 standard deviations.
  const double pc = double(chosen) / double(eligible);
  CHECK(std::fabs(pc - 0.15) < 5 * std::sqrt(0.15 * 0.85 / double(eligible)));
  const double sd8 = 5 * std::sqrt(0.8 * 0.2 / double(chosen)), sd1 = 5 * std::sqrt(0.1 * 0.9 / double(chosen));
  CHECK(std::fabs(double(masked) / double(chosen) - 0.8) < sd8);
  // A random replacement can hit the original id or [MASK] (1/V each): within the bounds.
  CHECK(std::fabs(double(randomised) / double(chosen) - 0.1) < sd1);
  CHECK(std::fabs(double(kept) / double(chosen) - 0.1) < sd1);
  // Random replacements are spread over the vocabulary.
  std::set<int64_t> seen;
  for (int64_t i = 0; i < N; ++i)
    if (lab[size_t(i)] != -100 && x[size_t(i)] != MASK && x[size_t(i)] != idv[size_t(i)]) seen.insert(x[size_t(i)]);
  CHECK(seen.size() > 900);
  // Deterministic: the same generator state gives the same result; a new draw differs.
  Generator g2(42);
  auto r2 = models::mlm_mask(ids, special, V, MASK, g2);
  CHECK(r2.first.to_i64_vector() == x);
  CHECK(r2.second.to_i64_vector() == lab);
  auto r3 = models::mlm_mask(ids, special, V, MASK, g2);
  CHECK(r3.second.to_i64_vector() != lab);
  // Without a special mask every token is eligible.
  Generator g4(1);
  auto r4 = models::mlm_mask(Tensor::from_vector(std::vector<int64_t>(1000, 5), {1000}), Tensor(), V, MASK, g4);
  int64_t c4 = 0;
  for (int64_t v : r4.second.to_i64_vector()) c4 += v != -100;
  CHECK(c4 > 100);
  CHECK(c4 < 200);
  CHECK_THROWS_WITH(models::mlm_mask(ids, special, V, V, g), Catch::Contains("mask_token_id"));
  CHECK_THROWS_WITH(models::mlm_mask(ids.to(DType::f32), special, V, MASK, g), Catch::Contains("ids must be i64"));
}

TEST_CASE("BERT in bf16 and f16 with padding: the mask bias stays finite", "[bert][half]") {
  // The extended mask is finfo(dtype).min of the parameters' dtype: the lowest
  // double would round to -inf there, and -inf + inf is NaN in every score.
  for (DType dt : {DType::bf16, DType::f16}) {
    INFO(dtype_name(dt));
    auto m = std::make_shared<BertForMaskedLM>(config_of("a"), DType::f32);
    m->load_state_dict(model_test::case_params(golden(), "a"));
    m->to_(dt);
    m->eval();
    NoGradGuard ng;
    const int64_t V = m->cfg.vocab_size;
    Tensor ids = Tensor::from_vector(std::vector<int64_t>{1 % V, 2 % V, 3 % V, 0, 4 % V, 5 % V, 0, 0}, {2, 4});
    Tensor mask = Tensor::from_vector(std::vector<int64_t>{1, 1, 1, 0, 1, 1, 0, 0}, {2, 4});
    const std::vector<double> logits = m->forward(ids, mask).mlm_logits.to(DType::f64).to_vector();
    for (double v : logits) REQUIRE(std::isfinite(v));
  }
}
