// SPDX-License-Identifier: BSD-3-Clause
// The f32 register-tiled products (declared in cpu_sgemm.h): the fused
// attention's block products and, on AVX-512 CPUs, the backend's f32 gemm.
//
// sgemm_tiles runs register tiles of 6 rows of A (read in place through its
// two strides, so A and A^T cost the same) against B packed in panels of 16
// columns: on AVX2 + FMA 6 x 16 tiles (12 accumulators), on AVX-512 6 x 32
// tiles over pairs of panels (12 accumulators of 16 floats) with masked edges.
// Both do one FMA per depth step per element of C, in order, then alpha, then
// beta (the AVX2 tile's partial-panel edge leaves that last multiply-add to
// the compiler's contraction, so there the two may differ in the last bit).
// Depth runs in passes of kTileKC, so a tile's rows of A stay in L1 across
// the panels. Per-tile limits (columns, depth) let the attention skip what
// its causal mask hides.
#include "cpu_sgemm.h"

#include <cblas.h>
#include <strings.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>

#include "cpu_backend.h"

#ifdef REMORA_SGEMM_TILES
#include <immintrin.h>

namespace remora {
namespace cpu_impl {

namespace {
#define REMORA_SGEMM_INLINE __attribute__((always_inline)) inline
constexpr int64_t kKC = kTileKC, kMR = kTileMR, kNR = kTileNR;

// C[MR x nv] = alpha sum_p A(i, p) panel[p][0..16) + beta C  (nv <= 16 columns
// stored; the panel's row p at panel + p * b_rs).
template <int MR>
__attribute__((target("avx2,fma"))) REMORA_SGEMM_INLINE void tile(int64_t k, const float* a, int64_t a_rs,
                                                                 int64_t a_cs, const float* panel,
                                                                 int64_t b_rs,
                                                                 float alpha, float beta, float* c,
                                                                 int64_t ldc, int64_t nv) {
  __m256 acc[MR][2];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
  for (int64_t p = 0; p < k; ++p) {
    const __m256 b0 = _mm256_loadu_ps(panel + p * b_rs), b1 = _mm256_loadu_ps(panel + p * b_rs + 8);
    const float* ap = a + p * a_cs;
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const __m256 ai = _mm256_broadcast_ss(ap + i * a_rs);
      acc[i][0] = _mm256_fmadd_ps(ai, b0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(ai, b1, acc[i][1]);
    }
  }
  const __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
  alignas(32) float tmp[kNR];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    float* ci = c + i * ldc;
    __m256 r0 = _mm256_mul_ps(acc[i][0], va), r1 = _mm256_mul_ps(acc[i][1], va);
    if (nv == kNR) {
      if (beta != 0) {
        r0 = _mm256_fmadd_ps(vb, _mm256_loadu_ps(ci), r0);
        r1 = _mm256_fmadd_ps(vb, _mm256_loadu_ps(ci + 8), r1);
      }
      _mm256_storeu_ps(ci, r0);
      _mm256_storeu_ps(ci + 8, r1);
    } else {
      _mm256_store_ps(tmp, r0);
      _mm256_store_ps(tmp + 8, r1);
      for (int64_t j = 0; j < nv; ++j) ci[j] = beta != 0 ? tmp[j] + beta * ci[j] : tmp[j];
    }
  }
}

// The AVX-512 tile: MR x 32 (two adjacent panels, NP = 2) or MR x 16 (the
// last, odd panel, NP = 1), one 16-float vector per row and panel. Where the
// CPU has full-width 512-bit FMA units this does twice the work per
// instruction of the AVX2 tile; the arithmetic per element of C is the same
// (one FMA per p in order, then alpha, then beta). nv <= 16 NP columns of C are stored (masked loads and stores past it).
template <int MR, int NP>
__attribute__((target(REMORA_AVX512_TARGET))) REMORA_SGEMM_INLINE void tile512(
    int64_t k, const float* a, int64_t a_rs, int64_t a_cs, const float* panel, int64_t b_panel,
    int64_t b_rs, float alpha, float beta, float* c, int64_t ldc, int64_t nv) {
  __m512 acc[MR][NP];
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 2
    for (int j = 0; j < NP; ++j) {
      acc[i][j] = _mm512_setzero_ps();
      if (beta != 0)  // C is read at the end: start its lines on their way
        _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc + 16 * j), _MM_HINT_T0);
    }
  for (int64_t p = 0; p < k; ++p) {
    __m512 bv[NP];
#pragma GCC unroll 2
    for (int j = 0; j < NP; ++j) bv[j] = _mm512_loadu_ps(panel + j * b_panel + p * b_rs);
    const float* ap = a + p * a_cs;
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
      const __m512 ai = _mm512_set1_ps(ap[i * a_rs]);
#pragma GCC unroll 2
      for (int j = 0; j < NP; ++j) acc[i][j] = _mm512_fmadd_ps(ai, bv[j], acc[i][j]);
    }
  }
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  __mmask16 m[NP];
#pragma GCC unroll 2
  for (int j = 0; j < NP; ++j) {
    const int64_t v = std::min<int64_t>(16, std::max<int64_t>(0, nv - 16 * j));
    m[j] = v == 16 ? __mmask16(0xFFFF) : __mmask16((1u << v) - 1);
  }
#pragma GCC unroll 8
  for (int i = 0; i < MR; ++i) {
    float* ci = c + i * ldc;
#pragma GCC unroll 2
    for (int j = 0; j < NP; ++j) {
      __m512 r = _mm512_mul_ps(acc[i][j], va);
      if (beta != 0) r = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m[j], ci + 16 * j), r);
      _mm512_mask_storeu_ps(ci + 16 * j, m[j], r);
    }
  }
}

template <int NP>
__attribute__((target(REMORA_AVX512_TARGET))) REMORA_SGEMM_INLINE void tile512_rows(
    int64_t mr, int64_t k, const float* a, int64_t a_rs, int64_t a_cs, const float* panel,
    int64_t b_panel, int64_t b_rs, float alpha, float beta, float* c, int64_t ldc, int64_t nv) {
  switch (mr) {
    case 6: tile512<6, NP>(k, a, a_rs, a_cs, panel, b_panel, b_rs, alpha, beta, c, ldc, nv); break;
    case 5: tile512<5, NP>(k, a, a_rs, a_cs, panel, b_panel, b_rs, alpha, beta, c, ldc, nv); break;
    case 4: tile512<4, NP>(k, a, a_rs, a_cs, panel, b_panel, b_rs, alpha, beta, c, ldc, nv); break;
    case 3: tile512<3, NP>(k, a, a_rs, a_cs, panel, b_panel, b_rs, alpha, beta, c, ldc, nv); break;
    case 2: tile512<2, NP>(k, a, a_rs, a_cs, panel, b_panel, b_rs, alpha, beta, c, ldc, nv); break;
    default: tile512<1, NP>(k, a, a_rs, a_cs, panel, b_panel, b_rs, alpha, beta, c, ldc, nv); break;
  }
}

// tile512 with its 16-float vectors in scalar code, lane for lane in its order
// (one fma per depth step, alpha, then beta's fma; the masked edge), for
// REMORA_CPU_ISA=avx512_emulated: the AVX-512 tiling's indexing on every CPU.
template <int NP>
void tile512_emulated(int64_t mr, int64_t k, const float* a, int64_t a_rs, int64_t a_cs, const float* panel,
                      int64_t b_panel, int64_t b_rs, float alpha, float beta, float* c, int64_t ldc,
                      int64_t nv) {
  float acc[kMR][NP][16] = {};
  for (int64_t p = 0; p < k; ++p)
    for (int64_t i = 0; i < mr; ++i) {
      const float ai = a[p * a_cs + i * a_rs];
      for (int j = 0; j < NP; ++j)
        for (int l = 0; l < 16; ++l)
          acc[i][j][l] = std::fma(ai, panel[j * b_panel + p * b_rs + l], acc[i][j][l]);
    }
  for (int64_t i = 0; i < mr; ++i)
    for (int j = 0; j < NP; ++j)
      for (int64_t l = 0; l < std::min<int64_t>(16, nv - 16 * j); ++l) {
        float& o = c[i * ldc + 16 * j + l];
        const float r = acc[i][j][l] * alpha;
        o = beta != 0 ? std::fma(beta, o, r) : r;
      }
}

// The loop both ISAs share. For each tile of kMR rows of A: its limits
// (columns [0, nl), depth [k0, kl)); C = beta C where it adds nothing; else
// depth passes of kKC (the tile's rows of A stay in L1 across its panels),
// each handed to panels(i0, mr, p0, kk, at, be, ct, nl): the tile's first row
// i0 and row count mr, the pass's depth [p0, p0 + kk), A at (i0, p0), the
// pass's beta and C's row i0.
template <typename Panels>
REMORA_SGEMM_INLINE void tile_passes(int64_t m, int64_t n, int64_t k, const float* a, int64_t a_rs,
                                     int64_t a_cs, float beta, float* c, int64_t ldc,
                                     const int64_t* tile_n, const int64_t* tile_k,
                                     const int64_t* tile_k0, const Panels& panels) {
  const int64_t mt = (m + kMR - 1) / kMR;
  for (int64_t it = 0; it < mt; ++it) {
    const int64_t i0 = it * kMR, mr = std::min(kMR, m - i0);
    const int64_t nl = tile_n ? std::min(n, tile_n[it]) : n;
    const int64_t kl = tile_k ? std::min(k, tile_k[it]) : k;
    const int64_t k0 = tile_k0 ? std::max<int64_t>(0, tile_k0[it]) : 0;
    float* ct = c + i0 * ldc;
    if (kl <= k0) {  // nothing to add: C = beta C
      for (int64_t i = 0; i < mr; ++i)
        for (int64_t j = 0; j < nl; ++j) ct[i * ldc + j] = beta != 0 ? beta * ct[i * ldc + j] : 0.f;
      continue;
    }
    for (int64_t p0 = k0; p0 < kl; p0 += kKC)
      panels(i0, mr, p0, std::min(kKC, kl - p0), a + i0 * a_rs + p0 * a_cs, p0 == k0 ? beta : 1.f,
             ct, nl);
  }
}

// sgemm_tiles on the AVX-512 tiles: panels in pairs.
__attribute__((target(REMORA_AVX512_TARGET))) void sgemm_tiles512(
    int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t a_rs, int64_t a_cs,
    const float* b, int64_t b_panel, int64_t b_rs, float beta, float* c, int64_t ldc,
    const int64_t* tile_n, const int64_t* tile_k, const int64_t* tile_k0) {
  tile_passes(m, n, k, a, a_rs, a_cs, beta, c, ldc, tile_n, tile_k, tile_k0,
              [&](int64_t i0, int64_t mr, int64_t p0, int64_t kk, const float* at, float be,
                  float* ct, int64_t nl) __attribute__((target(REMORA_AVX512_TARGET))) {
                if (a_cs == 1)  // the next tile's rows of A, each on its own pages
                  for (int64_t i = 0; i < std::min(kMR, m - i0 - kMR); ++i)
                    for (int64_t q = 0; q < kk; q += 16)
                      _mm_prefetch(reinterpret_cast<const char*>(at + (kMR + i) * a_rs + q),
                                   _MM_HINT_T0);
                int64_t t = 0;
                for (; (t + 1) * kNR < nl; t += 2)  // two panels with columns to store
                  tile512_rows<2>(mr, kk, at, a_rs, a_cs, b + t * b_panel + p0 * b_rs, b_panel,
                                  b_rs, alpha, be, ct + t * kNR, ldc,
                                  std::min(2 * kNR, nl - t * kNR));
                if (t * kNR < nl)
                  tile512_rows<1>(mr, kk, at, a_rs, a_cs, b + t * b_panel + p0 * b_rs, b_panel,
                                  b_rs, alpha, be, ct + t * kNR, ldc, nl - t * kNR);
              });
}

// sgemm_tiles512 on tile512_emulated.
void sgemm_tiles512_emulated(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t a_rs,
                             int64_t a_cs, const float* b, int64_t b_panel, int64_t b_rs, float beta, float* c,
                             int64_t ldc, const int64_t* tile_n, const int64_t* tile_k, const int64_t* tile_k0) {
  tile_passes(m, n, k, a, a_rs, a_cs, beta, c, ldc, tile_n, tile_k, tile_k0,
              [&](int64_t, int64_t mr, int64_t p0, int64_t kk, const float* at, float be, float* ct, int64_t nl) {
                int64_t t = 0;
                for (; (t + 1) * kNR < nl; t += 2)
                  tile512_emulated<2>(mr, kk, at, a_rs, a_cs, b + t * b_panel + p0 * b_rs, b_panel, b_rs, alpha,
                                      be, ct + t * kNR, ldc, std::min(2 * kNR, nl - t * kNR));
                if (t * kNR < nl)
                  tile512_emulated<1>(mr, kk, at, a_rs, a_cs, b + t * b_panel + p0 * b_rs, b_panel, b_rs, alpha,
                                      be, ct + t * kNR, ldc, nl - t * kNR);
              });
}

}  // namespace

// The contract is in cpu_sgemm.h. AVX2: one 16-column panel per tile.
__attribute__((target("avx2,fma"))) void sgemm_tiles(int64_t m, int64_t n, int64_t k, float alpha,
                                                     const float* a, int64_t a_rs, int64_t a_cs,
                                                     const float* b, int64_t b_panel, int64_t b_rs,
                                                     float beta, float* c, int64_t ldc,
                                                     const int64_t* tile_n, const int64_t* tile_k,
                                                     const int64_t* tile_k0) {
  if (use_avx512())
    return sgemm_tiles512(m, n, k, alpha, a, a_rs, a_cs, b, b_panel, b_rs, beta, c, ldc, tile_n,
                          tile_k, tile_k0);
  if (use_avx512_emulated())
    return sgemm_tiles512_emulated(m, n, k, alpha, a, a_rs, a_cs, b, b_panel, b_rs, beta, c, ldc, tile_n,
                                   tile_k, tile_k0);
  tile_passes(m, n, k, a, a_rs, a_cs, beta, c, ldc, tile_n, tile_k, tile_k0,
              [&](int64_t, int64_t mr, int64_t p0, int64_t kk, const float* at, float be,
                  float* ct, int64_t nl) __attribute__((target("avx2,fma"))) {
                for (int64_t t = 0; t * kNR < nl; ++t) {
                  const float* panel = b + t * b_panel + p0 * b_rs;
                  const int64_t nv = std::min(kNR, nl - t * kNR);
                  float* cc = ct + t * kNR;
                  switch (mr) {
                    case 6: tile<6>(kk, at, a_rs, a_cs, panel, b_rs, alpha, be, cc, ldc, nv); break;
                    case 5: tile<5>(kk, at, a_rs, a_cs, panel, b_rs, alpha, be, cc, ldc, nv); break;
                    case 4: tile<4>(kk, at, a_rs, a_cs, panel, b_rs, alpha, be, cc, ldc, nv); break;
                    case 3: tile<3>(kk, at, a_rs, a_cs, panel, b_rs, alpha, be, cc, ldc, nv); break;
                    case 2: tile<2>(kk, at, a_rs, a_cs, panel, b_rs, alpha, be, cc, ldc, nv); break;
                    default: tile<1>(kk, at, a_rs, a_cs, panel, b_rs, alpha, be, cc, ldc, nv); break;
                  }
                }
              });
}

// Packs B(p, j) = b[j ld + p] (p < k, j < n: the transpose of a row-major
// [n, k] matrix such as K) as sgemm_tiles' panels, zero past column n. Whole
// 8 x 8 blocks go through registers (unpack / shuffle / permute transpose).
__attribute__((target("avx2,fma"))) void pack_bt(int64_t k, int64_t n, const float* b, int64_t ld,
                                                 float* packed) {
  for (int64_t t = 0; t * kNR < n; ++t) {
    float* panel = packed + t * k * kNR;
    const int64_t nv = std::min(kNR, n - t * kNR);
    int64_t p0 = 0;
    if (nv == kNR)
      for (; p0 + 8 <= k; p0 += 8)
        for (int64_t h = 0; h < 2; ++h) {  // columns [8h, 8h + 8) of the panel
          const float* src = b + (t * kNR + 8 * h) * ld + p0;
          __m256 r[8];
          for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + i * ld);
          __m256 u[8];
          for (int i = 0; i < 4; ++i) {
            u[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
            u[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
          }
          __m256 v[8];
          for (int i = 0; i < 2; ++i) {
            v[4 * i + 0] = _mm256_shuffle_ps(u[4 * i], u[4 * i + 2], 0x44);
            v[4 * i + 1] = _mm256_shuffle_ps(u[4 * i], u[4 * i + 2], 0xEE);
            v[4 * i + 2] = _mm256_shuffle_ps(u[4 * i + 1], u[4 * i + 3], 0x44);
            v[4 * i + 3] = _mm256_shuffle_ps(u[4 * i + 1], u[4 * i + 3], 0xEE);
          }
          for (int i = 0; i < 4; ++i) {
            _mm256_store_ps(panel + (p0 + i) * kNR + 8 * h, _mm256_permute2f128_ps(v[i], v[4 + i], 0x20));
            _mm256_store_ps(panel + (p0 + 4 + i) * kNR + 8 * h, _mm256_permute2f128_ps(v[i], v[4 + i], 0x31));
          }
        }
    for (int64_t q = 0; q < kNR; ++q) {  // the rest (and the zero columns past n)
      const float* row = b + (t * kNR + q) * ld;
      for (int64_t p = p0; p < k; ++p) panel[p * kNR + q] = q < nv ? row[p] : 0.f;
    }
  }
}

// Packs B = b[k, n] (row-major, leading dimension ld) as sgemm_tiles' panels,
// zero past column n.
__attribute__((target("avx2,fma"))) void pack_b(int64_t k, int64_t n, const float* b, int64_t ld,
                                                float* packed) {
  for (int64_t t = 0; t * kNR < n; ++t) {
    float* panel = packed + t * k * kNR;
    const int64_t j0 = t * kNR, nv = std::min(kNR, n - j0);
    for (int64_t p = 0; p < k; ++p) {
      const float* row = b + p * ld + j0;
      if (nv == kNR) {
        _mm256_store_ps(panel + p * kNR, _mm256_loadu_ps(row));
        _mm256_store_ps(panel + p * kNR + 8, _mm256_loadu_ps(row + 8));
      } else {
        for (int64_t q = 0; q < kNR; ++q) panel[p * kNR + q] = q < nv ? row[q] : 0.f;
      }
    }
  }
}

bool use_sgemm_tiles() { return use_avx2(); }

// The calling thread's packing space for sgemm's B (cpu_backend.h).
float* pack_scratch(int64_t n) {
  return static_cast<float*>(
      thread_scratch(ScratchUse::gemm_pack, size_t(std::max<int64_t>(n, 1)) * sizeof(float)));
}

// OpenBLAS names its kernel sets by CPU; these three are its AVX-512 ones.
bool blas_runs_avx512() {
  const char* core = openblas_get_corename();
  if (!core) return false;
  for (const char* c : {"skylakex", "cooperlake", "sapphirerapids"})
    if (strcasecmp(core, c) == 0) return true;
  return false;
}

bool use_sgemm() {
  static const bool yes = use_avx512() && !blas_runs_avx512();
  return yes;
}

// Blocks of B that stay in L2 while every row tile of A passes over them: a
// depth pass of kKC rows by kNC columns (384 KiB), as GotoBLAS orders its
// loops (A is not packed: a tile's 6 rows are read in place, once per block).
constexpr int64_t kNC = 384;

void sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  const int64_t a_rs = ta ? 1 : lda, a_cs = ta ? lda : 1;
  if (k == 0 || m == 0 || n == 0)
    return sgemm_tiles(m, n, 0, alpha, a, a_rs, a_cs, b, kNR, ldb, beta, c, ldc, nullptr, nullptr,
                       nullptr);
  const bool in_place = !tb && n % kNR == 0;  // row-major [k, n] with whole panels
  const int64_t nc_max = std::min(n, kNC);
  float* packed = in_place ? nullptr : pack_scratch(kKC * ((nc_max + kNR - 1) / kNR * kNR));
  for (int64_t p0 = 0; p0 < k; p0 += kKC) {
    const int64_t kk = std::min(kKC, k - p0);
    const float be = p0 == 0 ? beta : 1.f;
    for (int64_t n0 = 0; n0 < n; n0 += kNC) {
      const int64_t nc = std::min(kNC, n - n0);
      const float* a0 = a + p0 * a_cs;
      float* c0 = c + n0;
      if (in_place) {
        sgemm_tiles(m, nc, kk, alpha, a0, a_rs, a_cs, b + p0 * ldb + n0, kNR, ldb, be, c0, ldc,
                    nullptr, nullptr, nullptr);
        continue;
      }
      if (tb) pack_bt(kk, nc, b + n0 * ldb + p0, ldb, packed);
      else pack_b(kk, nc, b + p0 * ldb + n0, ldb, packed);
      sgemm_tiles(m, nc, kk, alpha, a0, a_rs, a_cs, packed, kk * kNR, kNR, be, c0, ldc, nullptr,
                  nullptr, nullptr);
    }
  }
}

}  // namespace cpu_impl
}  // namespace remora
#endif  // REMORA_SGEMM_TILES
