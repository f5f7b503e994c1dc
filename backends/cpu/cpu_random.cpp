// SPDX-License-Identifier: BSD-3-Clause
// CPU backend: fills, Philox random numbers and dropout masks.
#include "cpu_backend.h"
#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#endif

#include <type_traits>

#include "../../core/philox.h"

namespace remora {
namespace cpu_impl {

namespace {

// ---- dropout masks ----
// Element i of a mask at counter offset `off` is kept when word (i / 8) % 4 of
// philox(seed, off + (i / 32) * 8 + i % 8) is below thr = ceil(keep * 2^32)
// (philox::kept, shared with CUDA). A block of 64 elements (one word of keep
// bits) takes 16 counters: two 8-lane streams, one hiding the other's multiply
// latency, each giving 32 elements as 4 vectors (its 4 words) in order. The
// scalar philox, one call per element, was 15% of a training step; the AVX2
// copy runs 8 counters per vector (32x32->64 bit products as two vpmuludq).
#if defined(REMORA_AVX2_ROWS)
// (lo, hi) 32-bit words of x * m per lane: even lanes from one vpmuludq,
// odd lanes from another on the shifted operand, blended back together.
__attribute__((target("avx2"))) inline __m256i mulhilo8(__m256i x, __m256i m, __m256i* h) {
  const __m256i pe = _mm256_mul_epu32(x, m);
  const __m256i po = _mm256_mul_epu32(_mm256_srli_epi64(x, 32), m);
  *h = _mm256_blend_epi32(_mm256_srli_epi64(pe, 32), po, 0xAA);
  return _mm256_blend_epi32(pe, _mm256_slli_epi64(po, 32), 0xAA);
}

// keep[k], k = 0..7: all ones or 0 for elements 8k .. 8k + 7 of the 64-element
// block whose counters start at ctr0 (stream j = k / 4 runs counters
// ctr0 + 8 j + lane, and its word k % 4 gives the vector).
__attribute__((target("avx2"))) inline void philox_keep64_vec(uint64_t seed, uint64_t ctr0,
                                                              uint64_t thr, __m256i* keep) {
  alignas(32) uint32_t lo[16], hi[16];
  for (int l = 0; l < 16; ++l) {
    lo[l] = uint32_t(ctr0 + uint64_t(l));
    hi[l] = uint32_t((ctr0 + uint64_t(l)) >> 32);
  }
  __m256i c0[2], c1[2], c2[2], c3[2];
  for (int j = 0; j < 2; ++j) {
    c0[j] = _mm256_load_si256(reinterpret_cast<const __m256i*>(lo + 8 * j));
    c1[j] = _mm256_load_si256(reinterpret_cast<const __m256i*>(hi + 8 * j));
    c2[j] = c3[j] = _mm256_setzero_si256();
  }
  const __m256i M0 = _mm256_set1_epi32(int(0xD2511F53u)), M1 = _mm256_set1_epi32(int(0xCD9E8D57u));
  uint32_t k0 = uint32_t(seed), k1 = uint32_t(seed >> 32);
  for (int r = 0; r < 10; ++r) {
    const __m256i K0 = _mm256_set1_epi32(int(k0)), K1 = _mm256_set1_epi32(int(k1));
    for (int j = 0; j < 2; ++j) {
      __m256i hi0, hi1;
      const __m256i lo0 = mulhilo8(c0[j], M0, &hi0), lo1 = mulhilo8(c2[j], M1, &hi1);
      c0[j] = _mm256_xor_si256(_mm256_xor_si256(hi1, c1[j]), K0);
      c2[j] = _mm256_xor_si256(_mm256_xor_si256(hi0, c3[j]), K1);
      c1[j] = lo1;
      c3[j] = lo0;
    }
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  if (thr > 0xFFFFFFFFull) {  // keep = 1 (thr = 2^32)
    for (int k = 0; k < 8; ++k) keep[k] = _mm256_set1_epi32(-1);
    return;
  }
  // w < thr unsigned, as a signed compare after flipping the sign bits.
  const __m256i sign = _mm256_set1_epi32(int(0x80000000u));
  const __m256i th = _mm256_set1_epi32(int(uint32_t(thr) ^ 0x80000000u));
  for (int j = 0; j < 2; ++j) {
    const __m256i w[4] = {c0[j], c1[j], c2[j], c3[j]};
    for (int k = 0; k < 4; ++k)
      keep[4 * j + k] = _mm256_cmpgt_epi32(th, _mm256_xor_si256(w[k], sign));
  }
}

// One block of 64 f32 elements of dropout: o = (x ? x : 1) * (kept ? s : +0),
// exactly as the scalar loop computes it; returns the 64 keep bits. With relu,
// x is relu(x) and a bit is set where kept and x > 0.
__attribute__((target("avx2"))) uint64_t dropout64_f32_avx2(uint64_t seed, uint64_t ctr0,
                                                            uint64_t thr, const float* x,
                                                            float* o, float s, bool relu) {
  __m256i keep[8];
  philox_keep64_vec(seed, ctr0, thr, keep);
  const __m256 vs = _mm256_set1_ps(s), zero = _mm256_setzero_ps();
  uint64_t bits = 0;
  for (int k = 0; k < 8; ++k) {
    __m256 kept = _mm256_castsi256_ps(keep[k]);
    const __m256 m = _mm256_and_ps(vs, kept);
    if (x) {
      __m256 xv = _mm256_loadu_ps(x + 8 * k);
      if (relu) {
        const __m256 pos = _mm256_cmp_ps(xv, zero, _CMP_GT_OQ);
        xv = _mm256_and_ps(xv, pos);  // x > 0 ? x : +0 (NaN: 0, as relu's x > 0 test)
        kept = _mm256_and_ps(kept, pos);
      }
      _mm256_storeu_ps(o + 8 * k, _mm256_mul_ps(xv, m));
    } else {
      _mm256_storeu_ps(o + 8 * k, m);
    }
    bits |= uint64_t(uint32_t(_mm256_movemask_ps(kept))) << (8 * k);
  }
  return bits;
}

// kept[e] = all ones or 0 for the 64 elements of the block at counters ctr0 ...
__attribute__((target("avx2"))) void philox_keep64_avx2(uint64_t seed, uint64_t ctr0,
                                                         uint64_t thr, uint32_t* kept) {
  __m256i keep[8];
  philox_keep64_vec(seed, ctr0, thr, keep);
  for (int k = 0; k < 8; ++k) _mm256_storeu_si256(reinterpret_cast<__m256i*>(kept + 8 * k), keep[k]);
}

// dx = dy * (bit ? s : +0) for 64 f32 elements and their word of keep bits.
__attribute__((target("avx2"))) void dropout_backward64_f32_avx2(const float* g, float* o,
                                                                 uint64_t bits, float s) {
  const __m256i lane = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  const __m256 vs = _mm256_set1_ps(s);
  for (int j = 0; j < 8; ++j) {
    const __m256i byte = _mm256_set1_epi32(int((bits >> (8 * j)) & 0xFF));
    const __m256i sel = _mm256_cmpeq_epi32(_mm256_and_si256(byte, lane), lane);
    _mm256_storeu_ps(o + 8 * j, _mm256_mul_ps(_mm256_loadu_ps(g + 8 * j),
                                              _mm256_and_ps(vs, _mm256_castsi256_ps(sel))));
  }
}
#endif

// The scalar block: one Philox call per counter, its 4 words to their elements.
void philox_keep64_baseline(uint64_t seed, uint64_t ctr0, uint64_t thr, uint32_t* kept) {
  for (int c = 0; c < 16; ++c) {
    const philox::U4 r = philox::philox(seed, ctr0 + uint64_t(c));
    for (int w = 0; w < 4; ++w)
      kept[(c / 8) * 32 + w * 8 + c % 8] = uint64_t(r.x[w]) < thr ? ~0u : 0u;
  }
}

}  // namespace

void CpuBackend::fill(DType dt, void* out, int64_t n, double value) {
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    T* o = static_cast<T*>(out);
    const T v = T(value);
    parallel_ranges(n, n > kParallelGrain, [&](int64_t b, int64_t e) {
#pragma omp simd
      for (int64_t i = b; i < e; ++i) o[i] = v;
    });
  });
}

void CpuBackend::arange(DType dt, void* out, int64_t n, double start, double step) {
  dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    T* o = static_cast<T*>(out);
    for (int64_t i = 0; i < n; ++i) o[i] = T(start + double(i) * step);
  });
}

void CpuBackend::uniform(const UniformArgs& args) {
  dispatch_float_half(args.dt, "uniform", [&](auto tag) {
    using T = decltype(tag);
    T* o = static_cast<T*>(args.out);
    parallel_for(args.n, args.n > 4096, [&](int64_t i) {
      T v = T(args.lo +
              (args.hi - args.lo) * philox::uniform(philox::philox(args.seed, args.offset + uint64_t(i))));
      o[i] = v < T(args.hi) ? v : T(args.lo);  // rounding to f32 may reach hi
    });
  });
}

void CpuBackend::normal(const NormalArgs& args) {
  dispatch_float_half(args.dt, "normal", [&](auto tag) {
    using T = decltype(tag);
    T* o = static_cast<T*>(args.out);
    parallel_for(args.n, args.n > 4096, [&](int64_t i) {
      o[i] = T(args.mean + args.std * philox::normal(philox::philox(args.seed, args.offset + uint64_t(i))));
    });
  });
}

namespace {
// o[i] = (x ? x[i] : 1) * (kept(i) ? scale : 0), kept as philox::kept at
// counter offset `offset`: the mask of bernoulli_mask, or dropout's x * mask in
// the same pass; bits (when given) gets bit i % 64 of word i / 64 set where
// element i is kept. Blocks of 64 elements (16 counters, one word of bits); a
// parallel task takes 64 blocks, the tail (< 64) runs serially after.
template <typename T>
void keep_mask(const T* x, T* o, uint64_t* bits, int64_t n, double keep, double scale, uint64_t seed,
               uint64_t offset, bool relu = false) {
  const bool avx2 = use_avx2();
  const uint64_t thr = philox::keep_threshold(keep);  // ceil(keep * 2^32)
  using C = compute_t<T>;  // the scale stays f32 for the 16-bit types
  const C s = C(scale), z = C(0);
  const int64_t nb = n / 64;
  constexpr int64_t kBlocksPerTask = 64;
  const int64_t tasks = (nb + kBlocksPerTask - 1) / kBlocksPerTask;
  parallel_for(tasks, n > kParallelGrain, [&](int64_t t) {
    const int64_t b1 = std::min(nb, (t + 1) * kBlocksPerTask);
    for (int64_t b = t * kBlocksPerTask; b < b1; ++b) {
      const uint64_t ctr0 = offset + uint64_t(b * 16);  // philox::keep_counter(offset, 64 b)
#if defined(REMORA_AVX2_ROWS)
      if constexpr (std::is_same<T, float>::value)
        if (avx2) {  // the whole block in vector registers
          const uint64_t w = dropout64_f32_avx2(seed, ctr0, thr, x ? x + b * 64 : nullptr, o + b * 64, s, relu);
          if (bits) bits[b] = w;
          continue;
        }
#endif
      uint32_t kept[64];
#if defined(REMORA_AVX2_ROWS)
      if (avx2)
        philox_keep64_avx2(seed, ctr0, thr, kept);
      else
#endif
        philox_keep64_baseline(seed, ctr0, thr, kept);
      if (x && relu) {
        for (int l = 0; l < 64; ++l) {
          const C v = C(x[b * 64 + l]);
          const bool pos = v > z;
          kept[l] = pos ? kept[l] : 0u;
          o[b * 64 + l] = T((pos ? v : z) * (kept[l] ? s : z));
        }
      } else if (x) {
        for (int l = 0; l < 64; ++l) o[b * 64 + l] = x[b * 64 + l] * (kept[l] ? s : z);
      } else {
        for (int l = 0; l < 64; ++l) o[b * 64 + l] = kept[l] ? s : z;
      }
      if (bits) {
        uint64_t w = 0;
        for (int l = 0; l < 64; ++l) w |= uint64_t(kept[l] & 1u) << l;
        bits[b] = w;
      }
    }
  });
  if (bits && nb * 64 < n) bits[nb] = 0;
  for (int64_t i = nb * 64; i < n; ++i) {
    bool k = philox::kept(seed, offset, uint64_t(i), thr);
    const C m = k ? s : z;
    if (x && relu) {
      const C v = C(x[i]);
      k = k && v > z;
      o[i] = T((v > z ? v : z) * m);
    } else {
      o[i] = x ? T(x[i] * m) : T(m);
    }
    if (bits && k) bits[i / 64] |= uint64_t(1) << (i % 64);
  }
}
}  // namespace

void CpuBackend::bernoulli_mask(const BernoulliMaskArgs& a) {
  dispatch_float_half(a.dt, "bernoulli_mask", [&](auto tag) {
    using T = decltype(tag);
    keep_mask<T>(nullptr, static_cast<T*>(a.out), nullptr, a.n, a.keep, a.scale, a.seed, a.offset);
  });
}

void CpuBackend::dropout_forward(const DropoutArgs& args) {
  const BernoulliMaskArgs& m = args.mask;
  dispatch_float_half(m.dt, "dropout_forward", [&](auto tag) {
    using T = decltype(tag);
    keep_mask<T>(static_cast<const T*>(args.x), static_cast<T*>(m.out), args.bits, m.n, m.keep, m.scale,
                 m.seed, m.offset, args.relu);
  });
}

void CpuBackend::dropout_backward(const DropoutBackwardArgs& args) {
  dispatch_float_half(args.dt, "dropout_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* g = static_cast<const T*>(args.dy);
    T* o = static_cast<T*>(args.dx);
    using C = compute_t<T>;
    const C s = C(args.scale), z = C(0);
    const int64_t words = (args.n + 63) / 64;
    const bool avx2 = use_avx2();
    parallel_for(words, args.n > kParallelGrain, [&](int64_t w) {
      const uint64_t b = args.bits[w];
      const int64_t i0 = w * 64, i1 = std::min(args.n, i0 + 64);
#if defined(REMORA_AVX2_ROWS)
      if constexpr (std::is_same<T, float>::value)
        if (avx2 && i1 - i0 == 64) {
          dropout_backward64_f32_avx2(g + i0, o + i0, b, s);
          return;
        }
#endif
      for (int64_t i = i0; i < i1; ++i) o[i] = g[i] * ((b >> (i - i0)) & 1 ? s : z);
    });
  });
}

}  // namespace cpu_impl
}  // namespace remora
