// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// The 16-bit floating types bf16 (bfloat16: 1 sign, 8 exponent, 7 mantissa
/// bits, f32's range) and f16 (IEEE binary16: 1, 5, 10), and their conversions.
///
/// Every conversion to a 16-bit type rounds to nearest, ties to even, once
/// (f64 inputs are not rounded through f32 first), keeps NaN a NaN (quiet,
/// sign kept), keeps +-inf and +-0, gives +-inf past the largest finite value
/// plus half an ulp, and rounds onto the subnormal grid. Conversions from a
/// 16-bit type are exact.
///
/// bf16_t / f16_t are the storage types of DType::bf16 / DType::f16 (two bytes,
/// the bits of the format). Arithmetic on them converts to float; assigning a
/// float rounds once. Kernels therefore compute one element in f32 and round
/// its result, and accumulate in f32 or wider.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

// Host and device functions under nvcc (the CUDA backend stores the same bits).
#if defined(__CUDACC__)
/// Marks the conversions host and device functions under nvcc (inline elsewhere).
#define REMORA_HALF_FN __host__ __device__ inline
#else
/// Marks the conversions host and device functions under nvcc (inline elsewhere).
#define REMORA_HALF_FN inline
#endif

namespace remora {

/// Bit casts and the round-to-odd step behind the conversions.
namespace half_detail {
/// The bits of f.
REMORA_HALF_FN uint32_t f32_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}
/// The float with bits u.
REMORA_HALF_FN float bits_f32(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}
/// d rounded to f32 with round-to-odd (truncated toward zero, lowest bit set
/// when inexact). Rounding that to a format with at least 2 fewer significand
/// bits gives d's correctly rounded value (no double rounding).
REMORA_HALF_FN float f64_to_f32_odd(double d) {
  float f = float(d);
  if (!(double(f) != d) || d != d) return f;  // exact, or NaN
  uint32_t u = f32_bits(f);
  const double af = f < 0 ? -double(f) : double(f), ad = d < 0 ? -d : d;
  if (af > ad) u -= 1;  // toward zero (also inf -> max finite)
  return bits_f32(u | 1u);
}
}  // namespace half_detail

/// \name bf16 conversions
/// @{

/// The bf16 nearest to x (ties to even; NaN stays a quiet NaN), as bits.
REMORA_HALF_FN uint16_t bf16_bits_from_f32(float x) {
  const uint32_t u = half_detail::f32_bits(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x0040u);  // NaN, made quiet
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
/// The float value of bf16 bits h (exact).
REMORA_HALF_FN float f32_from_bf16_bits(uint16_t h) { return half_detail::bits_f32(uint32_t(h) << 16); }
/// The bf16 nearest to x, rounded once (not through f32), as bits.
REMORA_HALF_FN uint16_t bf16_bits_from_f64(double x) {
  return bf16_bits_from_f32(half_detail::f64_to_f32_odd(x));
}
/// @}

/// \name f16 conversions
/// @{

/// The f16 nearest to x (ties to even; subnormals on the 2^-24 grid; inf at
/// 65520 and beyond; NaN stays a quiet NaN), as bits.
REMORA_HALF_FN uint16_t f16_bits_from_f32(float x) {
  const uint32_t u = half_detail::f32_bits(x);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return uint16_t(sign | 0x7e00u | ((a >> 13) & 0x03ffu));  // NaN, quiet
  if (a >= 0x47800000u) return uint16_t(sign | 0x7c00u);  // >= 2^16 (and inf): inf
  if (a < 0x38800000u) {
    // Below f16's smallest normal 2^-14: on the subnormal grid 2^-24, rounded
    // by adding 0.5 in float, where the grid is the ulp of the sum.
    const float r = half_detail::bits_f32(a) + 0.5f;  // 0.5 = 2^-1: ulp 2^-24
    return uint16_t(sign | (half_detail::f32_bits(r) - 0x3f000000u));
  }
  // Normal: rebias the exponent (127 -> 15) and round the 13 dropped bits;
  // a carry moves to the next binade, past 65504 + half an ulp to inf.
  const uint32_t m = a + 0xc8000fffu + ((a >> 13) & 1u);  // (a - (112 << 23)) + 0xfff + odd
  return uint16_t(sign | (m >> 13));
}
/// The float value of f16 bits h (exact, subnormals included).
REMORA_HALF_FN float f32_from_f16_bits(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x03ffu;
  if (e == 0x1f) return half_detail::bits_f32(sign | 0x7f800000u | (m << 13));  // inf, NaN
  if (e == 0) {  // zero and subnormals: m * 2^-24, exact in f32
    const float v = float(m) * 0x1p-24f;
    return half_detail::bits_f32(sign | half_detail::f32_bits(v));
  }
  return half_detail::bits_f32(sign | ((e + 112u) << 23) | (m << 13));
}
/// The f16 nearest to x, rounded once (not through f32), as bits.
REMORA_HALF_FN uint16_t f16_bits_from_f64(double x) {
  return f16_bits_from_f32(half_detail::f64_to_f32_odd(x));
}
/// @}

// ---- the storage types ----

/// Two bytes holding a bf16 (IsBf16 = true) or f16 value. Implicit from float
/// (rounds) and to float (exact); explicit from double and integers (rounded
/// once).
template <bool IsBf16>
struct half_storage {
  /// The value's bits in the format (bf16: the high half of an f32).
  uint16_t bits;
  /// Uninitialised bits, as a built-in type.
  half_storage() = default;
  /// f rounded to the nearest value (ties to even).
  REMORA_HALF_FN half_storage(float f) : bits(IsBf16 ? bf16_bits_from_f32(f) : f16_bits_from_f32(f)) {}
  /// d rounded once to the nearest value.
  REMORA_HALF_FN explicit half_storage(double d) : bits(IsBf16 ? bf16_bits_from_f64(d) : f16_bits_from_f64(d)) {}
  template <typename I, typename std::enable_if<std::is_integral<I>::value, int>::type = 0>
  /// The integer v, converted to double and rounded once to the nearest value.
  REMORA_HALF_FN explicit half_storage(I v) : half_storage(double(v)) {}
  /// The exact value as a float.
  REMORA_HALF_FN operator float() const { return IsBf16 ? f32_from_bf16_bits(bits) : f32_from_f16_bits(bits); }
  /// Adds v in float and rounds the sum once.
  REMORA_HALF_FN half_storage& operator+=(float v) { return *this = half_storage(float(*this) + v); }
  /// Subtracts v in float and rounds the difference once.
  REMORA_HALF_FN half_storage& operator-=(float v) { return *this = half_storage(float(*this) - v); }
  /// Multiplies by v in float and rounds the product once.
  REMORA_HALF_FN half_storage& operator*=(float v) { return *this = half_storage(float(*this) * v); }
  /// Divides by v in float and rounds the quotient once.
  REMORA_HALF_FN half_storage& operator/=(float v) { return *this = half_storage(float(*this) / v); }
  /// The value whose bits are b (no conversion).
  REMORA_HALF_FN static half_storage from_bits(uint16_t b) {
    half_storage h;
    h.bits = b;
    return h;
  }
};
/// The storage type of DType::bf16.
using bf16_t = half_storage<true>;
/// The storage type of DType::f16.
using f16_t = half_storage<false>;
static_assert(sizeof(bf16_t) == 2 && sizeof(f16_t) == 2, "16-bit storage types");

/// True for the 16-bit storage types (bf16_t, f16_t).
template <typename T>
struct is_half_storage : std::false_type {};
/// The 16-bit storage types: true.
template <bool B>
struct is_half_storage<half_storage<B>> : std::true_type {};
/// The type a kernel computes one element of T in: float for the 16-bit types,
/// T itself otherwise.
template <typename T>
using compute_t = typename std::conditional<is_half_storage<T>::value, float, T>::type;

}  // namespace remora
