// Checkpoint files: save, load and read the metadata (checkpoint.h). All the
// driver's checkpoint I/O lives here.
#include "checkpoint.h"
#include "input_checks.h"

#include <cstdlib>
#include <map>
#include <sstream>

#include "../../core/safetensors.h"

namespace remora {
namespace driver {

void save_checkpoint(const std::string& path, const Experiment& ex, const optim::Optimizer* opt,
                     const Experiment::State& state, const Checkpoint& info) {
  std::vector<std::pair<std::string, Tensor>> t = ex.model->state_dict();
  if (opt)
    for (auto& kv : opt->state()) t.emplace_back("optimizer." + kv.first, kv.second);
  for (size_t l = 0; l < state.mems.size(); ++l) t.emplace_back("state.mems." + std::to_string(l), state.mems[l]);
  for (size_t l = 0; l < state.rem_states.size(); ++l)
    t.emplace_back("state.rem." + std::to_string(l), state.rem_states[l]);
  for (size_t l = 0; l < state.cells.size(); ++l)
    t.emplace_back("state.cells." + std::to_string(l), state.cells[l]);
  std::ostringstream best;
  best.precision(17);
  best << info.best_valid;
  std::map<std::string, std::string> meta{{"format", "remora-checkpoint"},
                                          {"version", "1"},
                                          {"step", std::to_string(info.step)},
                                          {"rng_seed", std::to_string(info.rng_seed)},
                                          {"rng_offset", std::to_string(info.rng_offset)},
                                          {"data_position", std::to_string(info.data_position)},
                                          {"best_valid", best.str()},
                                          {"vocab", info.vocab_json},
                                          {"config", info.config_json}};
  if (info.world_size > 1) {  // data-parallel: who wrote it, every rank's position
    meta["world_size"] = std::to_string(info.world_size);
    std::string ps;
    for (int64_t p : info.data_positions) ps += (ps.empty() ? "" : ",") + std::to_string(p);
    meta["data_positions"] = ps;
  }
  save_safetensors(path, t, meta);
}

namespace {
// A tensor on the model's device (a no-op on cpu).
Tensor dev(const nn::Module& m, const Tensor& t) { return t.to(m.parameters().front().device()); }

int64_t meta_int(const Safetensors& st, const std::string& path, const std::string& key) {
  auto it = st.metadata.find(key);
  if (it == st.metadata.end()) throw InputError(path + ": not a Remora checkpoint (no \"" + key + "\" metadata)");
  try {
    size_t used = 0;
    const long long v = std::stoll(it->second, &used);
    if (used != it->second.size()) throw std::invalid_argument("trailing");
    return int64_t(v);
  } catch (const std::exception&) {
    throw InputError(path + ": metadata \"" + key + "\" is not an integer: " + it->second);
  }
}

Checkpoint info_of(const Safetensors& st, const std::string& path) {
  auto f = st.metadata.find("format");
  if (f == st.metadata.end() || f->second == "pt") {
    Checkpoint bare;
    bare.weights_only = true;
    return bare;
  }
  if (f->second != "remora-checkpoint")
    throw InputError(path + ": not a Remora checkpoint (metadata format is \"" + f->second +
                     "\"; expected \"remora-checkpoint\", or no format for a bare weights file)");
  Checkpoint c;
  c.step = meta_int(st, path, "step");
  c.rng_seed = uint64_t(meta_int(st, path, "rng_seed"));
  c.rng_offset = uint64_t(meta_int(st, path, "rng_offset"));
  c.data_position = meta_int(st, path, "data_position");
  auto b = st.metadata.find("best_valid");
  c.best_valid = b == st.metadata.end() ? 0 : std::atof(b->second.c_str());
  auto v = st.metadata.find("vocab");
  c.vocab_json = v == st.metadata.end() ? "" : v->second;
  auto cf = st.metadata.find("config");
  c.config_json = cf == st.metadata.end() ? "" : cf->second;
  c.world_size = st.metadata.count("world_size") ? meta_int(st, path, "world_size") : 1;
  if (c.world_size < 1) throw InputError(path + ": metadata \"world_size\" must be >= 1");
  auto dp = st.metadata.find("data_positions");
  if (dp != st.metadata.end()) {
    std::stringstream ss(dp->second);
    for (std::string item; std::getline(ss, item, ',');) {
      char* end = nullptr;
      const long long v = std::strtoll(item.c_str(), &end, 10);
      if (item.empty() || *end != '\0')
        throw InputError(path + ": metadata \"data_positions\" is not a list of integers: " + dp->second);
      c.data_positions.push_back(int64_t(v));
    }
  } else {
    c.data_positions.assign(size_t(c.world_size), c.data_position);
  }
  return c;
}

Safetensors read_file(const std::string& path) {
  try {
    return load_safetensors(path);
  } catch (const Error& e) {
    throw InputError(std::string("checkpoint: ") + e.what());
  }
}
}  // namespace

Checkpoint read_checkpoint_info(const std::string& path) { return info_of(read_file(path), path); }

Checkpoint load_checkpoint(const std::string& path, Experiment& ex, optim::Optimizer* opt,
                           Experiment::State* state) {
  Safetensors st = read_file(path);
  Checkpoint c = info_of(st, path);
  check_finite(st.tensors, path);  // NaN / Inf weights, optimizer or carried state: exit 2 naming the tensor
  if (c.weights_only && (opt || state))
    throw InputError(path + ": a bare weights file (no \"format\": \"remora-checkpoint\" metadata) has no "
                     "optimizer state, step or RNG state to resume from");
  nn::NamedTensors weights, optim_state;
  std::map<std::string, Tensor> carried;
  for (auto& kv : st.tensors) {
    if (kv.first.rfind("optimizer.", 0) == 0) optim_state.emplace_back(kv.first.substr(10), kv.second);
    else if (kv.first.rfind("state.", 0) == 0) carried[kv.first.substr(6)] = kv.second;
    else weights.push_back(kv);
  }
  as_input_error(path + " does not fit the config", [&] {
    ex.model->load_state_dict(weights);
    return 0;
  });
  if (opt) {
    if (optim_state.empty()) throw InputError(path + ": has no optimizer state to resume from");
    as_input_error(path + ": optimizer state", [&] {
      opt->load_state(optim_state);
      return 0;
    });
  }
  if (state) {
    std::vector<std::pair<std::string, Tensor>> named;  // the carried tensors, in layer order
    for (const char* kind : {"mems.", "rem.", "cells."})
      for (int64_t l = 0; carried.count(kind + std::to_string(l)); ++l)
        named.emplace_back(std::string("state.") + kind + std::to_string(l),
                           dev(*ex.model, carried.at(kind + std::to_string(l)).to(ex.dtype())));
    check_carried_state(ex, named, path);  // wrong shapes: exit 2 naming the tensors, not a failed step
    *state = Experiment::State{};
    for (int64_t l = 0;; ++l) {
      auto it = carried.find("mems." + std::to_string(l));
      if (it == carried.end()) break;
      state->mems.push_back(dev(*ex.model, it->second.to(ex.dtype())));
    }
    for (int64_t l = 0;; ++l) {
      auto it = carried.find("rem." + std::to_string(l));
      if (it == carried.end()) break;
      state->rem_states.push_back(dev(*ex.model, it->second.to(ex.dtype())));
    }
    for (int64_t l = 0;; ++l) {
      auto it = carried.find("cells." + std::to_string(l));
      if (it == carried.end()) break;
      state->cells.push_back(dev(*ex.model, it->second.to(ex.dtype())));
    }
  }
  return c;
}

}  // namespace driver
}  // namespace remora
