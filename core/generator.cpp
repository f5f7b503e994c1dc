// SPDX-License-Identifier: BSD-3-Clause
// Host-side draws of Generator (core/generator.h) on the shared Philox stream.
#include "generator.h"

#include "philox.h"

namespace remora {

double Generator::next_uniform() {
  const uint64_t ctr = advance(1);
  return philox::uniform(philox::philox(seed_, ctr));
}

double Generator::normal_at(uint64_t ctr) const { return philox::normal(philox::philox(seed_, ctr)); }

}  // namespace remora
