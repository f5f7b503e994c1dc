// SPDX-License-Identifier: BSD-3-Clause
// `remora info` (a model summary) and `remora plot` (the loss curve).
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "../../core/file_io.h"
#include "../../core/version.h"
#include "../input_checks.h"
#include "../tasks/common.h"
#include "common.h"

extern char** environ;

namespace remora {
namespace driver {
namespace {

// The CPU's model name (/proc/cpuinfo), for a measured figure.
std::string cpu_model_name() {
  std::FILE* f = std::fopen("/proc/cpuinfo", "r");
  if (!f) return "unknown CPU";
  char line[512];
  std::string name = "unknown CPU";
  while (std::fgets(line, sizeof line, f)) {
    const std::string l = line;
    if (l.rfind("model name", 0) == 0 && l.find(':') != std::string::npos) {
      name = l.substr(l.find(':') + 2);
      while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
      break;
    }
  }
  std::fclose(f);
  return name;
}

// --time N: N training steps after one warm-up step, timed (parameters and
// optimizer state change in this process only; nothing is written).
void time_steps(Experiment& ex, int64_t steps) {
  std::unique_ptr<optim::Optimizer> opt = ex.make_optimizer();
  Experiment::State state;
  double seconds = 0;
  int64_t tokens = 0;
  for (int64_t i = 0; i <= steps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    int64_t n = 0;
    Tensor loss = ex.train_loss(state, &n);
    loss.backward();
    opt->step();
    opt->zero_grad();
    (void)loss.item();  // the step is done on every device
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (i == 0) continue;  // warm-up: first allocations, thread start-up
    seconds += dt;
    tokens += n;
  }
  std::printf("\nmeasured here: %.3f s per training step, %.0f tokens/s (%lld steps after one warm-up, %d threads, "
              "%s, %s)\n",
              seconds / double(steps), double(tokens) / seconds, static_cast<long long>(steps), get_num_threads(),
              ex.device().str().c_str(), cpu_model_name().c_str());
}

int run_info(const Args& a) {
  if (a.positional.size() != 1)
    throw UsageError("info: expected exactly one CONFIG argument, got " + std::to_string(a.positional.size()));
  ParseOptions po;
  po.corpus_optional = true;  // a recipe whose corpus is elsewhere still has a summary
  Config cfg = load_config(a.positional[0], a.sets, po);
  const int64_t time_n = a.opts.count("time") ? to_int("time", a.opts.at("time"), 1, 100000) : 0;
  if (cfg.data.corpus_missing) {
    if (time_n > 0)
      throw InputError("info --time trains a few steps and needs the corpus, but data.path " +
                       cfg.data.keys<TextKeys>().path + " is not there; time the config's small sibling instead");
    // Without the corpus the model is built for the vocabulary the config
    // implies: --vocab N, else the task's largest (what the memory estimate assumes).
    ModelContext ctx;
    ctx.n_token = 256;
    ctx.seq_len = cfg.data.seq_len;
    MemoryEstimate unused;
    const TaskEntry& task = task_named(cfg.task);
    if (task.estimate) task.estimate(cfg, ctx, unused);
    if (a.opts.count("vocab")) ctx.n_token = to_int("vocab", a.opts.at("vocab"), 1, int64_t(1) << 31);
    std::printf("corpus: %s is not here; the model is built for a vocabulary of %lld (%s)\n\n",
                cfg.data.keys<TextKeys>().path.c_str(), static_cast<long long>(ctx.n_token),
                a.opts.count("vocab") ? "--vocab" : "the most this data type allows; --vocab N sets it");
    manual_seed(cfg.seed);
    const BuiltModel net = as_input_error("model", [&] { return cfg.model.def->build(ctx); });
    cfg.model.def->print_info(cfg, ctx, net);
  } else {
    Experiment ex(cfg);
    ex.model_def().print_info(cfg, ex.ctx, ex.net);
    if (time_n > 0) {
      apply_threads(cfg);
      time_steps(ex, time_n);
    }
  }
  std::printf("\ntokens per step: %lld (data.batch_size %lld x data.seq_len %lld, summed over all ranks)\n",
              static_cast<long long>(cfg.data.batch_size * cfg.data.seq_len),
              static_cast<long long>(cfg.data.batch_size), static_cast<long long>(cfg.data.seq_len));
  std::printf("\nprecision: %s (train.precision; %s)\n", precision_name(cfg.train.trainer.precision),
              cfg.train.trainer.precision == Precision::bf16
                  ? "the training step's matrix products in bf16 with f32 accumulation, their saved operands in "
                    "bf16; weights, optimizer state and evaluation in f32"
                  : "everything in f32");
  std::string source;
  const double budget = memory_budget(cfg, &source);
  std::printf("\ntraining memory estimate (checked before any command builds the model): %s; this process may "
              "use %s (%s)\n",
              estimate_memory(cfg, MemoryUse::train).summary().c_str(),
              std::isinf(budget) ? "any amount" : human_bytes(budget).c_str(), source.c_str());
  std::printf("\nbuild: %s\n", version_line().c_str());
  return 0;
}

// A string inside gnuplot's single quotes: a quote is written twice; a line
// break cannot appear in one (refused).
std::string gnuplot_quoted(const std::string& s) {
  if (s.find_first_of("\n\r") != std::string::npos) throw RunError("the path " + s + " holds a line break");
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("''") : std::string(1, c);
  return q + "'";
}

// A private folder for gnuplot's files, removed with them at the end: nothing
// of the run directory is read or written by gnuplot, so neither its name nor
// what lies in it (a FIFO called loss.png) can reach gnuplot.
struct PlotTemp {
  std::string dir;
  PlotTemp() {
    const char* t = std::getenv("TMPDIR");
    std::string tmpl = std::string(t && *t ? t : "/tmp") + "/remora_plot_XXXXXX";
    if (!::mkdtemp(&tmpl[0])) throw RunError("cannot create a temporary folder: " + std::string(std::strerror(errno)));
    dir = tmpl;
  }
  ~PlotTemp() {
    for (const char* f : {"train.dat", "valid.dat", "plot.gp", "loss.png"}) ::unlink((dir + "/" + f).c_str());
    ::rmdir(dir.c_str());
  }
};

// Runs gnuplot SCRIPT with an argument vector (no shell), its output on
// stderr, for at most `timeout_s` seconds. Returns its exit status; -1 when it
// could not start (errno set), -2 when it was stopped for taking too long.
int run_gnuplot(const std::string& script, double timeout_s) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, 2, 1);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  std::string prog = "gnuplot", arg = script;
  char* argv[] = {&prog[0], &arg[0], nullptr};
  pid_t pid = 0;
  const int rc = ::posix_spawnp(&pid, "gnuplot", &fa, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    errno = rc;
    return -1;
  }
  const auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    int status = 0;
    const pid_t w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    if (w < 0 && errno != EINTR) return -1;
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > timeout_s) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -2;
    }
    ::usleep(20000);
  }
}

int run_plot(const Args& a) {
  if (a.positional.size() != 1) throw UsageError("plot: expected one OUT_DIR argument");
  const std::string dir = a.positional[0], mpath = dir + "/metrics.jsonl";
  std::ostringstream tr, va;
  int64_t nt = 0, nv = 0;
  bool lm = true;
  for_each_input_line(mpath, kMaxJsonlLineBytes, "metrics.jsonl", [&](const std::string& line, int64_t n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) return;
    const std::string where = "" + mpath + " line " + std::to_string(n) + ": ";
    if (json_depth(line) > kMaxJsonDepth) throw InputError(where + "JSON nested too deeply");
    json j;
    try {
      j = json::parse(line);
    } catch (const json::exception&) {
      throw InputError(where + "not JSON: " + line.substr(0, 80));
    }
    if (!j.is_object()) throw InputError(where + "expected a JSON object, got " + line.substr(0, 80));
    if (!j.contains("split")) return;  // not a train / valid point
    if (!j["split"].is_string()) throw InputError(where + "\"split\" is not a string");
    const std::string split = j["split"].get<std::string>();
    if (split != "train" && split != "valid") return;
    if (!j.contains("step") || !j["step"].is_number_integer())
      throw InputError(where + "\"step\" is missing or not an integer");
    const char* key = j.contains("bpc") ? "bpc" : "loss";
    if (!j.contains(key) || !j[key].is_number() || !std::isfinite(j[key].get<double>()))
      throw InputError(where + "\"" + key + "\" is missing or not a finite number");
    lm = lm && j.contains("bpc");
    std::ostringstream& os = split == "train" ? tr : va;
    os << j["step"].get<int64_t>() << " " << j[key].get<double>() << "\n";
    ++(split == "train" ? nt : nv);
  });
  if (nt + nv == 0) throw InputError("" + mpath + " has no train or valid points");
  PlotTemp tmp;
  const std::string tdat = tmp.dir + "/train.dat", vdat = tmp.dir + "/valid.dat", script = tmp.dir + "/plot.gp";
  const std::string tpng = tmp.dir + "/loss.png", png = dir + "/loss.png";
  std::ostringstream gp;
  gp << "set terminal png size 900,540\nset output " << gnuplot_quoted(tpng) << "\n"
     << "set xlabel 'step'\nset ylabel '" << (lm ? "bits per character" : "loss") << "'\n"
     << "set grid\nset key top right\nplot ";
  if (nt) gp << gnuplot_quoted(tdat) << " with lines lw 1 lc rgb '#4477aa' title 'train'";
  if (nv) gp << (nt ? ", " : "") << gnuplot_quoted(vdat) << " with linespoints lw 2 pt 7 lc rgb '#cc3311' title 'valid'";
  gp << "\n";
  try {
    write_file_atomic(tdat, tr.str(), "plot");
    write_file_atomic(vdat, va.str(), "plot");
    write_file_atomic(script, gp.str(), "plot");
  } catch (const Error& e) {
    throw RunError(e.what());
  }
  const int rc = run_gnuplot(script, 120);
  if (rc == -1)
    throw RunError("cannot run gnuplot: " + std::string(std::strerror(errno)) +
                   " (is it installed? apt-get install gnuplot-nox)");
  if (rc == -2) throw RunError("gnuplot did not finish within 120 s; stopped it");
  if (rc != 0) throw RunError("gnuplot failed (exit status " + std::to_string(rc) + ")");
  std::string image;
  try {
    image = read_regular_file(tpng, 256 << 20, "gnuplot's image");
  } catch (const Error& e) {
    throw RunError(std::string("gnuplot wrote no image: ") + e.what());
  }
  if (image.empty()) throw RunError("gnuplot wrote an empty image");
  try {
    write_file_atomic(png, image, "plot");
  } catch (const Error& e) {
    throw InputError(e.what());
  }
  std::printf("wrote %s\n", png.c_str());
  return 0;
}

}  // namespace

Command info_command() {
  Command c;
  c.name = "info";
  c.summary = "print the model summary of a config";
  c.positional = "CONFIG";
  c.positional_help = "the JSON config";
  c.config = true;
  c.options = {{"time", "N", "also train N steps (after one warm-up step) and print the measured time per step"},
               {"vocab", "N", "the vocabulary size to build the model for when the corpus is not there"}};
  c.details = R"(Prints the model summary: layers, parameters per module, tokens per step, the
memory a training run needs, the build. Where data.path names a corpus that is
not here (a paper recipe whose corpus lies elsewhere), the summary is printed for
the vocabulary --vocab N gives, else the largest the data type allows. --time N
trains N steps in this process (nothing is written) and prints the time per step
and tokens/s measured here, with the thread count and the CPU.)";
  c.run = run_info;
  return c;
}

Command plot_command() {
  Command c;
  c.name = "plot";
  c.summary = "draw the loss curve of a training run";
  c.positional = "OUT_DIR";
  c.positional_help = "the folder `remora train` wrote";
  c.details = R"(Writes OUT_DIR/loss.png (train and valid loss against step) from
OUT_DIR/metrics.jsonl with gnuplot.)";
  c.run = run_plot;
  return c;
}

}  // namespace driver
}  // namespace remora
