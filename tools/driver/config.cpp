#include "config.h"
#include "input_checks.h"

#include <iterator>

#include "model.h"
#include "task.h"

#include <sys/stat.h>

#include <cctype>
#include <cstdlib>
#include <limits>

#include "../../core/file_io.h"
#include "../../core/parallel.h"

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
  if (!has(key)) fail(key, "required key is missing");
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
  if (!has(key)) fail(key, "required key is missing; expected one of: " + join(allowed));
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

namespace {

RemConfig parse_rem(Node n) {
  RemConfig r;
  const int64_t big = 1 << 20;
  r.spec.regular = n.integer("regular", 0, 0, 4096);
  r.spec.cyclic = n.integer("cyclic", 0, 0, 4096);
  r.spec.dilated_regular = n.integer("dilated_regular", 0, 0, 4096);
  r.spec.dilated_cyclic = n.integer("dilated_cyclic", 0, 0, 4096);
  const size_t want = size_t(r.spec.dilated_regular + r.spec.dilated_cyclic);
  r.spec.dilations = n.integers("dilations", std::vector<int64_t>(want, 2), 2, big);
  if (r.spec.dilations.size() != want)
    n.fail("dilations", "expected " + std::to_string(want) + " entries, got " +
                            std::to_string(r.spec.dilations.size()));
  r.spec.max_distance = n.integer("max_distance", 0, 0, int64_t(1) << 40);
  Node init = n.child("init");
  r.eta_range = init.numbers("eta_range", r.eta_range);
  r.nu_range = init.numbers("nu_range", r.nu_range);
  r.theta = init.number("theta", r.theta, -1e6, 1e6);
  r.mu_range = init.numbers("mu_range", r.mu_range);
  r.eta = init.numbers("eta", {});
  r.nu = init.numbers("nu", {});
  r.thetas = init.numbers("thetas", {});
  r.mu = init.numbers("mu", {});
  if (r.eta_range.size() != 2 && r.eta_range.size() != 4)
    init.fail("eta_range", "expected [lo, hi] or [lo1, hi1, lo2, hi2]");
  if (r.nu_range.size() != 2) init.fail("nu_range", "expected [lo, hi]");
  if (r.mu_range.size() != 2) init.fail("mu_range", "expected [lo, hi]");
  auto check_len = [&](const std::vector<double>& v, const char* key, int64_t want_n) {
    if (!v.empty() && int64_t(v.size()) != want_n)
      init.fail(key, "expected " + std::to_string(want_n) + " entries, got " +
                         std::to_string(v.size()));
  };
  check_len(r.eta, "eta", r.spec.num_eta());
  check_len(r.nu, "nu", r.spec.num_cyclic());
  check_len(r.thetas, "thetas", r.spec.num_cyclic());
  init.finish();
  n.finish();
  return r;
}

json rem_to_json(const RemConfig& r) {
  return {{"regular", r.spec.regular},
          {"cyclic", r.spec.cyclic},
          {"dilated_regular", r.spec.dilated_regular},
          {"dilated_cyclic", r.spec.dilated_cyclic},
          {"dilations", r.spec.dilations},
          {"max_distance", r.spec.max_distance},
          {"init",
           {{"eta_range", r.eta_range},
            {"nu_range", r.nu_range},
            {"theta", r.theta},
            {"mu_range", r.mu_range},
            {"eta", r.eta},
            {"nu", r.nu},
            {"thetas", r.thetas},
            {"mu", r.mu}}}};
}

// train.max_memory: bytes as a number, or a string "<number><unit>" with unit
// B, K/KB/KiB, M/MB/MiB, G/GB/GiB, T/TB/TiB (powers of 1024 for all: memory).
double read_bytes(Node& n, const std::string& key) {
  if (!n.has(key)) return 0;
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

AttentionConfig read_attention(Node& m, int64_t n_head, bool with_carry) {
  AttentionConfig ac;
  Node a = m.child("attention");
  ac.type = a.string("type", "softmax", {"softmax", "rsa"});
  // The RSA keys are validated whatever the type, so that one config can switch
  // between the two (--set model.attention.type=softmax for the baseline); a
  // softmax attention ignores them.
  const RemConfig rem = parse_rem(a.child("rem"));
  const std::string gate = a.string("gate", "head", {"head", "layer"});
  const bool carry = with_carry ? a.boolean("carry", false) : false;  // carry is Transformer-XL's
  if (ac.type == "rsa") {
    ac.rem = rem;
    ac.gate = gate;
    ac.carry = carry;
    const int64_t hr = ac.rem.spec.num_heads();
    if (hr == 0) a.fail("rem", "an rsa attention needs at least one REM head");
    if (hr > n_head)
      a.fail("rem", std::to_string(hr) + " REM heads but model.n_head = " + std::to_string(n_head) +
                        "; use at most n_head REM heads");
    const int64_t n_mu = ac.gate == "layer" ? 1 : hr;
    if (!ac.rem.mu.empty() && int64_t(ac.rem.mu.size()) != n_mu)
      a.fail("rem.init.mu", "expected " + std::to_string(n_mu) + " entries, got " +
                                std::to_string(ac.rem.mu.size()));
    if (ac.carry && ac.rem.spec.max_distance > 0) a.fail("carry", "carry mode needs a REM without max_distance");
  }
  a.finish();
  return ac;
}

json attention_json(const AttentionConfig& ac, bool with_carry) {
  json j = ac.type == "rsa"
               ? json{{"type", "rsa"}, {"rem", rem_to_json(ac.rem)}, {"gate", ac.gate}, {"carry", ac.carry}}
               : json{{"type", "softmax"}};
  if (!with_carry) j.erase("carry");
  return j;
}

Config parse_config(const json& j, const std::string& base_dir) {
  Config c;
  c.base_dir = base_dir;
  Node root(j, "");
  c.seed = uint64_t(root.integer("seed", 1, 0, std::numeric_limits<int64_t>::max()));
  const std::string dev = root.string("device", "cpu");
  try {
    c.device = Device::parse(dev);
  } catch (const Error& e) {
    root.fail("device", e.what());
  }

  // ---- model: the registered type reads its own keys (model.h) ----
  Node m = root.child("model");
  ModelConfig& mc = c.model;
  mc.type = m.string("type", model_type_names());
  std::shared_ptr<Model> def = make_model(mc.type);
  def->read(m);
  m.finish();
  mc.def = def;

  // ---- data: the task serving data.type reads its own keys (task.h) ----
  Node d = root.child("data");
  DataConfig& dc = c.data;
  dc.type = d.string("type", data_type_names());
  dc.batch_size = d.integer("batch_size", dc.batch_size, 1, 1 << 20);
  dc.eval_batch_size = d.integer("eval_batch_size", dc.batch_size, 1, 1 << 20);
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
  TrainConfig& tc = c.train;
  tc.steps = t.integer("steps", tc.steps, 0, int64_t(1) << 40);
  tc.eval_every = t.integer("eval_every", tc.eval_every, 0, int64_t(1) << 40);
  tc.eval_batches = t.integer("eval_batches", tc.eval_batches, 1, 1 << 20);
  tc.log_every = t.integer("log_every", tc.log_every, 1, int64_t(1) << 40);
  tc.clip = t.number("clip", tc.clip, 0, 1e9);
  tc.threads = t.integer("threads", 0, 0, kMaxThreads);
  tc.precision = t.string("precision", tc.precision, {"f32", "bf16"});
  tc.max_memory = read_bytes(t, "max_memory");
  Node o = t.child("optimizer");
  OptimizerConfig& oc = tc.optimizer;
  oc.type = o.string("type", oc.type, {"sgd", "adam", "adamw", "rmsprop"});
  oc.lr = o.number("lr", oc.lr, 0, 1e3);
  oc.weight_decay = o.number("weight_decay", oc.type == "adamw" ? 0.01 : 0.0, 0, 1e3);
  oc.momentum = o.number("momentum", 0, 0, 1);
  oc.nesterov = o.boolean("nesterov", false);
  oc.beta1 = o.number("beta1", oc.beta1, 0, 0.999999);
  oc.beta2 = o.number("beta2", oc.beta2, 0, 0.99999999);
  oc.eps = o.number("eps", oc.eps, 0, 1);
  oc.alpha = o.number("alpha", oc.alpha, 0, 1);
  o.finish();
  Node s = t.child("schedule");
  ScheduleConfig& sc = tc.schedule;
  sc.type = s.string("type", sc.type, {"constant", "cosine", "linear"});
  sc.warmup = s.integer("warmup", 0, 0, int64_t(1) << 40);
  sc.min_lr_ratio = s.number("min_lr_ratio", 0, 0, 1);
  s.finish();
  Node dn = t.child("distributed");
  DistributedConfig& dcfg = tc.distributed;
  dcfg.bucket_mb = dn.number("bucket_mb", dcfg.bucket_mb, 0.001, 4096);
  dcfg.backend = dn.string("backend", dcfg.backend, {"auto", "mpi", "nccl"});
  dcfg.check_every = dn.integer("check_every", dcfg.check_every, 0, int64_t(1) << 40);
  dcfg.timeout_s = dn.number("timeout_s", dcfg.timeout_s, 0, 1e7);
  dcfg.eval_timeout_s = dn.number("eval_timeout_s", dcfg.eval_timeout_s, 0, 1e7);
  dn.finish();
  t.finish();
  root.finish();

  json data = {{"type", dc.type}, {"batch_size", dc.batch_size}, {"eval_batch_size", dc.eval_batch_size}};
  task->resolved_keys(dc, data);
  c.resolved = {
      {"seed", c.seed},
      {"device", c.device.str()},
      {"model", def->resolved()},
      {"data", data},
      {"train",
       {{"steps", tc.steps},
        {"eval_every", tc.eval_every},
        {"eval_batches", tc.eval_batches},
        {"log_every", tc.log_every},
        {"clip", tc.clip},
        {"threads", tc.threads},
        {"precision", tc.precision},
        {"max_memory", tc.max_memory > 0 ? json(tc.max_memory) : json(nullptr)},
        {"optimizer",
         {{"type", oc.type},
          {"lr", oc.lr},
          {"weight_decay", oc.weight_decay},
          {"momentum", oc.momentum},
          {"nesterov", oc.nesterov},
          {"beta1", oc.beta1},
          {"beta2", oc.beta2},
          {"eps", oc.eps},
          {"alpha", oc.alpha}}},
        {"schedule", {{"type", sc.type}, {"warmup", sc.warmup}, {"min_lr_ratio", sc.min_lr_ratio}}},
        {"distributed",
         {{"bucket_mb", dcfg.bucket_mb},
          {"backend", dcfg.backend},
          {"check_every", dcfg.check_every},
          {"timeout_s", dcfg.timeout_s},
          {"eval_timeout_s", dcfg.eval_timeout_s}}}}}};
  return c;
}

Config load_config(const std::string& path, const std::vector<std::string>& overrides) {
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
    if (!p.empty() && p[0] != '/' && !file_exists(base + "/" + p) && file_exists(parent + "/" + p)) base = parent;
  }
  return parse_config(j, base);
}

}  // namespace driver
}  // namespace remora
