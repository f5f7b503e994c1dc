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
                          int64_t context) {
  REMORA_CHECK(train_frac > 0 && valid_frac >= 0 && train_frac + valid_frac < 1,
               "split_series: need train_frac > 0, valid_frac >= 0 and their sum < 1, got "
                   << train_frac << " and " << valid_frac);
  const int64_t n = int64_t(s.size());
  const int64_t a = int64_t(double(n) * train_frac);
  const int64_t b = a + int64_t(double(n) * valid_frac);
  REMORA_CHECK(context >= 0 && context <= a,
               "split_series: context " << context << " must be in [0, train length " << a
                                        << "]; fix: a longer series or a shorter context");
  SeriesSplits out;
  out.train.assign(s.begin(), s.begin() + a);
  out.valid.assign(s.begin() + (a - context), s.begin() + b);
  out.test.assign(s.begin() + (b - context), s.end());
  return out;
}

WindowDataset::WindowDataset(std::vector<double> series, int64_t input_len, int64_t horizon,
                             int64_t stride)
    : s_(std::move(series)), Lin_(input_len), H_(horizon), stride_(stride) {
  REMORA_CHECK(Lin_ > 0 && H_ > 0 && stride_ > 0,
               "WindowDataset: input_len, horizon and stride must be positive, got "
                   << Lin_ << ", " << H_ << ", " << stride_);
  const int64_t n = int64_t(s_.size());
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
  fb.x = Tensor::empty({B, Lin_, 1}, DType::f32);
  fb.y = Tensor::empty({B, H_, 1}, DType::f32);
  float* x = fb.x.data_ptr<float>();
  float* y = fb.y.data_ptr<float>();
  for (int64_t r = 0; r < B; ++r) {
    const int64_t i = indices[size_t(r)];
    REMORA_CHECK(i >= 0 && i < n_, "WindowDataset::batch: window " << i << " is outside [0, "
                                                                   << n_ << ")");
    const double* src = s_.data() + i * stride_;
    for (int64_t t = 0; t < Lin_; ++t) x[r * Lin_ + t] = float(src[t]);
    for (int64_t t = 0; t < H_; ++t) y[r * H_ + t] = float(src[Lin_ + t]);
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
