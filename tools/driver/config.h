// Driver configs: JSON files with sections model, data, train, device, seed.
//
// Everything is validated before any work starts. Unknown keys, wrong types,
// out-of-range values and missing files are ConfigErrors that name the JSON
// path ("model.attention.rem.dilations: expected 2 entries, got 3").
// A null value counts as absent (so `--set train.clip=null` restores the
// default). model.attention's rsa keys (rem, gate, carry) are validated for a
// softmax attention too, and ignored, so one config can switch types with --set.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../../core/tensor.h"
#include "../../ops/rem.h"

namespace remora {
namespace driver {

using json = nlohmann::json;

// A bad config or input file (exit code 2).
class ConfigError : public Error {
 public:
  explicit ConfigError(const std::string& m) : Error(m) {}
};

// Reads one JSON object, remembering which keys were read so that finish()
// can reject the rest. Every accessor checks type and range, naming the path.
class Node {
 public:
  Node(const json& j, std::string path);
  const std::string& path() const { return path_; }
  bool has(const std::string& key) const;
  int64_t integer(const std::string& key, int64_t def, int64_t lo, int64_t hi);
  int64_t integer(const std::string& key, int64_t lo, int64_t hi);  // required
  double number(const std::string& key, double def, double lo, double hi);
  bool boolean(const std::string& key, bool def);
  std::string string(const std::string& key, const std::string& def,
                     const std::vector<std::string>& allowed = {});
  std::string string(const std::string& key, const std::vector<std::string>& allowed);  // required
  std::vector<int64_t> integers(const std::string& key, const std::vector<int64_t>& def,
                                int64_t lo, int64_t hi);
  std::vector<double> numbers(const std::string& key, const std::vector<double>& def);
  Node child(const std::string& key);  // an empty object when absent
  json raw(const std::string& key);    // the value as is (null when absent), marked as read
  // Errors on keys that were never read.
  void finish() const;
  [[noreturn]] void fail(const std::string& key, const std::string& msg) const;

 private:
  const json* get(const std::string& key);
  json j_;
  std::string path_;
  std::vector<std::string> used_;
};

// The REM heads of an RSA layer and how their parameters start (SPEC §1).
struct RemConfig {
  RemSpec spec;
  std::vector<double> eta_range{-2, -1, 1, 2};  // U([-2,-1] U [1,2])
  std::vector<double> nu_range{1, 2};
  double theta = 0.7853981633974483;  // pi / 4
  std::vector<double> mu_range{-3, 3};
  std::vector<double> eta, nu, thetas, mu;  // explicit values override the ranges
};

struct AttentionConfig {
  std::string type = "softmax";  // softmax | rsa
  RemConfig rem;
  std::string gate = "head";  // head | layer
  bool carry = false;         // carry the REM scan state across segments (XL)
};

// The transformer types' attention keys (transformer_xl, bert): reads
// model.attention and validates it against n_head; `with_carry` = the type
// has Transformer-XL's carry mode. The RSA keys are validated whatever the type.
AttentionConfig read_attention(Node& m, int64_t n_head, bool with_carry);
// The heads must split d_model evenly (an error at model.n_head otherwise);
// `has_d_head`: the type can instead set the head width with model.d_head.
void check_heads_split(Node& m, int64_t d_model, int64_t n_head, bool has_d_head);
json attention_json(const AttentionConfig& a, bool with_carry);

class Model;  // model.h: a registered model type with its own keys

// The model: its type and that type's registry entry, which read and keeps
// its own keys (tools/driver/models/*.cpp):
//   causal sequence models: transformer_xl, srupp, rnn, lstm, relrnn, rellstm,
//     starsaber with causal = true
//   encoders (masked LM, sequence classification): bert, starsaber
// Keys of another type are unknown keys (an error), so a typo cannot pass.
struct ModelConfig {
  std::string type;
  std::shared_ptr<const Model> def;
  bool is_encoder() const;
};

// The data keys of every task (each task reads its own: tools/driver/tasks/).
struct DataConfig {
  std::string type;      // char | bytes | regular | timeseries | copy | denoise | classify
  std::string path;      // char, bytes
  std::string language;  // regular, classify: parity, tomita1..7, aa_star, abab_star, dyck2
  // copy, denoise (data::MemoryTask): the delay T, alphabet and symbols to recall.
  int64_t delay = 100, symbols = 8, copy_len = 10;
  // copy, denoise: the output classes: "vocab" (symbols + 2, the input vocabulary)
  // or "targets" (symbols + 1: blank and symbols, the official copytask.py head).
  std::string answer_classes = "vocab";
  int64_t seq_len = 128, batch_size = 16, eval_batch_size = 16;
  int64_t n_train = 10000, n_test = 2000;  // regular, classify: strings (test: per length bin);
                                           // copy, denoise: n_test sequences per split
  // timeseries: a synthetic multi-periodic series, windows of `context` inputs
  // and a forecast `horizon`.
  int64_t length = 4000, context = 96, horizon = 24;
  std::vector<double> periods{24, 168, 7.5}, amplitudes{1.0, 0.5, 0.25};
  double noise_std = 0.1, trend = 0.0;
};

struct OptimizerConfig {
  std::string type = "adamw";  // sgd | adam | adamw | rmsprop
  double lr = 1e-3, weight_decay = 0.0, momentum = 0.0, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double alpha = 0.99;  // rmsprop: the square average's decay (torch's alpha)
  bool nesterov = false;
};

struct ScheduleConfig {
  std::string type = "constant";  // constant | cosine | linear
  int64_t warmup = 0;
  double min_lr_ratio = 0.0;
};

// train.distributed: data-parallel runs under mpirun (docs/distributed.md).
// Ignored in a plain run (a world of one).
struct DistributedConfig {
  double bucket_mb = 1.0;        // gradient bucket size (MiB)
  std::string backend = "auto";  // CUDA tensors: mpi | nccl | auto
  int64_t check_every = 100;     // parameter-hash check every N steps (0 = at start only)
  double timeout_s = 300;        // a collective not done after this is an error (0 = wait forever)
  double eval_timeout_s = 3600;  // the other ranks' wait while rank 0 evaluates and checkpoints (0 = forever)
};

struct TrainConfig {
  int64_t steps = 1000, eval_every = 200, eval_batches = 20, log_every = 10;
  double clip = 0.0;  // gradient-norm clipping, 0 = off
  OptimizerConfig optimizer;
  ScheduleConfig schedule;
  int64_t threads = 0;  // 0 = all cores
  // "f32" or "bf16": the training steps' matmuls (forward and backward) under
  // bf16 autocast (core/autocast.h, docs/precision.md); evaluation stays f32.
  std::string precision = "f32";
  DistributedConfig distributed;
  // train.max_memory: the bytes a command may plan to use (a number, or a
  // string such as "64GiB", "512MiB", "2TB"); 0 = what the system allows
  // (MemAvailable, the cgroup limit, ulimits: memory_estimate.h). Every command
  // that builds the model refuses a config whose estimate exceeds it.
  double max_memory = 0;
};

struct Config {
  ModelConfig model;
  DataConfig data;
  std::string task;  // the registered task that runs this config (tasks/tasks.def)
  TrainConfig train;
  Device device;
  uint64_t seed = 1;
  std::string base_dir;  // relative data paths resolve against this
  json resolved;         // the whole config after --set overrides and defaults
};

// Whether p names a regular file.
bool file_exists(const std::string& p);

// Applies "a.b.c=value" (value parsed as JSON, else taken as a string).
void apply_override(json& j, const std::string& assignment);
// Parses and validates; the error names the JSON path.
Config parse_config(const json& j, const std::string& base_dir);
// Reads a file, applies overrides, parses.
Config load_config(const std::string& path, const std::vector<std::string>& overrides = {});

}  // namespace driver
}  // namespace remora
