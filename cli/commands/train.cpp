// SPDX-License-Identifier: BSD-3-Clause
// `remora train`: a config turned into a train::Trainer run (train/trainer.h),
// which owns the loop, evaluation, checkpoints, metrics, the run directory's
// rules and signals. Under mpirun it trains one model data-parallel
// (docs/distributed.md): each rank its rows of the global batch, rank 0
// evaluating, writing checkpoints and metrics, the others quiet.
#include <algorithm>
#include <functional>
#include <csignal>
#include <cstdio>
#include <sstream>

#include "../../distributed/dist.h"
#include "../../train/trainer.h"
#include "../init_from.h"
#include "../input_checks.h"
#include "../memory_report.h"
#include "common.h"
#include "train_dist.h"

namespace remora {
namespace driver {
namespace {

std::string default_out(const std::string& config_path) {
  std::string base = config_path.substr(config_path.find_last_of('/') + 1);
  const size_t dot = base.rfind('.');
  if (dot != std::string::npos) base = base.substr(0, dot);
  return "out/" + base;
}

// A task's metrics (a flat JSON object of numbers, texts and lists) as a record.
train::Record record_of(const json& j) {
  train::Record r;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const json& v = it.value();
    if (v.is_number_integer()) r[it.key()] = v.get<int64_t>();
    else if (v.is_number()) r[it.key()] = v.get<double>();
    else if (v.is_string()) r[it.key()] = v.get<std::string>();
    else if (v.is_array() && std::all_of(v.begin(), v.end(), [](const json& x) { return x.is_number(); }))
      r[it.key()] = v.get<std::vector<double>>();
    else if (v.is_array()) r[it.key()] = v.get<std::vector<std::string>>();
    else r[it.key()] = v.dump();
  }
  return r;
}

// The driver's tasks as a Trainer's data source.
class ExperimentSource : public train::DataSource {
 public:
  explicit ExperimentSource(Experiment& ex) : ex_(ex) {}
  train::StepLoss train_loss(State& state) override {
    train::StepLoss s;
    s.loss = ex_.task->train_loss(ex_, state, &s.tokens);
    s.terms = ex_.task->loss_terms();
    return s;
  }
  train::Evaluation evaluate(const std::string& split, int64_t max_batches) override {
    const Metrics m = ex_.task->evaluate(ex_, split, max_batches);
    train::Evaluation e;
    e.loss = m.loss;
    e.score = ex_.task->score(m);
    e.metrics = record_of(ex_.metrics_json(m));
    return e;
  }
  int64_t position() const override { return ex_.data_position(); }
  void set_position(int64_t p) override { ex_.set_data_position(p); }
  void validate() override { ex_.task->check_splits(ex_.cfg); }
  void check_state(const nn::NamedTensors& carried, const std::string& path) override {
    check_carried_state(ex_, carried, path);
  }
  int64_t epoch_batches() const override { return ex_.task->epoch_batches(ex_.cfg); }
  void annotate_train_log(train::Record& line, double loss) const override {
    json extra = json::object();
    ex_.task->annotate_train_log(extra, loss);
    for (auto& kv : record_of(extra)) line[kv.first] = kv.second;
  }

 private:
  Experiment& ex_;
};

// --memory-report: the resident memory after the first and the last step.
class MemoryMarks : public train::Callback {
 public:
  MemoryMarks(MemoryReport& mem, int64_t end) : mem_(mem), end_(end) {}
  void on_step_end(train::Trainer&, int64_t step, double) override {
    if (mem_.on() && (step == 1 || step == end_)) mem_.mark("after step " + std::to_string(step));
  }

 private:
  MemoryReport& mem_;
  int64_t end_;
};

// The run's first line, once the run directory, the checkpoint and the data
// have passed their checks (so an error before it is one line).
class Banner : public train::Callback {
 public:
  Banner(const Config& cfg, const Experiment& ex, const DataShard& shard, const std::string& out)
      : cfg_(cfg), ex_(ex), shard_(shard), out_(out) {}
  void on_train_begin(train::Trainer& t) override {
    if (!t.main_rank()) return;
    const std::string attn_type = ex_.model_def().attention();
    const std::string attn = attn_type.empty() ? "" : " (" + attn_type + " attention)";
    std::fprintf(stderr, "model %s%s, %lld parameters, %d threads%s; writing %s\n", cfg_.model.type.c_str(),
                 attn.c_str(), (long long)ex_.model->num_parameters(), get_num_threads(),
                 cfg_.train.trainer.precision == Precision::bf16 ? ", bf16 autocast" : "", out_.c_str());
    if (shard_.world > 1)
      std::fprintf(stderr, "data parallel: %lld ranks x %lld rows of the global batch %lld\n",
                   (long long)shard_.world, (long long)shard_.rows(cfg_.data.batch_size),
                   (long long)cfg_.data.batch_size);
  }

 private:
  const Config& cfg_;
  const Experiment& ex_;
  DataShard shard_;
  std::string out_;
};

// The config keys a resumed run may change: how long it runs, how often it
// evaluates and logs, with how many threads, on which device.
const std::vector<std::string> kResumableKeys = {
    "/train/steps",       "/train/epochs",      "/train/eval_every",      "/train/eval_batches",
    "/train/log_every",   "/train/threads",     "/train/distributed",     "/train/max_memory",
    "/train/tensorboard", "/data/eval_batch_size", "/model/init_from",    "/device"};

// The help's sentence on kResumableKeys ("... only train.steps, ..., and device may
// change ..."), wrapped at 78 columns, its first line after the 10 of "holds it. ".
std::string resumable_keys_text() {
  std::string words = "A resumed run must use the checkpoint's settings: only";
  for (size_t i = 0; i < kResumableKeys.size(); ++i) {
    std::string k = kResumableKeys[i].substr(1);
    for (char& ch : k)
      if (ch == '/') ch = '.';
    words += (i == 0 ? " " : i + 1 == kResumableKeys.size() ? " and " : ", ") + k;
  }
  words += " may change, unless --allow-config-change (the change is then noted in metrics.jsonl).";
  std::string out, line;
  size_t col = 10;  // after "holds it. "
  std::istringstream in(words);
  for (std::string w; in >> w;) {
    if (!line.empty() && col + line.size() + 1 + w.size() > 78) {
      out += line + "\n";
      line.clear();
      col = 0;
    }
    line += (line.empty() ? "" : " ") + w;
  }
  return out + line;
}

// The files a training reads: its config and every data file its data
// section names (a relative path against the config's folder).
std::vector<std::string> run_inputs(const Args& a, const Config& cfg) {
  std::vector<std::string> files(a.positional.begin(), a.positional.end());
  std::function<void(const json&)> walk = [&](const json& j) {
    if (j.is_object() || j.is_array()) {
      for (const json& v : j) walk(v);
    } else if (j.is_string()) {
      const std::string p = j.get<std::string>();
      if (p.empty()) return;
      const std::string full = p[0] == '/' || cfg.base_dir.empty() ? p : cfg.base_dir + "/" + p;
      if (file_exists(full)) files.push_back(full);
    }
  };
  if (cfg.resolved.contains("data")) walk(cfg.resolved["data"]);
  return files;
}

int run_train(const Args& a) {
  Config cfg = config_of(a, "train");
  MemoryReport mem(a.flags.count("memory-report") > 0, cfg.device);
  mem.mark("startup (libraries, config)");
  const std::string out = a.opts.count("out") ? a.opts.at("out") : default_out(a.positional[0]);
  const bool resume = a.flags.count("resume") > 0, overwrite = a.flags.count("overwrite") > 0;
  if (resume && overwrite) throw UsageError("--resume and --overwrite exclude each other");
  const int64_t until = a.opts.count("until") ? to_int("until", a.opts.at("until"), 0, int64_t(1) << 40) : -1;
  // Under mpirun: every rank must run the same config and command line.
  const DataShard shard = start_distributed(
      cfg, cfg.resolved.dump() + "\n--out " + out + (resume ? " --resume" : "") + " --until " + std::to_string(until));
  // One GPU per rank: a CUDA config runs rank r on cuda:<its local rank>.
  if (shard.world > 1 && cfg.device.is_cuda()) cfg.device = Device::cuda(dist::local_rank());
  apply_threads(cfg);
  const bool main_rank = shard.rank == 0;  // writes checkpoints and metrics, prints

  // The train.* keys the Trainer takes are its options already (TrainConfig::trainer).
  train::TrainerOptions o = cfg.train.trainer;
  // A model.init_from that is not there fails before an earlier run is replaced.
  if (!resume && !cfg.model.init_from.empty()) init_source_file(cfg.model.init_from);
  if (main_rank) {
    // The run directory's rules (lock, no silent overwrite) before any work.
    train::RunDirectoryOptions ro;
    ro.resume = resume;
    ro.overwrite = overwrite;
    ro.name = "--out";
    ro.resume_flag = "--resume";
    ro.overwrite_flag = "--overwrite";
    ro.inputs = run_inputs(a, cfg);
    if (out.empty()) throw UsageError("--out is empty: name a directory for the run");
    o.run_dir = train::RunDirectory::open(out, ro);
  }
  std::string vocab;
  const std::string last = out + "/last.safetensors";
  bool full_checkpoint = false;  // not bare weights (which the Trainer refuses, saying why)
  if (resume) {
    // The metadata checked against the config before anything is built.
    const Checkpoint ck = read_checkpoint_info(last);
    full_checkpoint = !ck.weights_only;
    if (!ck.weights_only && cfg.data.batch_size % ck.world_size != 0)
      throw InputError(last + ": metadata \"world_size\" is " + std::to_string(ck.world_size) +
                       ", which does not divide data.batch_size " + std::to_string(cfg.data.batch_size) +
                       "; not a checkpoint of this config");
    vocab = ck.vocab_json;
  }
  ExperimentOptions eo;
  eo.vocab_json = vocab;
  eo.shard = shard;
  Experiment ex(cfg, eo);
  // A task with a vocabulary resumes only from a checkpoint that records it.
  if (full_checkpoint && vocab.empty() && !ex.vocab_json().empty())
    throw InputError(last + ": has no vocabulary in its metadata (\"vocab\"), but " + cfg.task +
                     " needs the one it was trained on; not a checkpoint of this config");
  mem.mark("data and model built");
  if (!resume && !cfg.model.init_from.empty()) {
    // A resumed run has its weights in last.safetensors already.
    const InitReport r = init_from(ex, cfg.model.init_from);
    if (main_rank) {
      std::fprintf(stderr, "model.init_from %s: %zu tensors loaded", cfg.model.init_from.c_str(), r.loaded.size());
      if (!r.head.empty()) std::fprintf(stderr, "; the task head initialised fresh (%zu tensors)", r.head.size());
      if (!r.fresh.empty()) std::fprintf(stderr, "; %zu tensors not in it initialised fresh (%s%s)", r.fresh.size(),
                                         r.fresh.front().c_str(), r.fresh.size() > 1 ? ", ..." : "");
      std::fprintf(stderr, "\n");
    }
  }
  if (!cfg.train.freeze.empty()) {
    const std::vector<std::string> frozen = freeze_parameters(*ex.model, cfg.train.freeze);
    if (main_rank) std::fprintf(stderr, "train.freeze: %zu parameters not trained\n", frozen.size());
  }
  std::unique_ptr<optim::Optimizer> opt = ex.make_optimizer();
  ExperimentSource source(ex);

  o.out_dir = out;
  o.until = until;
  o.lr = cfg.train.optimizer.lr;
  o.schedule = ex.schedule();
  o.resume = resume;
  o.overwrite = overwrite;
  o.config_json = cfg.resolved.dump();
  o.resumable_keys = kResumableKeys;
  // A checkpoint from an earlier version lacks the keys added since: read its
  // config with today's defaults so that those compare equal. Its data paths
  // are resolved already (joined to the config's folder): read as they are.
  o.normalize_config = [](const std::string& recorded) {
    return parse_config(json::parse(recorded), "").resolved.dump();
  };
  o.allow_config_change = a.flags.count("allow-config-change") > 0;
  o.allow_config_change_flag = "--allow-config-change";
  o.metadata = {{"vocab", ex.vocab_json()}, {"config", cfg.resolved.dump()}};
  o.config_file_json = cfg.resolved.dump(2) + "\n";
  o.divergence_hint = "try a lower train.optimizer.lr or train.clip";
  if (!o.best_metric.empty()) {
    // Named before any step: a metric the task does not report.
    const json reported = ex.metrics_json(Metrics{});
    std::string names;
    for (auto it = reported.begin(); it != reported.end(); ++it)
      if (it.value().is_number()) names += (names.empty() ? "" : ", ") + it.key();
    if (!reported.contains(o.best_metric) || !reported[o.best_metric].is_number())
      throw InputError("train.best_metric '" + o.best_metric + "' is not a metric of task " + cfg.task +
                       " (it reports " + names + ")");
  }
  if (o.epochs > 0 && ex.task->epoch_batches(cfg) <= 0)
    throw InputError("train.epochs: task " + cfg.task + " draws its training batches without end (data.type " +
                     cfg.data.type + "); give the run's length in train.steps");
  train::Trainer trainer(ex.model, *opt, source, o);
  if (main_rank) {
    trainer.add_callback(train::jsonl_sink(out + "/metrics.jsonl"));
    trainer.add_callback(train::progress_sink());
    if (cfg.train.tensorboard) trainer.add_callback(train::tensorboard_sink(out));
  }
  const int64_t end = trainer.options().last_step();  // with train.epochs, the resolved steps
  trainer.add_callback(std::make_shared<MemoryMarks>(mem, end));
  trainer.add_callback(std::make_shared<Banner>(cfg, ex, shard, out));

  const train::FitResult r = trainer.fit();
  if (r.interrupted) {
    if (main_rank)
      std::fprintf(stderr,
                   "stopped by %s after step %lld: the run is saved in %s/last.safetensors; continue it with "
                   "`remora train %s --out %s --resume`\n",
                   r.signal == SIGINT ? "SIGINT" : "SIGTERM", (long long)r.step, out.c_str(),
                   a.positional[0].c_str(), out.c_str());
    dist::finalize();
    return 128 + r.signal;
  }
  if (mem.on() && main_rank) {
    mem.mark("end (after the last evaluation)");
    double params = 0, grads = 0, state = 0;
    auto bytes = [](const Tensor& t) { return double(t.numel()) * double(dtype_size(t.dtype())); };
    for (const Tensor& p : ex.model->parameters()) {
      params += bytes(p);
      if (p.grad().defined()) grads += bytes(p.grad());
    }
    for (const auto& kv : opt->state()) state += bytes(kv.second);
    mem.set_bytes(params, grads, state);
    std::fprintf(stderr, "%s", mem.table().c_str());
  }
  if (main_rank && r.early_stopped)
    std::fprintf(stderr, "stopped early after step %lld: %lld evaluations without a better %s (train.early_stopping_patience)\n",
                 (long long)r.step, (long long)o.early_stopping_patience,
                 o.best_metric.empty() ? "score" : o.best_metric.c_str());
  if (main_rank)
    std::fprintf(stderr, "done: %lld steps in %.0fs; checkpoints in %s\n", (long long)r.step, trainer.elapsed(),
                 out.c_str());
  dist::finalize();
  return 0;
}

}  // namespace

Command train_command() {
  Command c;
  c.name = "train";
  c.summary = "train the model a config describes";
  c.positional = "CONFIG";
  c.positional_help = "the JSON config";
  c.config = true;
  c.options = {{"out", "DIR", "where checkpoints and metrics go (default out/<config name>)"},
               {"resume", "", "continue from DIR/last.safetensors"},
               {"overwrite", "", "replace an earlier run in DIR (its checkpoints and metrics are deleted)"},
               {"allow-config-change", "", "with --resume: accept settings that differ from the checkpoint's"},
               {"until", "STEP", "stop after STEP steps (saving last)"},
               {"memory-report", "", "print where the resident memory went (docs/benchmarks.md)"}};
  c.details = std::string(R"(Trains the model the config describes. Writes DIR/last.safetensors and
DIR/best.safetensors (weights, optimizer state, RNG and data position, the
resolved config), DIR/metrics.jsonl (one JSON object per log/eval point) and
DIR/config.json. --out defaults to out/<config name>. --resume continues from
DIR/last.safetensors; on CPU with the same thread count it reproduces the
uninterrupted run exactly. --until STEP stops after STEP steps (saving last),
so a long run can be split.

The run directory is protected: a directory that already holds a run is
refused unless --resume (continue it) or --overwrite (replace it) is given; a
second training into a directory in use fails at once naming the pid that
holds it. )") + resumable_keys_text() + R"(

SIGTERM or SIGINT (Ctrl-C, a scheduler's notice) finishes the current step,
saves DIR/last.safetensors and exits 143 / 130 saying how to resume; a second
signal exits at once.

Under mpirun (`mpirun -np N remora train CONFIG`) the ranks train one model
data-parallel: data.batch_size is the global batch, each rank takes its
batch_size / N rows (it must divide), gradients are averaged over the ranks;
rank 0 evaluates, writes the checkpoints and metrics, the others are quiet.
The options are the keys of train.distributed (remora config --keys); see
docs/distributed.md.)";
  c.run = run_train;
  return c;
}

}  // namespace driver
}  // namespace remora
