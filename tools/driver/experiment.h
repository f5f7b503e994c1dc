// An experiment: the data, the model and the task (loss and metrics) that a
// config describes. The driver's commands (train, eval, generate, infer, info)
// all start from one.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "../../models/bert.h"
#include "../../models/transformer_xl.h"
#include "../../nn/optim.h"
#include "config.h"
#include "data.h"

namespace remora {
namespace driver {

// Errors while setting up (bad data file, checkpoint that does not fit): exit 2.
class InputError : public Error {
 public:
  explicit InputError(const std::string& m) : Error(m) {}
};

struct Metrics {
  double loss = 0;      // mean per token (LM) or per target (regular)
  double bpc = 0;       // LM: loss / ln 2
  double accuracy = 0;  // regular: fraction of sequences fully correct
  std::vector<double> bin_accuracy;  // regular: per test length bin
  double mse = 0, mae = 0;  // timeseries: multi-step forecast errors
  int64_t tokens = 0;
};

class Experiment {
 public:
  // Loads the data and builds the model; vocab, when given, is the one a
  // checkpoint was trained with (it must agree with the data).
  explicit Experiment(const Config& cfg, const std::string& vocab_json = "");

  bool is_lm() const { return cfg.data.type == "char" || cfg.data.type == "bytes"; }
  bool is_series() const { return cfg.data.type == "timeseries"; }
  bool is_memory() const { return cfg.data.type == "copy" || cfg.data.type == "denoise"; }
  bool is_classify() const { return cfg.data.type == "classify"; }
  // Carried state for LM streams (XL memory, REM scan state, recurrent cells).
  using State = models::SequenceState;

  // One training step's loss on the next batch (graph attached). For LM the
  // carried state is updated; `tokens` gets the number of predicted tokens.
  Tensor train_loss(State& state, int64_t* tokens);
  // Evaluation on "valid" or "test" (LM: up to max_batches segments with carried
  // memory, 0 = all; regular and classify: accuracy on held-out strings of the
  // training lengths plus each test length bin; timeseries: autoregressive
  // forecasts of `horizon` steps from `context` inputs, MSE and MAE; copy and
  // denoise: accuracy on the answer symbols of a fixed set of sequences).
  Metrics evaluate(const std::string& split, int64_t max_batches);

  std::unique_ptr<optim::Optimizer> make_optimizer() const;
  optim::LRSchedule schedule() const;

  // Train stream position / regular-language sampler state, for checkpoints.
  int64_t data_position() const;
  void set_data_position(int64_t p);

  Config cfg;
  models::XLConfig model_cfg;          // transformer_xl
  models::BertConfig bert_cfg;         // bert
  std::shared_ptr<nn::Module> model;   // the model, whichever type
  std::shared_ptr<models::SequenceModel> seq;  // causal types (transformer_xl, srupp, rnn, ...)
  std::shared_ptr<models::EncoderModel> enc;   // encoders (bert, starsaber)
  std::shared_ptr<models::TransformerXL> xl;   // the concrete model, when that type
  std::shared_ptr<models::BertForMaskedLM> bert;
  bool is_encoder() const { return bool(enc); }
  DType dtype() const;                 // the parameters' dtype
  int64_t mask_id() const;             // bert: the [MASK] token (last id)
  data::Corpus corpus;                 // LM
  std::unique_ptr<data::LMStream> train_stream;
  data::FormalSplits formal;           // regular
  data::SeriesSplits series;           // timeseries
  data::MemoryTask memory;             // copy, denoise
  std::vector<data::MemoryBatch> memory_valid, memory_test;  // fixed evaluation sets
  data::MembershipDataset member_train;               // classify
  std::vector<data::MembershipDataset> member_bins;   // classify: in-distribution, then length bins
  Generator data_gen;                  // regular, timeseries: batch sampling
  std::string vocab_json() const;
  int64_t vocab_size() const;

 private:
  void build_model();
};

// The checkpoint file (SPEC §9 safetensors): the weights under their model
// names, optimizer state as "optimizer.*", carried state as "state.*", and
// metadata: format, step, rng, data position, vocab, the resolved config.
struct Checkpoint {
  // A bare weights file (no "format": "remora-checkpoint" metadata, e.g. a
  // PyTorch state dict written as safetensors): only the model weights, so it
  // serves eval / generate / infer but cannot be resumed from.
  bool weights_only = false;
  int64_t step = 0;
  uint64_t rng_seed = 0, rng_offset = 0;
  int64_t data_position = 0;
  double best_valid = 0;
  std::string vocab_json, config_json;
};

void save_checkpoint(const std::string& path, const Experiment& ex, const optim::Optimizer* opt,
                     const Experiment::State& state, const Checkpoint& info);
// Loads weights into ex.model (and optimizer/state when given). Every problem
// (missing file, corrupt file, shapes that do not fit the config) is an
// InputError naming the file and the key.
//
// Two kinds of file are accepted:
//   - a Remora checkpoint: metadata "format": "remora-checkpoint" with step,
//     rng_seed, rng_offset and data_position (what `remora train` writes);
//   - bare weights: no "format" metadata, or "format": "pt" (what the
//     safetensors package writes for a PyTorch state dict). Only the model's
//     weights, under their official names; the vocabulary then comes from the
//     config's data. Loading one with an optimizer or state (train --resume) is
//     an InputError. Any other "format" is an InputError naming it.
Checkpoint load_checkpoint(const std::string& path, Experiment& ex, optim::Optimizer* opt,
                           Experiment::State* state);
// Just the metadata (to build the Experiment with the right vocabulary).
Checkpoint read_checkpoint_info(const std::string& path);

}  // namespace driver
}  // namespace remora
