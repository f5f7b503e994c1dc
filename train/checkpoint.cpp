// SPDX-License-Identifier: BSD-3-Clause
#include "checkpoint.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "../core/autograd.h"
#include "../core/version.h"

namespace remora {
namespace train {

namespace {
const char* const kCarried[] = {"mems.", "rem.", "cells."};

template <class State>  // models::SequenceState, const or not
auto& carried_list(State& s, int kind) {
  return kind == 0 ? s.mems : kind == 1 ? s.rem_states : s.cells;
}

int64_t meta_int(const std::map<std::string, std::string>& meta, const std::string& path, const std::string& key,
                 int64_t lo, int64_t hi) {
  auto it = meta.find(key);
  if (it == meta.end()) throw Error(path + ": not a Remora checkpoint (no \"" + key + "\" metadata)");
  const std::string& v = it->second;
  errno = 0;
  char* end = nullptr;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno == ERANGE)
    throw Error(path + ": metadata \"" + key + "\" is not an integer: " + v);
  if (x < lo || x > hi)
    throw Error(path + ": metadata \"" + key + "\" is " + v + ", outside [" + std::to_string(lo) + ", " +
                std::to_string(hi) + "]");
  return int64_t(x);
}

uint64_t meta_uint(const std::map<std::string, std::string>& meta, const std::string& path, const std::string& key) {
  auto it = meta.find(key);
  if (it == meta.end()) throw Error(path + ": not a Remora checkpoint (no \"" + key + "\" metadata)");
  const std::string& v = it->second;
  errno = 0;
  char* end = nullptr;
  const unsigned long long x = std::strtoull(v.c_str(), &end, 10);
  if (v.empty() || v[0] == '-' || *end != '\0' || errno == ERANGE)
    throw Error(path + ": metadata \"" + key + "\" is not an unsigned integer: " + v);
  return uint64_t(x);
}

// Positions and steps are bounded far below INT64_MAX: a value near it is a
// corrupt or hand-edited file, not a run (2^50 tokens is years of training).
constexpr int64_t kMaxCount = int64_t(1) << 50;
}  // namespace

std::string CheckpointInfo::get(const std::string& key) const {
  auto it = extra.find(key);
  return it == extra.end() ? "" : it->second;
}

void save_checkpoint(const std::string& path, const nn::Module& model, const optim::Optimizer* opt,
                     const models::SequenceState& state, const CheckpointInfo& info) {
  std::vector<std::pair<std::string, Tensor>> t = model.state_dict();
  if (opt)
    for (auto& kv : opt->state()) t.emplace_back("optimizer." + kv.first, kv.second);
  for (int k = 0; k < 3; ++k) {
    const std::vector<Tensor>& list = carried_list(state, k);
    for (size_t l = 0; l < list.size(); ++l) t.emplace_back(std::string("state.") + kCarried[k] + std::to_string(l), list[l]);
  }
  std::ostringstream best;
  best.precision(17);
  best << info.best_valid;
  std::map<std::string, std::string> meta = info.extra;
  meta["format"] = "remora-checkpoint";
  meta["version"] = "1";
  meta["remora_version"] = version_line();  // what wrote it (core/version.h)
  meta["step"] = std::to_string(info.step);
  meta["rng_seed"] = std::to_string(info.rng_seed);
  meta["rng_offset"] = std::to_string(info.rng_offset);
  meta["data_position"] = std::to_string(info.data_position);
  meta["best_valid"] = best.str();
  if (info.world_size > 1) {  // data-parallel: who wrote it, every rank's position
    meta["world_size"] = std::to_string(info.world_size);
    std::string ps;
    for (int64_t p : info.data_positions) ps += (ps.empty() ? "" : ",") + std::to_string(p);
    meta["data_positions"] = ps;
  }
  save_safetensors(path, t, meta);
}

CheckpointInfo checkpoint_info(const Safetensors& st, const std::string& path) {
  const auto& meta = st.metadata;
  auto f = meta.find("format");
  CheckpointInfo c;
  if (f == meta.end() || f->second == "pt") {
    // Bare weights; what a writer stored beside them (`remora export`: the
    // config and the vocabulary) is kept in extra.
    c.weights_only = true;
    for (const auto& kv : meta)
      if (kv.first != "format") c.extra[kv.first] = kv.second;
    return c;
  }
  if (f->second != "remora-checkpoint")
    throw Error(path + ": not a Remora checkpoint (metadata format is \"" + f->second +
                "\"; expected \"remora-checkpoint\", or no format for a bare weights file)");
  c.step = meta_int(meta, path, "step", 0, kMaxCount);
  c.rng_seed = meta_uint(meta, path, "rng_seed");
  c.rng_offset = meta_uint(meta, path, "rng_offset");
  c.data_position = meta_int(meta, path, "data_position", 0, kMaxCount);
  auto b = meta.find("best_valid");
  if (b != meta.end()) {
    // A number, or inf before the first evaluation; anything else (a word, NaN,
    // trailing text) is not what a Trainer writes.
    const std::string& v = b->second;
    char* end = nullptr;
    errno = 0;
    const double x = std::strtod(v.c_str(), &end);
    if (v.empty() || *end != '\0' || std::isnan(x) || x == -INFINITY)
      throw Error(path + ": metadata \"best_valid\" is not a score (a number, or inf before any evaluation): " + v);
    c.best_valid = x;
  }
  c.world_size = meta.count("world_size") ? meta_int(meta, path, "world_size", 1, 1 << 20) : 1;
  auto dp = meta.find("data_positions");
  if (dp != meta.end()) {
    std::stringstream ss(dp->second);
    for (std::string item; std::getline(ss, item, ',');) {
      std::map<std::string, std::string> one{{"data_positions", item}};
      c.data_positions.push_back(meta_int(one, path, "data_positions", 0, kMaxCount));
    }
    // One position per rank that wrote it.
    if (int64_t(c.data_positions.size()) != c.world_size)
      throw Error(path + ": metadata \"data_positions\" lists " + std::to_string(c.data_positions.size()) +
                  " positions for a world_size of " + std::to_string(c.world_size));
  } else {
    c.data_positions.assign(size_t(c.world_size), c.data_position);
  }
  static const char* const known[] = {"format", "version", "remora_version", "step", "rng_seed", "rng_offset", "data_position",
                                      "best_valid", "world_size", "data_positions"};
  for (const auto& kv : meta) {
    bool k = false;
    for (const char* n : known) k = k || kv.first == n;
    if (!k) c.extra[kv.first] = kv.second;
  }
  return c;
}

void check_finite(const nn::NamedTensors& tensors, const std::string& path) {
  for (const auto& kv : tensors) {
    const Tensor& t = kv.second;
    if (!t.defined() || !is_floating(t.dtype()) || t.numel() == 0) continue;
    NoGradGuard ng;
    const std::vector<double> v = t.to(Device::cpu()).to(DType::f64).contiguous().to_vector();
    int64_t nan = 0, inf = 0;
    for (double x : v) {
      if (std::isnan(x)) ++nan;
      else if (std::isinf(x)) ++inf;
    }
    if (nan + inf > 0)
      throw Error(path + ": tensor '" + kv.first + "' " + shape_str(t.shape()) + " holds " +
                  (nan ? std::to_string(nan) + " NaN" : "") + (nan && inf ? " and " : "") +
                  (inf ? std::to_string(inf) + " infinite" : "") + " value(s) of " + std::to_string(t.numel()) +
                  "; refusing a checkpoint with non-finite numbers");
  }
}

CheckpointInfo read_checkpoint_info(const std::string& path) {
  return checkpoint_info(load_safetensors(path), path);
}

CheckpointParts split_checkpoint(Safetensors st, const std::string& path) {
  CheckpointParts p;
  p.info = checkpoint_info(st, path);
  check_finite(st.tensors, path);
  std::map<std::string, Tensor> carried;
  for (auto& kv : st.tensors) {
    if (kv.first.rfind("optimizer.", 0) == 0) p.optimizer.emplace_back(kv.first.substr(10), kv.second);
    else if (kv.first.rfind("state.", 0) == 0) carried[kv.first.substr(6)] = kv.second;
    else p.weights.push_back(kv);
  }
  for (int k = 0; k < 3; ++k)
    for (int64_t l = 0;; ++l) {
      auto it = carried.find(kCarried[k] + std::to_string(l));
      if (it == carried.end()) break;
      carried_list(p.state, k).push_back(it->second);
      p.state_named.emplace_back(std::string("state.") + it->first, it->second);
    }
  return p;
}

}  // namespace train
}  // namespace remora
