// SPDX-License-Identifier: BSD-3-Clause
// remora::train::Trainer (train/trainer.h): exact resume, hooks in order, NaN
// handling, the run directory's rules, signals, and a kill at every point of
// the checkpoint sequence (through the examples/train_custom program).
#include <catch2/catch.hpp>
#include <signal.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <remora/remora.h>
#include <sstream>

#include "../train/trainer.h"
#include "temp_dir.h"

using namespace remora;
namespace fs = std::filesystem;

extern char** environ;

namespace {

using remora_test::TempDir;

// A linear model with dropout on its input, on a synthetic regression whose
// batch k is a pure function of k; carried "state": a running sum, to check
// that state round-trips through checkpoints.
struct Toy : nn::Module {
  Toy() { fc = register_module("fc", std::make_shared<nn::Linear>(4, 1)); }
  std::shared_ptr<nn::Linear> fc;
};

struct ToySource : train::DataSource {
  std::shared_ptr<Toy> m;
  int64_t pos = 0;
  int64_t nan_at = -1;  // the loss of this batch position becomes NaN
  explicit ToySource(std::shared_ptr<Toy> model) : m(std::move(model)) {}
  train::StepLoss train_loss(models::SequenceState& st) override {
    Generator g(100 + uint64_t(pos));
    Tensor x = Tensor::randn({8, 4}, DType::f64, Device::cpu(), &g);
    Tensor y = sum(x, {1}, true);
    Tensor pred = m->fc->forward(dropout(x, 0.2, m->is_training()));
    Tensor loss = mean(pow(sub(pred, y), 2.0));
    if (pos == nan_at) loss = mul(loss, Tensor::scalar(NAN, DType::f64));
    ++pos;
    NoGradGuard ng;
    Tensor s = st.mems.empty() ? Tensor::zeros({1, 1}, DType::f64) : st.mems[0];
    st.mems = {add(s, Tensor::scalar(loss.item(), DType::f64).reshape({1, 1}))};
    train::StepLoss r;
    r.loss = loss;
    r.tokens = 8;
    r.terms = 8;
    return r;
  }
  train::Evaluation evaluate(const std::string&, int64_t) override {
    Generator g(7);
    Tensor x = Tensor::randn({64, 4}, DType::f64, Device::cpu(), &g);
    train::Evaluation e;
    e.loss = e.score = mean(pow(sub(m->fc->forward(x), sum(x, {1}, true)), 2.0)).item();
    e.metrics = {{"loss", e.loss}};
    return e;
  }
  int64_t position() const override { return pos; }
  void set_position(int64_t p) override { pos = p; }
};

struct Run {
  std::shared_ptr<Toy> model;
  std::unique_ptr<optim::Adam> opt;
  std::unique_ptr<ToySource> data;
  std::unique_ptr<train::Trainer> trainer;
  Run(train::TrainerOptions o) {
    manual_seed(3);
    model = std::make_shared<Toy>();
    model->to_(DType::f64);
    opt = std::make_unique<optim::Adam>(model->parameters(), 0.05);
    data = std::make_unique<ToySource>(model);
    trainer = std::make_unique<train::Trainer>(model, *opt, *data, o);
    trainer->add_callback(train::jsonl_sink(o.out_dir + "/metrics.jsonl"));
  }
};

train::TrainerOptions opts(const std::string& dir, int64_t steps = 10) {
  train::TrainerOptions o;
  o.out_dir = dir;
  o.steps = steps;
  o.eval_every = 4;
  o.log_every = 1;
  o.lr = 0.05;
  o.schedule.kind = optim::LRSchedule::warmup_cosine;
  o.schedule.warmup_steps = 2;
  o.schedule.total_steps = steps;
  return o;
}

std::string read_all(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// Tensors and the step of two checkpoints are equal bit for bit.
void same_checkpoint(const std::string& a, const std::string& b) {
  Safetensors x = load_safetensors(a), y = load_safetensors(b);
  REQUIRE(x.tensors.size() == y.tensors.size());
  for (size_t i = 0; i < x.tensors.size(); ++i) {
    INFO(x.tensors[i].first);
    REQUIRE(x.tensors[i].first == y.tensors[i].first);
    CHECK(x.tensors[i].second.to_vector() == y.tensors[i].second.to_vector());
  }
  CHECK(x.metadata.at("step") == y.metadata.at("step"));
  CHECK(x.metadata.at("rng_offset") == y.metadata.at("rng_offset"));
  CHECK(x.metadata.at("data_position") == y.metadata.at("data_position"));
}

struct Recorder : train::Callback {
  std::vector<std::string> events;
  void on_train_begin(train::Trainer&) override { events.push_back("begin"); }
  void on_step_begin(train::Trainer&, int64_t s) override { events.push_back("step_begin " + std::to_string(s)); }
  void on_step_end(train::Trainer&, int64_t s, double) override { events.push_back("step_end " + std::to_string(s)); }
  void on_log(train::Trainer&, const train::Record& r) override {
    events.push_back("log " + std::get<std::string>(r.at("split")) + " " + std::to_string(std::get<int64_t>(r.at("step"))));
  }
  void on_evaluate(train::Trainer&, int64_t s, const train::Evaluation&) override {
    events.push_back("evaluate " + std::to_string(s));
  }
  void on_checkpoint(train::Trainer&, const std::string& p) override {
    events.push_back("checkpoint " + p.substr(p.rfind('/') + 1));
  }
  void on_train_end(train::Trainer&, const train::FitResult& r) override {
    events.push_back("end " + std::to_string(r.step));
  }
};

}  // namespace

TEST_CASE("trainer: a run stopped at any step and resumed equals the uninterrupted run bit for bit", "[trainer]") {
  TempDir d;
  {
    Run full(opts(d / "full"));
    CHECK(full.trainer->fit().step == 10);
  }
  for (int64_t until : {1, 3, 4, 9}) {
    INFO("stopped after step " << until);
    const std::string part = d / ("part" + std::to_string(until));
    {
      train::TrainerOptions o = opts(part);
      o.until = until;
      Run r(o);
      CHECK(r.trainer->fit().step == until);
    }
    {
      train::TrainerOptions o = opts(part);
      o.resume = true;
      Run r(o);
      CHECK(r.trainer->fit().step == 10);
    }
    same_checkpoint(d / "full/last.safetensors", part + "/last.safetensors");
    // Stopping with `until` off the evaluation schedule evaluates once more
    // there, which may pick another `best`; on the schedule nothing differs.
    if (until % 4 == 0) same_checkpoint(d / "full/best.safetensors", part + "/best.safetensors");
    // metrics.jsonl reads as one run: the training lines after the stop were
    // dropped on resume and written again, equal bit for bit.
    auto train_lines = [](const std::string& path) {
      std::istringstream in(read_all(path));
      std::vector<std::string> v;
      for (std::string l; std::getline(in, l);) {
        nlohmann::json j = nlohmann::json::parse(l);
        if (j["split"] != "train") continue;
        j.erase("tokens_per_s");  // timings differ
        j.erase("elapsed");
        v.push_back(j.dump());
      }
      return v;
    };
    CHECK(train_lines(d / "full/metrics.jsonl").size() == 10);
    CHECK(train_lines(d / "full/metrics.jsonl") == train_lines(part + "/metrics.jsonl"));
  }
}

TEST_CASE("trainer: hooks are called in order", "[trainer]") {
  TempDir d;
  train::TrainerOptions o = opts(d / "run", 4);
  o.eval_every = 2;
  o.log_every = 2;
  Run r(o);
  auto rec = std::make_shared<Recorder>();
  r.trainer->add_callback(rec);
  r.trainer->fit();
  const std::vector<std::string> want = {
      "begin",         "step_begin 1",  "step_end 1",     "step_begin 2",          "step_end 2",
      "log train 2",   "log valid 2",   "evaluate 2",     "checkpoint best.safetensors", "checkpoint last.safetensors",
      "step_begin 3",  "step_end 3",    "step_begin 4",   "step_end 4",            "log train 4",
      "log valid 4",   "evaluate 4"};
  REQUIRE(rec->events.size() >= want.size());
  CHECK(std::vector<std::string>(rec->events.begin(), rec->events.begin() + long(want.size())) == want);
  CHECK(rec->events.back() == "end 4");
}

TEST_CASE("trainer: a NaN loss stops the run naming the step; the good checkpoint stays", "[trainer]") {
  TempDir d;
  train::TrainerOptions o = opts(d / "run", 6);
  o.eval_every = 2;
  Run r(o);
  r.data->nan_at = 4;  // the fifth step
  const std::string last = d / "run/last.safetensors";
  try {
    r.trainer->fit();
    FAIL("no error");
  } catch (const train::TrainingFailure& e) {
    const std::string m = e.what();
    CHECK(m.find("NaN at step 5") != std::string::npos);
    CHECK(m.find(last) != std::string::npos);
  }
  CHECK(load_safetensors(last).metadata.at("step") == "4");
  for (const auto& kv : load_safetensors(last).tensors)
    for (double x : kv.second.to_vector()) CHECK(std::isfinite(x));
}

TEST_CASE("trainer: the run directory is locked, and an earlier run is never overwritten silently", "[trainer]") {
  TempDir d;
  const std::string dir = d / "run";
  {
    Run r(opts(dir, 2));
    r.trainer->fit();
  }
  const std::string before = read_all(dir + "/last.safetensors");
  SECTION("a finished run is refused without resume or overwrite") {
    Run r(opts(dir, 2));
    try {
      r.trainer->fit();
      FAIL("no error");
    } catch (const train::SetupError& e) {
      const std::string m = e.what();
      CHECK(m.find("already holds a training run") != std::string::npos);
      CHECK(m.find("resume") != std::string::npos);
    }
    CHECK(read_all(dir + "/last.safetensors") == before);
  }
  SECTION("overwrite replaces it") {
    train::TrainerOptions o = opts(dir, 3);
    o.overwrite = true;
    Run r(o);
    CHECK(r.trainer->fit().step == 3);
    CHECK(load_safetensors(dir + "/last.safetensors").metadata.at("step") == "3");
  }
  SECTION("a second training into a directory in use fails at once naming the holder") {
    train::RunDirectoryOptions ro;
    ro.resume = true;
    auto held = train::RunDirectory::open(dir, ro);
    try {
      train::RunDirectory::open(dir, ro);
      FAIL("no error");
    } catch (const train::SetupError& e) {
      CHECK(std::string(e.what()).find("in use by another training (pid " + std::to_string(::getpid()) + ")") !=
            std::string::npos);
    }
    held.reset();
    CHECK_NOTHROW(train::RunDirectory::open(dir, ro));
  }
  SECTION("empty and root paths, and files that are not directories, are refused") {
    CHECK_THROWS_AS(train::RunDirectory::open(""), train::SetupError);
    CHECK_THROWS_AS(train::RunDirectory::open("/"), train::SetupError);
    CHECK_THROWS_AS(train::RunDirectory::open("//"), train::SetupError);
    CHECK_THROWS_AS(train::RunDirectory::open(dir + "/last.safetensors"), train::SetupError);
  }
  SECTION("a FIFO in place of a run file is refused, never opened") {
    const std::string fresh = d / "fifo_run";
    fs::create_directories(fresh);
    REQUIRE(::mkfifo((fresh + "/metrics.jsonl").c_str(), 0644) == 0);
    try {
      train::RunDirectory::open(fresh);
      FAIL("no error");
    } catch (const train::SetupError& e) {
      CHECK(std::string(e.what()).find("metrics.jsonl is a FIFO") != std::string::npos);
    }
    // FIFOs where a killed run's temporaries go are removed, never opened.
    const std::string other = d / "fifo_tmp";
    fs::create_directories(other);
    REQUIRE(::mkfifo((other + "/config.json.tmp").c_str(), 0644) == 0);
    REQUIRE(::mkfifo((other + "/last.safetensors.tmp").c_str(), 0644) == 0);
    train::TrainerOptions o = opts(other, 2);
    o.config_file_json = "{}\n";
    Run r(o);
    CHECK(r.trainer->fit().step == 2);
    CHECK(read_all(other + "/config.json") == "{}\n");
  }
}

TEST_CASE("trainer: a changed configuration is refused on resume unless allowed, and then noted", "[trainer]") {
  TempDir d;
  const std::string dir = d / "run";
  train::TrainerOptions o = opts(dir, 4);
  o.until = 2;
  o.config_json = R"({"train": {"lr": 0.05, "steps": 4}, "seed": 1})";
  o.metadata["config"] = o.config_json;
  o.resumable_keys = {"/train/steps"};
  {
    Run r(o);
    r.trainer->fit();
  }
  o.until = -1;
  o.resume = true;
  o.config_json = R"({"train": {"lr": 0.5, "steps": 8}, "seed": 2})";
  {
    Run r(o);
    try {
      r.trainer->fit();
      FAIL("no error");
    } catch (const train::SetupError& e) {
      const std::string m = e.what();
      CHECK(m.find("/train/lr 0.05 -> 0.5") != std::string::npos);
      CHECK(m.find("/seed 1 -> 2") != std::string::npos);
      CHECK(m.find("steps") == std::string::npos);  // resumable
    }
  }
  o.allow_config_change = true;
  {
    Run r(o);
    CHECK(r.trainer->fit().step == 4);
  }
  CHECK(read_all(dir + "/metrics.jsonl").find("\"config_changed_on_resume\"") != std::string::npos);
}

TEST_CASE("trainer: SIGTERM finishes the step, saves last, and the run resumes exactly", "[trainer]") {
  TempDir d;
  {
    Run full(opts(d / "full"));
    full.trainer->fit();
  }
  struct SignalAt : train::Callback {
    void on_step_end(train::Trainer&, int64_t s, double) override {
      if (s == 3) ::raise(SIGTERM);
    }
  };
  {
    Run r(opts(d / "part"));
    r.trainer->add_callback(std::make_shared<SignalAt>());
    const train::FitResult res = r.trainer->fit();
    CHECK(res.interrupted);
    CHECK(res.signal == SIGTERM);
    CHECK(res.step == 3);
  }
  CHECK(load_safetensors(d / "part/last.safetensors").metadata.at("step") == "3");
  {
    train::TrainerOptions o = opts(d / "part");
    o.resume = true;
    Run r(o);
    CHECK(r.trainer->fit().step == 10);
  }
  same_checkpoint(d / "full/last.safetensors", d / "part/last.safetensors");
}

#ifdef REMORA_EXAMPLE_TRAIN_CUSTOM
namespace {
int spawn(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  std::vector<std::string> a = args;
  for (std::string& s : a) argv.push_back(&s[0]);
  argv.push_back(nullptr);
  pid_t pid;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  REQUIRE(posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ) == 0);
  posix_spawn_file_actions_destroy(&fa);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}
}  // namespace

TEST_CASE("trainer: a kill at every point of the checkpoint sequence leaves last and best consistent", "[trainer]") {
  TempDir d;
  const std::string exe = REMORA_EXAMPLE_TRAIN_CUSTOM;
  const std::vector<std::string> base = {exe, "--steps", "40", "--eval-every", "10", "--threads", "1"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = base;
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  REQUIRE(spawn(with({"--out", d / "full"})) == 0);
  // The loss falls at every evaluation here, so each writes best then last: 8 files.
  for (int k = 1; k <= 8; ++k) {
    INFO("killed after checkpoint file " << k);
    const std::string dir = d / ("k" + std::to_string(k));
    CHECK(spawn(with({"--out", dir, "--crash-after-checkpoints", std::to_string(k)})) == 128 + SIGKILL);
    // `best` is never older than the best score `last` records.
    if (fs::exists(dir + "/last.safetensors")) {
      const double last_best = std::stod(load_safetensors(dir + "/last.safetensors").metadata.at("best_valid"));
      REQUIRE(fs::exists(dir + "/best.safetensors"));
      const double best_best = std::stod(load_safetensors(dir + "/best.safetensors").metadata.at("best_valid"));
      CHECK(best_best <= last_best);
    }
    // Resuming (or starting again, when nothing was saved yet) finishes the run as if never killed.
    const bool can_resume = fs::exists(dir + "/last.safetensors");
    REQUIRE(spawn(with({"--out", dir, can_resume ? "--resume" : "--overwrite"})) == 0);
    same_checkpoint(d / "full/last.safetensors", dir + "/last.safetensors");
    same_checkpoint(d / "full/best.safetensors", dir + "/best.safetensors");
  }
}
#endif
