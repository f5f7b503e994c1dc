// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// Philox 4x32-10 (Salmon et al. 2011): the counter-based stream behind
/// Generator (core/generator.h). Header-only and host/device, so the CPU and CUDA
/// backends draw from the same stream and one seed gives the same numbers on both.
#pragma once
#include <cmath>
#include <cstdint>

#ifdef __CUDACC__
/// Marks a function callable from host and device code (inline on the host).
#define REMORA_HD __host__ __device__ __forceinline__
#else
/// Marks a function callable from host and device code (inline on the host).
#define REMORA_HD inline
#endif

namespace remora {
/// The Philox 4x32-10 stream and the distributions drawn from it.
namespace philox {

/// \var remora::philox::U4::x
/// The four words.
//
/// Four 32-bit random words: one Philox output block.
struct U4 { uint32_t x[4]; };

/// The low 32 bits of a * b; the high 32 bits go to *hi.
REMORA_HD uint32_t mulhilo(uint32_t a, uint32_t b, uint32_t* hi) {
  uint64_t p = uint64_t(a) * uint64_t(b);
  *hi = uint32_t(p >> 32);
  return uint32_t(p);
}

/// Four 32-bit random words for counter `ctr` under key `seed` (10 rounds).
REMORA_HD U4 philox(uint64_t seed, uint64_t ctr) {
  uint32_t c0 = uint32_t(ctr), c1 = uint32_t(ctr >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = uint32_t(seed), k1 = uint32_t(seed >> 32);
  for (int r = 0; r < 10; ++r) {
    uint32_t hi0, hi1;
    uint32_t lo0 = mulhilo(0xD2511F53u, c0, &hi0);
    uint32_t lo1 = mulhilo(0xCD9E8D57u, c2, &hi1);
    uint32_t n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
    c0 = n0; c1 = n1; c2 = n2; c3 = n3;
    k0 += 0x9E3779B9u; k1 += 0xBB67AE85u;
  }
  U4 r;
  r.x[0] = c0; r.x[1] = c1; r.x[2] = c2; r.x[3] = c3;
  return r;
}

/// Uniform in [0, 1) with 53 random bits (from words 0 and 1 of r).
REMORA_HD double uniform(const U4& r) {
  uint64_t bits = (uint64_t(r.x[0]) << 21) ^ uint64_t(r.x[1] >> 11);
  return double(bits & ((1ull << 53) - 1)) * (1.0 / 9007199254740992.0);
}

/// \name Bernoulli and dropout masks
/// Element i of a mask drawn at counter offset
/// `off` is kept when word (i / 8) % 4 of philox(seed, keep_counter(off, i)) is
/// below keep_threshold(keep) = ceil(keep * 2^32): each Philox call serves 4
/// elements, and 8 consecutive counters x 4 words fill 32 consecutive elements
/// in order (so 8 SIMD lanes give 4 vectors of the mask with no shuffle). The
/// counters of an n-element mask stay in [off, off + n), as with one counter per element.
/// @{
//
/// ceil(keep * 2^32), keep clamped to [0, 1]: a word below it keeps its element.
REMORA_HD uint64_t keep_threshold(double keep) {
  const double k = keep < 0 ? 0.0 : keep > 1 ? 1.0 : keep;
  return uint64_t(::ceil(k * 4294967296.0));
}
/// The counter whose Philox words decide element i of a mask drawn at offset off.
REMORA_HD uint64_t keep_counter(uint64_t off, uint64_t i) { return off + (i >> 5) * 8 + (i & 7); }
/// Whether element i of the mask drawn with (seed, off) is kept, for a
/// threshold from keep_threshold.
/// Word (i >> 3) & 3 is picked by two conditional selects on bits 3 and 4 of i,
/// not by a run-time array index: in device code that index would put the four
/// words in local memory (a stack frame in every kernel that draws a mask).
REMORA_HD bool kept(uint64_t seed, uint64_t off, uint64_t i, uint64_t threshold) {
  const U4 r = philox(seed, keep_counter(off, i));
  const uint32_t lo = (i & 8) ? r.x[1] : r.x[0];
  const uint32_t hi = (i & 8) ? r.x[3] : r.x[2];
  return uint64_t((i & 16) ? hi : lo) < threshold;
}
/// @}

/// A standard normal by Box-Muller on (0, 1] x [0, 1) (53 bits from words 0-1
/// and 53 from words 2-3 of r).
REMORA_HD double normal(const U4& r) {
  uint64_t b0 = (uint64_t(r.x[0]) << 21) ^ uint64_t(r.x[1] >> 11);
  uint64_t b1 = (uint64_t(r.x[2]) << 21) ^ uint64_t(r.x[3] >> 11);
  double u0 = (double(b0 & ((1ull << 53) - 1)) + 1.0) * (1.0 / 9007199254740992.0);
  double u1 = double(b1 & ((1ull << 53) - 1)) * (1.0 / 9007199254740992.0);
  return ::sqrt(-2.0 * ::log(u0)) * ::cos(6.283185307179586 * u1);  // :: so that remora::sqrt(Tensor) is not found first
}

}  // namespace philox
}  // namespace remora
