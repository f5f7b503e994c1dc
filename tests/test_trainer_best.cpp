// SPDX-License-Identifier: BSD-3-Clause
// The Trainer's run length in epochs, the metric that picks `best`, the k best
// checkpoints kept, and early stopping (TrainerOptions::epochs, best_metric,
// best_mode, keep_best, early_stopping_patience / _min_delta; the driver's
// train.* keys of the same names), also across a resume.
#include <catch2/catch.hpp>
#include <remora/remora.h>

#include <unistd.h>

#include <fstream>

#include "../train/trainer.h"
#include "temp_dir.h"

using namespace remora;
using remora_test::TempDir;

namespace {

// Evaluation i (at step i * every) reports accuracy[i]; training is a tiny
// regression whose batches are a pure function of the position.
struct ScriptedSource : train::DataSource {
  std::shared_ptr<nn::Linear> fc;
  std::vector<double> accuracy;
  int64_t every = 1, epoch = 0, pos = 0;
  ScriptedSource(std::shared_ptr<nn::Linear> m, std::vector<double> acc, int64_t every_, int64_t epoch_ = 0)
      : fc(std::move(m)), accuracy(std::move(acc)), every(every_), epoch(epoch_) {}
  train::StepLoss train_loss(models::SequenceState&) override {
    Generator g(7 + uint64_t(pos++));
    Tensor x = Tensor::randn({4, 3}, DType::f64, Device::cpu(), &g);
    train::StepLoss r;
    r.loss = mean(pow(sub(fc->forward(x), sum(x, {1}, true)), 2.0));
    r.tokens = r.terms = 4;
    return r;
  }
  train::Evaluation evaluate(const std::string&, int64_t) override {
    const size_t i = size_t(pos / every) - 1;
    const double a = accuracy.at(std::min(i, accuracy.size() - 1));
    train::Evaluation e;
    e.loss = 1 - a;
    e.score = 0.5;  // the source's own score: never better after the first
    e.metrics = {{"loss", e.loss}, {"accuracy", a}, {"label", std::string("text")}};
    return e;
  }
  int64_t position() const override { return pos; }
  void set_position(int64_t p) override { pos = p; }
  int64_t epoch_batches() const override { return epoch; }
};

struct Records : train::Callback {
  std::vector<train::Record> all;
  void on_log(train::Trainer&, const train::Record& r) override { all.push_back(r); }
};

struct Run {
  train::FitResult result;
  int64_t steps = 0, schedule_total = 0;
  std::vector<train::Record> records;
};

Run fit(const std::string& dir, const std::vector<double>& acc, train::TrainerOptions o, int64_t epoch = 0) {
  manual_seed(3);
  auto m = std::make_shared<nn::Linear>(3, 1);
  m->to_(DType::f64);
  optim::SGD opt(m->parameters(), 0.01);
  ScriptedSource data(m, acc, std::max<int64_t>(1, o.eval_every * o.gradient_accumulation_steps), epoch);
  o.out_dir = dir;
  o.lr = 0.01;
  train::Trainer t(m, opt, data, o);
  auto rec = std::make_shared<Records>();
  t.add_callback(rec);
  Run r;
  r.result = t.fit();
  r.steps = t.options().steps;
  r.schedule_total = t.options().schedule.total_steps;
  r.records = rec->all;
  return r;
}

bool exists(const std::string& p) { return ::access(p.c_str(), F_OK) == 0; }

int64_t step_of(const std::string& path) { return train::read_checkpoint_info(path).step; }

std::vector<std::string> kept(const std::string& dir) { return train::RunDirectory::kept_best_files(dir); }

std::string kept_name(const std::string& dir, int64_t step) {
  return dir + "/best-step" + std::to_string(step) + ".safetensors";
}

}  // namespace

TEST_CASE("trainer: epochs set the run's length and the schedule's, and the records carry the epoch",
          "[trainer][best]") {
  TempDir dir;
  train::TrainerOptions o;
  o.epochs = 2;
  o.gradient_accumulation_steps = 2;
  o.eval_every = 0;
  o.log_every = 1;
  o.schedule.kind = optim::LRSchedule::warmup_linear;
  o.schedule.total_steps = 1000;
  // 7 batches an epoch, 2 per step: ceil(2 * 7 / 2) = 7 steps.
  const Run r = fit(dir.path, {0.5}, o, /*epoch=*/7);
  CHECK(r.steps == 7);
  CHECK(r.schedule_total == 7);
  CHECK(r.result.step == 7);
  const train::Record& last_train = r.records.at(r.records.size() - 2);
  REQUIRE(std::get<std::string>(last_train.at("split")) == "train");
  CHECK(std::get<double>(last_train.at("epoch")) == Approx(2.0));
  const train::Record& valid = r.records.back();
  CHECK(std::get<std::string>(valid.at("split")) == "valid");
  CHECK(std::get<double>(valid.at("epoch")) == Approx(2.0));

  // Half an epoch: ceil(3.5 / 2) = 2 steps.
  TempDir half;
  o.epochs = 0.5;
  CHECK(fit(half.path, {0.5}, o, 7).steps == 2);

  // A source without a known epoch cannot count in epochs.
  TempDir endless;
  CHECK_THROWS_WITH(fit(endless.path, {0.5}, o, 0), Catch::Contains("epochs needs data with a known length"));
}

TEST_CASE("trainer: best_metric picks best.safetensors in its direction; keep_best keeps the k best",
          "[trainer][best]") {
  TempDir dir;
  train::TrainerOptions o;
  o.steps = 12;
  o.eval_every = 2;  // evaluations at steps 2, 4, ..., 12
  o.best_metric = "accuracy";
  o.keep_best = 3;
  const std::vector<double> acc = {0.5, 0.8, 0.6, 0.9, 0.55, 0.7};
  const Run r = fit(dir.path, acc, o);
  CHECK(step_of(dir.path + "/best.safetensors") == 8);  // 0.9, at the 4th evaluation
  CHECK(r.result.best == Approx(-0.9));
  // The three best: 0.9 (step 8), 0.8 (step 4), 0.7 (step 12); the others deleted.
  CHECK(kept(dir.path) ==
        std::vector<std::string>{kept_name(dir.path, 12), kept_name(dir.path, 4), kept_name(dir.path, 8)});
  for (int64_t s : {4, 8, 12}) CHECK(step_of(kept_name(dir.path, s)) == s);

  // "min" reads the same numbers the other way: the lowest accuracy is best.
  TempDir low;
  o.best_mode = "min";
  fit(low.path, acc, o);
  CHECK(step_of(low.path + "/best.safetensors") == 2);
  CHECK(kept(low.path) ==
        std::vector<std::string>{kept_name(low.path, 10), kept_name(low.path, 2), kept_name(low.path, 6)});

  // Without best_metric the source's score decides (0.5 every time: the first stays best).
  TempDir plain;
  o.best_metric.clear();
  o.best_mode = "auto";
  o.keep_best = 1;
  fit(plain.path, acc, o);
  CHECK(step_of(plain.path + "/best.safetensors") == 2);
  CHECK(kept(plain.path).empty());

  // A metric the evaluation does not report, or one that is not a number, is named.
  for (const char* bad : {"f1", "label"}) {
    TempDir d;
    o.best_metric = bad;
    CHECK_THROWS_WITH(fit(d.path, acc, o), Catch::Contains(std::string("best_metric '") + bad) &&
                                               Catch::Contains("it reports accuracy, loss"));
  }
}

TEST_CASE("trainer: early stopping ends the run after `patience` evaluations without a better best",
          "[trainer][best]") {
  TempDir dir;
  train::TrainerOptions o;
  o.steps = 100;
  o.eval_every = 2;
  o.best_metric = "accuracy";
  o.early_stopping_patience = 2;
  // Best 0.7 at step 4; 0.65 and 0.69 do not beat it: the run stops at step 8.
  const std::vector<double> acc = {0.5, 0.7, 0.65, 0.69, 0.99};
  const Run r = fit(dir.path, acc, o);
  CHECK(r.result.early_stopped);
  CHECK(r.result.step == 8);
  CHECK(step_of(dir.path + "/last.safetensors") == 8);
  CHECK(step_of(dir.path + "/best.safetensors") == 4);
  const train::Record& note = r.records.back();
  CHECK(std::get<std::string>(note.at("split")) == "note");
  CHECK(std::get<std::string>(note.at("early_stopping")).find("no improvement of accuracy in 2") != std::string::npos);

  // min_delta: an improvement of 0.05 or less does not count (0.74 over 0.7), so
  // the run stops at step 8 though 0.74 became the best.
  TempDir delta;
  o.early_stopping_min_delta = 0.05;
  const Run d = fit(delta.path, {0.5, 0.7, 0.74, 0.6, 0.62, 0.99}, o);
  CHECK(d.result.step == 8);
  CHECK(step_of(delta.path + "/best.safetensors") == 6);

  // Patience never runs out while the metric improves.
  TempDir rising;
  o.early_stopping_min_delta = 0;
  o.steps = 10;
  const Run up = fit(rising.path, {0.1, 0.2, 0.3, 0.4, 0.5}, o);
  CHECK_FALSE(up.result.early_stopped);
  CHECK(up.result.step == 10);
}

TEST_CASE("trainer: the kept checkpoints and the patience count survive a resume", "[trainer][best]") {
  train::TrainerOptions o;
  o.steps = 16;
  o.eval_every = 2;
  o.best_metric = "accuracy";
  o.keep_best = 2;
  o.early_stopping_patience = 3;
  const std::vector<double> acc = {0.5, 0.8, 0.6, 0.7, 0.75, 0.7, 0.9, 0.1};
  TempDir straight, split;
  const Run a = fit(straight.path, acc, o);
  CHECK(a.result.early_stopped);
  CHECK(a.result.step == 10);  // 0.6, 0.7, 0.75 after the 0.8 of step 4

  o.until = 6;
  fit(split.path, acc, o);
  // A kept file that `last` does not list (written before a kill) goes on resume.
  {
    std::ofstream(kept_name(split.path, 5)) << "stale";
  }
  o.until = -1;
  o.resume = true;
  const Run b = fit(split.path, acc, o);
  CHECK(b.result.early_stopped);
  CHECK(b.result.step == 10);
  CHECK_FALSE(exists(kept_name(split.path, 5)));
  CHECK(kept(split.path) == std::vector<std::string>{kept_name(split.path, 10), kept_name(split.path, 4)});
  CHECK(kept(straight.path) == std::vector<std::string>{kept_name(straight.path, 10), kept_name(straight.path, 4)});

  // --overwrite removes the kept files with the rest of the run.
  o.resume = false;
  o.overwrite = true;
  o.keep_best = 1;
  o.steps = 2;
  fit(split.path, acc, o);
  CHECK(kept(split.path).empty());
}

TEST_CASE("trainer: bad keep_best, patience, min_delta, epochs and best_mode are setup errors", "[trainer][best]") {
  auto with = [](auto set) {
    TempDir d;
    train::TrainerOptions o;
    o.steps = 1;
    set(o);
    return fit(d.path, {0.5}, o);
  };
  CHECK_THROWS_AS(with([](train::TrainerOptions& o) { o.keep_best = 0; }), train::SetupError);
  CHECK_THROWS_AS(with([](train::TrainerOptions& o) { o.early_stopping_patience = -1; }), train::SetupError);
  CHECK_THROWS_AS(with([](train::TrainerOptions& o) { o.early_stopping_min_delta = -0.1; }), train::SetupError);
  CHECK_THROWS_AS(with([](train::TrainerOptions& o) { o.epochs = -1; }), train::SetupError);
  CHECK_THROWS_WITH(with([](train::TrainerOptions& o) { o.best_mode = "up"; }),
                    Catch::Contains("best_mode must be auto, min or max"));
}
