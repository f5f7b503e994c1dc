// SPDX-License-Identifier: BSD-3-Clause
// remora_bench_sru: the SRU elementwise recurrence (sru_recurrence, float32, CPU).
//
// For each size: forward only, and forward + backward of sum(h * probe) with
// gradients for U, x, v, b and c0 (the fused kernels: one sweep over time per
// (batch, unit) lane, lanes in parallel). tools/bench/bench_sru.py runs the same
// computation in PyTorch eager (one op per time step) and prints both.
//
// Every configuration runs in a forked child (as remora_bench_rem): the child
// sets the thread count, builds its inputs, runs `warmup` calls, then times
// `reps` calls and reports the median, so no thread pool crosses a fork.
//
//   remora_bench_sru [--threads N] [--quick] [--json]

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include <remora/remora.h>

#include "bench_child.h"

using namespace remora;

namespace {

using remora_bench::in_child;
using remora_bench::Result;

struct Size {
  int64_t L, B, D, k;
  bool bidir;
};

// The op to time: forward, or forward + backward of sum(h * probe).
std::function<void()> make_op(const Size& s, bool backward) {
  Generator g(7);
  const DType dt = DType::f32;
  Tensor U = Tensor::randn({s.L, s.B, s.D, s.k}, dt, Device::cpu(), &g).requires_grad_();
  Tensor x = s.k == 3 ? Tensor::randn({s.L, s.B, s.D}, dt, Device::cpu(), &g).requires_grad_() : Tensor();
  Tensor v = (Tensor::rand({2, s.D}, dt, Device::cpu(), &g) * 2.0 - 1.0).detach().requires_grad_();
  Tensor b = Tensor::zeros({2, s.D}, dt).requires_grad_();
  Tensor c0 = Tensor::randn({s.B, s.D}, dt, Device::cpu(), &g).requires_grad_();
  Tensor probe = Tensor::randn({s.L, s.B, s.D}, dt, Device::cpu(), &g);
  return [=]() {
    if (!backward) {
      NoGradGuard ng;
      SruOutput o = sru_recurrence(U, x, v, b, c0, Tensor(), s.bidir);
      (void)o;
      return;
    }
    for (Tensor t : {U, x, v, b, c0})
      if (t.defined()) t.zero_grad();
    SruOutput o = sru_recurrence(U, x, v, b, c0, Tensor(), s.bidir);
    sum(mul(o.h, probe)).backward();
  };
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2;
  bool quick = false, json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
      if (threads < 1) {
        std::fprintf(stderr, "--threads must be >= 1\n");
        return 2;
      }
    } else if (a == "--quick") {
      quick = true;
    } else if (a == "--json") {
      json = true;
    } else {
      std::fprintf(stderr, "unknown argument: %s\nusage: remora_bench_sru [--threads N] [--quick] [--json]\n",
                   a.c_str());
      return 2;
    }
  }
  const std::vector<Size> sizes =
      quick ? std::vector<Size>{{16, 2, 8, 3, false}, {8, 2, 8, 4, true}}
            : std::vector<Size>{{256, 16, 512, 3, false}, {1024, 8, 256, 4, true}};
  struct Row {
    Size s;
    const char* mode;
    Result r;
  };
  std::vector<Row> rows;
  for (const Size& s : sizes)
    for (bool bwd : {false, true}) {
      Result r = in_child(threads, [&]() { return make_op(s, bwd); }, quick ? 1 : 3,
                          quick ? 1 : 5, quick ? 2 : 50, quick ? 0.1 : 2.0);
      if (!r.ok) {
        std::fprintf(stderr, "remora_bench_sru: the benchmark child failed\n");
        return 1;
      }
      rows.push_back({s, bwd ? "fwd+bwd" : "fwd", r});
    }
  if (json) {
    std::printf("{\"threads\": %d, \"quick\": %s, \"results\": [\n", threads, quick ? "true" : "false");
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& w = rows[i];
      std::printf("  {\"L\": %lld, \"B\": %lld, \"D\": %lld, \"k\": %lld, \"bidirectional\": %s, "
                  "\"mode\": \"%s\", \"median_ms\": %.4f, \"min_ms\": %.4f, \"reps\": %d}%s\n",
                  (long long)w.s.L, (long long)w.s.B, (long long)w.s.D, (long long)w.s.k,
                  w.s.bidir ? "true" : "false", w.mode, w.r.median_ms, w.r.min_ms, w.r.reps,
                  i + 1 < rows.size() ? "," : "");
    }
    std::printf("]}\n");
    return 0;
  }
  std::printf("sru_recurrence f32, %d threads\n%6s %4s %5s %2s %5s %-8s %12s %12s %5s\n", threads, "L",
              "B", "D", "k", "bidir", "mode", "median_ms", "min_ms", "reps");
  for (const Row& w : rows)
    std::printf("%6lld %4lld %5lld %2lld %5s %-8s %12.3f %12.3f %5d\n", (long long)w.s.L,
                (long long)w.s.B, (long long)w.s.D, (long long)w.s.k, w.s.bidir ? "yes" : "no",
                w.mode, w.r.median_ms, w.r.min_ms, w.r.reps);
  return 0;
}
