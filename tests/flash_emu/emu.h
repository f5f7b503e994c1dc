// SPDX-License-Identifier: BSD-3-Clause
// A CPU emulator for the tensor-core kernels of backends/cuda/cuda_flash.cu,
// so that their index arithmetic (tiles, bands, rings, masks, skipping) is
// tested on machines without a GPU. It runs a kernel's threads as fibers
// (ucontext) on one OS thread, block after block:
//   - __syncthreads / __syncwarp are barriers over the block's 128 / the
//     warp's 32 fibers; a barrier that some fiber never reaches (a divergent
//     barrier) is reported as a deadlock instead of hanging;
//   - __shfl_xor_sync exchanges through a per-warp slot array between two
//     warp barriers (as the hardware requires every lane to take part);
//   - cp.async copies land either at once (emu::deferred_copies() false) or
//     only when a cp.async.wait_group lets them (true): the two extremes of
//     the hardware's timing. Immediate landing shows a copy into a buffer
//     that other threads still read; deferred landing shows a read before
//     its wait (the buffer then still holds NaN or an older tile). Races
//     between those extremes are compute-sanitizer's (gpu_check.sh);
//   - a wmma fragment holds its whole matrix in every lane and every lane
//     computes the whole product (the layouts the compiler owns do not
//     matter to the kernels, which only use whole-fragment operations);
//     load_matrix_sync and store_matrix_sync are warp collectives, as on the
//     GPU: every lane has read before any lane stores over what was read;
//   - dynamic shared memory starts filled with NaN, so a read of shared
//     memory that no copy or store wrote shows in the results;
//   - __float_to_tf32 is exact (no rounding) unless emu::g_round_tf32 is set,
//     so the results can be compared with a float64 reference tightly;
//   - mma.sync (m16n8k16 bf16 / f16, m16n8k8 tf32) and ldmatrix are emulated
//     lane by lane in emu_mma.h: warp collectives over each lane's own
//     registers, in the fragment layouts of the PTX ISA.
// __shared__ variables become function statics: blocks run one at a time.
#pragma once
#include <ucontext.h>

#include <math.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <vector>

#define REMORA_FLASH_EMULATED 1
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define REMORA_FLASH_SMEM(name) float* name = emu::block_smem()

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};

namespace emu {

constexpr int kMaxThreads = 256;
constexpr size_t kStack = 512 * 1024;

// One 16-byte cp.async copy (src null: 16 zero bytes).
struct Copy {
  void* dst;
  const void* src;
};

struct Fiber {
  ucontext_t ctx;
  dim3 tid;
  bool done = false;
  std::vector<Copy> open;                 // issued since the last commit
  std::vector<std::vector<Copy>> groups;  // committed, still in flight (oldest first)
};

struct Block {
  std::vector<Fiber> fibers;
  ucontext_t sched;
  int cur = 0;
  int n = 0;
  unsigned long long progress = 0;  // barrier arrivals and finished fibers
  // barrier generations and arrivals: [0] the block, [1 + w] warp w
  unsigned gen[1 + kMaxThreads / 32] = {};
  int arrived[1 + kMaxThreads / 32] = {};
  union Slot {
    float f;
    int i;
    long long l;
    unsigned u;
  } slots[kMaxThreads];
  std::vector<float> smem;
  std::vector<std::vector<char>> stacks;
  dim3 block_idx, block_dim, grid_dim;
};

inline Block& blk() {
  static Block b;
  return b;
}
inline float* block_smem() { return blk().smem.data(); }

inline void yield() {
  Block& b = blk();
  swapcontext(&b.fibers[size_t(b.cur)].ctx, &b.sched);
}

// A barrier over `count` fibers in group g: the last to arrive releases the rest.
inline void barrier(int g, int count) {
  Block& b = blk();
  const unsigned my = b.gen[g];
  ++b.progress;
  if (++b.arrived[g] == count) {
    b.arrived[g] = 0;
    ++b.gen[g];
    return;
  }
  while (b.gen[g] == my) yield();
}

inline int cur_tid() { return int(blk().fibers[size_t(blk().cur)].tid.x); }
inline void syncthreads() { barrier(0, blk().n); }
inline void syncwarp() { barrier(1 + cur_tid() / 32, 32); }

template <class T>
T shfl_xor(T v, int o) {
  Block& b = blk();
  const int t = cur_tid();
  Block::Slot s;
  std::memcpy(&s, &v, sizeof(T));
  b.slots[t] = s;
  syncwarp();
  T r;
  std::memcpy(&r, &b.slots[(t & ~31) | ((t & 31) ^ o)], sizeof(T));
  syncwarp();
  return r;
}

inline std::function<void()>*& entry() {
  static std::function<void()>* f = nullptr;
  return f;
}
inline void trampoline() {
  (*entry())();
  Block& b = blk();
  b.fibers[size_t(b.cur)].done = true;
  swapcontext(&b.fibers[size_t(b.cur)].ctx, &b.sched);
}

// Runs fn on every thread of every block of grid; blocks one at a time.
inline void launch(dim3 grid, int threads, size_t smem_bytes, const std::function<void()>& fn) {
  if (threads > kMaxThreads || threads % 32 != 0) {
    std::fprintf(stderr, "emu: %d threads per block is not supported\n", threads);
    std::abort();
  }
  Block& b = blk();
  b.n = threads;
  b.fibers.assign(size_t(threads), Fiber());
  b.stacks.resize(size_t(threads));
  for (auto& s : b.stacks) s.resize(kStack);
  b.block_dim = dim3(unsigned(threads));
  b.grid_dim = grid;
  std::function<void()> f = fn;
  entry() = &f;
  for (unsigned by = 0; by < grid.y; ++by)
    for (unsigned bx = 0; bx < grid.x; ++bx) {
      b.block_idx = dim3(bx, by);
      b.smem.assign(smem_bytes / sizeof(float) + 1, std::numeric_limits<float>::quiet_NaN());
      std::memset(b.gen, 0, sizeof(b.gen));
      std::memset(b.arrived, 0, sizeof(b.arrived));
      for (int t = 0; t < threads; ++t) {
        Fiber& fb = b.fibers[size_t(t)];
        fb.done = false;
        fb.tid = dim3(unsigned(t));
        getcontext(&fb.ctx);
        fb.ctx.uc_stack.ss_sp = b.stacks[size_t(t)].data();
        fb.ctx.uc_stack.ss_size = kStack;
        fb.ctx.uc_link = nullptr;
        makecontext(&fb.ctx, trampoline, 0);
      }
      // Round robin until every fiber is done; a whole round in which no
      // fiber arrived at a barrier or finished is a deadlock (every fiber
      // waits at a barrier that some other one never reaches).
      for (;;) {
        bool all_done = true;
        const unsigned long long before = b.progress;
        for (int t = 0; t < threads; ++t) {
          if (b.fibers[size_t(t)].done) continue;
          b.cur = t;
          swapcontext(&b.sched, &b.fibers[size_t(t)].ctx);
          if (b.fibers[size_t(t)].done) ++b.progress;
          else all_done = false;
        }
        if (all_done) break;
        if (b.progress == before) {
          std::fprintf(stderr, "emu: deadlock in block (%u, %u): a barrier not reached by every thread\n",
                       bx, by);
          std::abort();
        }
      }
    }
  entry() = nullptr;
}

// Whether __float_to_tf32 rounds to TF32 (10-bit mantissa) or is exact.
inline bool& round_tf32() {
  static bool r = false;
  return r;
}

}  // namespace emu

#define threadIdx (emu::blk().fibers[size_t(emu::blk().cur)].tid)
#define blockIdx (emu::blk().block_idx)
#define blockDim (emu::blk().block_dim)
#define gridDim (emu::blk().grid_dim)

inline void __syncthreads() { emu::syncthreads(); }
inline void __syncwarp(unsigned = 0xffffffffu) { emu::syncwarp(); }
template <class T>
T __shfl_xor_sync(unsigned, T v, int o) {
  return emu::shfl_xor(v, o);
}
inline int atomicMin(int* p, int v) {
  const int old = *p;
  if (v < old) *p = v;
  return old;
}
inline int atomicMax(int* p, int v) {
  const int old = *p;
  if (v > old) *p = v;
  return old;
}
template <class T>
T max(T a, T b) {
  return a > b ? a : b;
}
template <class T>
T min(T a, T b) {
  return a < b ? a : b;
}

using std::isinf;


// bf16 as cuda_bf16.h has it: the upper half of an f32, rounded to nearest
// even (NaN kept a NaN).
struct __nv_bfloat16 {
  uint16_t x;
};
inline __nv_bfloat16 __float2bfloat16_rn(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (std::isnan(f)) return {uint16_t((u >> 16) | 0x40)};
  u += 0x7fffu + ((u >> 16) & 1u);
  return {uint16_t(u >> 16)};
}
inline float __bfloat162float(__nv_bfloat16 b) {
  const uint32_t u = uint32_t(b.x) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// cp.async: an immediate copy (16 bytes, or 16 zero bytes with valid = false).
namespace emu {
inline bool& deferred_copies() {
  static bool d = false;
  return d;
}
inline void land(const Copy& c) {
  if (c.src) std::memcpy(c.dst, c.src, 16);
  else std::memset(c.dst, 0, 16);
}
inline Fiber& me() { return blk().fibers[size_t(blk().cur)]; }
}  // namespace emu
inline void cp_async16(void* dst, const void* src, bool valid) {
  const emu::Copy c{dst, valid ? src : nullptr};
  if (emu::deferred_copies()) emu::me().open.push_back(c);
  else emu::land(c);
}
inline void cp_async_commit() {
  emu::Fiber& f = emu::me();
  f.groups.push_back(std::move(f.open));
  f.open.clear();
}
// Lands every committed group but the newest N.
template <int N>
inline void cp_async_wait() {
  emu::Fiber& f = emu::me();
  while (f.groups.size() > size_t(N)) {
    for (const emu::Copy& c : f.groups.front()) emu::land(c);
    f.groups.erase(f.groups.begin());
  }
}

namespace nvcuda {
namespace wmma {
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
namespace precision {
struct tf32 {};
}  // namespace precision
enum layout_t { mem_row_major, mem_col_major };

template <class Use, int M, int N, int K>
struct Dims;
template <int M, int N, int K>
struct Dims<matrix_a, M, N, K> {
  static constexpr int R = M, C = K;
};
template <int M, int N, int K>
struct Dims<matrix_b, M, N, K> {
  static constexpr int R = K, C = N;
};
template <int M, int N, int K>
struct Dims<accumulator, M, N, K> {
  static constexpr int R = M, C = N;
};

// The whole R x C matrix, row-major, in every lane.
template <class Use, int M, int N, int K, class T, class Layout = void>
struct fragment {
  static constexpr int R = Dims<Use, M, N, K>::R, C = Dims<Use, M, N, K>::C;
  static constexpr int num_elements = R * C;
  float x[R * C];
};

inline float __float_to_tf32(float v) {
  if (!emu::round_tf32() || !std::isfinite(v)) return v;
  uint32_t u;
  std::memcpy(&u, &v, 4);
  u = (u + 0x1000u) & ~0x1fffu;  // round to nearest on the 13 dropped bits
  std::memcpy(&v, &u, 4);
  return v;
}

template <class Use, int M, int N, int K, class T, class L>
void fill_fragment(fragment<Use, M, N, K, T, L>& f, float v) {
  for (float& e : f.x) e = v;
}
// Warp collectives: the lanes meet before (earlier stores are complete) and
// after (every lane has read before a later store overwrites).
struct Collective {
  Collective() { emu::syncwarp(); }
  ~Collective() { emu::syncwarp(); }
};
inline float value(float v) { return v; }
inline float value(__nv_bfloat16 v) { return __bfloat162float(v); }
template <class Use, int M, int N, int K, class T, class P>
void load_matrix_sync(fragment<Use, M, N, K, T, row_major>& f, const P* p, unsigned ld) {
  const Collective warp;
  for (int r = 0; r < f.R; ++r)
    for (int c = 0; c < f.C; ++c) f.x[r * f.C + c] = value(p[size_t(r) * ld + c]);
}
template <class Use, int M, int N, int K, class T, class P>
void load_matrix_sync(fragment<Use, M, N, K, T, col_major>& f, const P* p, unsigned ld) {
  const Collective warp;
  for (int r = 0; r < f.R; ++r)
    for (int c = 0; c < f.C; ++c) f.x[r * f.C + c] = value(p[size_t(c) * ld + r]);
}
template <int M, int N, int K, class T>
void load_matrix_sync(fragment<accumulator, M, N, K, T, void>& f, const float* p, unsigned ld, layout_t l) {
  const Collective warp;
  for (int r = 0; r < f.R; ++r)
    for (int c = 0; c < f.C; ++c)
      f.x[r * f.C + c] = l == mem_row_major ? p[size_t(r) * ld + c] : p[size_t(c) * ld + r];
}
template <int M, int N, int K, class T>
void store_matrix_sync(float* p, const fragment<accumulator, M, N, K, T, void>& f, unsigned ld, layout_t l) {
  const Collective warp;
  for (int r = 0; r < f.R; ++r)
    for (int c = 0; c < f.C; ++c)
      (l == mem_row_major ? p[size_t(r) * ld + c] : p[size_t(c) * ld + r]) = f.x[r * f.C + c];
}
template <int M, int N, int K, class TA, class TB, class LA, class LB>
void mma_sync(fragment<accumulator, M, N, K, float, void>& d, const fragment<matrix_a, M, N, K, TA, LA>& a,
              const fragment<matrix_b, M, N, K, TB, LB>& b, const fragment<accumulator, M, N, K, float, void>& c) {
  float out[M * N];
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      float s = c.x[i * N + j];
      for (int k = 0; k < K; ++k) s += a.x[i * K + k] * b.x[k * N + j];
      out[i * N + j] = s;
    }
  std::memcpy(d.x, out, sizeof(out));
}
}  // namespace wmma
}  // namespace nvcuda

// mma.sync and ldmatrix, lane by lane (the registers of every lane).
#include "emu_mma.h"
