// SPDX-License-Identifier: BSD-3-Clause
// Task "timeseries": forecasting a synthetic multi-periodic series with a
// causal model on real-valued inputs (one-step-ahead regression in training,
// autoregressive `horizon`-step forecasts in evaluation); metrics MSE and MAE.
#include "../../ops/ops.h"
#include "common.h"

namespace remora {
namespace driver {
namespace {

// The series (data::SeriesConfig) and the windows' lengths.
struct SeriesKeys {
  int64_t length = 0, context = 0, horizon = 0;
  std::vector<double> periods, amplitudes;
  double noise_std = 0, trend = 0;
};

class TimeSeriesTask : public SampledTask {
 public:
  void build_data(const Config& cfg, const DataShard& shard, const std::string&) override {
    seed_data(cfg, shard);
    data::SeriesConfig sc;
    const SeriesKeys& k = cfg.data.keys<SeriesKeys>();
    sc.length = k.length;
    sc.periods = k.periods;
    sc.amplitudes = k.amplitudes;
    sc.noise_std = k.noise_std;
    sc.trend = k.trend;
    series_ = data::split_series(data::make_multi_periodic_series(sc, data_gen_), 0.7, 0.1, k.context);
  }

  ModelContext model_context(const Config& cfg) const override {
    ModelContext c;
    c.n_token = 1;
    c.n_out = 1;
    c.n_in = 1;
    c.seq_len = cfg.data.seq_len;
    return c;
  }

  // One-step-ahead regression over random training windows (teacher forcing).
  Tensor train_loss(Experiment& ex, State& state, int64_t* tokens) override {
    const Config& cfg = ex.cfg;
    data::WindowDataset w(series_.train, cfg.data.keys<SeriesKeys>().context, 1);
    std::vector<int64_t> idx;
    for (int64_t i = 0; i < cfg.data.batch_size; ++i) idx.push_back(data::uniform_int(data_gen_, w.size()));
    data::ForecastBatch gb = w.batch(idx);  // x [B, Lin, 1], y [B, 1, 1]: the global batch
    data::ForecastBatch b{my_rows(gb.x), my_rows(gb.y)};
    Tensor target = cat({b.x.slice(1, 1, cfg.data.keys<SeriesKeys>().context), b.y}, 1).to(ex.dtype()).to(ex.device());
    Tensor pred = ex.net.seq->run(b.x.to(ex.dtype()).to(ex.device()), State{}).logits;  // [B, Lin, 1]
    *tokens = b.x.numel();
    loss_terms_ = target.numel();
    return mean(pow(sub(pred, target), 2));
  }

  // Forecast `horizon` steps autoregressively from each window's context.
  Metrics evaluate(Experiment& ex, const std::string& split, int64_t max_batches) override {
    const Config& cfg = ex.cfg;
    const std::vector<double>& sr = split == "test" ? series_.test : series_.valid;
    const int64_t H = cfg.data.keys<SeriesKeys>().horizon, Lin = cfg.data.keys<SeriesKeys>().context;
    data::WindowDataset w(sr, Lin, H, H);
    const int64_t n = max_batches > 0 ? std::min(w.size(), max_batches * cfg.data.eval_batch_size) : w.size();
    Metrics m;
    double se = 0, ae = 0;
    for (int64_t i0 = 0; i0 < n; i0 += cfg.data.eval_batch_size) {
      std::vector<int64_t> idx;
      for (int64_t i = i0; i < std::min(n, i0 + cfg.data.eval_batch_size); ++i) idx.push_back(i);
      data::ForecastBatch b = w.batch(idx);
      Tensor sq = b.x.to(ex.dtype()).to(ex.device());  // [B, Lin + t, 1]
      std::vector<Tensor> preds;
      for (int64_t t = 0; t < H; ++t) {
        Tensor next = ex.net.seq->run(sq, State{}).logits.slice(1, -1, sq.size(1));  // [B, 1, 1]
        preds.push_back(next);
        sq = cat({sq, next}, 1);
      }
      Tensor pred = cat(preds, 1).to(DType::f32).to(Device::cpu());  // [B, H, 1]
      const double k = double(b.y.numel());
      se += data::mse(pred, b.y) * k;
      ae += data::mae(pred, b.y) * k;
      m.tokens += b.y.numel();
    }
    m.mse = se / double(std::max<int64_t>(1, m.tokens));
    m.mae = ae / double(std::max<int64_t>(1, m.tokens));
    m.loss = m.mse;
    return m;
  }

  double score(const Metrics& m) const override { return m.mse; }
  json metrics_json(const Metrics& m) const override { return {{"loss", m.loss}, {"mse", m.mse}, {"mae", m.mae}}; }

 private:
  data::SeriesSplits series_;
};

void set_series_keys(TaskEntry& e) {
  using K = SeriesKeys;
  FieldTable<K> f;
  f.integer("length", &K::length, 4000, 16, int64_t(1) << 30, "steps of the series")
      .integer("context", &K::context, 96, 1, 1 << 20, "input steps of a window")
      .integer("horizon", &K::horizon, 24, 1, 1 << 20, "steps forecast from each window")
      .numbers("periods", &K::periods, std::vector<double>{24, 168, 7.5}, "the sine components' periods (> 0)")
      .numbers("amplitudes", &K::amplitudes, std::vector<double>{1.0, 0.5, 0.25}, "one amplitude per period")
      .number("noise_std", &K::noise_std, 0.1, 0, 1e6, "Gaussian noise added to every step")
      .number("trend", &K::trend, 0.0, -1e6, 1e6, "linear trend per step")
      .check([](Node& d, K& k) {
        if (k.periods.size() != k.amplitudes.size())
          d.fail("amplitudes", "expected " + std::to_string(k.periods.size()) + " entries (one per period), got " +
                                   std::to_string(k.amplitudes.size()));
        for (double p : k.periods)
          if (!(p > 0)) d.fail("periods", "every period must be > 0");
        if (k.length * 2 / 10 < k.context + k.horizon)
          d.fail("length", "too short: the valid and test splits (10% and 20%) need context + horizon = " +
                               std::to_string(k.context + k.horizon) + " steps each");
      });
  set_task_keys(e, f);
}

}  // namespace

TaskEntry timeseries_task() {
  TaskEntry e;
  e.name = "timeseries";
  e.data_types = {"timeseries"};
  e.real_inputs = true;
  set_series_keys(e);
  e.make = [] { return std::make_unique<TimeSeriesTask>(); };
  e.estimate = [](const Config& cfg, ModelContext& ctx, MemoryEstimate& e) {
    ctx.n_token = 1;
    ctx.n_out = 1;
    ctx.n_in = 1;
    const SeriesKeys& k = cfg.data.keys<SeriesKeys>();
    ctx.seq_len = k.context + k.horizon;  // a window
    // The series (f64) and its three splits, then the f32 windows' copies.
    e.add("time series and its splits", "data.length", 3 * 8 * double(k.length));
  };
  e.tiny_configs = [] {
    return std::vector<TinyConfig>{
        {"", tiny_config_with(tiny_causal_model(), {{"type", "timeseries"}, {"length", 400}, {"context", 16}, {"horizon", 4}})}};
  };
  return e;
}

}  // namespace driver
}  // namespace remora
