// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// Remora's CPU thread pool: the one pool every parallel CPU kernel runs on.
///
/// Why not OpenMP's: how an idle worker waits decides what a parallel region
/// costs, and libgomp offers two poor choices. Its default spins for
/// milliseconds, which steals the cores from everything else on a loaded
/// machine; OMP_WAIT_POLICY=passive sleeps at once, and on a 2-core VM every
/// region then paid ~130 us to wake a sleeping vCPU (an xl.json training step
/// has ~450 regions). Here a waiting thread, worker or caller, spins
/// REMORA_SPIN_US microseconds (default 30) and then sleeps on a futex.
/// Measured, xl.json at 2 threads on that 2-core VM (tokens/s): alone 9.5-10.1k
/// (libgomp passive 5.8-8.2k); beside two CPU hogs 5.9k (passive 3.6-6.2k; a
/// 1000 us spin 1.0k); two runs side by side 5.1-5.3k each (passive 5.8k).
///
/// The caller is thread 0 of every team; workers are created on first use.
/// A region started inside a region, or while another thread holds the pool,
/// runs on the calling thread alone (body(0, 1)), so kernels may be called
/// from any thread.
#pragma once
#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace remora {

/// The most threads the pool runs (the driver's train.threads has the same
/// cap). OMP_NUM_THREADS above it is capped, with a warning on stderr.
constexpr int kMaxThreads = 4096;

/// Threads a parallel CPU kernel uses (set_num_threads, core/tensor.h): at
/// start OMP_NUM_THREADS if set (at most kMaxThreads), else the CPUs this
/// process may run on.
int pool_threads();
/// Sets the pool's thread count to n for the regions that start after it; n
/// outside [1, kMaxThreads] is an Error. set_num_threads (core/tensor.h) also
/// keeps OpenBLAS single-threaded, and is the call to use.
void set_pool_threads(int n);

namespace detail {
/// The engine behind parallel_team: runs fn(ctx, tid, n) on a team of
/// n = min(threads, pool_threads()) threads (use parallel_team).
void run_team(int threads, void (*fn)(void*, int, int), void* ctx);
}

/// Runs body(tid, n) on n = min(threads, pool_threads()) threads, tid 0 being
/// the caller; returns when every thread is done. An exception thrown by any
/// thread is rethrown here (the first one).
template <typename F>
void parallel_team(int threads, F&& body) {
  using Fn = typename std::remove_reference<F>::type;
  detail::run_team(threads, [](void* c, int t, int n) { (*static_cast<Fn*>(c))(t, n); },
                   static_cast<void*>(&body));
}

/// The [begin, end) share of thread t of n in a static split of [0, count).
inline void static_range(int64_t count, int t, int n, int64_t* begin, int64_t* end) {
  *begin = count * t / n;
  *end = count * (t + 1) / n;
}

/// f(i) for every i in [0, count): split statically over the pool's threads
/// when `parallel` (and count > 1), else in order on the caller.
template <typename F>
void parallel_for(int64_t count, bool parallel, const F& f) {
  if (!parallel || count <= 1 || pool_threads() <= 1) {
    for (int64_t i = 0; i < count; ++i) f(i);
    return;
  }
  parallel_team(int(std::min<int64_t>(count, pool_threads())), [&](int t, int n) {
    int64_t b, e;
    static_range(count, t, n, &b, &e);
    for (int64_t i = b; i < e; ++i) f(i);
  });
}

/// f(begin, end) on one contiguous share of [0, count) per thread (shares
/// start at multiples of 16 elements) when `parallel`, else f(0, count).
template <typename F>
void parallel_ranges(int64_t count, bool parallel, const F& f) {
  if (!parallel || count <= 16 || pool_threads() <= 1) {
    if (count > 0) f(int64_t(0), count);
    return;
  }
  parallel_team(pool_threads(), [&](int t, int n) {
    const int64_t b = t == 0 ? 0 : (count * t / n) & ~int64_t(15);
    const int64_t e = t == n - 1 ? count : (count * (t + 1) / n) & ~int64_t(15);
    if (e > b) f(b, e);
  });
}

}  // namespace remora
