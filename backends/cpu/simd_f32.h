// SPDX-License-Identifier: BSD-3-Clause
// Explicit f32 vectors for the CPU kernels whose auto-vectorised loops were
// compute-bound (the f32 rows: `omp simd` reductions spill their accumulators
// and reduce them lane by lane at the end of every chunk).
//
// One struct per ISA with the same static members, so that a kernel written
// once against V compiles to AVX2 + FMA (V::W = 8 lanes) and to AVX-512
// (16 lanes). Every member carries its ISA's target attribute and is inlined
// by force, so a kernel using V must itself be compiled for that target
// (cpu_rows_simd.inc: one copy per ISA).
#pragma once

#include "cpu_backend.h"

#if defined(__GNUC__) && defined(__x86_64__)
#define REMORA_SIMD_F32 1
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>

namespace remora {
namespace cpu_impl {
namespace simd {

#define REMORA_SIMD_AVX2 __attribute__((target("avx2,fma"), always_inline)) inline
#define REMORA_SIMD_AVX512 __attribute__((target(REMORA_AVX512_TARGET), always_inline)) inline

// F: W floats. D: the double accumulator of wide sums (add_wide adds every
// lane of an F into it, converted exactly; hsum reduces it to one double).
struct Avx2 {
  using F = __m256;
  using D = __m256d;
  static constexpr int64_t W = 8;
  static REMORA_SIMD_AVX2 F load(const float* p) { return _mm256_loadu_ps(p); }
  static REMORA_SIMD_AVX2 void store(float* p, F v) { _mm256_storeu_ps(p, v); }
  // Non-temporal store; p aligned to 32 bytes.
  static REMORA_SIMD_AVX2 void stream(float* p, F v) { _mm256_stream_ps(p, v); }
  static REMORA_SIMD_AVX2 F set1(float a) { return _mm256_set1_ps(a); }
  static REMORA_SIMD_AVX2 F zero() { return _mm256_setzero_ps(); }
  static REMORA_SIMD_AVX2 F add(F a, F b) { return _mm256_add_ps(a, b); }
  static REMORA_SIMD_AVX2 F sub(F a, F b) { return _mm256_sub_ps(a, b); }
  static REMORA_SIMD_AVX2 F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static REMORA_SIMD_AVX2 F fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }    // a b + c
  static REMORA_SIMD_AVX2 F fnma(F a, F b, F c) { return _mm256_fnmadd_ps(a, b, c); }  // c - a b
  static REMORA_SIMD_AVX2 F div(F a, F b) { return _mm256_div_ps(a, b); }
  static REMORA_SIMD_AVX2 F max(F a, F b) { return _mm256_max_ps(a, b); }  // b if either is NaN
  static REMORA_SIMD_AVX2 F min(F a, F b) { return _mm256_min_ps(a, b); }  // b if either is NaN
  static REMORA_SIMD_AVX2 float hmax(F v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    return _mm_cvtss_f32(_mm_max_ss(m, _mm_shuffle_ps(m, m, 1)));
  }
  // The bits of the lanes as int32 lanes, int32 arithmetic, and back.
  using I = __m256i;
  static REMORA_SIMD_AVX2 I bits(F v) { return _mm256_castps_si256(v); }
  static REMORA_SIMD_AVX2 F from_bits(I v) { return _mm256_castsi256_ps(v); }
  static REMORA_SIMD_AVX2 I set1_i(int32_t a) { return _mm256_set1_epi32(a); }
  static REMORA_SIMD_AVX2 I add_i(I a, I b) { return _mm256_add_epi32(a, b); }
  static REMORA_SIMD_AVX2 I sub_i(I a, I b) { return _mm256_sub_epi32(a, b); }
  static REMORA_SIMD_AVX2 I shl23_i(I a) { return _mm256_slli_epi32(a, 23); }
  static REMORA_SIMD_AVX2 D zero_d() { return _mm256_setzero_pd(); }
  static REMORA_SIMD_AVX2 D add_wide(D acc, F v) {
    acc = _mm256_add_pd(acc, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
    return _mm256_add_pd(acc, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
  }
  static REMORA_SIMD_AVX2 double hsum(D v) {
    const __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
  }
};

struct Avx512 {
  using F = __m512;
  using D = __m512d;
  static constexpr int64_t W = 16;
  static REMORA_SIMD_AVX512 F load(const float* p) { return _mm512_loadu_ps(p); }
  static REMORA_SIMD_AVX512 void store(float* p, F v) { _mm512_storeu_ps(p, v); }
  // Non-temporal store; p aligned to 64 bytes.
  static REMORA_SIMD_AVX512 void stream(float* p, F v) { _mm512_stream_ps(p, v); }
  static REMORA_SIMD_AVX512 F set1(float a) { return _mm512_set1_ps(a); }
  static REMORA_SIMD_AVX512 F zero() { return _mm512_setzero_ps(); }
  static REMORA_SIMD_AVX512 F add(F a, F b) { return _mm512_add_ps(a, b); }
  static REMORA_SIMD_AVX512 F sub(F a, F b) { return _mm512_sub_ps(a, b); }
  static REMORA_SIMD_AVX512 F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static REMORA_SIMD_AVX512 F fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static REMORA_SIMD_AVX512 F fnma(F a, F b, F c) { return _mm512_fnmadd_ps(a, b, c); }
  static REMORA_SIMD_AVX512 F div(F a, F b) { return _mm512_maskz_div_ps(0xFFFF, a, b); }
  static REMORA_SIMD_AVX512 F max(F a, F b) {  // b if either is NaN
    return _mm512_maskz_max_ps(0xFFFF, a, b);
  }
  static REMORA_SIMD_AVX512 F min(F a, F b) {  // b if either is NaN
    return _mm512_maskz_min_ps(0xFFFF, a, b);
  }
  static REMORA_SIMD_AVX512 float hmax(F v) {
    return Avx2::hmax(_mm256_max_ps(_mm512_maskz_extractf32x8_ps(0xFF, v, 0),
                                    _mm512_maskz_extractf32x8_ps(0xFF, v, 1)));
  }
  using I = __m512i;
  static REMORA_SIMD_AVX512 I bits(F v) { return _mm512_castps_si512(v); }
  static REMORA_SIMD_AVX512 F from_bits(I v) { return _mm512_castsi512_ps(v); }
  static REMORA_SIMD_AVX512 I set1_i(int32_t a) { return _mm512_set1_epi32(a); }
  static REMORA_SIMD_AVX512 I add_i(I a, I b) { return _mm512_add_epi32(a, b); }
  static REMORA_SIMD_AVX512 I sub_i(I a, I b) { return _mm512_sub_epi32(a, b); }
  static REMORA_SIMD_AVX512 I shl23_i(I a) { return _mm512_maskz_slli_epi32(0xFFFF, a, 23); }
  static REMORA_SIMD_AVX512 D zero_d() { return _mm512_setzero_pd(); }
  // (The zero-masked forms: GCC 12 warns that the plain ones' undefined
  // pass-through operand is used uninitialised.)
  static REMORA_SIMD_AVX512 D add_wide(D acc, F v) {
    acc = _mm512_add_pd(acc, _mm512_maskz_cvtps_pd(0xFF, _mm512_maskz_extractf32x8_ps(0xFF, v, 0)));
    return _mm512_add_pd(acc,
                         _mm512_maskz_cvtps_pd(0xFF, _mm512_maskz_extractf32x8_ps(0xFF, v, 1)));
  }
  static REMORA_SIMD_AVX512 double hsum(D v) {
    return Avx2::hsum(_mm256_add_pd(_mm512_maskz_extractf64x4_pd(0xF, v, 0),
                                    _mm512_maskz_extractf64x4_pd(0xF, v, 1)));
  }
  // Lane i: (idx[i] & 16 ? b : a)[idx[i] & 15] (idx 64-byte aligned).
  static REMORA_SIMD_AVX512 F permute2(F a, const int32_t* idx, F b) {
    return _mm512_permutex2var_ps(a, _mm512_load_si512(idx), b);
  }
  // Lane i: bit i of m ? b : a.
  static REMORA_SIMD_AVX512 F blend(uint16_t m, F a, F b) { return _mm512_mask_blend_ps(m, a, b); }
};

// The AVX-512 struct's 16 lanes in portable scalar code, lane for lane and in
// the same order of operations (fma a single rounding, max / min returning b
// where either is NaN, the horizontal reductions pairing lanes as the
// intrinsics do), so that the AVX-512 copies' 16-lane indexing and their
// chunking runs on every CPU: REMORA_CPU_ISA=avx512_emulated (cpu_isa()).
// Slow; for the tests.
struct Emu16 {
  struct F { float v[16]; };
  struct D { double v[8]; };
  struct I { int32_t v[16]; };
  static constexpr int64_t W = 16;
#define REMORA_EMU_MAP(expr) \
  F r;                       \
  for (int i = 0; i < 16; ++i) r.v[i] = (expr); \
  return r
  static inline F load(const float* p) { REMORA_EMU_MAP(p[i]); }
  static inline void store(float* p, F v) {
    for (int i = 0; i < 16; ++i) p[i] = v.v[i];
  }
  static inline void stream(float* p, F v) { store(p, v); }
  static inline F set1(float a) { REMORA_EMU_MAP(a); }
  static inline F zero() { REMORA_EMU_MAP(0.0f); }
  static inline F add(F a, F b) { REMORA_EMU_MAP(a.v[i] + b.v[i]); }
  static inline F sub(F a, F b) { REMORA_EMU_MAP(a.v[i] - b.v[i]); }
  static inline F mul(F a, F b) { REMORA_EMU_MAP(a.v[i] * b.v[i]); }
  static inline F fma(F a, F b, F c) { REMORA_EMU_MAP(std::fma(a.v[i], b.v[i], c.v[i])); }
  static inline F fnma(F a, F b, F c) { REMORA_EMU_MAP(std::fma(-a.v[i], b.v[i], c.v[i])); }
  static inline F div(F a, F b) { REMORA_EMU_MAP(a.v[i] / b.v[i]); }
  static inline float max1(float a, float b) { return a > b ? a : b; }  // b if either is NaN
  static inline float min1(float a, float b) { return a < b ? a : b; }  // b if either is NaN
  static inline F max(F a, F b) { REMORA_EMU_MAP(max1(a.v[i], b.v[i])); }
  static inline F min(F a, F b) { REMORA_EMU_MAP(min1(a.v[i], b.v[i])); }
  // As Avx512::hmax: the two halves, then Avx2::hmax's pairing.
  static inline float hmax(F v) {
    float h[8], q[4];
    for (int i = 0; i < 8; ++i) h[i] = max1(v.v[i], v.v[8 + i]);
    for (int i = 0; i < 4; ++i) q[i] = max1(h[i], h[4 + i]);
    return max1(max1(q[0], q[2]), max1(q[1], q[3]));
  }
#undef REMORA_EMU_MAP
  static inline I bits(F v) {
    I r;
    std::memcpy(r.v, v.v, sizeof r.v);
    return r;
  }
  static inline F from_bits(I v) {
    F r;
    std::memcpy(r.v, v.v, sizeof r.v);
    return r;
  }
#define REMORA_EMU_MAP_I(expr) \
  I r;                         \
  for (int i = 0; i < 16; ++i) r.v[i] = (expr); \
  return r
  static inline I set1_i(int32_t a) { REMORA_EMU_MAP_I(a); }
  static inline I add_i(I a, I b) { REMORA_EMU_MAP_I(int32_t(uint32_t(a.v[i]) + uint32_t(b.v[i]))); }
  static inline I sub_i(I a, I b) { REMORA_EMU_MAP_I(int32_t(uint32_t(a.v[i]) - uint32_t(b.v[i]))); }
  static inline I shl23_i(I a) { REMORA_EMU_MAP_I(int32_t(uint32_t(a.v[i]) << 23)); }
#undef REMORA_EMU_MAP_I
  static inline D zero_d() { return D{}; }
  // As Avx512::add_wide: lanes 0..7 into the 8 doubles, then lanes 8..15.
  static inline D add_wide(D acc, F v) {
    for (int i = 0; i < 8; ++i) acc.v[i] += double(v.v[i]);
    for (int i = 0; i < 8; ++i) acc.v[i] += double(v.v[8 + i]);
    return acc;
  }
  static inline F permute2(F a, const int32_t* idx, F b) {
    F r;
    for (int i = 0; i < 16; ++i) r.v[i] = (idx[i] & 16 ? b : a).v[idx[i] & 15];
    return r;
  }
  static inline F blend(uint16_t m, F a, F b) {
    F r;
    for (int i = 0; i < 16; ++i) r.v[i] = (m >> i) & 1 ? b.v[i] : a.v[i];
    return r;
  }
  // As Avx512::hsum: the halves added, then Avx2::hsum's pairing.
  static inline double hsum(D v) {
    double h[4];
    for (int i = 0; i < 4; ++i) h[i] = v.v[i] + v.v[4 + i];
    return (h[0] + h[2]) + (h[1] + h[3]);
  }
};

#undef REMORA_SIMD_AVX2
#undef REMORA_SIMD_AVX512

}  // namespace simd
}  // namespace cpu_impl
}  // namespace remora
#endif
