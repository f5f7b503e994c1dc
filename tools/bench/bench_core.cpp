// SPDX-License-Identifier: BSD-3-Clause
// remora_bench: the foundation benchmark. Each row times one of our kernels
// (called through the public ops, on Tensors) beside a peer that needs no
// framework, measured in the same process on the same buffers, and prints the
// ratio. Speed is claimed only as such a ratio (docs/benchmarks.md).
//
//   remora_bench [--threads N[,N...]] [--quick]
//
// Every row is measured at each thread count given (default: 1 and all
// cores), one table each, so thread scaling is visible.
//
// Rows:
//   matmul n        remora::matmul(A, B), A, B f32 [n, n]  vs  cblas_sgemm on the
//                   same A, B into a preallocated C, OpenBLAS threading it
//                   itself at the same thread count         (GFLOP/s, 2 n^3 flops)
//   matmul bf16 n   remora::matmul(A, B), A, B bf16 [n, n] (f32 accumulation, the
//                   path of backends/cpu/cpu_bgemm.h)  vs  remora::matmul of the
//                   same values in f32 (GFLOP/s, 2 n^3 flops; the ratio is the
//                   bf16 speedup over f32)
//   add / mul       remora::add / mul of two contiguous f32 [N]  vs  std::memcpy of
//                   N floats (one piece per thread: the copy bandwidth at that
//                   thread count); bytes: ours 3 N 4 (read a, b, write out), memcpy 2 N 4
//   softmax f+b     remora::softmax forward + its backward node, rows x cols f32;
//                   bytes: fwd read x + write y, bwd read dy, y + write dx = 5 N 4
//   layer_norm f+b  remora::layer_norm (weight, bias) forward + backward node;
//                   bytes: fwd read x + write y, bwd read dy, x + write dx = 5 N 4
//                   (weights, mean/rstd and dw/db are O(cols + rows), not counted)
//
// Each measurement runs a warmup, then timed reps; ours and the peer alternate
// within each rep (so background load hits both alike) and the median of each
// is reported. The number of reps adapts to the size: at least `min_reps`, and
// more for fast rows, up to about one second of timed work per row. The backward is timed by calling the op's
// recorded Node directly (grad_fn()->apply), so the figure is the op's own
// backward and not the leaf-gradient copy of the autograd engine.
//
// With REMORA_BENCH_ROWS=FILE in the environment (tools/bench/record.py sets it)
// every row is also appended to FILE as a line of JSON, except under --quick.
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "../../backends/cpu/cpu_bgemm.h"

#include <remora/remora.h>
#include <remora/core/parallel.h>

using namespace remora;

namespace {

double now_s() {
  using clk = std::chrono::steady_clock;
  return std::chrono::duration<double>(clk::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Settings {
  int warmup = 2;
  int min_reps = 11;
  int max_reps = 201;
  double target_s = 1.0;  // timed work per row, ours + peer
};
Settings g_set;

// Runs the warmup rounds, then rounds of (ours, peer); returns the median
// seconds of each.
struct Pair {
  double ours, peer;
  int reps;
};
Pair time_pair(const std::function<void()>& ours, const std::function<void()>& peer) {
  double t_round = 0;
  for (int i = 0; i < g_set.warmup; ++i) {
    const double t0 = now_s();
    ours();
    peer();
    t_round = now_s() - t0;
  }
  const int reps = std::max(g_set.min_reps,
                            std::min(g_set.max_reps, int(g_set.target_s / std::max(t_round, 1e-9))));
  std::vector<double> to, tp;
  for (int i = 0; i < reps; ++i) {
    double t0 = now_s();
    ours();
    double t1 = now_s();
    peer();
    double t2 = now_s();
    to.push_back(t1 - t0);
    tp.push_back(t2 - t1);
  }
  return {median(to), median(tp), reps};
}

// As time_pair, but all of ours first, then all of the peer's reps between
// peer_begin() and peer_end(): for a peer that needs a global setting that
// costs something to switch (OpenBLAS's thread count: its workers go to sleep
// when it drops to 1 and must be woken again).
Pair time_phases(const std::function<void()>& ours, const std::function<void()>& peer,
                 const std::function<void()>& peer_begin, const std::function<void()>& peer_end) {
  auto run = [](const std::function<void()>& f, int reps_hint) {
    double t_round = 0;
    for (int i = 0; i < g_set.warmup; ++i) {
      const double t0 = now_s();
      f();
      t_round = now_s() - t0;
    }
    const int reps = reps_hint > 0 ? reps_hint
                                   : std::max(g_set.min_reps, std::min(g_set.max_reps,
                                                                       int(0.5 * g_set.target_s / std::max(t_round, 1e-9))));
    std::vector<double> t;
    for (int i = 0; i < reps; ++i) {
      const double t0 = now_s();
      f();
      t.push_back(now_s() - t0);
    }
    return std::make_pair(median(t), reps);
  };
  const auto o = run(ours, 0);
  peer_begin();
  const auto p = run(peer, o.second);
  peer_end();
  return {o.first, p.first, o.second};
}

void print_header() {
  std::printf("%-26s %9s %9s %7s  %-7s %-12s %s\n", "benchmark", "remora", "peer", "ratio",
              "unit", "peer", "reps");
  std::printf("%s\n", std::string(82, '-').c_str());
}
std::FILE* g_rows = nullptr;  // REMORA_BENCH_ROWS, when set (not under --quick)
std::string g_bf16_path;      // the bf16 product path of this run

void print_row(const std::string& name, double ours, double peer, const char* unit,
               const char* peer_name, int reps) {
  std::printf("%-26s %9.2f %9.2f %6.1f%%  %-7s %-12s %d\n", name.c_str(), ours, peer,
              100.0 * ours / peer, unit, peer_name, reps);
  std::fflush(stdout);
  if (g_rows) {  // names and units are fixed ASCII: no JSON escaping needed
    std::fprintf(g_rows,
                 "{\"row\": \"%s\", \"threads\": %d, \"remora\": %.3f, \"peer\": %.3f, "
                 "\"ratio_pct\": %.1f, \"unit\": \"%s\", \"peer_name\": \"%s\", \"reps\": %d, "
                 "\"bf16_path\": \"%s\"}\n",
                 name.c_str(), get_num_threads(), ours, peer, 100.0 * ours / peer, unit, peer_name, reps,
                 name.find("bf16") != std::string::npos ? g_bf16_path.c_str() : "");
    std::fflush(g_rows);
  }
}

// Keeps results alive past the timed region so the work is not optimised away
// and so the freed buffer is returned to the allocator outside the timing.
volatile float g_sink = 0;

void bench_matmul(int64_t n) {
  Tensor a = Tensor::randn({n, n});
  Tensor b = Tensor::randn({n, n});
  std::vector<float> c(size_t(n * n));
  const float* A = a.data_ptr<float>();
  const float* B = b.data_ptr<float>();
  const int ni = int(n);
  Tensor out;
  auto ours = [&] {
    out = Tensor();  // drop the previous result first: its buffer is reused
    out = matmul(a, b);
  };
  // The peer is OpenBLAS threading its own call at the same thread count
  // (Remora keeps OpenBLAS single-threaded and splits gemms itself), timed in
  // its own phase after ours (time_phases).
  const int nt = get_num_threads();
  auto peer = [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, ni, ni, ni, 1.0f, A, ni, B, ni, 0.0f,
                c.data(), ni);
  };
  Pair t = time_phases(ours, peer, [nt] { openblas_set_num_threads(nt); },
                       [nt] {
                         set_num_threads(nt);  // OpenBLAS back to 1 thread
                       });
  // Sanity: both computed the same product.
  const float* O = out.data_ptr<float>();
  double maxdiff = 0;
  for (int64_t i = 0; i < n * n; i += 97) maxdiff = std::max(maxdiff, double(std::abs(O[i] - c[size_t(i)])));
  if (maxdiff > 1e-2 * std::sqrt(double(n))) {
    std::fprintf(stderr, "matmul n=%lld: result differs from cblas_sgemm by %g\n", (long long)n,
                 maxdiff);
    std::exit(1);
  }
  const double flop = 2.0 * double(n) * double(n) * double(n);
  print_row("matmul f32 n=" + std::to_string(n), flop / t.ours * 1e-9, flop / t.peer * 1e-9,
            "GFLOP/s", "cblas_sgemm", t.reps);
}

void bench_matmul_bf16(int64_t n) {
  Tensor af = Tensor::randn({n, n}).to(DType::bf16).to(DType::f32);  // values on bf16's grid
  Tensor bf = Tensor::randn({n, n}).to(DType::bf16).to(DType::f32);
  Tensor a = af.to(DType::bf16), b = bf.to(DType::bf16);
  Tensor out, out_f32;
  auto ours = [&] {
    out = Tensor();
    out = matmul(a, b);
  };
  auto peer = [&] {
    out_f32 = Tensor();
    out_f32 = matmul(af, bf);
  };
  Pair t = time_phases(ours, peer, [] {}, [] {});
  // Sanity: the same product up to summation order and bf16's final rounding.
  const std::vector<double> o = out.to_vector(), p = out_f32.to_vector();
  double maxdiff = 0;
  for (size_t i = 0; i < o.size(); i += 97) maxdiff = std::max(maxdiff, std::abs(o[i] - p[i]) / (1 + std::abs(p[i])));
  if (maxdiff > 1e-2) {
    std::fprintf(stderr, "matmul bf16 n=%lld: result differs from f32 by %g\n", (long long)n, maxdiff);
    std::exit(1);
  }
  const double flop = 2.0 * double(n) * double(n) * double(n);
  print_row("matmul bf16 n=" + std::to_string(n), flop / t.ours * 1e-9, flop / t.peer * 1e-9, "GFLOP/s",
            "remora f32", t.reps);
}

// memcpy of the same number of floats, into a buffer touched beforehand, cut
// into one contiguous piece per thread (the current thread count), each piece
// one std::memcpy: the machine's copy bandwidth at that thread count, so the
// ratio of a parallel kernel is not flattered by a one-thread peer.
struct Memcpy {
  std::vector<float> src, dst;
  explicit Memcpy(int64_t n) : src(size_t(n), 1.0f), dst(size_t(n), 0.0f) {}
  void operator()() {
    const size_t n = src.size();
    // On Remora's pool (core/parallel.h), the threads every kernel runs on.
    parallel_team(get_num_threads(), [&](int t, int nt) {
      const size_t lo = n * size_t(t) / size_t(nt), hi = n * size_t(t + 1) / size_t(nt);
      std::memcpy(dst.data() + lo, src.data() + lo, (hi - lo) * sizeof(float));
    });
  }
  double bytes() const { return 2.0 * double(src.size()) * sizeof(float); }
};

void bench_binary(const char* name, Tensor (*op)(const Tensor&, const Tensor&), int64_t n) {
  Tensor a = Tensor::randn({n});
  Tensor b = Tensor::randn({n});
  Memcpy mc(n);
  Tensor out;
  auto ours = [&] {
    out = Tensor();
    out = op(a, b);
  };
  Pair t = time_pair(ours, std::ref(mc));
  g_sink = out.data_ptr<float>()[n - 1] + mc.dst[size_t(n) - 1];
  const double bytes = 3.0 * double(n) * sizeof(float);
  print_row(std::string(name) + " f32 N=" + std::to_string(n), bytes / t.ours * 1e-9,
            mc.bytes() / t.peer * 1e-9, "GB/s", "memcpy", t.reps);
}

// Forward, then the backward of the op's own node, on [rows, cols].
void bench_fwd_bwd(const std::string& name, int64_t rows, int64_t cols,
                   const std::function<Tensor(const Tensor&)>& fwd) {
  Tensor x = Tensor::randn({rows, cols}).requires_grad_();
  Tensor dy = Tensor::randn({rows, cols});
  const int64_t n = rows * cols;
  Memcpy mc(n);
  Tensor y, dx;
  auto ours = [&] {
    y = Tensor();
    dx = Tensor();
    y = fwd(x);
    std::vector<Tensor> g{dy};
    dx = y.grad_fn()->apply(g)[0];
  };
  Pair t = time_pair(ours, std::ref(mc));
  g_sink = dx.data_ptr<float>()[n - 1] + mc.dst[size_t(n) - 1];
  const double bytes = 5.0 * double(n) * sizeof(float);
  print_row(name + " " + std::to_string(rows) + "x" + std::to_string(cols),
            bytes / t.ours * 1e-9, mc.bytes() / t.peer * 1e-9, "GB/s", "memcpy", t.reps);
}

// --only: a benchmark runs when its name starts with g_only (all when empty).
std::string g_only;
bool selected(const std::string& name) { return name.rfind(g_only, 0) == 0; }

void usage() {
  std::printf(
      "usage: remora_bench [--threads N[,N...]] [--quick] [--only NAME]\n"
      "  --threads L  pool and OpenBLAS thread counts, one table each (default: 1 and all cores)\n"
      "  --quick      small sizes and few reps (a smoke test; figures are not meaningful)\n"
      "  --only NAME  run only the rows whose benchmark name starts with NAME\n"
      "               (matmul, add, mul, softmax, layer_norm)\n");
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> thread_list;
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--quick") {
      quick = true;
    } else if (arg == "--threads" && i + 1 < argc) {
      const std::string list = argv[++i];
      size_t pos = 0;
      while (pos <= list.size()) {
        const size_t comma = std::min(list.find(',', pos), list.size());
        const std::string item = list.substr(pos, comma - pos);
        char* end = nullptr;
        const long t = std::strtol(item.c_str(), &end, 10);
        if (item.empty() || *end != '\0' || t < 1 || t > 4096) {
          std::fprintf(stderr,
                       "remora_bench: --threads needs positive integers separated by commas, "
                       "got '%s'\n",
                       list.c_str());
          return 2;
        }
        thread_list.push_back(int(t));
        pos = comma + 1;
      }
    } else if (arg == "--only" && i + 1 < argc) {
      g_only = argv[++i];
      static const char* const kNames[] = {"matmul", "add", "mul", "softmax", "layer_norm"};
      bool known = false;
      for (const char* k : kNames) known = known || std::string(k).rfind(g_only, 0) == 0;
      if (g_only.empty() || !known) {
        std::fprintf(stderr,
                     "remora_bench: --only needs the start of a benchmark name (matmul, add, "
                     "mul, softmax, layer_norm), got '%s'\n",
                     g_only.c_str());
        return 2;
      }
    } else if (arg == "--help" || arg == "-h") {
      usage();
      return 0;
    } else {
      std::fprintf(stderr, "remora_bench: unknown argument '%s'\n", arg.c_str());
      usage();
      return 2;
    }
  }
  if (thread_list.empty()) {
    thread_list.push_back(1);
    if (get_num_threads() > 1) thread_list.push_back(get_num_threads());
  }
  if (quick) {
    g_set.warmup = 1;
    g_set.min_reps = 3;
    g_set.max_reps = 5;
    g_set.target_s = 0.05;
  }
  if (const char* rows = std::getenv("REMORA_BENCH_ROWS"); rows && *rows && !quick) {
    g_rows = std::fopen(rows, "a");
    if (!g_rows) {
      std::fprintf(stderr, "remora_bench: cannot open REMORA_BENCH_ROWS file '%s'\n", rows);
      return 2;
    }
  }
  g_bf16_path = cpu_impl::bgemm_path_name(cpu_impl::bgemm_path());
  std::printf("OpenBLAS: %s\n", openblas_get_config());
  std::printf("median of the reps after %d warmup rounds; ours and peer alternate in each rep\n",
              g_set.warmup);
  for (int threads : thread_list) {
    set_num_threads(threads);
    manual_seed(0);
    std::printf("\nremora_bench: %d thread%s%s\n", get_num_threads(), threads > 1 ? "s" : "",
                quick ? " (--quick: a smoke test, sizes too small to judge)" : "");
    print_header();

    const std::vector<int64_t> mm = quick ? std::vector<int64_t>{64, 128}
                                          : std::vector<int64_t>{256, 512, 1024, 2048};
    if (selected("matmul"))
      for (int64_t n : mm) bench_matmul(n);
    if (selected("matmul")) {
      std::printf("bf16 products on the path '%s' (REMORA_BF16_GEMM overrides)\n",
                  cpu_impl::bgemm_path_name(cpu_impl::bgemm_path()));
      for (int64_t n : mm) bench_matmul_bf16(n);
    }

    const int64_t N = quick ? (int64_t(1) << 16) : (int64_t(1) << 24);  // 16M floats = 64 MiB
    if (selected("add")) bench_binary("add", &add, N);
    if (selected("mul")) bench_binary("mul", &mul, N);

    const int64_t cols = quick ? 256 : 1024, rows = N / cols;
    if (selected("softmax"))
      bench_fwd_bwd("softmax f+b", rows, cols,
                    [](const Tensor& x) { return softmax(x, -1); });
    Tensor w = Tensor::randn({cols}).requires_grad_();
    Tensor b = Tensor::randn({cols}).requires_grad_();
    if (selected("layer_norm"))
      bench_fwd_bwd("layer_norm f+b", rows, cols,
                    [&](const Tensor& x) { return layer_norm(x, w, b); });
  }
  return 0;
}
