// SPDX-License-Identifier: BSD-3-Clause
// BERT and HuggingFace: config.json <-> BertConfig (from_hf_config,
// to_hf_config) and checkpoint directories (config.json + model.safetensors:
// load_hf_directory, save_hf_directory, load_hf_state). Every reader here takes
// files people download, so every malformed input is a clear error (fuzzed by
// tests/fuzz/fuzz_hf.cpp).
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <iomanip>
#include <sstream>

#include "../core/autograd.h"
#include "../core/file_io.h"
#include "../core/safetensors.h"
#include "bert.h"

namespace remora {
namespace models {

using json = nlohmann::json;

namespace {

// Keys every HF PretrainedConfig may carry; they do not change the model.
const std::set<std::string>& generic_hf_keys() {
  static const std::set<std::string> k = {
      "architectures", "model_type", "transformers_version", "torch_dtype", "dtype", "use_cache",
      "classifier_dropout", "gradient_checkpointing", "output_past", "bos_token_id",
      "eos_token_id", "sep_token_id", "cls_token_id", "mask_token_id", "unk_token_id",
      "is_decoder", "add_cross_attention", "tie_word_embeddings", "return_dict",
      "output_hidden_states", "output_attentions", "id2label", "label2id", "num_labels",
      "problem_type", "finetuning_task", "tokenizer_class", "prefix", "directionality",
      "pooler_fc_size", "pooler_num_attention_heads", "pooler_num_fc_layers",
      "pooler_size_per_head", "pooler_type", "chunk_size_feed_forward", "pruned_heads",
      "torchscript", "use_bfloat16", "task_specific_params", "problem_type"};
  return k;
}

// A JSON value for an error message, cut short: at most 3 levels and about 80
// characters. json::dump() recurses once per level, so dumping a hostile,
// deeply nested value (which json::parse accepts) would overflow the stack.
void put_brief(std::string& s, const json& v, int depth) {
  if (!v.is_structured()) {
    s += v.dump();
    return;
  }
  const bool arr = v.is_array();
  s += arr ? '[' : '{';
  if (!v.empty() && depth >= 3) {
    s += "...";
  } else {
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (it != v.begin()) s += ", ";
      if (s.size() > 80) {
        s += "...";
        break;
      }
      if (!arr) s += json(it.key()).dump() + ": ";
      put_brief(s, it.value(), depth + 1);
    }
  }
  s += arr ? ']' : '}';
}
std::string brief(const json& v) {
  std::string s;
  put_brief(s, v, 0);
  return s.size() > 100 ? s.substr(0, 97) + "..." : s;
}

// Typed field readers that name the source and key on error.
struct Reader {
  const json& j;
  std::string what;
  std::string prefix;  // "" or "remora.attention." ...
  [[noreturn]] void fail(const std::string& key, const std::string& msg) const {
    REMORA_FAIL(what << ": key \"" << prefix << key << "\": " << msg);
  }
  bool has(const std::string& key) const { return j.contains(key) && !j.at(key).is_null(); }
  int64_t integer(const std::string& key, int64_t def) const {
    if (!has(key)) return def;
    const json& v = j.at(key);
    if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX))
      fail(key, "integer " + brief(v) + " is too large (above 2^63 - 1)");
    if (v.is_number_integer()) return v.get<int64_t>();
    if (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>()) {
      // A float converts only inside int64's range (found by fuzz_hf: 4.2e35 was
      // cast to int64, undefined behaviour).
      const double d = v.get<double>();
      if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0))
        fail(key, "integer " + brief(v) + " is outside the 64-bit range");
      return int64_t(d);
    }
    fail(key, "expected an integer, got " + brief(v));
  }
  double number(const std::string& key, double def) const {
    if (!has(key)) return def;
    const json& v = j.at(key);
    if (!v.is_number()) fail(key, "expected a number, got " + brief(v));
    return v.get<double>();
  }
  std::string string(const std::string& key, const std::string& def) const {
    if (!has(key)) return def;
    const json& v = j.at(key);
    if (!v.is_string()) fail(key, "expected a string, got " + brief(v));
    return v.get<std::string>();
  }
  std::vector<double> numbers(const std::string& key, const std::vector<double>& def) const {
    if (!has(key)) return def;
    const json& v = j.at(key);
    if (!v.is_array()) fail(key, "expected an array of numbers, got " + brief(v));
    std::vector<double> out;
    for (const json& e : v) {
      if (!e.is_number()) fail(key, "expected an array of numbers, got " + brief(v));
      out.push_back(e.get<double>());
    }
    return out;
  }
  std::vector<int64_t> integers(const std::string& key) const {
    if (!has(key)) return {};
    const json& v = j.at(key);
    if (!v.is_array()) fail(key, "expected an array of integers, got " + brief(v));
    std::vector<int64_t> out;
    for (const json& e : v) {
      if (!e.is_number_integer()) fail(key, "expected an array of integers, got " + brief(v));
      out.push_back(e.get<int64_t>());
    }
    return out;
  }
  void only(const std::set<std::string>& known) const {
    if (!j.is_object()) REMORA_FAIL(what << ": \"" << prefix << "\" must be a JSON object, got " << brief(j));
    for (auto it = j.begin(); it != j.end(); ++it)
      if (!known.count(it.key())) {
        std::string list;
        for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
        fail(it.key(), "unknown key (known: " + list + ")");
      }
  }
};

}  // namespace

BertConfig BertConfig::from_hf_config(const std::string& json_text, const std::string& what) {
  // Refuse deep nesting before parsing: the parsed value's recursive dump and
  // destruction would overflow the stack (strings skipped, escapes honoured).
  {
    int depth = 0;
    bool in_str = false, esc = false;
    for (char ch : json_text) {
      if (in_str) {
        if (esc) esc = false;
        else if (ch == '\\') esc = true;
        else if (ch == '"') in_str = false;
      } else if (ch == '"') {
        in_str = true;
      } else if (ch == '[' || ch == '{') {
        REMORA_CHECK(++depth <= kMaxJsonDepth, what << ": JSON nested more than " << kMaxJsonDepth << " levels");
      } else if (ch == ']' || ch == '}') {
        --depth;
      }
    }
  }
  json j;
  try {
    j = json::parse(json_text);
  } catch (const json::exception& e) {
    REMORA_FAIL(what << ": not valid JSON: " << e.what());
  }
  REMORA_CHECK(j.is_object(), what << ": expected a JSON object with BertConfig keys, got " << brief(j));
  static const std::set<std::string> bert_keys = {
      "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
      "hidden_act", "hidden_dropout_prob", "attention_probs_dropout_prob",
      "max_position_embeddings", "type_vocab_size", "layer_norm_eps", "pad_token_id",
      "initializer_range", "position_embedding_type", "remora"};
  Reader r{j, what, ""};
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    if (bert_keys.count(k) || generic_hf_keys().count(k) || (!k.empty() && k[0] == '_')) continue;
    r.fail(k, "unknown key for a BERT config (expected HuggingFace BertConfig keys; Remora's "
              "own settings go under \"remora\")");
  }
  const std::string mt = r.string("model_type", "bert");
  if (mt != "bert") r.fail("model_type", "expected \"bert\", got \"" + mt + "\"");
  const std::string pet = r.string("position_embedding_type", "absolute");
  if (pet != "absolute") r.fail("position_embedding_type", "only \"absolute\" is supported, got \"" + pet + "\"");
  BertConfig c;
  c.vocab_size = r.integer("vocab_size", c.vocab_size);
  c.hidden_size = r.integer("hidden_size", c.hidden_size);
  c.num_hidden_layers = r.integer("num_hidden_layers", c.num_hidden_layers);
  c.num_attention_heads = r.integer("num_attention_heads", c.num_attention_heads);
  c.intermediate_size = r.integer("intermediate_size", c.intermediate_size);
  c.hidden_act = r.string("hidden_act", c.hidden_act);
  c.hidden_dropout_prob = r.number("hidden_dropout_prob", c.hidden_dropout_prob);
  c.attention_probs_dropout_prob = r.number("attention_probs_dropout_prob", c.attention_probs_dropout_prob);
  c.max_position_embeddings = r.integer("max_position_embeddings", c.max_position_embeddings);
  c.type_vocab_size = r.integer("type_vocab_size", c.type_vocab_size);
  c.layer_norm_eps = r.number("layer_norm_eps", c.layer_norm_eps);
  // HF writes "pad_token_id": null for models without padding.
  c.pad_token_id = j.contains("pad_token_id") && j.at("pad_token_id").is_null()
                       ? -1 : r.integer("pad_token_id", c.pad_token_id);
  c.initializer_range = r.number("initializer_range", c.initializer_range);
  if (r.has("remora")) {
    Reader rr{j.at("remora"), what, "remora."};
    rr.only({"attention", "num_classes"});
    c.num_classes = rr.integer("num_classes", 0);
    if (rr.has("attention")) {
      Reader a{j.at("remora").at("attention"), what, "remora.attention."};
      a.only({"type", "rem", "gate"});
      c.attention = a.string("type", c.attention);
      c.gate = a.string("gate", c.gate);
      if (a.has("rem")) {
        Reader s{a.j.at("rem"), what, "remora.attention.rem."};
        s.only({"regular", "cyclic", "dilated_regular", "dilated_cyclic", "dilations",
                "max_distance", "masked", "init"});
        c.rem.regular = s.integer("regular", 0);
        c.rem.cyclic = s.integer("cyclic", 0);
        c.rem.dilated_regular = s.integer("dilated_regular", 0);
        c.rem.dilated_cyclic = s.integer("dilated_cyclic", 0);
        c.rem.dilations = s.integers("dilations");
        if (c.rem.dilations.empty())
          c.rem.dilations.assign(size_t(std::max<int64_t>(0, c.rem.dilated_regular + c.rem.dilated_cyclic)), 2);
        c.rem.max_distance = s.integer("max_distance", 0);
        if (s.has("masked")) {
          if (!s.j.at("masked").is_boolean() || s.j.at("masked").get<bool>())
            s.fail("masked", "a BERT encoder uses the unmasked REM; expected false or absent");
        }
        c.rem.masked = false;
        if (s.has("init")) {
          Reader in{s.j.at("init"), what, "remora.attention.rem.init."};
          in.only({"eta_range", "nu_range", "theta", "mu_range", "eta", "nu", "thetas", "mu", "closed_gate"});
          c.rem_init.eta_range = in.numbers("eta_range", c.rem_init.eta_range);
          c.rem_init.nu_range = in.numbers("nu_range", c.rem_init.nu_range);
          c.rem_init.theta = in.number("theta", c.rem_init.theta);
          c.rem_init.mu_range = in.numbers("mu_range", c.rem_init.mu_range);
          c.rem_init.eta = in.numbers("eta", {});
          c.rem_init.nu = in.numbers("nu", {});
          c.rem_init.thetas = in.numbers("thetas", {});
          c.rem_init.mu = in.numbers("mu", {});
          if (in.has("closed_gate")) {
            if (!in.j.at("closed_gate").is_boolean()) in.fail("closed_gate", "expected true or false");
            c.rem_init.closed_gate = in.j.at("closed_gate").get<bool>();
          }
        }
      }
    }
  }
  try {
    c.validate();
  } catch (const Error& e) {
    REMORA_FAIL(what << ": " << e.what());
  }
  return c;
}

std::string BertConfig::to_hf_config() const {
  json j = {{"architectures", {"BertForPreTraining"}},
            {"model_type", "bert"},
            {"vocab_size", vocab_size},
            {"hidden_size", hidden_size},
            {"num_hidden_layers", num_hidden_layers},
            {"num_attention_heads", num_attention_heads},
            {"intermediate_size", intermediate_size},
            {"hidden_act", hidden_act},
            {"hidden_dropout_prob", hidden_dropout_prob},
            {"attention_probs_dropout_prob", attention_probs_dropout_prob},
            {"max_position_embeddings", max_position_embeddings},
            {"type_vocab_size", type_vocab_size},
            {"layer_norm_eps", layer_norm_eps},
            {"initializer_range", initializer_range},
            {"position_embedding_type", "absolute"}};
  if (pad_token_id >= 0) j["pad_token_id"] = pad_token_id;
  else j["pad_token_id"] = nullptr;
  if (num_classes > 0) j["remora"]["num_classes"] = num_classes;
  if (attention == "rsa") {
    json init = {{"eta_range", rem_init.eta_range}, {"nu_range", rem_init.nu_range},
                 {"theta", rem_init.theta}, {"mu_range", rem_init.mu_range}};
    if (!rem_init.eta.empty()) init["eta"] = rem_init.eta;
    if (!rem_init.nu.empty()) init["nu"] = rem_init.nu;
    if (!rem_init.thetas.empty()) init["thetas"] = rem_init.thetas;
    if (!rem_init.mu.empty()) init["mu"] = rem_init.mu;
    if (rem_init.closed_gate) init["closed_gate"] = true;
    j["remora"]["attention"] = {{"type", "rsa"},
                     {"gate", gate},
                     {"rem",
                      {{"regular", rem.regular},
                       {"cyclic", rem.cyclic},
                       {"dilated_regular", rem.dilated_regular},
                       {"dilated_cyclic", rem.dilated_cyclic},
                       {"dilations", rem.dilations},
                       {"max_distance", rem.max_distance},
                       {"init", init}}}};
  }
  return j.dump(2);
}

// ---------------------------------------------------------------- HF checkpoints

std::string canonical_hf_name(const std::string& name) {
  std::string n = name;
  auto ends_with = [&](const std::string& suf) {
    return n.size() >= suf.size() && n.compare(n.size() - suf.size(), suf.size(), suf) == 0;
  };
  if (ends_with("position_ids")) return "";  // a buffer older HF versions saved
  if (n == "cls.predictions.decoder.weight") return "";  // tied to the word embeddings
  if (n == "cls.predictions.decoder.bias") return "cls.predictions.bias";
  for (const char* top : {"embeddings.", "encoder.", "pooler."})
    if (n.rfind(top, 0) == 0) n = "bert." + n;
  if (ends_with("LayerNorm.gamma")) n = n.substr(0, n.size() - 5) + "weight";
  else if (ends_with("LayerNorm.beta")) n = n.substr(0, n.size() - 4) + "bias";
  return n;
}

void load_hf_state(BertForMaskedLM& m, const std::vector<std::pair<std::string, Tensor>>& state,
                   const std::string& what) {
  std::map<std::string, Tensor> params;
  for (auto& kv : m.named_parameters()) params.emplace(kv.first, kv.second);
  std::map<std::string, std::string> seen;  // canonical -> the file's name
  const Tensor* decoder_w = nullptr;
  const Tensor* decoder_b = nullptr;
  nn::NamedTensors to_load;
  for (const auto& kv : state) {
    const std::string c = canonical_hf_name(kv.first);
    if (kv.first == "cls.predictions.decoder.weight") decoder_w = &kv.second;
    if (c.empty()) continue;
    auto it = params.find(c);
    REMORA_CHECK(it != params.end(),
                 what << ": unknown tensor \"" << kv.first << "\" for this BERT config (expected "
                      << "HuggingFace BertForPreTraining names such as "
                         "bert.encoder.layer.0.attention.self.query.weight)");
    if (kv.first == "cls.predictions.decoder.bias") {
      decoder_b = &kv.second;
      if (seen.count(c)) continue;  // cls.predictions.bias came first: the alias is redundant
    } else if (seen.count(c)) {
      if (seen[c] == "cls.predictions.decoder.bias") {  // replace the alias by the real one
        for (auto& e : to_load)
          if (e.first == c) e.second = kv.second;
        seen[c] = kv.first;
        continue;
      }
      REMORA_FAIL(what << ": tensors \"" << seen[c] << "\" and \"" << kv.first << "\" both name the parameter \""
                       << c << "\"");
    }
    REMORA_CHECK(kv.second.shape() == it->second.shape(),
                 what << ": tensor \"" << kv.first << "\" has shape " << shape_str(kv.second.shape())
                      << " but the config needs " << shape_str(it->second.shape()) << " for \"" << c
                      << "\"; check config.json against the checkpoint");
    REMORA_CHECK(kv.second.dtype() != DType::i64,
                 what << ": tensor \"" << kv.first << "\" is an integer tensor; expected floating point");
    seen[c] = kv.first;
    to_load.emplace_back(c, kv.second);
  }
  (void)decoder_b;
  if (decoder_w) {
    REMORA_CHECK(decoder_w->shape() == m.embeddings->word_embeddings->weight.shape(),
                 what << ": tensor \"cls.predictions.decoder.weight\" has shape " << shape_str(decoder_w->shape())
                      << " but the (tied) word embeddings are "
                      << shape_str(m.embeddings->word_embeddings->weight.shape()));
  }
  for (const auto& kv : params) {
    if (seen.count(kv.first)) continue;
    const bool optional = kv.first.rfind("bert.pooler.", 0) == 0 || kv.first.rfind("cls.seq_relationship.", 0) == 0;
    REMORA_CHECK(optional, what << ": missing tensor \"" << kv.first << "\" (also looked for the legacy "
                                << ".gamma/.beta LayerNorm names and the unprefixed BertModel name)");
  }
  m.load_state_dict(to_load, /*strict=*/false);
}

namespace {
bool is_dir(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
std::string join(const std::string& dir, const std::string& f) {
  return dir.empty() || dir.back() == '/' ? dir + f : dir + "/" + f;
}
// A count as a whole number while doubles hold it exactly, else as 1.2e+20
// (std::llround overflows past 2^63).
std::string count_text(double n) {
  std::ostringstream o;
  if (n < 9007199254740992.0)  // 2^53
    o << std::llround(n);
  else
    o << std::setprecision(3) << n;
  return o.str();
}
}  // namespace

void check_hf_size(const BertConfig& c, const std::string& cfg_path, const std::string& weights_path,
                   uint64_t weights_bytes, int bytes_per_parameter) {
  const double n = c.parameter_count();
  REMORA_CHECK(2 * n <= double(weights_bytes),
               cfg_path << ": describes " << count_text(n) << " parameters (num_hidden_layers "
                        << c.num_hidden_layers << ", hidden_size " << c.hidden_size << ", intermediate_size "
                        << c.intermediate_size << ", vocab_size " << c.vocab_size
                        << "), at least " << human_bytes(2 * n) << " of weights, but " << weights_path << " is "
                        << human_bytes(double(weights_bytes))
                        << "; config.json does not belong to these weights");
  std::string source;
  const double room = double(available_memory(&source));
  const double need = n * double(bytes_per_parameter) + double(weights_bytes);
  REMORA_CHECK(need <= room, cfg_path << ": the model needs about " << human_bytes(need)
                                      << " (parameters and the weights file read) but only "
                                      << human_bytes(room) << " of memory is available (" << source
                                      << "); refusing to build it");
}

std::shared_ptr<BertForMaskedLM> load_hf_directory(const std::string& dir, DType dt) {
  REMORA_CHECK(dt == DType::f32 || dt == DType::f64, "load_hf_directory: dtype must be f32 or f64");
  REMORA_CHECK(is_dir(dir), "load_hf_directory: \"" << dir << "\" is not a directory (expected a "
                                                    << "HuggingFace model directory with config.json and model.safetensors)");
  const std::string cfg_path = join(dir, "config.json"), st_path = join(dir, "model.safetensors");
  const std::string cfg_problem = regular_file_problem(cfg_path), st_problem = regular_file_problem(st_path);
  REMORA_CHECK(cfg_problem.empty(), "load_hf_directory: " << cfg_path << " " << cfg_problem);
  REMORA_CHECK(st_problem.empty(), "load_hf_directory: " << st_path << " " << st_problem
                                   << " (only safetensors checkpoints are read; convert pytorch_model.bin first)");
  // A regular file of plausible size (a FIFO here would block forever).
  const std::string text = read_regular_file(cfg_path, kMaxHfConfigBytes, "load_hf_directory: config.json");
  BertConfig c = BertConfig::from_hf_config(text, cfg_path);
  // Before building: the weights file must be able to hold the model the
  // config describes (2 bytes a parameter at the least, f16), and the model
  // must fit in memory; a config.json with 10,000 layers stops here.
  uint64_t st_size = 0;
  ::close(open_regular_file(st_path, "load_hf_directory: model.safetensors", &st_size));
  check_hf_size(c, cfg_path, st_path, st_size, dt == DType::f64 ? 8 : 4);
  auto m = std::make_shared<BertForMaskedLM>(c, dt);
  Safetensors st = load_safetensors(st_path);
  load_hf_state(*m, st.tensors, st_path);
  return m;
}

void save_hf_directory(const BertForMaskedLM& m, const std::string& dir) {
  if (!is_dir(dir))
    REMORA_CHECK(::mkdir(dir.c_str(), 0755) == 0 || errno == EEXIST,
                 "save_hf_directory: cannot create directory " << dir << ": " << std::strerror(errno));
  save_safetensors(join(dir, "model.safetensors"), m.named_parameters(), {{"format", "pt"}});
  // config.json: written to a fresh temporary file and renamed, like the
  // checkpoint (a FIFO or link left at the temporary name is replaced).
  write_file_atomic(join(dir, "config.json"), m.cfg.to_hf_config() + "\n", "save_hf_directory: config.json");
}

// ---------------------------------------------------------------- MLM recipe

std::pair<Tensor, Tensor> mlm_mask(const Tensor& ids, const Tensor& special_mask, int64_t vocab_size,
                                   int64_t mask_token_id, Generator& gen) {
  REMORA_CHECK(ids.defined() && ids.dtype() == DType::i64, "mlm_mask: ids must be i64, got "
                                                               << (ids.defined() ? ids.str() : "undefined"));
  REMORA_CHECK(!special_mask.defined() || special_mask.shape() == ids.shape(),
               "mlm_mask: special_mask must have the shape of ids " << shape_str(ids.shape()) << ", got "
                                                                   << special_mask.str());
  REMORA_CHECK(vocab_size >= 1, "mlm_mask: vocab_size must be >= 1, got " << vocab_size);
  REMORA_CHECK(mask_token_id >= 0 && mask_token_id < vocab_size,
               "mlm_mask: mask_token_id " << mask_token_id << " is outside [0, " << vocab_size << ")");
  const int64_t n = ids.numel();
  // Three uniform draws per token: chosen?, [MASK] or not?, random or kept? and a random id.
  const std::vector<double> u = Tensor::rand({4, n}, DType::f64, Device::cpu(), &gen).to_vector();
  std::vector<int64_t> x = ids.contiguous().to_i64_vector();
  const std::vector<int64_t> sp = special_mask.defined() ? special_mask.to(DType::i64).to_i64_vector()
                                                         : std::vector<int64_t>(size_t(n), 0);
  std::vector<int64_t> labels(size_t(n), -100);
  for (int64_t i = 0; i < n; ++i) {
    if (sp[size_t(i)] != 0 || !(u[size_t(i)] < 0.15)) continue;
    labels[size_t(i)] = x[size_t(i)];
    if (u[size_t(n + i)] < 0.8) {
      x[size_t(i)] = mask_token_id;
    } else if (u[size_t(2 * n + i)] < 0.5) {
      x[size_t(i)] = std::min<int64_t>(vocab_size - 1, int64_t(u[size_t(3 * n + i)] * double(vocab_size)));
    }
  }
  return {Tensor::from_vector(x, ids.shape()).to(ids.device()),
          Tensor::from_vector(labels, ids.shape()).to(ids.device())};
}

std::pair<Tensor, Tensor> mlm_mask_whole_words(const Tensor& ids, const Tensor& special_mask, const Tensor& word_start,
                                               int64_t vocab_size, int64_t mask_token_id, Generator& gen,
                                               double probability) {
  REMORA_CHECK(ids.defined() && ids.dtype() == DType::i64, "mlm_mask_whole_words: ids must be i64, got "
                                                               << (ids.defined() ? ids.str() : "undefined"));
  REMORA_CHECK(!special_mask.defined() || special_mask.shape() == ids.shape(),
               "mlm_mask_whole_words: special_mask must have the shape of ids " << shape_str(ids.shape())
                                                                                << ", got " << special_mask.str());
  REMORA_CHECK(!word_start.defined() || word_start.shape() == ids.shape(),
               "mlm_mask_whole_words: word_start must have the shape of ids " << shape_str(ids.shape()) << ", got "
                                                                              << word_start.str());
  REMORA_CHECK(vocab_size >= 1, "mlm_mask_whole_words: vocab_size must be >= 1, got " << vocab_size);
  REMORA_CHECK(mask_token_id >= 0 && mask_token_id < vocab_size,
               "mlm_mask_whole_words: mask_token_id " << mask_token_id << " is outside [0, " << vocab_size << ")");
  REMORA_CHECK(probability >= 0 && probability <= 1,
               "mlm_mask_whole_words: probability must be in [0, 1], got " << probability);
  const int64_t n = ids.numel();
  const int64_t row = ids.shape().empty() ? 1 : std::max<int64_t>(1, ids.shape().back());
  // The draws of mlm_mask: chosen? (read at a word's first token), [MASK] or
  // not?, random or kept?, and a random id, for every token.
  const std::vector<double> u = Tensor::rand({4, n}, DType::f64, Device::cpu(), &gen).to_vector();
  std::vector<int64_t> x = ids.contiguous().to_i64_vector();
  const std::vector<int64_t> sp = special_mask.defined() ? special_mask.to(DType::i64).to_i64_vector()
                                                         : std::vector<int64_t>(size_t(n), 0);
  const std::vector<int64_t> ws = word_start.defined() ? word_start.to(DType::i64).to_i64_vector()
                                                       : std::vector<int64_t>(size_t(n), 1);
  std::vector<int64_t> labels(size_t(n), -100);
  bool chosen = false;  // the current word's draw
  for (int64_t i = 0; i < n; ++i) {
    const size_t k = size_t(i);
    if (sp[k] != 0) {
      chosen = false;
      continue;
    }
    if (ws[k] != 0 || i % row == 0 || sp[k - 1] != 0) chosen = u[k] < probability;
    if (!chosen) continue;
    labels[k] = x[k];
    if (u[size_t(n + i)] < 0.8) {
      x[k] = mask_token_id;
    } else if (u[size_t(2 * n + i)] < 0.5) {
      x[k] = std::min<int64_t>(vocab_size - 1, int64_t(u[size_t(3 * n + i)] * double(vocab_size)));
    }
  }
  return {Tensor::from_vector(x, ids.shape()).to(ids.device()),
          Tensor::from_vector(labels, ids.shape()).to(ids.device())};
}

}  // namespace models
}  // namespace remora
