// SPDX-License-Identifier: BSD-3-Clause
// The tiny configs of every registered model type and task (cli/
// model.h: Model::tiny_configs, task.h: TaskEntry::tiny_configs), for the
// tests that walk the registries: [models_parity], [driver], [registries].
// Header only; not a test file.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/config.h"
#include "cli/model.h"
#include "cli/task.h"

namespace remora_test {

struct Variant {
  std::string name;    // "transformer_xl/rsa", "rnn", "memory/copy"
  std::string entry;   // the registered type or task
  nlohmann::json config;  // data paths relative to the source tree resolved
};

// A relative data.path of a tiny config names a file of the source tree.
inline nlohmann::json with_source_paths(nlohmann::json j) {
  if (j.contains("data") && j["data"].contains("path")) {
    const std::string p = j["data"]["path"].get<std::string>();
    if (!p.empty() && p[0] != '/') j["data"]["path"] = std::string(REMORA_SOURCE_DIR) + "/" + p;
  }
  return j;
}

inline std::string variant_name(const std::string& entry, const std::string& name) {
  return name.empty() ? entry : entry + "/" + name;
}

// Every tiny config of every registered model type, in registration order.
inline std::vector<Variant> model_variants() {
  std::vector<Variant> out;
  for (const remora::driver::ModelEntry& e : remora::driver::model_registry())
    for (const remora::driver::TinyConfig& t : e.make(e.type)->tiny_configs())
      out.push_back({variant_name(e.type, t.name), e.type, with_source_paths(t.config)});
  return out;
}

// Every tiny config of every registered task.
inline std::vector<Variant> task_variants() {
  std::vector<Variant> out;
  for (const remora::driver::TaskEntry& e : remora::driver::task_registry())
    if (e.tiny_configs)
      for (const remora::driver::TinyConfig& t : e.tiny_configs())
        out.push_back({variant_name(e.name, t.name), e.name, with_source_paths(t.config)});
  return out;
}

inline remora::driver::Config parse_variant(const nlohmann::json& j) {
  return remora::driver::parse_config(j, std::string(REMORA_SOURCE_DIR));
}

// The config without dropout (every model.*dropout key and model.dropatt):
// deterministic training steps for parity and gradient checks.
inline nlohmann::json without_dropout(nlohmann::json j) {
  // Every model key named dropatt or ending in "dropout" (dropout,
  // emb_dropout, ...): a model type names its dropout keys so.
  const nlohmann::json resolved = parse_variant(j).resolved;
  for (const auto& kv : resolved["model"].items()) {
    const std::string& k = kv.key();
    const bool drop = k == "dropatt" || (k.size() >= 7 && k.compare(k.size() - 7, 7, "dropout") == 0);
    if (drop && kv.value().is_number()) j["model"][k] = 0.0;
  }
  return j;
}

}  // namespace remora_test
