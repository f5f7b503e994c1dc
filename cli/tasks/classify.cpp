// SPDX-License-Identifier: BSD-3-Clause
// Task "classify": language-membership sequence classification with an
// encoder (padded batches, two classes); metrics: accuracy on held-out
// strings of the training lengths and on each longer length bin.
#include "../../ops/losses.h"
#include "../../ops/ops.h"
#include "common.h"

namespace remora {
namespace driver {
namespace {

// Examples idx of a membership dataset as a padded batch; mask [B, L] 1 = real.
std::pair<data::ClassBatch, Tensor> membership_batch(const data::MembershipDataset& ds,
                                                     const std::vector<int64_t>& idx) {
  std::vector<std::vector<int64_t>> seqs;
  std::vector<int64_t> labels;
  for (int64_t i : idx) {
    seqs.push_back(ds.ids[size_t(i)]);
    labels.push_back(ds.labels[size_t(i)]);
  }
  data::ClassBatch b = data::pad_batch(seqs, labels, ds.pad_id());
  Tensor mask = eq(b.key_padding, Tensor::scalar(0.0, DType::i64));
  return {b, mask};
}

class ClassifyTask : public SampledTask {
 public:
  void build_data(const Config& cfg, const DataShard& shard, const std::string&) override {
    seed_data(cfg, shard);
    const LanguageKeys& k = cfg.data.keys<LanguageKeys>();
    const data::Language lang = data::language_from_name(k.language);
    train_ = data::make_membership_dataset(lang, k.n_train, 2, 50, data_gen_);
    bins_.push_back(data::make_membership_dataset(lang, k.n_test, 2, 50, data_gen_));
    bins_.push_back(data::make_membership_dataset(lang, k.n_test, 51, 100, data_gen_));
    bins_.push_back(data::make_membership_dataset(lang, k.n_test, 101, 150, data_gen_));
  }

  ModelContext model_context(const Config& cfg) const override {
    ModelContext c;
    c.n_token = train_.vocab_size();
    c.num_classes = 2;
    c.pad_id = train_.pad_id();
    c.max_len = 151;  // the longest test string + <s>
    c.seq_len = cfg.data.seq_len;
    return c;
  }

  Tensor train_loss(Experiment& ex, State& state, int64_t* tokens) override {
    std::vector<int64_t> idx;
    for (int64_t i = 0; i < ex.cfg.data.batch_size; ++i) idx.push_back(data::uniform_int(data_gen_, train_.size()));
    auto b = membership_batch(train_, idx);  // the global batch (padded to its longest string)
    const Tensor ids = my_rows(b.first.ids), mask = my_rows(b.second), labels = my_rows(b.first.labels);
    *tokens = int64_t(sum(mask).item());
    loss_terms_ = labels.numel();
    const Device dev = ex.device();
    return cross_entropy(ex.net.enc->class_logits(ids.to(dev), mask.to(dev)), labels.to(dev));
  }

  Metrics evaluate(Experiment& ex, const std::string& split, int64_t max_batches) override {
    Metrics m;
    const Device dev = ex.device();
    const int64_t B = ex.cfg.data.eval_batch_size;
    // bins[0] is the in-distribution held-out set; the rest are the length bins.
    for (size_t bi = 0; bi < bins_.size(); ++bi) {
      const data::MembershipDataset& ds = bins_[bi];
      int64_t correct = 0;
      double loss = 0;
      for (int64_t i0 = 0; i0 < ds.size(); i0 += B) {
        std::vector<int64_t> idx;
        for (int64_t i = i0; i < std::min(ds.size(), i0 + B); ++i) idx.push_back(i);
        auto b = membership_batch(ds, idx);
        Tensor logits = ex.net.enc->class_logits(b.first.ids.to(dev), b.second.to(dev));  // [B, 2]
        loss += cross_entropy(logits, b.first.labels.to(dev)).item() * double(idx.size());
        const std::vector<int64_t> pred = argmax(logits, -1).to_i64_vector();
        for (size_t i = 0; i < idx.size(); ++i) correct += pred[i] == ds.labels[size_t(idx[i])];
      }
      const double acc = double(correct) / double(ds.size());
      if (bi == 0) {
        m.accuracy = acc;
        m.loss = loss / double(ds.size());
        m.tokens = ds.size();
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
  data::MembershipDataset train_;
  std::vector<data::MembershipDataset> bins_;  // in-distribution, then length bins
};

}  // namespace

TaskEntry classify_task() {
  TaskEntry e;
  e.name = "classify";
  e.data_types = {"classify"};
  e.encoder = true;
  set_language_keys(e);
  e.make = [] { return std::make_unique<ClassifyTask>(); };
  e.estimate = [](const Config& cfg, ModelContext& ctx, MemoryEstimate& e) {
    ctx.n_token = 8;
    ctx.num_classes = 2;
    ctx.pad_id = 7;
    ctx.max_len = 151;
    ctx.seq_len = 151;  // the longest test string + <s>
    estimate_language_task(cfg, 26 * 8 + 32, 3, e);  // ids of a string of average length 26
  };
  e.tiny_configs = [] {
    return std::vector<TinyConfig>{
        {"parity", tiny_config_with(tiny_encoder_model(), {{"type", "classify"}, {"language", "parity"}, {"n_train", 40}, {"n_test", 10}})}};
  };
  return e;
}

}  // namespace driver
}  // namespace remora
