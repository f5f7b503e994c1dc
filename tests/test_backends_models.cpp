// SPDX-License-Identifier: BSD-3-Clause
// [models_parity]: every registered model type (each variant of its tiny
// config, cli/model.h: Model::tiny_configs) trains 20 steps on a
// device from the same weights and the same data as on the CPU, dropout 0:
// the losses agree to 1e-4 relative at every step. The model and
// the data come from the driver (driver::Experiment: the task's batches and
// loss, seeded by the config); the weights are built once on the CPU and
// converted (Module::to_), the optimizer is SGD with momentum (Adam would turn
// rounding-level gradients into full-size steps and make the comparison
// measure noise).
//
// Without a GPU the device part says so in a WARN and returns; the harness is
// proven here by the same run in f32 against f64 on the CPU, which must agree
// to the same tolerance (so the tolerance is met by f32 rounding alone), and
// by a perturbed run that it must reject.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <remora/remora.h>

#include "../cases/backend_compare.h"
#include "cli/experiment.h"
#include "registry_variants.h"

using namespace remora;
using json = nlohmann::json;

namespace {

constexpr int kSteps = 20;
constexpr double kRel = 1e-4;

// The losses of kSteps SGD steps of variant v on (dev, dt): same weights, same data.
std::vector<double> train_losses(const remora_test::Variant& v, Device dev, DType dt, double perturb = 0) {
  // A batch of 8: enough masked tokens per step that a masked LM's loss falls visibly.
  json j = remora_test::without_dropout(v.config);
  j["data"]["batch_size"] = 8;
  driver::Config cfg = remora_test::parse_variant(j);
  cfg.device = dev;  // the task puts its batches there; the weights are drawn on the CPU
  driver::Experiment ex(cfg);
  if (perturb != 0) {
    NoGradGuard ng;
    for (Tensor& p : ex.model->parameters()) p.copy_(p * (1 + perturb));
  }
  ex.model->to_(dt);
  optim::SGD opt(ex.model->parameters(), 0.1, 0.9);
  driver::State st;
  std::vector<double> losses;
  while (losses.size() < size_t(kSteps)) {
    opt.zero_grad();
    int64_t tokens = 0;
    Tensor loss = ex.train_loss(st, &tokens);
    if (ex.task->loss_terms() == 0) continue;  // a masked-LM batch where nothing was masked: no loss
    loss.backward();
    opt.step();
    losses.push_back(loss.item());
  }
  return losses;
}

double mean(const std::vector<double>& v, size_t from, size_t to) {
  double s = 0;
  for (size_t i = from; i < to; ++i) s += v[i];
  return s / double(to - from);
}

// The first step where |a - b| > kRel |b|, or -1.
int first_disagreement(const std::vector<double>& a, const std::vector<double>& b, double* worst) {
  *worst = 0;
  int first = -1;
  for (size_t i = 0; i < a.size(); ++i) {
    const double rel = std::fabs(a[i] - b[i]) / std::fabs(b[i]);
    *worst = std::max(*worst, std::isnan(rel) ? INFINITY : rel);
    if (!(rel <= kRel) && first < 0) first = int(i);
  }
  return first;
}

std::string show(const std::vector<double>& a, const std::vector<double>& b) {
  std::string s;
  char buf[96];
  for (size_t i = 0; i < a.size(); ++i) {
    std::snprintf(buf, sizeof buf, "\n  step %2zu: %.9f vs %.9f", i, a[i], b[i]);
    s += buf;
  }
  return s;
}

}  // namespace

TEST_CASE("models parity: CPU f32 training follows CPU f64 to 1e-4 at every step", "[models_parity]") {
  const std::vector<remora_test::Variant> variants = remora_test::model_variants();
  REQUIRE(!variants.empty());
  for (const remora_test::Variant& k : variants) {
    DYNAMIC_SECTION(k.name) {
      const std::vector<double> ref = train_losses(k, Device::cpu(), DType::f64);
      const std::vector<double> got = train_losses(k, Device::cpu(), DType::f32);
      double worst;
      const int bad = first_disagreement(got, ref, &worst);
      INFO(k.name << ": worst relative difference " << worst << show(got, ref));
      CHECK(bad == -1);
      // It trains: the last five steps' mean loss is below the first five's.
      CHECK(mean(ref, kSteps - 5, kSteps) < mean(ref, 0, 5));
    }
  }
}

TEST_CASE("models parity: a run from other weights is told apart", "[models_parity]") {
  const remora_test::Variant k = remora_test::model_variants().front();
  const std::vector<double> ref = train_losses(k, Device::cpu(), DType::f64);
  const std::vector<double> got = train_losses(k, Device::cpu(), DType::f64, 1e-2);
  double worst;
  CHECK(first_disagreement(got, ref, &worst) >= 0);
  CHECK(worst > kRel);
}

TEST_CASE("models parity: every model type trains the same on the device as on the CPU", "[models_parity][cuda]") {
  std::string why;
  const std::vector<Device> devs = cases::accelerators(&why);
  if (devs.empty()) {
    WARN("skipped: no device other than the CPU: " << why);
    return;
  }
  for (Device dev : devs)
    for (const remora_test::Variant& k : remora_test::model_variants())
      for (DType dt : {DType::f32, DType::f64}) {
        const std::vector<double> ref = train_losses(k, Device::cpu(), dt);
        const std::vector<double> got = train_losses(k, dev, dt);
        double worst;
        const int bad = first_disagreement(got, ref, &worst);
        std::printf("models_parity: %s %s %s: worst relative loss difference %.3g over %d steps%s\n",
                    dev.str().c_str(), k.name.c_str(), dtype_name(dt), worst, kSteps, bad < 0 ? "" : " FAIL");
        INFO(dev.str() << " " << k.name << " " << dtype_name(dt) << ": worst " << worst << show(got, ref));
        CHECK(bad == -1);
      }
}
