// SPDX-License-Identifier: BSD-3-Clause
// The config key tables (cli/config.h FieldTable): one table per
// section reads, validates and writes the keys, and describes them for
// `remora config --keys` (docs/config_keys.md). These tests hold the three
// uses together: every key a resolved config holds is listed for its model
// type and task, and a listed JSON default is the value a config without the
// key resolves to.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "cli/config.h"
#include "cli/model.h"
#include "cli/task.h"
#include "models/bert.h"

using namespace remora;
using namespace remora::driver;
namespace fs = std::filesystem;

namespace {

// "a.b.c" -> value for every non-object value of j.
void flatten(const json& j, const std::string& prefix, std::map<std::string, json>& out) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string k = prefix.empty() ? it.key() : prefix + "." + it.key();
    if (it->is_object())
      flatten(*it, k, out);
    else
      out[k] = *it;
  }
}

// Whether a section "data (type a, b)" lists data.type `type`.
bool serves(const std::string& title, const std::string& type) {
  const std::string types = ", " + title.substr(11, title.size() - 12) + ",";
  return types.find(", " + type + ",") != std::string::npos;
}

// The documented keys of a config: "section.key" -> its KeyDoc.
std::map<std::string, KeyDoc> documented(const std::string& model_type, const std::string& data_type) {
  std::map<std::string, KeyDoc> out;
  for (const KeySection& s : config_key_sections()) {
    std::string prefix;
    if (s.title.rfind("the root", 0) == 0) prefix = "";
    else if (s.title == "train") prefix = "train.";
    else if (s.title == "model" || s.title == "model (type " + model_type + ")") prefix = "model.";
    else if (s.title == "data") prefix = "data.";
    else if (s.title.rfind("data (type ", 0) == 0) {
      if (!serves(s.title, data_type)) continue;
      prefix = "data.";
    } else {
      continue;
    }
    for (const KeyDoc& k : s.keys) out[prefix + k.key] = k;
  }
  return out;
}

struct Toy {
  int64_t n = 0;
  double x = 0;
  std::string kind;
  std::vector<int64_t> sizes;
};

}  // namespace

TEST_CASE("FieldTable: rows read, validate, write and describe one section", "[config]") {
  FieldTable<Toy> t;
  t.integer("n", &Toy::n, 3, 1, 10, "a count")
      .number("x", &Toy::x, {"n / 2", [](const Toy& s) { return double(s.n) / 2; }}, 0, 100, "a number")
      .choice("kind", &Toy::kind, "a", {"a", "b"}, "a choice")
      .integers("sizes", &Toy::sizes, {"n twos", [](const Toy& s) { return std::vector<int64_t>(size_t(s.n), 2); }},
                1, 8, "sizes")
      .check([](driver::Node& n, Toy& s) {
        if (s.sizes.size() != size_t(s.n)) n.fail("sizes", "expected n entries");
      });
  auto read = [&](const json& j) {
    driver::Node n(j, "toy");
    Toy s;
    t.read(n, s);
    n.finish();
    return s;
  };
  const Toy d = read(json::object());
  CHECK(d.n == 3);
  CHECK(d.x == 1.5);  // a default computed from the keys read before it
  CHECK(d.kind == "a");
  CHECK(d.sizes == std::vector<int64_t>{2, 2, 2});
  CHECK(t.resolved(d) == json::parse(R"({"n": 3, "x": 1.5, "kind": "a", "sizes": [2, 2, 2]})"));
  const Toy e = read(json::parse(R"({"n": 2, "kind": null})"));
  CHECK(e.x == 1.0);
  CHECK(e.kind == "a");  // null counts as absent

  auto error = [&](const json& j) {
    try {
      read(j);
    } catch (const ConfigError& err) {
      return std::string(err.what());
    }
    return std::string("(no error)");
  };
  CHECK(error(json{{"n", 11}}) == "toy.n: expected an integer in [1, 10], got 11");
  CHECK(error(json{{"kind", "c"}}) == "toy.kind: unknown value \"c\"; expected one of: a, b");
  CHECK(error(json{{"sizes", {2}}}) == "toy.sizes: expected n entries");
  CHECK(error(json{{"other", 1}}) == "toy.other: unknown key; known keys here: n, x, kind, sizes");

  const std::vector<KeyDoc> docs = t.docs();  // the check is not a key
  REQUIRE(docs.size() == 4);
  CHECK(docs[0].key == "n");
  CHECK(docs[0].type == "integer");
  CHECK(docs[0].def == "3");
  CHECK(docs[0].range == "[1, 10]");
  CHECK(docs[1].def == "n / 2");
  CHECK(docs[2].def == "\"a\"");
  CHECK(docs[2].range == "one of: a, b");
}

TEST_CASE("config --keys: every model type and task has its section", "[config]") {
  const std::vector<KeySection> sections = config_key_sections();
  auto has = [&](const std::string& title) {
    for (const KeySection& s : sections)
      if (s.title == title) return !s.keys.empty();
    return false;
  };
  for (const ModelEntry& e : model_registry()) CHECK(has("model (type " + e.type + ")"));
  for (const std::string& dt : data_type_names()) {
    bool found = false;
    for (const KeySection& s : sections)
      found = found || (s.title.rfind("data (type ", 0) == 0 && serves(s.title, dt));
    CHECK(found);
  }
  CHECK(has("train"));
  CHECK(has("data"));
  const std::string md = config_keys_markdown();
  CHECK(md.find("| `optimizer.weight_decay` | number | 0.01 for adamw, else 0.0 |") != std::string::npos);
  CHECK(md.find("| `attention.rem.init.theta` |") != std::string::npos);
}

TEST_CASE("config --keys: every key of a resolved config is listed, with its default", "[config]") {
  const fs::path cwd = fs::current_path();
  fs::current_path(REMORA_SOURCE_DIR);  // relative data paths, as from the repository
  for (const auto& entry : fs::directory_iterator(fs::path(REMORA_SOURCE_DIR) / "configs")) {
    if (entry.path().extension() != ".json") continue;
    const std::string f = entry.path().string();
    const json j = json::parse(std::ifstream(f));
    DYNAMIC_SECTION(entry.path().filename().string()) {
      const Config cfg = load_config(f);
      const std::map<std::string, KeyDoc> docs = documented(cfg.model.type, cfg.data.type);
      std::map<std::string, json> keys;
      flatten(cfg.resolved, "", keys);
      for (const auto& kv : keys) {
        INFO(kv.first);
        CHECK(docs.count(kv.first) == 1);
      }
      // The same config with only its types: every key takes its listed default.
      json bare = {{"model", {{"type", cfg.model.type}}}, {"data", {{"type", cfg.data.type}}}};
      if (j.at("data").contains("language")) bare["data"]["language"] = j.at("data").at("language");
      // Word data reads a folder of wiki.*.tokens: the default path (a text file) is not
      // one; CSV series have no default file.
      if (cfg.data.type == "words" || (docs.count("data.path") && docs.at("data.path").def == "required"))
        bare["data"]["path"] = j.at("data").at("path");
      for (const auto& kv : docs)  // the task's other required keys (data.vocab of wordpiece)
        if (kv.first.rfind("data.", 0) == 0 && kv.first != "data.type" && kv.second.def == "required" &&
            j.at("data").contains(kv.first.substr(5)))
          bare["data"][kv.first.substr(5)] = j.at("data").at(kv.first.substr(5));
      if (cfg.model.type == "starsaber") bare["model"]["causal"] = j.at("model").value("causal", false);
      const bool rsa = cfg.model.def->attention() == "rsa";
      if (rsa) bare["model"]["attention"] = {{"type", "rsa"}, {"rem", {{"regular", 1}}}};
      std::map<std::string, json> defaults;
      flatten(parse_config(bare, ".").resolved, "", defaults);
      for (const auto& kv : docs) {
        if (!json::accept(kv.second.def) || !defaults.count(kv.first)) continue;
        // Set above, or (data.path) stored joined to the config's folder.
        if (kv.first == "model.causal" || kv.first == "model.attention.type" ||
            kv.first == "model.attention.rem.regular" || kv.first == "data.path")
          continue;
        INFO(kv.first);
        CHECK(defaults.at(kv.first) == json::parse(kv.second.def));
      }
    }
  }
  fs::current_path(cwd);
}

TEST_CASE("a required key set to null is missing (null counts as absent)", "[config]") {
  auto error = [](const json& j) {
    try {
      parse_config(j, ".");
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  const json copy = {{"model", {{"type", "lstm"}}}, {"data", {{"type", "copy"}}}};
  json j = copy;
  j["model"]["type"] = nullptr;
  CHECK_THAT(error(j), Catch::StartsWith("model.type: required key is missing; expected one of: transformer_xl"));
  j = copy;
  j["data"]["type"] = nullptr;
  CHECK_THAT(error(j), Catch::StartsWith("data.type: required key is missing; expected one of: char"));
  j = {{"model", {{"type", "lstm"}}}, {"data", {{"type", "regular"}, {"language", nullptr}}}};
  CHECK_THAT(error(j), Catch::StartsWith("data.language: required key is missing; expected one of: parity"));
}

TEST_CASE("transformer_xl: the adaptive keys are validated and reach the resolved config", "[config][adaptive]") {
  auto error = [](const json& model) {
    json j = {{"model", model}, {"data", {{"type", "char"}}}};
    j["model"]["type"] = "transformer_xl";
    try {
      parse_config(j, REMORA_SOURCE_DIR);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  CHECK(error({{"cutoffs", {20, 40}}, {"div_val", 2}, {"tie_projs", {false, true, true}}}) == "(no error)");
  CHECK_THAT(error({{"cutoffs", {40, 20}}}), Catch::StartsWith("model.cutoffs: must increase strictly"));
  CHECK_THAT(error({{"cutoffs", {0, 20}}}), Catch::StartsWith("model.cutoffs"));
  CHECK_THAT(error({{"cutoffs", {20}}, {"tie_projs", {true}}}),
             Catch::StartsWith("model.tie_projs: needs one entry per part of the vocabulary (len(cutoffs) + 1 = 2)"));
  CHECK_THAT(error({{"tie_projs", {1, 0}}}), Catch::StartsWith("model.tie_projs: expected a list of booleans"));
  CHECK_THAT(error({{"tie_projs", true}}), Catch::StartsWith("model.tie_projs: expected a list of booleans"));
  CHECK_THAT(error({{"d_model", 16}, {"cutoffs", {10, 20, 30, 40, 50}}, {"div_val", 2}}),
             Catch::StartsWith("model.div_val: d_embed 16 / div_val^5 leaves the last part"));
  json j = {{"model", {{"type", "transformer_xl"}, {"cutoffs", {20, 40}}, {"d_embed", 32}, {"tie_weight", false},
                       {"tie_projs", {false, true, false}}}},
            {"data", {{"type", "char"}}}};
  const json r = parse_config(j, REMORA_SOURCE_DIR).resolved["model"];
  CHECK(r["cutoffs"] == json::array({20, 40}));
  CHECK(r["d_embed"] == 32);
  CHECK(r["div_val"] == 1);
  CHECK(r["tie_weight"] == false);
  CHECK(r["tie_projs"] == json::array({false, true, false}));
  // A cutoff at or above the vocabulary is an error when the model is built
  // (the vocabulary comes from the data): tests/test_transformer_xl.cpp.
}

TEST_CASE("bert: model.layer_norm_eps is the library's BertConfig::layer_norm_eps, default and all", "[config]") {
  auto model = [](const json& m) {
    json j = {{"model", m}, {"data", {{"type", "char"}}}};
    j["model"]["type"] = "bert";
    return parse_config(j, REMORA_SOURCE_DIR).resolved["model"];
  };
  CHECK(model(json::object())["layer_norm_eps"] == models::BertConfig{}.layer_norm_eps);
  CHECK(model({{"layer_norm_eps", 1e-5}})["layer_norm_eps"] == 1e-5);
  CHECK_THROWS_WITH(model({{"layer_norm_eps", 0}}), Catch::StartsWith("model.layer_norm_eps"));
}
