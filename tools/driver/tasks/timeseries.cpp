// Task "timeseries": forecasting a synthetic multi-periodic series with a
// causal model on real-valued inputs (one-step-ahead regression in training,
// autoregressive `horizon`-step forecasts in evaluation); metrics MSE and MAE.
#include "../../../ops/ops.h"
#include "common.h"

namespace remora {
namespace driver {
namespace {

class TimeSeriesTask : public SampledTask {
 public:
  void build_data(const Config& cfg, const DataShard& shard, const std::string&) override {
    seed_data(cfg, shard);
    data::SeriesConfig sc;
    sc.length = cfg.data.length;
    sc.periods = cfg.data.periods;
    sc.amplitudes = cfg.data.amplitudes;
    sc.noise_std = cfg.data.noise_std;
    sc.trend = cfg.data.trend;
    series_ = data::split_series(data::make_multi_periodic_series(sc, data_gen_), 0.7, 0.1, cfg.data.context);
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
    data::WindowDataset w(series_.train, cfg.data.context, 1);
    std::vector<int64_t> idx;
    for (int64_t i = 0; i < cfg.data.batch_size; ++i) idx.push_back(data::uniform_int(data_gen_, w.size()));
    data::ForecastBatch gb = w.batch(idx);  // x [B, Lin, 1], y [B, 1, 1]: the global batch
    data::ForecastBatch b{my_rows(gb.x), my_rows(gb.y)};
    Tensor target = cat({b.x.slice(1, 1, cfg.data.context), b.y}, 1).to(ex.dtype()).to(ex.device());
    Tensor pred = ex.net.seq->run(b.x.to(ex.dtype()).to(ex.device()), State{}).logits;  // [B, Lin, 1]
    *tokens = b.x.numel();
    loss_terms_ = target.numel();
    return mean(pow(sub(pred, target), 2));
  }

  // Forecast `horizon` steps autoregressively from each window's context.
  Metrics evaluate(Experiment& ex, const std::string& split, int64_t max_batches) override {
    const Config& cfg = ex.cfg;
    const std::vector<double>& sr = split == "test" ? series_.test : series_.valid;
    const int64_t H = cfg.data.horizon, Lin = cfg.data.context;
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

void read_series_keys(Node& d, DataConfig& dc, const std::string&) {
  dc.length = d.integer("length", dc.length, 16, int64_t(1) << 30);
  dc.context = d.integer("context", dc.context, 1, 1 << 20);
  dc.horizon = d.integer("horizon", dc.horizon, 1, 1 << 20);
  dc.periods = d.numbers("periods", dc.periods);
  dc.amplitudes = d.numbers("amplitudes", dc.amplitudes);
  dc.noise_std = d.number("noise_std", dc.noise_std, 0, 1e6);
  dc.trend = d.number("trend", dc.trend, -1e6, 1e6);
  if (dc.periods.size() != dc.amplitudes.size())
    d.fail("amplitudes", "expected " + std::to_string(dc.periods.size()) + " entries (one per period), got " +
                             std::to_string(dc.amplitudes.size()));
  for (double p : dc.periods)
    if (!(p > 0)) d.fail("periods", "every period must be > 0");
  if (dc.length * 2 / 10 < dc.context + dc.horizon)
    d.fail("length", "too short: the valid and test splits (10% and 20%) need context + horizon = " +
                         std::to_string(dc.context + dc.horizon) + " steps each");
}

void series_keys_json(const DataConfig& dc, json& out) {
  out["length"] = dc.length;
  out["context"] = dc.context;
  out["horizon"] = dc.horizon;
  out["periods"] = dc.periods;
  out["amplitudes"] = dc.amplitudes;
  out["noise_std"] = dc.noise_std;
  out["trend"] = dc.trend;
}

}  // namespace

TaskEntry timeseries_task() {
  TaskEntry e;
  e.name = "timeseries";
  e.data_types = {"timeseries"};
  e.real_inputs = true;
  e.read_keys = read_series_keys;
  e.resolved_keys = series_keys_json;
  e.make = [] { return std::make_unique<TimeSeriesTask>(); };
  e.estimate = [](const Config& cfg, ModelContext& ctx, MemoryEstimate& e) {
    ctx.n_token = 1;
    ctx.n_out = 1;
    ctx.n_in = 1;
    ctx.seq_len = cfg.data.context + cfg.data.horizon;  // a window
    // The series (f64) and its three splits, then the f32 windows' copies.
    e.add("time series and its splits", "data.length", 3 * 8 * double(cfg.data.length));
  };
  e.tiny_configs = [] {
    return std::vector<TinyConfig>{
        {"", tiny_config_with(tiny_causal_model(), {{"type", "timeseries"}, {"length", 400}, {"context", 16}, {"horizon", 4}})}};
  };
  return e;
}

}  // namespace driver
}  // namespace remora
