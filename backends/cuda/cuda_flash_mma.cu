// SPDX-License-Identifier: BSD-3-Clause
// A FlashAttention-2 forward (Dao 2023) on mma.sync with every tile in
// registers: O = softmax(scale q k^T + key padding, causal) v and
// lse = log sum exp of the scores, for bf16 or f16 q, k, v of [B, H, L, D]
// (contiguous), D = 32, 64 or 128, f32 O and f32 lse. Numerics as FlashAttention:
// products in f32 on tensor cores (m16n8k16), softmax in f32, P rounded to
// the operand type for P v.
//
// Unlike cuda_flash.cu (nvcuda::wmma, whose accumulator layout is opaque, so
// every elementwise step goes through shared memory), the kernel keeps S, P
// and O in the mma accumulator layout and works on them in registers: each
// lane holds, for every 8-column tile of a 16-row tile, columns 2q, 2q + 1 of
// rows g and g + 8 (g = lane / 4, q = lane % 4; the layouts are described in
// tests/flash_emu/emu_mma.h). Hence:
//   - a row max or row sum is a reduction over the four lanes of a quad
//     (shuffles with lane xor 1 and 2); the running sum l stays per lane
//     until the end (every lane of a quad rescales by the same factor);
//   - the S accumulators of two adjacent 8-key tiles are, element for
//     element, the A operand of an m16n8k16 over those 16 keys: P v needs no
//     data movement, only the rounding of P to two 16-bit halves.
//
// Work split: a block of 8 warps (256 threads) owns 128 query rows of one
// (b, h); warp w owns rows 16w .. 16w + 15 (one mma M) and never reads
// another warp's rows. Q comes in once through shared memory (cp.async) and
// then lives in registers as A fragments (ldmatrix.x4). K and V stream
// through shared memory in tiles of 64 keys, two stages: tile t + 1 is in
// flight (cp.async) while tile t is multiplied. K is the B operand of q k^T
// as it is stored ([keys][D] = B^T): ldmatrix.x4 gives the B registers of two
// 8-key tiles; V is the B operand of P v stored [keys][D] = K x N:
// ldmatrix.x4.trans gives those of two 8-column tiles.
//
// Shared memory layout: every tile is [rows][D] of 16-bit elements, a row
// being D / 8 chunks of 16 bytes; chunk c of row r is stored at chunk
// c ^ (r % 8) (D >= 64) or c ^ ((r / 2) % 4) (D = 32, two rows per 128
// bytes), so that the eight row addresses of one ldmatrix matrix fall in
// eight different 16-byte bank groups (no bank conflicts), and a cp.async
// of one chunk still writes 16 contiguous aligned bytes.
//
// Masking: key j of row i is masked when j >= Lk, when causal and
// j > i + Lk - Lq, when causal with a window w >= 0 and j <= i + Lk - Lq - w,
// or when its key padding value (kp[b][j], added to the score) is -inf. A
// block skips the key tiles that no row of it sees (causal skipping), and a
// warp skips the tiles that none of its 16 rows sees. A row that sees no key
// gets O = 0 and lse = +inf.
//
// This path is not called by the attention dispatch (cuda_attention.cu); it
// is reached only through flash_mma_forward(). tests/flash_emu compiles this
// file as C++ (REMORA_FLASH_EMULATED) and runs the kernel lane by lane
// against a float64 reference.
#include "cuda_flash_mma.cuh"

#include <atomic>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <mutex>

#ifndef REMORA_FLASH_EMULATED
#include "cuda_common.cuh"
#endif
#ifndef REMORA_FLASH_SMEM
// A kernel's dynamic shared memory.
#define REMORA_FLASH_SMEM(name) extern __shared__ __align__(128) float name[]
#endif

// mma.sync with bf16 needs sm_80; device code for older targets is empty.
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
#define REMORA_FLASH_MMA_DEVICE 1
#endif

namespace remora {
namespace cuda {
namespace flash_mma {

constexpr int kWarps = 8;
constexpr int kThreads = 32 * kWarps;
constexpr int kRows = 16 * kWarps;  // query rows per block
constexpr int kKeys = 64;           // keys per K / V tile
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

struct FwdArgs {
  int64_t B, H, Lq, Lk;
  float scale;
  const float* kp;  // [B][Lk] added to the scores (0 or -inf), or null
  bool causal;
  int64_t window;  // with causal: keys j <= i + Lk - Lq - window are masked too (< 0: none)
};

// Shared memory of one block: Q [kRows][D], then two stages of K, V [kKeys][D].
template <int D, class E>
struct Geo {
  static_assert(D == 32 || D == 64 || D == 128, "head width 32, 64 or 128");
  static constexpr int kChunks = D / 8;  // 16-byte chunks per row
  static constexpr int kQ = kRows * D;
  static constexpr int kKV = kKeys * D;
  static constexpr size_t kSmem = size_t(kQ + 4 * kKV) * sizeof(E);
};

#ifdef REMORA_FLASH_MMA_DEVICE
// The element offset of chunk c of row r of a swizzled [rows][D] tile.
template <int D>
__device__ __forceinline__ int swz(int r, int c) {
  if (D >= 64) return r * D + 8 * (c ^ (r & 7));
  return r * D + 8 * (c ^ ((r >> 1) & 3));
}

// Rows [r0, r0 + R) of a contiguous [n][D] matrix into a swizzled [R][D]
// tile, by all threads of the block; rows >= n are zero-filled.
template <int D, int R, class E>
__device__ __forceinline__ void load_tile(E* s, const E* g, int64_t r0, int64_t n) {
  constexpr int kC = D / 8, kCopies = R * kC;
  static_assert(kCopies % kThreads == 0, "every thread issues the same number of copies");
#pragma unroll
  for (int it = 0; it < kCopies / kThreads; ++it) {
    const int x = int(threadIdx.x) + it * kThreads, r = x / kC, c = x % kC;
    const bool ok = r0 + r < n;
    mma::cp_async16(s + swz<D>(r, c), ok ? g + (r0 + r) * D + 8 * c : g, ok);
  }
}

__device__ __forceinline__ void store2(float* p, float x, float y) {
#ifdef REMORA_FLASH_EMULATED
  p[0] = x;
  p[1] = y;
#else
  *reinterpret_cast<float2*>(p) = make_float2(x, y);
#endif
}
#endif

template <class E, int D>
__global__ void __launch_bounds__(kThreads)
    k_flash_mma_fwd(FwdArgs a, const E* __restrict__ q, const E* __restrict__ k, const E* __restrict__ v,
                    float* __restrict__ o, float* __restrict__ lse) {
#ifdef REMORA_FLASH_MMA_DEVICE
  using G = Geo<D, E>;
  using Op = mma::Elem<E>;
  constexpr int kNT = kKeys / 8;  // 8-key tiles of S
  constexpr int kDT = D / 8;      // 8-column tiles of O
  REMORA_FLASH_SMEM(smem);
  E* sq = reinterpret_cast<E*>(smem);
  E* skv = sq + G::kQ;  // stage s: K at skv + 2 s kKV, V after it
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32, g = lane >> 2, qd = lane & 3;
  const int64_t bh = blockIdx.y, b = bh / a.H, Lq = a.Lq, Lk = a.Lk;
  const int64_t i0 = int64_t(blockIdx.x) * kRows, iw = i0 + 16 * warp;
  const int64_t off = Lk - Lq;  // causal: row i sees keys j <= i + off
  const E* qg = q + bh * Lq * D;
  const E* kg = k + bh * Lk * D;
  const E* vg = v + bh * Lk * D;

  // The keys any row of the block sees: [jbeg, jend).
  int64_t jbeg = 0, jend = Lk;
  if (a.causal) {
    jend = min(jend, min(i0 + kRows, Lq) + off);
    if (a.window >= 0) jbeg = max(int64_t(0), i0 + off - a.window + 1);
  }
  const int64_t tbeg = jbeg / kKeys, tend = jend > jbeg ? (jend + kKeys - 1) / kKeys : tbeg;

  // Group 0: Q and the first K, V tile.
  load_tile<D, kRows>(sq, qg, i0, Lq);
  if (tbeg < tend) {
    load_tile<D, kKeys>(skv, kg, tbeg * kKeys, Lk);
    load_tile<D, kKeys>(skv + G::kKV, vg, tbeg * kKeys, Lk);
  }
  mma::cp_async_commit();

  const bool live = iw < Lq;  // whether the warp has a row
  const int64_t iw_last = min(iw + 15, Lq - 1);
  const float sl2 = a.scale * kLog2e;  // scores in log2 units: exp2 in place of exp
  uint32_t qa[D / 16][4];
  float oacc[kDT][4];
#pragma unroll
  for (int dt = 0; dt < kDT; ++dt)
#pragma unroll
    for (int e = 0; e < 4; ++e) oacc[dt][e] = 0.f;
  // Per row of this lane (g, g + 8): running max (log2 units) and this lane's
  // part of the running sum.
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};

  for (int64_t t = tbeg; t < tend; ++t) {
    const int st = int((t - tbeg) & 1);
    if (t + 1 < tend) {
      E* nxt = skv + 2 * (st ^ 1) * G::kKV;
      load_tile<D, kKeys>(nxt, kg, (t + 1) * kKeys, Lk);
      load_tile<D, kKeys>(nxt + G::kKV, vg, (t + 1) * kKeys, Lk);
    }
    mma::cp_async_commit();
    mma::cp_async_wait<1>();  // tile t (and Q) are in shared memory, for this thread
    __syncthreads();          // ... and for every thread

    if (t == tbeg && live) {
      // Q's A fragments: matrices top-left, bottom-left, top-right,
      // bottom-right of each 16 x 16 block (rows 16w.., columns 16ks..).
#pragma unroll
      for (int ks = 0; ks < D / 16; ++ks)
        mma::ldmatrix_x4(qa[ks], sq + swz<D>(16 * warp + (lane & 7) + 8 * ((lane >> 3) & 1), 2 * ks + (lane >> 4)));
    }
    const E* sk = skv + 2 * st * G::kKV;
    const E* sv = sk + G::kKV;
    const int64_t j0 = t * kKeys;
    bool skip = !live;
    if (a.causal) {
      skip = skip || j0 > iw_last + off;
      if (a.window >= 0) skip = skip || j0 + kKeys - 1 <= iw + off - a.window;
    }
    if (!skip) {
      // S = Q K^T: for each 16-key pair of tiles, ldmatrix.x4 gives
      // (keys 0..7, d 0..7), (keys 0..7, d 8..15), (keys 8..15, d 0..7),
      // (keys 8..15, d 8..15): the B registers of both 8-key tiles.
      float s[kNT][4];
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[nt][e] = 0.f;
#pragma unroll
      for (int ks = 0; ks < D / 16; ++ks)
#pragma unroll
        for (int np = 0; np < kNT / 2; ++np) {
          uint32_t r[4];
          mma::ldmatrix_x4(r, sk + swz<D>(16 * np + (lane & 7) + 8 * (lane >> 4), 2 * ks + ((lane >> 3) & 1)));
          const uint32_t b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
          Op::mma(s[2 * np], qa[ks], b0, s[2 * np]);
          Op::mma(s[2 * np + 1], qa[ks], b1, s[2 * np + 1]);
        }

      // Scale and mask (element e: row g + 8 (e / 2), key 8 nt + 2 qd + e % 2);
      // the tile's row maxima.
      float mx[2] = {m[0], m[1]};
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int64_t i = iw + g + 8 * (e >> 1), j = j0 + 8 * nt + 2 * qd + (e & 1);
          bool masked = j >= Lk;
          if (a.causal) masked = masked || j > i + off || (a.window >= 0 && j <= i + off - a.window);
          float x = s[nt][e] * sl2;
          if (!masked && a.kp) x += a.kp[b * Lk + j] * kLog2e;
          s[nt][e] = masked ? -INFINITY : x;
          mx[e >> 1] = fmaxf(mx[e >> 1], s[nt][e]);
        }
      float alpha[2], mu[2], sum[2] = {0.f, 0.f};
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
        mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
        mu[r] = mx[r] == -INFINITY ? 0.f : mx[r];  // a row that sees nothing yet: exp2(-inf) = 0
        alpha[r] = exp2f(m[r] - mu[r]);
        m[r] = mx[r];
      }
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          s[nt][e] = exp2f(s[nt][e] - mu[e >> 1]);
          sum[e >> 1] += s[nt][e];
        }
#pragma unroll
      for (int r = 0; r < 2; ++r) l[r] = l[r] * alpha[r] + sum[r];
#pragma unroll
      for (int dt = 0; dt < kDT; ++dt)
#pragma unroll
        for (int e = 0; e < 4; ++e) oacc[dt][e] *= alpha[e >> 1];

      // O += P V over each 16 keys: P's A registers are the S accumulators of
      // 8-key tiles 2kk (columns 0..7) and 2kk + 1 (8..15), rows g and g + 8;
      // ldmatrix.x4.trans over V [keys][D] gives (keys 0..7, d 0..7),
      // (keys 8..15, d 0..7), (keys 0..7, d 8..15), (keys 8..15, d 8..15)
      // transposed: the B registers of two 8-column tiles of O.
#pragma unroll
      for (int kk = 0; kk < kNT / 2; ++kk) {
        const uint32_t pa[4] = {Op::pack(s[2 * kk][0], s[2 * kk][1]), Op::pack(s[2 * kk][2], s[2 * kk][3]),
                                Op::pack(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                Op::pack(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
        for (int dp = 0; dp < D / 16; ++dp) {
          uint32_t r[4];
          mma::ldmatrix_x4_trans(r, sv + swz<D>(16 * kk + (lane & 7) + 8 * ((lane >> 3) & 1), 2 * dp + (lane >> 4)));
          const uint32_t b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
          Op::mma(oacc[2 * dp], pa, b0, oacc[2 * dp]);
          Op::mma(oacc[2 * dp + 1], pa, b1, oacc[2 * dp + 1]);
        }
      }
    }
    __syncthreads();  // every warp is done with stage st before tile t + 2 loads into it
  }
  mma::cp_async_wait<0>();  // (Q's group, when no tile ran)

  if (!live) return;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
    const int64_t i = iw + g + 8 * r;
    if (i >= Lq) continue;
    const float inv = l[r] > 0.f ? 1.f / l[r] : 0.f;
    float* orow = o + (bh * Lq + i) * D + 2 * qd;
#pragma unroll
    for (int dt = 0; dt < kDT; ++dt) store2(orow + 8 * dt, oacc[dt][2 * r] * inv, oacc[dt][2 * r + 1] * inv);
    if (qd == 0) lse[bh * Lq + i] = l[r] > 0.f ? m[r] * kLn2 + logf(l[r]) : INFINITY;
  }
#endif
}

}  // namespace flash_mma

#ifndef REMORA_FLASH_EMULATED
namespace {
template <class E, int D>
void launch_fwd(const FlashMmaForward& p, int dev) {
  flash_mma::FwdArgs a;
  a.B = p.B;
  a.H = p.H;
  a.Lq = p.Lq;
  a.Lk = p.Lk;
  a.scale = p.scale;
  a.kp = p.kp;
  a.causal = p.causal;
  a.window = p.window;
  const size_t smem = flash_mma::Geo<D, E>::kSmem;
  // The shared-memory opt-in is set once per device (a host call per launch
  // costs as much as a small problem's kernel).
  static std::atomic<uint64_t> opted_in{0};
  const uint64_t bit = uint64_t(1) << (dev & 63);
  if (!(opted_in.load(std::memory_order_acquire) & bit)) {
    REMORA_CUDA_CHECK(cudaFuncSetAttribute(flash_mma::k_flash_mma_fwd<E, D>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    opted_in.fetch_or(bit, std::memory_order_release);
  }
  const dim3 grid(unsigned((p.Lq + flash_mma::kRows - 1) / flash_mma::kRows), unsigned(p.B * p.H));
  flash_mma::k_flash_mma_fwd<E, D><<<grid, flash_mma::kThreads, smem, stream()>>>(a, static_cast<const E*>(p.q),
                                                            static_cast<const E*>(p.k),
                                                            static_cast<const E*>(p.v), p.o, p.lse);
  check_launch("flash attention mma.sync (forward)");
}
template <class E>
void launch_fwd_d(const FlashMmaForward& p, int dev) {
  if (p.D == 32) launch_fwd<E, 32>(p, dev);
  else if (p.D == 64) launch_fwd<E, 64>(p, dev);
  else launch_fwd<E, 128>(p, dev);
}

// A device's compute capability and opt-in shared memory per block, read once.
struct DeviceLimits {
  bool ok = false;
  int major = 0, smem = 0;
};
const DeviceLimits& device_limits(int dev) {
  static DeviceLimits limits[64];
  static std::once_flag once[64];
  static const DeviceLimits none;
  if (dev < 0 || dev >= 64) return none;
  std::call_once(once[dev], [dev] {
    DeviceLimits& l = limits[dev];
    l.ok = cudaDeviceGetAttribute(&l.major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
           cudaDeviceGetAttribute(&l.smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) == cudaSuccess;
  });
  return limits[dev];
}
}  // namespace

bool flash_mma_forward(const FlashMmaForward& p) {
  if (p.D != 32 && p.D != 64 && p.D != 128) return false;
  if (p.B < 1 || p.H < 1 || p.Lq < 1 || p.Lk < 1 || p.B * p.H > 65535 || p.Lq > (int64_t(1) << 30) ||
      p.Lk > (int64_t(1) << 30))
    return false;
  for (const void* ptr : {p.q, p.k, p.v})
    if (!ptr || reinterpret_cast<uintptr_t>(ptr) % 16 != 0) return false;  // cp.async: 16 bytes at a time
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return false;
  const DeviceLimits& lim = device_limits(dev);
  if (!lim.ok) return false;
  const int major = lim.major, smem = lim.smem;
  const size_t need = p.D == 32 ? flash_mma::Geo<32, __nv_bfloat16>::kSmem
                      : p.D == 64 ? flash_mma::Geo<64, __nv_bfloat16>::kSmem
                                  : flash_mma::Geo<128, __nv_bfloat16>::kSmem;
  if (major < 8 || size_t(smem) < need) return false;
  if (p.f16) launch_fwd_d<__half>(p, dev);
  else launch_fwd_d<__nv_bfloat16>(p, dev);
  return true;
}
#endif

}  // namespace cuda
}  // namespace remora
