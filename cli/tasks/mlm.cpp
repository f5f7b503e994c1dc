// SPDX-License-Identifier: BSD-3-Clause
// Task "mlm": masked language modelling of a text corpus with an encoder
// (random crops, BERT masking); metrics loss and accuracy on the masked tokens.
#include <cmath>

#include "../../models/bert.h"
#include "../../ops/ops.h"
#include "common.h"

namespace remora {
namespace driver {
namespace {

// B windows of L tokens starting at uniformly drawn positions.
Tensor random_crops(const std::vector<int64_t>& toks, int64_t B, int64_t L, Generator& g) {
  std::vector<int64_t> ids;
  const int64_t n = int64_t(toks.size()) - L;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t s = data::uniform_int(g, n);
    ids.insert(ids.end(), toks.begin() + s, toks.begin() + s + L);
  }
  return Tensor::from_vector(ids, {B, L});
}

class MLMTask : public SampledTask {
 public:
  void build_data(const Config& cfg, const DataShard& shard, const std::string& vocab_json) override {
    seed_data(cfg, shard);
    corpus_ = load_text_corpus(cfg, vocab_json);
    if (cfg.data.corpus_missing) return;  // inference from a checkpoint: the vocabulary only
    make_train_stream(cfg, corpus_);  // the same length check as "lm"
  }

  // The vocabulary adds [MASK] after the corpus symbols.
  int64_t mask_id() const { return corpus_.vocab.size(); }

  ModelContext model_context(const Config& cfg) const override {
    ModelContext c;
    c.n_token = corpus_.vocab.size() + 1;
    c.max_len = cfg.data.seq_len;
    c.seq_len = cfg.data.seq_len;
    return c;
  }

  Tensor train_loss(Experiment& ex, State& state, int64_t* tokens) override {
    const Config& cfg = ex.cfg;
    Tensor ids = random_crops(corpus_.train, cfg.data.batch_size, cfg.data.seq_len, data_gen_);
    auto masked = models::mlm_mask(ids, Tensor(), ex.vocab_size(), mask_id(), data_gen_);
    // Masked for the global batch, then this rank's rows (task.h).
    const Tensor in = my_rows(masked.first), labels = my_rows(masked.second);
    *tokens = in.numel();
    loss_terms_ = count_targets(labels);  // differs between ranks: the loss is re-weighted
    return masked_token_loss(ex.net.enc->token_logits(in.to(ex.device()), Tensor()), labels.to(ex.device()),
                             loss_terms_);
  }

  // Consecutive windows of the split, masked by a generator seeded the same
  // way at every evaluation so that the numbers are comparable.
  void check_splits(const Config& cfg) const override {
    for (const std::vector<int64_t>* toks : {&corpus_.valid, &corpus_.test})
      if (int64_t(toks->size()) < cfg.data.seq_len)
        throw InputError(std::string("data: the ") + (toks == &corpus_.valid ? "valid" : "test") +
                         " split is shorter than seq_len " + std::to_string(cfg.data.seq_len));
  }

  Metrics evaluate(Experiment& ex, const std::string& split, int64_t max_batches) override {
    const Config& cfg = ex.cfg;
    const std::vector<int64_t>& toks = split == "test" ? corpus_.test : corpus_.valid;
    const int64_t B = cfg.data.eval_batch_size, L = cfg.data.seq_len;
    const int64_t windows = int64_t(toks.size()) / L;
    const int64_t n = max_batches > 0 ? std::min(windows, max_batches * B) : windows;
    if (n < 1) throw InputError("data: the " + split + " split is shorter than seq_len " + std::to_string(L));
    Generator g(cfg.seed + kMlmEvalSeedOffset);
    MaskedTally tally;
    for (int64_t w0 = 0; w0 < n; w0 += B) {
      const int64_t b = std::min(B, n - w0);
      std::vector<int64_t> ids(toks.begin() + w0 * L, toks.begin() + (w0 + b) * L);
      auto masked = models::mlm_mask(Tensor::from_vector(ids, {b, L}), Tensor(), ex.vocab_size(), mask_id(), g);
      tally.add(ex.net.enc->token_logits(masked.first.to(ex.device()), Tensor()), masked.second);
    }
    return tally.metrics();
  }

  double score(const Metrics& m) const override { return m.loss; }
  json metrics_json(const Metrics& m) const override { return {{"loss", m.loss}, {"mlm_accuracy", m.accuracy}}; }
  void annotate_train_log(json& line, double loss) const override { line["bpc"] = loss / std::log(2.0); }
  const data::Vocab* vocab() const override { return &corpus_.vocab; }

 private:
  data::Corpus corpus_;
};

}  // namespace

TaskEntry mlm_task() {
  TaskEntry e;
  e.name = "mlm";
  e.data_types = {"char", "bytes"};
  e.encoder = true;
  e.text = true;
  set_text_keys(e);
  e.make = [] { return std::make_unique<MLMTask>(); };
  e.estimate = estimate_text_task;
  e.tiny_configs = [] { return std::vector<TinyConfig>{{"char", tiny_text_config(tiny_encoder_model())}}; };
  return e;
}

}  // namespace driver
}  // namespace remora
