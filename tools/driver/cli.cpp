// The `remora` command line: train, eval, generate, infer, gradcheck, info, plot.
// Exit codes: 0 success, 2 usage / config / input-file error, 1 failure during a run.
#include "cli.h"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <cstring>
#include <algorithm>
#include <functional>
#include <sstream>

#include "../../core/autograd.h"
#include "../../core/generator.h"
#include "../../core/safetensors.h"
#include "../../ops/gradcheck.h"
#include "../../ops/ops.h"
#include "experiment.h"
#include "input_checks.h"

namespace remora {
namespace driver {

namespace {

// A usage error (exit 2).
class UsageError : public Error {
 public:
  explicit UsageError(const std::string& m) : Error(m) {}
};
// A failure during a run (exit 1).
class RunError : public Error {
 public:
  explicit RunError(const std::string& m) : Error(m) {}
};

const char* kMainHelp = R"(remora: train and run recurrence-in-attention models from JSON configs

usage: remora COMMAND [ARGS]

commands:
  train CONFIG [--set key.path=value ...] [--out DIR] [--resume] [--until STEP]
  eval CONFIG --checkpoint FILE [--split valid|test] [--set ...]
  generate CONFIG --checkpoint FILE --prompt TEXT --tokens N [--temperature T] [--top-k K] [--seed S]
  infer CONFIG --checkpoint FILE --input IDS --output OUT.safetensors [--hidden]
  gradcheck [OP ...]
  info CONFIG [--set ...]
  plot OUT_DIR

Run `remora COMMAND --help` for details. Exit codes: 0 ok, 2 usage/config/input error,
1 failure during a run.
)";

const char* help_for(const std::string& cmd) {
  if (cmd == "train")
    return R"(remora train CONFIG [--set key.path=value ...] [--out DIR] [--resume] [--until STEP]

Trains the model the config describes. Writes DIR/last.safetensors and
DIR/best.safetensors (weights, optimizer state, RNG and data position, the
resolved config), DIR/metrics.jsonl (one JSON object per log/eval point) and
DIR/config.json. --out defaults to out/<config name>. --resume continues from
DIR/last.safetensors; on CPU with the same thread count it reproduces the
uninterrupted run exactly. --until STEP stops after STEP steps (saving last),
so a long run can be split.
)";
  if (cmd == "eval")
    return R"(remora eval CONFIG --checkpoint FILE [--split valid|test] [--set ...]

Evaluates a checkpoint on the whole split: loss and bits per character for
language models, accuracy (in-distribution and per length bin) for the regular
languages. Prints one JSON line.

FILE (here and for generate / infer) is a checkpoint that `remora train`
wrote, or bare weights: a safetensors file of the model's tensors under the
official names without Remora checkpoint metadata (e.g. a PyTorch state dict,
see tools/checkpoint_interop.py); its vocabulary is the config's data's.
)";
  if (cmd == "generate")
    return R"(remora generate CONFIG --checkpoint FILE --prompt TEXT --tokens N
                [--temperature T] [--top-k K] [--seed S]

Samples N tokens after the prompt (temperature 1, no top-k, seed 0 by default)
and prints the prompt followed by the sample.
)";
  if (cmd == "infer")
    return R"(remora infer CONFIG --checkpoint FILE --input IDS --output OUT.safetensors [--hidden]

IDS is a JSON array of token ids (one sequence), an array of equally long
arrays (a batch), or a path to a text file that the config's vocabulary
encodes. Writes "logits" [B, L, V] and, with --hidden, "hidden.N" [B, L, d]
(the input of layer N; hidden.<n_layer> is the last layer's output).
)";
  if (cmd == "gradcheck")
    return R"(remora gradcheck [OP ...]

Runs the float64 gradient check (SPEC §10) of every registered op, or of the
named ops, and prints a table. Exit 1 if any check fails.
)";
  if (cmd == "info")
    return R"(remora info CONFIG [--set ...]

Prints the model summary: layers, parameters per module, a memory estimate.
)";
  if (cmd == "plot")
    return R"(remora plot OUT_DIR

Writes OUT_DIR/loss.png (train and valid loss against step) from
OUT_DIR/metrics.jsonl with gnuplot.
)";
  return nullptr;
}

struct Args {
  std::vector<std::string> positional;
  std::vector<std::string> sets;
  std::map<std::string, std::string> opts;
  std::set<std::string> flags;
};

// Parses "--name value", "--name=value" and the given boolean flags.
Args parse_args(const std::vector<std::string>& argv, const std::set<std::string>& with_value,
                const std::set<std::string>& bool_flags) {
  Args a;
  for (size_t i = 0; i < argv.size(); ++i) {
    std::string s = argv[i];
    if (s.rfind("--", 0) != 0 || s == "--") {
      a.positional.push_back(s);
      continue;
    }
    std::string name = s.substr(2), value;
    const size_t eq = name.find('=');
    bool has_value = false;
    if (eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    if (bool_flags.count(name)) {
      if (has_value) throw UsageError("--" + name + " takes no value");
      a.flags.insert(name);
      continue;
    }
    if (!with_value.count(name) && name != "set") throw UsageError("unknown option --" + name);
    if (!has_value) {
      if (i + 1 >= argv.size()) throw UsageError("--" + name + " needs a value");
      value = argv[++i];
    }
    if (name == "set")
      a.sets.push_back(value);
    else
      a.opts[name] = value;
  }
  return a;
}

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

Config config_of(const Args& a, const std::string& cmd) {
  if (a.positional.size() != 1)
    throw UsageError(cmd + ": expected exactly one CONFIG argument, got " + std::to_string(a.positional.size()));
  return load_config(a.positional[0], a.sets);
}

void apply_threads(const Config& c) {
  if (c.train.threads > 0) set_num_threads(int(c.train.threads));
  if (!c.device.is_cpu()) Tensor::zeros({1}, DType::f32, c.device);  // a clear error without CUDA
}

bool is_dir(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// Creates DIR (and parents) and checks that it is writable, before any work.
void prepare_out_dir(const std::string& dir) {
  std::string cur;
  std::stringstream ss(dir);
  std::string part;
  if (!dir.empty() && dir[0] == '/') cur = "/";
  while (std::getline(ss, part, '/')) {
    if (part.empty()) continue;
    cur += part + "/";
    if (!is_dir(cur) && ::mkdir(cur.c_str(), 0755) != 0 && !is_dir(cur))
      throw InputError("--out " + dir + ": cannot create directory " + cur + ": " + std::strerror(errno));
  }
  const std::string probe = dir + "/.remora_write_test";
  std::ofstream f(probe);
  if (!f.good()) throw InputError("--out " + dir + ": directory is not writable");
  f.close();
  ::unlink(probe.c_str());
}

// Runs f, turning a remora::Error into an InputError (exit 2) naming `what`.
template <typename F>
auto as_input(const std::string& what, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const InputError&) {
    throw;
  } catch (const Error& e) {
    throw InputError(what + ": " + e.what());
  }
}

std::string default_out(const std::string& config_path) {
  std::string base = config_path.substr(config_path.find_last_of('/') + 1);
  const size_t dot = base.rfind('.');
  if (dot != std::string::npos) base = base.substr(0, dot);
  return "out/" + base;
}

std::string fmt(double x, int prec = 4) {
  std::ostringstream os;
  os.setf(std::ios::fixed);
  os.precision(prec);
  os << x;
  return os.str();
}

std::string human_time(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  const int64_t t = int64_t(s + 0.5);
  std::ostringstream os;
  if (t >= 3600) os << t / 3600 << "h";
  if (t >= 60) os << (t / 60) % 60 << "m";
  os << t % 60 << "s";
  return os.str();
}

json metrics_json(const Experiment& ex, const Metrics& m) {
  json j{{"loss", m.loss}};
  if (ex.is_encoder() && ex.is_lm()) {
    j["mlm_accuracy"] = m.accuracy;
  } else if (ex.is_memory()) {
    j["accuracy"] = m.accuracy;  // on the answer symbols
  } else if (ex.is_lm()) {
    j["bpc"] = m.bpc;
  } else if (ex.is_series()) {
    j["mse"] = m.mse;
    j["mae"] = m.mae;
  } else {
    j["accuracy"] = m.accuracy;
    j["bin_accuracy"] = m.bin_accuracy;
  }
  return j;
}

// Whether every parameter is finite (checked before a checkpoint is written).
bool all_finite(const nn::Module& m) {
  NoGradGuard ng;
  for (const Tensor& p : m.parameters()) {
    const double s = sum(p.to(DType::f64)).item();
    if (!std::isfinite(s)) return false;
  }
  return true;
}

// An error message on one line: a multi-line message (a load_state_dict
// report lists one problem per line) gets its lines joined with "; ".
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

// Keeps the metrics lines up to `step` (a resumed run rewrites what follows).
void truncate_metrics(const std::string& path, int64_t step) {
  std::ifstream in(path);
  if (!in.good()) return;
  std::vector<std::string> keep;
  std::string line;
  while (std::getline(in, line)) {
    try {
      if (json::parse(line).value("step", int64_t(0)) <= step) keep.push_back(line);
    } catch (const json::exception&) {
    }
  }
  in.close();
  // Rewritten beside and renamed: a full disk must not cost the lines kept so far.
  const std::string tmp = path + ".tmp";
  std::ofstream out(tmp, std::ios::trunc);
  for (const std::string& l : keep) out << l << "\n";
  out.flush();
  const bool ok = out.good();
  out.close();
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    throw RunError("cannot rewrite " + path + ": " + std::strerror(err));
  }
}

// ---------------------------------------------------------------- train

int cmd_train(const Args& a) {
  Config cfg = config_of(a, "train");
  const std::string out = a.opts.count("out") ? a.opts.at("out") : default_out(a.positional[0]);
  const bool resume = a.flags.count("resume") > 0;
  const int64_t until = a.opts.count("until") ? to_int("until", a.opts.at("until"), 0, int64_t(1) << 40) : -1;
  apply_threads(cfg);
  prepare_out_dir(out);
  clean_stale_tmp(out);  // temporaries of a killed run's checkpoint writes
  const std::string last = out + "/last.safetensors", best_path = out + "/best.safetensors";

  std::string vocab;
  if (resume) {
    if (::access(last.c_str(), R_OK) != 0) throw InputError("--resume: no checkpoint at " + last);
    vocab = read_checkpoint_info(last).vocab_json;
  }
  Experiment ex(cfg, vocab);
  std::unique_ptr<optim::Optimizer> opt = ex.make_optimizer();
  const optim::LRSchedule sched = ex.schedule();
  Experiment::State state;
  int64_t step = 0;
  double best = INFINITY;
  if (resume) {
    Checkpoint c = load_checkpoint(last, ex, opt.get(), &state);
    step = c.step;
    best = c.best_valid;
    default_generator().set_state(c.rng_seed, c.rng_offset);
    ex.set_data_position(c.data_position);
    truncate_metrics(out + "/metrics.jsonl", step);
    std::fprintf(stderr, "resumed from %s at step %lld\n", last.c_str(), (long long)step);
  } else {
    std::remove((out + "/metrics.jsonl").c_str());
  }
  {
    std::ofstream f(out + "/config.json");
    f << cfg.resolved.dump(2) << "\n";
    f.flush();
    if (!f.good()) throw RunError("cannot write " + out + "/config.json: " + std::strerror(errno));
  }
  std::ofstream metrics(out + "/metrics.jsonl", std::ios::app);
  if (!metrics.good()) throw InputError("cannot write " + out + "/metrics.jsonl");

  const int64_t n_params = ex.model->num_parameters();
  const std::string attn = cfg.model.attention.type == "none" ? "" : " (" + cfg.model.attention.type + " attention)";
  std::fprintf(stderr, "model %s%s, %lld parameters, %d threads; writing %s\n", cfg.model.type.c_str(),
               attn.c_str(), (long long)n_params, get_num_threads(), out.c_str());

  const bool tty = ::isatty(STDERR_FILENO);
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  auto save = [&](const std::string& path) {
    Checkpoint c;
    c.step = step;
    c.rng_seed = default_generator().seed();
    c.rng_offset = default_generator().offset();
    c.data_position = ex.data_position();
    c.best_valid = best;
    c.vocab_json = ex.vocab_json();
    c.config_json = cfg.resolved.dump();
    save_checkpoint(path, ex, opt.get(), state, c);
  };
  auto run_eval = [&](double lr, double tok_s) {
    Metrics m = ex.evaluate("valid", cfg.train.eval_batches);
    // A finite training loss does not mean finite weights: the update after it
    // can overflow. Never let such weights overwrite the last good checkpoint.
    if (!std::isfinite(m.loss) || !all_finite(*ex.model))
      throw RunError("the " + std::string(std::isfinite(m.loss) ? "weights" : "validation loss") +
                     " became non-finite after step " + std::to_string(step) +
                     "; the last good checkpoint is " + last + " (try a lower train.optimizer.lr or train.clip)");
    json j = metrics_json(ex, m);
    j["step"] = step;
    j["split"] = "valid";
    j["lr"] = lr;
    j["tokens_per_s"] = tok_s;
    j["elapsed"] = elapsed();
    metrics << j.dump() << "\n" << std::flush;
    // Lower is better: bpc (language models), MLM loss (bert), 1 - accuracy
    // (regular languages), MSE (time series).
    const double score = ex.is_encoder() && ex.is_lm() ? m.loss : ex.is_lm() ? m.bpc : ex.is_series() ? m.mse : 1 - m.accuracy;
    if (tty) std::fprintf(stderr, "\n");
    std::fprintf(stderr, "step %lld  valid %s\n", (long long)step, j.dump().c_str());
    save(last);
    if (score < best) {
      best = score;
      save(last);  // records the new best score
      save(best_path);
    }
  };

  const int64_t end = until >= 0 ? std::min(until, cfg.train.steps) : cfg.train.steps;
  int64_t window_tokens = 0;
  double window_start = elapsed(), lr = cfg.train.optimizer.lr, tok_s = 0;
  for (; step < end;) {
    lr = cfg.train.optimizer.lr * sched.lr_at(step + 1);
    opt->set_lr(lr);
    int64_t tokens = 0;
    Tensor loss = ex.train_loss(state, &tokens);
    const double lv = loss.item();
    if (!std::isfinite(lv))
      throw RunError("the training loss became " + std::string(std::isnan(lv) ? "NaN" : "Inf") +
                     " at step " + std::to_string(step + 1) + "; the last good checkpoint is " + last +
                     " (try a lower train.optimizer.lr or train.clip)");
    opt->zero_grad();
    loss.backward();
    if (cfg.train.clip > 0) optim::clip_grad_norm_(ex.model->parameters(), cfg.train.clip);
    opt->step();
    ++step;
    window_tokens += tokens;
    if (step % cfg.train.log_every == 0 || step == end) {
      const double now = elapsed();
      tok_s = double(window_tokens) / std::max(1e-9, now - window_start);
      window_tokens = 0;
      window_start = now;
      json j{{"step", step}, {"split", "train"}, {"loss", lv}, {"lr", lr}, {"tokens_per_s", tok_s}, {"elapsed", now}};
      if (ex.is_lm()) j["bpc"] = lv / std::log(2.0);
      metrics << j.dump() << "\n" << std::flush;
      const double eta = double(cfg.train.steps - step) * now / double(std::max<int64_t>(1, step));
      if (tty)
        std::fprintf(stderr, "\r[%lld/%lld] loss %s  %s tok/s  ETA %s   ", (long long)step,
                     (long long)cfg.train.steps, fmt(lv).c_str(), fmt(tok_s, 0).c_str(), human_time(eta).c_str());
      else
        std::fprintf(stderr, "step %lld/%lld  loss %s  lr %.3g  %s tok/s  ETA %s\n", (long long)step,
                     (long long)cfg.train.steps, fmt(lv).c_str(), lr, fmt(tok_s, 0).c_str(), human_time(eta).c_str());
    }
    if (cfg.train.eval_every > 0 && step % cfg.train.eval_every == 0) run_eval(lr, tok_s);
  }
  if (cfg.train.eval_every == 0 || step % cfg.train.eval_every != 0) run_eval(lr, tok_s);
  if (tty) std::fprintf(stderr, "\n");
  std::fprintf(stderr, "done: %lld steps in %s; checkpoints in %s\n", (long long)step,
               human_time(elapsed()).c_str(), out.c_str());
  return 0;
}

// Builds the experiment for a checkpoint and loads its weights; adjust may
// change the config first (settings that do not touch the weights).
Experiment load_for_inference(const Args& a, const std::string& cmd, Config* cfg_out,
                              const std::function<void(Config&)>& adjust = nullptr) {
  Config cfg = config_of(a, cmd);
  if (adjust) adjust(cfg);
  apply_threads(cfg);
  const std::string ck = need(a, "checkpoint");
  Checkpoint info = read_checkpoint_info(ck);
  Experiment ex(cfg, info.vocab_json);
  load_checkpoint(ck, ex, nullptr, nullptr);
  ex.model->eval();
  if (cfg_out) *cfg_out = cfg;
  return ex;
}

// ---------------------------------------------------------------- eval

int cmd_eval(const Args& a) {
  Config cfg;
  Experiment ex = load_for_inference(a, "eval", &cfg);
  const std::string split = a.opts.count("split") ? a.opts.at("split") : "valid";
  if (split != "valid" && split != "test") throw UsageError("--split must be valid or test, got " + split);
  const auto t0 = std::chrono::steady_clock::now();
  Metrics m = ex.evaluate(split, 0);
  json j = metrics_json(ex, m);
  j["split"] = split;
  j["tokens"] = m.tokens;
  j["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%s\n", j.dump().c_str());
  return 0;
}

// ---------------------------------------------------------------- generate

int cmd_generate(const Args& a) {
  Config cfg;
  Experiment ex = load_for_inference(a, "generate", &cfg, [](Config& cfg) {
    if ((cfg.data.type != "char" && cfg.data.type != "bytes") || cfg.model.is_encoder())
      throw UsageError("generate: needs a causal language-model config (data.type char or bytes; model.type "
                       "transformer_xl, srupp, rnn, lstm, relrnn or rellstm), got " + cfg.model.type);
    // Generation keeps at least one segment of memory so each new token sees context.
    if (cfg.model.type == "transformer_xl" || cfg.model.type == "srupp")
      cfg.model.mem_len = std::max(cfg.model.mem_len, cfg.data.seq_len);
  });
  const std::string prompt = need(a, "prompt");
  const int64_t n = to_int("tokens", need(a, "tokens"), 0, 1 << 24);
  const double temp = a.opts.count("temperature") ? to_double("temperature", a.opts.at("temperature"), 0, 100) : 1.0;
  const int64_t top_k = a.opts.count("top-k") ? to_int("top-k", a.opts.at("top-k"), 0, 1 << 24) : 0;
  const int64_t seed = a.opts.count("seed") ? to_int("seed", a.opts.at("seed"), 0, INT64_MAX) : 0;
  if (prompt.empty()) throw UsageError("--prompt must not be empty");
  NoGradGuard ng;
  Generator g{uint64_t(seed)};
  const data::Vocab& v = ex.corpus.vocab;
  std::vector<int64_t> ids = v.encode(prompt);
  // Token by token with the carried state, except for the models whose
  // attention memory restarts every segment (the relevancy-screening cells,
  // causal StarSaber): they re-read the last seq_len tokens at every step.
  const bool rerun = cfg.model.type == "relrnn" || cfg.model.type == "rellstm" || cfg.model.type == "starsaber";
  Experiment::State st;
  const Device dv = ex.model->parameters().front().device();  // the config's device
  models::SequenceOutput out = ex.seq->run(Tensor::from_vector(ids, {1, int64_t(ids.size())}).to(dv), st);
  std::string text = prompt;
  for (int64_t i = 0; i < n; ++i) {
    Tensor last = out.logits.select(1, -1).reshape({-1}).to(DType::f64);  // [V]
    std::vector<double> lg = last.to_vector();
    int64_t next = 0;
    if (temp == 0) {
      next = int64_t(std::max_element(lg.begin(), lg.end()) - lg.begin());
    } else {
      std::vector<double> sorted = lg;
      double cut = -INFINITY;
      if (top_k > 0 && top_k < int64_t(lg.size())) {
        std::nth_element(sorted.begin(), sorted.begin() + (top_k - 1), sorted.end(), std::greater<double>());
        cut = sorted[size_t(top_k - 1)];
      }
      const double mx = *std::max_element(lg.begin(), lg.end());
      std::vector<double> p(lg.size());
      double z = 0;
      for (size_t k = 0; k < lg.size(); ++k) {
        p[k] = lg[k] >= cut ? std::exp((lg[k] - mx) / temp) : 0;
        z += p[k];
      }
      double u = Tensor::rand({1}, DType::f64, Device::cpu(), &g).item() * z;
      next = int64_t(lg.size()) - 1;
      for (size_t k = 0; k < lg.size(); ++k) {
        u -= p[k];
        if (u < 0) {
          next = int64_t(k);
          break;
        }
      }
    }
    text += v.decode({next}, "?");
    ids.push_back(next);
    if (rerun) {
      const size_t w = std::min(ids.size(), size_t(cfg.data.seq_len));
      std::vector<int64_t> window(ids.end() - std::ptrdiff_t(w), ids.end());
      out = ex.seq->run(Tensor::from_vector(window, {1, int64_t(w)}).to(dv), {});
    } else {
      st = out.state;
      out = ex.seq->run(Tensor::from_vector(std::vector<int64_t>{next}, {1, 1}).to(dv), st);
    }
  }
  std::printf("%s\n", text.c_str());
  return 0;
}

// ---------------------------------------------------------------- infer

// Token ids from --input: a JSON array (one sequence), an array of equally
// long arrays (a batch), or a text file encoded with `encode` (when given).
std::vector<std::vector<int64_t>> read_ids(const std::string& input, int64_t vocab,
                                           const std::function<std::vector<int64_t>(const std::string&)>& encode) {
  std::ifstream f(input);
  if (!f.good()) throw InputError("--input " + input + ": cannot open file");
  std::stringstream ss;
  ss << f.rdbuf();
  return parse_ids(ss.str(), input, vocab, encode);  // input_checks.cpp (fuzzed: tests/fuzz)
}

Tensor batch_of(const std::vector<std::vector<int64_t>>& seqs) {
  std::vector<int64_t> flat;
  for (auto& s : seqs) flat.insert(flat.end(), s.begin(), s.end());
  return Tensor::from_vector(flat, {int64_t(seqs.size()), int64_t(seqs[0].size())});
}

void write_infer(const std::string& output, const Tensor& logits, const std::vector<Tensor>& hidden, bool with_hidden) {
  std::vector<std::pair<std::string, Tensor>> t{{"logits", logits}};
  if (with_hidden)
    for (size_t l = 0; l < hidden.size(); ++l) t.emplace_back("hidden." + std::to_string(l), hidden[l]);
  try {
    save_safetensors(output, t, {{"format", "remora-infer"}});
  } catch (const Error& e) {
    throw InputError(std::string("--output: ") + e.what());
  }
  std::fprintf(stderr, "wrote %s: logits %s\n", output.c_str(), shape_str(logits.shape()).c_str());
}

// A HuggingFace BertConfig (config.json of a HF directory) rather than a Remora config.
bool is_hf_config(const std::string& path) {
  std::ifstream f(path);
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (json_depth(text) > kMaxJsonDepth) return false;  // config_of reports it
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception&) {
    return false;  // config_of reports malformed JSON
  }
  return j.is_object() && !j.contains("model") && (j.contains("model_type") || j.contains("hidden_size"));
}

// `remora infer DIR/config.json --checkpoint DIR/model.safetensors`: a HuggingFace BERT.
int infer_hf(const Args& a) {
  const std::string cpath = a.positional[0], ck = need(a, "checkpoint");
  if (!a.sets.empty()) throw UsageError("--set applies to Remora configs, not to a HuggingFace config.json");
  std::ifstream f(cpath);
  json j = json::parse(f);
  models::BertConfig bc = as_input(cpath, [&] { return models::BertConfig::from_hf_json(j, cpath); });
  auto m = std::make_shared<models::BertForMaskedLM>(bc);
  Safetensors st = as_input(ck, [&] { return load_safetensors(ck); });
  check_finite(st.tensors, ck);
  as_input(ck, [&] {
    models::load_hf_state(*m, st.tensors, ck);
    return 0;
  });
  m->eval();
  std::vector<std::vector<int64_t>> seqs = read_ids(need(a, "input"), bc.vocab_size, nullptr);
  NoGradGuard ng;
  models::BertForMaskedLM::Output out = m->forward(batch_of(seqs));
  write_infer(need(a, "output"), out.mlm_logits, out.hidden_states, a.flags.count("hidden") > 0);
  return 0;
}

int cmd_infer(const Args& a) {
  if (a.positional.size() == 1 && is_hf_config(a.positional[0])) return infer_hf(a);
  Config cfg;
  Experiment ex = load_for_inference(a, "infer", &cfg);
  std::function<std::vector<int64_t>(const std::string&)> encode;
  if (ex.is_lm()) encode = [&](const std::string& t) { return ex.corpus.vocab.encode(t); };
  std::vector<std::vector<int64_t>> seqs = read_ids(need(a, "input"), ex.vocab_size(), encode);
  NoGradGuard ng;
  const bool hidden = a.flags.count("hidden") > 0;
  const Tensor ids = batch_of(seqs).to(ex.model->parameters().front().device());  // the config's device
  if (hidden && !ex.bert && !ex.xl)
    throw UsageError("infer: --hidden is available for transformer_xl and bert models, not " + cfg.model.type);
  if (ex.bert) {
    models::BertForMaskedLM::Output out = ex.bert->forward(ids);
    write_infer(need(a, "output"), out.mlm_logits, out.hidden_states, hidden);
  } else if (ex.xl) {
    models::TransformerXL::Output out = ex.xl->forward(ids);
    write_infer(need(a, "output"), out.logits, out.layer_inputs, hidden);
  } else if (ex.enc) {
    write_infer(need(a, "output"), ex.enc->token_logits(ids, Tensor()), {}, false);
  } else {
    write_infer(need(a, "output"), ex.seq->run(ids, {}).logits, {}, false);
  }
  return 0;
}

// ---------------------------------------------------------------- gradcheck

int cmd_gradcheck(const Args& a) {
  std::set<std::string> want(a.positional.begin(), a.positional.end());
  std::set<std::string> known;
  for (const GradcheckCase& c : gradcheck_cases()) known.insert(c.op);
  for (const std::string& w : want)
    if (!known.count(w)) {
      std::string list;
      for (const std::string& k : known) list += " " + k;
      throw UsageError("gradcheck: unknown op '" + w + "'; registered ops:" + list);
    }
  std::printf("%-48s %10s %12s  %s\n", "case", "entries", "max |err|", "result");
  int failed = 0, run = 0;
  for (const GradcheckCase& c : gradcheck_cases()) {
    if (!want.empty() && !want.count(c.op)) continue;
    GradcheckResult r = gradcheck(c.fn, c.make_inputs(), c.options);
    ++run;
    failed += !r.ok;
    std::printf("%-48s %10lld %12.3e  %s\n", c.name.c_str(), (long long)r.entries, r.max_abs_err,
                r.ok ? "ok" : ("FAIL: " + r.message).c_str());
  }
  std::printf("%d passed, %d failed\n", run - failed, failed);
  return failed ? 1 : 0;
}

// ---------------------------------------------------------------- info

int cmd_info(const Args& a) {
  Config cfg = config_of(a, "info");
  Experiment ex(cfg);
  if (!ex.bert && !ex.xl) {
    std::printf("model: %s\n", cfg.resolved["model"].dump().c_str());
    std::printf("\nparameters:\n");
    for (const auto& p : ex.model->named_parameters())
      std::printf("  %-56s %10lld\n", p.first.c_str(), (long long)p.second.numel());
    std::printf("  %-56s %10lld\n", "total", (long long)ex.model->num_parameters());
    return 0;
  }
  if (ex.bert) {
    const models::BertConfig& b = ex.bert_cfg;
    std::printf("model: bert, %s attention", b.attention.c_str());
    if (b.attention == "rsa")
      std::printf(" (%lld unmasked REM heads; gate per %s)", (long long)b.rem.num_heads(), b.gate.c_str());
    std::printf("\n  layers %lld, hidden %lld, heads %lld, intermediate %lld, vocab %lld (incl. [MASK])\n",
                (long long)b.num_hidden_layers, (long long)b.hidden_size, (long long)b.num_attention_heads,
                (long long)b.intermediate_size, (long long)b.vocab_size);
    std::printf("\nparameters:\n");
    for (const auto& p : ex.model->named_parameters())
      std::printf("  %-56s %10lld\n", p.first.c_str(), (long long)p.second.numel());
    std::printf("  %-56s %10lld\n", "total", (long long)ex.model->num_parameters());
    return 0;
  }
  const models::XLConfig& m = ex.model_cfg;
  std::printf("model: %s, %s attention", cfg.model.type.c_str(), m.attention.c_str());
  if (m.attention == "rsa")
    std::printf(" (%lld REM heads: regular %lld, cyclic pairs %lld, dilated regular %lld, dilated cyclic pairs %lld; gate per %s%s)",
                (long long)m.rem.num_heads(), (long long)m.rem.regular, (long long)m.rem.cyclic,
                (long long)m.rem.dilated_regular, (long long)m.rem.dilated_cyclic, m.gate.c_str(),
                m.carry ? ", carry" : "");
  std::printf("\n  layers %lld, d_model %lld, heads %lld x %lld, d_inner %lld, mem_len %lld, vocab %lld\n",
              (long long)m.n_layer, (long long)m.d_model, (long long)m.n_head,
              (long long)(m.d_head > 0 ? m.d_head : m.d_model / m.n_head), (long long)m.d_inner,
              (long long)m.mem_len, (long long)m.n_token);
  std::printf("\nparameters:\n");
  for (const auto& ch : ex.model->named_children()) {
    int64_t n = ch.second->num_parameters();
    std::printf("  %-28s %12lld\n", ch.first.c_str(), (long long)n);
    if (ch.first == "layers")
      for (const auto& l : ch.second->named_children())
        std::printf("    layers.%-19s %12lld\n", l.first.c_str(), (long long)l.second->num_parameters());
  }
  int64_t own = 0;
  for (const auto& p : ex.model->named_parameters(false)) own += p.second.numel();
  std::printf("  %-28s %12lld\n", "(own: r_w_bias, r_r_bias)", (long long)own);
  const int64_t total = ex.model->num_parameters();
  std::printf("  %-28s %12lld\n", "total", (long long)total);
  // Memory estimate (f32): weights + gradients + two Adam moments, and the
  // activations kept for backward per layer: about 12 [B, L, d] tensors, 2 of
  // [B, L, d_inner] and 3 score-sized [B, H, L, L + M] tensors.
  const double B = double(cfg.data.batch_size), L = double(cfg.data.type == "regular" ? 51 : cfg.data.seq_len);
  const double Lk = L + double(m.mem_len), d = double(m.d_model), H = double(m.n_head);
  const double weights = 4.0 * double(total) * 4;
  const double acts = 4.0 * double(m.n_layer) * (12 * B * L * d + 2 * B * L * double(m.d_inner) + 3 * B * H * L * Lk) +
                      4.0 * 3 * B * L * double(m.n_token);
  std::printf("\nmemory estimate (f32, batch %lld x %lld): parameters+gradients+Adam %.1f MiB, activations %.1f MiB\n",
              (long long)B, (long long)L, weights / 1048576.0, acts / 1048576.0);
  return 0;
}

// ---------------------------------------------------------------- plot

int cmd_plot(const Args& a) {
  if (a.positional.size() != 1) throw UsageError("plot: expected one OUT_DIR argument");
  const std::string dir = a.positional[0], mpath = dir + "/metrics.jsonl";
  std::ifstream in(mpath);
  if (!in.good()) throw InputError("plot: cannot open " + mpath);
  std::ofstream tr(dir + "/.train.dat"), va(dir + "/.valid.dat");
  std::string line;
  int64_t nt = 0, nv = 0;
  bool lm = true;
  while (std::getline(in, line)) {
    json j;
    try {
      j = json::parse(line);
    } catch (const json::exception&) {
      throw InputError("plot: " + mpath + " has a malformed line: " + line.substr(0, 80));
    }
    const std::string split = j.value("split", "");
    const double y = j.contains("bpc") ? j["bpc"].get<double>() : j.value("loss", 0.0);
    lm = lm && j.contains("bpc");
    if (split == "train") { tr << j.value("step", 0) << " " << y << "\n"; ++nt; }
    if (split == "valid") { va << j.value("step", 0) << " " << y << "\n"; ++nv; }
  }
  tr.close();
  va.close();
  if (nt + nv == 0) throw InputError("plot: " + mpath + " has no train or valid points");
  const std::string png = dir + "/loss.png", script = dir + "/.plot.gp";
  std::ofstream gp(script);
  gp << "set terminal png size 900,540\nset output '" << png << "'\n"
     << "set xlabel 'step'\nset ylabel '" << (lm ? "bits per character" : "loss") << "'\n"
     << "set grid\nset key top right\n"
     << "plot '" << dir << "/.train.dat' with lines lw 1 lc rgb '#4477aa' title 'train'"
     << (nv ? ", '" + dir + "/.valid.dat' with linespoints lw 2 pt 7 lc rgb '#cc3311' title 'valid'" : "") << "\n";
  gp.close();
  const std::string cmd = "gnuplot '" + script + "' 2>&1";
  const int rc = std::system(cmd.c_str());
  std::remove(script.c_str());
  std::remove((dir + "/.train.dat").c_str());
  std::remove((dir + "/.valid.dat").c_str());
  if (rc != 0) throw RunError("plot: gnuplot failed (is it installed? apt-get install gnuplot-nox)");
  std::printf("wrote %s\n", png.c_str());
  return 0;
}

}  // namespace

int run_cli(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    std::fputs(kMainHelp, args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  const std::string cmd = args[0];
  args.erase(args.begin());
  const char* help = help_for(cmd);
  if (!help) {
    std::fprintf(stderr, "remora: unknown command '%s'\n\n%s", cmd.c_str(), kMainHelp);
    return 2;
  }
  for (const std::string& s : args)
    if (s == "--help" || s == "-h") {
      std::fputs(help, stdout);
      return 0;
    }
  try {
    if (cmd == "train")
      return cmd_train(parse_args(args, {"out", "until"}, {"resume"}));
    if (cmd == "eval") return cmd_eval(parse_args(args, {"checkpoint", "split"}, {}));
    if (cmd == "generate")
      return cmd_generate(parse_args(args, {"checkpoint", "prompt", "tokens", "temperature", "top-k", "seed"}, {}));
    if (cmd == "infer") return cmd_infer(parse_args(args, {"checkpoint", "input", "output"}, {"hidden"}));
    if (cmd == "gradcheck") return cmd_gradcheck(parse_args(args, {}, {}));
    if (cmd == "info") return cmd_info(parse_args(args, {}, {}));
    if (cmd == "plot") return cmd_plot(parse_args(args, {}, {}));
  } catch (const UsageError& e) {
    std::fprintf(stderr, "remora %s: %s (see remora %s --help)\n", cmd.c_str(), one_line(e.what()).c_str(), cmd.c_str());
    return 2;
  } catch (const ConfigError& e) {
    std::fprintf(stderr, "remora %s: config error: %s\n", cmd.c_str(), one_line(e.what()).c_str());
    return 2;
  } catch (const InputError& e) {
    std::fprintf(stderr, "remora %s: %s\n", cmd.c_str(), one_line(e.what()).c_str());
    return 2;
  } catch (const RunError& e) {
    std::fprintf(stderr, "remora %s: %s\n", cmd.c_str(), one_line(e.what()).c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "remora %s: %s\n", cmd.c_str(), one_line(e.what()).c_str());
    return 1;
  }
  return 2;
}

}  // namespace driver
}  // namespace remora
