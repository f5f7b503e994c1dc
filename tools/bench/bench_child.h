// SPDX-License-Identifier: BSD-3-Clause
// The timing harness shared by the benchmark binaries: each configuration runs
// in a forked child (so one configuration's allocations and peak RSS do not leak
// into the next), warms up, then times an adaptive number of repetitions.
#pragma once
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include <remora/remora.h>

namespace remora_bench {

using namespace remora;

inline double now_s() {
  using clk = std::chrono::steady_clock;
  return std::chrono::duration<double>(clk::now().time_since_epoch()).count();
}

inline double maxrss_mib() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return double(ru.ru_maxrss) / 1024.0;  // Linux reports KiB
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// What a child reports back through the pipe.
struct Result {
  double median_ms = 0, min_ms = 0, peak_mib = 0;
  int reps = 0;
  bool ok = false;
};

// Runs setup() then op() in a forked child. The first op() call is the
// memory probe (and the first warmup); then warmup - 1 more, then timed reps.
// reps adapts to the first call's time: about budget_s seconds, within [min_reps, max_reps].
inline Result in_child(int threads, const std::function<std::function<void()>()>& setup, int warmup,
                int min_reps, int max_reps, double budget_s) {
  int fd[2];
  if (pipe(fd) != 0) {
    std::perror("pipe");
    std::exit(2);
  }
  std::fflush(stdout);
  const pid_t pid = fork();
  if (pid == 0) {
    close(fd[0]);
    Result r;
    try {
      set_num_threads(threads);
      manual_seed(1234);
      std::function<void()> op = setup();
      const double base = maxrss_mib();
      const double t0 = now_s();
      op();
      const double first = now_s() - t0;
      r.peak_mib = std::max(0.0, maxrss_mib() - base);
      for (int i = 1; i < warmup; ++i) op();
      int reps = int(std::ceil(budget_s / std::max(first, 1e-6)));
      reps = std::max(min_reps, std::min(max_reps, reps));
      std::vector<double> ts;
      for (int i = 0; i < reps; ++i) {
        const double a = now_s();
        op();
        ts.push_back((now_s() - a) * 1e3);
      }
      r.median_ms = median(ts);
      r.min_ms = *std::min_element(ts.begin(), ts.end());
      r.reps = reps;
      r.ok = true;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "bench child failed: %s\n", e.what());
    }
    if (write(fd[1], &r, sizeof r) != ssize_t(sizeof r)) _exit(3);
    close(fd[1]);
    _exit(r.ok ? 0 : 1);
  }
  close(fd[1]);
  Result r;
  if (read(fd[0], &r, sizeof r) != ssize_t(sizeof r)) r.ok = false;
  close(fd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) r.ok = false;
  return r;
}

}  // namespace remora_bench
