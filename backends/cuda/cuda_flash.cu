// SPDX-License-Identifier: BSD-3-Clause
// Fused RSA attention on tensor cores: a FlashAttention-2 forward and backward
// (Dao 2023) with f32 outputs and f32 accumulation, head widths D = 32, 64
// and 128. It computes exactly what the reference kernels of
// cuda_attention.cu compute (same bias, key padding, causal skipping, the
// causal window given as numbers, Transformer-XL's positional term, dropout
// counters, fully-masked-row rule, REM epilogue, lse, dS), only the products
// q k^T, P v, dO v^T, P^T dO, dS^T q and dS k (and those of the positional
// term) run on tensor cores. Two operand types (template parameter E):
//   f32   operands rounded to TF32 (10-bit mantissa), m16n16k8; taken only
//         when TF32 is allowed (cuda_tf32(): set_cuda_tf32 /
//         REMORA_CUDA_TF32=1), because TF32 changes the numerics;
//   bf16  q, k, v, pos_q, pos_r and dO given as bf16 (bf16 autocast:
//         RsaFusedProblem::bf16_operands), m16n16k16; P and dS are rounded
//         to bf16 for the products they feed, as FlashAttention does.
// The choice is made in one place, the cuda RsaKernels entries in
// cuda_attention.cu, which call flash_rsa_forward/backward first.
//
// Why nvcuda::wmma (m16n16k8, precision::tf32) rather than inline mma.sync
// PTX: this file was written on a machine without a GPU and could not be
// debugged before its first run. wmma's load/store/mma are documented APIs
// whose fragment layouts the compiler owns; the mma.sync route needs the
// per-lane register layouts of m16n8k8 written by hand, where one wrong index
// is a silent wrong answer. The price: the accumulator layout is opaque, so
// every elementwise step (scale, bias, exp, dropout, the online-softmax
// rescale) goes through a small per-warp tile in shared memory
// (store_matrix_sync, then one lane per column). Those steps cost O(rows x
// tile) per tile against O(rows x tile x D) for the products.
//
// Work split (FA-2): a block of 4 warps (128 threads) owns 64 rows of one
// (b, h); warp w owns 16 of them (one wmma M) and never reads another warp's
// rows, so inside a tile only __syncwarp is needed; __syncthreads guards the
// shared K/V (or Q/dO) tiles, which stream through a cp.async double buffer:
// tile t+1 is in flight while tile t is multiplied.
//   forward     block = 64 query rows; streams K, V tiles of 32 keys; Q lives
//               in registers (tf32 A fragments), O in shared memory (the
//               online-softmax rescale is elementwise); m, l in registers.
//   delta       Di = (1 - g) rowsum(dO * O_att): a warp per row.
//   dK/dV pass  block = 64 keys; streams Q, dO tiles of 32 queries; dK, dV
//               accumulate in wmma accumulator fragments (no rescale needed).
//   dQ pass     block = 64 queries; streams K, V tiles of 32 keys; dQ in
//               fragments; writes dS when the bias needs its gradient.
// The two backward passes are the deterministic split of the reference (no
// atomics).
//
// Transformer-XL's positional term (RsaFusedProblem::pos_q, pos_r; D <= 64):
// score (i, j) gains scale pos_q_i . pos_r_c with c = j + Lq - 1 - i. For a
// warp's 16 query rows iw.. and a 32-key tile j0.., c runs over the 47 rows
// from j0 + Lq - 16 - iw: the warp multiplies its pos_q rows by that band of
// 48 pos_r rows (one [16 x 48] product) and row r, key column l reads the
// band score at column l - r + 15 (a diagonal gather). The 64 rows of a
// block need a band of 96 rows per key tile, and the next tile's band is the
// same shifted by 32 rows, so the forward and dQ passes keep pos_r rows in a
// ring of four 32-row chunks (chunk k = rows Lq - i0 - 64 + 32k; tile t reads
// chunks t, t+1, t+2 and chunk t+3 loads with tile t+1's K and V). The dK/dV
// pass (16 keys jw.. against 32 queries cur..) reads the band rows from
// jw + Lq - 32 - cur: [48 x 32] = band . pos_q_tile^T, key r, query l at band
// row r - l + 31. Gradients: the dQ pass scatters scale dS back onto the band
// (d pos_q_w += [16 x 48] . band), and a third pass owns 64 positional rows:
// for 16 rows c.. and 16 queries i.. the keys j = c - Lq + 1 + i fall in a
// window of 32, so it recomputes S and dP on that [16 x 32] window, keeps the
// diagonal pairs and adds d pos_r_c = scale sum_i dS_ij pos_q_i as one
// [16 x 16] . [16 x D] product (per batch row; ops/ sums over B). No atomics.
// Out-of-range band rows (c < 0 or c >= Lk) are zero-filled, which is the
// reference's "nothing where c >= Lk".
//
// Index conventions (all tiles row-major in shared memory, row stride LD =
// D + 4 floats for [rows][D] tiles and LDT = 32 + 4 for [16][32] scratch):
//   wmma needs 256-bit aligned tile pointers and a stride that is a multiple
//   of 4 floats. Every array below starts at a multiple of 8 floats of the
//   (128-byte aligned) dynamic shared memory; tile pointers step by 8 columns
//   (32 bytes) or by 8 or 16 rows (8 * LD * 4 bytes, a multiple of 32 since
//   LD is a multiple of 4), so all of them are 32-byte aligned.
//   B^T from a row-major [n][D] tile X: the col_major matrix_b fragment at
//   X + n0 * LD + k0 reads element (r, c) = X[(n0 + c) * LD + k0 + r], which
//   is (X^T)[k0 + r][n0 + c].
//
// Causal skipping: when the bias is one [Lq, Lk] matrix for every (b, h), a
// pre-pass finds ext_i = 1 + the last column of row i that is not -inf (as the
// reference does) and also whether every entry before ext_i is exactly 0 (a
// pure causal / padding mask). Then the kernels never read the bias: its value
// is 0 before ext_i and -inf from it on, bit for bit. Tiles at or past the
// largest ext of their rows are skipped, per block and per warp. The same
// pre-pass also keeps the largest ext of each 32-query tile (text), so a block
// finds its extents with a load or two (a warp's 16 rows: one load per lane)
// instead of rescanning ext row by row in every thread. The causal window
// given as numbers (RsaFusedProblem::causal) bounds the same extents: rows up
// to i see keys before i + 1 + Lk - Lq.
//
// Unsupported here (the reference runs, bf16 operands widened to f32 first):
// f64, D other than 32, 64 and 128, the positional term with D = 128, f32
// operands with TF32 off, devices before sm_80, operands not 16-byte aligned
// (cp.async), a device with too little opt-in shared memory (the positional
// term at D = 64 needs 181 KiB with f32 operands: sm_90; 127 KiB with bf16).
//
// tests/flash_emu compiles the kernels of this file as C++ and runs them on
// the CPU (REMORA_FLASH_EMULATED: its emu.h stands in for the CUDA headers,
// cp.async and the shared-memory declaration, and the host side is left out).
#ifndef REMORA_FLASH_EMULATED
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>
#endif

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "../../core/philox.h"
#ifndef REMORA_FLASH_EMULATED
#include "cuda_common.cuh"
#include "cuda_flash.cuh"
// A kernel's dynamic shared memory.
#define REMORA_FLASH_SMEM(name) extern __shared__ __align__(128) float name[]
#endif

// Tensor-core TF32 needs sm_80; device code for older targets compiles to
// empty kernels, which the host entries never launch (they check the device).
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
#define REMORA_FLASH_DEVICE 1
#endif

namespace remora {
namespace cuda {

namespace {

#ifndef REMORA_FLASH_EMULATED
// The stream every kernel of this file runs on (and the memset): the current
// backend's stream, as everywhere in backends/cuda/ (cuda_common.cuh).
cudaStream_t launch_stream() { return stream(); }

std::atomic<int64_t> g_flash_launches{0};
#endif

namespace wmma = nvcuda::wmma;
using bf16 = __nv_bfloat16;

constexpr int kWarps = 4;
constexpr int kFlashThreads = kWarps * 32;  // 128
constexpr int kRows = 16;                   // rows per warp: one wmma M
constexpr int kBlockRows = kWarps * kRows;  // 64 rows (queries or keys) per block
constexpr int kTile = 32;                   // streamed tile: keys, or queries in the dK/dV pass
constexpr int kLdt = kTile + 4;             // row stride of the [16][kTile] per-warp scratch
static_assert(kTile == 32, "the elementwise steps map lane l to column l of a tile");
static_assert(kTile % 16 == 0, "a tile is a whole number of wmma N (16) and K (8) steps");
static_assert(kRows == 16, "a warp's rows are one wmma M (16)");
static_assert(kLdt % 4 == 0 && (kRows * kLdt) % 8 == 0, "wmma stride / 32-byte alignment of scratch");

constexpr int kBand = 48;                   // positional band rows of a warp (47 used)
constexpr int kLdb = kBand + 4;             // row stride of the [16][48] per-warp band scratch
constexpr int kBlockBand = kBlockRows + kTile;  // band rows of a block and a tile (95 used)
constexpr int kLd16 = 16 + 4;               // row stride of [16][16] scratch (positional pass)
static_assert(kLdb % 4 == 0 && (kRows * kLdb) % 8 == 0, "wmma stride / alignment of the band scratch");
static_assert(kLd16 % 4 == 0 && (kRows * kLd16) % 8 == 0, "wmma stride / alignment of [16][16] scratch");
static_assert(kBlockBand == 3 * kTile, "the forward / dQ ring holds a tile's band in three chunks");

// The operand type E of the products: float (TF32 m16n16k8) or bf16
// (m16n16k16), both accumulating in f32. Operand tiles in shared memory hold
// E; scores, accumulators and the elementwise steps are f32 either way. Rows
// of an operand tile are padded by kPad elements (wmma wants a stride that is
// a multiple of 16 bytes; the padding staggers the banks). P, dS and the
// other operands the elementwise steps make are written as E into operand
// scratch, which for f32 is the f32 scratch itself (written in place).
template <class E>
struct Mma;
template <>
struct Mma<float> {
  static constexpr int K = 8;     // wmma K
  static constexpr int kPad = 4;  // elements
  static constexpr bool kF32 = true;
  using A = wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major>;
  using Bc = wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::col_major>;
  using Br = wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major>;
  using C = wmma::fragment<wmma::accumulator, 16, 16, 8, float>;
};
template <>
struct Mma<bf16> {
  static constexpr int K = 16;
  static constexpr int kPad = 8;
  static constexpr bool kF32 = false;
  using A = wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major>;
  using Bc = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major>;
  using Br = wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major>;
  using C = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;
};

// Shared-memory geometry of head width D with operands of type E. Counts are
// in elements of their own type; every array starts at a multiple of 32 bytes.
template <int D, class E>
struct Geo {
  static_assert(D == 32 || D == 64 || D == 128, "the flash kernels take D = 32, 64 or 128");
  using M = Mma<E>;
  static constexpr int LD = D + M::kPad;             // row stride of [rows][D] operand tiles
  static constexpr int LDO = D + 4;                  // row stride of the forward's f32 O rows
  static constexpr int kTileE = kTile * LD;          // one streamed [kTile][D] tile
  static constexpr int kBlockE = kBlockRows * LD;    // one [64][D] block of rows
  static constexpr int kBandE = kBlockBand * LD;     // one [96][D] band (or key window)
  static constexpr int kRingE = 4 * kTileE;          // the ring of four 32-row pos_r chunks
  static constexpr int kOF = kBlockRows * LDO;       // the forward's O accumulators (f32)
  static constexpr int kScratchF = kWarps * kRows * kLdt;      // [4 warps][16][kLdt] f32
  static constexpr int kBandScratchF = kWarps * kRows * kLdb;  // [4 warps][16][kLdb] f32
  static constexpr int kX16F = kWarps * kRows * kLd16;         // [4 warps][16][kLd16] f32
  // Operand scratch strides (the f32 scratch's own for f32) and sizes (0 for f32).
  static constexpr int kLdp = M::kF32 ? kLdt : kTile + M::kPad;
  static constexpr int kLdbp = M::kF32 ? kLdb : kBand + M::kPad;
  static constexpr int kLd16p = M::kF32 ? kLd16 : 16 + M::kPad;
  static constexpr int kPE = M::kF32 ? 0 : kWarps * kRows * kLdp;
  static constexpr int kBandPE = M::kF32 ? 0 : kWarps * kRows * kLdbp;
  static constexpr int kX16E = M::kF32 ? 0 : kWarps * kRows * kLd16p;
  static_assert(LD % 8 == 0 || (M::kF32 && LD % 4 == 0), "wmma ldm: a multiple of 16 bytes");
  static_assert((kTileE * sizeof(E)) % 32 == 0 && (kBlockE * sizeof(E)) % 32 == 0 &&
                    (kBandE * sizeof(E)) % 32 == 0 && (kPE * sizeof(E)) % 32 == 0 &&
                    (kBandPE * sizeof(E)) % 32 == 0 && (kX16E * sizeof(E)) % 32 == 0 && kOF % 8 == 0,
                "every shared array must start 32-byte aligned");
  static constexpr size_t e(size_t n) { return n * sizeof(E); }
  static constexpr size_t f(size_t n) { return n * sizeof(float); }
  // forward: K[2], V[2] tiles, O block (f32), S scratch (f32), P (E); with
  // the positional term also the pos_r ring (E) and the band scratch (f32)
  static constexpr size_t kFwdSmem = e(4 * kTileE + kPE) + f(kOF + kScratchF);
  static constexpr size_t kFwdPosSmem = kFwdSmem + e(kRingE) + f(kBandScratchF);
  // dK/dV: K, V blocks, Q[2], dO[2] tiles (E), two f32 scratches and their E
  // copies; with the positional term also band[2], pos_q[2] tiles (E) and a
  // [48][kLdt] f32 scratch per warp
  static constexpr size_t kDkdvSmem = e(2 * kBlockE + 4 * kTileE + 2 * kPE) + f(2 * kScratchF);
  static constexpr size_t kDkdvPosSmem = kDkdvSmem + e(2 * kBandE + 2 * kTileE) + f(kWarps * kBand * kLdt);
  // dQ: Q, dO blocks, K[2], V[2] tiles (E), two f32 scratches, lse and Di of
  // the 64 rows (f32), the dS operand scratch (E); with the positional term
  // also the ring, the pos_q block (E), the band scratch (f32) and its E copy
  static constexpr size_t kDqSmem = e(2 * kBlockE + 4 * kTileE + kPE) + f(2 * kScratchF + 2 * kBlockRows);
  static constexpr size_t kDqPosSmem = kDqSmem + e(kRingE + kBlockE + kBandPE) + f(kBandScratchF);
  // d pos_r: K, V windows of 96 keys, Q, dO, pos_q tiles, the block's 64
  // positional rows (E), S and dP scratch, the [16][16] scratch, lse and Di
  // of a tile (f32), the [16][16] operand scratch (E)
  static constexpr size_t kDposSmem =
      e(2 * kBandE + 3 * kTileE + kBlockE + kX16E) + f(2 * kScratchF + kX16F + 2 * kTile);
  static constexpr size_t cmax(size_t x, size_t y) { return x > y ? x : y; }
  // The most any pass needs.
  static constexpr size_t need(bool pos) {
    return pos ? cmax(cmax(kFwdPosSmem, kDkdvPosSmem), cmax(kDqPosSmem, kDposSmem))
               : cmax(cmax(kFwdSmem, kDkdvSmem), kDqSmem);
  }
};
// Largest without the positional term: f32, D = 128, dQ pass, 154,112 bytes
// (< 166,912 opt-in on sm_80, < 232,448 on sm_90). With it: f32, D = 64,
// dK/dV pass, 185,344 bytes (sm_90); f32 D = 32, 119,808; bf16 D = 64, 130,048.
static_assert(Geo<128, float>::need(false) <= 166912, "fits an A100's opt-in shared memory");
static_assert(Geo<128, bf16>::need(false) <= 166912, "fits an A100's opt-in shared memory");
static_assert(Geo<64, float>::need(true) <= 232448, "the positional term at D = 64 fits an H100's");
static_assert(Geo<32, float>::need(true) <= 166912, "the positional term at D = 32 fits an A100's");
static_assert(Geo<64, bf16>::need(true) <= 166912, "bf16: the positional term at D = 64 fits an A100's");

struct Args {
  int64_t B, H, Hr, Lq, Lk;
  float scale;
  const float* bias;  // null: none
  int64_t bs0, bs1, bs2, bs3;
  const float* kp;    // [B, Lk] additive key padding, or null
  bool drop;
  double keep;
  uint64_t seed, offset;
  const int* ext;     // [Lq] or null
  const int* impure;  // with ext: nonzero when the bias is not exactly 0 before ext_i
  const int* text;    // with ext: [ceil(Lq / kTile)] the largest ext of each 32-query tile
  const void* pq;     // [B, H, Lq, D] the positional term's queries (operand type), or null
  const void* pr;     // [H, Lk, D] its rows (with pq)
  bool causal;        // the causal window as numbers (RsaFusedProblem::causal, window)
  int64_t window;
};

// f32 <-> the operand type.
__device__ __forceinline__ float to_op(float x, float*) { return x; }
__device__ __forceinline__ bf16 to_op(float x, bf16*) { return __float2bfloat16_rn(x); }
template <class E>
__device__ __forceinline__ E op_of(float x) {
  return to_op(x, static_cast<E*>(nullptr));
}
__device__ __forceinline__ float f32_of(float x) { return x; }
__device__ __forceinline__ float f32_of(bf16 x) { return __bfloat162float(x); }

#ifdef REMORA_FLASH_DEVICE
// A fragment from shared memory; f32 operands are rounded to TF32 first (what
// the tf32 mma expects).
template <class F>
__device__ __forceinline__ void load_op(F& f, const float* p, int ld) {
  wmma::load_matrix_sync(f, p, ld);
#pragma unroll
  for (int t = 0; t < f.num_elements; ++t) f.x[t] = wmma::__float_to_tf32(f.x[t]);
}
template <class F>
__device__ __forceinline__ void load_op(F& f, const bf16* p, int ld) {
  wmma::load_matrix_sync(f, p, ld);
}

#ifndef REMORA_FLASH_EMULATED
// 16 bytes global -> shared, asynchronously; with valid = false the 16 bytes
// are zero-filled and nothing is read (src-size 0).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  const int n = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(n)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
#endif

// Rows [r0, r0 + R) of a contiguous [n][D] matrix g into a shared [R][LD]
// tile, by all 128 threads; rows outside [0, n) are zero-filled (r0 may be
// negative: the positional band's first rows).
template <int D, int R, class E>
__device__ __forceinline__ void load_rows_async(E* s, const E* g, int64_t r0, int64_t n) {
  constexpr int kPer = 16 / int(sizeof(E));  // elements per 16-byte copy
  constexpr int kChunksPerRow = D / kPer;
  constexpr int kChunks = R * kChunksPerRow;
  static_assert(kChunks % kFlashThreads == 0, "every thread issues the same number of copies");
#pragma unroll
  for (int it = 0; it < kChunks / kFlashThreads; ++it) {
    const int c = int(threadIdx.x) + it * kFlashThreads;
    const int r = c / kChunksPerRow, c4 = c % kChunksPerRow;
    const bool ok = r0 + r >= 0 && r0 + r < n;
    cp_async16(s + r * Geo<D, E>::LD + c4 * kPer, ok ? g + (r0 + r) * D + c4 * kPer : g, ok);
  }
}

// 16 rows from row i of a contiguous [n][D] matrix of E into a shared
// [16][ld] tile of E, by the 32 lanes of a warp (rows >= n are 0).
template <int D, class E>
__device__ __forceinline__ void warp_rows(E* s, int ld, const E* g, int64_t i, int64_t n, int lane) {
  for (int e = lane; e < kRows * D; e += 32) {
    const int r = e / D, d = e % D;
    s[r * ld + d] = i + r < n ? g[(i + r) * D + d] : op_of<E>(0.f);
  }
}

// A [16][16 n-block] accumulator out to rows [i, i + 16) (those < n) of a
// contiguous [n][D] f32 matrix at columns 16 nb.., through the warp's f32
// scratch sw ([16][kLdt]); times f.
template <class F>
__device__ __forceinline__ void warp_out(float* out, int D, int64_t i, int64_t n, int nb, const F& c,
                                         float* sw, int lane, float f = 1.f) {
  __syncwarp();
  wmma::store_matrix_sync(sw, c, kLdt, wmma::mem_row_major);
  __syncwarp();
  for (int e = lane; e < kRows * 16; e += 32) {
    const int r = e / 16, d = e % 16;
    if (i + r < n) out[(i + r) * D + nb * 16 + d] = sw[r * kLdt + d] * f;
  }
}

__device__ __forceinline__ float warp_max(float x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}
__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// Whether the causal window (when given as numbers) lets query i see key j:
// the reference's window_sees.
__device__ __forceinline__ bool window_sees(const Args& a, int64_t i, int64_t j) {
  if (!a.causal) return true;
  const int64_t last = i + a.Lk - a.Lq;
  return j <= last && (a.window < 0 || j > last - a.window);
}
// 1 + the last key the causal window lets rows up to i_last see (Lk without it).
__device__ __forceinline__ int64_t causal_end(const Args& a, int64_t i_last) {
  if (!a.causal) return a.Lk;
  return max(int64_t(0), min(i_last, a.Lq - 1) + 1 + a.Lk - a.Lq);
}

// The additive score terms of (b, h, i, j) but the positional one, as the
// reference's score_extra. With a pure mask (pure = true) the bias is 0
// before ext_i and -inf from it on, which is exactly what reading it would give.
__device__ __forceinline__ float score_extra(const Args& a, bool pure, int64_t b, int64_t h,
                                             int64_t i, int64_t j) {
  if (!window_sees(a, i, j)) return -INFINITY;
  float e = 0.f;
  if (a.bias) e += pure ? (j < a.ext[i] ? 0.f : -INFINITY) : a.bias[b * a.bs0 + h * a.bs1 + i * a.bs2 + j * a.bs3];
  if (a.kp) e += a.kp[b * a.Lk + j];
  return e;
}
// The dropout factor of A[b, h, i, j] (1/keep or 0): the reference's counters.
__device__ __forceinline__ float drop_factor(const Args& a, int64_t bh, int64_t i, int64_t j) {
  const uint64_t idx = uint64_t((bh * a.Lq + i) * a.Lk + j);
  return philox::kept(a.seed, a.offset, idx, philox::keep_threshold(a.keep)) ? float(1.0 / a.keep)
                                                                             : 0.f;
}
// The keys that rows see, from the pre-pass's tables (Lk without them) and
// the causal window: the reference's tile_end (the largest ext over a range
// of rows), in one or two loads instead of a loop over the rows.
static_assert(kBlockRows == 2 * kTile, "a 64-row block is two 32-query tiles");
// Over the 32-query tile that starts at row i (a multiple of kTile).
__device__ __forceinline__ int64_t query_tile_end(const Args& a, int64_t i) {
  const int64_t e = a.ext ? int64_t(a.text[i / kTile]) : a.Lk;
  return min(e, causal_end(a, i + kTile - 1));
}
// Over the 64 rows of the block that starts at row i0 (a multiple of kBlockRows).
__device__ __forceinline__ int64_t block_end(const Args& a, int64_t i0) {
  int64_t e = a.Lk;
  if (a.ext) {
    e = a.text[i0 / kTile];
    if (i0 + kTile < a.Lq) e = max(e, int64_t(a.text[i0 / kTile + 1]));
  }
  return min(e, causal_end(a, i0 + kBlockRows - 1));
}
// Over a warp's 16 rows from iw; called by all 32 lanes (lane r < 16 loads row iw + r).
__device__ __forceinline__ int64_t warp_end(const Args& a, int64_t iw, int lane) {
  int64_t e = a.Lk;
  if (a.ext) {
    int x = lane < kRows && iw + lane < a.Lq ? a.ext[iw + lane] : 0;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) x = max(x, __shfl_xor_sync(0xffffffffu, x, o));
    e = x;
  }
  return min(e, causal_end(a, iw + kRows - 1));
}
// The pos_r rows (offset o, a multiple of 8, into the 96-row band of the key
// tile t) in the forward / dQ ring: chunk t + o / 32, slot (t + o / 32) % 4.
template <int D, class E>
__device__ __forceinline__ const E* ring_rows(const E* ring, int t, int o) {
  return ring + ((t + o / kTile) % 4) * Geo<D, E>::kTileE + (o % kTile) * Geo<D, E>::LD;
}
// The band scores B_w [16][48] = A W^T of a warp (f32, stride kLdb): W its
// 48 band rows of key tile t in the forward / dQ ring (from offset band0), A
// its [16][D] pos_q rows, whose k-step kk a(kk) returns as a fragment.
template <int D, class E, class AFn>
__device__ __forceinline__ void band_scores(float* Bw, const E* ring, int t, int band0, AFn&& a) {
  using M = Mma<E>;
#pragma unroll
  for (int n = 0; n < kBand / 16; ++n) {
    const E* W = ring_rows<D>(ring, t, band0 + 16 * n);
    typename M::C c;
    wmma::fill_fragment(c, 0.f);
#pragma unroll
    for (int kk = 0; kk < D / M::K; ++kk) {
      typename M::Bc rb;
      load_op(rb, W + kk * M::K, Geo<D, E>::LD);
      wmma::mma_sync(c, a(kk), rb, c);
    }
    wmma::store_matrix_sync(Bw + n * 16, c, kLdb, wmma::mem_row_major);
  }
}
// acc [16][D] += A [16][KD] B [KD][D]: A an operand scratch (stride lda), B a
// row-major operand tile (stride Geo::LD); acc as D / 16 column blocks.
template <int D, int KD, class E, class C>
__device__ __forceinline__ void mma_rows(C* acc, const E* A, int lda, const E* B) {
  using M = Mma<E>;
#pragma unroll
  for (int kk = 0; kk < KD / M::K; ++kk) {
    typename M::A a;
    load_op(a, A + kk * M::K, lda);
#pragma unroll
    for (int n = 0; n < D / 16; ++n) {
      typename M::Br b;  // B rows K kk.., columns 16n..16n+15
      load_op(b, B + kk * M::K * Geo<D, E>::LD + n * 16, Geo<D, E>::LD);
      wmma::mma_sync(acc[n], a, b, acc[n]);
    }
  }
}
#endif  // REMORA_FLASH_DEVICE

// ---- pre-pass: ext_i and purity of a shared [Lq, Lk] bias (a warp per row) ----
// text[t] (zeroed beforehand) becomes the largest ext of rows 32t .. 32t + 31.
__global__ void k_flash_ext(int64_t Lq, int64_t Lk, const float* bias, int64_t s2, int64_t s3,
                            int* ext, int* impure, int* text) {
  const int64_t row = blockIdx.x * int64_t(blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= Lq) return;
  int64_t last = -1;  // last column that is not -inf
  int64_t ninf = 0;   // -inf entries
  int bad = 0;        // an entry that is neither 0 nor -inf (NaN included)
  for (int64_t j = lane; j < Lk; j += 32) {
    const float v = bias[row * s2 + j * s3];
    const bool neg_inf = isinf(v) && v < 0.f;
    if (neg_inf) ++ninf;
    else last = j;
    if (!neg_inf && v != 0.f) bad = 1;
  }
  for (int o = 16; o > 0; o >>= 1) {
    last = max(last, __shfl_xor_sync(0xffffffffu, last, o));
    ninf += __shfl_xor_sync(0xffffffffu, ninf, o);
    bad |= __shfl_xor_sync(0xffffffffu, bad, o);
  }
  if (lane == 0) {
    ext[row] = int(last + 1);
    atomicMax(text + row / kTile, int(last + 1));
    // Pure: only 0 before ext, and every -inf is at or past ext (no hole).
    if (bad || ninf != Lk - (last + 1)) *impure = 1;
  }
}

// ---- forward ----
template <class E, int D, bool POS>
__global__ void __launch_bounds__(kFlashThreads)
    k_flash_fwd(Args a, const E* Q, const E* K, const E* V, const float* G, const float* Y, float* O,
                float* OR, float* LSE) {
#ifdef REMORA_FLASH_DEVICE
  using Gm = Geo<D, E>;
  using M = Mma<E>;
  constexpr int LD = Gm::LD, LDO = Gm::LDO;
  REMORA_FLASH_SMEM(smem);
  E* Ks = reinterpret_cast<E*>(smem);  // [2][kTile][LD]
  E* Vs = Ks + 2 * Gm::kTileE;         // [2][kTile][LD]
  E* Ps = Vs + 2 * Gm::kTileE;         // bf16: [4][16][kLdp] per-warp probabilities (f32: in Ss)
  float* Os = reinterpret_cast<float*>(Ps + Gm::kPE);  // [64][LDO]: O accumulators, warp w owns rows 16w..
  float* Ss = Os + Gm::kOF;            // [4][16][kLdt]: per-warp scores, then (f32) probabilities
  E* Rr = reinterpret_cast<E*>(Ss + Gm::kScratchF);    // POS: [4][kTile][LD] the ring of pos_r chunks
  float* Bs = reinterpret_cast<float*>(Rr + Gm::kRingE);  // POS: [4][16][kLdb] per-warp band scores
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t bh = blockIdx.y, b = bh / a.H, h = bh % a.H;
  const int64_t i0 = int64_t(blockIdx.x) * kBlockRows;  // the block's first query row
  const int64_t iw = i0 + warp * kRows;                  // the warp's first query row
  const E* q = Q + bh * a.Lq * D;
  const E* k = K + bh * a.Lk * D;
  const E* v = V + bh * a.Lk * D;
  float* Ow = Os + warp * kRows * LDO;  // this warp's [16][LDO] accumulator rows
  float* Sw = Ss + warp * kRows * kLdt; // this warp's [16][kLdt] scratch
  E* Pw = M::kF32 ? reinterpret_cast<E*>(Sw) : Ps + warp * kRows * Gm::kLdp;  // P as an operand
  float* Bw = Bs + warp * kRows * kLdb; // POS: this warp's [16][kLdb] band scores
  const bool pure = a.ext && *a.impure == 0;
  // POS: chunk c of the ring holds pos_r rows cb + 32c ..; the warp's band
  // for tile t starts at offset 48 - 16 warp of the tile's 96 rows.
  const E* prh = POS ? static_cast<const E*>(a.pr) + h * a.Lk * D : nullptr;
  const int64_t cb = a.Lq - i0 - kBlockRows;
  const int band0 = kBand - kRows * warp;

  // The first K/V tile (and its three pos_r chunks) start loading now; Q (and
  // pos_q) go through Ow, as E, into registers.
  const int64_t kend = block_end(a, i0);          // keys any row of the block sees
  const int64_t kend_w = warp_end(a, iw, lane);   // keys any row of this warp sees
  const int ntiles = int((kend + kTile - 1) / kTile);
  if (ntiles > 0) {
    load_rows_async<D, kTile>(Ks, k, 0, a.Lk);
    load_rows_async<D, kTile>(Vs, v, 0, a.Lk);
    if (POS)
      for (int c = 0; c < 3; ++c) load_rows_async<D, kTile>(Rr + c * Gm::kTileE, prh, cb + c * kTile, a.Lk);
  }
  cp_async_commit();
  typename M::A qa[D / M::K];             // Q_w [16][D] as A fragments (16 x K each)
  typename M::A pqa[POS ? D / M::K : 1];  // POS: pos_q_w likewise
  E* stage = reinterpret_cast<E*>(Ow);    // [16][LD] of E fits in [16][LDO] of f32
  for (int pass = 0; pass < (POS ? 2 : 1); ++pass) {
    warp_rows<D>(stage, LD, pass == 0 ? q : static_cast<const E*>(a.pq) + bh * a.Lq * D, iw, a.Lq, lane);
    __syncwarp();
#pragma unroll
    for (int kk = 0; kk < D / M::K; ++kk) {
      if (pass == 0) load_op(qa[kk], stage + kk * M::K, LD);
      else if (POS) load_op(pqa[POS ? kk : 0], stage + kk * M::K, LD);
    }
    __syncwarp();
  }
  for (int e = lane; e < kRows * D; e += 32) Ow[(e / D) * LDO + e % D] = 0.f;
  __syncwarp();

  // Running max and sum of each of the warp's 16 rows; every lane holds all
  // 16 (warp reductions leave the same value in every lane).
  float m[kRows], l[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.f;
  }
  const float scale = a.scale;
  for (int t = 0; t < ntiles; ++t) {
    const int buf = t & 1;
    const int64_t j0 = int64_t(t) * kTile;
    // Prefetch tile t+1 into the other buffer (freed by the trailing
    // __syncthreads of iteration t-1); always commit, so that "all groups but
    // the newest are complete" means "tile t is here".
    if (t + 1 < ntiles) {
      load_rows_async<D, kTile>(Ks + (buf ^ 1) * Gm::kTileE, k, j0 + kTile, a.Lk);
      load_rows_async<D, kTile>(Vs + (buf ^ 1) * Gm::kTileE, v, j0 + kTile, a.Lk);
      // Tile t+1 reads chunks t+1 .. t+3; slot (t+3) % 4 held chunk t-1, last
      // read by tile t-1 (freed by that iteration's trailing __syncthreads).
      if (POS)
        load_rows_async<D, kTile>(Rr + ((t + 3) % 4) * Gm::kTileE, prh, cb + (t + 3) * int64_t(kTile), a.Lk);
    }
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    if (j0 < kend_w) {  // warp-uniform: tiles past the warp's last visible key add nothing
      const E* Kt = Ks + buf * Gm::kTileE;
      const E* Vt = Vs + buf * Gm::kTileE;
      // S_w [16][32] = Q_w K_t^T: N-block n covers keys j0 + 16n .. +15.
#pragma unroll
      for (int n = 0; n < kTile / 16; ++n) {
        typename M::C c;
        wmma::fill_fragment(c, 0.f);
#pragma unroll
        for (int kk = 0; kk < D / M::K; ++kk) {
          typename M::Bc kb;  // (K_t^T)[K kk + r][16n + c] = Kt[(16n + c) * LD + K kk + r]
          load_op(kb, Kt + n * 16 * LD + kk * M::K, LD);
          wmma::mma_sync(c, qa[kk], kb, c);
        }
        wmma::store_matrix_sync(Sw + n * 16, c, kLdt, wmma::mem_row_major);
      }
      // POS: the band scores B_w [16][48] = pos_q_w W^T, W = the warp's 48 band rows.
      if (POS) band_scores<D>(Bw, Rr, t, band0, [&](int kk) -> const typename M::A& { return pqa[POS ? kk : 0]; });
      __syncwarp();
      // Online softmax, lane = key column j = j0 + lane, one row at a time.
      const int64_t j = j0 + lane;
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const int64_t i = iw + r;
        float s = -INFINITY;
        if (j < a.Lk && i < a.Lq) {
          float x = Sw[r * kLdt + lane];
          if (POS) x += Bw[r * kLdb + lane - r + kRows - 1];  // band row c = j + Lq - 1 - i
          s = x * scale + score_extra(a, pure, b, h, i, j);
        }
        const float mnew = fmaxf(m[r], warp_max(s));
        float p = 0.f, corr = 1.f;
        if (mnew != -INFINITY) {  // (while every score so far is -inf nothing changes)
          corr = expf(m[r] - mnew);  // m = -inf gives 0
          p = expf(s - mnew);
        }
        l[r] = l[r] * corr + warp_sum(p);  // l sums the probabilities before dropout
        m[r] = mnew;
        if (a.drop && p > 0.f) p *= drop_factor(a, bh, i, j);
        Pw[r * Gm::kLdp + lane] = op_of<E>(p);
        if (corr != 1.f)
          for (int d = lane; d < D; d += 32) Ow[r * LDO + d] *= corr;
      }
      __syncwarp();
      // O_w [16][D] += P_w [16][32] V_t [32][D].
      typename M::A pa[kTile / M::K];
#pragma unroll
      for (int kk = 0; kk < kTile / M::K; ++kk) load_op(pa[kk], Pw + kk * M::K, Gm::kLdp);
#pragma unroll
      for (int n = 0; n < D / 16; ++n) {
        typename M::C c;
        wmma::load_matrix_sync(c, Ow + n * 16, LDO, wmma::mem_row_major);
#pragma unroll
        for (int kk = 0; kk < kTile / M::K; ++kk) {
          typename M::Br vb;  // V_t rows K kk.., columns 16n..16n+15
          load_op(vb, Vt + kk * M::K * LD + n * 16, LD);
          wmma::mma_sync(c, pa[kk], vb, c);
        }
        wmma::store_matrix_sync(Ow + n * 16, c, LDO, wmma::mem_row_major);
      }
      __syncwarp();
    }
    __syncthreads();  // every warp is done with buffer `buf` before it is refilled
  }
  cp_async_wait<0>();  // (only an empty group can be left)
  __syncwarp();
  // Epilogue, the reference's: a fully masked row (l = 0) outputs 0 and lse = +inf.
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int64_t i = iw + r;
    if (i >= a.Lq) continue;  // warp-uniform
    const bool empty = !(l[r] > 0.f);
    const float inv = empty ? 0.f : 1.f / l[r];
    if (lane == 0) LSE[bh * a.Lq + i] = empty ? INFINITY : m[r] + logf(l[r]);
    float* o = O + (bh * a.Lq + i) * D;
    if (h < a.Hr) {
      const float g = G[h];
      const float* y = Y + ((b * a.Hr + h) * a.Lq + i) * D;
      float* orr = OR + ((b * a.Hr + h) * a.Lq + i) * D;
      for (int d = lane; d < D; d += 32) {
        const float oa = Ow[r * LDO + d] * inv;
        orr[d] = oa;
        o[d] = oa + g * (y[d] - oa);
      }
    } else {
      for (int d = lane; d < D; d += 32) o[d] = Ow[r * LDO + d] * inv;
    }
  }
#endif
}

// ---- backward: Di = (1 - g) rowsum(dO * O_att), a warp per (b, h, i) ----
template <class E>
__global__ void k_flash_delta(Args a, int D, const float* G, const float* O, const float* OR,
                              const E* dO, float* Di) {
  const int64_t n = a.B * a.H * a.Lq;
  const int lane = threadIdx.x % 32;
  const int64_t per_grid = int64_t(gridDim.x) * (blockDim.x / 32);
  for (int64_t t = blockIdx.x * int64_t(blockDim.x / 32) + threadIdx.x / 32; t < n; t += per_grid) {
    const int64_t i = t % a.Lq, bh = t / a.Lq, b = bh / a.H, h = bh % a.H;
    const E* go = dO + t * D;
    const float* oa = h < a.Hr ? OR + ((b * a.Hr + h) * a.Lq + i) * D : O + t * D;
    float s = 0.f;
    for (int d = lane; d < D; d += 32) s += f32_of(go[d]) * oa[d];
    s = __shfl_xor_sync(0xffffffffu, s, 16) + s;
    s = __shfl_xor_sync(0xffffffffu, s, 8) + s;
    s = __shfl_xor_sync(0xffffffffu, s, 4) + s;
    s = __shfl_xor_sync(0xffffffffu, s, 2) + s;
    s = __shfl_xor_sync(0xffffffffu, s, 1) + s;
    if (lane == 0) Di[t] = s * (h < a.Hr ? 1.f - G[h] : 1.f);
  }
}

// ---- backward pass 1: dK, dV for 64 keys, streaming Q and dO tiles ----
// With f = 1 - g (REM heads) or 1, dO_att = f dO, and for every (i, j):
//   p = exp(S_ij - lse_i); dp = f (dO_i . v_j) * drop; ds = p (dp - Di) scale
//   dV_j += p * drop * dO_att_i  (f is applied once at the end)
//   dK_j += ds q_i
template <class E, int D, bool POS>
__global__ void __launch_bounds__(kFlashThreads)
    k_flash_dkdv(Args a, const E* Q, const E* K, const E* V, const float* G, const float* LSE,
                 const float* Di, const E* dO, float* dK, float* dV) {
#ifdef REMORA_FLASH_DEVICE
  using Gm = Geo<D, E>;
  using M = Mma<E>;
  constexpr int LD = Gm::LD;
  REMORA_FLASH_SMEM(smem);
  E* Kb = reinterpret_cast<E*>(smem);  // [64][LD]: the block's keys, warp w reads rows 16w..16w+15
  E* Vb = Kb + Gm::kBlockE;            // [64][LD]
  E* Qs = Vb + Gm::kBlockE;            // [2][kTile][LD]
  E* Gs = Qs + 2 * Gm::kTileE;         // [2][kTile][LD]  dO (not yet times f)
  E* Rb = Gs + 2 * Gm::kTileE;         // POS: [2][96][LD] the tile's band of pos_r rows
  E* PQs = Rb + (POS ? 2 * Gm::kBandE : 0);      // POS: [2][kTile][LD] pos_q tiles
  E* Se = PQs + (POS ? 2 * Gm::kTileE : 0);      // bf16: [4][16][kLdp] P~^T as an operand
  E* De = Se + Gm::kPE;                          // bf16: [4][16][kLdp] dS^T as an operand
  float* St = reinterpret_cast<float*>(De + Gm::kPE);  // [4][16][kLdt]: S^T (f32: then P~^T)
  float* Pt = St + Gm::kScratchF;      // [4][16][kLdt]: dP^T (f32: then dS^T)
  float* Xs = Pt + Gm::kScratchF;      // POS: [4][48][kLdt] per-warp band scores (band row x query)
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t bh = blockIdx.y, b = bh / a.H, h = bh % a.H;
  const int64_t j0 = int64_t(blockIdx.x) * kBlockRows;  // the block's first key
  const int64_t jw = j0 + warp * kRows;                  // the warp's first key
  const E* q = Q + bh * a.Lq * D;
  const E* k = K + bh * a.Lk * D;
  const E* v = V + bh * a.Lk * D;
  const E* go = dO + bh * a.Lq * D;
  const E* Kw = Kb + warp * kRows * LD;
  const E* Vw = Vb + warp * kRows * LD;
  float* Sw = St + warp * kRows * kLdt;
  float* Pw = Pt + warp * kRows * kLdt;
  E* Sew = M::kF32 ? reinterpret_cast<E*>(Sw) : Se + warp * kRows * Gm::kLdp;
  E* Dew = M::kF32 ? reinterpret_cast<E*>(Pw) : De + warp * kRows * Gm::kLdp;
  float* Xw = Xs + warp * kBand * kLdt;
  const bool pure = a.ext && *a.impure == 0;
  const float f = h < a.Hr ? 1.f - G[h] : 1.f;
  const float scale = a.scale;
  // POS: the band of query tile cur starts at pos_r row j0 + Lq - 32 - cur;
  // this warp's 48 rows start 16 warp rows into it.
  const E* prh = POS ? static_cast<const E*>(a.pr) + h * a.Lk * D : nullptr;
  const E* pqb = POS ? static_cast<const E*>(a.pq) + bh * a.Lq * D : nullptr;
  auto load_tile = [&](int slot, int64_t i) {
    load_rows_async<D, kTile>(Qs + slot * Gm::kTileE, q, i, a.Lq);
    load_rows_async<D, kTile>(Gs + slot * Gm::kTileE, go, i, a.Lq);
    if (POS) {
      load_rows_async<D, kTile>(PQs + slot * Gm::kTileE, pqb, i, a.Lq);
      load_rows_async<D, kBlockBand>(Rb + slot * Gm::kBandE, prh, j0 + a.Lq - kTile - i, a.Lk);
    }
  };

  // Query tiles whose rows all end before this block's keys are skipped (the
  // reference's rule). The first tile that sees a key of the block is found
  // once, by the whole block (each thread scans every 128th tile up to its
  // first hit, then a shared minimum); next_tile then steps through the
  // per-tile extents from there. Both are block-uniform.
  const int64_t ntq = (a.Lq + kTile - 1) / kTile;
  const bool skips = a.ext || a.causal;
  __shared__ int first_seen;
  int64_t first = 0;
  if (skips) {
    if (threadIdx.x == 0) first_seen = int(ntq);
    __syncthreads();
    for (int64_t t = threadIdx.x; t < ntq; t += kFlashThreads)
      if (query_tile_end(a, t * kTile) > j0) {
        atomicMin(&first_seen, int(t));
        break;
      }
    __syncthreads();
    first = int64_t(first_seen) * kTile;
  }
  auto next_tile = [&](int64_t from) {
    if (!skips) return from;
    int64_t t = from / kTile;
    while (t < ntq && query_tile_end(a, t * kTile) <= j0) ++t;
    return t * kTile;
  };
  load_rows_async<D, kBlockRows>(Kb, k, j0, a.Lk);
  load_rows_async<D, kBlockRows>(Vb, v, j0, a.Lk);
  int64_t cur = first;
  if (cur < a.Lq) load_tile(0, cur);
  cp_async_commit();  // group: K, V blocks and the first tile

  typename M::C dk[D / 16], dv[D / 16];  // dK_w, dV_w [16][D]: N-block n = columns 16n..16n+15
#pragma unroll
  for (int n = 0; n < D / 16; ++n) {
    wmma::fill_fragment(dk[n], 0.f);
    wmma::fill_fragment(dv[n], 0.f);
  }
  int buf = 0;
  while (cur < a.Lq) {
    const int64_t nxt = next_tile(cur + kTile);
    if (nxt < a.Lq) load_tile(buf ^ 1, nxt);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    if (query_tile_end(a, cur) > jw) {  // warp-uniform: some row of the tile sees a key of this warp
      const E* Qt = Qs + buf * Gm::kTileE;
      const E* Gt = Gs + buf * Gm::kTileE;
      // S^T_w [16 keys][32 queries] = K_w Q_t^T and dP^T_w = V_w dO_t^T.
      {
        typename M::C cs[kTile / 16], cp[kTile / 16];
#pragma unroll
        for (int n = 0; n < kTile / 16; ++n) {
          wmma::fill_fragment(cs[n], 0.f);
          wmma::fill_fragment(cp[n], 0.f);
        }
#pragma unroll
        for (int kk = 0; kk < D / M::K; ++kk) {
          typename M::A ka, va;  // K_w, V_w [16][K] at columns K kk
          load_op(ka, Kw + kk * M::K, LD);
          load_op(va, Vw + kk * M::K, LD);
#pragma unroll
          for (int n = 0; n < kTile / 16; ++n) {
            typename M::Bc qb, gb;  // (Q_t^T)[K kk + r][16n + c] = Qt[(16n + c) * LD + K kk + r]
            load_op(qb, Qt + n * 16 * LD + kk * M::K, LD);
            load_op(gb, Gt + n * 16 * LD + kk * M::K, LD);
            wmma::mma_sync(cs[n], ka, qb, cs[n]);
            wmma::mma_sync(cp[n], va, gb, cp[n]);
          }
        }
#pragma unroll
        for (int n = 0; n < kTile / 16; ++n) {
          wmma::store_matrix_sync(Sw + n * 16, cs[n], kLdt, wmma::mem_row_major);
          wmma::store_matrix_sync(Pw + n * 16, cp[n], kLdt, wmma::mem_row_major);
        }
      }
      // POS: X_w [48][32] = W pos_q_t^T, W = the warp's 48 band rows; key r,
      // query l reads band row r - l + 31 (c = jw + r + Lq - 1 - cur - l).
      if (POS) {
        const E* W = Rb + buf * Gm::kBandE + warp * kRows * LD;
        const E* PQt = PQs + buf * Gm::kTileE;
#pragma unroll
        for (int mb = 0; mb < kBand / 16; ++mb) {
          typename M::C cx[kTile / 16];
#pragma unroll
          for (int n = 0; n < kTile / 16; ++n) wmma::fill_fragment(cx[n], 0.f);
#pragma unroll
          for (int kk = 0; kk < D / M::K; ++kk) {
            typename M::A wa;
            load_op(wa, W + mb * 16 * LD + kk * M::K, LD);
#pragma unroll
            for (int n = 0; n < kTile / 16; ++n) {
              typename M::Bc pb;  // (pos_q_t^T)[K kk + r][16n + c]
              load_op(pb, PQt + n * 16 * LD + kk * M::K, LD);
              wmma::mma_sync(cx[n], wa, pb, cx[n]);
            }
          }
#pragma unroll
          for (int n = 0; n < kTile / 16; ++n)
            wmma::store_matrix_sync(Xw + mb * 16 * kLdt + n * 16, cx[n], kLdt, wmma::mem_row_major);
        }
      }
      __syncwarp();
      // Elementwise, lane = query column i = cur + lane, row r = key jw + r.
      const int64_t i = cur + lane;
      const bool row_ok = i < a.Lq;
      const float lse = row_ok ? LSE[bh * a.Lq + i] : 0.f;
      const float di = row_ok ? Di[bh * a.Lq + i] : 0.f;
#pragma unroll 4
      for (int r = 0; r < kRows; ++r) {
        const int64_t j = jw + r;
        float pd = 0.f, ds = 0.f;
        if (row_ok && j < a.Lk) {
          float x = Sw[r * kLdt + lane];
          if (POS) x += Xw[(r - lane + kTile - 1) * kLdt + lane];
          const float s = x * scale + score_extra(a, pure, b, h, i, j);
          const float p = expf(s - lse);
          if (p > 0.f) {  // masked (p = 0) and NaN rows contribute nothing, as in the reference
            float dp = Pw[r * kLdt + lane] * f;
            pd = p;
            if (a.drop) {
              const float fac = drop_factor(a, bh, i, j);
              pd *= fac;
              dp *= fac;
            }
            ds = p * (dp - di) * scale;
          }
        }
        Sew[r * Gm::kLdp + lane] = op_of<E>(pd);
        Dew[r * Gm::kLdp + lane] = op_of<E>(ds);
      }
      __syncwarp();
      // dV_w += P~^T_w [16][32] dO_t [32][D];  dK_w += dS^T_w [16][32] Q_t [32][D].
      mma_rows<D, kTile>(dv, Sew, Gm::kLdp, Gt);
      mma_rows<D, kTile>(dk, Dew, Gm::kLdp, Qt);
    }
    __syncthreads();  // buffer `buf` is free for the prefetch two tiles on
    cur = nxt;
    buf ^= 1;
  }
  // The K/V group when no tile ran, else an empty one. A block barrier, not a
  // warp one: every thread of the block copied rows of Kb and Vb, so when no
  // tile ran (no __syncthreads since the copies were issued) another warp's
  // copies could still be landing while this warp reuses shared memory below.
  // Reached by every thread (the loop above is block-uniform).
  cp_async_wait<0>();
  __syncthreads();
  // Out through the warp's own f32 scratch, one 16-column block at a time.
#pragma unroll
  for (int n = 0; n < D / 16; ++n) {
    warp_out(dK + bh * a.Lk * D, D, jw, a.Lk, n, dk[n], Sw, lane);
    warp_out(dV + bh * a.Lk * D, D, jw, a.Lk, n, dv[n], Sw, lane, f);
  }
#endif
}

// ---- backward pass 2: dQ (and dS) for 64 queries, streaming K and V tiles ----
//   ds = p (f (dO_i . v_j) drop - Di)  (dS output, unscaled as the reference's)
//   dQ_i += scale ds k_j
//   POS: d pos_q_i += scale ds pos_r_c (when dPQ is given)
template <class E, int D, bool POS>
__global__ void __launch_bounds__(kFlashThreads)
    k_flash_dq(Args a, const E* Q, const E* K, const E* V, const float* G, const float* LSE,
               const float* Di, const E* dO, float* dQ, float* dS, float* dPQ) {
#ifdef REMORA_FLASH_DEVICE
  using Gm = Geo<D, E>;
  using M = Mma<E>;
  constexpr int LD = Gm::LD;
  REMORA_FLASH_SMEM(smem);
  E* Qb = reinterpret_cast<E*>(smem);  // [64][LD]: the block's queries, warp w reads rows 16w..
  E* Gb = Qb + Gm::kBlockE;            // [64][LD]: dO of those rows
  E* Ks = Gb + Gm::kBlockE;            // [2][kTile][LD]
  E* Vs = Ks + 2 * Gm::kTileE;         // [2][kTile][LD]
  E* Se = Vs + 2 * Gm::kTileE;         // bf16: [4][16][kLdp] scale dS as an operand
  E* Rr = Se + Gm::kPE;                // POS: [4][kTile][LD] the ring of pos_r chunks
  E* PQb = Rr + (POS ? Gm::kRingE : 0);          // POS: [64][LD] pos_q of the block's rows
  E* Be = PQb + (POS ? Gm::kBlockE : 0);         // POS, bf16: [4][16][kLdbp] scale dS on the band
  float* Ss = reinterpret_cast<float*>(Be + (POS ? Gm::kBandPE : 0));  // [4][16][kLdt]: S (f32: then scale dS)
  float* Ps = Ss + Gm::kScratchF;      // [4][16][kLdt]: dP
  float* Ls = Ps + Gm::kScratchF;      // [64] lse of the block's rows
  float* Ds = Ls + kBlockRows;         // [64] Di
  float* Bs = Ds + kBlockRows;         // POS: [4][16][kLdb] band scores (f32: then scale dS on the band)
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t bh = blockIdx.y, b = bh / a.H, h = bh % a.H;
  const int64_t i0 = int64_t(blockIdx.x) * kBlockRows;
  const int64_t iw = i0 + warp * kRows;
  const E* q = Q + bh * a.Lq * D;
  const E* k = K + bh * a.Lk * D;
  const E* v = V + bh * a.Lk * D;
  const E* go = dO + bh * a.Lq * D;
  const E* Qw = Qb + warp * kRows * LD;
  const E* Gw = Gb + warp * kRows * LD;
  float* Sw = Ss + warp * kRows * kLdt;
  float* Pw = Ps + warp * kRows * kLdt;
  E* Sew = M::kF32 ? reinterpret_cast<E*>(Sw) : Se + warp * kRows * Gm::kLdp;
  const float* Lw = Ls + warp * kRows;
  const float* Dw = Ds + warp * kRows;
  const E* PQw = PQb + warp * kRows * LD;
  float* Bw = Bs + warp * kRows * kLdb;
  E* Bew = M::kF32 ? reinterpret_cast<E*>(Bw) : Be + warp * kRows * Gm::kLdbp;
  const bool pure = a.ext && *a.impure == 0;
  const float f = h < a.Hr ? 1.f - G[h] : 1.f;
  const float scale = a.scale;
  // POS: the ring as in the forward; d pos_q only when it is asked for.
  const E* prh = POS ? static_cast<const E*>(a.pr) + h * a.Lk * D : nullptr;
  const int64_t cb = a.Lq - i0 - kBlockRows;
  const int band0 = kBand - kRows * warp;
  const bool want_dpq = POS && dPQ != nullptr;

  const int64_t kend = block_end(a, i0);
  const int64_t kend_w = warp_end(a, iw, lane);
  const int ntiles = int((kend + kTile - 1) / kTile);
  load_rows_async<D, kBlockRows>(Qb, q, i0, a.Lq);
  load_rows_async<D, kBlockRows>(Gb, go, i0, a.Lq);
  if (POS) load_rows_async<D, kBlockRows>(PQb, static_cast<const E*>(a.pq) + bh * a.Lq * D, i0, a.Lq);
  if (ntiles > 0) {
    load_rows_async<D, kTile>(Ks, k, 0, a.Lk);
    load_rows_async<D, kTile>(Vs, v, 0, a.Lk);
    if (POS)
      for (int c = 0; c < 3; ++c) load_rows_async<D, kTile>(Rr + c * Gm::kTileE, prh, cb + c * kTile, a.Lk);
  }
  cp_async_commit();
  for (int r = threadIdx.x; r < kBlockRows; r += kFlashThreads) {
    const bool ok = i0 + r < a.Lq;
    Ls[r] = ok ? LSE[bh * a.Lq + i0 + r] : 0.f;
    Ds[r] = ok ? Di[bh * a.Lq + i0 + r] : 0.f;
  }
  // (the first __syncthreads in the loop publishes Ls, Ds)

  typename M::C dq[D / 16];
  typename M::C dpq[POS ? D / 16 : 1];  // POS: d pos_q_w [16][D]
#pragma unroll
  for (int n = 0; n < D / 16; ++n) {
    wmma::fill_fragment(dq[n], 0.f);
    if (POS) wmma::fill_fragment(dpq[POS ? n : 0], 0.f);
  }
  for (int t = 0; t < ntiles; ++t) {
    const int buf = t & 1;
    const int64_t j0 = int64_t(t) * kTile;
    if (t + 1 < ntiles) {
      load_rows_async<D, kTile>(Ks + (buf ^ 1) * Gm::kTileE, k, j0 + kTile, a.Lk);
      load_rows_async<D, kTile>(Vs + (buf ^ 1) * Gm::kTileE, v, j0 + kTile, a.Lk);
      if (POS)  // (as in the forward)
        load_rows_async<D, kTile>(Rr + ((t + 3) % 4) * Gm::kTileE, prh, cb + (t + 3) * int64_t(kTile), a.Lk);
    }
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    if (j0 < kend_w) {  // warp-uniform (skipped entries of dS are zeroed beforehand)
      const E* Kt = Ks + buf * Gm::kTileE;
      const E* Vt = Vs + buf * Gm::kTileE;
      // S_w [16][32] = Q_w K_t^T and dP_w = dO_w V_t^T.
      {
        typename M::C cs[kTile / 16], cp[kTile / 16];
#pragma unroll
        for (int n = 0; n < kTile / 16; ++n) {
          wmma::fill_fragment(cs[n], 0.f);
          wmma::fill_fragment(cp[n], 0.f);
        }
#pragma unroll
        for (int kk = 0; kk < D / M::K; ++kk) {
          typename M::A qa, ga;
          load_op(qa, Qw + kk * M::K, LD);
          load_op(ga, Gw + kk * M::K, LD);
#pragma unroll
          for (int n = 0; n < kTile / 16; ++n) {
            typename M::Bc kb, vb;  // (K_t^T)[K kk + r][16n + c] = Kt[(16n + c) * LD + K kk + r]
            load_op(kb, Kt + n * 16 * LD + kk * M::K, LD);
            load_op(vb, Vt + n * 16 * LD + kk * M::K, LD);
            wmma::mma_sync(cs[n], qa, kb, cs[n]);
            wmma::mma_sync(cp[n], ga, vb, cp[n]);
          }
        }
#pragma unroll
        for (int n = 0; n < kTile / 16; ++n) {
          wmma::store_matrix_sync(Sw + n * 16, cs[n], kLdt, wmma::mem_row_major);
          wmma::store_matrix_sync(Pw + n * 16, cp[n], kLdt, wmma::mem_row_major);
        }
      }
      // POS: the band scores B_w [16][48] = pos_q_w W^T, as in the forward
      // (pos_q_w from shared memory here).
      if (POS)
        band_scores<D>(Bw, Rr, t, band0, [&](int kk) {
          typename M::A pa;
          load_op(pa, PQw + kk * M::K, LD);
          return pa;
        });
      __syncwarp();
      // Elementwise, lane = key column j = j0 + lane, row r = query iw + r
      // (consecutive lanes write consecutive dS entries). POS: row r, lane
      // reads band column x = lane - r + 15 and writes scale ds there (in the
      // band's operand copy); the 16 columns row r does not cover ([0, 15 - r)
      // and [47 - r, 48)) become 0, so the copy is scale dS laid on the band.
      const int64_t j = j0 + lane;
#pragma unroll 4
      for (int r = 0; r < kRows; ++r) {
        const int64_t i = iw + r;
        const int x = lane - r + kRows - 1;
        float ds = 0.f;
        if (i < a.Lq && j < a.Lk) {
          float sc = Sw[r * kLdt + lane];
          if (POS) sc += Bw[r * kLdb + x];
          const float s = sc * scale + score_extra(a, pure, b, h, i, j);
          const float p = expf(s - Lw[r]);
          if (p > 0.f) {
            float dp = Pw[r * kLdt + lane] * f;
            if (a.drop) dp *= drop_factor(a, bh, i, j);
            ds = p * (dp - Dw[r]);
          }
          if (dS) dS[(bh * a.Lq + i) * a.Lk + j] = ds;
        }
        Sew[r * Gm::kLdp + lane] = op_of<E>(ds * scale);
        if (POS) {
          Bew[r * Gm::kLdbp + x] = op_of<E>(ds * scale);
          if (lane < kRows) Bew[r * Gm::kLdbp + (lane < kRows - 1 - r ? lane : lane + kTile)] = op_of<E>(0.f);
        }
      }
      __syncwarp();
      // dQ_w [16][D] += (scale dS_w) [16][32] K_t [32][D].
      mma_rows<D, kTile>(dq, Sew, Gm::kLdp, Kt);
      // POS: d pos_q_w [16][D] += (scale dS on the band) [16][48] W [48][D].
      if (want_dpq) {
#pragma unroll
        for (int kk = 0; kk < kBand / M::K; ++kk) {
          typename M::A ba;
          load_op(ba, Bew + kk * M::K, Gm::kLdbp);
          const E* W = ring_rows<D>(Rr, t, band0 + M::K * kk);
#pragma unroll
          for (int n = 0; n < D / 16; ++n) {
            typename M::Br rb;  // band rows K kk.., columns 16n..16n+15
            load_op(rb, W + n * 16, LD);
            wmma::mma_sync(dpq[POS ? n : 0], ba, rb, dpq[POS ? n : 0]);
          }
        }
      }
    }
    __syncthreads();
  }
  // The Q/dO group when no tile ran, else an empty one. A block barrier, as in
  // the dK/dV pass: when no tile ran nothing else orders every thread's
  // copies before this warp reuses shared memory below.
  cp_async_wait<0>();
  __syncthreads();
#pragma unroll
  for (int n = 0; n < D / 16; ++n) warp_out(dQ + bh * a.Lq * D, D, iw, a.Lq, n, dq[n], Sw, lane);
  if (want_dpq) {
#pragma unroll
    for (int n = 0; n < D / 16; ++n) warp_out(dPQ + bh * a.Lq * D, D, iw, a.Lq, n, dpq[POS ? n : 0], Sw, lane);
  }
#endif
}

// ---- backward pass 3 (the positional term): d pos_r for 64 positional rows ----
// Row c gets scale sum_i dS_ij pos_q_i over the pairs (i, j = c - Lq + 1 + i)
// with 0 <= j < Lk. Warp w owns rows cw = c0 + 16w ..; for a half tile of 16
// queries from i1, its pairs' keys are j = kw + cc + ii (row cw + cc, query
// i1 + ii) with kw = cw - Lq + 1 + i1: a window of 32 keys. So it forms S and
// dP [16 queries][32 keys] on that window and the positional scores
// [16 queries][16 rows] = pos_q_h R_w^T, keeps the diagonal pairs, lays
// E [16 rows][16 queries] = scale dS, and adds E pos_q_h to d pos_r_w. The
// block's 64 rows and a 32-query tile need the keys from c0 - Lq + 1 + q0: a
// window of 96 (warp w, half s reads 32 of them from offset 16 (w + s)).
template <class E, int D>
__global__ void __launch_bounds__(kFlashThreads)
    k_flash_dpos(Args a, const E* Q, const E* K, const E* V, const float* G, const float* LSE,
                 const float* Di, const E* dO, float* dPR) {
#ifdef REMORA_FLASH_DEVICE
  using Gm = Geo<D, E>;
  using M = Mma<E>;
  constexpr int LD = Gm::LD;
  REMORA_FLASH_SMEM(smem);
  E* Kx = reinterpret_cast<E*>(smem);  // [96][LD] the tile's window of keys
  E* Vx = Kx + Gm::kBandE;             // [96][LD]
  E* Qt = Vx + Gm::kBandE;             // [kTile][LD]
  E* Gt = Qt + Gm::kTileE;             // [kTile][LD] dO
  E* Pt = Gt + Gm::kTileE;             // [kTile][LD] pos_q
  E* Rb = Pt + Gm::kTileE;             // [64][LD] the block's positional rows
  E* Xe = Rb + Gm::kBlockE;            // bf16: [4][16][kLd16p] E as an operand
  float* Ss = reinterpret_cast<float*>(Xe + Gm::kX16E);  // [4][16][kLdt] S
  float* Ps = Ss + Gm::kScratchF;      // [4][16][kLdt] dP
  float* Xs = Ps + Gm::kScratchF;      // [4][16][kLd16] positional scores (f32: then E)
  float* Ls = Xs + Gm::kX16F;          // [kTile] lse of the tile's queries
  float* Dt = Ls + kTile;              // [kTile] Di
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t bh = blockIdx.y, b = bh / a.H, h = bh % a.H;
  const int64_t c0 = int64_t(blockIdx.x) * kBlockRows;
  const int64_t cw = c0 + warp * kRows;
  const E* q = Q + bh * a.Lq * D;
  const E* k = K + bh * a.Lk * D;
  const E* v = V + bh * a.Lk * D;
  const E* go = dO + bh * a.Lq * D;
  const E* pqb = static_cast<const E*>(a.pq) + bh * a.Lq * D;
  const E* Rw = Rb + warp * kRows * LD;
  float* Sw = Ss + warp * kRows * kLdt;
  float* Pw = Ps + warp * kRows * kLdt;
  float* Xw = Xs + warp * kRows * kLd16;
  E* Xew = M::kF32 ? reinterpret_cast<E*>(Xw) : Xe + warp * kRows * Gm::kLd16p;
  const bool pure = a.ext && *a.impure == 0;
  const float f = h < a.Hr ? 1.f - G[h] : 1.f;
  const float scale = a.scale;

  load_rows_async<D, kBlockRows>(Rb, static_cast<const E*>(a.pr) + h * a.Lk * D, c0, a.Lk);
  cp_async_commit();
  typename M::C dr[D / 16];
#pragma unroll
  for (int n = 0; n < D / 16; ++n) wmma::fill_fragment(dr[n], 0.f);
  // Queries with a pair in the block: i >= Lq - 1 - c for some c < c0 + 64.
  // Under a causal window of w keys only rows c > Lk - 1 - w have visible
  // pairs (j > i + Lk - Lq - w); a block below that has nothing to add.
  int64_t q0 = max(int64_t(0), a.Lq - kBlockRows - c0);
  if (a.causal && a.window >= 0 && c0 + kBlockRows - 1 <= a.Lk - 1 - a.window) q0 = a.Lq;
  for (; q0 < a.Lq; q0 += kTile) {  // block-uniform
    const int64_t kb = c0 - a.Lq + 1 + q0;  // the window's first key
    load_rows_async<D, kBlockBand>(Kx, k, kb, a.Lk);
    load_rows_async<D, kBlockBand>(Vx, v, kb, a.Lk);
    load_rows_async<D, kTile>(Qt, q, q0, a.Lq);
    load_rows_async<D, kTile>(Gt, go, q0, a.Lq);
    load_rows_async<D, kTile>(Pt, pqb, q0, a.Lq);
    cp_async_commit();
    for (int r = threadIdx.x; r < kTile; r += kFlashThreads) {
      const bool ok = q0 + r < a.Lq;
      Ls[r] = ok ? LSE[bh * a.Lq + q0 + r] : 0.f;
      Dt[r] = ok ? Di[bh * a.Lq + q0 + r] : 0.f;
    }
    cp_async_wait<0>();
    __syncthreads();
    for (int half = 0; half < kTile / kRows; ++half) {
      const E* Qh = Qt + half * kRows * LD;
      const E* Gh = Gt + half * kRows * LD;
      const E* Ph = Pt + half * kRows * LD;
      const int ko = kRows * (warp + half);  // the warp's 32 keys in the window
      {
        typename M::C cs[kTile / 16], cp[kTile / 16], cx;
#pragma unroll
        for (int n = 0; n < kTile / 16; ++n) {
          wmma::fill_fragment(cs[n], 0.f);
          wmma::fill_fragment(cp[n], 0.f);
        }
        wmma::fill_fragment(cx, 0.f);
#pragma unroll
        for (int kk = 0; kk < D / M::K; ++kk) {
          typename M::A qa, ga, pa;
          load_op(qa, Qh + kk * M::K, LD);
          load_op(ga, Gh + kk * M::K, LD);
          load_op(pa, Ph + kk * M::K, LD);
#pragma unroll
          for (int n = 0; n < kTile / 16; ++n) {
            typename M::Bc kb_, vb;  // (K_x^T)[K kk + r][16n + c] = Kx[(ko + 16n + c) * LD + K kk + r]
            load_op(kb_, Kx + (ko + n * 16) * LD + kk * M::K, LD);
            load_op(vb, Vx + (ko + n * 16) * LD + kk * M::K, LD);
            wmma::mma_sync(cs[n], qa, kb_, cs[n]);
            wmma::mma_sync(cp[n], ga, vb, cp[n]);
          }
          typename M::Bc rb;  // (R_w^T)[K kk + r][c] = Rw[c * LD + K kk + r]
          load_op(rb, Rw + kk * M::K, LD);
          wmma::mma_sync(cx, pa, rb, cx);
        }
#pragma unroll
        for (int n = 0; n < kTile / 16; ++n) {
          wmma::store_matrix_sync(Sw + n * 16, cs[n], kLdt, wmma::mem_row_major);
          wmma::store_matrix_sync(Pw + n * 16, cp[n], kLdt, wmma::mem_row_major);
        }
        wmma::store_matrix_sync(Xw, cx, kLd16, wmma::mem_row_major);
      }
      __syncwarp();
      // Pairs: lane takes row cc = lane % 16 and queries ii = lane / 16 + 2u.
      const int cc = lane % kRows;
      const int64_t c = cw + cc;
      float e[kRows / 2];
#pragma unroll
      for (int u = 0; u < kRows / 2; ++u) {
        const int ii = lane / kRows + 2 * u;
        const int64_t i = q0 + half * kRows + ii;
        const int64_t j = c - a.Lq + 1 + i;
        float ds = 0.f;
        if (i < a.Lq && c < a.Lk && j >= 0 && j < a.Lk) {
          const float x = Sw[ii * kLdt + ii + cc] + Xw[ii * kLd16 + cc];
          const float s = x * scale + score_extra(a, pure, b, h, i, j);
          const float p = expf(s - Ls[half * kRows + ii]);
          if (p > 0.f) {
            float dp = Pw[ii * kLdt + ii + cc] * f;
            if (a.drop) dp *= drop_factor(a, bh, i, j);
            ds = p * (dp - Dt[half * kRows + ii]) * scale;
          }
        }
        e[u] = ds;
      }
      __syncwarp();  // every lane has read X before E overwrites it (f32: in place)
#pragma unroll
      for (int u = 0; u < kRows / 2; ++u) Xew[cc * Gm::kLd16p + lane / kRows + 2 * u] = op_of<E>(e[u]);
      __syncwarp();
      // d pos_r_w [16][D] += E [16][16] pos_q_h [16][D].
      mma_rows<D, kRows>(dr, Xew, Gm::kLd16p, Ph);
      __syncwarp();  // the next half overwrites the scratch
    }
    __syncthreads();  // the next tile's copies overwrite the windows
  }
  cp_async_wait<0>();  // (Rb's group, when no tile ran)
  __syncthreads();
#pragma unroll
  for (int n = 0; n < D / 16; ++n) warp_out(dPR + bh * a.Lk * D, D, cw, a.Lk, n, dr[n], Sw, lane);
#endif
}

#ifndef REMORA_FLASH_EMULATED
// ---- host side ----

bool aligned16(const void* p) { return p && reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Whether the tensor-core path takes this problem on the current device:
// f32 operands when TF32 is allowed, bf16 operands (p.bf16_operands) always.
bool takes(DType dt, const RsaFusedProblem& p, std::initializer_list<const void*> streamed) {
  if (dt != DType::f32 || (!p.bf16_operands && !cuda_tf32())) return false;
  if (p.D != 32 && p.D != 64 && p.D != 128) return false;
  const bool pos = p.pos_q != nullptr;
  // The positional term at D = 128 would need more shared memory than any
  // device has (the reference kernels run it).
  if (pos && (p.D > 64 || !aligned16(p.pos_q) || !aligned16(p.pos_r))) return false;
  if (p.Lq < 1 || p.Lk < 1 || p.B * p.H > 65535 || p.Lk > (int64_t(1) << 30) ||
      p.Lq > (int64_t(1) << 30))
    return false;
  for (const void* ptr : streamed)
    if (!aligned16(ptr)) return false;  // cp.async copies 16 bytes at a time
  int dev = 0, major = 0, smem = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess)
    return false;
  size_t need = 0;
  if (p.bf16_operands)
    need = p.D == 32 ? Geo<32, bf16>::need(pos) : p.D == 64 ? Geo<64, bf16>::need(pos) : Geo<128, bf16>::need(pos);
  else
    need = p.D == 32 ? Geo<32, float>::need(pos) : p.D == 64 ? Geo<64, float>::need(pos) : Geo<128, float>::need(pos);
  return major >= 8 && size_t(smem) >= need;
}

template <typename Kern>
void allow_smem(Kern kernel, size_t bytes) {
  REMORA_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
}

// The ext table, the purity flag and the per-query-tile maxima of a bias
// shared by every (b, h), in s (Lq ints, the flag, then ceil(Lq / 32) ints);
// ext = null otherwise.
void prepass(const RsaFusedProblem& p, Scratch& s, const int** ext, const int** impure,
             const int** text) {
  *ext = nullptr;
  *impure = nullptr;
  *text = nullptr;
  if (!p.bias || p.bias_strides[0] != 0 || p.bias_strides[1] != 0) return;
  const int64_t ntq = (p.Lq + kTile - 1) / kTile;
  s.allocate(size_t(p.Lq + 1 + ntq) * sizeof(int));
  int* e = s.as<int>();
  REMORA_CUDA_CHECK(cudaMemsetAsync(e + p.Lq, 0, size_t(1 + ntq) * sizeof(int), launch_stream()));
  k_flash_ext<<<unsigned((p.Lq + 7) / 8), 256, 0, launch_stream()>>>(
      p.Lq, p.Lk, static_cast<const float*>(p.bias), p.bias_strides[2], p.bias_strides[3], e,
      e + p.Lq, e + p.Lq + 1);
  check_launch("rsa_attention flash (mask scan)");
  *ext = e;
  *impure = e + p.Lq;
  *text = e + p.Lq + 1;
}

Args make_args(const RsaFusedProblem& p, const int* ext, const int* impure, const int* text) {
  Args a;
  a.B = p.B; a.H = p.H; a.Hr = p.Hr; a.Lq = p.Lq; a.Lk = p.Lk;
  a.scale = float(p.scale);
  a.bias = static_cast<const float*>(p.bias);
  a.bs0 = p.bias_strides[0]; a.bs1 = p.bias_strides[1];
  a.bs2 = p.bias_strides[2]; a.bs3 = p.bias_strides[3];
  a.kp = static_cast<const float*>(p.kp_bias);
  a.drop = p.dropout > 0;
  a.keep = 1 - p.dropout;
  a.seed = p.seed;
  a.offset = p.offset;
  a.ext = ext;
  a.impure = impure;
  a.text = text;
  a.pq = p.pos_q;
  a.pr = p.pos_r;
  a.causal = p.causal;
  a.window = p.window;
  return a;
}

dim3 grid_rows(int64_t rows, const RsaFusedProblem& p) {
  return dim3(unsigned((rows + kBlockRows - 1) / kBlockRows), unsigned(p.B * p.H));
}

template <class E, int D, bool POS>
void forward_d(const RsaForwardArgs& f, const Args& a) {
  const RsaFusedProblem& p = f.p;
  using Gm = Geo<D, E>;
  constexpr size_t sm = POS ? Gm::kFwdPosSmem : Gm::kFwdSmem;
  allow_smem(k_flash_fwd<E, D, POS>, sm);
  k_flash_fwd<E, D, POS><<<grid_rows(p.Lq, p), kFlashThreads, sm, launch_stream()>>>(
      a, static_cast<const E*>(f.q), static_cast<const E*>(f.k), static_cast<const E*>(f.v),
      static_cast<const float*>(f.gs), static_cast<const float*>(f.Y), static_cast<float*>(f.O),
      static_cast<float*>(f.Oatt_r), static_cast<float*>(f.lse));
  check_launch("rsa_attention flash (forward)");
}

template <class E, int D, bool POS>
void backward_d(const RsaBackwardArgs& g, const Args& a, const float* di) {
  const RsaFusedProblem& p = g.p;
  using Gm = Geo<D, E>;
  const E* q = static_cast<const E*>(g.q);
  const E* k = static_cast<const E*>(g.k);
  const E* v = static_cast<const E*>(g.v);
  const float* gs = static_cast<const float*>(g.gs);
  const float* lse = static_cast<const float*>(g.lse);
  const E* dO = static_cast<const E*>(g.dO);
  constexpr size_t sm1 = POS ? Gm::kDkdvPosSmem : Gm::kDkdvSmem;
  allow_smem(k_flash_dkdv<E, D, POS>, sm1);
  k_flash_dkdv<E, D, POS><<<grid_rows(p.Lk, p), kFlashThreads, sm1, launch_stream()>>>(
      a, q, k, v, gs, lse, di, dO, static_cast<float*>(g.dk), static_cast<float*>(g.dv));
  check_launch("rsa_attention flash (backward, dK dV)");
  constexpr size_t sm2 = POS ? Gm::kDqPosSmem : Gm::kDqSmem;
  allow_smem(k_flash_dq<E, D, POS>, sm2);
  k_flash_dq<E, D, POS><<<grid_rows(p.Lq, p), kFlashThreads, sm2, launch_stream()>>>(
      a, q, k, v, gs, lse, di, dO, static_cast<float*>(g.dq), static_cast<float*>(g.dS),
      POS ? static_cast<float*>(g.dpos_q) : nullptr);
  check_launch("rsa_attention flash (backward, dQ)");
  if constexpr (POS) {
    if (!g.dpos_r) return;
    constexpr size_t sm3 = Gm::kDposSmem;
    allow_smem(k_flash_dpos<E, D>, sm3);
    k_flash_dpos<E, D><<<grid_rows(p.Lk, p), kFlashThreads, sm3, launch_stream()>>>(
        a, q, k, v, gs, lse, di, dO, static_cast<float*>(g.dpos_r));
    check_launch("rsa_attention flash (backward, positional rows)");
  }
}

// The instantiation for the problem's operand type, head width and
// positional term (takes() has declined the positional term at D = 128):
// fn(E*, width, pos).
template <class Fn>
void instantiation(const RsaFusedProblem& p, Fn&& fn) {
  auto by_width = [&](auto* e) {
    const bool pos = p.pos_q != nullptr;
    if (p.D == 32) pos ? fn(e, std::integral_constant<int, 32>{}, std::true_type{})
                       : fn(e, std::integral_constant<int, 32>{}, std::false_type{});
    else if (p.D == 64) pos ? fn(e, std::integral_constant<int, 64>{}, std::true_type{})
                            : fn(e, std::integral_constant<int, 64>{}, std::false_type{});
    else fn(e, std::integral_constant<int, 128>{}, std::false_type{});
  };
  if (p.bf16_operands) by_width(static_cast<bf16*>(nullptr));
  else by_width(static_cast<float*>(nullptr));
}

}  // namespace

bool flash_rsa_forward(const RsaForwardArgs& f) {
  if (!takes(f.dt, f.p, {f.q, f.k, f.v})) return false;
  Scratch ext(0);
  const int *e = nullptr, *impure = nullptr, *text = nullptr;
  prepass(f.p, ext, &e, &impure, &text);
  const Args a = make_args(f.p, e, impure, text);
  instantiation(f.p, [&](auto* t, auto d, auto pos) {
    forward_d<std::remove_pointer_t<decltype(t)>, decltype(d)::value, decltype(pos)::value>(f, a);
  });
  g_flash_launches.fetch_add(1);
  return true;
}

bool flash_rsa_backward(const RsaBackwardArgs& g) {
  if (!takes(g.dt, g.p, {g.q, g.k, g.v, g.dO})) return false;
  const RsaFusedProblem& p = g.p;
  Scratch ext(0);
  const int *e = nullptr, *impure = nullptr, *text = nullptr;
  prepass(p, ext, &e, &impure, &text);
  const Args a = make_args(p, e, impure, text);
  if (g.dS && (e || p.causal))  // skipped tiles (block or warp) leave their dS entries unwritten
    REMORA_CUDA_CHECK(cudaMemsetAsync(g.dS, 0, size_t(p.B * p.H * p.Lq * p.Lk) * sizeof(float),
                                      launch_stream()));
  Scratch di(size_t(p.B * p.H * p.Lq) * sizeof(float));
  const int64_t rows = p.B * p.H * p.Lq;
  const unsigned blocks = unsigned(std::min<int64_t>((rows + 7) / 8, int64_t(1) << 20));
  auto delta = [&](auto* t) {
    using E = std::remove_pointer_t<decltype(t)>;
    k_flash_delta<E><<<blocks, 256, 0, launch_stream()>>>(
        a, int(p.D), static_cast<const float*>(g.gs), static_cast<const float*>(g.O),
        static_cast<const float*>(g.Oatt_r), static_cast<const E*>(g.dO), di.as<float>());
  };
  if (p.bf16_operands) delta(static_cast<bf16*>(nullptr));
  else delta(static_cast<float*>(nullptr));
  check_launch("rsa_attention flash (backward, delta)");
  const float* d = di.as<float>();
  instantiation(p, [&](auto* t, auto w, auto pos) {
    backward_d<std::remove_pointer_t<decltype(t)>, decltype(w)::value, decltype(pos)::value>(g, a, d);
  });
  g_flash_launches.fetch_add(1);
  return true;
}

int64_t flash_rsa_launches() { return g_flash_launches.load(); }
#else
}  // namespace
#endif

}  // namespace cuda
}  // namespace remora
