// `remora info` (a model summary) and `remora plot` (the loss curve).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "../../../core/file_io.h"
#include "common.h"

namespace remora {
namespace driver {
namespace {

int run_info(const Args& a) {
  Config cfg = config_of(a, "info");
  Experiment ex(cfg);
  ex.model_def().print_info(cfg, ex.ctx, ex.net);
  std::printf("\nprecision: %s (train.precision; %s)\n", cfg.train.precision.c_str(),
              cfg.train.precision == "bf16"
                  ? "training matmuls in bf16 with f32 accumulation, f32 weights and evaluation"
                  : "everything in f32");
  std::string source;
  const double budget = memory_budget(cfg, &source);
  std::printf("\ntraining memory estimate (checked before any command builds the model): %s; this process may "
              "use %s (%s)\n",
              estimate_memory(cfg, MemoryUse::train).summary().c_str(),
              std::isinf(budget) ? "any amount" : human_bytes(budget).c_str(), source.c_str());
  return 0;
}

int run_plot(const Args& a) {
  if (a.positional.size() != 1) throw UsageError("plot: expected one OUT_DIR argument");
  const std::string dir = a.positional[0], mpath = dir + "/metrics.jsonl";
  std::ifstream in(mpath);
  if (!in.good()) throw InputError("plot: cannot open " + mpath);
  std::ofstream tr(dir + "/.train.dat"), va(dir + "/.valid.dat");
  std::string line;
  int64_t nt = 0, nv = 0;
  bool lm = true;
  while (std::getline(in, line)) {
    json j;
    try {
      j = json::parse(line);
    } catch (const json::exception&) {
      throw InputError("plot: " + mpath + " has a malformed line: " + line.substr(0, 80));
    }
    const std::string split = j.value("split", "");
    const double y = j.contains("bpc") ? j["bpc"].get<double>() : j.value("loss", 0.0);
    lm = lm && j.contains("bpc");
    if (split == "train") { tr << j.value("step", 0) << " " << y << "\n"; ++nt; }
    if (split == "valid") { va << j.value("step", 0) << " " << y << "\n"; ++nv; }
  }
  tr.close();
  va.close();
  if (nt + nv == 0) throw InputError("plot: " + mpath + " has no train or valid points");
  const std::string png = dir + "/loss.png", script = dir + "/.plot.gp";
  std::ofstream gp(script);
  gp << "set terminal png size 900,540\nset output '" << png << "'\n"
     << "set xlabel 'step'\nset ylabel '" << (lm ? "bits per character" : "loss") << "'\n"
     << "set grid\nset key top right\n"
     << "plot '" << dir << "/.train.dat' with lines lw 1 lc rgb '#4477aa' title 'train'"
     << (nv ? ", '" + dir + "/.valid.dat' with linespoints lw 2 pt 7 lc rgb '#cc3311' title 'valid'" : "") << "\n";
  gp.close();
  const std::string cmd = "gnuplot '" + script + "' 2>&1";
  const int rc = std::system(cmd.c_str());
  std::remove(script.c_str());
  std::remove((dir + "/.train.dat").c_str());
  std::remove((dir + "/.valid.dat").c_str());
  if (rc != 0) throw RunError("plot: gnuplot failed (is it installed? apt-get install gnuplot-nox)");
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
  c.details = "Prints the model summary: layers, parameters per module, a memory estimate.";
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
