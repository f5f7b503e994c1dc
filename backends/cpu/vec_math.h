// SPDX-License-Identifier: BSD-3-Clause
// Small math helpers for the CPU kernels that the compiler can vectorise.
//
// glibc's expf is a scalar call: a loop that calls it runs one element at a
// time (GCC only has vector versions of it under -ffast-math). exp_f32 below
// is branch-free float arithmetic, so `#pragma omp simd` loops over it become
// SIMD code (given -fno-trapping-math, which the library is built with; without
// it GCC turns the clamps into branches and the loop stays scalar but correct). Reference: std::exp; tests/test_cpu_kernels.cpp checks it against
// std::exp in double over the whole float range.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace remora {
namespace vec {

// Inlined by force: kernels compiled twice (baseline and AVX2 + FMA, see
// cpu_rows.cpp) get each copy of these helpers only by inlining them.
#define REMORA_VEC_INLINE __attribute__((always_inline)) inline
// The same for a lambda a `#pragma omp simd` loop calls: [](float x) REMORA_VEC_LAMBDA {...}
// (a lambda the compiler leaves out of line keeps the loop scalar).
#define REMORA_VEC_LAMBDA __attribute__((always_inline))

inline float bits_to_float(int32_t i) {
  float f;
  std::memcpy(&f, &i, sizeof f);
  return f;
}
inline int32_t float_to_bits(float f) {
  int32_t i;
  std::memcpy(&i, &f, sizeof i);
  return i;
}

// exp(x) for float, within 2 ulp of the correctly rounded result for
// x in [-87, 88.7] (normal results); denormal results are approximated with
// gradual underflow, x < -104 gives 0, x > 88.72 gives +inf, NaN gives NaN.
//
// Cody-Waite range reduction x = n ln2 + r, |r| <= ln2/2, then Cephes' degree-6
// polynomial for exp(r) and a scale by 2^n built from exponent bits. 2^n is
// applied as 2^(n/2) * 2^(n - n/2) so both factors stay normal floats over the
// whole range (n in [-150, 128]).
// The shared core of exp_f32 and exp_f32_nonpos: for an already clamped x,
// returns p = exp(r) for x = n ln2 + r and sets *ni = n.
REMORA_VEC_INLINE float exp_f32_core(float xc, int32_t* ni) {
  // n = round(x / ln2) with the 1.5 * 2^23 trick: adding it rounds to an integer
  // and leaves n in the low mantissa bits (no float -> int conversion).
  const float magic = 12582912.0f;  // 0x1.8p23
  const float t = xc * 1.44269504088896341f + magic;
  const float n = t - magic;
  *ni = float_to_bits(t) - float_to_bits(magic);
  // r = x - n ln2, with ln2 split in two so that n * C1 is exact.
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  return p * r * r + r + 1.0f;
}

REMORA_VEC_INLINE float exp_f32(float x) {
  const float lo = -104.0f, hi = 88.72283935546875f;
  // Ternaries rather than std::min/max so that a NaN x stays NaN.
  float xc = x < lo ? lo : x;
  xc = xc > hi ? hi : xc;
  int32_t ni;
  const float p = exp_f32_core(xc, &ni);
  const int32_t n1 = ni >> 1, n2 = ni - n1;  // n1 = floor(n / 2)
  const float s1 = bits_to_float(int32_t(uint32_t(n1 + 127) << 23));  // 2^n1
  const float s2 = bits_to_float(int32_t(uint32_t(n2 + 127) << 23));  // 2^n2
  float y = p * s1 * s2;
  // x <= lo already gives 0 (2^-150 times p < 1.42 rounds to zero).
  y = x > hi ? std::numeric_limits<float>::infinity() : y;
  return y;
}

// exp(x) for x <= 0 (softmax's x - max, log-probabilities): the same result
// as exp_f32 for every x <= 0, -inf and NaN, in fewer instructions - no
// overflow clamp or inf select, and 2^n applied as 2^(n + 64) * 2^-64 (one
// rounding, as exp_f32's two factors) instead of two factors built from n.
// Correct up to x = 44 (2^(n + 64) must stay a normal float), wrong above.
REMORA_VEC_INLINE float exp_f32_nonpos(float x) {
  const float xc = x < -104.0f ? -104.0f : x;
  int32_t ni;
  const float p = exp_f32_core(xc, &ni);
  const float s = bits_to_float(int32_t(uint32_t(ni + 127 + 64) << 23));  // 2^(n + 64)
  return (p * s) * 5.42101086242752217e-20f;                            // * 2^-64
}

// erf(x) for float, within 2 ulp of the correctly rounded result over the whole
// float range (tests/test_cpu_kernels.cpp checks it against std::erf in double),
// branch-free like exp_f32 so that loops over it vectorise (glibc's erff is a
// scalar call). |x| < 0.84375: x P(x^2), P of degree 6; 0.84375 <= |x| < 3.925:
// 1 - exp(Q(|x|) - x^2), Q of degree 9 in |x| mapped to [-1, 1] fitting
// log(erfc(a)) + a^2; above 3.925, erfc < 2^-27 and erf rounds to +-1. Both
// polynomials are least-squares fits on Chebyshev nodes against erf in double
// (relative error 1e-10 for P, 1.4e-8 in the log for Q).
REMORA_VEC_INLINE float erf_f32(float x) {
  const float a = std::fabs(x);
  const float t = a * a;
  float p = 8.91326781e-05f;
  p = p * t + -8.26061587e-04f;
  p = p * t + 5.21061011e-03f;
  p = p * t + -2.68629752e-02f;
  p = p * t + 1.12837560e-01f;
  p = p * t + -3.76126379e-01f;
  p = p * t + 1.28379167e-01f;  // 2 / sqrt(pi) - 1: a + a p keeps a exact
  const float small = a + a * p;
  const float ac = a > 3.925f ? 3.925f : a;  // a NaN stays NaN
  const float w = (ac - 2.384375f) * (1.0f / 1.540625f);
  float q = 5.20762228e-07f;
  q = q * w + 5.11377148e-05f;
  q = q * w + -3.05500231e-04f;
  q = q * w + 1.18706317e-03f;
  q = q * w + -4.14624717e-03f;
  q = q * w + 1.36577096e-02f;
  q = q * w + -4.35825810e-02f;
  q = q * w + 1.42538011e-01f;
  q = q * w + -5.64029872e-01f;
  q = q * w + -1.51526928e+00f;
  const float large = 1.0f - exp_f32_nonpos(q - ac * ac);
  const float r = a < 0.84375f ? small : large;
  return std::copysign(r, x);
}

// sum over j < n of f(j) in T, as four interleaved streams (the quarters of
// [0, n)), each its own vector accumulator. `#pragma omp simd reduction` over
// one stream keeps one vector accumulator, so every vector add waits for the
// previous one (3-4 cycles per 8 floats: a pass over an L1-resident row
// becomes add-latency-bound); four accumulators overlap. (32 scalar partial
// sums, as sum_f64 does in double, did not vectorise well in float.) The row
// kernels use it per chunk of 256 elements and add the chunk sums in double.
template <typename T, typename F>
REMORA_VEC_INLINE T sum_lanes(int64_t n, const F& f) {
  const int64_t q = n / 4;
  T c0 = 0, c1 = 0, c2 = 0, c3 = 0;
#pragma omp simd reduction(+ : c0, c1, c2, c3)
  for (int64_t j = 0; j < q; ++j) {
    c0 += f(j);
    c1 += f(q + j);
    c2 += f(2 * q + j);
    c3 += f(3 * q + j);
  }
  T s = (c0 + c1) + (c2 + c3);
  for (int64_t j = 4 * q; j < n; ++j) s += f(j);
  return s;
}
// Two sums in one pass, as sum_lanes.
template <typename T, typename FA, typename FB>
REMORA_VEC_INLINE void sum2_lanes(int64_t n, const FA& fa, const FB& fb, T* sa, T* sb) {
  const int64_t q = n / 4;
  T a0 = 0, a1 = 0, a2 = 0, a3 = 0, b0 = 0, b1 = 0, b2 = 0, b3 = 0;
#pragma omp simd reduction(+ : a0, a1, a2, a3, b0, b1, b2, b3)
  for (int64_t j = 0; j < q; ++j) {
    a0 += fa(j);
    a1 += fa(q + j);
    a2 += fa(2 * q + j);
    a3 += fa(3 * q + j);
    b0 += fb(j);
    b1 += fb(q + j);
    b2 += fb(2 * q + j);
    b3 += fb(3 * q + j);
  }
  T ta = (a0 + a1) + (a2 + a3), tb = (b0 + b1) + (b2 + b3);
  for (int64_t j = 4 * q; j < n; ++j) {
    ta += fa(j);
    tb += fb(j);
  }
  *sa = ta;
  *sb = tb;
}

// sum over j < n of f(j), accumulated in double. Replaces the plain loop
//   double s = 0; for (j = 0; j < n; ++j) s += double(f(j));
// which is one serial chain of dependent adds (the compiler may not reorder fp
// additions, so it neither vectorises nor pipelines). Eight independent partial
// sums vectorise and overlap; the result differs from the plain loop only by
// the rounding of a different summation order.
template <typename F>
REMORA_VEC_INLINE double sum_f64(int64_t n, const F& f) {
  constexpr int kLanes = 8;
  double acc[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += double(f(j + l));
  double s = 0;
  for (; j < n; ++j) s += double(f(j));
  for (int l = 0; l < kLanes; ++l) s += acc[l];
  return s;
}
// The exp the kernels use: the vectorisable one for float, libm for double
// (float64 is the reference and gradient-check dtype; it keeps std::exp).
REMORA_VEC_INLINE float vexp(float x) { return exp_f32(x); }
REMORA_VEC_INLINE double vexp(double x) { return std::exp(x); }
// erf: the vectorisable one for float, libm for double.
REMORA_VEC_INLINE float verf(float x) { return erf_f32(x); }
REMORA_VEC_INLINE double verf(double x) { return std::erf(x); }
// exp for x <= 0 (see exp_f32_nonpos); double keeps std::exp.
REMORA_VEC_INLINE float vexp_nonpos(float x) { return exp_f32_nonpos(x); }
REMORA_VEC_INLINE double vexp_nonpos(double x) { return std::exp(x); }

}  // namespace vec
}  // namespace remora
