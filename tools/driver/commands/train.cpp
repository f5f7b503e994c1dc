// `remora train`: the training loop, periodic evaluation, checkpoints and
// metrics.jsonl (resumable bit-exactly on CPU with the same thread count).
// Under mpirun it trains one model data-parallel (docs/distributed.md): each
// rank its rows of the global batch, gradients averaged by dist::DataParallel,
// rank 0 evaluating, writing checkpoints and metrics, the others quiet.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>

#include "../../../core/autocast.h"
#include "../../../core/autograd.h"
#include "../../../core/generator.h"
#include "../../../dist/data_parallel.h"
#include "../../../dist/dist.h"
#include "../../../ops/ops.h"
#include "../input_checks.h"
#include "../memory_report.h"
#include "common.h"
#include "train_dist.h"

namespace remora {
namespace driver {
namespace {

bool is_dir(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// Creates DIR (and parents) and checks that it is writable, before any work.
void prepare_out_dir(const std::string& dir) {
  std::string cur;
  std::stringstream ss(dir);
  std::string part;
  if (!dir.empty() && dir[0] == '/') cur = "/";
  while (std::getline(ss, part, '/')) {
    if (part.empty()) continue;
    cur += part + "/";
    if (!is_dir(cur) && ::mkdir(cur.c_str(), 0755) != 0 && !is_dir(cur))
      throw InputError("--out " + dir + ": cannot create directory " + cur + ": " + std::strerror(errno));
  }
  const std::string probe = dir + "/.remora_write_test";
  std::ofstream f(probe);
  if (!f.good()) throw InputError("--out " + dir + ": directory is not writable");
  f.close();
  ::unlink(probe.c_str());
}

std::string default_out(const std::string& config_path) {
  std::string base = config_path.substr(config_path.find_last_of('/') + 1);
  const size_t dot = base.rfind('.');
  if (dot != std::string::npos) base = base.substr(0, dot);
  return "out/" + base;
}

std::string fmt(double x, int prec = 4) {
  std::ostringstream os;
  os.setf(std::ios::fixed);
  os.precision(prec);
  os << x;
  return os.str();
}

std::string human_time(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  const int64_t t = int64_t(s + 0.5);
  std::ostringstream os;
  if (t >= 3600) os << t / 3600 << "h";
  if (t >= 60) os << (t / 60) % 60 << "m";
  os << t % 60 << "s";
  return os.str();
}

// Whether every parameter is finite (checked before a checkpoint is written).
bool all_finite(const nn::Module& m) {
  NoGradGuard ng;
  for (const Tensor& p : m.parameters()) {
    const double s = sum(p.to(DType::f64)).item();
    if (!std::isfinite(s)) return false;
  }
  return true;
}

// Keeps the metrics lines up to `step` (a resumed run rewrites what follows).
void truncate_metrics(const std::string& path, int64_t step) {
  std::ifstream in(path);
  if (!in.good()) return;
  std::vector<std::string> keep;
  std::string line;
  while (std::getline(in, line)) {
    try {
      if (json::parse(line).value("step", int64_t(0)) <= step) keep.push_back(line);
    } catch (const json::exception&) {
    }
  }
  in.close();
  // Rewritten beside and renamed: a full disk must not cost the lines kept so far.
  const std::string tmp = path + ".tmp";
  std::ofstream out(tmp, std::ios::trunc);
  for (const std::string& l : keep) out << l << "\n";
  out.flush();
  const bool ok = out.good();
  out.close();
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    throw RunError("cannot rewrite " + path + ": " + std::strerror(err));
  }
}

int run_train(const Args& a) {
  Config cfg = config_of(a, "train");
  MemoryReport mem(a.flags.count("memory-report") > 0, cfg.device);
  mem.mark("startup (libraries, config)");
  const std::string out = a.opts.count("out") ? a.opts.at("out") : default_out(a.positional[0]);
  const bool resume = a.flags.count("resume") > 0;
  const int64_t until = a.opts.count("until") ? to_int("until", a.opts.at("until"), 0, int64_t(1) << 40) : -1;
  // Under mpirun: every rank must run the same config and command line.
  const DataShard shard = start_distributed(
      cfg, cfg.resolved.dump() + "\n--out " + out + (resume ? " --resume" : "") + " --until " + std::to_string(until));
  const int64_t world = shard.world;
  // One GPU per rank: a CUDA config runs rank r on cuda:<its local rank> (the
  // GPU dist's NCCL communicator uses); an index in the config is not used.
  if (world > 1 && cfg.device.is_cuda()) cfg.device = Device::cuda(dist::local_rank());
  apply_threads(cfg);
  const bool main_rank = shard.rank == 0;  // writes checkpoints and metrics, prints
  if (main_rank) {
    prepare_out_dir(out);
    clean_stale_tmp(out);  // temporaries of a killed run's checkpoint / metrics writes
  }
  const std::string last = out + "/last.safetensors", best_path = out + "/best.safetensors";

  std::string vocab;
  if (resume) {
    if (::access(last.c_str(), R_OK) != 0) throw InputError("--resume: no checkpoint at " + last);
    vocab = read_checkpoint_info(last).vocab_json;
  }
  ExperimentOptions opts;
  opts.vocab_json = vocab;
  opts.shard = shard;
  Experiment ex(cfg, opts);
  mem.mark("data and model built");
  std::unique_ptr<optim::Optimizer> opt = ex.make_optimizer();
  const optim::LRSchedule sched = ex.schedule();
  Experiment::State state;
  int64_t step = 0;
  double best = INFINITY;
  if (resume) {
    Checkpoint c = load_checkpoint(last, ex, opt.get(), &state);
    step = c.step;
    best = c.best_valid;
    default_generator().set_state(c.rng_seed, c.rng_offset);
    ex.set_data_position(c.data_position);
    // A checkpoint holds the global batch's carried state (gathered from every
    // rank), so any world size that divides the batch takes its rows of it.
    state = shard_state(state, shard, cfg.data.batch_size);
    if (main_rank) {
      truncate_metrics(out + "/metrics.jsonl", step);
      std::fprintf(stderr, "resumed from %s at step %lld\n", last.c_str(), (long long)step);
      if (c.world_size != world)
        std::fprintf(stderr,
                     "note: %s was written by %lld process(es), resuming with %lld: the data is re-sharded "
                     "(the same global batches and state); the run continues the same training, equal up to "
                     "float summation order but not bit-identical to continuing with %lld\n",
                     last.c_str(), (long long)c.world_size, (long long)world, (long long)c.world_size);
    }
  } else if (main_rank) {
    std::remove((out + "/metrics.jsonl").c_str());
  }
  // Data parallel: rank 0's weights everywhere (checked by hash), gradients
  // averaged in buckets that start during backward. Not built in a world of one.
  std::unique_ptr<dist::DataParallel> dp;
  if (world > 1) {
    dist::DataParallelOptions o;
    o.bucket_bytes = size_t(cfg.train.distributed.bucket_mb * double(1 << 20));
    o.overlap = true;
    o.check_every = int(std::min<int64_t>(cfg.train.distributed.check_every, 1 << 30));
    dp = std::make_unique<dist::DataParallel>(ex.model, o);
  }
  if (world > 1) {
    // Dropout masks: every rank its own stream of the default generator. Rank
    // 0 keeps the one-process stream; rank r's seed is derived from it, and
    // the offsets advance alike (equal shapes on every rank), so a checkpoint's
    // (rank 0 seed, offset) restores every rank's stream on resume.
    Generator& g = default_generator();
    g.set_state(g.seed() + 0x9E3779B97F4A7C15ull * uint64_t(shard.rank), g.offset());
  }
  if (main_rank) {
    std::ofstream f(out + "/config.json");
    f << cfg.resolved.dump(2) << "\n";
    f.flush();
    if (!f.good()) throw RunError("cannot write " + out + "/config.json: " + std::strerror(errno));
  }
  std::ofstream metrics;
  if (main_rank) {
    metrics.open(out + "/metrics.jsonl", std::ios::app);
    if (!metrics.good()) throw InputError("cannot write " + out + "/metrics.jsonl");
  }

  const int64_t n_params = ex.model->num_parameters();
  const std::string attn_type = ex.model_def().attention();
  const std::string attn = attn_type.empty() ? "" : " (" + attn_type + " attention)";
  if (main_rank)
    std::fprintf(stderr, "model %s%s, %lld parameters, %d threads%s; writing %s\n", cfg.model.type.c_str(),
                 attn.c_str(), (long long)n_params, get_num_threads(),
                 cfg.train.precision == "bf16" ? ", bf16 autocast" : "", out.c_str());
  if (main_rank && world > 1)
    std::fprintf(stderr, "data parallel: %lld ranks x %lld rows of the global batch %lld (%d gradient buckets)\n",
                 (long long)world, (long long)shard.rows(cfg.data.batch_size), (long long)cfg.data.batch_size,
                 dp->num_buckets());

  const bool tty = ::isatty(STDERR_FILENO);
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  // Rank 0's checkpoint: the global batch's carried state and every rank's
  // data position, gathered before evaluation (collectives, every rank).
  Experiment::State ckpt_state;
  std::vector<int64_t> positions;
  auto save = [&](const std::string& path) {
    Checkpoint c;
    c.world_size = world;
    c.data_positions = positions;
    c.step = step;
    c.rng_seed = default_generator().seed();
    c.rng_offset = default_generator().offset();
    c.data_position = ex.data_position();
    c.best_valid = best;
    c.vocab_json = ex.vocab_json();
    c.config_json = cfg.resolved.dump();
    save_checkpoint(path, ex, opt.get(), world > 1 ? ckpt_state : state, c);
  };
  auto run_eval = [&](double lr, double tok_s) {
    if (world > 1) {
      ckpt_state = gather_state(state, shard, cfg.data.batch_size);
      positions = gather_data_positions(ex.data_position());
      if (!main_rank) {
        // Rank 0 evaluates the whole split (the metrics of a one-process run)
        // and writes the checkpoint; wait for it without the collective
        // timeout, which bounds a step, not an evaluation.
        const double t = dist::timeout();
        dist::set_timeout(0);
        dist::barrier();
        dist::set_timeout(t);
        ckpt_state = {};
        return;
      }
    }
    Metrics m = ex.evaluate("valid", cfg.train.eval_batches);
    // A finite training loss does not mean finite weights: the update after it
    // can overflow. Never let such weights overwrite the last good checkpoint.
    if (!std::isfinite(m.loss) || !all_finite(*ex.model))
      throw RunError("the " + std::string(std::isfinite(m.loss) ? "weights" : "validation loss") +
                     " became non-finite after step " + std::to_string(step) +
                     "; the last good checkpoint is " + last + " (try a lower train.optimizer.lr or train.clip)");
    json j = ex.metrics_json(m);
    j["step"] = step;
    j["split"] = "valid";
    j["lr"] = lr;
    j["tokens_per_s"] = tok_s;
    j["elapsed"] = elapsed();
    metrics << j.dump() << "\n" << std::flush;
    const double score = ex.task->score(m);  // lower is better
    if (tty) std::fprintf(stderr, "\n");
    std::fprintf(stderr, "step %lld  valid %s\n", (long long)step, j.dump().c_str());
    save(last);
    if (score < best) {
      best = score;
      save(last);  // records the new best score
      save(best_path);
    }
    if (world > 1) {
      ckpt_state = {};
      dist::barrier();  // the other ranks wait here for the evaluation and checkpoint
    }
  };

  // train.precision: each step's forward and backward under bf16 autocast;
  // evaluation (run_eval) stays f32, so `remora eval` reproduces its numbers
  // and f32 and bf16 runs are compared on one footing (docs/precision.md).
  const Precision precision = parse_precision(cfg.train.precision);
  const int64_t end = until >= 0 ? std::min(until, cfg.train.steps) : cfg.train.steps;
  int64_t window_tokens = 0;
  bool released_first_step = false;  // the allocator's cache, once after this process's first step
  double window_start = elapsed(), lr = cfg.train.optimizer.lr, tok_s = 0;
  for (; step < end;) {
    lr = cfg.train.optimizer.lr * sched.lr_at(step + 1);
    opt->set_lr(lr);
    int64_t tokens = 0;
    std::optional<AutocastGuard> autocast;  // this step's forward and backward
    autocast.emplace(precision);
    Tensor loss = ex.train_loss(state, &tokens);
    double lv = loss.item();
    bool backward = true;
    if (world > 1) {
      // The loss of the global batch: each rank's mean weighted by its terms.
      // Re-weighting the local loss by terms * world / global_terms makes the
      // averaged gradient the gradient of that global mean (a factor of 1
      // when every rank has the same count).
      // A rank whose rows have no term (masked LM: no [MASK] drawn in them)
      // contributes nothing and runs no backward (DataParallel counts its
      // gradients as zeros).
      const double terms = double(ex.task->loss_terms());
      backward = terms > 0;
      Tensor sums = Tensor::from_vector(std::vector<double>{backward ? lv * terms : 0.0, terms, double(tokens)}, {3},
                                        DType::f64);
      dist::all_reduce(sums, dist::ReduceOp::sum);
      const std::vector<double> g = sums.to_vector();
      lv = g[0] / g[1];
      tokens = int64_t(g[2]);
      const double scale = terms * double(world) / g[1];
      if (backward && scale != 1.0) loss = mul(loss, Tensor::scalar(scale, loss.dtype(), loss.device()));
    }
    if (!std::isfinite(lv))
      throw RunError("the training loss became " + std::string(std::isnan(lv) ? "NaN" : "Inf") +
                     " at step " + std::to_string(step + 1) + "; the last good checkpoint is " + last +
                     " (try a lower train.optimizer.lr or train.clip)");
    opt->zero_grad();
    if (backward) loss.backward();
    autocast.reset();  // clipping, the optimizer and evaluation in f32
    if (dp) dp->sync_gradients();  // every gradient = the mean over ranks
    if (cfg.train.clip > 0) optim::clip_grad_norm_(ex.model->parameters(), cfg.train.clip);
    opt->step();
    ++step;
    if (mem.on() && (step == 1 || step == end)) mem.mark("after step " + std::to_string(step));
    if (!released_first_step) {
      // The first step's blocks fit little of what follows (a Transformer-XL's
      // first step has no memory yet: its keys are Lq long, every later
      // step's Lq + mem_len), yet the caching allocator would keep them all.
      // Handing them back once keeps them out of the peak: default.json at 2
      // threads 80.8 -> 79.8 MB peak RSS (docs/benchmarks.md).
      backend(cfg.device).empty_cache();
      released_first_step = true;
    }
    window_tokens += tokens;
    if (step % cfg.train.log_every == 0 || step == end) {
      const double now = elapsed();
      tok_s = double(window_tokens) / std::max(1e-9, now - window_start);
      window_tokens = 0;
      window_start = now;
      json j{{"step", step}, {"split", "train"}, {"loss", lv}, {"lr", lr}, {"tokens_per_s", tok_s}, {"elapsed", now}};
      ex.task->annotate_train_log(j, lv);
      if (main_rank) metrics << j.dump() << "\n" << std::flush;
      const double eta = double(cfg.train.steps - step) * now / double(std::max<int64_t>(1, step));
      if (!main_rank) {
      } else if (tty)
        std::fprintf(stderr, "\r[%lld/%lld] loss %s  %s tok/s  ETA %s   ", (long long)step,
                     (long long)cfg.train.steps, fmt(lv).c_str(), fmt(tok_s, 0).c_str(), human_time(eta).c_str());
      else
        std::fprintf(stderr, "step %lld/%lld  loss %s  lr %.3g  %s tok/s  ETA %s\n", (long long)step,
                     (long long)cfg.train.steps, fmt(lv).c_str(), lr, fmt(tok_s, 0).c_str(), human_time(eta).c_str());
    }
    if (cfg.train.eval_every > 0 && step % cfg.train.eval_every == 0) run_eval(lr, tok_s);
  }
  if (cfg.train.eval_every == 0 || step % cfg.train.eval_every != 0) run_eval(lr, tok_s);
  if (main_rank && tty) std::fprintf(stderr, "\n");
  if (mem.on() && main_rank) {
    mem.mark("end (after the last evaluation)");
    double params = 0, grads = 0, state = 0;
    auto bytes = [](const Tensor& t) { return double(t.numel()) * double(dtype_size(t.dtype())); };
    for (const Tensor& p : ex.model->parameters()) {
      params += bytes(p);
      if (p.grad().defined()) grads += bytes(p.grad());
    }
    for (const auto& kv : opt->state()) state += bytes(kv.second);
    mem.set_bytes(params, grads, state);
    std::fprintf(stderr, "%s", mem.table().c_str());
  }
  if (main_rank)
    std::fprintf(stderr, "done: %lld steps in %s; checkpoints in %s\n", (long long)step,
                 human_time(elapsed()).c_str(), out.c_str());
  dist::finalize();
  return 0;
}

}  // namespace

Command train_command() {
  Command c;
  c.name = "train";
  c.summary = "train the model a config describes";
  c.positional = "CONFIG";
  c.positional_help = "the JSON config";
  c.config = true;
  c.options = {{"out", "DIR", "where checkpoints and metrics go (default out/<config name>)"},
               {"resume", "", "continue from DIR/last.safetensors"},
               {"until", "STEP", "stop after STEP steps (saving last)"},
               {"memory-report", "", "print where the resident memory went (docs/benchmarks.md)"}};
  c.details = R"(Trains the model the config describes. Writes DIR/last.safetensors and
DIR/best.safetensors (weights, optimizer state, RNG and data position, the
resolved config), DIR/metrics.jsonl (one JSON object per log/eval point) and
DIR/config.json. --out defaults to out/<config name>. --resume continues from
DIR/last.safetensors; on CPU with the same thread count it reproduces the
uninterrupted run exactly. --until STEP stops after STEP steps (saving last),
so a long run can be split.

Under mpirun (`mpirun -np N remora train CONFIG`) the ranks train one model
data-parallel: data.batch_size is the global batch, each rank takes its
batch_size / N rows (it must divide), gradients are averaged over the ranks;
rank 0 evaluates, writes the checkpoints and metrics, the others are quiet.
Options in train.distributed (bucket_mb, backend, check_every, timeout_s);
see docs/distributed.md.)";
  c.run = run_train;
  return c;
}

}  // namespace driver
}  // namespace remora
