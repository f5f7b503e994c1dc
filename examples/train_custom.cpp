// SPDX-License-Identifier: BSD-3-Clause
// Training a model of your own with remora::train::Trainer: the loop,
// evaluation, checkpoints, exact resume, metrics.jsonl, signals and data
// parallelism come with it; you write the model and a DataSource.
//
//   train_custom --out runs/mlp                   # trains 200 steps
//   train_custom --out runs/mlp --resume          # continues a stopped run
//   mpirun -np 2 train_custom --out runs/mlp2     # data parallel: 2 x 16 rows of 32
//
// Options: --steps N, --until N (stop early, saving `last`), --overwrite,
// --threads N, --crash-after-checkpoints K (kills the process right after its
// K-th checkpoint file, as a power cut would: the run then resumes).
#include <remora/distributed/dist.h>
#include <remora/remora.h>
#include <remora/train/trainer.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

using namespace remora;

// The model: a two-layer MLP with dropout (so the generator's state matters).
struct MLP : nn::Module {
  MLP() {
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(8, 64));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(64, 1));
  }
  Tensor forward(const Tensor& x) const { return fc2->forward(dropout(relu(fc1->forward(x)), 0.1, is_training())); }
  std::shared_ptr<nn::Linear> fc1, fc2;
};

// The data: y = sum_j sin(x_j) + noise, x ~ N(0, 1)^8. Batch number `pos` is a
// pure function of the position, so a checkpoint's position replays the data.
// Every rank draws the global batch and keeps its rows.
class Regression : public train::DataSource {
 public:
  Regression(std::shared_ptr<MLP> m, int64_t batch) : model_(std::move(m)), batch_(batch) {}

  train::StepLoss train_loss(models::SequenceState&) override {
    auto [x, y] = batch(1000 + pos_++, batch_);
    const int64_t rows = batch_ / dist::world_size(), first = dist::rank() * rows;
    x = x.narrow(0, first, rows).contiguous();
    y = y.narrow(0, first, rows).contiguous();
    train::StepLoss s;
    s.loss = mse(model_->forward(x), y);
    s.tokens = rows;
    s.terms = rows;
    return s;
  }
  train::Evaluation evaluate(const std::string&, int64_t) override {
    auto [x, y] = batch(7, 256);  // the same validation set every time
    train::Evaluation e;
    e.loss = e.score = mse(model_->forward(x), y).item();
    e.metrics = {{"loss", e.loss}};  // a train::Record: written to metrics.jsonl
    return e;
  }
  int64_t position() const override { return pos_; }
  void set_position(int64_t p) override { pos_ = p; }

 private:
  static Tensor mse(const Tensor& pred, const Tensor& y) { return mean(pow(sub(pred, y), 2.0)); }
  static std::pair<Tensor, Tensor> batch(uint64_t seed, int64_t n) {
    Generator g(seed);
    Tensor x = Tensor::randn({n, 8}, DType::f32, Device::cpu(), &g);
    Tensor y = add(sum(sin(x), {1}, true), mul(Tensor::randn({n, 1}, DType::f32, Device::cpu(), &g),
                                                   Tensor::scalar(0.05, DType::f32)));
    return {x, y};
  }
  std::shared_ptr<MLP> model_;
  int64_t batch_, pos_ = 0;
};

// A hook: kill the process after the K-th checkpoint file (to show resume).
struct CrashAfter : train::Callback {
  explicit CrashAfter(int k) : left(k) {}
  void on_checkpoint(train::Trainer&, const std::string&) override {
    if (--left == 0) ::raise(SIGKILL);
  }
  int left;
};

int main(int argc, char** argv) {
  dist::init(&argc, &argv);  // a world of one without mpirun
  train::TrainerOptions o;
  o.steps = 200;
  o.eval_every = 50;
  o.log_every = 10;
  o.lr = 3e-3;
  o.clip = 1.0;
  o.schedule.kind = optim::LRSchedule::warmup_cosine;
  o.schedule.warmup_steps = 20;
  int crash_after = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&] {
      if (i + 1 >= argc) { std::fprintf(stderr, "%s needs a value\n", a.c_str()); std::exit(2); }
      return std::string(argv[++i]);
    };
    if (a == "--out") o.out_dir = value();
    else if (a == "--steps") o.steps = std::atoll(value().c_str());
    else if (a == "--until") o.until = std::atoll(value().c_str());
    else if (a == "--eval-every") o.eval_every = std::atoll(value().c_str());
    else if (a == "--threads") set_num_threads(std::atoi(value().c_str()));
    else if (a == "--resume") o.resume = true;
    else if (a == "--overwrite") o.overwrite = true;
    else if (a == "--crash-after-checkpoints") crash_after = std::atoi(value().c_str());
    else { std::fprintf(stderr, "unknown option %s\n", a.c_str()); return 2; }
  }
  if (o.out_dir.empty()) { std::fprintf(stderr, "usage: train_custom --out DIR [options]\n"); return 2; }
  o.schedule.total_steps = o.steps;

  manual_seed(1);  // the weights' initialisation and the dropout masks
  auto model = std::make_shared<MLP>();
  optim::AdamW opt(model->parameters(), o.lr);
  Regression data(model, 32);
  try {
    train::Trainer trainer(model, opt, data, o);
    if (dist::rank() == 0) {
      trainer.add_callback(train::jsonl_sink(o.out_dir + "/metrics.jsonl"));
      trainer.add_callback(train::progress_sink());
    }
    if (crash_after > 0) trainer.add_callback(std::make_shared<CrashAfter>(crash_after));
    const train::FitResult r = trainer.fit();
    if (dist::rank() == 0) std::printf("step %lld best %.6f%s\n", (long long)r.step, r.best, r.interrupted ? " (stopped)" : "");
    dist::finalize();
    return r.interrupted ? 128 + r.signal : 0;
  } catch (const train::SetupError& e) {
    std::fprintf(stderr, "train_custom: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_custom: %s\n", e.what());
    return 1;
  }
}
