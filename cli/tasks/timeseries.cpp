// SPDX-License-Identifier: BSD-3-Clause
// Forecasting with a causal model on real-valued inputs (one-step-ahead
// regression in training, autoregressive `horizon`-step forecasts in
// evaluation; metrics MSE and MAE over every forecast value):
//   task "timeseries"  a synthetic multi-periodic series (data.type timeseries);
//   task "forecast"    the columns of a CSV file (data.type csv, cli/series_csv.h),
//                      split by fractions or at the ETT benchmarks' borders and
//                      standardised with the training split's statistics.
#include <sstream>

#include "../../core/file_io.h"
#include "../../ops/ops.h"
#include "../series_csv.h"
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

// A series of channels_ values a step, split chronologically; what the two
// forecasting tasks share.
class ForecastTask : public SampledTask {
 public:
  ModelContext model_context(const Config& cfg) const override {
    ModelContext c;
    c.n_token = 1;
    c.n_out = channels_;
    c.n_in = channels_;
    c.seq_len = cfg.data.seq_len;
    return c;
  }

  // One-step-ahead regression over random training windows (teacher forcing).
  Tensor train_loss(Experiment& ex, State& state, int64_t* tokens) override {
    const Config& cfg = ex.cfg;
    data::WindowDataset w(series_.train, context_, 1, 1, channels_);
    std::vector<int64_t> idx;
    for (int64_t i = 0; i < cfg.data.batch_size; ++i) idx.push_back(data::uniform_int(data_gen_, w.size()));
    data::ForecastBatch gb = w.batch(idx);  // x [B, Lin, C], y [B, 1, C]: the global batch
    data::ForecastBatch b{my_rows(gb.x), my_rows(gb.y)};
    const Tensor base = window_base(b.x);
    Tensor target = sub(cat({b.x.slice(1, 1, context_), b.y}, 1), base).to(ex.dtype()).to(ex.device());
    Tensor pred = ex.net.seq->run(sub(b.x, base).to(ex.dtype()).to(ex.device()), State{}).logits;  // [B, Lin, C]
    *tokens = b.x.size(0) * b.x.size(1);
    loss_terms_ = target.numel();
    return mean(pow(sub(pred, target), 2));
  }

  // Forecast `horizon` steps autoregressively from each window's context.
  Metrics evaluate(Experiment& ex, const std::string& split, int64_t max_batches) override {
    const Config& cfg = ex.cfg;
    const std::vector<double>& sr = split == "test" ? series_.test : series_.valid;
    data::WindowDataset w(sr, context_, horizon_, horizon_, channels_);
    const int64_t n = max_batches > 0 ? std::min(w.size(), max_batches * cfg.data.eval_batch_size) : w.size();
    Metrics m;
    double se = 0, ae = 0;
    for (int64_t i0 = 0; i0 < n; i0 += cfg.data.eval_batch_size) {
      std::vector<int64_t> idx;
      for (int64_t i = i0; i < std::min(n, i0 + cfg.data.eval_batch_size); ++i) idx.push_back(i);
      data::ForecastBatch b = w.batch(idx);
      const Tensor base = window_base(b.x);
      Tensor sq = sub(b.x, base).to(ex.dtype()).to(ex.device());  // [B, Lin + t, C]
      std::vector<Tensor> preds;
      for (int64_t t = 0; t < horizon_; ++t) {
        Tensor next = ex.net.seq->run(sq, State{}).logits.slice(1, -1, sq.size(1));  // [B, 1, C]
        preds.push_back(next);
        sq = cat({sq, next}, 1);
      }
      Tensor pred = add(cat(preds, 1).to(DType::f32).to(Device::cpu()), base);  // [B, H, C]
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

 protected:
  // What every window's values are taken relative to: 0, or with
  // subtract_last_ each channel's last context value ([B, 1, C]), so that the
  // model sees the window's shape, not its level (a series with a trend
  // leaves the training split's range).
  Tensor window_base(const Tensor& x) const {
    return subtract_last_ ? x.slice(1, context_ - 1, context_) : Tensor::zeros({1}, x.dtype());
  }

  data::SeriesSplits series_;
  int64_t channels_ = 1, context_ = 1, horizon_ = 1;
  bool subtract_last_ = false;
};

class TimeSeriesTask : public ForecastTask {
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
    context_ = k.context;
    horizon_ = k.horizon;
    series_ = data::split_series(data::make_multi_periodic_series(sc, data_gen_), 0.7, 0.1, k.context);
  }
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

// data.type "csv": the file, its columns, the split and the windows.
struct CsvSeriesKeys {
  std::string path, columns, time_column, missing, split;
  double train_frac = 0.7, valid_frac = 0.1;
  bool scale = true, subtract_last = false;
  int64_t context = 96, horizon = 24;
};

SeriesCsvOptions csv_options(const CsvSeriesKeys& k) {
  SeriesCsvOptions o;
  std::stringstream names(k.columns);
  for (std::string c; std::getline(names, c, ',');)
    if (!c.empty()) o.columns.push_back(c);
  o.time_column = k.time_column;
  o.interpolate_missing = k.missing == "interpolate";
  return o;
}

// The ETT benchmarks' borders (Zhou et al., Informer, 2021): 12 months of
// training, 4 of validation, 4 of test, in steps of an hour or of 15 minutes.
constexpr int64_t kEttHourMonth = 30 * 24;

// The scaler and the columns travel in the checkpoint ("vocab" metadata), so
// that `remora infer` forecasts a file of recent rows without the training data.
class CsvSeriesTask : public ForecastTask {
 public:
  void build_data(const Config& cfg, const DataShard& shard, const std::string& saved) override {
    seed_data(cfg, shard);
    const CsvSeriesKeys& k = cfg.data.keys<CsvSeriesKeys>();
    context_ = k.context;
    horizon_ = k.horizon;
    subtract_last_ = k.subtract_last;
    if (cfg.data.corpus_missing) {  // inference from a checkpoint: its scaler and columns
      load_saved(saved);
      return;
    }
    const SeriesTable t = read_series_csv(k.path, csv_options(k));
    columns_ = t.columns;
    channels_ = int64_t(t.columns.size());
    const int64_t month = k.split == "ett_hour" ? kEttHourMonth : 4 * kEttHourMonth;
    if (k.split == "ratio") {
      const int64_t a = int64_t(double(t.rows) * k.train_frac), b = a + int64_t(double(t.rows) * k.valid_frac);
      check_fits(k.path, t.rows, a, b, t.rows, k);
      series_ = data::split_series_at(t.values, channels_, a, b, t.rows, k.context);
    } else {
      if (t.rows < 20 * month)
        throw InputError(k.path + ": " + std::to_string(t.rows) + " rows; data.split " + k.split + " needs " +
                         std::to_string(20 * month) + " (12 months of training, 4 of validation, 4 of test)");
      check_fits(k.path, t.rows, 12 * month, 16 * month, 20 * month, k);
      series_ = data::split_series_at(t.values, channels_, 12 * month, 16 * month, 20 * month, k.context);
    }
    scaler_ = {std::vector<double>(size_t(channels_), 0.0), std::vector<double>(size_t(channels_), 1.0)};
    if (k.scale) scaler_ = data::standardize(series_, channels_);
    if (!saved.empty()) {
      const std::vector<std::string> before = columns_;
      load_saved(saved);
      if (columns_ != before)
        throw InputError(k.path + ": its columns differ from the ones the checkpoint was trained on");
    }
  }

  std::string vocab_json() const override {
    return json{{"columns", columns_}, {"mean", scaler_.mean}, {"sd", scaler_.sd}}.dump();
  }

  // `remora infer --input FILE`: FILE holds at least data.context rows of the
  // same columns (and the time column, if any); the forecast of the next
  // data.horizon steps after its last row, in the file's units, one CSV row a step.
  bool predicts_rows() const override { return true; }
  std::vector<std::string> predict_rows(Experiment& ex, const std::string& input) override {
    SeriesCsvOptions o = csv_options(ex.cfg.data.keys<CsvSeriesKeys>());
    o.columns = columns_;
    const SeriesTable t = read_series_csv(input, o);
    if (t.rows < context_)
      throw InputError(input + ": " + std::to_string(t.rows) + " rows; a forecast reads the last data.context = " +
                       std::to_string(context_) + " of them");
    std::vector<double> window(size_t(context_ * channels_));
    for (int64_t r = 0; r < context_; ++r)
      for (int64_t c = 0; c < channels_; ++c) {
        const size_t at = size_t((t.rows - context_ + r) * channels_ + c);
        window[size_t(r * channels_ + c)] = (t.values[at] - scaler_.mean[size_t(c)]) / scaler_.sd[size_t(c)];
      }
    const Tensor x = Tensor::from_vector(window, {1, context_, channels_}).to(DType::f32);
    const Tensor base = window_base(x);
    Tensor sq = sub(x, base).to(ex.dtype()).to(ex.device());
    for (int64_t s = 0; s < horizon_; ++s)
      sq = cat({sq, ex.net.seq->run(sq, State{}).logits.slice(1, -1, sq.size(1))}, 1);
    const std::vector<double> f =
        add(sq.slice(1, context_, context_ + horizon_).to(DType::f32).to(Device::cpu()), base).to_vector();
    std::string header;
    for (const std::string& c : columns_) header += (header.empty() ? "" : ",") + c;
    std::vector<std::string> out{header};
    for (int64_t s = 0; s < horizon_; ++s) {
      std::string row;
      for (int64_t c = 0; c < channels_; ++c)
        row += (c ? "," : "") +
               number_text(f[size_t(s * channels_ + c)] * scaler_.sd[size_t(c)] + scaler_.mean[size_t(c)]);
      out.push_back(row);
    }
    return out;
  }

 private:
  void load_saved(const std::string& saved) {
    if (saved.empty()) throw InputError("data.path does not exist, and the checkpoint holds no scaler to forecast with");
    as_input_error("checkpoint metadata \"vocab\"", [&] {
      const json j = json::parse(saved);
      columns_ = j.at("columns").get<std::vector<std::string>>();
      scaler_.mean = j.at("mean").get<std::vector<double>>();
      scaler_.sd = j.at("sd").get<std::vector<double>>();
      if (columns_.empty() || scaler_.mean.size() != columns_.size() || scaler_.sd.size() != columns_.size())
        throw InputError("expected one mean and one deviation per column");
      for (double v : scaler_.sd)
        if (!(v > 0) || !std::isfinite(v)) throw InputError("a column's deviation is not a positive number");
    });
    channels_ = int64_t(columns_.size());
  }

  // Every split must hold the context and one forecast.
  static void check_fits(const std::string& path, int64_t rows, int64_t a, int64_t b, int64_t c,
                         const CsvSeriesKeys& k) {
    const int64_t need = k.context + k.horizon;
    if (a < need || b - a < k.horizon || c - b < k.horizon || a < k.context)
      throw InputError(path + ": " + std::to_string(rows) + " rows split at " + std::to_string(a) + " and " +
                       std::to_string(b) + " leave a split shorter than data.context + data.horizon = " +
                       std::to_string(need) + " steps; use a longer file or shorter windows");
  }

  std::vector<std::string> columns_;
  data::SeriesScaler scaler_;
};

void set_csv_series_keys(TaskEntry& e) {
  using K = CsvSeriesKeys;
  FieldTable<K> f;
  f.required("path", &K::path, {}, "the CSV file: a header row, then one row per step in time order")
      .choice("columns", &K::columns, "", {},
              "the value columns to forecast, comma-separated (\"\": every column but data.time_column)")
      .choice("time_column", &K::time_column, "date", {}, "a column of this name is skipped (\"\": none)")
      .choice("missing", &K::missing, "error", {"error", "interpolate"},
              "an empty or NA cell: an error, or the straight line between the column's neighbours")
      .choice("split", &K::split, "ratio", {"ratio", "ett_hour", "ett_minute"},
              "ratio: data.train_frac and data.valid_frac of the rows; ett_hour / ett_minute: the ETT "
              "benchmarks' 12 / 4 / 4 months of hourly or 15-minute rows")
      .number("train_frac", &K::train_frac, 0.7, 0.01, 0.98, "split ratio: the training share of the rows")
      .number("valid_frac", &K::valid_frac, 0.1, 0, 0.98, "split ratio: the validation share (the test split is the rest)")
      .boolean("scale", &K::scale, true,
               "standardise every column with the training split's mean and deviation (metrics on that scale)")
      .boolean("subtract_last", &K::subtract_last, false,
               "every window relative to its last context value (inputs, targets; added back to the forecasts)")
      .integer("context", &K::context, 96, 1, 1 << 20, "input steps of a window")
      .integer("horizon", &K::horizon, 24, 1, 1 << 20, "steps forecast from each window");
  set_task_keys<K>(e, f, [](Node& d, K& k, DataConfig& dc, const std::string& base_dir) {
    if (k.train_frac + k.valid_frac >= 1) d.fail("valid_frac", "data.train_frac + data.valid_frac must be < 1");
    if (!k.path.empty() && k.path[0] != '/' && !base_dir.empty()) k.path = base_dir + "/" + k.path;
    const std::string problem = regular_file_problem(k.path);
    if (!problem.empty() && !(dc.corpus_optional && problem == "does not exist")) d.fail("path", k.path + " " + problem);
    dc.corpus_missing = !problem.empty();
    dc.seq_len = k.context + k.horizon;
  });
}

}  // namespace

TaskEntry forecast_task() {
  TaskEntry e;
  e.name = "forecast";
  e.data_types = {"csv"};
  e.real_inputs = true;
  set_csv_series_keys(e);
  e.make = [] { return std::make_unique<CsvSeriesTask>(); };
  e.estimate = [](const Config& cfg, ModelContext& ctx, MemoryEstimate& e) {
    const CsvSeriesKeys& k = cfg.data.keys<CsvSeriesKeys>();
    const int64_t channels = cfg.data.corpus_missing ? 1 : int64_t(series_csv_columns(k.path, csv_options(k)).size());
    ctx.n_token = 1;
    ctx.n_out = channels;
    ctx.n_in = channels;
    ctx.seq_len = k.context + k.horizon;  // a window
    // At least two bytes of text a value ("1,"): the table and its three splits in f64.
    const double bytes = file_bytes(k.path);
    e.add("time series and its splits", "data.path (" + human_bytes(bytes) + ")", 2 * 8 * bytes / 2);
  };
  e.tiny_configs = [] {
    return std::vector<TinyConfig>{
        {"", tiny_config_with(tiny_causal_model(), {{"type", "csv"}, {"path", "data/series/co2_weekly.csv"},
                                                    {"missing", "interpolate"}, {"context", 16}, {"horizon", 4}})}};
  };
  return e;
}

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
