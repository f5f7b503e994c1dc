// SPDX-License-Identifier: BSD-3-Clause
// Self-tests of the lane-by-lane mma.sync / ldmatrix emulation (emu_mma.h)
// and of the wrappers kernels call (backends/cuda/cuda_flash_mma.cuh);
// included by flash_emu.cpp.
//   - the fragment layout tables place each element of A, B, C/D exactly once;
//   - the f16 conversions agree with the compiler's _Float16 (when it has one);
//   - warps multiply random matrices taken from shared memory with ldmatrix
//     (x1, x2, x4, with and without .trans, i.e. operands stored row-major or
//     transposed) or with per-lane loads written from the layout tables, on
//     m16n8k16 bf16 and f16 and on m16n8k8 tf32, and store D from the
//     accumulator layout; the products match a float64 product;
//   - the same kernels with one deliberate layout error each (two A registers
//     swapped, B's registers filled as if B were row-major, a missing .trans,
//     the accumulator rows stored wrongly, one lane's register halves
//     swapped, one lane's ldmatrix row address off by a row) give wrong
//     products, and the comparison says so: the emulator does not forgive a
//     wrong lane mapping;
//   - misuse the hardware does not allow stops the emulator with a message
//     (run in a child process): a misaligned or non-shared ldmatrix row
//     address, lanes of one warp in different collectives, a lane that skips
//     an mma.
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <random>
#include <string>
#include <vector>

#include "../../backends/cuda/cuda_flash_mma.cuh"

namespace mma_selftest {

using namespace remora::cuda::mma;

// ---- layout tables ----
bool covers(const char* what, int R, int C, int per_lane, emu::RC (*f)(int, int)) {
  std::vector<int> hits(size_t(R * C), 0);
  bool ok = true;
  for (int l = 0; l < 32; ++l)
    for (int e = 0; e < per_lane; ++e) {
      const emu::RC p = f(l, e);
      if (p.r < 0 || p.r >= R || p.c < 0 || p.c >= C) ok = false;
      else ++hits[size_t(p.r * C + p.c)];
    }
  for (int h : hits) ok &= h == 1;
  std::printf("  layout %-22s each of %3d elements in exactly one lane: %s\n", what, R * C, ok ? "ok" : "FAILED");
  return ok;
}

bool layouts() {
  bool ok = covers("accumulator 16x8", 16, 8, 4, emu::frag_cd);
  ok &= covers("m16n8k16 A 16x16", 16, 16, 8, emu::frag_a_k16);
  ok &= covers("m16n8k16 B 16x8", 16, 8, 4, emu::frag_b_k16);
  ok &= covers("m16n8k8 tf32 A 16x8", 16, 8, 4, emu::frag_a_k8_tf32);
  ok &= covers("m16n8k8 tf32 B 8x8", 8, 8, 2, emu::frag_b_k8_tf32);
  return ok;
}

// ---- f16 conversions ----
bool half_conversions() {
  bool ok = true;
  // Every f16 value survives f16 -> float -> f16.
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = emu::half_to_float(uint16_t(h));
    if (std::isnan(f)) continue;
    ok &= emu::float_to_half(f) == h;
  }
#ifdef __FLT16_MANT_DIG__
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 2000000 && ok; ++i) {
    uint32_t u = bits(rng);
    if (i % 2) u = (u & 0x807fffffu) | (uint32_t(100 + (i / 2) % 48) << 23);  // near the f16 range
    float f;
    std::memcpy(&f, &u, 4);
    if (std::isnan(f)) continue;
    const _Float16 want = static_cast<_Float16>(f);
    uint16_t w;
    std::memcpy(&w, &want, 2);
    ok &= emu::float_to_half(f) == w && emu::half_to_float(w) == static_cast<float>(want);
  }
  std::printf("  f16 conversions (every f16 value, 2e6 floats against _Float16): %s\n", ok ? "ok" : "FAILED");
#else
  std::printf("  f16 conversions (every f16 value round trip): %s\n", ok ? "ok" : "FAILED");
#endif
  return ok;
}

// ---- warp products ----
enum class Ty { bf16, f16, tf32 };
// How a warp takes its operands from shared memory.
enum class ALoad {
  x4,        // A row-major [M][K], ldmatrix.x4
  x4_trans,  // A^T row-major [K][M], ldmatrix.x4.trans
  lanes,     // per-lane loads from the layout table (tf32: the only way)
};
enum class BLoad {
  x2,        // B^T row-major [N][K], ldmatrix.x2 (one n-tile)
  x4,        // B^T row-major, ldmatrix.x4 (two n-tiles)
  x1,        // B^T row-major, two ldmatrix.x1 (k 0..7, 8..15)
  x2_trans,  // B row-major [K][N], ldmatrix.x2.trans
  x4_trans,  // B row-major, ldmatrix.x4.trans (two n-tiles)
  x1_trans,  // B row-major, two ldmatrix.x1.trans
  lanes,     // per-lane loads, B^T row-major
};
// The deliberate layout errors.
enum class Fault {
  none,
  a_regs_1_2_swapped,   // A register 1 (rows + 8) and 2 (columns + 8) exchanged
  b_as_row,             // B's registers filled as if B were row-major like A
  no_trans,             // .trans left out where the operand is stored K x N
  d_rows,               // d2, d3 stored to row g (not g + 8)
  lane13_halves,        // lane 13 alone swaps the two halves of a0
  lane5_address,        // lane 5 gives the row address one row down
};

struct Variant {
  std::string name;
  Ty ty;
  ALoad a;
  BLoad b;
  Fault fault = Fault::none;
};

constexpr int kWarps = 4, kM = 16 * kWarps, kN = 32, kK = 64;
// Row strides in elements (padded: rows are 16-byte aligned, not contiguous).
constexpr int kLd16 = kK + 8;  // [rows][K] tiles of 16-bit elements
constexpr int kLdT16 = kM + 8; // [K][M] and [K][N] tiles
constexpr int kLd32 = kK + 4;  // [rows][K] tiles of floats

uint16_t bits16(Ty t, float v) {
  return t == Ty::f16 ? emu::float_to_half(v) : __float2bfloat16_rn(v).x;
}
float value16(Ty t, uint16_t b) { return emu::elem16(t == Ty::f16 ? emu::Ty::f16 : emu::Ty::bf16, b); }
float tf32_exact(float v) {
  uint32_t u;
  std::memcpy(&u, &v, 4);
  u &= ~0x1fffu;
  std::memcpy(&v, &u, 4);
  return v;
}

// Two 16-bit elements as one register (the first in the low half).
inline uint32_t pair(uint16_t lo, uint16_t hi) { return uint32_t(lo) | uint32_t(hi) << 16; }
inline uint32_t pair(const uint16_t* p) { return pair(p[0], p[1]); }

// acc += A B on one 16 x 8 tile, through the wrapper of the element type.
void mma(Ty t, float (&acc)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  if (t == Ty::bf16) mma_m16n8k16_bf16(acc, a, b, acc);
  else if (t == Ty::f16) mma_m16n8k16_f16(acc, a, b, acc);
  else mma_m16n8k8_tf32(acc, a, b, acc);
}

// D [M][N] = A [M][K] B [K][N] by kWarps warps (warp w: rows 16w..16w+15).
// Shared memory: A as [M][kLd16] (or A^T as [K][kLdT16]), B^T as [N][kLd16]
// (or B as [K][kLdT16]); floats for tf32 as [M][kLd32] and [N][kLd32].
void warp_gemm(const Variant& v, const std::vector<float>& A, const std::vector<float>& B, float* D) {
  const bool tf32 = v.ty == Ty::tf32;
  constexpr int kSizeA = std::max(kM * kLd16, kK * kLdT16), kSizeB = std::max(kN * kLd16, kK * kLdT16);
  const size_t smem = tf32 ? size_t(kM + kN) * kLd32 * 4 : size_t(kSizeA + kSizeB) * 2;
  emu::launch(dim3(1), 32 * kWarps, smem, [&] {
    REMORA_FLASH_SMEM(sm);
    const int tid = int(threadIdx.x), warp = tid / 32, lane = tid % 32, g = lane >> 2, q = lane & 3;
    uint16_t* sa = reinterpret_cast<uint16_t*>(sm);
    uint16_t* sb = sa + kSizeA;
    float* fa = sm;
    float* fb = sm + kM * kLd32;
    // Fill the tiles (each thread a share of the elements).
    for (int e = tid; e < kM * kK; e += 32 * kWarps) {
      const int i = e / kK, k = e % kK;
      if (tf32) fa[i * kLd32 + k] = A[size_t(e)];
      else if (v.a == ALoad::x4_trans) sa[k * kLdT16 + i] = bits16(v.ty, A[size_t(e)]);
      else sa[i * kLd16 + k] = bits16(v.ty, A[size_t(e)]);
    }
    const bool b_kn = v.b == BLoad::x2_trans || v.b == BLoad::x4_trans || v.b == BLoad::x1_trans;
    for (int e = tid; e < kK * kN; e += 32 * kWarps) {
      const int k = e / kN, n = e % kN;
      if (tf32) fb[n * kLd32 + k] = B[size_t(e)];
      else if (b_kn) sb[k * kLdT16 + n] = bits16(v.ty, B[size_t(e)]);
      else sb[n * kLd16 + k] = bits16(v.ty, B[size_t(e)]);
    }
    __syncthreads();

    float acc[kN / 8][4] = {};
    const int i0 = 16 * warp;
    const int ks = tf32 ? 8 : 16;
    for (int k0 = 0; k0 < kK; k0 += ks) {
      uint32_t a[4];
      if (tf32) {
        for (int r = 0; r < 4; ++r) {
          const emu::RC p = emu::frag_a_k8_tf32(lane, r);
          a[r] = to_tf32(fa[(i0 + p.r) * kLd32 + k0 + p.c]);
        }
      } else if (v.a == ALoad::lanes) {
        // register r: row g + 8 (r % 2), columns 8 (r / 2) + 2q, + 1
        for (int r = 0; r < 4; ++r) a[r] = pair(sa + (i0 + g + 8 * (r % 2)) * kLd16 + k0 + 8 * (r / 2) + 2 * q);
      } else {
        // Lanes 8m..8m+7 address rows of matrix m = top-left, bottom-left,
        // top-right, bottom-right quarter of the 16 x 16 tile.
        const int m = lane / 8, row = lane % 8 + 8 * (m % 2) + (v.fault == Fault::lane5_address && lane == 5);
        if (v.a == ALoad::x4) {
          const uint16_t* p = sa + (i0 + row) * kLd16 + k0 + 8 * (m / 2);
          ldmatrix_x4(a, p);
        } else {
          // A^T tile [K][M]: matrix m's rows are k, its columns i; the
          // top-left quarter of A (i 0..7, k 0..7) is A^T's k 0..7, i 0..7.
          const uint16_t* p = sa + (k0 + lane % 8 + 8 * (m / 2)) * kLdT16 + i0 + 8 * (m % 2);
          if (v.fault == Fault::no_trans) ldmatrix_x4(a, p);
          else ldmatrix_x4_trans(a, p);
        }
      }
      if (v.fault == Fault::a_regs_1_2_swapped) std::swap(a[1], a[2]);
      if (v.fault == Fault::lane13_halves && lane == 13) a[0] = a[0] >> 16 | a[0] << 16;

      for (int nt = 0; nt < kN / 8; ++nt) {
        const int n0 = 8 * nt;
        uint32_t b[2];
        if (tf32) {
          for (int r = 0; r < 2; ++r) {
            const emu::RC p = emu::frag_b_k8_tf32(lane, r);  // (k, n)
            // (the fault: k and n exchanged, B[g][q + 4r])
            b[r] = v.fault == Fault::b_as_row ? to_tf32(fb[(n0 + q + 4 * r) * kLd32 + k0 + g])
                                              : to_tf32(fb[(n0 + p.c) * kLd32 + k0 + p.r]);
          }
        } else if (v.b == BLoad::lanes) {
          // register r: column n = g, rows k = 8r + 2q, + 1 (B^T row g)
          // (the fault: B taken as if row-major like A, register r holding
          // row k = g + 8r, columns n = 2q, 2q + 1)
          for (int r = 0; r < 2; ++r)
            b[r] = v.fault == Fault::b_as_row
                       ? pair(sb[(n0 + 2 * q) * kLd16 + k0 + g + 8 * r], sb[(n0 + 2 * q + 1) * kLd16 + k0 + g + 8 * r])
                       : pair(sb + (n0 + g) * kLd16 + k0 + 8 * r + 2 * q);
        } else if (v.b == BLoad::x2 || v.b == BLoad::x4) {
          if (v.b == BLoad::x4 && nt % 2) continue;  // loaded with the previous n-tile
          // matrix m: n rows n0 + (m / 2) * 8 .., k columns k0 + 8 (m % 2) ..
          const int m = lane / 8;
          const uint16_t* p = sb + (n0 + lane % 8 + 8 * (m / 2)) * kLd16 + k0 + 8 * (m % 2);
          if (v.b == BLoad::x2) {
            ldmatrix_x2(b, p);
          } else {
            uint32_t r4[4];
            ldmatrix_x4(r4, p);
            uint32_t b1[2] = {r4[2], r4[3]};
            b[0] = r4[0];
            b[1] = r4[1];
            mma(v.ty, acc[nt + 1], a, b1);
          }
        } else if (v.b == BLoad::x1) {
          // Lanes 8..31 give no address (ignored by .x1).
          uint32_t r1[1];
          for (int h = 0; h < 2; ++h) {
            const uint16_t* p = lane < 8 ? sb + (n0 + lane) * kLd16 + k0 + 8 * h : nullptr;
            ldmatrix_x1(r1, p);
            b[h] = r1[0];
          }
        } else {
          // B stored [K][N]: matrix m has k rows k0 + 8 (m % 2) .., n columns
          // n0 + 8 (m / 2) ..; .trans hands each lane B^T's pattern.
          if (v.b == BLoad::x4_trans && nt % 2) continue;
          const int m = lane / 8;
          const uint16_t* p = sb + (k0 + lane % 8 + 8 * (m % 2)) * kLdT16 + n0 + 8 * (m / 2);
          if (v.b == BLoad::x2_trans) {
            // Lanes 16..31 give no address (ignored by .x2).
            if (v.fault == Fault::no_trans) ldmatrix_x2(b, lane < 16 ? p : nullptr);
            else ldmatrix_x2_trans(b, lane < 16 ? p : nullptr);
          } else if (v.b == BLoad::x4_trans) {
            uint32_t r4[4];
            if (v.fault == Fault::no_trans) ldmatrix_x4(r4, p);
            else ldmatrix_x4_trans(r4, p);
            uint32_t b1[2] = {r4[2], r4[3]};
            b[0] = r4[0];
            b[1] = r4[1];
            mma(v.ty, acc[nt + 1], a, b1);
          } else {
            uint32_t r1[1];
            for (int h = 0; h < 2; ++h) {
              const uint16_t* p1 = lane < 8 ? sb + (k0 + 8 * h + lane) * kLdT16 + n0 : nullptr;
              if (v.fault == Fault::no_trans) ldmatrix_x1(r1, p1);
              else ldmatrix_x1_trans(r1, p1);
              b[h] = r1[0];
            }
          }
        }
        mma(v.ty, acc[nt], a, b);
      }
    }
    // D from the accumulator layout: d[e] is row g + 8 (e / 2), column 2q + e % 2.
    for (int nt = 0; nt < kN / 8; ++nt)
      for (int e = 0; e < 4; ++e) {
        const int row = g + (v.fault == Fault::d_rows ? 0 : 8 * (e / 2)), col = 8 * nt + 2 * q + e % 2;
        D[(i0 + row) * kN + col] = acc[nt][e];
      }
  });
}

bool run_gemm(const Variant& v, bool expect_wrong) {
  std::mt19937 rng(99 + unsigned(v.ty) * 7 + unsigned(v.a) * 31 + unsigned(v.b) * 131);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> A(size_t(kM * kK)), B(size_t(kK * kN));
  // Operands exact in the element type, so the float64 product is the truth.
  for (std::vector<float>* m : {&A, &B})
    for (float& x : *m) {
      x = nd(rng);
      if (v.ty == Ty::tf32) x = tf32_exact(x);
      else x = value16(v.ty, bits16(v.ty, x));
    }
  std::vector<double> want(size_t(kM * kN), 0);
  for (int i = 0; i < kM; ++i)
    for (int n = 0; n < kN; ++n)
      for (int k = 0; k < kK; ++k) want[size_t(i * kN + n)] += double(A[size_t(i * kK + k)]) * B[size_t(k * kN + n)];
  std::vector<float> D(size_t(kM * kN), NAN);
  warp_gemm(v, A, B, D.data());
  double worst = 0, big = 0;
  for (size_t t = 0; t < D.size(); ++t) {
    big = std::max(big, std::abs(want[t]));
    const double e = std::abs(double(D[t]) - want[t]);
    worst = std::isnan(e) ? INFINITY : std::max(worst, e);
  }
  // f32 accumulation of exact products over K = 64: a few ulps of the sums.
  const bool matches = worst <= 1e-5 * big;
  const bool ok = matches != expect_wrong;
  std::printf("  %-44s worst |D - ref| %-9.3g of max %.3g: %s%s\n", v.name.c_str(), worst, big,
              matches ? "matches" : "differs", ok ? (expect_wrong ? " (as it must) ok" : " ok") : " FAILED");
  return ok;
}

// ---- misuse the emulator must stop at (run in a child; its message shown) ----
bool dies(const char* what, const std::function<void()>& body) {
  std::fflush(stdout);
  std::fflush(stderr);
  int fd[2];
  if (pipe(fd) != 0) return false;
  const pid_t pid = fork();
  if (pid == 0) {
    close(fd[0]);
    dup2(fd[1], 2);
    body();
    _exit(0);
  }
  close(fd[1]);
  std::string msg;
  char buf[256];
  ssize_t n;
  while ((n = read(fd[0], buf, sizeof(buf))) > 0) msg.append(buf, size_t(n));
  close(fd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  const bool died = WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
  while (!msg.empty() && msg.back() == '\n') msg.pop_back();
  std::printf("  %-44s %s: %s\n", what, died ? "stopped" : "NOT stopped", died ? "ok" : "FAILED");
  if (!msg.empty()) std::printf("    (%s)\n", msg.c_str());
  return died;
}

bool misuse() {
  bool ok = true;
  constexpr size_t kSmem = 1024;
  ok &= dies("ldmatrix row address not 16-byte aligned", [] {
    emu::launch(dim3(1), 32, kSmem, [] {
      REMORA_FLASH_SMEM(sm);
      uint32_t r[2];
      ldmatrix_x2(r, reinterpret_cast<char*>(sm) + 16 * (threadIdx.x % 16) + (threadIdx.x == 3 ? 4 : 0));
    });
  });
  ok &= dies("ldmatrix row address outside shared memory", [] {
    static uint16_t global[512];
    emu::launch(dim3(1), 32, kSmem, [] {
      REMORA_FLASH_SMEM(sm);
      uint32_t r[4];
      ldmatrix_x4(r, threadIdx.x == 20 ? static_cast<void*>(global) : reinterpret_cast<char*>(sm) + 16 * threadIdx.x);
    });
  });
  ok &= dies("lanes in different collectives", [] {
    emu::launch(dim3(1), 32, kSmem, [] {
      REMORA_FLASH_SMEM(sm);
      const char* p = reinterpret_cast<char*>(sm) + 16 * threadIdx.x;
      if (threadIdx.x == 7) {
        uint32_t r[2];
        ldmatrix_x2_trans(r, p);
      } else {
        uint32_t r[2];
        ldmatrix_x2(r, p);
      }
    });
  });
  ok &= dies("a lane that skips an mma", [] {
    emu::launch(dim3(1), 64, kSmem, [] {
      uint32_t a[4] = {}, b[2] = {};
      float d[4], c[4] = {};
      if (threadIdx.x != 40) mma_m16n8k16_bf16(d, a, b, c);
    });
  });
  return ok;
}

// Every self-test; adds the number run to n and returns the number failed.
int run_all(int& n) {
  std::printf("== mma.sync / ldmatrix emulation\n");
  int failed = 0;
  auto check = [&](bool ok) {
    ++n;
    failed += !ok;
  };
  check(layouts());
  check(half_conversions());
  for (Ty t : {Ty::bf16, Ty::f16}) {
    const std::string p = t == Ty::bf16 ? "bf16: " : "f16: ";
    check(run_gemm({p + "A ldmatrix.x4, B^T ldmatrix.x2", t, ALoad::x4, BLoad::x2}, false));
    check(run_gemm({p + "A ldmatrix.x4, B^T ldmatrix.x4", t, ALoad::x4, BLoad::x4}, false));
    check(run_gemm({p + "A ldmatrix.x4, B^T ldmatrix.x1", t, ALoad::x4, BLoad::x1}, false));
    check(run_gemm({p + "A ldmatrix.x4, B ldmatrix.x2.trans", t, ALoad::x4, BLoad::x2_trans}, false));
    check(run_gemm({p + "A ldmatrix.x4, B ldmatrix.x4.trans", t, ALoad::x4, BLoad::x4_trans}, false));
    check(run_gemm({p + "A ldmatrix.x4, B ldmatrix.x1.trans", t, ALoad::x4, BLoad::x1_trans}, false));
    check(run_gemm({p + "A^T ldmatrix.x4.trans, B^T ldmatrix.x2", t, ALoad::x4_trans, BLoad::x2}, false));
    check(run_gemm({p + "A, B^T per-lane loads", t, ALoad::lanes, BLoad::lanes}, false));
  }
  check(run_gemm({"tf32: m16n8k8, A, B^T per-lane loads", Ty::tf32, ALoad::lanes, BLoad::lanes}, false));
  std::printf("  -- deliberate layout errors (each must give a wrong product)\n");
  check(run_gemm({"bf16: A registers 1 and 2 swapped", Ty::bf16, ALoad::lanes, BLoad::lanes,
                  Fault::a_regs_1_2_swapped}, true));
  check(run_gemm({"bf16: B filled as if row-major", Ty::bf16, ALoad::lanes, BLoad::lanes, Fault::b_as_row}, true));
  check(run_gemm({"f16: B ldmatrix.x2 without .trans", Ty::f16, ALoad::x4, BLoad::x2_trans, Fault::no_trans}, true));
  check(run_gemm({"f16: B ldmatrix.x4 without .trans", Ty::f16, ALoad::x4, BLoad::x4_trans, Fault::no_trans}, true));
  check(run_gemm({"bf16: B ldmatrix.x1 without .trans", Ty::bf16, ALoad::x4, BLoad::x1_trans, Fault::no_trans},
                 true));
  check(run_gemm({"bf16: A^T ldmatrix.x4 without .trans", Ty::bf16, ALoad::x4_trans, BLoad::x2, Fault::no_trans},
                 true));
  check(run_gemm({"bf16: D rows g + 8 stored at row g", Ty::bf16, ALoad::x4, BLoad::x2, Fault::d_rows}, true));
  check(run_gemm({"bf16: lane 13 alone swaps a0's halves", Ty::bf16, ALoad::x4, BLoad::x4, Fault::lane13_halves},
                 true));
  check(run_gemm({"bf16: lane 5's ldmatrix row one row down", Ty::bf16, ALoad::x4, BLoad::x2, Fault::lane5_address},
                 true));
  check(run_gemm({"tf32: A registers 1 and 2 swapped", Ty::tf32, ALoad::lanes, BLoad::lanes,
                  Fault::a_regs_1_2_swapped}, true));
  check(run_gemm({"tf32: B with k and n exchanged", Ty::tf32, ALoad::lanes, BLoad::lanes, Fault::b_as_row}, true));
  std::printf("  -- misuse the emulator stops at\n");
  check(misuse());
  return failed;
}

}  // namespace mma_selftest
