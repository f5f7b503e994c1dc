// SPDX-License-Identifier: BSD-3-Clause
// The driver's named seed offsets: every generator a task uses is seeded
// with config.seed + one of these (distinct primes, so that the streams do
// not overlap). Changing one changes every result of the driver.
#pragma once
#include <cstdint>

namespace remora {
namespace driver {

// The task's data generator: synthetic data sets and random training batches.
constexpr uint64_t kDataSeedOffset = 7919;
// copy / denoise: the fixed validation and test sequences.
constexpr uint64_t kMemoryValidSeedOffset = 15485863;
constexpr uint64_t kMemoryTestSeedOffset = 32452843;
// masked LM: the masks of every evaluation (the same at each one).
constexpr uint64_t kMlmEvalSeedOffset = 104729;

}  // namespace driver
}  // namespace remora
