// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// remora::train::Trainer — the training loop as a library.
///
/// A Trainer owns one run: model, optimizer, LR schedule, a data source,
/// periodic evaluation, checkpoints (atomic, `last` and `best` kept consistent,
/// exact resume), carried sequence state across segments, data parallelism
/// under mpirun, gradient clipping, bf16 autocast, metric sinks and the rules
/// of the run directory (an exclusive lock, no silent overwrite of an earlier
/// run, SIGTERM / SIGINT answered with a checkpoint). The `remora train` command
/// is a client of it; a research prototype uses it the same way:
///
/// \code
///   struct MyData : train::DataSource { ... };        // batches, loss, evaluation
///   auto model = std::make_shared<MyNet>();
///   optim::AdamW opt(model->parameters(), 1e-3);
///   MyData data;
///   train::TrainerOptions o;
///   o.out_dir = "runs/mine";  o.steps = 1000;  o.eval_every = 100;
///   o.resume = train::RunDirectory::has_checkpoint(o.out_dir);
///   train::Trainer t(model, opt, data, o);
///   train::FitResult r = t.fit();  // r.interrupted: stopped by a signal, `last` saved
/// \endcode
///
/// Determinism: on the CPU with the same thread count, a run stopped at any
/// step (--until, a signal, a kill after a checkpoint) and resumed reproduces
/// the uninterrupted run bit for bit: the checkpoint holds the weights, the
/// optimizer state, the default generator's (seed, offset), the data position
/// and the carried state.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "../core/autocast.h"
#include "../core/tensor.h"
#include "../models/sequence_model.h"
#include "../nn/module.h"
#include "../nn/optim.h"
#include "checkpoint.h"
#include "run_dir.h"

namespace remora {
namespace train {

/// One value of a metrics record: a number, an integer, a text, a list of
/// numbers (per-bin accuracies) or of texts.
using MetricValue = std::variant<double, int64_t, std::string, std::vector<double>, std::vector<std::string>>;
/// A metrics record: {"step": 100, "split": "valid", "loss": 1.23, ...}. The
/// JSON-lines sink writes it as one JSON object with the keys in this order.
using Record = std::map<std::string, MetricValue>;
/// The record as one line of JSON (no newline).
std::string to_json(const Record& r);

/// A problem with what the run was given (the run directory, the checkpoint to
/// resume from, a changed configuration): nothing was trained. `remora` exits 2.
class SetupError : public Error {
 public:
  /// An error with message \p m.
  explicit SetupError(const std::string& m) : Error(m) {}
};
/// A failure during training (a non-finite loss or weights). The last good
/// checkpoint is never overwritten. `remora` exits 1.
class TrainingFailure : public Error {
 public:
  /// An error with message \p m.
  explicit TrainingFailure(const std::string& m) : Error(m) {}
};

/// One training step's loss, as a data source computes it.
struct StepLoss {
  Tensor loss;         ///< A scalar with its graph attached (the Trainer calls backward on it).
  int64_t tokens = 0;  ///< Tokens (or examples) predicted: for tokens/s.
  /// How many terms `loss` averages over on this rank. Data parallel: each
  /// rank's mean is re-weighted by it so that the averaged gradient is that of
  /// the mean over the global batch; a rank with 0 terms runs no backward.
  int64_t terms = 1;
};

/// One evaluation.
struct Evaluation {
  double loss = 0;   ///< Must be finite: a non-finite loss stops the run (TrainingFailure).
  double score = 0;  ///< Picks `best` (lower is better).
  /// Written to the metrics sinks as they are ({"loss": ...}), with "step",
  /// "split": "valid", "lr", "tokens_per_s" and "elapsed" added.
  Record metrics;
};

/// What a Trainer trains on. Every rank of a data-parallel run has its own
/// source holding its rows of the global batch (see docs/distributed.md).
class DataSource {
 public:
  virtual ~DataSource() = default;  ///< Virtual: sources are used through this base.
  /// The loss of the next training batch (the model is in train mode and
  /// bf16 autocast is on when asked). `state` is the carried sequence state:
  /// update it for the next segment, or leave it empty.
  virtual StepLoss train_loss(models::SequenceState& state) = 0;
  /// Evaluates on `split` ("valid"; up to max_batches batches, 0 = all). The
  /// model is in eval mode under a NoGradGuard.
  virtual Evaluation evaluate(const std::string& split, int64_t max_batches) = 0;
  /// The position in the training data, stored in checkpoints. Batches must
  /// be a pure function of it (and of generators seeded from it), so that a
  /// resumed run draws the same batches.
  virtual int64_t position() const = 0;
  /// Moves to position \p p (a value position() returned), on resume.
  virtual void set_position(int64_t p) = 0;
  /// Called before the first step: throw (a SetupError or any remora::Error)
  /// when a split cannot make one evaluation batch, so the problem shows
  /// before hours of training rather than at the first evaluation.
  virtual void validate() {}
  /// Called on resume with the checkpoint's carried state: throw when it does
  /// not fit the model.
  virtual void check_state(const nn::NamedTensors& carried, const std::string& path) {}
  /// Extra keys of a training log line ({"bpc": ...}).
  virtual void annotate_train_log(Record& line, double loss) const {}
  /// The batches of one pass over the training data (the global batch's
  /// count); 0 when the data has no end (generated, or streamed without a
  /// known length). Needed by TrainerOptions::epochs; when known, the metrics
  /// records carry "epoch" (the passes completed, fractional).
  virtual int64_t epoch_batches() const { return 0; }
};

struct FitResult;
class Trainer;

/// Hooks at the usual points of the loop. Every method has an empty default;
/// callbacks run in the order they were added, on every rank except where a
/// method says rank 0 only.
class Callback {
 public:
  virtual ~Callback() = default;  ///< Virtual: callbacks are held through this base.
  /// Before the first step, after the run directory is opened, a resume is
  /// loaded and the data source is validated.
  virtual void on_train_begin(Trainer& t) {}
  /// Before step \p step runs (1-based: the one about to run).
  virtual void on_step_begin(Trainer& t, int64_t step) {}
  /// After step \p step's update; \p loss is the step's training loss (in a
  /// data-parallel run, the mean over the global batch).
  virtual void on_step_end(Trainer& t, int64_t step, double loss) {}
  /// A metrics record: {"step", "split": "train" | "valid" | "note", ...}. Rank 0 only.
  virtual void on_log(Trainer& t, const Record& record) {}
  /// After an evaluation at step \p step, before its checkpoints are written. Rank 0 only.
  virtual void on_evaluate(Trainer& t, int64_t step, const Evaluation& e) {}
  /// After a checkpoint file is complete on disk (atomically renamed into place). Rank 0 only.
  virtual void on_checkpoint(Trainer& t, const std::string& path) {}
  /// When fit() returns (also after an interruption by a signal).
  virtual void on_train_end(Trainer& t, const FitResult& r) {}
};

/// Writes each record as one JSON line to DIR/metrics.jsonl (rank 0). On resume
/// the lines after the resumed step are dropped first, so the file reads as one
/// uninterrupted run.
std::shared_ptr<Callback> jsonl_sink(const std::string& path);
/// The terminal line: step, loss, tokens/s, ETA (a carriage-return line on a
/// terminal, one line per log point otherwise) and the validation lines.
std::shared_ptr<Callback> progress_sink();
/// Writes the same records as TensorBoard scalars ("train/loss", "valid/bpc", ...)
/// to DIR/events.out.tfevents.* (rank 0; train/tensorboard.h). A resumed run's
/// file starts with a restart at the resumed step, so TensorBoard drops the
/// points an interrupted run wrote after it.
std::shared_ptr<Callback> tensorboard_sink(const std::string& dir);

/// Data parallelism under mpirun (docs/distributed.md); unused in a
/// one-process run. The driver's keys train.distributed.bucket_mb, check_every
/// and eval_timeout_s are these members, with these defaults.
struct DistributedOptions {
  double bucket_mb = 1.0;    ///< Gradient all-reduce bucket size (MiB).
  /// Compare the weights' hash across ranks every N steps (0: only at the start).
  int64_t check_every = 100;
  /// How long the other ranks wait for rank 0's evaluation and checkpoint before
  /// the job is ended as stuck (seconds; 0 = forever). Negative (the default):
  /// derived from the run, the collectives' bound (dist::timeout(), a step's
  /// budget) once per evaluation batch and once more for the checkpoint:
  /// timeout * (eval_batches + 1), a whole-split evaluation (eval_batches 0)
  /// counted as kWholeSplitBatches; 0 when the collectives wait forever.
  double eval_timeout_s = -1;
  /// The batches a whole-split evaluation counts for in the derived bound.
  static constexpr int64_t kWholeSplitBatches = 1000;
};

/// What a Trainer runs and how (docs/trainer.md). The driver's keys
/// train.steps, eval_every, eval_batches, log_every, clip, precision and
/// train.distributed.* are its members, with its defaults (docs/config_keys.md);
/// the driver adds the run's own settings. Invalid counts throw SetupError from
/// the Trainer's constructor.
struct TrainerOptions {
  std::string out_dir;           ///< The run directory (required unless run_dir is given).
  int64_t steps = 1000;          ///< The run's length (the schedule's total; >= 0).
  /// Stop after this step (evaluating and saving `last` there); -1: run to `steps`.
  int64_t until = -1;
  /// Evaluate and checkpoint every N steps (>= 0; 0: only at the end). The end
  /// of fit() always evaluates and checkpoints unless it just did.
  int64_t eval_every = 200;
  int64_t eval_batches = 20;     ///< Batches per evaluation (0: the whole split).
  int64_t log_every = 10;        ///< A training metrics record every N steps (>= 1), and at the last step.
  double lr = 1e-3;              ///< The base learning rate (the schedule's peak).
  optim::LRSchedule schedule;    ///< lr at step s = lr * schedule.lr_at(s)
  double clip = 0;               ///< Clip the global gradient norm to this (0: off).
  /// Micro-batches per optimizer step (>= 1): the step's gradient is that of
  /// the mean loss over all their terms (StepLoss::terms), as one batch this
  /// many times larger would give, in the memory of one micro-batch. Under
  /// data parallelism the gradients are averaged once per step.
  int64_t gradient_accumulation_steps = 1;
  /// bf16: forward and backward under autocast; clipping, the optimizer and
  /// evaluation stay f32.
  Precision precision = Precision::f32;
  /// Continue from out_dir/last.safetensors (which must exist; else SetupError).
  bool resume = false;
  bool overwrite = false;        ///< Replace an earlier run in out_dir (its files are removed first).
  /// Reads a `--resume` checkpoint's "config" metadata against config_json:
  /// a difference outside `resumable_keys` (JSON pointers; a prefix covers a
  /// section) is a SetupError naming the keys unless allow_config_change,
  /// which records a {"split": "note"} record instead.
  std::string config_json;
  /// JSON pointers ("/train/steps") of the config_json keys that may change on
  /// resume; a pointer covers everything below it.
  std::vector<std::string> resumable_keys;
  /// Brings the checkpoint's recorded config to config_json's form before the
  /// comparison (the driver re-reads it with the current defaults, so a key
  /// that a later version added, at its default value, is no change). Null, or
  /// a throw: the recorded config is compared as it is.
  std::function<std::string(const std::string&)> normalize_config;
  /// Accept a changed configuration on resume (recorded as a {"split": "note"}
  /// record) instead of refusing it.
  bool allow_config_change = false;
  /// How the refusal names that permission (the driver: "--allow-config-change").
  std::string allow_config_change_flag = "allow_config_change = true";
  /// What a divergence message suggests (the driver names its config keys).
  std::string divergence_hint = "try a lower learning rate or gradient clipping";
  /// The run's length in passes over the training data instead of `steps`
  /// (> 0; 0: `steps` decides): steps = ceil(epochs * DataSource::epoch_batches()
  /// / gradient_accumulation_steps), and the schedule's total_steps with it. A
  /// source whose epoch_batches() is 0 (data drawn without end) is a SetupError.
  double epochs = 0;
  /// The evaluation metric that picks `best`, the kept checkpoints and early
  /// stopping: a numeric key of Evaluation::metrics ("accuracy", "f1", "mse");
  /// empty: Evaluation::score, lower is better. A key the evaluation does not
  /// have is a SetupError at the first evaluation.
  std::string best_metric;
  /// best_metric's direction: "max", "min", or "auto" (max for accuracy, f1,
  /// matthews, pearson, spearman and keys ending in "accuracy"; min otherwise).
  std::string best_mode = "auto";
  /// Stop after this many evaluations in a row that do not improve the best by
  /// more than early_stopping_min_delta (0: never); `last` is saved there and
  /// FitResult::early_stopped is set.
  int64_t early_stopping_patience = 0;
  /// The improvement an evaluation must make over the best to count (>= 0, in
  /// the metric's units).
  double early_stopping_min_delta = 0;
  /// Keep the checkpoints of the k best evaluations as best-step<N>.safetensors
  /// (>= 1; 1: best.safetensors alone, which always holds the best). Files that
  /// fall out of the k best are deleted.
  int64_t keep_best = 1;
  /// Written into every checkpoint's metadata (the driver: "vocab", "config").
  std::map<std::string, std::string> metadata;
  /// Also saved as out_dir/config.json (pretty-printed) when not empty.
  std::string config_file_json;
  /// SIGTERM / SIGINT: finish the step, save `last`, return interrupted (a
  /// second signal ends the process at once).
  bool handle_signals = true;
  /// A run directory opened beforehand (RunDirectory::open), so that its rules
  /// are applied before the data and the model are built; else fit() opens
  /// out_dir with `resume` and `overwrite`.
  std::shared_ptr<RunDirectory> run_dir;
  DistributedOptions distributed;  ///< Data-parallel settings (under mpirun).
  /// The step fit() ends at: `until` where it is set and below `steps`, else `steps`
  /// (with `epochs`, the Trainer's options() hold the resolved steps).
  int64_t last_step() const { return until >= 0 && until < steps ? until : steps; }
};

/// What fit() returns.
struct FitResult {
  int64_t step = 0;          ///< The last completed step.
  double best = 0;           ///< The best score so far (lower is better; infinity before any evaluation).
  bool interrupted = false;  ///< Stopped by a signal (`last` holds the step).
  bool early_stopped = false;  ///< Stopped by TrainerOptions::early_stopping_patience.
  int signal = 0;            ///< Which one (SIGTERM, SIGINT); 0 when not interrupted.
};

/// The training loop of one run (this file's description; docs/trainer.md).
class Trainer {
 public:
  /// The model, optimizer and data source must outlive the Trainer. Under
  /// mpirun, call dist::init first (the Trainer reads rank and world size).
  /// A null model, no out_dir (nor run_dir), steps or eval_every < 0 or
  /// log_every < 1 throw SetupError.
  Trainer(std::shared_ptr<nn::Module> model, optim::Optimizer& opt, DataSource& data, TrainerOptions opts);
  ~Trainer();  ///< Releases the run directory's lock when fit() opened it.

  /// Adds a callback (a metrics sink, a hook); callbacks run in the order added.
  void add_callback(std::shared_ptr<Callback> cb);
  /// Runs (or resumes) the training. Throws SetupError / TrainingFailure.
  FitResult fit();

  /// \name For callbacks
  /// @{

  /// The options, as given (out_dir set from run_dir when that was given).
  const TrainerOptions& options() const { return opts_; }
  nn::Module& model() { return *model_; }  ///< The model being trained.
  optim::Optimizer& optimizer() { return opt_; }  ///< The optimizer.
  /// Steps completed so far (the resumed step after a resume; inside
  /// on_step_begin, one less than the step about to run).
  int64_t step() const { return step_; }
  double lr() const { return lr_; }  ///< The learning rate of the current step.
  double elapsed() const;   ///< Seconds since fit() started.
  bool main_rank() const { return rank_ == 0; }  ///< Whether this process is rank 0 (always in a one-process run).
  int64_t world() const { return world_; }  ///< The number of processes (1 without mpirun).
  /// Saves a checkpoint of the current step to `path`. Rank 0 writes; other
  /// ranks return at once. In a data-parallel run the carried sequence state
  /// and every rank's data position are the ones gathered for the evaluation in
  /// progress, so call it from on_evaluate or on_checkpoint there (elsewhere
  /// the file holds no carried state).
  void save(const std::string& path);
  /// The run directory's files: out_dir/last.safetensors.
  std::string last_path() const { return opts_.out_dir + "/last.safetensors"; }
  /// out_dir/best.safetensors.
  std::string best_path() const { return opts_.out_dir + "/best.safetensors"; }
  /// @}

 private:
  void resume_from_last();
  void evaluate_and_checkpoint();
  void log(const Record& record);
  bool stop_requested();
  void wait_for_main_rank(const std::string& what);
  // A step's forward and backward: the loss of the global batch and its tokens,
  // the gradients averaged over the ranks and ready for clipping and the step.
  struct StepResult {
    double loss;
    int64_t tokens;
  };
  StepResult backward_batch();          // one batch
  StepResult backward_micro_batches();  // gradient_accumulation_steps of them
  void check_finite_loss(double lv) const;  // TrainingFailure naming the step
  // Which evaluations are best: the score (lower is better) of an evaluation,
  // and the bookkeeping of the kept checkpoints and of early stopping, which
  // checkpoints carry in their metadata ("kept_best", "evals_since_best").
  double score_of(const Evaluation& e) const;
  void keep_if_among_best(double score);
  void restore_best_state(const CheckpointInfo& info);
  bool stop_early();  // every rank: whether patience ran out at this evaluation
  double epoch() const;

  std::shared_ptr<nn::Module> model_;
  optim::Optimizer& opt_;
  DataSource& data_;
  TrainerOptions opts_;
  std::vector<std::shared_ptr<Callback>> callbacks_;
  std::unique_ptr<RunDirectory> run_;
  models::SequenceState state_, ckpt_state_;
  std::vector<int64_t> positions_;
  int64_t step_ = 0, rank_ = 0, world_ = 1;
  double best_ = 0, lr_ = 0, t0_ = 0, tok_s_ = 0;
  int stop_signal_ = 0;
  std::vector<std::pair<double, int64_t>> kept_;  // (score, step) of the kept best, best first
  int64_t evals_since_best_ = 0;
  int64_t epoch_batches_ = 0;
  std::vector<std::string> resumed_changes_;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace train
}  // namespace remora
