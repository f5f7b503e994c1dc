// SPDX-License-Identifier: BSD-3-Clause
// Lane-by-lane emulation of the warp-level tensor-core instructions that
// kernels write as inline PTX (the wrappers of backends/cuda/cuda_flash_mma.cuh
// call these under REMORA_FLASH_EMULATED):
//   mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.{bf16,f16}.f32
//   mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32
//   ldmatrix.sync.aligned.m8n8.{x1,x2,x4}{,.trans}.shared.b16
// Unlike the wmma emulation of emu.h (whole matrices in every lane), these
// are warp collectives over real per-lane registers: every lane posts ITS OWN
// registers (or, for ldmatrix, its row address) into a per-warp exchange
// area, the lanes meet at a warp barrier, each lane assembles the operands
// from the 32 posts following the fragment layouts below and keeps only what
// the hardware would hand it, and the lanes meet again before any of them can
// post the next instruction's registers. A kernel that puts an element in the
// wrong lane or the wrong register therefore computes a wrong result here, as
// it would on the GPU. All 32 lanes must take part (a lane that skips the
// instruction leaves the others at a barrier: the emulator reports a
// deadlock), and they must all be at the same instruction (a warp whose lanes
// meet in different collectives is reported and aborts).
//
// Fragment layouts
// ----------------
// Lane l of the warp is seen as a pair: its group g = l / 4 (0..7, eight
// groups of four consecutive lanes, a "quad") and its place in the group
// q = l % 4 (0..3). A 32-bit register holding two 16-bit elements keeps the
// element with the smaller index in its low half.
//
// Accumulators C and D (16 x 8, f32; the same for every shape below): four
// floats per lane. Floats 0 and 1 are row g, columns 2q and 2q + 1; floats 2
// and 3 are the same two columns of row g + 8. So the four lanes of a quad
// together hold two whole rows (g and g + 8) of the 8 columns: a row max or
// row sum of an accumulator tile is a reduction within a quad (shuffles with
// lane xor 1 and xor 2).
//
// m16n8k16, 16-bit A (16 x 16, row-major "row"): four registers, two
// elements each. The 16 x 16 tile is seen as four 8 x 8 quarters: register 0
// is the top-left quarter, 1 bottom-left, 2 top-right, 3 bottom-right. Inside
// its quarter a register holds the row g, columns 2q and 2q + 1. So
// register r holds A[g + 8 (r % 2)][8 (r / 2) + 2q + {0, 1}].
//
// m16n8k16, 16-bit B (16 x 8, K x N, "col": stored by columns): two
// registers, two elements each. Register r holds column n = g, rows
// k = 8r + 2q and 8r + 2q + 1: each lane holds two consecutive k of one
// column, i.e. the same pattern as A's rows read along B's columns. With the
// matrix kept as B^T (N x K, row-major; the K tile of attention is exactly
// that), register r holds B^T[g][8r + 2q + {0, 1}].
//
// m16n8k8, tf32 A (16 x 8): four registers, one element each. Register r
// holds A[g + 8 (r % 2)][q + 4 (r / 2)] (rows as for 16-bit A; the columns
// are q and q + 4 since one register holds a single element).
// m16n8k8, tf32 B (8 x 8, K x N): register r holds B[q + 4r][g].
//
// ldmatrix.m8n8.b16 loads one, two or four 8 x 8 matrices of 16-bit elements
// from shared memory. Each row of each matrix is 16 contiguous bytes (16-byte
// aligned) whose address one lane supplies: lanes 8m .. 8m + 7 give rows
// 0..7 of matrix m (with .x1 only lanes 0..7 are read, with .x2 lanes 0..15;
// the other lanes' addresses are ignored). Lane l receives one register per
// matrix: elements 2q and 2q + 1 of row g, i.e. exactly the pattern of one
// accumulator row pair or one A / B register above. With .trans a lane
// receives the same positions of the transposed matrix: element (2q, g) in
// the low half, (2q + 1, g) in the high half.
// Consequences used by the kernels: ldmatrix.x4 with the four matrices
// ordered top-left, bottom-left, top-right, bottom-right of a row-major
// 16 x 16 A tile gives the four A registers; ldmatrix.x2 over the two 8 x 8
// halves (k 0..7, k 8..15) of an N x K (B^T, row-major) tile gives the two B
// registers; and .trans over a K x N row-major tile (V in P V) gives them
// too.
//
// Numerics: bf16, f16 and tf32 products are exact in f32 (at most 22
// significant bits), and they are accumulated in f32 in k order onto C (the
// hardware's order and rounding inside one mma differ in the last bits). A
// tf32 operand register holds an f32 bit pattern; the hardware reads only its
// tf32 bits: here its low 13 bits are dropped only when emu::round_tf32() is
// set, so that f32 inputs compare tightly with a float64 reference, as for
// wmma (emu.h).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

// f16 as cuda_fp16.h has it (storage only; the kernels do no f16 arithmetic).
struct __half {
  uint16_t x;
};

namespace emu {

// f16 bits -> float (exact).
inline float half_to_float(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 31, man = h & 1023;
  float v;
  if (exp == 0) v = std::ldexp(float(man), -24);
  else if (exp == 31) v = man ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  else v = std::ldexp(float(1024 + man), exp - 25);
  return sign ? -v : v;
}
// float -> f16 bits, rounded to nearest even (overflow to inf, NaN kept a NaN).
inline uint16_t float_to_half(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  u &= 0x7fffffffu;
  if (u > 0x7f800000u) return uint16_t(sign | 0x7e00u);
  if (u >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // >= 65520: rounds past 65504
  if (u >= 0x38800000u) {                                 // a normal f16 (>= 2^-14)
    uint32_t r = u - 0x38000000u;                         // exponent bias 127 -> 15
    r += 0xfffu + ((r >> 13) & 1u);
    return uint16_t(sign | (r >> 13));
  }
  float a;
  std::memcpy(&a, &u, 4);
  // A subnormal f16 counts units of 2^-24; a * 2^24 < 1024 is exact, and
  // nearbyint rounds it to nearest even (1024 carries into the smallest normal).
  return uint16_t(sign | uint16_t(std::nearbyint(a * 16777216.0f)));
}

// The 16-bit element types of mma and their values.
enum class Ty { bf16, f16, tf32 };
inline float elem16(Ty t, uint32_t bits16) {
  if (t == Ty::f16) return half_to_float(uint16_t(bits16));
  const uint32_t u = bits16 << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline float elem_tf32(uint32_t bits) {
  if (round_tf32()) bits &= ~0x1fffu;  // the hardware reads the upper 19 bits only
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// ---- the fragment layouts (see the header comment), one function each ----
// Each maps (lane, element index) to (row, col) of its matrix; element e of a
// 16-bit operand lies in register e / 2, half e % 2 (0 = low).
struct RC {
  int r, c;
};
inline int group_of(int lane) { return lane >> 2; }
inline int quad_of(int lane) { return lane & 3; }
// Accumulator (16 x 8): e = 0..3.
inline RC frag_cd(int lane, int e) { return {group_of(lane) + 8 * (e >> 1), 2 * quad_of(lane) + (e & 1)}; }
// m16n8k16 A (16 x 16): e = 0..7.
inline RC frag_a_k16(int lane, int e) {
  return {group_of(lane) + 8 * ((e >> 1) & 1), 2 * quad_of(lane) + (e & 1) + 8 * (e >> 2)};
}
// m16n8k16 B (16 x 8, K x N): e = 0..3.
inline RC frag_b_k16(int lane, int e) { return {2 * quad_of(lane) + (e & 1) + 8 * (e >> 1), group_of(lane)}; }
// m16n8k8 tf32 A (16 x 8): e = register = 0..3.
inline RC frag_a_k8_tf32(int lane, int e) { return {group_of(lane) + 8 * (e & 1), quad_of(lane) + 4 * (e >> 1)}; }
// m16n8k8 tf32 B (8 x 8, K x N): e = register = 0..1.
inline RC frag_b_k8_tf32(int lane, int e) { return {quad_of(lane) + 4 * e, group_of(lane)}; }

// ---- the per-warp exchange ----
enum class Op : uint32_t {
  none = 0,
  mma_k16_bf16,
  mma_k16_f16,
  mma_k8_tf32,
  ldmatrix,  // + 8 * (number of matrices) + 64 * trans, so that x1/x2/x4/.trans do not meet
};
inline std::string op_name(uint32_t op) {
  switch (op) {
    case uint32_t(Op::none): return "no mma / ldmatrix (a shuffle, a barrier or other code)";
    case uint32_t(Op::mma_k16_bf16): return "mma.m16n8k16 bf16";
    case uint32_t(Op::mma_k16_f16): return "mma.m16n8k16 f16";
    case uint32_t(Op::mma_k8_tf32): return "mma.m16n8k8 tf32";
    default: {
      const uint32_t x = op - uint32_t(Op::ldmatrix);
      return "ldmatrix.x" + std::to_string((x % 64) / 8) + (x >= 64 ? ".trans" : "");
    }
  }
}
struct Post {
  uint32_t op = 0;
  uint32_t w[10] = {};         // a0..a3, b0..b1, c0..c3 (c as f32 bits)
  const char* addr = nullptr;  // ldmatrix: this lane's row address
};
inline Post* posts() {
  static Post p[kMaxThreads];
  return p;
}
inline int lane_id() { return cur_tid() & 31; }

// Posts this lane's words under op, meets the warp, runs read(the warp's 32
// posts) and meets the warp again (so that no lane posts again before every
// lane has read).
template <class F>
void collective(uint32_t op, const uint32_t* w, int nw, const void* addr, F&& read) {
  const int t = cur_tid();
  Post& mine = posts()[t];
  mine.op = op;
  for (int i = 0; i < nw; ++i) mine.w[i] = w[i];
  mine.addr = static_cast<const char*>(addr);
  syncwarp();
  const Post* warp = posts() + (t & ~31);
  for (int l = 0; l < 32; ++l)
    if (warp[l].op != op) {
      std::fprintf(stderr, "emu: warp %d: lane %d is in %s while lane %d is in %s\n", t / 32, t & 31,
                   op_name(op).c_str(), l, op_name(warp[l].op).c_str());
      std::abort();
    }
  read(warp);
  syncwarp();
  mine.op = uint32_t(Op::none);
}

// ---- mma.sync ----
// D = A B + C for one 16 x 8 tile; this lane's d from every lane's a, b, c.
template <int K>
struct MmaTile {
  float A[16][K], B[K][8], C[16][8];
};
template <int K>
inline void mma_finish(const MmaTile<K>& m, float (&d)[4]) {
  const int lane = lane_id();
  for (int e = 0; e < 4; ++e) {
    const RC p = frag_cd(lane, e);
    float s = m.C[p.r][p.c];
    for (int k = 0; k < K; ++k) s += m.A[p.r][k] * m.B[k][p.c];
    d[e] = s;
  }
}
inline void pack_abc(uint32_t (&w)[10], const uint32_t (&a)[4], const uint32_t (&b)[2], const float (&c)[4]) {
  for (int i = 0; i < 4; ++i) w[i] = a[i];
  for (int i = 0; i < 2; ++i) w[4 + i] = b[i];
  std::memcpy(w + 6, c, 16);
}
inline float post_c(const Post& p, int e) {
  float f;
  std::memcpy(&f, &p.w[6 + e], 4);
  return f;
}

// mma.sync.aligned.m16n8k16.row.col.f32.{bf16|f16}.{bf16|f16}.f32
inline void mma_m16n8k16(Ty ty, float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], const float (&c)[4]) {
  uint32_t w[10];
  pack_abc(w, a, b, c);
  MmaTile<16> m;
  collective(uint32_t(ty == Ty::bf16 ? Op::mma_k16_bf16 : Op::mma_k16_f16), w, 10, nullptr, [&](const Post* warp) {
    for (int l = 0; l < 32; ++l) {
      for (int e = 0; e < 8; ++e) {
        const RC p = frag_a_k16(l, e);
        m.A[p.r][p.c] = elem16(ty, (warp[l].w[e >> 1] >> (16 * (e & 1))) & 0xffffu);
      }
      for (int e = 0; e < 4; ++e) {
        const RC p = frag_b_k16(l, e);
        m.B[p.r][p.c] = elem16(ty, (warp[l].w[4 + (e >> 1)] >> (16 * (e & 1))) & 0xffffu);
      }
      for (int e = 0; e < 4; ++e) {
        const RC p = frag_cd(l, e);
        m.C[p.r][p.c] = post_c(warp[l], e);
      }
    }
  });
  mma_finish(m, d);
}

// mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32
inline void mma_m16n8k8_tf32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], const float (&c)[4]) {
  uint32_t w[10];
  pack_abc(w, a, b, c);
  MmaTile<8> m;
  collective(uint32_t(Op::mma_k8_tf32), w, 10, nullptr, [&](const Post* warp) {
    for (int l = 0; l < 32; ++l) {
      for (int e = 0; e < 4; ++e) {
        const RC p = frag_a_k8_tf32(l, e);
        m.A[p.r][p.c] = elem_tf32(warp[l].w[e]);
      }
      for (int e = 0; e < 2; ++e) {
        const RC p = frag_b_k8_tf32(l, e);
        m.B[p.r][p.c] = elem_tf32(warp[l].w[4 + e]);
      }
      for (int e = 0; e < 4; ++e) {
        const RC p = frag_cd(l, e);
        m.C[p.r][p.c] = post_c(warp[l], e);
      }
    }
  });
  mma_finish(m, d);
}

// ---- ldmatrix ----
// A row address must be 16-byte aligned and its 16 bytes must lie in the
// block's dynamic shared memory (ldmatrix reads only .shared).
inline void check_row(const char* p, int lane, int rows_of) {
  const char* lo = reinterpret_cast<const char*>(blk().smem.data());
  const char* hi = lo + blk().smem.size() * sizeof(float);
  if (reinterpret_cast<uintptr_t>(p) % 16 != 0 || p < lo || p + 16 > hi) {
    std::fprintf(stderr,
                 "emu: ldmatrix: lane %d (row %d of matrix %d) gives %s address %p (shared memory: %p .. %p)\n",
                 lane, lane % 8, rows_of, reinterpret_cast<uintptr_t>(p) % 16 ? "a misaligned" : "a non-shared",
                 static_cast<const void*>(p), static_cast<const void*>(lo), static_cast<const void*>(hi));
    std::abort();
  }
}
inline uint16_t ld16(const char* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
// ldmatrix.sync.aligned.m8n8.x<N>[.trans].shared.b16: r[m] of this lane from
// matrix m, whose row i is at the address of lane 8m + i.
template <int N>
inline void ldmatrix(uint32_t (&r)[N], const void* row, bool trans) {
  static_assert(N == 1 || N == 2 || N == 4, "ldmatrix loads 1, 2 or 4 matrices");
  const int lane = lane_id(), g = group_of(lane), q = quad_of(lane);
  collective(uint32_t(Op::ldmatrix) + 8u * N + (trans ? 64u : 0u), nullptr, 0, row, [&](const Post* warp) {
    for (int l = 0; l < 8 * N; ++l) check_row(warp[l].addr, l, l / 8);
    for (int m = 0; m < N; ++m) {
      const Post* rows = warp + 8 * m;  // rows[i].addr: row i of matrix m
      uint16_t lo, hi;
      if (!trans) {  // row g, columns 2q, 2q + 1
        lo = ld16(rows[g].addr + 2 * (2 * q));
        hi = ld16(rows[g].addr + 2 * (2 * q + 1));
      } else {  // rows 2q, 2q + 1, column g
        lo = ld16(rows[2 * q].addr + 2 * g);
        hi = ld16(rows[2 * q + 1].addr + 2 * g);
      }
      r[m] = uint32_t(lo) | uint32_t(hi) << 16;
    }
  });
}

}  // namespace emu
