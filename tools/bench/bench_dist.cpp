// SPDX-License-Identifier: BSD-3-Clause
// All-reduce bandwidth of remora::dist (MPI) for gradient-sized messages
// (docs/distributed.md). Run it at np = 1 and 2:
//   mpirun -np 2 build/distributed/remora_bench_dist [--quick] [--iters N]
// Sizes: the default config's whole gradient (651,220 f32 = 2.6 MB), its
// DataParallel buckets (1 MiB default bucket_bytes), and a sweep 4 KB .. 64 MB.
// Reported per size: median time of one blocking all-reduce, algorithm bandwidth
// (bytes / time) and bus bandwidth (2 (N-1)/N · bytes / time, the ring's traffic
// per rank, comparable across N), plus the bucketed, overlapped variant
// (DataParallel's pattern: every bucket's MPI_Iallreduce in flight, then wait).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "../../core/remora.h"
#include "../../distributed/dist.h"

using namespace remora;
using Clock = std::chrono::steady_clock;

namespace {
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median seconds of f over iters runs (after 2 warm-ups), the max over ranks.
template <typename F>
double time_it(int iters, F f) {
  for (int i = 0; i < 2; ++i) f();
  std::vector<double> ts;
  for (int i = 0; i < iters; ++i) {
    dist::barrier();
    auto t0 = Clock::now();
    f();
    ts.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  // The slowest rank's median (in ns through the 64-bit all_gather).
  std::vector<uint64_t> all = dist::all_gather(uint64_t(median(ts) * 1e9));
  return double(*std::max_element(all.begin(), all.end())) * 1e-9;
}
// One table row; a world of one moves no bytes (the all-reduce is an identity).
void print_row(const std::string& name, int64_t n, double bytes, double s, double ring, int W) {
  if (W == 1)
    std::printf("| %s | %lld | %.0f | %.1f | - (no communication) | - |\n", name.c_str(), (long long)n, bytes, s * 1e6);
  else
    std::printf("| %s | %lld | %.0f | %.1f | %.3f | %.3f |\n", name.c_str(), (long long)n, bytes, s * 1e6,
                bytes / s / 1e9, ring * bytes / s / 1e9);
}
}  // namespace

int main(int argc, char** argv) {
  try {
    dist::init(&argc, &argv);
    bool quick = false;
    int iters = 20;
    for (int i = 1; i < argc; ++i) {
      if (!std::strcmp(argv[i], "--quick")) quick = true;
      else if (!std::strcmp(argv[i], "--iters") && i + 1 < argc) iters = std::atoi(argv[++i]);
      else {
        if (dist::is_main()) std::fprintf(stderr, "usage: remora_bench_dist [--quick] [--iters N]\n");
        return 2;
      }
    }
    if (quick) iters = 3;
    set_num_threads(1);
    const int W = dist::world_size();
    const double ring = W > 1 ? 2.0 * (W - 1) / W : 0.0;
    struct Case { std::string name; int64_t n; };
    std::vector<Case> cases = {{"default config, whole gradient", 651220},
                               {"default config, one 1 MiB bucket", 262144}};
    for (int64_t n = 1024; n <= (quick ? 65536 : (int64_t(16) << 20)); n *= 4)
      cases.push_back({"sweep", n});
    if (dist::is_main())
      std::printf("# remora_bench_dist: np=%d, %d iterations, median of the slowest rank\n"
                  "| message | f32 values | bytes | time (us) | algbw (GB/s) | busbw (GB/s) |\n"
                  "|---|---:|---:|---:|---:|---:|\n", W, iters);
    for (const Case& c : cases) {
      Tensor t = Tensor::ones({c.n});
      double s = time_it(iters, [&] { dist::all_reduce(t, dist::ReduceOp::sum); });
      double bytes = double(c.n) * 4;
      if (dist::is_main()) print_row(c.name, c.n, bytes, s, ring, W);
    }
    // DataParallel's pattern for the default config: 651,220 values in 1 MiB buckets,
    // all started, then all waited for.
    {
      std::vector<Tensor> buckets;
      for (int64_t left = 651220; left > 0; left -= 262144) buckets.push_back(Tensor::ones({std::min<int64_t>(left, 262144)}));
      double s = time_it(iters, [&] {
        std::vector<dist::Work> ws;
        for (Tensor& b : buckets) ws.push_back(dist::all_reduce_async(b, dist::ReduceOp::sum));
        for (dist::Work& w : ws) w.wait();
      });
      double bytes = 651220.0 * 4;
      if (dist::is_main())
        print_row("default config, " + std::to_string(buckets.size()) + " buckets in flight", 651220, bytes, s, ring, W);
    }
    dist::finalize();
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
