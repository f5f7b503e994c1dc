// SPDX-License-Identifier: BSD-3-Clause
// remora_dist_compare DIR_A DIR_B REL_TOL: compares two `remora train` output
// directories for tests/test_driver_dist.sh:
//   - metrics.jsonl: the same lines (step, split), and every number except the
//     timings (tokens_per_s, elapsed) within REL_TOL relative;
//   - last.safetensors: the same tensors (weights, optimizer state, carried
//     state), each within REL_TOL relative to its largest magnitude
//     (max |a - b| <= REL_TOL * max |a|, or max |a - b| <= 1e-7 absolute:
//     float32 noise); REL_TOL 0 means bit-identical.
// Prints the largest deviation found; exit 0 = equal, 1 = differ, 2 = bad input.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../core/safetensors.h"

using remora::Tensor;
using json = nlohmann::json;

namespace {
double worst = 0;
std::string worst_what;
int failures = 0;

void note(double rel, const std::string& what, double tol) {
  if (rel > worst) {
    worst = rel;
    worst_what = what;
  }
  if (rel > tol) {
    ++failures;
    std::printf("DIFFER %s: relative %.3g > %.3g\n", what.c_str(), rel, tol);
  }
}

std::vector<json> read_lines(const std::string& path) {
  std::ifstream f(path);
  if (!f.good()) {
    std::fprintf(stderr, "cannot read %s\n", path.c_str());
    std::exit(2);
  }
  std::vector<json> out;
  for (std::string l; std::getline(f, l);)
    if (!l.empty()) out.push_back(json::parse(l));
  return out;
}

void compare_json(const json& a, const json& b, const std::string& where, double tol) {
  if (a.is_number() && b.is_number()) {
    const double x = a.get<double>(), y = b.get<double>();
    const double d = std::fabs(x - y), s = std::max(std::fabs(x), std::fabs(y));
    note(tol == 0 ? (d == 0 ? 0 : INFINITY) : (s == 0 ? 0 : d / s), where, tol);
  } else if (a.is_array() && b.is_array() && a.size() == b.size()) {
    for (size_t i = 0; i < a.size(); ++i) compare_json(a[i], b[i], where + "[" + std::to_string(i) + "]", tol);
  } else if (a != b) {
    ++failures;
    std::printf("DIFFER %s: %s vs %s\n", where.c_str(), a.dump().c_str(), b.dump().c_str());
  }
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: remora_dist_compare DIR_A DIR_B REL_TOL\n");
    return 2;
  }
  const std::string A = argv[1], B = argv[2];
  const double tol = std::atof(argv[3]);
  const std::vector<json> la = read_lines(A + "/metrics.jsonl"), lb = read_lines(B + "/metrics.jsonl");
  if (la.size() != lb.size() || la.empty()) {
    std::printf("DIFFER metrics.jsonl: %zu vs %zu lines\n", la.size(), lb.size());
    return 1;
  }
  int64_t train_lines = 0;
  for (size_t i = 0; i < la.size(); ++i) {
    const std::string where = "metrics line " + std::to_string(i + 1) + " (step " + la[i].value("step", json()).dump() +
                              " " + la[i].value("split", std::string()) + ")";
    train_lines += la[i].value("split", std::string()) == "train";
    for (auto it = la[i].begin(); it != la[i].end(); ++it) {
      if (it.key() == "tokens_per_s" || it.key() == "elapsed") continue;
      if (!lb[i].contains(it.key())) {
        ++failures;
        std::printf("DIFFER %s: key %s missing\n", where.c_str(), it.key().c_str());
        continue;
      }
      compare_json(it.value(), lb[i][it.key()], where + " " + it.key(), tol);
    }
  }
  remora::Safetensors sa = remora::load_safetensors(A + "/last.safetensors");
  remora::Safetensors sb = remora::load_safetensors(B + "/last.safetensors");
  if (sa.tensors.size() != sb.tensors.size()) {
    std::printf("DIFFER last.safetensors: %zu vs %zu tensors\n", sa.tensors.size(), sb.tensors.size());
    return 1;
  }
  for (const auto& kv : sa.tensors) {
    if (!sb.contains(kv.first)) {
      ++failures;
      std::printf("DIFFER tensor %s missing in %s\n", kv.first.c_str(), B.c_str());
      continue;
    }
    const Tensor& tb = sb.get(kv.first);
    if (tb.shape() != kv.second.shape()) {
      ++failures;
      std::printf("DIFFER tensor %s: shapes differ\n", kv.first.c_str());
      continue;
    }
    const std::vector<double> x = kv.second.to_vector(), y = tb.to_vector();
    double d = 0, s = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      d = std::max(d, std::fabs(x[i] - y[i]));
      s = std::max(s, std::fabs(x[i]));
    }
    // Below kAbsFloor a difference is float32 rounding noise, not a result
    // (e.g. a parameter whose true gradient is 0 drifts by rounding alone).
    const double kAbsFloor = 1e-7;
    note(tol == 0 ? (d == 0 ? 0 : INFINITY) : (d <= kAbsFloor ? 0 : d / s), "tensor " + kv.first, tol);
  }
  std::printf("compared %zu metrics lines (%lld train) and %zu tensors; largest relative deviation %.3g (%s); "
              "tolerance %.3g\n",
              la.size(), (long long)train_lines, sa.tensors.size(), worst, worst_what.empty() ? "-" : worst_what.c_str(),
              tol);
  if (failures) {
    std::printf("FAIL: %d values differ\n", failures);
    return 1;
  }
  std::printf("EQUAL\n");
  return 0;
}
