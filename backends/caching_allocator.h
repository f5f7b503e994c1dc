// SPDX-License-Identifier: BSD-3-Clause
// One caching allocator for every device: CachingAllocator<Raw> keeps freed
// blocks and hands them out again, so a training loop that allocates the same
// shapes every step stops calling malloc / cudaMalloc after its first step.
//
//   - Requests are rounded up to Options::round bytes (the alignment).
//   - Requests below Options::min_cached bypass the cache (malloc is fast for
//     small blocks on the host; 0 caches everything).
//   - Best fit with splitting: a request takes the smallest cached block that
//     holds it; when the rest is at least Options::min_split bytes it is split
//     off and stays cached. A freed block merges with free neighbours of the
//     same raw allocation (segment), so blocks of other sizes are reused too.
//   - New segments are the rounded request, or a multiple of
//     Options::segment_round for requests of at least that size.
//   - Bounded: the cached (free) bytes are kept at or below Options::cap by
//     returning whole free segments to Raw after a free, largest first. Free
//     blocks inside a segment that is partly in use cannot be returned; they
//     are returned once the segment empties (stats().cached may exceed the cap
//     by at most that, and never by a whole free segment).
//   - Out of memory: when Raw fails, every free segment is released and the
//     allocation retried once; a second failure is a remora::Error that says
//     how much is in use and cached.
//   - Thread-safe (one mutex).
//
// Raw is a policy: void* alloc(size_t) (null on failure), void free(void*,
// size_t), const char* name(). The CPU instantiates it on aligned_alloc
// (backends/cpu/cpu_backend.h), CUDA on cudaMalloc (backends/cuda/).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>

#include "../core/device_registry.h"
#include "../core/error.h"
#include "backend.h"

namespace remora {

struct CachingAllocatorOptions {
  size_t round = 64;                     // every size is a multiple of this
  size_t min_cached = 0;                 // smaller requests bypass the cache
  size_t cap = size_t(2) << 30;          // cached (free) bytes kept at most
  size_t min_split = 512;                // a smaller remainder is not split off
  size_t segment_round = 0;              // 0: segments are exactly the request

  // The cap from the environment variable `var` in MiB ("0" disables caching
  // above min_cached); other fields from `defaults`. A malformed value is an Error.
  static CachingAllocatorOptions from_env(const char* var, CachingAllocatorOptions defaults) {
    const char* e = std::getenv(var);
    if (!e || !*e) return defaults;
    char* end = nullptr;
    const unsigned long long mb = std::strtoull(e, &end, 10);
    REMORA_CHECK(end && *end == '\0' && e[0] != '-',
                 var << "=" << e << ": expected a whole number of MiB (the allocator's cache cap)");
    defaults.cap = size_t(mb) << 20;
    return defaults;
  }
};

using CachingAllocatorStats = MemoryStats;  // core/device_registry.h

template <class Raw>
class CachingAllocator {
 public:
  using Options = CachingAllocatorOptions;
  using Stats = CachingAllocatorStats;

  explicit CachingAllocator(Raw raw = Raw(), Options opt = Options())
      : raw_(std::move(raw)), opt_(opt) {
    if (opt_.round == 0) opt_.round = 1;
  }
  ~CachingAllocator() { release_cached(); }  // blocks still in use belong to their owners
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  size_t rounded(size_t n) const {
    const size_t r = opt_.round;
    return n == 0 ? r : (n + r - 1) / r * r;
  }

  void* alloc(size_t nbytes) {
    const size_t sz = rounded(nbytes);
    if (sz < opt_.min_cached) {
      void* p = raw_alloc_retry(sz, nbytes);
      std::lock_guard<std::mutex> lock(mu_);
      ++st_.raw_allocs;
      st_.small_in_use += sz;
      note_peaks();
      return p;
    }
    std::lock_guard<std::mutex> lock(mu_);
    auto it = free_.lower_bound(Key{sz, 0});
    Block* b;
    if (it != free_.end()) {
      b = it->second;
      free_.erase(it);
      st_.cached -= b->size;
      ++st_.hits;
      if (b->size - sz >= std::max<size_t>(opt_.min_split, 1)) split(b, sz);
    } else {
      size_t seg = sz;
      if (opt_.segment_round && sz >= opt_.segment_round)
        seg = (sz + opt_.segment_round - 1) / opt_.segment_round * opt_.segment_round;
      char* p = static_cast<char*>(raw_.alloc(seg));
      if (!p) {
        ++st_.oom_retries;
        release_cached_locked();
        p = static_cast<char*>(raw_.alloc(seg));
      }
      if (!p) {
        std::ostringstream os;
        os << raw_.name() << ": out of memory allocating " << nbytes << " bytes (" << st_.in_use
           << " bytes in use, " << st_.cached << " cached after releasing the cache)";
        throw OutOfMemoryError(os.str());
      }
      ++st_.raw_allocs;
      ++st_.segments;
      st_.reserved += seg;
      if (st_.reserved > st_.peak_reserved) st_.peak_reserved = st_.reserved;
      b = new Block{p, seg, false, nullptr, nullptr};
      if (seg - sz >= std::max<size_t>(opt_.min_split, 1)) split(b, sz);  // rest is cached
    }
    b->used = true;
    st_.in_use += b->size;
    note_peaks();
    used_[b->ptr] = b;
    return b->ptr;
  }

  void free(void* p, size_t nbytes) {
    if (!p) return;
    if (rounded(nbytes) < opt_.min_cached) {
      raw_.free(p, rounded(nbytes));
      std::lock_guard<std::mutex> lock(mu_);
      ++st_.raw_frees;
      st_.small_in_use -= rounded(nbytes);
      return;
    }
    std::lock_guard<std::mutex> lock(mu_);
    auto u = used_.find(p);
    if (u == used_.end()) return;  // not ours (cannot happen through Storage)
    Block* b = u->second;
    used_.erase(u);
    b->used = false;
    st_.in_use -= b->size;
    // Merge with free neighbours of the same segment.
    if (b->prev && !b->prev->used) b = merge(b->prev, b);
    if (b->next && !b->next->used) b = merge(b, b->next);
    insert_free(b);
    enforce_cap_locked();
  }

  // Returns every wholly free segment to Raw.
  void release_cached() {
    std::lock_guard<std::mutex> lock(mu_);
    release_cached_locked();
  }

  void set_cap(size_t cap) {
    std::lock_guard<std::mutex> lock(mu_);
    opt_.cap = cap;
    enforce_cap_locked();
  }
  const Options& options() const { return opt_; }
  Stats stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    Stats s = st_;
    s.cap = opt_.cap;
    s.min_cached = opt_.min_cached;
    return s;
  }
  Raw& raw() { return raw_; }

 private:
  struct Block {
    char* ptr;
    size_t size;
    bool used;
    Block* prev;  // neighbours in the same segment (address order)
    Block* next;
  };
  using Key = std::pair<size_t, uintptr_t>;  // (size, address): best fit, then lowest address

  void note_peaks() {
    if (st_.in_use > st_.peak_in_use) st_.peak_in_use = st_.in_use;
    if (st_.in_use + st_.small_in_use > st_.peak_live) st_.peak_live = st_.in_use + st_.small_in_use;
  }
  void insert_free(Block* b) {
    free_.emplace(Key{b->size, uintptr_t(b->ptr)}, b);
    st_.cached += b->size;
  }
  void erase_free(Block* b) {
    free_.erase(Key{b->size, uintptr_t(b->ptr)});
    st_.cached -= b->size;
  }
  // b (not in free_) keeps its first sz bytes; the rest becomes a free block.
  void split(Block* b, size_t sz) {
    Block* r = new Block{b->ptr + sz, b->size - sz, false, b, b->next};
    if (b->next) b->next->prev = r;
    b->next = r;
    b->size = sz;
    insert_free(r);
    ++st_.splits;
  }
  // a, b adjacent (a before b); whichever of them is in free_ leaves it.
  Block* merge(Block* a, Block* b) {
    if (!a->used && free_.count(Key{a->size, uintptr_t(a->ptr)})) erase_free(a);
    if (!b->used && free_.count(Key{b->size, uintptr_t(b->ptr)})) erase_free(b);
    a->size += b->size;
    a->next = b->next;
    if (b->next) b->next->prev = a;
    delete b;
    return a;
  }
  void release_segment(Block* b) {  // b: free, no neighbours, in free_
    erase_free(b);
    raw_.free(b->ptr, b->size);
    st_.reserved -= b->size;
    --st_.segments;
    ++st_.raw_frees;
    delete b;
  }
  void release_cached_locked() {
    for (auto it = free_.begin(); it != free_.end();) {
      Block* b = it->second;
      ++it;
      if (!b->prev && !b->next) release_segment(b);
    }
  }
  void enforce_cap_locked() {
    // Largest wholly free segments first, until under the cap or none is left.
    bool released = true;
    while (st_.cached > opt_.cap && released) {
      released = false;
      for (auto it = free_.rbegin(); it != free_.rend(); ++it) {
        Block* b = it->second;
        if (!b->prev && !b->next) {
          release_segment(b);
          released = true;
          break;
        }
      }
    }
  }
  void* raw_alloc_retry(size_t sz, size_t nbytes) {
    void* p = raw_.alloc(sz);
    if (p) return p;
    std::lock_guard<std::mutex> lock(mu_);
    ++st_.oom_retries;
    release_cached_locked();
    p = raw_.alloc(sz);
    if (!p) {
      std::ostringstream os;
      os << raw_.name() << ": out of memory allocating " << nbytes << " bytes (" << st_.in_use
         << " bytes in use, " << st_.cached << " cached after releasing the cache)";
      throw OutOfMemoryError(os.str());
    }
    return p;
  }

  Raw raw_;
  Options opt_;
  mutable std::mutex mu_;
  std::map<Key, Block*> free_;
  std::unordered_map<void*, Block*> used_;
  Stats st_;
};

}  // namespace remora
