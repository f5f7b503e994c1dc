// Synthetic time series, chronological splits, forecast windows and their
// error metrics (declared in cli/data.h).
#include <algorithm>
#include <cmath>

#include "../../ops/ops.h"
#include "../data.h"

namespace remora {
namespace data {

namespace {
std::vector<double> host_values(const char* fn, const Tensor& t, const char* name) {
  REMORA_CHECK(t.defined(), fn << ": " << name << " is undefined");
  return t.to_vector();
}
}  // namespace

// ============================ time series ============================

std::vector<double> make_multi_periodic_series(const SeriesConfig& cfg, Generator& gen) {
  REMORA_CHECK(cfg.length > 0, "make_multi_periodic_series: length must be positive, got "
                                   << cfg.length);
  REMORA_CHECK(cfg.periods.size() == cfg.amplitudes.size(),
               "make_multi_periodic_series: " << cfg.periods.size() << " periods but "
                                              << cfg.amplitudes.size()
                                              << " amplitudes; fix: give one amplitude per period");
  for (double p : cfg.periods)
    REMORA_CHECK(p > 0, "make_multi_periodic_series: periods must be positive, got " << p);
  REMORA_CHECK(cfg.noise_std >= 0,
               "make_multi_periodic_series: noise_std must be >= 0, got " << cfg.noise_std);
  const double two_pi = 6.283185307179586;
  std::vector<double> phase;
  for (size_t k = 0; k < cfg.periods.size(); ++k) phase.push_back(two_pi * gen.next_uniform());
  const uint64_t base = gen.advance(uint64_t(cfg.length));  // one counter per noise sample
  std::vector<double> s(size_t(cfg.length));
  for (int64_t t = 0; t < cfg.length; ++t) {
    double v = cfg.trend * double(t);
    for (size_t k = 0; k < cfg.periods.size(); ++k)
      v += cfg.amplitudes[k] * std::sin(two_pi * double(t) / cfg.periods[k] + phase[k]);
    if (cfg.noise_std > 0)
      v += cfg.noise_std * gen.normal_at(base + uint64_t(t));
    s[size_t(t)] = v;
  }
  return s;
}

SeriesSplits split_series(const std::vector<double>& s, double train_frac, double valid_frac,
                          int64_t context, int64_t channels) {
  REMORA_CHECK(train_frac > 0 && valid_frac >= 0 && train_frac + valid_frac < 1,
               "split_series: need train_frac > 0, valid_frac >= 0 and their sum < 1, got "
                   << train_frac << " and " << valid_frac);
  REMORA_CHECK(channels >= 1, "split_series: channels must be >= 1, got " << channels);
  const int64_t n = int64_t(s.size()) / channels;
  const int64_t a = int64_t(double(n) * train_frac);
  const int64_t b = a + int64_t(double(n) * valid_frac);
  return split_series_at(s, channels, a, b, n, context);
}

SeriesSplits split_series_at(const std::vector<double>& s, int64_t channels, int64_t train_end,
                             int64_t valid_end, int64_t test_end, int64_t context) {
  const int64_t n = int64_t(s.size()) / channels;
  REMORA_CHECK(0 < train_end && train_end <= valid_end && valid_end <= test_end && test_end <= n,
               "split_series: the borders " << train_end << ", " << valid_end << ", " << test_end
                                            << " do not fit a series of " << n << " steps");
  REMORA_CHECK(context >= 0 && context <= train_end,
               "split_series: context " << context << " must be in [0, train length " << train_end
                                        << "]; fix: a longer series or a shorter context");
  auto rows = [&](int64_t from, int64_t to) {
    return std::vector<double>(s.begin() + from * channels, s.begin() + to * channels);
  };
  SeriesSplits out;
  out.train = rows(0, train_end);
  out.valid = rows(train_end - context, valid_end);
  out.test = rows(valid_end - context, test_end);
  return out;
}

SeriesScaler standardize(SeriesSplits& s, int64_t channels) {
  const int64_t n = int64_t(s.train.size()) / channels;
  REMORA_CHECK(n > 0, "standardize: an empty training split");
  SeriesScaler out;
  for (int64_t c = 0; c < channels; ++c) {
    double mean = 0, var = 0;
    for (int64_t r = 0; r < n; ++r) mean += s.train[size_t(r * channels + c)];
    mean /= double(n);
    for (int64_t r = 0; r < n; ++r) var += std::pow(s.train[size_t(r * channels + c)] - mean, 2);
    const double sd = std::sqrt(var / double(n));
    const double scale = sd > 0 ? 1 / sd : 1;
    for (std::vector<double>* v : {&s.train, &s.valid, &s.test})
      for (size_t i = size_t(c); i < v->size(); i += size_t(channels)) (*v)[i] = ((*v)[i] - mean) * scale;
    out.mean.push_back(mean);
    out.sd.push_back(1 / scale);
  }
  return out;
}

WindowDataset::WindowDataset(std::vector<double> series, int64_t input_len, int64_t horizon,
                             int64_t stride, int64_t channels)
    : s_(std::move(series)), Lin_(input_len), H_(horizon), stride_(stride), C_(channels) {
  REMORA_CHECK(Lin_ > 0 && H_ > 0 && stride_ > 0 && C_ > 0,
               "WindowDataset: input_len, horizon, stride and channels must be positive, got "
                   << Lin_ << ", " << H_ << ", " << stride_ << ", " << C_);
  const int64_t n = int64_t(s_.size()) / C_;
  REMORA_CHECK(n >= Lin_ + H_, "WindowDataset: a series of " << n
                                                             << " steps is shorter than input_len + "
                                                                "horizon = "
                                                             << Lin_ + H_
                                                             << "; fix: shorter windows or more data");
  n_ = (n - Lin_ - H_) / stride_ + 1;
}

ForecastBatch WindowDataset::batch(const std::vector<int64_t>& indices) const {
  REMORA_CHECK(!indices.empty(), "WindowDataset::batch: no indices");
  const int64_t B = int64_t(indices.size());
  ForecastBatch fb;
  fb.x = Tensor::empty({B, Lin_, C_}, DType::f32);
  fb.y = Tensor::empty({B, H_, C_}, DType::f32);
  float* x = fb.x.data_ptr<float>();
  float* y = fb.y.data_ptr<float>();
  for (int64_t r = 0; r < B; ++r) {
    const int64_t i = indices[size_t(r)];
    REMORA_CHECK(i >= 0 && i < n_, "WindowDataset::batch: window " << i << " is outside [0, "
                                                                   << n_ << ")");
    const double* src = s_.data() + i * stride_ * C_;
    for (int64_t k = 0; k < Lin_ * C_; ++k) x[r * Lin_ * C_ + k] = float(src[k]);
    for (int64_t k = 0; k < H_ * C_; ++k) y[r * H_ * C_ + k] = float(src[Lin_ * C_ + k]);
  }
  return fb;
}

namespace {
double mean_error(const char* fn, const Tensor& pred, const Tensor& target, bool squared) {
  REMORA_CHECK(pred.defined() && target.defined() && pred.shape() == target.shape(),
               fn << ": pred and target must have the same shape, got "
                  << (pred.defined() ? shape_str(pred.shape()) : "undefined") << " and "
                  << (target.defined() ? shape_str(target.shape()) : "undefined"));
  const std::vector<double> p = host_values(fn, pred, "pred"), t = host_values(fn, target, "target");
  REMORA_CHECK(!p.empty(), fn << ": empty tensors");
  double s = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const double d = p[i] - t[i];
    s += squared ? d * d : std::fabs(d);
  }
  return s / double(p.size());
}
}  // namespace

double mse(const Tensor& pred, const Tensor& target) { return mean_error("mse", pred, target, true); }
double mae(const Tensor& pred, const Tensor& target) { return mean_error("mae", pred, target, false); }
}  // namespace data
}  // namespace remora
