// SPDX-License-Identifier: BSD-3-Clause
// Task "memory": the copy and denoise memory tasks with a causal model
// (fresh random sequences every step, fixed evaluation sets); metrics: loss
// and accuracy on the answer symbols.
#include "../../ops/ops.h"
#include "common.h"

namespace remora {
namespace driver {
namespace {

// The copy and denoise keys (data::MemoryTask).
struct MemoryKeys {
  int64_t delay = 0, symbols = 0, copy_len = 0, n_test = 0;
  std::string answer_classes;
};

class MemoryTaskRunner : public SampledTask {
 public:
  void build_data(const Config& cfg, const DataShard& shard, const std::string&) override {
    seed_data(cfg, shard);
    task_.task = cfg.data.type;
    const MemoryKeys& k = cfg.data.keys<MemoryKeys>();
    task_.delay = k.delay;
    task_.symbols = k.symbols;
    task_.length = k.copy_len;
    // Fixed evaluation sets from their own generators (training batches are
    // drawn fresh from the data generator at every step).
    Generator gv(cfg.seed + kMemoryValidSeedOffset), gt(cfg.seed + kMemoryTestSeedOffset);
    for (int64_t n = 0; n < k.n_test; n += cfg.data.eval_batch_size) {
      const int64_t b = std::min(cfg.data.eval_batch_size, k.n_test - n);
      valid_.push_back(data::make_memory_batch(task_, b, gv));
      test_.push_back(data::make_memory_batch(task_, b, gt));
    }
  }

  ModelContext model_context(const Config& cfg) const override {
    ModelContext c;
    c.n_token = task_.vocab_size();
    // "targets": blank + symbols, the classes that occur as targets (copytask.py:97).
    c.n_out = cfg.data.keys<MemoryKeys>().answer_classes == "targets" ? task_.symbols + 1 : task_.vocab_size();
    c.seq_len = cfg.data.seq_len;
    return c;
  }

  Tensor train_loss(Experiment& ex, State& state, int64_t* tokens) override {
    data::MemoryBatch b = data::make_memory_batch(task_, ex.cfg.data.batch_size, data_gen_);
    const Tensor x = my_rows(b.x), y = my_rows(b.y);  // this rank's rows of the global batch
    *tokens = x.numel();
    loss_terms_ = count_targets(y);
    return token_loss(ex.net.seq->run(x.to(ex.device()), State{}).logits, y.to(ex.device()));
  }

  Metrics evaluate(Experiment& ex, const std::string& split, int64_t max_batches) override {
    const std::vector<data::MemoryBatch>& set = split == "test" ? test_ : valid_;
    const int64_t n = max_batches > 0 ? std::min<int64_t>(max_batches, int64_t(set.size())) : int64_t(set.size());
    double loss = 0;
    int64_t correct = 0, answers = 0, targets = 0;
    for (int64_t i = 0; i < n; ++i) {
      const data::MemoryBatch& b = set[size_t(i)];
      Tensor logits = ex.net.seq->run(b.x.to(ex.device()), State{}).logits;  // [B, L, V]
      const int64_t k = int64_t(sum(ne(b.y, Tensor::scalar(-100.0, DType::i64))).item());
      loss += token_loss(logits, b.y.to(ex.device())).item() * double(k);
      targets += k;
      auto c = data::memory_num_correct(task_, logits, b);
      correct += c.first;
      answers += c.second;
    }
    Metrics m;
    m.loss = loss / double(std::max<int64_t>(1, targets));
    m.accuracy = double(correct) / double(std::max<int64_t>(1, answers));
    m.tokens = answers;
    return m;
  }

  // accuracy on the answer symbols
  json metrics_json(const Metrics& m) const override { return {{"loss", m.loss}, {"accuracy", m.accuracy}}; }

 private:
  data::MemoryTask task_;
  std::vector<data::MemoryBatch> valid_, test_;
};

void set_memory_keys(TaskEntry& e) {
  FieldTable<MemoryKeys> f;
  f.integer("delay", &MemoryKeys::delay, 100, 1, 1 << 20, "the delay T between the symbols and their recall")
      .integer("symbols", &MemoryKeys::symbols, 8, 1, 1 << 16, "the alphabet of symbols to recall")
      .integer("copy_len", &MemoryKeys::copy_len, 10, 1, 1 << 16, "symbols to recall")
      .integer("n_test", &MemoryKeys::n_test, 1000, 1, 1 << 24, "sequences in each of the valid and test sets")
      .choice("answer_classes", &MemoryKeys::answer_classes, "vocab", {"vocab", "targets"},
              "the output classes: vocab (symbols + 2, the input vocabulary) or targets (blank and symbols, "
              "the official copytask.py head)");
  set_task_keys<MemoryKeys>(e, f, [](Node& d, MemoryKeys& k, DataConfig& dc, const std::string&) {
    if (dc.type == "denoise" && k.delay < k.copy_len + 1)
      d.fail("delay", "denoise hides copy_len = " + std::to_string(k.copy_len) + " symbols among delay - 1 = " +
                          std::to_string(k.delay - 1) + " noise positions; use delay >= copy_len + 1");
  });
}

}  // namespace

TaskEntry memory_task() {
  TaskEntry e;
  e.name = "memory";
  e.data_types = {"copy", "denoise"};
  set_memory_keys(e);
  e.make = [] { return std::make_unique<MemoryTaskRunner>(); };
  e.estimate = [](const Config& cfg, ModelContext& ctx, MemoryEstimate& e) {
    const MemoryKeys& d = cfg.data.keys<MemoryKeys>();
    const double L = double(cfg.data.type == "copy" ? d.delay + 2 * d.copy_len : d.delay + d.copy_len);
    ctx.n_token = d.symbols + 2;
    ctx.n_out = d.answer_classes == "targets" ? d.symbols + 1 : d.symbols + 2;
    ctx.seq_len = int64_t(L);
    // The valid and test sets: inputs and targets, i64 [n_test, L] each.
    e.add("copy-task valid and test sets", "data.n_test, data.delay, data.copy_len", 2 * 2 * 8 * double(d.n_test) * L);
  };
  e.tiny_configs = [] {
    std::vector<TinyConfig> v;
    for (const char* type : {"copy", "denoise"})
      v.push_back({type, tiny_config_with(tiny_causal_model(), {{"type", type}, {"delay", 6}, {"copy_len", 3}, {"symbols", 4}, {"n_test", 5}})});
    return v;
  };
  return e;
}

}  // namespace driver
}  // namespace remora
