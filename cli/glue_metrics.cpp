// SPDX-License-Identifier: BSD-3-Clause
// See glue_metrics.h.
#include "glue_metrics.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "../core/error.h"

namespace remora {
namespace driver {
namespace glue {
namespace {

void check_pair(size_t a, size_t b, const char* fn) {
  REMORA_CHECK(a == b, fn << ": " << a << " predictions for " << b << " gold values");
}

void check_ids(const std::vector<int64_t>& v, const char* fn) {
  for (int64_t x : v) REMORA_CHECK(x >= 0, fn << ": class ids must be >= 0, got " << x);
}

int64_t classes_of(const std::vector<int64_t>& pred, const std::vector<int64_t>& gold) {
  int64_t n = 0;
  for (int64_t x : pred) n = std::max(n, x + 1);
  for (int64_t x : gold) n = std::max(n, x + 1);
  return n;
}

}  // namespace

double accuracy(const std::vector<int64_t>& pred, const std::vector<int64_t>& gold) {
  check_pair(pred.size(), gold.size(), "accuracy");
  if (gold.empty()) return 0;
  int64_t right = 0;
  for (size_t i = 0; i < gold.size(); ++i) right += pred[i] == gold[i];
  return double(right) / double(gold.size());
}

double f1_of(const std::vector<int64_t>& pred, const std::vector<int64_t>& gold, int64_t positive) {
  check_pair(pred.size(), gold.size(), "f1");
  int64_t tp = 0, fp = 0, fn = 0;
  for (size_t i = 0; i < gold.size(); ++i) {
    const bool p = pred[i] == positive, g = gold[i] == positive;
    tp += p && g;
    fp += p && !g;
    fn += !p && g;
  }
  const int64_t denom = 2 * tp + fp + fn;
  return denom == 0 ? 0.0 : double(2 * tp) / double(denom);
}

double f1_macro(const std::vector<int64_t>& pred, const std::vector<int64_t>& gold) {
  check_pair(pred.size(), gold.size(), "f1_macro");
  check_ids(pred, "f1_macro");
  check_ids(gold, "f1_macro");
  const int64_t n = classes_of(pred, gold);
  std::vector<char> present(size_t(n), 0);
  for (int64_t x : pred) present[size_t(x)] = 1;
  for (int64_t x : gold) present[size_t(x)] = 1;
  double sum = 0;
  int64_t counted = 0;
  for (int64_t c = 0; c < n; ++c)
    if (present[size_t(c)]) {
      sum += f1_of(pred, gold, c);
      ++counted;
    }
  return counted == 0 ? 0.0 : sum / double(counted);
}

double matthews(const std::vector<int64_t>& pred, const std::vector<int64_t>& gold) {
  check_pair(pred.size(), gold.size(), "matthews");
  check_ids(pred, "matthews");
  check_ids(gold, "matthews");
  const int64_t n = classes_of(pred, gold);
  std::vector<double> t(size_t(n), 0), p(size_t(n), 0);
  double correct = 0;
  for (size_t i = 0; i < gold.size(); ++i) {
    t[size_t(gold[i])] += 1;
    p[size_t(pred[i])] += 1;
    correct += pred[i] == gold[i];
  }
  const double s = double(gold.size());
  double pt = 0, pp = 0, tt = 0;
  for (int64_t k = 0; k < n; ++k) {
    pt += p[size_t(k)] * t[size_t(k)];
    pp += p[size_t(k)] * p[size_t(k)];
    tt += t[size_t(k)] * t[size_t(k)];
  }
  const double cov_tp = correct * s - pt, cov_pp = s * s - pp, cov_tt = s * s - tt;
  const double denom = cov_pp * cov_tt;
  return denom <= 0 ? 0.0 : cov_tp / std::sqrt(denom);
}

double pearson(const std::vector<double>& x, const std::vector<double>& y) {
  check_pair(x.size(), y.size(), "pearson");
  const size_t n = x.size();
  if (n == 0) return 0;
  const double mx = std::accumulate(x.begin(), x.end(), 0.0) / double(n);
  const double my = std::accumulate(y.begin(), y.end(), 0.0) / double(n);
  double sxy = 0, sxx = 0, syy = 0;
  for (size_t i = 0; i < n; ++i) {
    const double dx = x[i] - mx, dy = y[i] - my;
    sxy += dx * dy;
    sxx += dx * dx;
    syy += dy * dy;
  }
  if (!(sxx > 0 && syy > 0)) return 0;
  const double r = sxy / std::sqrt(sxx * syy);
  return std::max(-1.0, std::min(1.0, r));
}

std::vector<double> average_ranks(const std::vector<double>& x) {
  std::vector<size_t> order(x.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return x[a] < x[b]; });
  std::vector<double> rank(x.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && x[order[j + 1]] == x[order[i]]) ++j;
    const double r = (double(i) + double(j)) / 2 + 1;  // ranks i+1 .. j+1, averaged
    for (size_t k = i; k <= j; ++k) rank[order[k]] = r;
    i = j + 1;
  }
  return rank;
}

double spearman(const std::vector<double>& x, const std::vector<double>& y) {
  check_pair(x.size(), y.size(), "spearman");
  return pearson(average_ranks(x), average_ranks(y));
}

}  // namespace glue
}  // namespace driver
}  // namespace remora
