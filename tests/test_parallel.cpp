// SPDX-License-Identifier: BSD-3-Clause
// The CPU thread pool (core/parallel.h): every index runs exactly once at any
// thread count and split; a region started inside a region, or from a second
// thread while the pool is busy, runs inline; a thrown error reaches the
// caller and the pool keeps working; and set_num_threads changes the team.
#include <catch2/catch.hpp>
#include <atomic>
#include <cstdint>
#include <remora/remora.h>
#include <stdexcept>
#include <sys/wait.h>
#include <unistd.h>
#include <thread>
#include <vector>

#include "../core/parallel.h"

using namespace remora;

namespace {
struct ThreadsGuard {
  int saved = get_num_threads();
  ~ThreadsGuard() { set_num_threads(saved); }
};
}  // namespace

TEST_CASE("thread pool: parallel_for and parallel_ranges cover every index once", "[parallel]") {
  ThreadsGuard guard;
  for (int threads : {1, 2, 3, 4, 7}) {
    set_num_threads(threads);
    REQUIRE(get_num_threads() == threads);
    for (int64_t n : {0, 1, 2, 5, 16, 17, 100, 1000, 65537}) {
      std::vector<std::atomic<int>> hits(size_t(n + 1));
      parallel_for(n, true, [&](int64_t i) { hits[size_t(i)].fetch_add(1); });
      int64_t wrong = 0;
      for (int64_t i = 0; i < n; ++i) wrong += hits[size_t(i)].load() != 1;
      CHECK(wrong == 0);
      CHECK(hits[size_t(n)].load() == 0);

      std::vector<std::atomic<int>> seen(size_t(n + 1));
      std::atomic<int> calls{0};
      parallel_ranges(n, true, [&](int64_t b, int64_t e) {
        calls.fetch_add(1);
        CHECK(b < e);
        CHECK((b % 16) == 0);
        for (int64_t i = b; i < e; ++i) seen[size_t(i)].fetch_add(1);
      });
      wrong = 0;
      for (int64_t i = 0; i < n; ++i) wrong += seen[size_t(i)].load() != 1;
      CHECK(wrong == 0);
      CHECK(calls.load() <= threads);
    }
  }
}

TEST_CASE("thread pool: teams have the asked size, tid 0 is the caller", "[parallel]") {
  ThreadsGuard guard;
  set_num_threads(4);
  const std::thread::id me = std::this_thread::get_id();
  for (int want : {1, 2, 3, 4, 9}) {
    std::vector<std::atomic<int>> tids(8);
    std::atomic<int> team{-1};
    std::atomic<bool> caller_is_zero{false};
    parallel_team(want, [&](int t, int n) {
      tids[size_t(t)].fetch_add(1);
      team.store(n);
      if (t == 0) caller_is_zero.store(std::this_thread::get_id() == me);
    });
    const int n = want < 4 ? want : 4;
    CHECK(team.load() == n);
    CHECK(caller_is_zero.load());
    for (int t = 0; t < 8; ++t) CHECK(tids[size_t(t)].load() == (t < n ? 1 : 0));
  }
}

TEST_CASE("thread pool: nested regions and a second caller run inline", "[parallel]") {
  ThreadsGuard guard;
  set_num_threads(2);
  std::atomic<int> inner_team_max{0}, inner_calls{0};
  parallel_team(2, [&](int, int) {
    parallel_team(2, [&](int, int n) {
      inner_calls.fetch_add(1);
      int cur = inner_team_max.load();
      while (n > cur && !inner_team_max.compare_exchange_weak(cur, n)) {
      }
    });
  });
  CHECK(inner_calls.load() == 2);  // once per outer thread, each on its own
  CHECK(inner_team_max.load() == 1);

  // Two threads driving the pool at once: every region completes with all its indices.
  std::atomic<int64_t> total{0};
  auto drive = [&] {
    for (int rep = 0; rep < 200; ++rep)
      parallel_for(1000, true, [&](int64_t i) { total.fetch_add(i); });
  };
  std::thread other(drive);
  drive();
  other.join();
  CHECK(total.load() == 2 * 200 * int64_t(999 * 1000 / 2));
}

TEST_CASE("thread pool: an exception reaches the caller and the pool goes on", "[parallel]") {
  ThreadsGuard guard;
  set_num_threads(2);
  for (int thrower : {0, 1}) {
    CHECK_THROWS_AS(parallel_team(2,
                                  [&](int t, int) {
                                    if (t == thrower) throw std::runtime_error("kernel failed");
                                  }),
                    std::runtime_error);
    std::atomic<int> n{0};
    parallel_for(64, true, [&](int64_t) { n.fetch_add(1); });
    CHECK(n.load() == 64);
  }
  CHECK_THROWS(set_num_threads(0));
}

TEST_CASE("thread pool: a forked child gets a working pool of its own", "[parallel]") {
  ThreadsGuard guard;
  set_num_threads(2);
  std::atomic<int> n{0};
  parallel_for(100, true, [&](int64_t) { n.fetch_add(1); });  // the workers exist now
  REQUIRE(n.load() == 100);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    alarm(20);  // a hang would end the child by SIGALRM, failing the check below
    std::atomic<int> m{0};
    for (int rep = 0; rep < 10; ++rep) parallel_for(100, true, [&](int64_t) { m.fetch_add(1); });
    _exit(m.load() == 1000 ? 0 : 1);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("thread pool: row kernels give the same bits at any thread count", "[parallel]") {
  ThreadsGuard guard;
  auto values = [](const Tensor& t) {
    Tensor c = t.contiguous();
    const float* p = c.data_ptr<float>();
    return std::vector<float>(p, p + c.numel());
  };
  set_num_threads(1);
  manual_seed(7);
  Tensor x = Tensor::randn({64, 700});
  const std::vector<float> x1 = values(x), s1 = values(sum(x, {1})), m1 = values(softmax(x, -1));
  for (int threads : {2, 3}) {
    set_num_threads(threads);
    manual_seed(7);
    Tensor x2 = Tensor::randn({64, 700});
    CHECK(values(x2) == x1);  // Philox fills are counter-based
    CHECK(values(sum(x2, {1})) == s1);  // one row per task
    CHECK(values(softmax(x2, -1)) == m1);
  }
}
