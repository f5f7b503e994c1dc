// SPDX-License-Identifier: BSD-3-Clause
// Every shipped config in configs/ validates and builds (data, model,
// optimizer), so that a config in the repository can never be broken by a
// driver change again; and the driver keys of the official MemoryNets recipe
// (docs/relevancy.md §7): model.input / init / recurrent_init /
// input_init, data.answer_classes, train.optimizer.type = "rmsprop".
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <remora/remora.h>

#include "cli/config.h"
#include "cli/experiment.h"

using namespace remora;
using namespace remora::driver;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> shipped_configs() {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(fs::path(REMORA_SOURCE_DIR) / "configs"))
    if (e.path().extension() == ".json") out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

// A small copy config with the official recipe's keys; `edit` changes it.
json copy_config(const std::string& type) {
  return json::parse(R"({
    "seed": 3,
    "data": {"type": "copy", "delay": 6, "symbols": 8, "copy_len": 3, "answer_classes": "targets",
             "batch_size": 2, "eval_batch_size": 2, "n_test": 4},
    "train": {"steps": 2, "optimizer": {"type": "rmsprop", "lr": 0.0002, "alpha": 0.99, "eps": 1e-8},
              "clip": 1.0, "threads": 1},
    "model": {"type": ")" + type + R"(", "d_model": 8, "dropout": 0.0, "input": "onehot", "init": "official"}
  })");
}

std::string config_error(const json& j) {
  try {
    parse_config(j, ".");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("every config in configs/ validates and builds", "[configs]") {
  const std::vector<std::string> files = shipped_configs();
  REQUIRE(files.size() >= 20);
  for (const std::string& f : files) {
    DYNAMIC_SECTION(fs::path(f).filename().string()) {
      // Relative data paths resolve against the repository (as from its root).
      const fs::path cwd = fs::current_path();
      fs::current_path(REMORA_SOURCE_DIR);
      try {
        Config cfg = load_config(f, {"train.threads=1"});
        Experiment ex(cfg);
        CHECK(ex.make_optimizer() != nullptr);
        ex.schedule();
        CHECK(ex.net.module->num_parameters() > 0);
      } catch (const std::exception& e) {
        fs::current_path(cwd);
        FAIL(f << ": " << e.what());
      }
      fs::current_path(cwd);
    }
  }
}

TEST_CASE("copy configs: the official recipe's keys reach the model and optimizer", "[configs]") {
  for (const char* type : {"rnn", "lstm", "relrnn", "rellstm"}) {
    DYNAMIC_SECTION(type) {
      Config cfg = parse_config(copy_config(type), ".");
      Experiment ex(cfg);
      // targets: blank + 8 symbols = 9 classes; onehot: no encoder, the input
      // projection reads the 10-wide one-hot.
      CHECK(ex.ctx.n_out == 9);
      bool encoder = false, input_width_ok = false;
      for (const auto& kv : ex.net.module->named_parameters()) {
        encoder = encoder || kv.first.rfind("encoder.", 0) == 0;
        if (kv.first == "decoder.weight") CHECK(kv.second.shape() == Shape{9, 8});
        if (kv.first == "rnn.U.weight" || kv.first == "rnn.weight_ih" || kv.first == "rnn.weight_ih_l0")
          input_width_ok = kv.second.size(1) == 10;
      }
      CHECK_FALSE(encoder);
      CHECK(input_width_ok);
      auto opt = ex.make_optimizer();
      CHECK(opt->type_name() == "RMSprop");
      auto* rms = dynamic_cast<optim::RMSprop*>(opt.get());
      REQUIRE(rms != nullptr);
      CHECK(rms->alpha == 0.99);
      CHECK(rms->eps == 1e-8);
      CHECK(rms->lr() == 0.0002);
      CHECK(cfg.resolved["train"]["optimizer"]["alpha"].get<double>() == 0.99);
      CHECK(cfg.resolved["data"]["answer_classes"] == "targets");
      CHECK(cfg.resolved["model"]["input"] == "onehot");
      CHECK(cfg.resolved["model"]["init"] == "official");
      const bool rnn_type = std::string(type) == "rnn" || std::string(type) == "relrnn";
      CHECK(cfg.resolved["model"].contains("recurrent_init") == rnn_type);
      // One training step and an evaluation run.
      Experiment::State st;
      int64_t tokens = 0;
      Tensor loss = ex.train_loss(st, &tokens);
      CHECK(std::isfinite(loss.item()));
      loss.backward();
      opt->step();
      Metrics m = ex.evaluate("test", 0);
      CHECK(m.tokens == 4 * 3);
    }
  }
}

TEST_CASE("copy configs: defaults of the new keys keep the old behaviour", "[configs]") {
  json j = copy_config("rnn");
  j["data"].erase("answer_classes");
  j["model"].erase("input");
  j["model"].erase("init");
  Config cfg = parse_config(j, ".");
  CHECK(cfg.resolved["data"]["answer_classes"] == "vocab");
  CHECK(cfg.resolved["model"]["input"] == "embedding");
  CHECK(cfg.resolved["model"]["init"] == "uniform");  // rnn / lstm: uniform
  Experiment ex(cfg);
  CHECK(ex.ctx.n_out == 10);
  json r = copy_config("relrnn");
  r["model"].erase("init");
  CHECK(parse_config(r, ".").resolved["model"]["init"] == "official");  // relrnn / rellstm: official
  // init uniform still reads recurrent_init (so --set model.init=... switches).
  r["model"]["init"] = "uniform";
  r["model"]["recurrent_init"] = "cayley";
  CHECK_NOTHROW(parse_config(r, "."));
}

TEST_CASE("copy configs: bad values of the new keys name their JSON path", "[configs]") {
  auto with = [](const std::string& type, const std::string& section, const std::string& key, const json& v) {
    json j = copy_config(type);
    if (section == "optimizer")
      j["train"]["optimizer"][key] = v;
    else
      j[section][key] = v;
    return config_error(j);
  };
  CHECK_THAT(with("relrnn", "model", "input", "bits"),
             Catch::StartsWith("model.input: unknown value \"bits\"; expected one of: embedding, onehot"));
  CHECK_THAT(with("rnn", "model", "init", "orthogonal"), Catch::StartsWith("model.init: unknown value"));
  CHECK_THAT(with("relrnn", "model", "recurrent_init", "eye"), Catch::StartsWith("model.recurrent_init: unknown value"));
  CHECK_THAT(with("rnn", "model", "input_init", 3), Catch::StartsWith("model.input_init: expected a string"));
  // The LSTM types have no recurrent_init / input_init (as the official code).
  CHECK_THAT(with("lstm", "model", "recurrent_init", "henaff"), Catch::StartsWith("model.recurrent_init: unknown key"));
  CHECK_THAT(with("rellstm", "model", "input_init", "xavier"), Catch::StartsWith("model.input_init: unknown key"));
  CHECK_THAT(with("rnn", "data", "answer_classes", "all"),
             Catch::StartsWith("data.answer_classes: unknown value \"all\"; expected one of: vocab, targets"));
  CHECK_THAT(with("rnn", "optimizer", "type", "adagrad"), Catch::Contains("rmsprop"));
  CHECK_THAT(with("rnn", "optimizer", "alpha", 1.5), Catch::StartsWith("train.optimizer.alpha: expected a number in [0, 1]"));
  CHECK_THAT(with("rnn", "optimizer", "eps", -1), Catch::StartsWith("train.optimizer.eps:"));
}

TEST_CASE("heads that do not split d_model are one error at model.n_head, per type", "[configs]") {
  // One check (check_heads_split) for both transformer types; only XL offers d_head.
  for (const char* file : {"default.json", "bert.json"}) {
    DYNAMIC_SECTION(file) {
      json j = json::parse(std::ifstream(fs::path(REMORA_SOURCE_DIR) / "configs" / file));
      j["model"]["d_model"] = 15;
      const std::string e = config_error(j);
      CHECK(e.find("model.n_head") != std::string::npos);
      CHECK(e.find("d_model = 15 is not divisible by n_head") != std::string::npos);
      CHECK((e.find("set d_head") != std::string::npos) == (std::string(file) == "default.json"));
    }
  }
}

// The papers' full-size recipes (configs/papers/, docs/recipes.md) point at the
// real corpora, which are not shipped: they validate against the shipped
// samples in the same format and keep the published settings of the official
// run scripts (Transformer-XL: pytorch/run_*.sh with train.py's defaults; SRU++:
// experiments/srupp_experiments/ README commands with the scripts' defaults).
TEST_CASE("paper configs: the official settings, valid on the shipped samples", "[configs][text_driver]") {
  const json xl_base = {{"model", {{"n_layer", 12}, {"d_model", 512}, {"n_head", 8}, {"d_head", 64},
                                   {"d_inner", 2048}, {"dropout", 0.1}, {"dropatt", 0.0}, {"mem_len", 512}}},
                        {"data", {{"seq_len", 512}, {"batch_size", 22}, {"eval_batch_size", 10}}},
                        {"train", {{"steps", 400000}, {"clip", 0.25}}}};
  const json xl_large = {{"model", {{"n_layer", 24}, {"d_model", 1024}, {"n_head", 8}, {"d_head", 128},
                                    {"d_inner", 3072}, {"dropout", 0.15}, {"dropatt", 0.15}, {"mem_len", 768}}},
                         {"data", {{"seq_len", 768}, {"batch_size", 64}, {"eval_batch_size", 10}}},
                         {"train", {{"steps", 400000}, {"clip", 0.25}}}};
  const json adam = {{"type", "adam"}, {"lr", 0.00025}};
  const json srupp = {{"model", {{"type", "srupp"}, {"n_layer", 10}, {"d_model", 3072}, {"d_attn", 768},
                                 {"attn_every", 1}, {"layer_norm", true}}},
                      {"data", {{"eval_batch_size", 16}}},
                      {"train", {{"steps", 400000}, {"clip", 1.0},
                                 {"optimizer", {{"type", "radam"}, {"lr", 0.0003}, {"weight_decay", 0.1},
                                                {"decoupled_weight_decay", true}}}}}};
  auto with = [](json base, const json& patch) {
    base.merge_patch(patch);
    return base;
  };
  // File -> the settings it must have (JSON merge patches of the families above).
  const std::map<std::string, json> expected = {
      {"xl_enwik8_base.json", with(xl_base, {{"train", {{"optimizer", adam}, {"schedule", {{"warmup", 0}}}}}})},
      {"xl_text8_base.json", with(xl_base, {{"train", {{"optimizer", adam}, {"schedule", {{"warmup", 0}}}}}})},
      {"xl_enwik8_large.json", with(xl_large, {{"train", {{"optimizer", adam}, {"schedule", {{"warmup", 4000}}}}}})},
      {"xl_text8_large.json", with(xl_large, {{"train", {{"optimizer", adam}, {"schedule", {{"warmup", 0}}}}}})},
      {"xl_wt103_base.json",
       {{"model", {{"n_layer", 16}, {"d_model", 410}, {"n_head", 10}, {"d_head", 41}, {"d_inner", 2100},
                   {"dropout", 0.1}, {"dropatt", 0.0}, {"mem_len", 150}, {"cutoffs", {20000, 40000, 200000}},
                   {"div_val", 1}, {"tie_weight", true}, {"tie_projs", {false, true, true, true}}}},
        {"data", {{"type", "words"}, {"seq_len", 150}, {"batch_size", 60}, {"eval_batch_size", 10}}},
        {"train", {{"steps", 200000}, {"clip", 0.25}, {"optimizer", adam}, {"schedule", {{"warmup", 0}}}}}}},
      {"xl_wt103_large.json",
       {{"model", {{"n_layer", 18}, {"d_model", 1024}, {"n_head", 16}, {"d_head", 64}, {"d_inner", 4096},
                   {"dropout", 0.2}, {"dropatt", 0.2}, {"mem_len", 384}, {"cutoffs", {20000, 40000, 200000}},
                   {"div_val", 4}, {"d_embed", 0}, {"tie_weight", true}, {"tie_projs", {false, true, true, true}}}},
        {"data", {{"type", "words"}, {"seq_len", 384}, {"batch_size", 128}, {"eval_batch_size", 10}}},
        {"train", {{"steps", 4000000}, {"clip", 0.25}, {"optimizer", adam}, {"schedule", {{"warmup", 16000}}}}}}},
      // RSA-XL (docs/recipes.md): the enwik8 base recipe with REM heads in every layer.
      {"rsa_xl_enwik8_base.json",
       with(xl_base, {{"model", {{"attention", {{"type", "rsa"}, {"rem", {{"regular", 2}, {"cyclic", 1}}},
                                                {"gate", "head"}}}}},
                      {"train", {{"optimizer", adam}, {"schedule", {{"warmup", 0}}}}}})},
      {"srupp_enwik8_base.json",
       with(srupp, {{"model", {{"dropout", 0.22}, {"dropatt", 0.22}, {"mem_len", 1024}}},
                    {"data", {{"type", "char"}, {"seq_len", 1024}, {"batch_size", 32}}},
                    {"train", {{"schedule", {{"warmup", 16000}}}}}})},
      {"srupp_wt103_base.json",
       with(srupp, {{"model", {{"dropout", 0.15}, {"dropatt", 0.15}, {"emb_dropout", 0.15}, {"mem_len", 768},
                               {"cutoffs", {19997, 39997, 199997}}, {"d_embed", 1024}, {"div_val", 4}}},
                    {"data", {{"type", "words"}, {"seq_len", 768}, {"batch_size", 64}}},
                    {"train", {{"schedule", {{"warmup", 16000}}}}}})},
  };
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(fs::path(REMORA_SOURCE_DIR) / "configs" / "papers"))
    if (e.path().extension() == ".json") files.push_back(e.path().filename().string());
  std::sort(files.begin(), files.end());
  CHECK(files.size() == expected.size());
  for (const std::string& name : files) {
    DYNAMIC_SECTION(name) {
      REQUIRE(expected.count(name) == 1);  // a new recipe gets its row above
      const bool wt103 = name.find("wt103") != std::string::npos;
      const std::string corpus = name.find("enwik8") != std::string::npos ? "enwik8" : wt103 ? "wt103" : "text8";
      // WikiText-103 is a folder of wiki.*.tokens; the shipped sample is tests/data/wikitext.
      const std::string sample = std::string(REMORA_SOURCE_DIR) + "/tests/data/" +
                                 (wt103 ? std::string("wikitext") : corpus + "/" + corpus);
      Config cfg = load_config((fs::path(REMORA_SOURCE_DIR) / "configs" / "papers" / name).string(),
                               {"data.path=" + sample, "device=cpu"});
      const json& r = cfg.resolved;
      // Every value the row names (objects: key by key) is the resolved one.
      std::function<void(const json&, const json&, const std::string&)> has = [&](const json& got, const json& want,
                                                                                  const std::string& at) {
        if (!want.is_object()) {
          INFO(at);
          CHECK(got == want);
          return;
        }
        for (const auto& kv : want.items()) {
          INFO(at + "." + kv.key());
          REQUIRE(got.contains(kv.key()));
          has(got[kv.key()], kv.value(), at + "." + kv.key());
        }
      };
      has(r, expected.at(name), "");
      CHECK(r["train"]["schedule"]["type"] == "cosine");
      CHECK(r["train"]["schedule"]["min_lr_ratio"] == 0.0);
      // The small sibling in configs/ has the same model family and trains on the same sample.
      const std::string family = name.substr(0, name.find("_" + corpus));
      const std::string small = std::string(REMORA_SOURCE_DIR) + "/configs/" + family + "_" + corpus + "_small.json";
      INFO(small);
      REQUIRE(fs::exists(small));
      Config sc = load_config(small, {"data.path=" + sample});
      CHECK(sc.resolved["model"]["type"] == r["model"]["type"]);
      if (r["model"].contains("attention"))
        CHECK(sc.resolved["model"]["attention"]["type"] == r["model"]["attention"]["type"]);
      CHECK(sc.resolved["data"]["type"] == r["data"]["type"]);
      CHECK(sc.resolved["train"]["optimizer"]["type"] == r["train"]["optimizer"]["type"]);
    }
  }
}
