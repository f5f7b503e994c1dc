// SPDX-License-Identifier: BSD-3-Clause
// Random numbers: a seed plus a counter (Philox 4x32-10). Every random op takes
// `numel` counters, so a run is reproducible from (seed, offset) alone, on any
// thread count and on any device; checkpoints store exactly these two numbers.
#pragma once
#include <cstdint>

namespace remora {

class Generator {
 public:
  explicit Generator(uint64_t seed = 0x5eed) : seed_(seed) {}
  void manual_seed(uint64_t seed) { seed_ = seed; offset_ = 0; }
  uint64_t seed() const { return seed_; }
  uint64_t offset() const { return offset_; }
  void set_state(uint64_t seed, uint64_t offset) { seed_ = seed; offset_ = offset; }
  // Reserves n counters; returns the first.
  uint64_t advance(uint64_t n) { uint64_t o = offset_; offset_ += n; return o; }
  // Host-side draws for data pipelines (the same Philox numbers the backends
  // use, so a dataset is a pure function of (seed, offset)):
  // a uniform double in [0, 1) from the next counter (53 random bits) ...
  double next_uniform();
  // ... and a standard normal (Box-Muller) at counter `ctr`, reserved earlier
  // with advance(); the generator does not move.
  double normal_at(uint64_t ctr) const;

 private:
  uint64_t seed_;
  uint64_t offset_ = 0;
};

Generator& default_generator();

}  // namespace remora
