// SPDX-License-Identifier: BSD-3-Clause
// TrainerOptions::gradient_accumulation_steps (train.gradient_accumulation_steps):
// a step over micro-batches of different sizes is the step of the mean loss
// over all their rows, and a run with it resumes exactly.
#include <catch2/catch.hpp>
#include <remora/remora.h>

#include "../train/trainer.h"
#include "temp_dir.h"

using namespace remora;
using remora_test::TempDir;

namespace {

// Batch k holds sizes[k % 3] rows of a synthetic regression, a pure function of k.
struct RowsSource : train::DataSource {
  std::shared_ptr<nn::Linear> fc;
  int64_t pos = 0;
  static constexpr int64_t sizes[3] = {3, 5, 2};
  explicit RowsSource(std::shared_ptr<nn::Linear> m) : fc(std::move(m)) {}
  static TensorPair batch(int64_t k) {
    Generator g(100 + uint64_t(k));
    Tensor x = Tensor::randn({sizes[k % 3], 4}, DType::f64, Device::cpu(), &g);
    return {x, sum(x, {1}, true)};
  }
  train::StepLoss train_loss(models::SequenceState&) override {
    auto [x, y] = batch(pos++);
    train::StepLoss r;
    r.loss = mean(pow(sub(fc->forward(x), y), 2.0));
    r.tokens = r.terms = x.size(0);
    return r;
  }
  train::Evaluation evaluate(const std::string&, int64_t) override {
    auto [x, y] = batch(1000);
    train::Evaluation e;
    e.loss = e.score = mean(pow(sub(fc->forward(x), y), 2.0)).item();
    e.metrics = {{"loss", e.loss}};
    return e;
  }
  int64_t position() const override { return pos; }
  void set_position(int64_t p) override { pos = p; }
};

std::shared_ptr<nn::Linear> fresh_model() {
  manual_seed(5);
  auto m = std::make_shared<nn::Linear>(4, 1);
  m->to_(DType::f64);
  return m;
}

// Trains `steps` steps (or resumes to them) with plain SGD and returns the weights.
std::vector<double> train_sgd(const std::string& dir, int64_t steps, int64_t accumulate, bool resume = false,
                              int64_t until = -1) {
  auto m = fresh_model();
  optim::SGD opt(m->parameters(), 0.1);
  RowsSource data(m);
  train::TrainerOptions o;
  o.out_dir = dir;
  o.steps = steps;
  o.until = until;
  o.eval_every = 0;
  o.lr = 0.1;
  o.resume = resume;
  o.gradient_accumulation_steps = accumulate;
  train::Trainer t(m, opt, data, o);
  t.fit();
  std::vector<double> w = m->weight.to_vector();
  w.push_back(m->bias.item<double>());
  return w;
}

}  // namespace

TEST_CASE("trainer: gradient accumulation steps on the mean loss over every row of its micro-batches",
          "[trainer][accumulation]") {
  TempDir run;
  // Reference: one SGD step on the mean over batches 0 and 1 (3 + 5 rows), then
  // one on batches 2 and 3 (2 + 3 rows).
  auto ref = fresh_model();
  for (int64_t step = 0; step < 2; ++step) {
    auto [x0, y0] = RowsSource::batch(2 * step);
    auto [x1, y1] = RowsSource::batch(2 * step + 1);
    Tensor x = cat({x0, x1}, 0), y = cat({y0, y1}, 0);
    for (Tensor& p : ref->parameters()) p.zero_grad();
    mean(pow(sub(ref->forward(x), y), 2.0)).backward();
    NoGradGuard ng;
    for (Tensor& p : ref->parameters()) p.add_(p.grad(), -0.1);
  }
  std::vector<double> want = ref->weight.to_vector();
  want.push_back(ref->bias.item<double>());

  const std::vector<double> got = train_sgd(run.path, 2, 2);
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(want[i]).epsilon(1e-12));

  // Without accumulation the same two steps see batches 0 and 1 alone: another result.
  TempDir other;
  const std::vector<double> plain = train_sgd(other.path, 2, 1);
  CHECK(plain != got);
}

TEST_CASE("trainer: a run with gradient accumulation stopped and resumed equals the uninterrupted run",
          "[trainer][accumulation]") {
  TempDir straight, split;
  const std::vector<double> a = train_sgd(straight.path, 5, 3);
  train_sgd(split.path, 5, 3, false, /*until=*/2);
  const std::vector<double> b = train_sgd(split.path, 5, 3, /*resume=*/true);
  CHECK(a == b);
}

TEST_CASE("trainer: gradient_accumulation_steps below 1 is a setup error", "[trainer][accumulation]") {
  TempDir run;
  CHECK_THROWS_WITH(train_sgd(run.path, 1, 0), Catch::Contains("gradient_accumulation_steps >= 1"));
}
