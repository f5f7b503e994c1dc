// SPDX-License-Identifier: BSD-3-Clause
// The driver's tasks behind one registry: what data a config trains on, the
// training loss, the evaluation metrics, and the data position that a
// checkpoint stores.
//
// A task is a class derived from driver::Task in its own file under
// cli/tasks/, plus a TaskEntry that names the data.type values it
// serves, which model kind runs it and how it reads its data keys.
// Registering it is one line in cli/tasks/tasks.def:
//
//   REMORA_TASK(my_task_entry)
//
// where `TaskEntry my_task_entry()` is defined in the new file.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "../models/sequence_model.h"
#include "config.h"
#include "data.h"
#include "model.h"

namespace remora {
namespace text {
class WordPieceTokenizer;
}
namespace driver {

class Experiment;

// Errors while setting up (bad data file, checkpoint that does not fit): exit 2.
class InputError : public Error {
 public:
  explicit InputError(const std::string& m) : Error(m) {}
};

// Which part of the data one process trains on: rank r of `world` data-
// parallel processes. world 1 (the default) is the whole data set, exactly
// the batches of a single process.
//
// Sharding rule (every task): each rank draws the *global* batch of
// data.batch_size rows exactly as one process would (same stream position,
// same generator draws) and keeps rows [r*B/world, (r+1)*B/world) of it. So
// the ranks' rows are disjoint, together they are the one-process batch, and
// the data position is the same on every rank. For the LM stream this is
// the split of its B parallel streams across ranks. The batch must divide
// (Experiment checks it before building anything).
struct DataShard {
  int64_t rank = 0, world = 1;
  int64_t rows(int64_t global_batch) const { return global_batch / world; }
  int64_t first_row(int64_t global_batch) const { return rank * (global_batch / world); }
};

struct Metrics {
  double loss = 0;      // mean per token (LM) or per target (regular)
  double bpc = 0;       // LM: loss / ln 2
  double accuracy = 0;  // regular, classify, copy, mlm
  std::vector<double> bin_accuracy;  // regular, classify: per test length bin
  double mse = 0, mae = 0;  // timeseries: multi-step forecast errors; labelled regression: mse
  double f1 = 0, matthews = 0;        // labelled classes (cli/glue_metrics.h)
  double pearson = 0, spearman = 0;   // labelled regression
  int64_t tokens = 0;
};

// Carried state for LM streams (XL memory, REM scan state, recurrent cells).
using State = models::SequenceState;

class Task {
 public:
  virtual ~Task() = default;
  // Set by Experiment before build_data.
  void set_shard(const DataShard& s) { shard_ = s; }
  const DataShard& shard() const { return shard_; }
  // How many terms the last train_loss() averaged over on this rank (tokens
  // with a target, sequences, windows ...). A data-parallel run re-weights
  // each rank's mean by it so that the averaged gradient is the gradient of
  // the mean over the global batch, also when ranks have different counts
  // (masked LM, padding).
  int64_t loss_terms() const { return loss_terms_; }
  // Loads or generates the data of `shard`. vocab_json, when not empty, is
  // the vocabulary a checkpoint was trained with (text tasks check it).
  virtual void build_data(const Config& cfg, const DataShard& shard, const std::string& vocab_json) = 0;
  // What the model must fit (vocabulary, outputs, padding, lengths).
  virtual ModelContext model_context(const Config& cfg) const = 0;

  // One training step's loss on the next batch (graph attached); `tokens`
  // gets the number of predicted tokens. LM streams update the carried state.
  virtual Tensor train_loss(Experiment& ex, State& state, int64_t* tokens) = 0;
  // Evaluation on "valid" or "test" (up to max_batches batches, 0 = all); the
  // model is already in eval mode under a NoGradGuard.
  virtual Metrics evaluate(Experiment& ex, const std::string& split, int64_t max_batches) = 0;
  // Before the first training step: an InputError when a split cannot make one
  // evaluation batch (eval_batch_size x seq_len), rather than at the first
  // evaluation after hours of training.
  virtual void check_splits(const Config& cfg) const {}
  // The metrics as the driver prints and logs them ({"loss": ..., ...}).
  virtual json metrics_json(const Metrics& m) const = 0;
  // The number that picks best.safetensors, lower is better (default
  // 1 - accuracy; language models bpc, masked LM the loss, time series MSE).
  virtual double score(const Metrics& m) const { return 1 - m.accuracy; }
  // Extra keys of a training log line (text tasks: "bpc").
  virtual void annotate_train_log(json& line, double loss) const {}
  // The global batches of one pass over the training data (train.epochs, and
  // "epoch" in the metrics); 0 for data drawn without end (the generated tasks).
  virtual int64_t epoch_batches(const Config& cfg) const { return 0; }

  // The position in the training data (stream position or sampler offset),
  // stored in checkpoints so that a resumed run draws the same batches.
  virtual int64_t data_position() const = 0;
  virtual void set_data_position(int64_t p) = 0;

  // Text tasks: the vocabulary (generate, infer on text), else nullptr.
  virtual const data::Vocab* vocab() const { return nullptr; }
  // Masked-LM tasks on WordPiece text: the tokenizer, with which `remora
  // infer` encodes text as [CLS] ... [SEP] and --fill names the tokens it
  // predicts for [MASK]; else nullptr.
  virtual const text::WordPieceTokenizer* wordpiece() const { return nullptr; }
  // What a checkpoint stores as its "vocab" metadata and build_data gets back
  // (default: vocab()'s JSON; a task with a tokenizer of its own and class
  // names, such as labelled, stores those).
  virtual std::string vocab_json() const { return vocab() ? vocab()->to_json() : ""; }

  // `remora infer` for a task that labels rows of a file (labelled): true,
  // and predict_rows gives one prediction per row of `input` (a file in the
  // data's format), as text. Other tasks take token ids (the default).
  virtual bool predicts_rows() const { return false; }
  virtual std::vector<std::string> predict_rows(Experiment& ex, const std::string& input) { return {}; }

 protected:
  // This rank's rows (dim 0) of a global-batch tensor; t itself in a world of one.
  Tensor my_rows(const Tensor& t) const {
    if (shard_.world == 1) return t;
    const int64_t B = t.size(0);
    return t.narrow(0, shard_.first_row(B), shard_.rows(B)).contiguous();
  }
  DataShard shard_;
  int64_t loss_terms_ = 0;
};

// ---- the registry ----

struct TaskEntry {
  std::string name;                     // "lm", "mlm", "regular", ...
  std::vector<std::string> data_types;  // the data.type values it serves
  bool encoder = false;                 // run by an encoder (true) or a causal model
  bool text = false;                    // a text corpus (char / bytes)
  bool real_inputs = false;             // needs a model with real-valued inputs
  // Reads the task's own data keys (after type, batch_size, eval_batch_size);
  // base_dir resolves relative paths.
  std::function<void(Node& d, DataConfig& dc, const std::string& base_dir)> read_keys;
  // Writes them for the resolved config.
  std::function<void(const DataConfig& dc, json& out)> resolved_keys;
  // Lists them for `remora config --keys`.
  std::function<std::vector<KeyDoc>()> key_docs;
  std::function<std::unique_ptr<Task>()> make;
  // Before any data is built (memory_estimate.h): sets what the model will be
  // asked to fit as far as the config tells (vocabulary at most, lengths,
  // outputs) and adds the data's memory terms. Optional.
  std::function<void(const Config& cfg, ModelContext& ctx, MemoryEstimate& e)> estimate;
  // The task's tiny configs (model.h: TinyConfig), one per data.type it
  // serves or more: every registered task has at least one, and the registry
  // tests (tests/test_registries.cpp) train and evaluate each.
  std::function<std::vector<TinyConfig>()> tiny_configs;
};

// Sets read_keys, resolved_keys and key_docs from the task's key table over
// its own struct K (kept in DataConfig::task_keys, read back with
// cfg.data.keys<K>()). `after` runs once the rows are read: rules that need
// the common keys (data.type) or the config's folder.
template <class K>
void set_task_keys(TaskEntry& e, const FieldTable<K>& table,
                   std::function<void(Node& d, K& k, DataConfig& dc, const std::string& base_dir)> after = nullptr) {
  e.read_keys = [table, after](Node& d, DataConfig& dc, const std::string& base_dir) {
    K k;
    table.read(d, k);
    if (after) after(d, k, dc, base_dir);
    dc.task_keys = k;
  };
  e.resolved_keys = [table](const DataConfig& dc, json& out) { table.write(dc.keys<K>(), out); };
  e.key_docs = [table] { return table.docs(); };
}

// Every registered task, in registration order (tasks/tasks.def).
const std::vector<TaskEntry>& task_registry();
// The data.type values of all tasks, in registration order, without repeats.
std::vector<std::string> data_type_names();
// The first task serving data.type (the one whose keys are read), or nullptr.
const TaskEntry* task_for_data(const std::string& data_type);
// The task for data.type run by a model of that kind, or nullptr.
const TaskEntry* find_task(const std::string& data_type, bool encoder);
const TaskEntry& task_named(const std::string& name);

}  // namespace driver
}  // namespace remora
