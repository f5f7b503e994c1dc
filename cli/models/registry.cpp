// SPDX-License-Identifier: BSD-3-Clause
// The model registry (model.h): the types listed in models.def.
#include <algorithm>
#include <cstdio>

#include "../model.h"

namespace remora {
namespace driver {

#define REMORA_MODEL(factory, name) std::unique_ptr<Model> factory(const std::string& type);
#include "models.def"
#undef REMORA_MODEL

const std::vector<ModelEntry>& model_registry() {
  static const std::vector<ModelEntry> all = {
#define REMORA_MODEL(factory, name) {name, factory},
#include "models.def"
#undef REMORA_MODEL
  };
  return all;
}

std::vector<std::string> model_type_names() {
  std::vector<std::string> names;
  for (const ModelEntry& e : model_registry()) names.push_back(e.type);
  return names;
}

std::unique_ptr<Model> make_model(const std::string& type) {
  for (const ModelEntry& e : model_registry())
    if (e.type == type) return e.make(type);
  return nullptr;
}

std::vector<std::string> model_types_where(const std::function<bool(const Model&)>& pred) {
  std::vector<std::string> out;
  for (const ModelEntry& e : model_registry()) {
    std::unique_ptr<Model> m = e.make(e.type);
    Node defaults(json::object(), "model");
    m->read(defaults);  // the type's defaults
    if (pred(*m)) out.push_back(e.type);
  }
  return out;
}

std::string join_or(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i == 0 ? "" : i + 1 == v.size() ? " or " : ", ") + v[i];
  return s;
}

models::ActivationShape activation_shape(const Config& cfg, const ModelContext& ctx, MemoryUse use) {
  const bool train = use == MemoryUse::train;
  return {train ? cfg.data.batch_size : cfg.data.eval_batch_size, ctx.seq_len, train};
}

json tiny_text_config(const json& model) {
  return tiny_config_with(model, {{"type", "char"}, {"path", "tests/data/tiny_corpus.txt"}, {"seq_len", 8}});
}

json tiny_config_with(const json& model, const json& data) {
  json d = {{"batch_size", 2}};
  d.update(data);
  return {{"seed", 3},
          {"device", "cpu"},
          {"model", model},
          {"data", d},
          {"train",
           {{"steps", 4}, {"eval_every", 2}, {"eval_batches", 2}, {"log_every", 1}, {"threads", 1}, {"clip", 1.0},
            {"optimizer", {{"type", "adamw"}, {"lr", 0.01}}},
            {"schedule", {{"type", "cosine"}, {"warmup", 1}, {"min_lr_ratio", 0.1}}}}}};
}

void Model::print_info(const Config& cfg, const ModelContext& ctx, const BuiltModel& m) const {
  std::printf("model: %s\n", cfg.resolved["model"].dump().c_str());
  std::printf("\nparameters:\n");
  for (const auto& p : m.module->named_parameters())
    std::printf("  %-56s %10lld\n", p.first.c_str(), (long long)p.second.numel());
  std::printf("  %-56s %10lld\n", "total", (long long)m.module->num_parameters());
}

}  // namespace driver
}  // namespace remora
