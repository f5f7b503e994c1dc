// SPDX-License-Identifier: BSD-3-Clause
// Task "lm": character / byte / word language modelling with a causal model
// on Transformer-XL ordered batches (memory carried across segments); metrics
// loss and bits per character, and perplexity for words.
#include <cmath>

#include "../../ops/ops.h"
#include "common.h"

namespace remora {
namespace driver {
namespace {

class LMTask : public Task {
 public:
  void build_data(const Config& cfg, const DataShard& shard, const std::string& vocab_json) override {
    words_ = cfg.data.type == "words";
    corpus_ = load_text_corpus(cfg, vocab_json);
    if (cfg.data.corpus_missing) return;  // inference from a checkpoint: the vocabulary only
    train_ = make_train_stream(cfg, corpus_);
    std::vector<int64_t>().swap(corpus_.train);  // the stream keeps its own (int32) copy
  }

  ModelContext model_context(const Config& cfg) const override {
    ModelContext c;
    c.n_token = corpus_.vocab.size();
    c.stream = true;
    c.seq_len = cfg.data.seq_len;
    return c;
  }

  Tensor train_loss(Experiment& ex, State& state, int64_t* tokens) override {
    data::LMBatch b = train_->next();
    if (b.segment == 0) state = State{};  // the streams restart: drop carried memory
    // This rank's streams (rows) of the global batch; its carried state is theirs.
    const Tensor x = my_rows(b.x), y = my_rows(b.y);
    // run_scored: a model with an adaptive softmax scores the targets without
    // building every logit.
    const Tensor yd = y.to(ex.device());
    models::ScoredSequenceOutput out = ex.net.seq->run_scored(x.to(ex.device()), yd, state);
    state = out.state;
    *tokens = y.numel();
    loss_terms_ = y.numel();
    return out.nll.defined() ? out.nll.mean() : token_loss(out.logits, yd);
  }

  void check_splits(const Config& cfg) const override {
    for (const char* split : {"valid", "test"}) check_split(cfg, split);
  }

  // Up to max_batches segments of the split with carried memory.
  Metrics evaluate(Experiment& ex, const std::string& split, int64_t max_batches) override {
    const Config& cfg = ex.cfg;
    const std::vector<int64_t>& toks = split == "test" ? corpus_.test : corpus_.valid;
    check_split(cfg, split);
    data::LMStream s = as_input_error("data.path " + cfg.data.keys<TextKeys>().path + " (" + split + " split)", [&] {
      return data::LMStream(toks, cfg.data.eval_batch_size, cfg.data.seq_len);
    });
    const int64_t n = max_batches > 0 ? std::min(max_batches, s.num_segments()) : s.num_segments();
    Metrics m;
    State st;
    double total = 0;
    for (int64_t i = 0; i < n; ++i) {
      data::LMBatch b = s.next();
      const Tensor y = b.y.to(ex.device());
      models::ScoredSequenceOutput out = ex.net.seq->run_scored(b.x.to(ex.device()), y, st);
      st = out.state;
      total += (out.nll.defined() ? out.nll.mean() : token_loss(out.logits, y)).item() * double(b.y.numel());
      m.tokens += b.y.numel();
    }
    m.loss = total / double(m.tokens);
    m.bpc = m.loss / std::log(2.0);
    return m;
  }

  double score(const Metrics& m) const override { return m.bpc; }
  json metrics_json(const Metrics& m) const override {
    if (words_) return {{"loss", m.loss}, {"ppl", std::exp(m.loss)}};
    return {{"loss", m.loss}, {"bpc", m.bpc}};
  }
  void annotate_train_log(json& line, double loss) const override {
    if (words_) line["ppl"] = std::exp(loss);
    else line["bpc"] = loss / std::log(2.0);
  }

  // One pass: every segment of the training streams.
  int64_t epoch_batches(const Config&) const override { return train_->num_segments(); }
  int64_t data_position() const override { return train_->position(); }
  void set_data_position(int64_t p) override { train_->set_position(p); }
  const data::Vocab* vocab() const override { return &corpus_.vocab; }

 private:
  void check_split(const Config& cfg, const std::string& split) const {
    const std::vector<int64_t>& toks = split == "test" ? corpus_.test : corpus_.valid;
    const int64_t B = cfg.data.eval_batch_size, T = cfg.data.seq_len;
    // LMStream: B streams of tokens / B each; one segment needs seq_len + 1 of them.
    if (B < 1 || int64_t(toks.size()) / B < T + 1)
      throw InputError("data: the " + split + " split (" + std::to_string(toks.size()) +
                       " tokens) is too short for eval_batch_size " + std::to_string(B) + " x seq_len " +
                       std::to_string(T) + "; lower data.eval_batch_size or data.seq_len");
  }

  data::Corpus corpus_;
  std::unique_ptr<data::LMStream> train_;
  bool words_ = false;  // data.type words: perplexity instead of bits per character
};

}  // namespace

TaskEntry lm_task() {
  TaskEntry e;
  e.name = "lm";
  e.data_types = {"char", "bytes", "words"};
  e.encoder = false;
  e.text = true;
  set_text_keys(e, /*words=*/true);
  e.make = [] { return std::make_unique<LMTask>(); };
  e.estimate = estimate_text_task;
  e.tiny_configs = [] {
    json bytes = tiny_text_config(tiny_causal_model());
    bytes["data"]["type"] = "bytes";
    json words = tiny_text_config(tiny_causal_model());
    words["data"]["type"] = "words";
    words["data"]["path"] = "tests/data/wikitext";
    return std::vector<TinyConfig>{{"char", tiny_text_config(tiny_causal_model())}, {"bytes", bytes}, {"words", words}};
  };
  return e;
}

}  // namespace driver
}  // namespace remora
