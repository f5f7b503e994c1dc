// SPDX-License-Identifier: BSD-3-Clause
#include "common.h"

#include "../../core/file_io.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <sstream>

namespace remora {
namespace driver {

int64_t to_int(const std::string& opt, const std::string& v, int64_t lo, int64_t hi) {
  try {
    size_t used = 0;
    const long long x = std::stoll(v, &used);
    if (used == v.size() && x >= lo && x <= hi) return int64_t(x);
  } catch (const std::exception&) {
  }
  throw UsageError("--" + opt + ": expected an integer in [" + std::to_string(lo) + ", " +
                   std::to_string(hi) + "], got '" + v + "'");
}

double to_double(const std::string& opt, const std::string& v, double lo, double hi) {
  try {
    size_t used = 0;
    const double x = std::stod(v, &used);
    if (used == v.size() && x >= lo && x <= hi) return x;
  } catch (const std::exception&) {
  }
  std::ostringstream os;
  os << "--" << opt << ": expected a number in [" << lo << ", " << hi << "], got '" << v << "'";
  throw UsageError(os.str());
}

std::string need(const Args& a, const std::string& opt) {
  auto it = a.opts.find(opt);
  if (it == a.opts.end()) throw UsageError("missing --" + opt);
  return it->second;
}

Config config_of(const Args& a, const std::string& cmd, const ParseOptions& po) {
  if (a.positional.size() != 1)
    throw UsageError(cmd + ": expected exactly one CONFIG argument, got " + std::to_string(a.positional.size()));
  return load_config(a.positional[0], a.sets, po);
}

void apply_threads(const Config& c) {
  if (c.train.threads > 0) set_num_threads(int(c.train.threads));
  if (!c.device.is_cpu()) Tensor::zeros({1}, DType::f32, c.device);  // a clear error without CUDA
}

Config config_of_checkpoint(const Args& a, const std::string& cmd, const ParseOptions& po) {
  if (!a.positional.empty()) return config_of(a, cmd, po);
  const std::string ck = need(a, "checkpoint");
  const Checkpoint info = read_checkpoint_info(ck);
  if (!info.config_json.empty()) {
    // The resolved config that `remora train` or `remora export` stored.
    json j;
    try {
      j = json::parse(info.config_json);
    } catch (const json::exception& e) {
      throw InputError(ck + ": its \"config\" metadata is not valid JSON (" + std::string(e.what()) +
                       "); pass the config as CONFIG");
    }
    for (const std::string& o : a.sets) apply_override(j, o);
    return parse_config(j, ".", po);
  }
  // Bare weights in a run directory: the config.json that `remora train` wrote beside them.
  const size_t slash = ck.find_last_of('/');
  const std::string beside = (slash == std::string::npos ? std::string(".") : ck.substr(0, slash)) + "/config.json";
  if (file_exists(beside)) return load_config(beside, a.sets, po);
  throw UsageError(cmd + ": no CONFIG given, and " + ck +
                   " has no \"config\" metadata and no config.json beside it; pass the config as CONFIG");
}

// Builds the experiment for a checkpoint and loads its weights; adjust may
// change the config first (settings that do not touch the weights).
Experiment load_for_inference(const Args& a, const std::string& cmd, Config* cfg_out,
                              const std::function<void(Config&)>& adjust, bool generation, bool reads_data) {
  // A command that reads no split needs no corpus when the checkpoint holds
  // the vocabulary (a run moved elsewhere, or its relative data.path). A
  // checkpoint that cannot be read is reported below, after the config.
  ParseOptions po;
  auto given = a.opts.find("checkpoint");
  if (!reads_data && given != a.opts.end()) {
    try {
      po.corpus_optional = !read_checkpoint_info(given->second).vocab_json.empty();
    } catch (const std::exception&) {
    }
  }
  Config cfg = config_of_checkpoint(a, cmd, po);
  if (adjust) adjust(cfg);
  apply_threads(cfg);
  const std::string ck = need(a, "checkpoint");
  Checkpoint info = read_checkpoint_info(ck);
  ExperimentOptions opts;
  opts.vocab_json = info.vocab_json;
  opts.generation = generation;
  opts.memory_use = MemoryUse::inference;
  Experiment ex(cfg, opts);
  load_weights(ck, ex);
  ex.model->eval();
  if (cfg_out) *cfg_out = cfg;
  return ex;
}

// An error message on one line: a multi-line message (a load_state_dict
// report lists one problem per line) gets its lines joined with "; ".
std::vector<NamedPath> command_inputs(const Args& a) {
  std::vector<NamedPath> inputs;
  for (const std::string& p : a.positional) inputs.push_back({"the config", p});
  if (a.opts.count("checkpoint")) inputs.push_back({"--checkpoint", a.opts.at("checkpoint")});
  if (a.opts.count("input")) inputs.push_back({"--input", a.opts.at("input")});
  if (!a.positional.empty()) {  // a HuggingFace directory's weights beside its config.json
    const std::string& c = a.positional[0];
    const size_t slash = c.find_last_of('/');
    inputs.push_back({"the model's weights", (slash == std::string::npos ? "." : c.substr(0, slash)) + "/model.safetensors"});
  }
  return inputs;
}

const NamedPath* same_file_as(const std::string& path, const std::vector<NamedPath>& inputs) {
  struct stat os;
  if (::stat(path.c_str(), &os) != 0) return nullptr;
  for (const NamedPath& in : inputs) {
    struct stat is;
    if (::stat(in.path.c_str(), &is) == 0 && is.st_dev == os.st_dev && is.st_ino == os.st_ino) return &in;
  }
  return nullptr;
}

void check_output_file(const std::string& flag, const std::string& out, const std::vector<NamedPath>& inputs,
                       bool force, const std::string& force_flag) {
  struct stat os;
  if (::stat(out.c_str(), &os) != 0) {
    if (errno != ENOENT) throw InputError(flag + " " + out + ": " + std::strerror(errno));
    return;  // a new file
  }
  if (S_ISDIR(os.st_mode)) throw InputError(flag + " " + out + " is a directory; name a file to write");
  if (const NamedPath* in = same_file_as(out, inputs))
    throw InputError(flag + " " + out + " is " + in->what + " (" + in->path +
                     "); refusing to overwrite an input of this command");
  if (!S_ISREG(os.st_mode))
    throw InputError(flag + " " + out + " exists and is " + file_kind(out) + ", not a regular file");
  if (!force) throw InputError(flag + " " + out + " already exists; pass " + force_flag + " to replace it");
}

std::string one_line(const std::string& msg) {
  std::string out;
  for (size_t i = 0; i < msg.size(); ++i) {
    if (msg[i] == '\n' || msg[i] == '\r') {
      while (i + 1 < msg.size() && (msg[i + 1] == ' ' || msg[i + 1] == '\n' || msg[i + 1] == '\r')) ++i;
      if (i + 1 < msg.size()) out += out.empty() || out.back() == ':' ? " " : "; ";
      continue;
    }
    out += msg[i];
  }
  return out;
}

}  // namespace driver
}  // namespace remora
