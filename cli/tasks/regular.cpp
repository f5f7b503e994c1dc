// SPDX-License-Identifier: BSD-3-Clause
// Task "regular": formal-language character prediction (Bhattamishra et al.
// 2020) with a causal model: k-hot next-symbol targets, trained with binary
// cross-entropy; metrics: accuracy on held-out strings of the training
// lengths and on each longer length bin.
#include "../../ops/losses.h"
#include "../../ops/ops.h"
#include "common.h"

namespace remora {
namespace driver {
namespace {

class RegularTask : public SampledTask {
 public:
  void build_data(const Config& cfg, const DataShard& shard, const std::string&) override {
    seed_data(cfg, shard);
    const LanguageKeys& k = cfg.data.keys<LanguageKeys>();
    const data::Language lang = data::language_from_name(k.language);
    formal_ = data::make_formal_splits(lang, data_gen_, k.n_train, k.n_test);
    // An in-distribution held-out set (lengths 2..50) for "valid" accuracy.
    formal_.test_bins.insert(formal_.test_bins.begin(),
                             data::make_formal_dataset(lang, k.n_test, 2, 50, data_gen_));
  }

  ModelContext model_context(const Config& cfg) const override {
    ModelContext c;
    c.n_token = formal_.train.vocab_size();
    c.n_out = formal_.train.num_targets();
    c.seq_len = 51;  // the longest training string + <s>
    return c;
  }

  Tensor train_loss(Experiment& ex, State& state, int64_t* tokens) override {
    std::vector<int64_t> idx;
    for (int64_t i = 0; i < ex.cfg.data.batch_size; ++i)
      idx.push_back(data::uniform_int(data_gen_, formal_.train.size()));
    data::FormalBatch gb = data::formal_batch(formal_.train, idx);  // the global batch
    const Tensor ids = my_rows(gb.ids), targets = my_rows(gb.targets), mask = my_rows(gb.mask);
    const Device dev = ex.device();
    Tensor logits = ex.net.seq->run(ids.to(dev), State{}).logits;  // [B, L, K]
    *tokens = int64_t(sum(mask).item());
    loss_terms_ = *tokens;  // the masked mean's count (x K, the same on every rank)
    return binary_cross_entropy_with_logits(logits, targets.to(dev), mask.unsqueeze(-1).to(dev));
  }

  Metrics evaluate(Experiment& ex, const std::string& split, int64_t max_batches) override {
    Metrics m;
    // bins[0] is the in-distribution held-out set; the rest are the length bins.
    for (size_t bi = 0; bi < formal_.test_bins.size(); ++bi) {
      const data::FormalDataset& ds = formal_.test_bins[bi];
      int64_t correct = 0;
      double loss = 0;
      int64_t counted = 0;
      const int64_t B = ex.cfg.data.eval_batch_size;
      for (int64_t i0 = 0; i0 < ds.size(); i0 += B) {
        std::vector<int64_t> idx;
        for (int64_t i = i0; i < std::min(ds.size(), i0 + B); ++i) idx.push_back(i);
        data::FormalBatch b = data::formal_batch(ds, idx);
        Tensor logits = ex.net.seq->run(b.ids.to(ex.device()), State{}).logits.to(Device::cpu());
        correct += data::formal_num_correct(logits, b);
        const int64_t n = int64_t(sum(b.mask).item()) * ds.num_targets();
        loss += binary_cross_entropy_with_logits(logits, b.targets, b.mask.unsqueeze(-1)).item() * double(n);
        counted += n;
      }
      const double acc = double(correct) / double(std::max<int64_t>(1, ds.size()));
      if (bi == 0) {
        m.accuracy = acc;
        m.loss = loss / double(std::max<int64_t>(1, counted));
        m.tokens = counted;
      } else {
        m.bin_accuracy.push_back(acc);
      }
    }
    return m;
  }

  json metrics_json(const Metrics& m) const override {
    return {{"loss", m.loss}, {"accuracy", m.accuracy}, {"bin_accuracy", m.bin_accuracy}};
  }

 private:
  data::FormalSplits formal_;
};

}  // namespace

TaskEntry regular_task() {
  TaskEntry e;
  e.name = "regular";
  e.data_types = {"regular"};
  set_language_keys(e);
  e.make = [] { return std::make_unique<RegularTask>(); };
  e.estimate = [](const Config& cfg, ModelContext& ctx, MemoryEstimate& e) {
    ctx.n_token = 8;  // the largest alphabet (+ <s>, <pad>)
    ctx.n_out = 6;
    ctx.seq_len = 151;  // the longest test string + <s>
    // A string of average length 26: its ids and k-hot targets.
    estimate_language_task(cfg, 26 * 8 * 4, 4, e);
  };
  e.tiny_configs = [] {
    return std::vector<TinyConfig>{
        {"tomita3", tiny_config_with(tiny_causal_model(), {{"type", "regular"}, {"language", "tomita3"}, {"n_train", 50}, {"n_test", 20}})}};
  };
  return e;
}

}  // namespace driver
}  // namespace remora
