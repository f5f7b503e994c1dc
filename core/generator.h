// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// Random numbers: a seed plus a counter (Philox 4x32-10). Every random op takes
/// `numel` counters, so a run is reproducible from (seed, offset) alone, on any
/// thread count and on any device; checkpoints store exactly these two numbers.
#pragma once
#include <cstdint>

namespace remora {

/// A random stream: a Philox seed and the next unused counter (offset). Random
/// ops reserve their counters with advance(); the Philox words of those counters
/// (core/philox.h) are the random numbers, on the CPU and on CUDA alike.
/// Not thread-safe: share one between threads only with a lock.
class Generator {
 public:
  /// A stream with the given seed (default 0x5eed) at offset 0.
  explicit Generator(uint64_t seed = 0x5eed) : seed_(seed) {}
  /// Restarts the stream: sets the seed and resets the offset to 0.
  void manual_seed(uint64_t seed) { seed_ = seed; offset_ = 0; }
  /// The Philox key.
  uint64_t seed() const { return seed_; }
  /// The next unused counter (the number of counters reserved since the seed was set).
  uint64_t offset() const { return offset_; }
  /// Restores a saved (seed, offset) pair, e.g. from a checkpoint.
  void set_state(uint64_t seed, uint64_t offset) { seed_ = seed; offset_ = offset; }
  /// Reserves n counters; returns the first.
  uint64_t advance(uint64_t n) { uint64_t o = offset_; offset_ += n; return o; }
  /// Host-side draws for data pipelines (the same Philox numbers the backends
  /// use, so a dataset is a pure function of (seed, offset)):
  /// a uniform double in [0, 1) from the next counter (53 random bits); the
  /// offset advances by 1.
  double next_uniform();
  /// A standard normal (Box-Muller) at counter `ctr`, reserved earlier with
  /// advance(); the generator does not move.
  double normal_at(uint64_t ctr) const;

 private:
  uint64_t seed_;
  uint64_t offset_ = 0;
};

/// The process-wide generator that random ops and factories use when given
/// none; manual_seed (core/tensor.h) reseeds it, and checkpoints save and
/// restore its (seed, offset).
Generator& default_generator();

}  // namespace remora
