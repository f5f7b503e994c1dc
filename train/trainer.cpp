// SPDX-License-Identifier: BSD-3-Clause
#include "trainer.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>

#include "../backends/backend.h"
#include "../core/autograd.h"
#include "../core/file_io.h"
#include "../core/generator.h"
#include "../distributed/data_parallel.h"
#include "../distributed/dist.h"
#include "../ops/ops.h"
#include <nlohmann/json.hpp>
#include "dist_state.h"

namespace remora {
namespace train {

// ---------------------------------------------------------------- signals

namespace {

using Json = nlohmann::json;
std::atomic<int> g_signal{0};

extern "C" void on_stop_signal(int sig) {
  // The second signal ends the process at once, as without a handler.
  if (g_signal.exchange(sig) != 0) {
    ::signal(sig, SIG_DFL);
    ::raise(sig);
  }
}

// SIGTERM / SIGINT handlers for the life of a fit(); the previous ones come back after.
class SignalGuard {
 public:
  explicit SignalGuard(bool on) : on_(on) {
    if (!on_) return;
    g_signal = 0;
    struct sigaction sa;
    std::memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGTERM, &sa, &old_term_);
    ::sigaction(SIGINT, &sa, &old_int_);
  }
  ~SignalGuard() {
    if (!on_) return;
    ::sigaction(SIGTERM, &old_term_, nullptr);
    ::sigaction(SIGINT, &old_int_, nullptr);
    g_signal = 0;
  }

 private:
  bool on_;
  struct sigaction old_term_, old_int_;
};

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
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

// The leaves of a JSON value by JSON pointer ("/train/optimizer/lr").
void flatten(const Json& j, const std::string& at, std::map<std::string, Json>& out) {
  if (j.is_object() && !j.empty()) {
    for (auto it = j.begin(); it != j.end(); ++it) flatten(it.value(), at + "/" + it.key(), out);
  } else {
    out[at] = j;
  }
}

bool covered(const std::string& key, const std::vector<std::string>& prefixes) {
  for (const std::string& p : prefixes)
    if (key == p || (key.compare(0, p.size(), p) == 0 && key.size() > p.size() && key[p.size()] == '/'))
      return true;
  return false;
}

}  // namespace

// ---------------------------------------------------------------- records

std::string to_json(const Record& r) {
  Json j = Json::object();
  for (const auto& kv : r) std::visit([&](const auto& v) { j[kv.first] = v; }, kv.second);
  return j.dump();
}

// ---------------------------------------------------------------- the trainer

struct Trainer::Impl {
  std::unique_ptr<dist::DataParallel> dp;
  std::shared_ptr<RunDirectory> run;
};

Trainer::Trainer(std::shared_ptr<nn::Module> model, optim::Optimizer& opt, DataSource& data, TrainerOptions opts)
    : model_(std::move(model)), opt_(opt), data_(data), opts_(std::move(opts)), impl_(new Impl) {
  if (!model_) throw SetupError("Trainer: no model");
  if (opts_.out_dir.empty() && !opts_.run_dir) throw SetupError("Trainer: no run directory (TrainerOptions::out_dir)");
  if (opts_.run_dir) opts_.out_dir = opts_.run_dir->path();
  if (opts_.steps < 0 || opts_.eval_every < 0 || opts_.log_every < 1 || opts_.gradient_accumulation_steps < 1)
    throw SetupError("Trainer: steps and eval_every must be >= 0, log_every and gradient_accumulation_steps >= 1");
  if (!(opts_.epochs >= 0) || opts_.early_stopping_patience < 0 || !(opts_.early_stopping_min_delta >= 0) ||
      opts_.keep_best < 1)
    throw SetupError("Trainer: epochs, early_stopping_patience and early_stopping_min_delta must be >= 0, "
                     "keep_best >= 1");
  if (opts_.best_mode != "auto" && opts_.best_mode != "min" && opts_.best_mode != "max")
    throw SetupError("Trainer: best_mode must be auto, min or max, got '" + opts_.best_mode + "'");
  epoch_batches_ = data_.epoch_batches();
  if (opts_.epochs > 0) {
    if (epoch_batches_ <= 0)
      throw SetupError("Trainer: epochs needs data with a known length (DataSource::epoch_batches), but this "
                       "source draws its batches without end; give the run's length in steps instead");
    const double steps = std::ceil(opts_.epochs * double(epoch_batches_) /
                                   double(opts_.gradient_accumulation_steps) - 1e-9);
    if (steps > double(int64_t(1) << 40)) throw SetupError("Trainer: epochs makes more than 2^40 steps");
    opts_.steps = std::max<int64_t>(1, int64_t(steps));
    opts_.schedule.total_steps = opts_.steps;
  }
  rank_ = dist::rank();
  world_ = dist::world_size();
  lr_ = opts_.lr;
}

Trainer::~Trainer() = default;

void Trainer::add_callback(std::shared_ptr<Callback> cb) { callbacks_.push_back(std::move(cb)); }

double Trainer::elapsed() const { return now_s() - t0_; }

void Trainer::log(const Record& record) {
  if (!main_rank()) return;
  for (auto& cb : callbacks_) cb->on_log(*this, record);
}

void Trainer::save(const std::string& path) {
  if (!main_rank()) return;
  CheckpointInfo c;
  c.world_size = world_;
  c.data_positions = positions_;
  c.step = step_;
  c.rng_seed = default_generator().seed();
  c.rng_offset = default_generator().offset();
  c.data_position = data_.position();
  c.best_valid = best_;
  c.extra = opts_.metadata;
  Json kept = Json::array();
  for (const auto& k : kept_) kept.push_back({k.first, k.second});
  c.extra["kept_best"] = kept.dump();
  c.extra["evals_since_best"] = std::to_string(evals_since_best_);
  save_checkpoint(path, *model_, &opt_, world_ > 1 ? ckpt_state_ : state_, c);
  for (auto& cb : callbacks_) cb->on_checkpoint(*this, path);
}

void Trainer::resume_from_last() {
  const std::string last = last_path();
  CheckpointParts p;
  try {
    p = split_checkpoint(load_safetensors(last), last);
  } catch (const SetupError&) {
    throw;
  } catch (const OutOfMemoryError&) {
    throw;  // the run's failure, not the checkpoint's
  } catch (const Error& e) {
    throw SetupError(std::string("checkpoint: ") + e.what());
  }
  if (p.info.weights_only)
    throw SetupError(last + ": a bare weights file (no \"format\": \"remora-checkpoint\" metadata) has no "
                     "optimizer state, step or RNG state to resume from");
  // The configuration the checkpoint was trained with must be the one resumed.
  std::vector<std::string> changes;
  std::string old_config = p.info.get("config");
  if (opts_.normalize_config && !old_config.empty()) {
    try {
      old_config = opts_.normalize_config(old_config);
    } catch (const std::exception&) {
      // compared as recorded: every difference is named below
    }
  }
  if (!opts_.config_json.empty() && !old_config.empty()) {
    std::map<std::string, Json> a, b;
    try {
      flatten(Json::parse(old_config), "", a);
    } catch (const Json::exception&) {
      throw SetupError(last + ": metadata \"config\" is not valid JSON");
    }
    flatten(Json::parse(opts_.config_json), "", b);
    for (const auto& kv : b) {
      if (covered(kv.first, opts_.resumable_keys)) continue;
      auto it = a.find(kv.first);
      const std::string was = it == a.end() ? "(absent)" : it->second.dump();
      if (it == a.end() || it->second != kv.second) changes.push_back(kv.first + " " + was + " -> " + kv.second.dump());
    }
    for (const auto& kv : a)
      if (!b.count(kv.first) && !covered(kv.first, opts_.resumable_keys))
        changes.push_back(kv.first + " " + kv.second.dump() + " -> (absent)");
    if (!changes.empty() && !opts_.allow_config_change) {
      std::string list;
      for (const std::string& c : changes) list += (list.empty() ? "" : ", ") + c;
      throw SetupError("--resume: the configuration differs from the one " + last + " was trained with (" + list +
                       "); resume with the same settings, or accept the change with " + opts_.allow_config_change_flag +
                       " (it is then recorded in metrics.jsonl)");
    }
  }
  try {
    model_->load_state_dict(p.weights);
  } catch (const Error& e) {
    throw SetupError(last + " does not fit the config: " + e.what());
  }
  if (p.optimizer.empty()) throw SetupError(last + ": has no optimizer state to resume from");
  try {
    opt_.load_state(p.optimizer);
  } catch (const Error& e) {
    throw SetupError(last + ": optimizer state: " + e.what());
  }
  const std::vector<Tensor> params = model_->parameters();
  // The carried tensors in the model's dtype and device, converted once; the
  // named list holds them in layer order, mems, then rem, then cells.
  nn::NamedTensors named;
  for (auto& kv : p.state_named)
    named.emplace_back(kv.first, kv.second.to(params.front().dtype()).to(params.front().device()));
  data_.check_state(named, last);
  models::SequenceState st;
  const size_t n_mems = p.state.mems.size(), n_rem = p.state.rem_states.size();
  for (size_t i = 0; i < named.size(); ++i)
    (i < n_mems ? st.mems : i < n_mems + n_rem ? st.rem_states : st.cells).push_back(named[i].second);
  step_ = p.info.step;
  best_ = p.info.best_valid;
  restore_best_state(p.info);
  default_generator().set_state(p.info.rng_seed, p.info.rng_offset);
  data_.set_position(p.info.data_position);
  // A checkpoint holds the global batch's carried state, so any world size that
  // divides the batch takes its rows of it.
  state_ = shard_state(st, rank_, world_);
  if (main_rank()) {
    std::fprintf(stderr, "resumed from %s at step %lld\n", last.c_str(), (long long)step_);
    if (p.info.world_size != world_)
      std::fprintf(stderr,
                   "note: %s was written by %lld process(es), resuming with %lld: the data is re-sharded "
                   "(the same global batches and state); the run continues the same training, equal up to "
                   "float summation order but not bit-identical to continuing with %lld\n",
                   last.c_str(), (long long)p.info.world_size, (long long)world_, (long long)p.info.world_size);
  }
  resumed_changes_ = changes;
}

void Trainer::evaluate_and_checkpoint() {
  if (world_ > 1) {
    ckpt_state_ = gather_state(state_, rank_, world_);
    positions_ = gather_data_positions(data_.position());
    if (!main_rank()) {
      // Rank 0 evaluates the whole split (the metrics of a one-process run) and
      // writes the checkpoint; the others wait for it under their own bound.
      wait_for_main_rank("evaluation and checkpoint");
      ckpt_state_ = {};
      return;
    }
  }
  Evaluation e;
  {
    // The blocks the training steps freed are cached for the next step; the
    // evaluation's batches have other shapes (eval_batch_size), so its tensors
    // would come on top of that cache. Released first, the peak is the larger
    // of the two, not their sum (the training step faults its blocks back in).
    const std::vector<Tensor> params = model_->parameters();
    if (!params.empty()) backend(params.front().device()).empty_cache();
    NoGradGuard ng;
    nn::ModeGuard eval_mode(*model_, false);  // restored also when the source throws
    e = data_.evaluate("valid", opts_.eval_batches);
  }
  // A finite training loss does not mean finite weights: the update after it can
  // overflow. Never let such weights overwrite the last good checkpoint.
  if (!std::isfinite(e.loss) || !all_finite(*model_))
    throw TrainingFailure("the " + std::string(std::isfinite(e.loss) ? "weights" : "validation loss") +
                          " became non-finite after step " + std::to_string(step_) + "; the last good checkpoint is " +
                          last_path() + " (" + opts_.divergence_hint + ")");
  const double score = score_of(e);
  Record j = e.metrics;
  j["step"] = step_;
  if (epoch_batches_ > 0) j["epoch"] = epoch();
  j["split"] = std::string("valid");
  j["lr"] = lr_;
  j["tokens_per_s"] = tok_s_;
  j["elapsed"] = elapsed();
  log(j);
  for (auto& cb : callbacks_) cb->on_evaluate(*this, step_, e);
  // `best` (and a kept checkpoint) is written before `last` records its score,
  // so a kill between the two leaves best.safetensors at least as good as the
  // best `last` remembers (and at worst a kept file `last` does not list, which
  // a resume deletes).
  // The kept checkpoints and the patience count see the evaluations every run
  // of the config makes (each eval_every steps, and the last step), not one
  // made where --until stopped a run, so that a run split by resumes keeps the
  // same files and stops where the uninterrupted run does.
  if ((opts_.eval_every > 0 && step_ % opts_.eval_every == 0) || step_ == opts_.steps) {
    evals_since_best_ = score < best_ - opts_.early_stopping_min_delta ? 0 : evals_since_best_ + 1;
    keep_if_among_best(score);
  }
  if (score < best_) {
    best_ = score;
    save(best_path());
  }
  save(last_path());
  if (world_ > 1) {
    ckpt_state_ = {};
    wait_for_main_rank("evaluation and checkpoint");
  }
}

double Trainer::score_of(const Evaluation& e) const {
  const std::string& name = opts_.best_metric;
  if (name.empty()) return e.score;
  const auto it = e.metrics.find(name);
  const double* d = it == e.metrics.end() ? nullptr : std::get_if<double>(&it->second);
  const int64_t* i = it == e.metrics.end() ? nullptr : std::get_if<int64_t>(&it->second);
  if (!d && !i) {
    std::string numbers;
    for (const auto& kv : e.metrics)
      if (std::holds_alternative<double>(kv.second) || std::holds_alternative<int64_t>(kv.second))
        numbers += (numbers.empty() ? "" : ", ") + kv.first;
    throw SetupError("best_metric '" + name + "' is not a number the evaluation reports (it reports " + numbers +
                     ")");
  }
  const double v = d ? *d : double(*i);
  if (!std::isfinite(v))
    throw TrainingFailure("the validation " + name + " became non-finite after step " + std::to_string(step_) +
                          "; the last good checkpoint is " + last_path());
  bool maximize = opts_.best_mode == "max";
  if (opts_.best_mode == "auto") {
    static const char* const kHigherIsBetter[] = {"accuracy", "f1", "matthews", "pearson", "spearman"};
    for (const char* h : kHigherIsBetter) maximize = maximize || name == h;
    const std::string acc = "accuracy";
    maximize = maximize || (name.size() > acc.size() && name.compare(name.size() - acc.size(), acc.size(), acc) == 0);
  }
  return maximize ? -v : v;
}

namespace {
std::string kept_file(const std::string& dir, int64_t step) {
  return dir + "/best-step" + std::to_string(step) + ".safetensors";
}
}  // namespace

void Trainer::keep_if_among_best(double score) {
  if (opts_.keep_best <= 1 || !main_rank()) return;
  const size_t k = size_t(opts_.keep_best);
  if (kept_.size() >= k && !(score < kept_.back().first)) return;
  // Ties keep the earlier evaluation ahead.
  auto at = std::upper_bound(kept_.begin(), kept_.end(), std::make_pair(score, step_),
                             [](const std::pair<double, int64_t>& a, const std::pair<double, int64_t>& b) {
                               return a.first < b.first;
                             });
  kept_.insert(at, {score, step_});
  std::vector<int64_t> dropped;
  while (kept_.size() > k) {
    dropped.push_back(kept_.back().second);
    kept_.pop_back();
  }
  save(kept_file(opts_.out_dir, step_));
  for (int64_t s : dropped) ::unlink(kept_file(opts_.out_dir, s).c_str());
}

void Trainer::restore_best_state(const CheckpointInfo& info) {
  kept_.clear();
  evals_since_best_ = 0;
  const std::string last = last_path();
  try {
    const std::string kept = info.get("kept_best"), since = info.get("evals_since_best");
    if (!kept.empty())
      for (const Json& k : Json::parse(kept)) kept_.emplace_back(k.at(0).get<double>(), k.at(1).get<int64_t>());
    if (!since.empty()) evals_since_best_ = std::stoll(since);
  } catch (const std::exception& e) {
    throw SetupError(last + ": metadata \"kept_best\" / \"evals_since_best\" is malformed (" + e.what() + ")");
  }
  if (!main_rank()) return;
  // The files agree with the list `last` holds: a kept file it does not list
  // (written before a kill) is removed, a listed file that is gone is dropped.
  std::vector<std::pair<double, int64_t>> present;
  for (const auto& k : kept_)
    if (::access(kept_file(opts_.out_dir, k.second).c_str(), F_OK) == 0) present.push_back(k);
  kept_ = present;
  for (const std::string& f : RunDirectory::kept_best_files(opts_.out_dir)) {
    bool listed = false;
    for (const auto& k : kept_) listed = listed || f == kept_file(opts_.out_dir, k.second);
    if (!listed && ::unlink(f.c_str()) == 0)
      std::fprintf(stderr, "removed %s (a kept checkpoint %s does not list)\n", f.c_str(), last.c_str());
  }
}

bool Trainer::stop_early() {
  if (opts_.early_stopping_patience <= 0) return false;
  int64_t stop = main_rank() && evals_since_best_ >= opts_.early_stopping_patience ? 1 : 0;
  if (world_ > 1) {
    Tensor t = Tensor::from_vector(std::vector<int64_t>{stop}, {1}, DType::i64);
    dist::all_reduce(t, dist::ReduceOp::sum);
    stop = t.to_i64_vector()[0];
  }
  return stop != 0;
}

double Trainer::epoch() const {
  return epoch_batches_ > 0 ? double(step_ * opts_.gradient_accumulation_steps) / double(epoch_batches_) : 0;
}

void Trainer::wait_for_main_rank(const std::string& what) {
  // Every rank calls it; rank 0 arrives last (it evaluated and wrote the files):
  // the others wait for it at most the evaluation's bound, and a stuck rank 0 is named.
  double bound = opts_.distributed.eval_timeout_s;
  if (bound < 0) {
    const int64_t batches =
        opts_.eval_batches > 0 ? opts_.eval_batches : DistributedOptions::kWholeSplitBatches;
    bound = dist::timeout() * double(batches + 1);  // 0 (forever) when the collectives wait forever
  }
  dist::wait_for_rank(0, bound, what);
}

bool Trainer::stop_requested() {
  if (!opts_.handle_signals) return false;
  int sig = g_signal.load();
  if (world_ > 1) {
    // Every rank stops at the same step: the first signal seen by any rank.
    Tensor t = Tensor::from_vector(std::vector<int64_t>{sig}, {1}, DType::i64);
    dist::all_reduce(t, dist::ReduceOp::sum);
    if (sig == 0 && t.to_vector()[0] != 0) sig = SIGTERM;  // another rank's signal
  }
  if (sig != 0) stop_signal_ = sig;
  return sig != 0;
}

Trainer::StepResult Trainer::backward_batch() {
  // The previous step's gradients are released before the forward, not after
  // it: they would otherwise be live beside every activation (the step's peak).
  opt_.zero_grad();
  std::optional<AutocastGuard> autocast;  // this step's forward and backward
  autocast.emplace(opts_.precision);
  model_->train();
  StepLoss sl = data_.train_loss(state_);
  Tensor loss = sl.loss;
  int64_t tokens = sl.tokens;
  double lv = loss.item();
  bool backward = true;
  if (world_ > 1) {
    // The loss of the global batch: each rank's mean weighted by its terms.
    // Re-weighting the local loss by terms * world / global_terms makes the
    // averaged gradient the gradient of that global mean (a factor of 1 when
    // every rank has the same count). A rank whose rows have no term runs no
    // backward (DataParallel counts its gradients as zeros).
    const double terms = double(sl.terms);
    backward = terms > 0;
    Tensor sums = Tensor::from_vector(std::vector<double>{backward ? lv * terms : 0.0, terms, double(tokens)}, {3},
                                      DType::f64);
    dist::all_reduce(sums, dist::ReduceOp::sum);
    const std::vector<double> g = sums.to_vector();
    lv = g[0] / g[1];
    tokens = int64_t(g[2]);
    const double scale = terms * double(world_) / g[1];
    if (backward && scale != 1.0) loss = mul(loss, Tensor::scalar(scale, loss.dtype(), loss.device()));
  }
  check_finite_loss(lv);
  if (backward) loss.backward();
  autocast.reset();  // clipping, the optimizer and evaluation in f32
  if (impl_->dp) impl_->dp->sync_gradients();  // every gradient = the mean over ranks
  return {lv, tokens};
}

Trainer::StepResult Trainer::backward_micro_batches() {
  // Each micro-batch's mean loss times its terms is back-propagated (its sum
  // over terms; the gradients add up), and the sum of the gradients is divided
  // by the terms of all micro-batches of all ranks once they are known: the
  // gradient of the mean over the step's whole batch, whatever each
  // micro-batch holds. The ranks reduce their gradients once, in the last
  // micro-batch's backward.
  opt_.zero_grad();
  double loss_sum = 0, terms = 0, tokens = 0;
  const int64_t n = opts_.gradient_accumulation_steps;
  for (int64_t k = 0; k < n; ++k) {
    AutocastGuard autocast(opts_.precision);
    model_->train();
    StepLoss sl = data_.train_loss(state_);
    const double lv = sl.loss.item(), t = double(sl.terms);
    tokens += double(sl.tokens);
    if (t <= 0) continue;
    loss_sum += lv * t;
    terms += t;
    if (world_ == 1) check_finite_loss(loss_sum / terms);
    if (impl_->dp) impl_->dp->set_grad_sync(k == n - 1);
    mul(sl.loss, Tensor::scalar(t, sl.loss.dtype(), sl.loss.device())).backward();
  }
  if (impl_->dp) impl_->dp->set_grad_sync(true);
  if (world_ > 1) {
    Tensor sums = Tensor::from_vector(std::vector<double>{loss_sum, terms, tokens}, {3}, DType::f64);
    dist::all_reduce(sums, dist::ReduceOp::sum);
    const std::vector<double> g = sums.to_vector();
    loss_sum = g[0], terms = g[1], tokens = g[2];
  }
  const double lv = terms > 0 ? loss_sum / terms : NAN;
  check_finite_loss(lv);
  if (impl_->dp) impl_->dp->sync_gradients();  // the mean over ranks of each rank's sum
  const double scale = double(world_) / terms;
  NoGradGuard ng;
  for (const Tensor& p : model_->parameters()) {
    Tensor g = p.grad();  // an alias: scaled in place
    if (g.defined()) g.mul_(scale);
  }
  return {lv, int64_t(tokens)};
}

void Trainer::check_finite_loss(double lv) const {
  if (!std::isfinite(lv))
    throw TrainingFailure("the training loss became " + std::string(std::isnan(lv) ? "NaN" : "Inf") + " at step " +
                          std::to_string(step_ + 1) + "; the last good checkpoint is " + last_path() + " (" +
                          opts_.divergence_hint + ")");
}

FitResult Trainer::fit() {
  SignalGuard signals(opts_.handle_signals);
  t0_ = now_s();
  if (main_rank()) {
    if (opts_.run_dir) {
      impl_->run = opts_.run_dir;
    } else {
      RunDirectoryOptions ro;
      ro.resume = opts_.resume;
      ro.overwrite = opts_.overwrite;
      impl_->run = RunDirectory::open(opts_.out_dir, ro);
    }
  }
  best_ = INFINITY;
  if (opts_.resume) resume_from_last();
  // Data parallel: rank 0's weights everywhere (checked by hash), gradients
  // averaged in buckets that start during backward. Not built in a world of one.
  if (world_ > 1) {
    dist::DataParallelOptions o;
    o.bucket_bytes = size_t(opts_.distributed.bucket_mb * double(1 << 20));
    o.overlap = true;
    o.check_every = int(std::min<int64_t>(opts_.distributed.check_every, 1 << 30));
    impl_->dp = std::make_unique<dist::DataParallel>(model_, o);
    // Dropout masks: every rank its own stream of the default generator. Rank 0
    // keeps the one-process stream; rank r's seed is derived from it, and the
    // offsets advance alike (equal shapes on every rank), so a checkpoint's
    // (rank 0 seed, offset) restores every rank's stream on resume.
    Generator& g = default_generator();
    g.set_state(g.seed() + 0x9E3779B97F4A7C15ull * uint64_t(rank_), g.offset());
  }
  if (main_rank() && !opts_.config_file_json.empty()) {
    try {
      write_file_atomic(opts_.out_dir + "/config.json", opts_.config_file_json, "config.json");
    } catch (const Error& e) {
      throw TrainingFailure(e.what());
    }
  }
  data_.validate();
  for (auto& cb : callbacks_) cb->on_train_begin(*this);
  if (!resumed_changes_.empty()) {
    log(Record{{"step", step_}, {"split", std::string("note")}, {"config_changed_on_resume", resumed_changes_}});
  }

  const int64_t end = opts_.last_step();
  int64_t window_tokens = 0;
  bool released_first_step = false;  // the allocator's cache, once after this process's first step
  double window_start = elapsed();
  lr_ = opts_.lr;
  tok_s_ = 0;
  FitResult result;
  for (; step_ < end;) {
    for (auto& cb : callbacks_) cb->on_step_begin(*this, step_ + 1);
    lr_ = opts_.lr * opts_.schedule.lr_at(step_ + 1);
    opt_.set_lr(lr_);
    const StepResult mb = opts_.gradient_accumulation_steps == 1 ? backward_batch() : backward_micro_batches();
    const double lv = mb.loss;
    const int64_t tokens = mb.tokens;
    if (opts_.clip > 0) optim::clip_grad_norm_(model_->parameters(), opts_.clip);
    opt_.step();
    ++step_;
    if (!released_first_step) {
      // The first step's blocks fit little of what follows (a Transformer-XL's
      // first step has no memory yet: its keys are Lq long, every later step's
      // Lq + mem_len), yet the caching allocator would keep them all. Handing
      // them back once keeps them out of the peak.
      const std::vector<Tensor> ps = model_->parameters();
      if (!ps.empty()) backend(ps.front().device()).empty_cache();
      released_first_step = true;
    }
    for (auto& cb : callbacks_) cb->on_step_end(*this, step_, lv);
    window_tokens += tokens;
    if (step_ % opts_.log_every == 0 || step_ == end) {
      const double now = elapsed();
      tok_s_ = double(window_tokens) / std::max(1e-9, now - window_start);
      window_tokens = 0;
      window_start = now;
      Record j{{"step", step_}, {"split", std::string("train")}, {"loss", lv}, {"lr", lr_}, {"tokens_per_s", tok_s_},
               {"elapsed", now}};
      if (epoch_batches_ > 0) j["epoch"] = epoch();
      data_.annotate_train_log(j, lv);
      log(j);
    }
    if (opts_.eval_every > 0 && step_ % opts_.eval_every == 0) {
      evaluate_and_checkpoint();
      if (step_ < end && stop_early()) {
        const std::string what = opts_.best_metric.empty() ? "the score" : opts_.best_metric;
        log(Record{{"step", step_},
                   {"split", std::string("note")},
                   {"early_stopping", "no improvement of " + what + " in " +
                                          std::to_string(opts_.early_stopping_patience) + " evaluations"}});
        result.early_stopped = true;
        break;
      }
    }
    if (step_ < end && stop_requested()) {
      // Finish as a scheduler expects: the step is complete; keep it in `last`.
      if (world_ > 1) {
        ckpt_state_ = gather_state(state_, rank_, world_);
        positions_ = gather_data_positions(data_.position());
      }
      if (!(opts_.eval_every > 0 && step_ % opts_.eval_every == 0)) save(last_path());
      ckpt_state_ = {};
      if (world_ > 1) wait_for_main_rank("the checkpoint before stopping");
      result.interrupted = true;
      result.signal = stop_signal_;
      break;
    }
  }
  // The end evaluates unless the last step just did (a run of 0 steps
  // evaluates and saves its starting point).
  if (!result.interrupted && (step_ == 0 || opts_.eval_every == 0 || step_ % opts_.eval_every != 0))
    evaluate_and_checkpoint();
  result.step = step_;
  result.best = best_;
  for (auto& cb : callbacks_) cb->on_train_end(*this, result);
  return result;
}

}  // namespace train
}  // namespace remora
