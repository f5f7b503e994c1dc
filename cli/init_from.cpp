// SPDX-License-Identifier: BSD-3-Clause
#include "init_from.h"

#include <fnmatch.h>
#include <sys/stat.h>

#include <algorithm>
#include <map>

#include "../core/autograd.h"
#include "../core/file_io.h"
#include "../core/safetensors.h"
#include "../train/checkpoint.h"

namespace remora {
namespace driver {
namespace {

bool matches(const std::string& name, const std::vector<std::string>& globs) {
  for (const std::string& g : globs)
    if (::fnmatch(g.c_str(), name.c_str(), 0) == 0) return true;
  return false;
}

// "a, b, c and 4 more"
std::string listed(const std::vector<std::string>& names, size_t at_most = 12) {
  std::string s;
  for (size_t i = 0; i < names.size() && i < at_most; ++i) s += (i ? ", " : "") + names[i];
  if (names.size() > at_most) s += " and " + std::to_string(names.size() - at_most) + " more";
  return s;
}

}  // namespace

std::string init_source_file(const std::string& source) {
  struct stat st;
  if (::stat(source.c_str(), &st) != 0) throw InputError("model.init_from " + source + ": no such file or folder");
  if (!S_ISDIR(st.st_mode)) {
    const std::string problem = regular_file_problem(source);
    if (!problem.empty()) throw InputError("model.init_from " + source + " " + problem);
    return source;
  }
  // A HuggingFace folder: its weights file (the config is the user's to match:
  // a difference shows as a shape or a missing name).
  const std::string file = source + "/model.safetensors";
  if (!regular_file_problem(file).empty())
    throw InputError("model.init_from " + source + ": a folder without model.safetensors (a HuggingFace "
                     "model saved with safe_serialization, or a Remora checkpoint file)");
  return file;
}

InitReport init_from(Experiment& ex, const std::string& source) {
  const std::string file = init_source_file(source);
  const nn::NamedTensors src = as_input_error("model.init_from " + file, [&] {
    return train::split_checkpoint(load_safetensors(file), file).weights;
  });
  const Model& def = ex.model_def();
  const std::vector<std::string> optional = def.optional_pretrained(), head = def.task_head();
  std::map<std::string, Tensor> mine;
  std::vector<std::string> order;
  for (auto& kv : ex.model->state_dict()) {
    mine.emplace(kv.first, kv.second);
    order.push_back(kv.first);
  }
  InitReport r;
  std::map<std::string, Tensor> take;
  std::vector<std::string> unexpected, shapes, misshaped;
  for (const auto& kv : src) {
    const std::string name = def.pretrained_name(kv.first);
    if (name.empty()) continue;
    if (matches(name, head)) continue;
    auto it = mine.find(name);
    if (it == mine.end()) {
      unexpected.push_back(kv.first == name ? name : kv.first + " (" + name + ")");
    } else if (it->second.shape() != kv.second.shape()) {
      shapes.push_back(name + " " + shape_str(kv.second.shape()) + " where the model has " +
                       shape_str(it->second.shape()));
      misshaped.push_back(name);
    } else if (!take.emplace(name, kv.second).second) {
      unexpected.push_back(kv.first + " (" + name + ", a second time)");
    }
  }
  std::vector<std::string> missing;
  for (const std::string& name : order) {
    if (take.count(name) || std::find(misshaped.begin(), misshaped.end(), name) != misshaped.end()) continue;
    if (matches(name, head)) r.head.push_back(name);
    else if (matches(name, optional)) r.fresh.push_back(name);
    else missing.push_back(name);
  }
  if (!missing.empty() || !unexpected.empty() || !shapes.empty()) {
    std::string why;
    if (!missing.empty()) why += "; missing from it: " + listed(missing);
    if (!unexpected.empty()) why += "; not in this model: " + listed(unexpected);
    if (!shapes.empty()) why += "; shapes differ: " + listed(shapes, 6);
    throw InputError("model.init_from " + file + " does not fit the model of this config (" +
                     ex.cfg.model.type + ")" + why + "; match the model keys to the pretrained model");
  }
  NoGradGuard ng;
  for (const std::string& name : order) {
    auto it = take.find(name);
    if (it == take.end()) continue;
    Tensor& dst = mine.at(name);
    dst.copy_(it->second.to(dst.dtype()).to(dst.device()));
    r.loaded.push_back(name);
  }
  return r;
}

std::vector<std::string> freeze_parameters(nn::Module& m, const std::vector<std::string>& globs) {
  std::vector<std::string> frozen;
  std::vector<bool> used(globs.size(), false);
  for (auto& kv : m.named_parameters()) {
    bool hit = false;
    for (size_t i = 0; i < globs.size(); ++i)
      if (::fnmatch(globs[i].c_str(), kv.first.c_str(), 0) == 0) hit = used[i] = true;
    if (!hit) continue;
    Tensor p = kv.second;
    p.requires_grad_(false);
    frozen.push_back(kv.first);
  }
  for (size_t i = 0; i < globs.size(); ++i)
    if (!used[i])
      throw InputError("train.freeze: '" + globs[i] + "' matches no parameter of the model (`remora info CONFIG` "
                       "lists their names)");
  return frozen;
}

}  // namespace driver
}  // namespace remora
