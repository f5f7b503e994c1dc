// SPDX-License-Identifier: BSD-3-Clause
#include "config.h"
#include "input_checks.h"

#include <iterator>

#include "model.h"
#include "task.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <limits>

#include "../core/file_io.h"
#include "../core/parallel.h"

#include <algorithm>
#include <fstream>
#include <sstream>

namespace remora {
namespace driver {

namespace {

std::string type_name(const json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number_integer()) return "an integer";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  return "an object";
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
  return s;
}

}  // namespace

Node::Node(const json& j, std::string path) : j_(j), path_(std::move(path)) {
  if (!j_.is_object())
    throw ConfigError(path_ + ": expected an object, got " + type_name(j_));
}

void Node::fail(const std::string& key, const std::string& msg) const {
  throw ConfigError((path_.empty() ? key : path_ + "." + key) + ": " + msg);
}

bool Node::has(const std::string& key) const { return j_.contains(key); }

const json* Node::get(const std::string& key) {
  if (std::find(used_.begin(), used_.end(), key) == used_.end()) used_.push_back(key);
  auto it = j_.find(key);
  return it == j_.end() || it->is_null() ? nullptr : &*it;
}

int64_t Node::integer(const std::string& key, int64_t def, int64_t lo, int64_t hi) {
  const json* v = get(key);
  if (!v) return def;
  if (!v->is_number_integer()) fail(key, "expected an integer, got " + type_name(*v));
  // An unsigned value above INT64_MAX (2^64 - 1 reads as -1 as int64_t) is out
  // of range as written, not wrapped.
  if (v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
    fail(key, "expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + v->dump());
  const int64_t x = v->get<int64_t>();
  if (x < lo || x > hi)
    fail(key, "expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                  "], got " + std::to_string(x));
  return x;
}

int64_t Node::integer(const std::string& key, int64_t lo, int64_t hi) {
  if (!get(key)) fail(key, "required key is missing");  // absent or null
  return integer(key, 0, lo, hi);
}

double Node::number(const std::string& key, double def, double lo, double hi) {
  const json* v = get(key);
  if (!v) return def;
  if (!v->is_number()) fail(key, "expected a number, got " + type_name(*v));
  const double x = v->get<double>();
  if (!(x >= lo && x <= hi)) {
    std::ostringstream os;
    os << "expected a number in [" << lo << ", " << hi << "], got " << x;
    fail(key, os.str());
  }
  return x;
}

bool Node::boolean(const std::string& key, bool def) {
  const json* v = get(key);
  if (!v) return def;
  if (!v->is_boolean()) fail(key, "expected true or false, got " + type_name(*v));
  return v->get<bool>();
}

std::string Node::string(const std::string& key, const std::string& def,
                         const std::vector<std::string>& allowed) {
  const json* v = get(key);
  if (!v) return def;
  if (!v->is_string()) fail(key, "expected a string, got " + type_name(*v));
  const std::string s = v->get<std::string>();
  if (!allowed.empty() && std::find(allowed.begin(), allowed.end(), s) == allowed.end())
    fail(key, "unknown value \"" + s + "\"; expected one of: " + join(allowed));
  return s;
}

std::string Node::string(const std::string& key, const std::vector<std::string>& allowed) {
  if (!get(key)) fail(key, "required key is missing; expected one of: " + join(allowed));  // absent or null
  return string(key, "", allowed);
}

std::vector<int64_t> Node::integers(const std::string& key, const std::vector<int64_t>& def,
                                    int64_t lo, int64_t hi) {
  const json* v = get(key);
  if (!v) return def;
  if (!v->is_array()) fail(key, "expected an array of integers, got " + type_name(*v));
  std::vector<int64_t> out;
  for (size_t i = 0; i < v->size(); ++i) {
    const json& e = (*v)[i];
    const bool too_big = e.is_number_unsigned() && e.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max());
    if (!e.is_number_integer() || too_big || e.get<int64_t>() < lo || e.get<int64_t>() > hi)
      fail(key, "entry " + std::to_string(i) + " must be an integer in [" + std::to_string(lo) +
                    ", " + std::to_string(hi) + "], got " + e.dump());
    out.push_back(e.get<int64_t>());
  }
  return out;
}

std::vector<double> Node::numbers(const std::string& key, const std::vector<double>& def) {
  const json* v = get(key);
  if (!v) return def;
  if (!v->is_array()) fail(key, "expected an array of numbers, got " + type_name(*v));
  std::vector<double> out;
  for (size_t i = 0; i < v->size(); ++i) {
    if (!(*v)[i].is_number()) fail(key, "entry " + std::to_string(i) + " is not a number");
    out.push_back((*v)[i].get<double>());
  }
  return out;
}

json Node::raw(const std::string& key) {
  const json* v = get(key);
  return v ? *v : json(nullptr);
}

Node Node::child(const std::string& key) {
  const json* v = get(key);
  const std::string p = path_.empty() ? key : path_ + "." + key;
  if (!v) return Node(json::object(), p);
  if (!v->is_object()) throw ConfigError(p + ": expected an object, got " + type_name(*v));
  return Node(*v, p);
}

void Node::finish() const {
  for (auto it = j_.begin(); it != j_.end(); ++it)
    if (!it->is_null() && std::find(used_.begin(), used_.end(), it.key()) == used_.end())
      fail(it.key(), "unknown key; known keys here: " + join(used_));
}

void apply_override(json& j, const std::string& assignment) {
  const size_t eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    throw ConfigError("--set " + assignment + ": expected key.path=value");
  const std::string path = assignment.substr(0, eq), text = assignment.substr(eq + 1);
  if (!j.is_object())  // (found by fuzz_config: a config "7e2" and any --set)
    throw ConfigError("--set " + path + ": the config is " + std::string(j.type_name()) +
                      ", not a JSON object, so it has no keys to set");
  if (json_depth(text) > kMaxJsonDepth)
    throw ConfigError("--set " + path + ": value nested more than " + std::to_string(kMaxJsonDepth) + " levels deep");
  json value;
  try {
    value = json::parse(text);
  } catch (const json::exception&) {
    value = text;  // a bare word is a string
  }
  json* cur = &j;
  std::stringstream ss(path);
  std::string part, walked;
  std::vector<std::string> parts;
  while (std::getline(ss, part, '.')) parts.push_back(part);
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i].empty()) throw ConfigError("--set " + assignment + ": empty key in path");
    walked += (i ? "." : "") + parts[i];
    if (i + 1 == parts.size()) {
      (*cur)[parts[i]] = value;
    } else {
      json& next = (*cur)[parts[i]];
      if (next.is_null()) next = json::object();
      if (!next.is_object())
        throw ConfigError("--set " + assignment + ": " + walked + " is not an object");
      cur = &next;
    }
  }
}

std::string range_text(int64_t lo, int64_t hi) {
  auto show = [](int64_t x) {
    if (x == std::numeric_limits<int64_t>::max()) return std::string("2^63-1");
    for (int k = 16; k < 63; ++k)
      if (x == (int64_t(1) << k)) return "2^" + std::to_string(k);
    return std::to_string(x);
  };
  return "[" + show(lo) + ", " + show(hi) + "]";
}

std::string range_text(double lo, double hi) {
  std::ostringstream os;
  os.precision(12);
  os << "[" << lo << ", " << hi << "]";
  return os.str();
}

std::string choices_text(const std::vector<std::string>& allowed) {
  return allowed.empty() ? "" : "one of: " + join(allowed);
}

namespace {

// ---- model.attention.rem ----

FieldTable<RemSpec> rem_spec_fields() {
  FieldTable<RemSpec> f;
  f.integer("regular", &RemSpec::regular, 0, 0, 4096, "regular REM heads")
      .integer("cyclic", &RemSpec::cyclic, 0, 0, 4096, "cyclic REM head pairs (2 heads each)")
      .integer("dilated_regular", &RemSpec::dilated_regular, 0, 0, 4096, "dilated regular REM heads")
      .integer("dilated_cyclic", &RemSpec::dilated_cyclic, 0, 0, 4096, "dilated cyclic REM head pairs")
      .integers("dilations", &RemSpec::dilations,
                {"2 per dilated head or pair",
                 [](const RemSpec& r) {
                   return std::vector<int64_t>(size_t(r.dilated_regular + r.dilated_cyclic), 2);
                 }},
                2, 1 << 20, "one dilation per dilated head or pair")
      .check([](Node& n, RemSpec& r) {
        const size_t want = size_t(r.dilated_regular + r.dilated_cyclic);
        if (r.dilations.size() != want)
          n.fail("dilations",
                 "expected " + std::to_string(want) + " entries, got " + std::to_string(r.dilations.size()));
      })
      .integer("max_distance", &RemSpec::max_distance, 0, 0, int64_t(1) << 40,
               "f(n) = 0 beyond this distance (0 = no limit)");
  return f;
}

FieldTable<RemConfig> rem_init_fields() {
  FieldTable<RemConfig> f;
  f.numbers("eta_range", &RemConfig::eta_range, std::vector<double>{-2, -1, 1, 2},
            "eta drawn from U([lo, hi]) or U([lo1, hi1] U [lo2, hi2])")
      .numbers("nu_range", &RemConfig::nu_range, std::vector<double>{1, 2}, "nu drawn from U([lo, hi])")
      .number("theta", &RemConfig::theta, 0.7853981633974483, -1e6, 1e6, "the cyclic heads' starting theta")
      .numbers("mu_range", &RemConfig::mu_range, std::vector<double>{-3, 3}, "the gate's mu drawn from U([lo, hi])")
      .numbers("eta", &RemConfig::eta, std::vector<double>{},
               "explicit eta, one per regular head (overrides eta_range)")
      .numbers("nu", &RemConfig::nu, std::vector<double>{}, "explicit nu, one per cyclic pair (overrides nu_range)")
      .numbers("thetas", &RemConfig::thetas, std::vector<double>{}, "explicit theta, one per cyclic pair")
      .numbers("mu", &RemConfig::mu, std::vector<double>{},
               "explicit mu, one per REM head (gate head) or one (gate layer)")
      .boolean("closed_gate", &RemConfig::closed_gate, false,
               "the gate starts closed: a learned rem.gate_scale (zero at the start) multiplies sigmoid(mu), so "
               "the REM heads start as the softmax heads exactly (adding RSA to a pretrained softmax model)")
      .check([](Node& init, RemConfig& r) {
        if (r.eta_range.size() != 2 && r.eta_range.size() != 4)
          init.fail("eta_range", "expected [lo, hi] or [lo1, hi1, lo2, hi2]");
        if (r.nu_range.size() != 2) init.fail("nu_range", "expected [lo, hi]");
        if (r.mu_range.size() != 2) init.fail("mu_range", "expected [lo, hi]");
        auto check_len = [&](const std::vector<double>& v, const char* key, int64_t want_n) {
          if (!v.empty() && int64_t(v.size()) != want_n)
            init.fail(key, "expected " + std::to_string(want_n) + " entries, got " + std::to_string(v.size()));
        };
        check_len(r.eta, "eta", r.spec.num_eta());
        check_len(r.nu, "nu", r.spec.num_cyclic());
        check_len(r.thetas, "thetas", r.spec.num_cyclic());
      });
  return f;
}

FieldTable<RemConfig> rem_fields() {
  FieldTable<RemConfig> f;
  f.include(&RemConfig::spec, rem_spec_fields()).section("init", rem_init_fields());
  return f;
}

FieldTable<AttentionConfig> attention_fields(bool with_carry) {
  FieldTable<AttentionConfig> f;
  f.choice("type", &AttentionConfig::type, "softmax", {"softmax", "rsa"}, "the attention of every layer")
      .section("rem", &AttentionConfig::rem, rem_fields())
      .choice("gate", &AttentionConfig::gate, "head", {"head", "layer"}, "rsa: one REM gate per head or per layer");
  if (with_carry)  // Transformer-XL's
    f.boolean("carry", &AttentionConfig::carry, false,
              "rsa: carry the REM scan state across segments (needs max_distance 0)");
  return f;
}

// train.max_memory: bytes as a number, or a string "<number><unit>" with unit
// B, K/KB/KiB, M/MB/MiB, G/GB/GiB, T/TB/TiB (powers of 1024 for all: memory).
double read_bytes(Node& n, const std::string& key) {
  const json v = n.raw(key);
  if (v.is_null()) return 0;
  double x = -1;
  if (v.is_number()) {
    x = v.get<double>();
  } else if (v.is_string()) {
    const std::string s = v.get<std::string>();
    char* end = nullptr;
    x = std::strtod(s.c_str(), &end);
    std::string unit(end ? end : "");
    unit.erase(0, unit.find_first_not_of(' '));
    std::string u;
    for (char ch : unit) u += char(std::tolower(static_cast<unsigned char>(ch)));
    const std::vector<std::pair<std::string, double>> units = {
        {"", 1},       {"b", 1},         {"k", 1024.0},        {"kb", 1024.0},       {"kib", 1024.0},
        {"m", 1 << 20}, {"mb", 1 << 20}, {"mib", 1 << 20},     {"g", 1 << 30},       {"gb", 1 << 30},
        {"gib", 1 << 30}, {"t", 1099511627776.0}, {"tb", 1099511627776.0}, {"tib", 1099511627776.0}};
    bool known = end != s.c_str();
    double mult = 0;
    for (const auto& kv : units)
      if (kv.first == u) mult = kv.second;
    if (!known || mult == 0) n.fail(key, "expected bytes as a number or a string like \"64GiB\", got \"" + s + "\"");
    x *= mult;
  } else {
    n.fail(key, "expected bytes as a number or a string like \"64GiB\"");
  }
  if (!(x >= 0 && x <= 1e18)) n.fail(key, "expected a size in bytes between 0 and 1e18");
  return x;
}

// ---- the root, data and train ----

FieldTable<Config> root_fields() {
  FieldTable<Config> f;
  f.add({{"seed", "integer", "1", range_text(0, std::numeric_limits<int64_t>::max()),
          "seeds the initialisation, the data and dropout"},
         [](Node& n, Config& c) { c.seed = uint64_t(n.integer("seed", 1, 0, std::numeric_limits<int64_t>::max())); },
         [](const Config& c, json& out) { out["seed"] = c.seed; }});
  f.add({{"device", "string", "\"cpu\"", "cpu, cuda or cuda:N", "where the model runs"},
         [](Node& n, Config& c) {
           const std::string dev = n.string("device", "cpu");
           try {
             c.device = Device::parse(dev);
           } catch (const Error& e) {
             n.fail("device", e.what());
           }
         },
         [](const Config& c, json& out) { out["device"] = c.device.str(); }});
  return f;
}

FieldTable<DataConfig> data_fields() {
  FieldTable<DataConfig> f;
  f.required("type", &DataConfig::type, data_type_names(), "the task's data (the task is chosen with the model kind)")
      .integer("batch_size", &DataConfig::batch_size, 16, 1, 1 << 20, "training batch (the global batch under mpirun)")
      .integer("eval_batch_size", &DataConfig::eval_batch_size,
               {"data.batch_size", [](const DataConfig& d) { return d.batch_size; }}, 1, 1 << 20,
               "evaluation batch");
  return f;
}

FieldTable<TrainConfig> train_fields() {
  FieldTable<OptimizerConfig> o;
  o.choice("type", &OptimizerConfig::type, "adamw", {"sgd", "adam", "adamw", "radam", "rmsprop"}, "the optimizer")
      .number("lr", &OptimizerConfig::lr, 1e-3, 0, 1e3, "learning rate (the schedule's peak)")
      .number("weight_decay", &OptimizerConfig::weight_decay,
              {"0.01 for adamw, else 0.0",
               [](const OptimizerConfig& c) { return c.type == "adamw" ? 0.01 : 0.0; }},
              0, 1e3, "weight decay (adamw: decoupled)")
      .boolean("decoupled_weight_decay", &OptimizerConfig::decoupled_weight_decay, false,
               "radam: weight decay applied as AdamW does (the original RAdam code)")
      .number("momentum", &OptimizerConfig::momentum, 0.0, 0, 1, "sgd, rmsprop: momentum")
      .boolean("nesterov", &OptimizerConfig::nesterov, false, "sgd: Nesterov momentum")
      .number("beta1", &OptimizerConfig::beta1, 0.9, 0, 0.999999, "adam, adamw, radam: first-moment decay")
      .number("beta2", &OptimizerConfig::beta2, 0.999, 0, 0.99999999, "adam, adamw, radam: second-moment decay")
      .number("eps", &OptimizerConfig::eps, 1e-8, 0, 1, "adam, adamw, radam, rmsprop: denominator epsilon")
      .number("alpha", &OptimizerConfig::alpha, 0.99, 0, 1, "rmsprop: the square average's decay (torch's alpha)");
  FieldTable<ScheduleConfig> s;
  s.choice("type", &ScheduleConfig::type, "constant", {"constant", "cosine", "linear"}, "the learning-rate schedule")
      .integer("warmup", &ScheduleConfig::warmup, 0, 0, int64_t(1) << 40, "linear warmup steps")
      .number("min_lr_ratio", &ScheduleConfig::min_lr_ratio, 0.0, 0, 1, "cosine, linear: the final lr / lr");
  // The Trainer's keys bind to train::TrainerOptions (defaults and all); the
  // launch's to DistributedConfig.
  using train::TrainerOptions;
  FieldTable<train::DistributedOptions> td;
  td.number("bucket_mb", &train::DistributedOptions::bucket_mb, 0.001, 4096, "gradient all-reduce bucket size (MiB)")
      .integer("check_every", &train::DistributedOptions::check_every, 0, int64_t(1) << 40,
               "parameter-hash check every N steps (0 = at start only)")
      .number("eval_timeout_s", &train::DistributedOptions::eval_timeout_s, -1, 1e7,
              "the other ranks' wait while rank 0 evaluates and checkpoints (0 = forever; "
              "-1 = timeout_s x (train.eval_batches + 1))");
  FieldTable<TrainerOptions> tdist;
  tdist.include(&TrainerOptions::distributed, td);
  FieldTable<DistributedConfig> launch;
  launch.choice("backend", &DistributedConfig::backend, "auto", {"auto", "mpi", "nccl"}, "the collectives for CUDA tensors")
      .number("timeout_s", &DistributedConfig::timeout_s, 300.0, 0, 1e7,
              "a collective not done after this is an error (0 = wait forever)");
  FieldTable<TrainConfig> d;
  d.include(&TrainConfig::trainer, tdist).include(&TrainConfig::distributed, launch);
  FieldTable<TrainerOptions> t;
  t.integer("steps", &TrainerOptions::steps, 0, int64_t(1) << 40, "training steps")
      .integer("eval_every", &TrainerOptions::eval_every, 0, int64_t(1) << 40,
               "evaluate (and save best) every N steps; 0 = at the end only")
      .integer("eval_batches", &TrainerOptions::eval_batches, 1, 1 << 20, "batches per evaluation")
      .integer("log_every", &TrainerOptions::log_every, 1, int64_t(1) << 40, "log the training loss every N steps")
      .number("clip", &TrainerOptions::clip, 0, 1e9, "gradient-norm clipping (0 = off)")
      .integer("gradient_accumulation_steps", &TrainerOptions::gradient_accumulation_steps, 1, 1 << 20,
               "micro-batches of data.batch_size per optimizer step (the step's gradient is their mean)")
      .number("epochs", &TrainerOptions::epochs, 0, 1e6,
              "passes over the training data (> 0: the run's length instead of steps, and the schedule's; "
              "tasks whose data has a known length)")
      .choice("best_metric", &TrainerOptions::best_metric, {},
              "the evaluation metric that picks best.safetensors, the kept checkpoints and early stopping "
              "(\"\": the task's score)")
      .choice("best_mode", &TrainerOptions::best_mode, {"auto", "min", "max"},
              "best_metric's direction (auto: max for accuracy, f1, matthews, pearson, spearman; min otherwise)")
      .integer("early_stopping_patience", &TrainerOptions::early_stopping_patience, 0, 1 << 20,
               "stop after this many evaluations without a better best (0 = never)")
      .number("early_stopping_min_delta", &TrainerOptions::early_stopping_min_delta, 0, 1e9,
              "the improvement over the best an evaluation must make to count (the metric's units)")
      .integer("keep_best", &TrainerOptions::keep_best, 1, 1 << 20,
               "keep the k best evaluations' checkpoints as best-step<N>.safetensors (1: best.safetensors only)");
  FieldTable<TrainerOptions> tprec;
  tprec.enumeration("precision", &TrainerOptions::precision, {"f32", "bf16"}, {Precision::f32, Precision::bf16},
                    "bf16: the training steps' matmuls under bf16 autocast (docs/precision.md)");
  FieldTable<TrainConfig> f;
  f.include(&TrainConfig::trainer, t)
      .integer("threads", &TrainConfig::threads, 0, 0, kMaxThreads, "CPU threads (0 = all cores)")
      .include(&TrainConfig::trainer, tprec)
      .boolean("tensorboard", &TrainConfig::tensorboard, false,
               "also write the metrics as TensorBoard event files (OUT/events.out.tfevents.*)")
      .add({{"freeze", "strings", "[]", "globs: * any characters, ? one",
             "parameters whose names match are not trained (\"bert.embeddings.*\"; each glob must match one)"},
            [](Node& n, TrainConfig& c) {
              const json v = n.raw("freeze");
              c.freeze.clear();
              if (v.is_null()) return;
              if (!v.is_array()) n.fail("freeze", "expected a list of strings, got " + v.dump());
              for (const json& g : v) {
                if (!g.is_string() || g.get<std::string>().empty())
                  n.fail("freeze", "expected a list of non-empty strings, got " + v.dump());
                c.freeze.push_back(g.get<std::string>());
              }
            },
            [](const TrainConfig& c, json& out) { out["freeze"] = c.freeze; }})
      .add({{"max_memory", "bytes", "null", "[0, 1e18]; a number or a string like \"64GiB\"",
             "the memory a command may plan to use (null or 0 = what the system allows)"},
            [](Node& n, TrainConfig& c) { c.max_memory = read_bytes(n, "max_memory"); },
            [](const TrainConfig& c, json& out) {
              out["max_memory"] = c.max_memory > 0 ? json(c.max_memory) : json(nullptr);
            }})
      .section("optimizer", &TrainConfig::optimizer, o)
      .section("schedule", &TrainConfig::schedule, s)
      .section("distributed", d);
  return f;
}

}  // namespace

bool file_exists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool ModelConfig::is_encoder() const { return def && def->is_encoder(); }

void check_heads_split(Node& m, int64_t d_model, int64_t n_head, bool has_d_head) {
  if (d_model % n_head != 0)
    m.fail("n_head", "d_model = " + std::to_string(d_model) + " is not divisible by n_head = " +
                         std::to_string(n_head) +
                         (has_d_head ? "; change n_head or set d_head" : "; change n_head"));
}

void check_adaptive_parts(Node& m, const std::vector<int64_t>& cutoffs, int64_t d_embed, int64_t d_model,
                          int64_t div_val) {
  for (size_t i = 1; i < cutoffs.size(); ++i)
    if (cutoffs[i] <= cutoffs[i - 1]) m.fail("cutoffs", "must increase strictly, got " + json(cutoffs).dump());
  const int64_t width = d_embed > 0 ? d_embed : d_model;
  int64_t w = width;
  for (size_t i = 0; i < cutoffs.size(); ++i) w /= div_val;
  if (w < 1)
    m.fail("div_val", "d_embed " + std::to_string(width) + " / div_val^" + std::to_string(cutoffs.size()) +
                          " leaves the last part of the vocabulary no width; lower div_val or raise d_embed");
}

AttentionConfig read_attention(Node& m, int64_t n_head, bool with_carry) {
  // The RSA keys are validated whatever the type, so that one config can switch
  // between the two (--set model.attention.type=softmax for the baseline); a
  // softmax attention ignores them.
  AttentionConfig ac;
  Node a = m.child("attention");
  attention_fields(with_carry).read(a, ac);
  if (ac.type != "rsa") {
    a.finish();
    return AttentionConfig{};
  }
  const int64_t hr = ac.rem.spec.num_heads();
  if (hr == 0) a.fail("rem", "an rsa attention needs at least one REM head");
  if (hr > n_head)
    a.fail("rem", std::to_string(hr) + " REM heads but model.n_head = " + std::to_string(n_head) +
                      "; use at most n_head REM heads");
  const int64_t n_mu = ac.gate == "layer" ? 1 : hr;
  if (!ac.rem.mu.empty() && int64_t(ac.rem.mu.size()) != n_mu)
    a.fail("rem.init.mu", "expected " + std::to_string(n_mu) + " entries, got " + std::to_string(ac.rem.mu.size()));
  if (ac.carry && ac.rem.spec.max_distance > 0) a.fail("carry", "carry mode needs a REM without max_distance");
  a.finish();
  return ac;
}

json attention_json(const AttentionConfig& ac, bool with_carry) {
  return ac.type == "rsa" ? attention_fields(with_carry).resolved(ac) : json{{"type", "softmax"}};
}

std::vector<KeyDoc> attention_docs(bool with_carry) { return attention_fields(with_carry).docs(); }

Config parse_config(const json& j, const std::string& base_dir, const ParseOptions& opts) {
  Config c;
  c.base_dir = base_dir;
  Node root(j, "");
  root_fields().read(root, c);

  // ---- model: the registered type reads its own keys (model.h) ----
  Node m = root.child("model");
  ModelConfig& mc = c.model;
  mc.type = m.string("type", model_type_names());
  mc.init_from = m.string("init_from", "");
  if (!mc.init_from.empty() && mc.init_from[0] != '/' && !base_dir.empty()) mc.init_from = base_dir + "/" + mc.init_from;
  std::shared_ptr<Model> def = make_model(mc.type);
  def->read(m);
  m.finish();
  mc.def = def;

  // ---- data: the task serving data.type reads its own keys (task.h) ----
  Node d = root.child("data");
  DataConfig& dc = c.data;
  data_fields().read(d, dc);
  dc.corpus_optional = opts.corpus_optional;
  task_for_data(dc.type)->read_keys(d, dc, base_dir);
  const TaskEntry* task = find_task(dc.type, def->is_encoder());
  if (!task && def->is_encoder()) {
    std::vector<std::string> enc_types;
    for (const TaskEntry& t : task_registry())
      if (t.encoder)
        for (const std::string& dt : t.data_types)
          if (std::find(enc_types.begin(), enc_types.end(), dt) == enc_types.end()) enc_types.push_back(dt);
    m.fail("type", mc.type + " is an encoder (masked LM or sequence classification); use data.type " +
                       join_or(enc_types) + ", or a causal model type for data.type " + dc.type);
  }
  if (!task)
    m.fail("type", "data.type " + dc.type + " needs an encoder model (" +
                       join_or(model_types_where([](const Model& x) { return x.is_encoder(); })) + "), got " +
                       mc.type);
  def->check_task(m, task->text);
  if (task->real_inputs && !def->real_valued_inputs())
    m.fail("type", "data.type " + dc.type + " needs real-valued inputs: use " +
                       join_or(model_types_where([](const Model& x) { return x.real_valued_inputs(); })) +
                       ", got " + mc.type);
  c.task = task->name;
  d.finish();

  // ---- train ----
  Node t = root.child("train");
  train_fields().read(t, c.train);
  t.finish();
  root.finish();

  json data = data_fields().resolved(dc);
  task->resolved_keys(dc, data);
  c.resolved = root_fields().resolved(c);
  c.resolved["model"] = def->resolved();
  c.resolved["model"]["init_from"] = mc.init_from;
  c.resolved["data"] = data;
  c.resolved["train"] = train_fields().resolved(c.train);
  return c;
}

std::vector<KeySection> config_key_sections() {
  std::vector<KeySection> out;
  std::vector<KeyDoc> root = root_fields().docs();
  out.push_back({"the root (top-level keys)", root});
  out.push_back({"train", train_fields().docs()});
  out.push_back({"model",
                 {{"type", "string", "required", choices_text(model_type_names()), "the model type"},
                  {"init_from", "string", "\"\"", "",
                   "train: start from a pretrained model's weights: a Remora checkpoint or a HuggingFace BERT "
                   "folder (names matched strictly; the task head and missing REM parameters start fresh)"}}});
  for (const ModelEntry& e : model_registry()) out.push_back({"model (type " + e.type + ")", e.make(e.type)->keys()});
  out.push_back({"data", data_fields().docs()});
  for (const TaskEntry& t : task_registry()) {
    // Tasks that share their data types (lm and mlm) share their keys.
    bool seen = false;
    for (const KeySection& s : out) seen = seen || s.title == "data (type " + join(t.data_types) + ")";
    if (!seen) out.push_back({"data (type " + join(t.data_types) + ")", t.key_docs()});
  }
  return out;
}

std::string config_keys_markdown() {
  auto cell = [](const std::string& s) {
    std::string o;
    for (char ch : s) o += ch == '|' ? std::string("\\|") : std::string(1, ch);
    return o;
  };
  std::string md =
      "# Config keys\n\n"
      "Every key of a Remora config, as `remora config --keys` prints it (this file is that\n"
      "output; the test `config_keys_doc` fails when they differ). A key of another model\n"
      "type or task is an unknown key (an error); a null value counts as absent. Sections\n"
      "nest: `train.optimizer.lr` is the key `lr` of the object `optimizer` of `train`. A\n"
      "default in words depends on other keys; `remora config CONFIG` prints a config with\n"
      "every default filled in (the resolved config that runs and checkpoints store).\n";
  for (const KeySection& s : config_key_sections()) {
    md += "\n## " + s.title + "\n\n";
    if (s.keys.empty()) {
      md += "(no keys of its own)\n";
      continue;
    }
    md += "| key | type | default | accepts | meaning |\n|---|---|---|---|---|\n";
    for (const KeyDoc& k : s.keys)
      md += "| `" + k.key + "` | " + k.type + " | " +
            (json::accept(k.def) ? "`" + cell(k.def) + "`" : cell(k.def)) + " | " +
            cell(k.range) + " | " + cell(k.help) + " |\n";
  }
  return md;
}

std::string installed_share_dir() {
#ifdef REMORA_BIN_TO_SHARE
  char exe[4096];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n <= 0) return "";
  exe[n] = 0;
  std::string dir(exe);
  dir = dir.substr(0, dir.find_last_of('/'));
  const std::string share = dir + "/" + REMORA_BIN_TO_SHARE;
  struct stat st;
  return ::stat((share + "/configs").c_str(), &st) == 0 && S_ISDIR(st.st_mode) ? share : "";
#else
  return "";
#endif
}

std::string resolve_config_path(const std::string& path) {
  if (path.empty() || file_exists(path) || path[0] == '/') return path;
  // "default.json" or "configs/default.json": the installed copy.
  std::string name = path;
  if (name.rfind("configs/", 0) == 0) name = name.substr(8);
  if (name.find('/') != std::string::npos) return path;
  const std::string share = installed_share_dir();
  if (!share.empty() && file_exists(share + "/configs/" + name)) return share + "/configs/" + name;
  return path;
}

Config load_config(const std::string& given, const std::vector<std::string>& overrides, const ParseOptions& opts) {
  const std::string path = resolve_config_path(given);
  // A regular file of plausible size: a FIFO, a device (/dev/zero, /dev/urandom)
  // or a directory is refused before it is read, naming what it is.
  const std::string problem = regular_file_problem(path);
  if (!problem.empty()) throw ConfigError(path + ": cannot open config file: " + problem);
  std::string text;
  try {
    text = read_regular_file(path, kMaxConfigBytes, "config");
  } catch (const Error& e) {
    throw ConfigError(e.what());
  }
  if (json_depth(text) > kMaxJsonDepth)  // input_checks.h: deep nesting overflows the stack later
    throw ConfigError(path + ": JSON nested more than " + std::to_string(kMaxJsonDepth) + " levels deep");
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw ConfigError(path + ": malformed JSON (" + std::string(e.what()) + ")");
  }
  for (const std::string& o : overrides) apply_override(j, o);
  // Relative data paths resolve against the working directory first, then the
  // config's folder's parent (so configs/X.json finds data/... from anywhere).
  std::string base = ".";
  if (j.is_object() && j.contains("data") && j["data"].is_object() && j["data"].contains("path") &&
      j["data"]["path"].is_string()) {
    const std::string p = j["data"]["path"].get<std::string>();
    const size_t slash = path.find_last_of('/');
    const std::string parent = (slash == std::string::npos ? std::string(".") : path.substr(0, slash)) + "/..";
    // A file, or a folder (data.type words, labelled).
    auto there = [](const std::string& f) {
      struct stat st;
      return ::stat(f.c_str(), &st) == 0 && (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode));
    };
    if (!p.empty() && p[0] != '/' && !there(base + "/" + p) && there(parent + "/" + p)) base = parent;
  }
  return parse_config(j, base, opts);
}

}  // namespace driver
}  // namespace remora
