// SPDX-License-Identifier: BSD-3-Clause
// The caching allocator template (backends/caching_allocator.h) on a counting
// host Raw, as the CPU backend instantiates it: reuse, best fit with splitting
// and merging, the cap, release on OOM and retry, stats, the environment knob.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <vector>

#include <remora/remora.h>

#include "../backends/backend.h"
#include "../backends/caching_allocator.h"
#include "../core/error.h"

using namespace remora;

namespace {

// Counts what reaches "the device"; fails on demand (fail_next) or above a budget.
struct FakeRaw {
  struct State {
    std::map<void*, size_t> live;
    size_t bytes = 0;
    size_t budget = size_t(-1);
    int fail_next = 0;
    int allocs = 0, frees = 0, failures = 0;
  };
  State* st;
  void* alloc(size_t n) {
    if (st->fail_next > 0 || st->bytes + n > st->budget) {
      if (st->fail_next > 0) --st->fail_next;
      ++st->failures;
      return nullptr;
    }
    void* p = std::malloc(n);
    st->live[p] = n;
    st->bytes += n;
    ++st->allocs;
    return p;
  }
  void free(void* p, size_t n) {
    auto it = st->live.find(p);
    REQUIRE(it != st->live.end());
    CHECK(it->second == n);  // Raw gets back exactly the size it gave
    st->bytes -= it->second;
    st->live.erase(it);
    std::free(p);
    ++st->frees;
  }
  const char* name() const { return "fake"; }
};
using Alloc = CachingAllocator<FakeRaw>;

Alloc::Options opts(size_t cap = size_t(1) << 30, size_t min_cached = 0, size_t seg = 0) {
  Alloc::Options o;
  o.round = 64;
  o.min_cached = min_cached;
  o.min_split = 256;
  o.cap = cap;
  o.segment_round = seg;
  return o;
}

}  // namespace

TEST_CASE("caching allocator: a freed block is handed out again", "[allocator]") {
  FakeRaw::State st;
  {
    Alloc a(FakeRaw{&st}, opts());
    void* p = a.alloc(1000);
    a.free(p, 1000);
    void* q = a.alloc(1000);
    CHECK(q == p);
    CHECK(st.allocs == 1);
    Alloc::Stats s = a.stats();
    CHECK(s.hits == 1);
    CHECK(s.in_use == 1024);  // rounded to 64
    CHECK(s.cached == 0);
    CHECK(s.reserved == 1024);
    a.free(q, 1000);
    CHECK(a.stats().cached == 1024);
    CHECK(a.stats().in_use == 0);
  }
  CHECK(st.live.empty());  // the destructor returns the cache
}

TEST_CASE("caching allocator: best fit, splitting and merging", "[allocator]") {
  FakeRaw::State st;
  Alloc a(FakeRaw{&st}, opts());
  void* big = a.alloc(4096);
  void* small = a.alloc(1024);
  a.free(big, 4096);
  a.free(small, 1024);
  // Best fit: a 1000-byte request takes the 1024 block, not the 4096 one.
  void* p = a.alloc(1000);
  CHECK(p == small);
  // A 1024-byte request splits the 4096 block: its first 1024 bytes.
  void* q = a.alloc(1024);
  CHECK(q == big);
  Alloc::Stats s = a.stats();
  CHECK(s.splits == 1);
  CHECK(s.cached == 3072);
  CHECK(st.allocs == 2);
  // The rest serves the next request without a new segment.
  void* r = a.alloc(2048);
  CHECK(static_cast<char*>(r) == static_cast<char*>(big) + 1024);
  CHECK(st.allocs == 2);
  // Freeing the pieces merges them back into one 4096 block.
  a.free(q, 1024);
  a.free(r, 2048);
  CHECK(a.stats().cached == 4096);
  void* whole = a.alloc(4000);
  CHECK(whole == big);
  CHECK(st.allocs == 2);
  // A remainder below min_split stays with the block (no sliver is split off).
  a.free(whole, 4000);
  void* w2 = a.alloc(4096 - 128);
  CHECK(w2 == big);
  CHECK(a.stats().in_use == 4096 + 1024);
  a.free(w2, 4096 - 128);
  a.free(p, 1000);
  a.release_cached();
  CHECK(st.live.empty());
  CHECK(a.stats().reserved == 0);
  CHECK(a.stats().segments == 0);
}

TEST_CASE("caching allocator: small blocks bypass the cache", "[allocator]") {
  FakeRaw::State st;
  Alloc a(FakeRaw{&st}, opts(size_t(1) << 30, 4096));
  void* p = a.alloc(100);
  a.free(p, 100);
  CHECK(st.frees == 1);  // straight back to Raw
  CHECK(a.stats().cached == 0);
  void* q = a.alloc(8192);
  a.free(q, 8192);
  CHECK(st.frees == 1);  // kept
  CHECK(a.stats().cached == 8192);
}

TEST_CASE("caching allocator: the cap bounds the cached bytes", "[allocator]") {
  FakeRaw::State st;
  Alloc a(FakeRaw{&st}, opts(10000));
  std::vector<void*> ps;
  for (int i = 0; i < 6; ++i) ps.push_back(a.alloc(4096));
  for (void* p : ps) a.free(p, 4096);
  // 6 x 4096 freed, at most 10000 kept: two blocks cached, four released.
  CHECK(a.stats().cached == 8192);
  CHECK(st.frees == 4);
  CHECK(a.stats().cached <= a.options().cap);
  // Lowering the cap releases more, largest first.
  a.set_cap(5000);
  CHECK(a.stats().cached == 4096);
  a.set_cap(0);
  CHECK(a.stats().cached == 0);
  CHECK(st.live.empty());
  // With cap 0 nothing is kept.
  void* p = a.alloc(4096);
  a.free(p, 4096);
  CHECK(st.live.empty());
  // A free block inside a segment that is partly in use cannot be returned:
  // it stays until the segment empties, then goes.
  Alloc b(FakeRaw{&st}, opts(0, 0, 8192));
  void* x = b.alloc(16384 - 4096);  // a segment rounded to 16384, 4096 split off and cached
  CHECK(b.stats().cached == 4096);
  CHECK(b.stats().reserved == 16384);
  b.free(x, 16384 - 4096);
  CHECK(b.stats().cached == 0);
  CHECK(b.stats().reserved == 0);
}

TEST_CASE("caching allocator: out of memory releases the cache and retries", "[allocator]") {
  FakeRaw::State st;
  st.budget = 3 * 4096;
  Alloc a(FakeRaw{&st}, opts());
  void* p1 = a.alloc(4096);
  void* p2 = a.alloc(4096);
  a.free(p1, 4096);
  a.free(p2, 4096);  // two separate segments, both cached
  CHECK(a.stats().cached == 8192);
  // 8192 more does not fit the budget next to the cache, and the cache has no
  // block that big: the allocator releases it and retries.
  void* big = a.alloc(8192 + 4096);
  CHECK(big != nullptr);
  Alloc::Stats s = a.stats();
  CHECK(s.oom_retries == 1);
  CHECK(s.cached == 0);
  CHECK(s.in_use == 12288);
  // When even that fails: a clear Error, nothing leaked.
  CHECK_THROWS_WITH(a.alloc(4096), Catch::Contains("fake: out of memory allocating 4096 bytes"));
  CHECK(a.stats().oom_retries == 2);
  a.free(big, 8192 + 4096);
  a.release_cached();
  // A transient failure (the driver's, once) is absorbed by the retry.
  st.fail_next = 1;
  void* q = a.alloc(4096);
  CHECK(q != nullptr);
  CHECK(st.fail_next == 0);
  CHECK(a.stats().oom_retries == 3);
  a.free(q, 4096);
  // The bypass path retries too.
  Alloc b(FakeRaw{&st}, opts(size_t(1) << 30, 1 << 20));
  st.fail_next = 1;
  void* r = b.alloc(100);
  CHECK(r != nullptr);
  CHECK(b.stats().oom_retries == 1);
  b.free(r, 100);
}

TEST_CASE("caching allocator: stats add up over a random workload", "[allocator]") {
  FakeRaw::State st;
  Alloc a(FakeRaw{&st}, opts(size_t(1) << 20, 0, 8192));
  std::vector<std::pair<void*, size_t>> live;
  uint64_t x = 12345;
  auto rnd = [&]() {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    return x >> 33;
  };
  std::set<char*> starts;
  for (int step = 0; step < 3000; ++step) {
    if (live.empty() || rnd() % 3 != 0) {
      const size_t n = 1 + rnd() % 20000;
      char* p = static_cast<char*>(a.alloc(n));
      // No overlap with any live block.
      for (auto& l : live) {
        char* q = static_cast<char*>(l.first);
        const bool disjoint = p + n <= q || q + l.second <= p;
        REQUIRE(disjoint);
      }
      std::memset(p, 0xAB, n);
      live.push_back({p, n});
    } else {
      const size_t i = rnd() % live.size();
      a.free(live[i].first, live[i].second);
      live.erase(live.begin() + long(i));
    }
    const Alloc::Stats s = a.stats();
    REQUIRE(s.in_use + s.cached == s.reserved);
    REQUIRE(s.reserved == st.bytes);
  }
  for (auto& l : live) a.free(l.first, l.second);
  CHECK(a.stats().in_use == 0);
  a.release_cached();
  CHECK(st.live.empty());
  CHECK(a.stats().peak_reserved >= a.stats().reserved);
}

TEST_CASE("caching allocator: the cap comes from the environment", "[allocator]") {
  Alloc::Options d = opts(123);
  setenv("REMORA_TEST_CACHE_MB", "7", 1);
  CHECK(Alloc::Options::from_env("REMORA_TEST_CACHE_MB", d).cap == size_t(7) << 20);
  setenv("REMORA_TEST_CACHE_MB", "lots", 1);
  CHECK_THROWS_WITH(Alloc::Options::from_env("REMORA_TEST_CACHE_MB", d),
                    Catch::Contains("whole number of MiB"));
  unsetenv("REMORA_TEST_CACHE_MB");
  CHECK(Alloc::Options::from_env("REMORA_TEST_CACHE_MB", d).cap == 123);
}

TEST_CASE("caching allocator: small blocks and the live peak are counted", "[allocator]") {
  FakeRaw::State st;
  const Alloc::Options o = opts(size_t(1) << 30, 4096);  // below 4096: straight from Raw, still live
  Alloc a(FakeRaw{&st}, o);
  void* small = a.alloc(100);  // rounded to 128
  void* big = a.alloc(8192);
  Alloc::Stats s = a.stats();
  CHECK(s.small_in_use == 128);
  CHECK(s.in_use == 8192);
  CHECK(s.peak_live == 8192 + 128);
  CHECK(s.peak_in_use == 8192);
  CHECK(s.min_cached == 4096);
  CHECK(s.cap == o.cap);
  a.free(small, 100);
  a.free(big, 8192);
  s = a.stats();
  CHECK(s.small_in_use == 0);
  CHECK(s.in_use == 0);
  CHECK(s.peak_live == 8192 + 128);  // peaks stay
}

TEST_CASE("cpu backend: empty_cache hands every free cached segment back", "[allocator]") {
  // The driver calls it once after a run's first step (cli/commands/train.cpp).
  Backend& be = backend(Device::cpu());
  {
    Tensor t = Tensor::zeros({1 << 18});  // 1 MiB: a cached size (>= 64 KiB)
    t.fill_(1.0);
  }
  CHECK(be.memory_stats().cached >= (size_t(1) << 20));
  be.empty_cache();
  CHECK(be.memory_stats().cached == 0);
  // The allocator still serves what comes next.
  Tensor u = Tensor::ones({1 << 18});
  CHECK(u.sum().item() == double(1 << 18));
}
