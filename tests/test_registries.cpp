// SPDX-License-Identifier: BSD-3-Clause
// [registries]: the checks that walk the driver's model and task registries
// (cli/models/models.def, tasks/tasks.def) through the tiny configs
// each entry provides, so that a newly registered type or task is checked
// with no edit here:
//   - coverage: every model type and every task has at least one tiny config,
//     and each one is a valid config of that type / task;
//   - the memory estimate (cli/memory_estimate.h) of each model
//     variant against the allocator's measured peak of a training run;
//   - a float64 gradient check of each whole model through its task's loss.
// The end-to-end runs (train, resume, eval, generate / infer) are [driver]
// (tests/test_driver.cpp), the f32 / f64 and device parity [models_parity]
// (tests/test_backends_models.cpp).
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <remora/remora.h>
#include <string>
#include <vector>

#include "../backends/backend.h"
#include "cli/cli.h"
#include "cli/experiment.h"
#include "registry_variants.h"
#include "sanitizer.h"

extern char** environ;

using namespace remora;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

double live_bytes() {
  const MemoryStats s = backend(Device::cpu()).memory_stats();
  return double(s.in_use + s.small_in_use);
}

// The model's own terms of the training estimate (Model::estimate_memory:
// parameters, gradients, optimizer state, activations) for the context the
// task gives once its data is built (the real vocabulary, not the bound that
// the estimate before reading the data uses), without the task's data terms.
double model_estimate(const driver::Config& cfg) {
  std::unique_ptr<driver::Task> task = driver::task_named(cfg.task).make();
  task->build_data(cfg, driver::DataShard{}, "");
  driver::MemoryEstimate terms;
  cfg.model.def->estimate_memory(cfg, task->model_context(cfg), driver::MemoryUse::train, terms);
  return terms.total();
}

// Runs this test binary again on the hidden child test below (a fresh process:
// the allocator's peak counts that training run only); returns its two numbers,
// or false with the child's output in *why.
bool measure_in_child(const std::string& config_path, double* data_live, double* peak, std::string* why) {
  const std::string out = config_path + ".measured";
  std::vector<std::string> args{"/proc/self/exe", "[.registries_memory_child]"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(&a[0]);
  argv.push_back(nullptr);
  std::vector<std::string> env_s;
  for (char** e = environ; *e; ++e) env_s.push_back(*e);
  env_s.push_back("REMORA_MEMORY_CHILD_CONFIG=" + config_path);
  env_s.push_back("REMORA_MEMORY_CHILD_OUT=" + out);
  std::vector<char*> envp;
  for (std::string& e : env_s) envp.push_back(&e[0]);
  envp.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  const std::string log = config_path + ".log";
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, "/proc/self/exe", &fa, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return false;
  int status = 0;
  ::waitpid(pid, &status, 0);
  std::ifstream f(out);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && f >> *data_live >> *peak) return true;
  std::ifstream l(log);
  *why = std::string((std::istreambuf_iterator<char>(l)), std::istreambuf_iterator<char>());
  return false;
}

// Writes config j to path and measures it in a child (a failed child fails the test, with its output).
void measure_config(const json& j, const std::string& path, double* data_live, double* peak) {
  std::ofstream(path) << j.dump(2);
  std::string why;
  const bool measured_ok = measure_in_child(path, data_live, peak, &why);
  INFO("the measuring child process failed: " << why);
  REQUIRE(measured_ok);
}

}  // namespace

TEST_CASE("registries: every registered model type and task provides a valid tiny config", "[registries]") {
  for (const driver::ModelEntry& e : driver::model_registry()) {
    const std::vector<driver::TinyConfig> tiny = e.make(e.type)->tiny_configs();
    if (tiny.empty()) FAIL_CHECK("model type " << e.type << " provides no tiny config (Model::tiny_configs, cli/model.h)");
    for (const driver::TinyConfig& t : tiny) {
      INFO(remora_test::variant_name(e.type, t.name) << ": " << t.config.dump());
      driver::Config cfg = remora_test::parse_variant(remora_test::with_source_paths(t.config));
      CHECK(cfg.model.type == e.type);
      CHECK(cfg.train.trainer.steps <= 10);
    }
  }
  for (const driver::TaskEntry& e : driver::task_registry()) {
    const std::vector<driver::TinyConfig> tiny = e.tiny_configs ? e.tiny_configs() : std::vector<driver::TinyConfig>{};
    if (tiny.empty()) FAIL_CHECK("task " << e.name << " provides no tiny config (TaskEntry::tiny_configs, cli/task.h)");
    for (const driver::TinyConfig& t : tiny) {
      INFO(remora_test::variant_name(e.name, t.name) << ": " << t.config.dump());
      driver::Config cfg = remora_test::parse_variant(remora_test::with_source_paths(t.config));
      CHECK(cfg.task == e.name);
      CHECK(cfg.train.trainer.steps <= 10);
    }
  }
  // Every data type is served by a task with a tiny config of that data type.
  for (const std::string& d : driver::data_type_names()) {
    bool covered = false;
    for (const remora_test::Variant& v : remora_test::task_variants()) covered |= v.config["data"]["type"] == d;
    INFO("data.type " << d << " has no task tiny config");
    CHECK(covered);
  }
}

// The model's estimate (its Model::estimate_memory terms, for the context its
// task gives: parameters, gradients, Adam's moments, activations) against the
// CPU allocator's peak of live bytes during `remora train` of the tiny config
// with a batch of 16 x 32 tokens (so that the activations outweigh the
// parameters), less the live bytes of the task's data. The estimate must be
// within
//   measured / 2 <= estimate <= 3 x measured.
// (The tiny configs measure 0.69 to 2.17: the formulas count the tensors kept for
// backward per layer, not every temporary of a kernel.)
constexpr double kEstimateBelow = 2, kEstimateAbove = 3;

TEST_CASE("registries: every model's memory estimate is within a factor of the measured training peak", "[registries][memory]") {
  char tmpl[] = "/tmp/remora_registries_XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  const std::string dir = tmpl;
  for (const remora_test::Variant& v : remora_test::model_variants()) {
    DYNAMIC_SECTION(v.name) {
      std::string name = v.name;
      std::replace(name.begin(), name.end(), '/', '_');
      const std::string path = dir + "/" + name + ".json";
      // A batch of 16 x 32 tokens: the activations outweigh the parameters.
      json j = v.config;
      j["data"]["batch_size"] = 16;
      j["data"]["seq_len"] = 32;
      j["data"]["eval_batch_size"] = 2;  // the tiny corpus's valid split holds 2 x 33 tokens
      double data_live = 0, peak = 0;
      measure_config(j, path, &data_live, &peak);
      const double measured = peak - data_live;
      const double estimate = model_estimate(remora_test::parse_variant(j));
      std::printf("registries memory: %-24s estimate %10.0f bytes, measured peak %10.0f bytes (ratio %.2f)\n",
                  v.name.c_str(), estimate, measured, estimate / measured);
      INFO(v.name << ": estimate " << estimate << " bytes, measured " << measured << " (peak " << peak
                  << " less the data's " << data_live << ")");
      CHECK(estimate >= measured / kEstimateBelow);
      CHECK(estimate <= kEstimateAbove * measured);
    }
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
}

// A training evaluates too: with evaluation batches larger than the training
// batch and a wide output layer (the copy task over 2,000 symbols, batches of 2
// against evaluation batches of 100) the evaluation's logits set the peak, and
// the training estimate (driver::estimate_memory) must cover it: the measured
// peak of live bytes at most 1.25x the estimate.
TEST_CASE("registries: the training estimate covers the evaluations of a training", "[registries][memory]") {
  char tmpl[] = "/tmp/remora_eval_peak_XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  const std::string dir = tmpl, path = dir + "/copy.json";
  json j;
  for (const remora_test::Variant& v : remora_test::task_variants())
    if (v.config["data"]["type"] == "copy") j = v.config;
  REQUIRE(!j.is_null());
  j["data"]["symbols"] = 2000;
  j["data"]["batch_size"] = 2;
  j["data"]["eval_batch_size"] = 100;
  j["data"]["n_test"] = 100;
  j["train"]["eval_batches"] = 1;
  double data_live = 0, peak = 0;
  measure_config(j, path, &data_live, &peak);
  const driver::MemoryEstimate e = driver::estimate_memory(remora_test::parse_variant(j), driver::MemoryUse::train);
  INFO("estimate " << e.summary() << "; measured peak " << peak << " bytes");
  CHECK(peak <= 1.25 * e.total());
  std::error_code ec;
  fs::remove_all(dir, ec);
}

// What the memory check before training promises: a run it admits does not
// outgrow the estimate. For every model variant and every task variant, from
// its tiny config with 2 training steps and one evaluation, each size key of
// the grid below that the config has is scaled up in turn (one key a run);
// the CPU allocator's peak of live bytes during `remora train` must stay within
// 1.25x the training estimate that `remora train` checks against the memory
// budget (driver::estimate_memory: parameters, optimizer state, activations,
// the task's data). Under AddressSanitizer, whose runs are several times
// slower, each variant scales its first size key only (the same code paths).
struct SizeKey {
  const char* section;
  const char* key;
  double factor;
};
constexpr SizeKey kSizeGrid[] = {
    {"data", "batch_size", 8}, {"data", "eval_batch_size", 16}, {"data", "seq_len", 8},
    {"model", "d_model", 8},   {"model", "n_layer", 3},         {"model", "mem_len", 8},
    {"data", "symbols", 512},  {"data", "delay", 8},            {"data", "copy_len", 8},
};
constexpr double kPeakOverEstimate = 1.25;

TEST_CASE("registries: the training estimate holds over a grid of size keys for every model and task", "[registries][memory]") {
  char tmpl[] = "/tmp/remora_memory_grid_XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  const std::string dir = tmpl;
  std::vector<remora_test::Variant> variants = remora_test::model_variants();
  for (const remora_test::Variant& v : remora_test::task_variants()) variants.push_back(v);
  int run = 0;
  for (const remora_test::Variant& v : variants) {
    json base = v.config;
    base["train"]["steps"] = 2;
    base["train"]["eval_every"] = 2;
    base["train"]["eval_batches"] = 1;
    const json resolved = remora_test::parse_variant(base).resolved;
    int points = 0;
    for (const SizeKey& k : kSizeGrid) {
      if (remora_test::kAddressSanitizer && points > 0) break;
      const json* now = resolved.contains(k.section) && resolved[k.section].contains(k.key)
                            ? &resolved[k.section][k.key] : nullptr;
      if (now == nullptr || !now->is_number_integer() || now->get<int64_t>() <= 0) continue;
      const int64_t value = int64_t(double(now->get<int64_t>()) * k.factor);
      const std::string point = v.name + " " + k.section + "." + k.key + "=" + std::to_string(value);
      json j = base;
      j[k.section][k.key] = value;
      try {
        remora_test::parse_variant(j);
      } catch (const driver::ConfigError&) {
        continue;  // a size this model or task does not take (the relevancy cells have one layer)
      }
      ++points;
      DYNAMIC_SECTION(point) {
        const std::string path = dir + "/grid" + std::to_string(run++) + ".json";
        double data_live = 0, peak = 0;
        measure_config(j, path, &data_live, &peak);
        const driver::MemoryEstimate e =
            driver::estimate_memory(remora_test::parse_variant(j), driver::MemoryUse::train);
        std::printf("memory grid: %-48s estimate %12.0f bytes, measured peak %12.0f bytes (peak / estimate %.2f)\n",
                    point.c_str(), e.total(), peak, peak / e.total());
        INFO(point << ": estimate " << e.summary() << "; measured peak " << peak << " bytes");
        CHECK(peak <= kPeakOverEstimate * e.total());
      }
    }
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
}

// The child of the tests above: builds the config's data alone (its live bytes),
// then runs `remora train` in this fresh process and writes the allocator's peak.
TEST_CASE("registries: memory child", "[.registries_memory_child]") {
  const char* path = std::getenv("REMORA_MEMORY_CHILD_CONFIG");
  const char* out = std::getenv("REMORA_MEMORY_CHILD_OUT");
  REQUIRE(path);
  REQUIRE(out);
  const driver::Config cfg = driver::load_config(path);
  double data_live = 0;
  {
    std::unique_ptr<driver::Task> task = driver::task_named(cfg.task).make();
    task->build_data(cfg, driver::DataShard{}, "");
    data_live = live_bytes();
  }
  const std::string run = std::string(path) + ".run";
  std::vector<std::string> args{"remora", "train", path, "--out", run};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(&a[0]);
  REQUIRE(driver::run_cli(int(argv.size()), argv.data()) == 0);
  std::ofstream(out) << data_live << " " << double(backend(Device::cpu()).memory_stats().peak_live) << "\n";
}

// The whole model in float64, dropout 0, through its task's training loss on
// one fixed batch: for every parameter tensor p and a random unit direction v
// of its shape, <dL/dp, v> from backward equals the central difference
// (L(p + eps v) - L(p - eps v)) / 2 eps, eps 1e-5, to |a - n| <= 1e-9 + 1e-5 |n|
// (the rounding of a loss of about 4 over 2 eps is about 1e-10; the
// derivatives along a unit direction are 1e-6 to 1e-1).
TEST_CASE("registries: every model's gradient passes a float64 check over all parameters", "[registries][gradcheck]") {
  for (const remora_test::Variant& v : remora_test::model_variants()) {
    DYNAMIC_SECTION(v.name) {
      driver::Experiment ex(remora_test::parse_variant(remora_test::without_dropout(v.config)));
      ex.model->to_(DType::f64);
      const int64_t start = ex.data_position();
      auto loss = [&] {  // the same batch every time, from an empty state
        ex.set_data_position(start);
        driver::State st;
        int64_t tokens = 0;
        return ex.train_loss(st, &tokens);
      };
      std::vector<Tensor> params = ex.model->parameters();
      for (Tensor& p : params) p.zero_grad();
      loss().backward();
      const double eps = 1e-5;
      Generator g(11);
      const std::vector<std::pair<std::string, Tensor>> named = ex.model->named_parameters();
      REQUIRE(named.size() == params.size());
      for (size_t i = 0; i < params.size(); ++i) {
        Tensor& p = params[i];
        Tensor dir = Tensor::randn(p.shape(), DType::f64, p.device(), &g);
        dir = dir * (1.0 / std::sqrt((dir * dir).sum().item()));
        const double analytic = p.grad().defined() ? (p.grad() * dir).sum().item() : 0.0;
        double numeric;
        {
          NoGradGuard ng;
          p.add_(dir, eps);
          const double up = loss().item();
          p.add_(dir, -2 * eps);
          const double down = loss().item();
          p.add_(dir, eps);
          numeric = (up - down) / (2 * eps);
        }
        INFO(v.name << " " << named[i].first << ": backward " << analytic << ", central difference " << numeric);
        CHECK(std::fabs(analytic - numeric) <= 1e-9 + 1e-5 * std::fabs(numeric));
      }
    }
  }
}
