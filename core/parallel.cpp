// SPDX-License-Identifier: BSD-3-Clause
// The CPU thread pool (parallel.h). Each worker owns a slot: the master
// publishes a job by bumping the slot's generation, and a sleeping worker is
// woken by a futex on that word, so only the workers a team needs are woken.
#include "parallel.h"

#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define REMORA_PAUSE() _mm_pause()
#else
#define REMORA_PAUSE() std::atomic_signal_fence(std::memory_order_seq_cst)
#endif

namespace remora {
namespace {

int default_threads() {
  if (const char* e = std::getenv("OMP_NUM_THREADS")) {
    // "4" or the first of a list "4,2"; strtol, not atoi: 1e12 must not wrap.
    const long n = std::strtol(e, nullptr, 10);
    if (n > kMaxThreads) {
      std::fprintf(stderr, "remora: OMP_NUM_THREADS=%s is more than %d threads; using %d\n", e, kMaxThreads,
                   kMaxThreads);
      return kMaxThreads;
    }
    if (n >= 1) return int(n);
  }
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

int64_t spin_us() {
  const char* e = std::getenv("REMORA_SPIN_US");
  if (e && *e) {
    const long v = std::atol(e);
    return v < 0 ? 0 : v;
  }
  return 30;
}

void futex_wait(std::atomic<uint32_t>* word, uint32_t seen) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT_PRIVATE, seen, nullptr, nullptr, 0);
}
void futex_wake(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
}

struct alignas(64) Slot {
  std::atomic<uint32_t> gen{0};      // bumped by the master for each job of this worker
  std::atomic<uint32_t> sleeping{0};  // the worker is (about to be) in futex_wait
};

thread_local bool t_in_team = false;

void pool_after_fork();

class Pool {
 public:
  Pool() {
    // A forked child has none of the workers: it starts a fresh pool (the
    // old slots leak, like the Pool itself) instead of waiting on them forever.
    pthread_atfork(nullptr, nullptr, [] { pool_after_fork(); });
  }
  void forget_workers() {
    slots_.clear();
    busy_.store(false, std::memory_order_relaxed);
    t_in_team = false;
  }

  int threads() const { return threads_.load(std::memory_order_relaxed); }
  void set_threads(int n) { threads_.store(n, std::memory_order_relaxed); }

  void run(int want, void (*fn)(void*, int, int), void* ctx) {
    const int n = std::min(want, threads());
    // One thread, a nested region, or another thread's region: run here.
    if (n <= 1 || t_in_team || busy_.exchange(true, std::memory_order_acquire)) return run_here(fn, ctx);
    try {
      grow(n - 1);
    } catch (...) {  // no thread could be made: this region runs here alone
      busy_.store(false, std::memory_order_release);
      return run_here(fn, ctx);
    }
    fn_ = fn;
    ctx_ = ctx;
    n_ = n;
    error_ = nullptr;
    remaining_.store(uint32_t(n - 1), std::memory_order_relaxed);
    for (int w = 0; w < n - 1; ++w) {
      Slot& s = *slots_[size_t(w)];
      s.gen.fetch_add(1, std::memory_order_seq_cst);
      if (s.sleeping.load(std::memory_order_seq_cst)) futex_wake(&s.gen);
    }
    t_in_team = true;
    try {
      fn(ctx, 0, n);
    } catch (...) {
      record_error();
    }
    t_in_team = false;
    wait_done();
    std::exception_ptr err = error_;
    error_ = nullptr;
    busy_.store(false, std::memory_order_release);
    if (err) std::rethrow_exception(err);
  }

 private:
  static void run_here(void (*fn)(void*, int, int), void* ctx) {
    const bool outer = t_in_team;
    t_in_team = true;
    try {
      fn(ctx, 0, 1);
    } catch (...) {
      t_in_team = outer;
      throw;
    }
    t_in_team = outer;
  }

  void record_error() {
    std::lock_guard<std::mutex> lock(error_mutex_);
    if (!error_) error_ = std::current_exception();
  }

  // Called only by the pool's holder (busy_), so the vectors do not race. A
  // slot joins slots_ only once its thread runs.
  void grow(int workers) {
    while (int(slots_.size()) < workers) {
      Slot* slot = new Slot;
      const int tid = int(slots_.size()) + 1;
      try {
        std::thread(&Pool::worker, this, slot, tid).detach();
      } catch (...) {
        delete slot;
        throw;
      }
      slots_.push_back(slot);
    }
  }

  void worker(Slot* slot, int tid) {
    t_in_team = true;  // a region a kernel starts from here runs inline
    uint32_t seen = 0;  // a new slot's gen: the first job may be posted before we get here
    for (;;) {
      wait(slot, seen);
      seen = slot->gen.load(std::memory_order_acquire);
      try {
        fn_(ctx_, tid, n_);
      } catch (...) {
        record_error();
      }
      if (remaining_.fetch_sub(1, std::memory_order_seq_cst) == 1 &&
          master_sleeping_.load(std::memory_order_seq_cst))
        futex_wake(&remaining_);
    }
  }

  // Spins (pause loops) for up to spin_us_; true when done() came true.
  template <typename Done>
  bool spin_until(const Done& done) const {
    using clock = std::chrono::steady_clock;
    const auto start = clock::now();
    for (int i = 1;; ++i) {
      if (done()) return true;
      if ((i & 63) == 0 &&
          std::chrono::duration_cast<std::chrono::microseconds>(clock::now() - start).count() >= spin_us_)
        return false;
      REMORA_PAUSE();
    }
  }

  // The master's wait for its workers: spin, then sleep until the last one
  // finishing wakes it.
  void wait_done() {
    if (spin_until([&] { return remaining_.load(std::memory_order_acquire) == 0; })) return;
    for (;;) {
      master_sleeping_.store(1, std::memory_order_seq_cst);
      const uint32_t r = remaining_.load(std::memory_order_seq_cst);
      if (r == 0) break;
      futex_wait(&remaining_, r);
    }
    master_sleeping_.store(0, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
  }

  void wait(Slot* slot, uint32_t seen) {
    if (spin_until([&] { return slot->gen.load(std::memory_order_acquire) != seen; })) return;
    // Sleep until the master bumps gen (it wakes us when it sees sleeping).
    while (slot->gen.load(std::memory_order_acquire) == seen) {
      slot->sleeping.store(1, std::memory_order_seq_cst);
      if (slot->gen.load(std::memory_order_seq_cst) == seen) futex_wait(&slot->gen, seen);
      slot->sleeping.store(0, std::memory_order_relaxed);
    }
  }

  std::atomic<int> threads_{default_threads()};
  const int64_t spin_us_ = spin_us();
  std::atomic<bool> busy_{false};
  std::vector<Slot*> slots_;
  // The current job: written by the master before the slots' gen bumps
  // (seq_cst), read by workers after they see their bump.
  void (*fn_)(void*, int, int) = nullptr;
  void* ctx_ = nullptr;
  int n_ = 1;
  std::atomic<uint32_t> remaining_{0};  // workers of the current job still running
  std::atomic<uint32_t> master_sleeping_{0};
  std::mutex error_mutex_;
  std::exception_ptr error_;
};

// Never destroyed: detached workers may still be waiting on it at exit.
Pool& pool() {
  static Pool* p = new Pool;
  return *p;
}
void pool_after_fork() { pool().forget_workers(); }

}  // namespace

int pool_threads() { return pool().threads(); }
void set_pool_threads(int n) {
  REMORA_CHECK(n >= 1 && n <= kMaxThreads, "set_num_threads: expected n in [1, " << kMaxThreads << "], got " << n);
  pool().set_threads(n);
}

namespace detail {
void run_team(int threads, void (*fn)(void*, int, int), void* ctx) { pool().run(threads, fn, ctx); }
}  // namespace detail

}  // namespace remora
