// SPDX-License-Identifier: BSD-3-Clause
// Driver configs: JSON files with sections model, data, train, device, seed.
//
// Everything is validated before any work starts. Unknown keys, wrong types,
// out-of-range values and missing files are ConfigErrors that name the JSON
// path ("model.attention.rem.dilations: expected 2 entries, got 3").
// A null value counts as absent (so `--set train.clip=null` restores the
// default). model.attention's rsa keys (rem, gate, carry) are validated for a
// softmax attention too, and ignored, so one config can switch types with --set.
// Every section's keys are one FieldTable (below): `remora config --keys` lists
// them all (docs/config_keys.md).
#pragma once
#include <any>
#include <functional>
#include <memory>
#include <type_traits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../core/tensor.h"
#include "../ops/rem.h"
#include "../train/trainer.h"

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

// ---- key tables ----
//
// Each section of a config (the root, model and each model type, data and each
// task, train and its subsections) is one FieldTable: a row per key with where
// its value lives, its default, the values it accepts and a help line. The
// table reads and validates the section (through Node, so errors name the JSON
// path), writes it back for the resolved config, and describes it for
// `remora config --keys` (docs/config_keys.md is that output).
//
//   FieldTable<ScheduleConfig> t;
//   t.choice("type", &ScheduleConfig::type, "constant", {"constant", "cosine", "linear"}, "the LR schedule")
//    .integer("warmup", &ScheduleConfig::warmup, 0, 0, int64_t(1) << 40, "linear warmup steps");
//   t.read(node, sc);           // every row in order, then node.finish() is the caller's
//   json j = t.resolved(sc);    // {"type": ..., "warmup": ...}

// One key as `remora config --keys` lists it.
struct KeyDoc {
  std::string key;    // relative to the section: "warmup", "attention.rem.regular"
  std::string type;   // integer, number, boolean, string, integers, numbers, bytes
  std::string def;    // the default as JSON, or in words ("required", "data.batch_size")
  std::string range;  // "[1, 2^20]", "one of: a, b"; empty when anything of the type goes
  std::string help;
};

// "[lo, hi]" with powers of two as 2^k (the form `--keys` prints).
std::string range_text(int64_t lo, int64_t hi);
std::string range_text(double lo, double hi);
std::string choices_text(const std::vector<std::string>& allowed);

// A key's default: a value, or a function of the keys read before it (with
// the words that say so in the key list).
template <class T, class S>
struct Default {
  template <class U, class = std::enable_if_t<std::is_convertible<U, T>::value>>
  Default(U v) : text(json(T(v)).dump()), fn([x = T(v)](const S&) { return x; }) {}
  Default(std::string words, std::function<T(const S&)> f) : text(std::move(words)), fn(std::move(f)) {}
  std::string text;
  std::function<T(const S&)> fn;
};

template <class S>
struct Field {
  Field(KeyDoc d, std::function<void(Node&, S&)> r, std::function<void(const S&, json&)> w = nullptr,
        std::vector<KeyDoc> s = {})
      : doc(std::move(d)), read(std::move(r)), write(std::move(w)), sub(std::move(s)) {}
  KeyDoc doc;                                  // doc.key empty: a check, not a key
  std::function<void(Node&, S&)> read;
  std::function<void(const S&, json&)> write;  // null: nothing in the resolved config
  std::vector<KeyDoc> sub;                     // a section's keys (doc.key is their prefix)
};

template <class S>
class FieldTable {
 public:
  // The rows without a default take it from the struct they bind to (S{}.*m):
  // bound to a library struct (the Trainer's options), the library's default
  // is the key's, stated once.
  FieldTable& integer(const std::string& key, int64_t S::*m, int64_t lo, int64_t hi, const std::string& help) {
    return integer(key, m, own_default(m), lo, hi, help);
  }
  FieldTable& number(const std::string& key, double S::*m, double lo, double hi, const std::string& help) {
    return number(key, m, own_default(m), lo, hi, help);
  }
  FieldTable& boolean(const std::string& key, bool S::*m, const std::string& help) {
    return boolean(key, m, own_default(m), help);
  }
  FieldTable& choice(const std::string& key, std::string S::*m, const std::vector<std::string>& allowed,
                     const std::string& help) {
    return choice(key, m, own_default(m), allowed, help);
  }
  // A string key naming one of an enum's values (names[i] names values[i]).
  template <class E>
  FieldTable& enumeration(const std::string& key, E S::*m, const std::vector<std::string>& names,
                          const std::vector<E> values, const std::string& help) {
    auto name_of = [=](E e) {
      for (size_t i = 0; i < values.size(); ++i)
        if (values[i] == e) return names[i];
      return std::string("?");
    };
    const std::string def = name_of(own_default(m));
    return add({{key, "string", json(def).dump(), choices_text(names), help},
                [=](Node& n, S& s) {
                  const std::string v = n.string(key, def, names);
                  for (size_t i = 0; i < names.size(); ++i)
                    if (names[i] == v) s.*m = values[i];
                },
                [=](const S& s, json& out) { out[key] = name_of(s.*m); }});
  }
  FieldTable& integer(const std::string& key, int64_t S::*m, Default<int64_t, S> def, int64_t lo, int64_t hi,
                      const std::string& help) {
    return add({{key, "integer", def.text, range_text(lo, hi), help},
                [=](Node& n, S& s) { s.*m = n.integer(key, def.fn(s), lo, hi); }, member_writer(key, m)});
  }
  FieldTable& number(const std::string& key, double S::*m, Default<double, S> def, double lo, double hi,
                     const std::string& help) {
    return add({{key, "number", def.text, range_text(lo, hi), help},
                [=](Node& n, S& s) { s.*m = n.number(key, def.fn(s), lo, hi); }, member_writer(key, m)});
  }
  FieldTable& boolean(const std::string& key, bool S::*m, Default<bool, S> def, const std::string& help) {
    return add({{key, "boolean", def.text, "", help},
                [=](Node& n, S& s) { s.*m = n.boolean(key, def.fn(s)); }, member_writer(key, m)});
  }
  // A string, one of `allowed` (empty: any string).
  FieldTable& choice(const std::string& key, std::string S::*m, Default<std::string, S> def,
                     const std::vector<std::string>& allowed, const std::string& help) {
    return add({{key, "string", def.text, choices_text(allowed), help},
                [=](Node& n, S& s) { s.*m = n.string(key, def.fn(s), allowed); }, member_writer(key, m)});
  }
  // A string that must be given, one of `allowed`.
  FieldTable& required(const std::string& key, std::string S::*m, const std::vector<std::string>& allowed,
                       const std::string& help) {
    return add({{key, "string", "required", choices_text(allowed), help},
                [=](Node& n, S& s) { s.*m = n.string(key, allowed); }, member_writer(key, m)});
  }
  FieldTable& integers(const std::string& key, std::vector<int64_t> S::*m, Default<std::vector<int64_t>, S> def,
                       int64_t lo, int64_t hi, const std::string& help) {
    return add({{key, "integers", def.text, "each in " + range_text(lo, hi), help},
                [=](Node& n, S& s) { s.*m = n.integers(key, def.fn(s), lo, hi); }, member_writer(key, m)});
  }
  FieldTable& numbers(const std::string& key, std::vector<double> S::*m, Default<std::vector<double>, S> def,
                      const std::string& help) {
    return add({{key, "numbers", def.text, "", help},
                [=](Node& n, S& s) { s.*m = n.numbers(key, def.fn(s)); }, member_writer(key, m)});
  }
  // The object `key`, read with `t` into the member m (its unknown keys are errors).
  template <class Sub>
  FieldTable& section(const std::string& key, Sub S::*m, const FieldTable<Sub>& t) {
    return add({{key, "object", "", "", ""},
                [=](Node& n, S& s) {
                  Node c = n.child(key);
                  t.read(c, s.*m);
                  c.finish();
                },
                [=](const S& s, json& out) { out[key] = t.resolved(s.*m); }, t.docs()});
  }
  // The object `key`, read with `t` into this same struct.
  FieldTable& section(const std::string& key, const FieldTable<S>& t) {
    return add({{key, "object", "", "", ""},
                [=](Node& n, S& s) {
                  Node c = n.child(key);
                  t.read(c, s);
                  c.finish();
                },
                [=](const S& s, json& out) { out[key] = t.resolved(s); }, t.docs()});
  }
  // The rows of a member's table, as keys of this section.
  template <class Sub>
  FieldTable& include(Sub S::*m, const FieldTable<Sub>& t) {
    for (const Field<Sub>& f : t.rows())
      add({f.doc, [m, r = f.read](Node& n, S& s) { r(n, s.*m); },
           f.write ? std::function<void(const S&, json&)>([m, w = f.write](const S& s, json& out) { w(s.*m, out); })
                   : nullptr,
           f.sub});
    return *this;
  }
  // A rule across keys, run once the rows above it are read (Node::fail names the key).
  FieldTable& check(std::function<void(Node&, S&)> f) { return add({KeyDoc{}, std::move(f)}); }
  FieldTable& add(Field<S> f) {
    rows_.push_back(std::move(f));
    return *this;
  }

  void read(Node& n, S& s) const {
    for (const Field<S>& f : rows_) f.read(n, s);
  }
  void write(const S& s, json& out) const {
    for (const Field<S>& f : rows_)
      if (f.write) f.write(s, out);
  }
  json resolved(const S& s) const {
    json j = json::object();
    write(s, j);
    return j;
  }
  // Every key, a section's as "section.key".
  std::vector<KeyDoc> docs() const {
    std::vector<KeyDoc> out;
    for (const Field<S>& f : rows_) {
      if (f.doc.key.empty()) continue;
      if (f.doc.type != "object") out.push_back(f.doc);
      for (KeyDoc d : f.sub) {
        d.key = f.doc.key + "." + d.key;
        out.push_back(d);
      }
    }
    return out;
  }
  const std::vector<Field<S>>& rows() const { return rows_; }

 private:
  template <class T>
  static T own_default(T S::*m) {
    static const S* const defaults = new S();  // kept for the process (no destructor to run at exit)
    return defaults->*m;
  }
  template <class T>
  static std::function<void(const S&, json&)> member_writer(const std::string& key, T S::*m) {
    return [=](const S& s, json& out) { out[key] = s.*m; };
  }
  std::vector<Field<S>> rows_;
};

// The REM heads of an RSA layer and how their parameters start (docs/math.md#initialisation-and-checkpoint-names).
// Defaults: the key table (rem_fields in config.cpp).
struct RemConfig {
  RemSpec spec;
  std::vector<double> eta_range, nu_range;
  double theta = 0;
  std::vector<double> mu_range;
  std::vector<double> eta, nu, thetas, mu;  // explicit values override the ranges
  bool closed_gate = false;
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
// The adaptive input and softmax keys (transformer_xl, srupp): cutoffs
// increase strictly, and d_embed (0: d_model) / div_val^len(cutoffs) leaves
// the last part a width (errors at model.cutoffs / model.div_val).
void check_adaptive_parts(Node& m, const std::vector<int64_t>& cutoffs, int64_t d_embed, int64_t d_model,
                          int64_t div_val);
json attention_json(const AttentionConfig& a, bool with_carry);
std::vector<KeyDoc> attention_docs(bool with_carry);

// The key model.attention of a transformer type S: read after n_head (the
// member, or a function of S that gives it).
template <class S>
Field<S> attention_field(AttentionConfig S::*m, std::function<int64_t(const S&)> n_head, bool with_carry) {
  return {{"attention", "object", "", "", ""},
          [=](Node& n, S& s) { s.*m = read_attention(n, n_head(s), with_carry); },
          [=](const S& s, json& out) { out["attention"] = attention_json(s.*m, with_carry); },
          attention_docs(with_carry)};
}
template <class S>
Field<S> attention_field(AttentionConfig S::*m, int64_t S::*n_head, bool with_carry) {
  return attention_field<S>(m, std::function<int64_t(const S&)>([n_head](const S& s) { return s.*n_head; }),
                            with_carry);
}

class Model;  // model.h: a registered model type with its own keys

// The model: its type and that type's registry entry, which read and keeps
// its own keys (cli/models/*.cpp):
//   causal sequence models: transformer_xl, srupp, rnn, lstm, relrnn, rellstm,
//     starsaber with causal = true
//   encoders (masked LM, sequence classification): bert, starsaber
// Keys of another type are unknown keys (an error), so a typo cannot pass.
struct ModelConfig {
  std::string type;
  std::string init_from;  // model.init_from, joined to the config's folder ("" = none)
  std::shared_ptr<const Model> def;
  bool is_encoder() const;
};

// The keys every task has (type, batch_size, eval_batch_size), the sequence
// length the model is shaped for, and the task's own keys: a struct of its
// file (cli/tasks/), read by its table and reached with keys<K>().
struct DataConfig {
  std::string type;  // char | bytes | words | regular | timeseries | copy | denoise | classify | labelled
  int64_t batch_size = 0, eval_batch_size = 0;
  // The training sequence length: the text tasks' data.seq_len; the other
  // tasks are shaped by their own keys and keep this value.
  int64_t seq_len = 128;
  // Parsing for `remora info`: a text corpus that is not there is allowed
  // (corpus_optional) and then noted (corpus_missing) instead of an error.
  bool corpus_optional = false, corpus_missing = false;
  std::any task_keys;
  template <class K>
  const K& keys() const {
    return std::any_cast<const K&>(task_keys);
  }
};

// Defaults of the train keys: the key tables in config.cpp (`remora config --keys`).
struct OptimizerConfig {
  std::string type;  // sgd | adam | adamw | radam | rmsprop
  double lr = 0, weight_decay = 0, momentum = 0, beta1 = 0, beta2 = 0, eps = 0;
  double alpha = 0;  // rmsprop: the square average's decay (torch's alpha)
  bool nesterov = false;
  bool decoupled_weight_decay = false;  // radam: weight decay applied as AdamW does
};

struct ScheduleConfig {
  std::string type;  // constant | cosine | linear
  int64_t warmup = 0;
  double min_lr_ratio = 0;
};

// train.distributed: data-parallel runs under mpirun (docs/distributed.md).
// Ignored in a plain run (a world of one).
// train.distributed's keys of the launch (the Trainer's own, bucket_mb,
// check_every and eval_timeout_s, are TrainerOptions::distributed).
struct DistributedConfig {
  std::string backend;  // CUDA tensors: mpi | nccl | auto
  double timeout_s = 0;
};

struct TrainConfig {
  // The keys the Trainer takes (steps, eval_every, eval_batches, log_every,
  // clip, precision, distributed.{bucket_mb, check_every, eval_timeout_s}):
  // their rows bind to its options, with its defaults; `remora train` starts
  // from this and adds the run's own settings (directory, resume, schedule).
  train::TrainerOptions trainer;
  OptimizerConfig optimizer;
  ScheduleConfig schedule;
  int64_t threads = 0;  // 0 = all cores
  bool tensorboard = false;  // also write TensorBoard event files beside metrics.jsonl
  std::vector<std::string> freeze;  // globs of parameter names left out of training (cli/init_from.h)
  DistributedConfig distributed;
  // train.max_memory: the bytes a command may plan to use; 0 = what the
  // system allows (MemAvailable, the cgroup limit, ulimits: memory_estimate.h).
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

// One section of `remora config --keys`: its JSON path ("model (type bert)",
// "data (type copy, denoise)") and its keys.
struct KeySection {
  std::string title;
  std::vector<KeyDoc> keys;
};
// Every section: the root, train, model and each model type, data and each task.
std::vector<KeySection> config_key_sections();
// The sections as the Markdown that docs/config_keys.md holds.
std::string config_keys_markdown();

// Whether p names a regular file.
bool file_exists(const std::string& p);

// Applies "a.b.c=value" (value parsed as JSON, else taken as a string).
void apply_override(json& j, const std::string& assignment);
// Parses and validates; the error names the JSON path.
// How a config is parsed: corpus_optional lets a text task's data.path be
// absent (`remora info` on a recipe whose corpus is elsewhere).
struct ParseOptions {
  bool corpus_optional = false;
};
Config parse_config(const json& j, const std::string& base_dir, const ParseOptions& opts = {});
// <prefix>/share/remora of an installed driver ("" in the build tree).
std::string installed_share_dir();
// A config path as given when it names a file; else, for a bare name
// ("default.json", "configs/default.json"), the installed copy when there is one.
std::string resolve_config_path(const std::string& path);
// Reads a file (resolve_config_path), applies overrides, parses.
Config load_config(const std::string& path, const std::vector<std::string>& overrides = {},
                   const ParseOptions& opts = {});

}  // namespace driver
}  // namespace remora
