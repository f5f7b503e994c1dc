// SPDX-License-Identifier: BSD-3-Clause
// The f32 register-tiled products of the CPU backend (cpu_sgemm.cpp), shared
// by the fused attention (cpu_attention.cpp: its block products with per-tile
// causal limits) and the backend's f32 gemm on AVX-512 CPUs (cpu_backend.cpp).
// Not included outside backends/cpu/.
#pragma once
#include <cstdint>

namespace remora {
namespace cpu_impl {

constexpr int64_t kTileKC = 256;  // depth per pass over a tile
constexpr int64_t kTileMR = 6;    // rows of A per register tile (the unit of per-tile limits)
constexpr int64_t kTileNR = 16;   // columns of B per packed panel

#if defined(__GNUC__) && defined(__x86_64__)
#define REMORA_SGEMM_TILES 1
// Whether sgemm_tiles runs here (AVX2 + FMA, under REMORA_CPU_ISA's cap).
bool use_sgemm_tiles();

// C[m x n] (ldc) = alpha A B + beta C with A(i, p) = a[i a_rs + p a_cs] and B
// in panels of 16 columns: panel t's row p is the 16 floats at b + t b_panel
// + p b_rs. Packed (pack_b, pack_bt: b_panel = 16 k, b_rs = 16, zero past
// column n), or a row-major [k, n] matrix read in place when n is a multiple
// of 16 (b_panel = 16, b_rs = its leading dimension).
// Tile t (rows [6t, 6t + 6)) computes columns [0, tile_n[t]) and depth
// [tile_k0[t], tile_k[t]) (null: from 0, to k); its other columns of C are
// left as they were. beta = 0 never reads C.
void sgemm_tiles(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t a_rs,
                 int64_t a_cs, const float* b, int64_t b_panel, int64_t b_rs, float beta, float* c,
                 int64_t ldc, const int64_t* tile_n, const int64_t* tile_k,
                 const int64_t* tile_k0 = nullptr);
// Packs B(p, j) = b[j ld + p] (the transpose of a row-major [n, k] matrix) as
// sgemm_tiles' panels, zero past column n: 16 k ceil(n / 16) floats.
void pack_bt(int64_t k, int64_t n, const float* b, int64_t ld, float* packed);
// Packs B = b[k, n] (row-major, leading dimension ld) the same way.
void pack_b(int64_t k, int64_t n, const float* b, int64_t ld, float* packed);

// Whether the backend's f32 gemm runs sgemm below instead of OpenBLAS: on an
// AVX-512 CPU where OpenBLAS runs kernels without AVX-512 (a CPU newer than
// the OpenBLAS build, or OPENBLAS_CORETYPE set to an AVX2 set, as on this
// project's machines). There the 6 x 32 tiles run 1.4-2x OpenBLAS's sgemm;
// where OpenBLAS runs its own AVX-512 kernels they are as fast or faster above
// n = 512, so OpenBLAS keeps the gemm (docs/benchmarks.md).
bool use_sgemm();
// Row-major C[m, n] = alpha op(A) op(B) + beta C (op: transposed when ta /
// tb), single-threaded, on sgemm_tiles: B packed into this thread's scratch
// (or read in place when it is row-major with whole panels).
void sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
#endif

}  // namespace cpu_impl
}  // namespace remora
