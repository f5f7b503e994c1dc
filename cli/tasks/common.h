// SPDX-License-Identifier: BSD-3-Clause
// Pieces shared by several tasks (cli/tasks/*.cpp).
#pragma once
#include <string>
#include <vector>

#include "../experiment.h"
#include "../seeds.h"
#include "../task.h"

namespace remora {
namespace driver {

// Mean cross-entropy of logits [B, L, V] against targets i64 [B, L] (-100 ignored).
Tensor token_loss(const Tensor& logits, const Tensor& targets);
// The targets that token_loss counts (those not -100).
int64_t count_targets(const Tensor& targets);
// token_loss over a masked-LM batch's `terms` masked positions (labels not -100,
// count_targets); a batch that drew none would be 0 / 0, so it contributes a zero
// loss with no gradient instead of a NaN.
Tensor masked_token_loss(const Tensor& logits, const Tensor& labels, int64_t terms);
// A masked-LM evaluation's sums over the masked positions (labels not -100): the
// loss (mean per masked token) and the accuracy of the most likely token.
struct MaskedTally {
  double loss = 0;
  int64_t predicted = 0, correct = 0;
  // logits [b, L, V] on the model's device, labels [b, L] on the CPU.
  void add(const Tensor& logits, const Tensor& labels);
  Metrics metrics() const;
};

// A text corpus (data.type char or bytes) checked against a checkpoint's
// vocabulary when vocab_json is not empty; errors are InputErrors.
data::Corpus load_text_corpus(const Config& cfg, const std::string& vocab_json);
// The training split as Transformer-XL ordered batches; an InputError when
// it is too short for one batch_size x seq_len segment.
std::unique_ptr<data::LMStream> make_train_stream(const Config& cfg, const data::Corpus& corpus);
// The text tasks' data keys (lm, mlm) and the formal-language tasks'
// (regular, classify).
struct TextKeys {
  std::string path;  // joined to the config's folder when relative
  int64_t seq_len = 0;
  // data.type words: the word tokenizer's settings.
  bool lower_case = false;
  int64_t min_freq = 0, max_size = 0;
};
struct LanguageKeys {
  std::string language;
  int64_t n_train = 0, n_test = 0;
};
// words: also the word tokenizer's keys (data.type words, task lm).
void set_text_keys(TaskEntry& e, bool words = false);
void set_language_keys(TaskEntry& e);

// The memory a text corpus takes while it is loaded and split (about ten
// bytes per byte of data.path: the text, its int64 ids, the stream's copy),
// and what the model will fit: up to 257 symbols, data.seq_len long.
void estimate_text_task(const Config& cfg, ModelContext& ctx, MemoryEstimate& e);
// The formal-language data sets: `bytes_per_string` for each of n_train
// strings and of `test_sets` sets of n_test strings.
void estimate_language_task(const Config& cfg, double bytes_per_string, double test_sets, MemoryEstimate& e);

// The model sections of the tasks' tiny configs (TaskEntry::tiny_configs):
// a one-layer Transformer-XL and a one-layer BERT, d_model 16.
// x with 9 significant digits: the predictions `remora infer` writes.
std::string number_text(double x);

// The size of the file at p in bytes (0 when it is not there): data-file terms of the estimates.
double file_bytes(const std::string& p);

json tiny_causal_model();
json tiny_encoder_model();

// The tasks that draw their batches at random from one generator
// (config.seed + kDataSeedOffset): the data position is its offset.
class SampledTask : public Task {
 public:
  int64_t data_position() const override { return int64_t(data_gen_.offset()); }
  void set_data_position(int64_t p) override { data_gen_.set_state(data_gen_.seed(), uint64_t(p)); }

 protected:
  // Seeds the generator; call first in build_data.
  void seed_data(const Config& cfg, const DataShard& shard);
  Generator data_gen_;
};


}  // namespace driver
}  // namespace remora
