// SPDX-License-Identifier: BSD-3-Clause
// Warp-level tensor-core building blocks written as inline PTX (sm_80 and
// later), for kernels that keep their tiles in registers in the mma.sync
// fragment layouts (backends/cuda/cuda_flash_mma.cu):
//   mma_m16n8k16_bf16 / _f16   D(16x8, f32) = A(16x16) B(16x8) + C
//   mma_m16n8k8_tf32           D(16x8, f32) = A(16x8)  B(8x8)  + C
//   ldmatrix_x1/x2/x4[_trans]  one, two or four 8x8 b16 matrices from shared
//                              memory, each lane giving the address of one row
//   pack_bf16x2 / pack_f16x2   two floats -> one register of two 16-bit
//                              elements (round to nearest even; lo in the low half)
//   to_tf32                    a float as an mma tf32 operand (round to nearest)
//   cp_async16, cp_async_commit, cp_async_wait<N>   16-byte global -> shared
//                              copies (zero fill when not valid)
// The register layouts each lane must use (which elements of A, B, C and D a
// lane holds, and what ldmatrix hands it) are described, with the emulation
// itself, in tests/flash_emu/emu_mma.h. Under REMORA_FLASH_EMULATED (the CPU
// emulator of tests/flash_emu) every wrapper calls that emulator instead of
// the asm; kernels call only these wrappers, so the emulated kernel is the
// GPU kernel.
#pragma once
#include <cstdint>

#ifndef REMORA_FLASH_EMULATED
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#endif

namespace remora {
namespace cuda {
namespace mma {

#if !defined(REMORA_FLASH_EMULATED) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
// mma.sync with bf16 / tf32 and ldmatrix need sm_80 (sm_75 for f16): device
// code for older targets traps (its kernels are never launched there).
#define REMORA_MMA_TRAP() asm volatile("trap;")
#endif

__device__ __forceinline__ void mma_m16n8k16_bf16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                                                  const float (&c)[4]) {
#if defined(REMORA_FLASH_EMULATED)
  emu::mma_m16n8k16(emu::Ty::bf16, d, a, b, c);
#elif defined(REMORA_MMA_TRAP)
  REMORA_MMA_TRAP();
#else
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%10, %11, %12, %13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]),
        "f"(c[3]));
#endif
}

__device__ __forceinline__ void mma_m16n8k16_f16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                                                 const float (&c)[4]) {
#if defined(REMORA_FLASH_EMULATED)
  emu::mma_m16n8k16(emu::Ty::f16, d, a, b, c);
#elif defined(REMORA_MMA_TRAP)
  REMORA_MMA_TRAP();
#else
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%10, %11, %12, %13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]),
        "f"(c[3]));
#endif
}

__device__ __forceinline__ void mma_m16n8k8_tf32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                                                 const float (&c)[4]) {
#if defined(REMORA_FLASH_EMULATED)
  emu::mma_m16n8k8_tf32(d, a, b, c);
#elif defined(REMORA_MMA_TRAP)
  REMORA_MMA_TRAP();
#else
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%10, %11, %12, %13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]),
        "f"(c[3]));
#endif
}

// The mma operand types by element type: Elem<bf16> / Elem<__half>::mma runs
// m16n8k16 on registers of that type, ::pack rounds two floats into one.
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
#ifdef REMORA_FLASH_EMULATED
  return uint32_t(__float2bfloat16_rn(lo).x) | uint32_t(__float2bfloat16_rn(hi).x) << 16;
#else
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // .x = lo: the low half
  return *reinterpret_cast<const uint32_t*>(&v);
#endif
}
__device__ __forceinline__ uint32_t pack_f16x2(float lo, float hi) {
#ifdef REMORA_FLASH_EMULATED
  return uint32_t(emu::float_to_half(lo)) | uint32_t(emu::float_to_half(hi)) << 16;
#else
  const __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
#endif
}
__device__ __forceinline__ uint32_t to_tf32(float x) {
#ifdef REMORA_FLASH_EMULATED
  const float r = nvcuda::wmma::__float_to_tf32(x);
  uint32_t u;
  std::memcpy(&u, &r, 4);
  return u;
#else
  uint32_t u;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(u) : "f"(x));
  return u;
#endif
}

template <class E>
struct Elem;
template <>
struct Elem<__nv_bfloat16> {
  __device__ __forceinline__ static void mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                                             const float (&c)[4]) {
    mma_m16n8k16_bf16(d, a, b, c);
  }
  __device__ __forceinline__ static uint32_t pack(float lo, float hi) { return pack_bf16x2(lo, hi); }
};
template <>
struct Elem<__half> {
  __device__ __forceinline__ static void mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                                             const float (&c)[4]) {
    mma_m16n8k16_f16(d, a, b, c);
  }
  __device__ __forceinline__ static uint32_t pack(float lo, float hi) { return pack_f16x2(lo, hi); }
};

// ldmatrix: p is this lane's row address in shared memory (16-byte aligned):
// lanes 8m .. 8m + 7 address rows 0..7 of matrix m; r[m] receives this lane's
// elements of matrix m.
#ifndef REMORA_FLASH_EMULATED
__device__ __forceinline__ unsigned smem_u32(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
#endif

#if defined(REMORA_FLASH_EMULATED)
#define REMORA_LDMATRIX(N, TRANS, ...) emu::ldmatrix<N>(r, p, TRANS)
#elif defined(REMORA_MMA_TRAP)
#define REMORA_LDMATRIX(N, TRANS, ...) REMORA_MMA_TRAP()
#else
#define REMORA_LDMATRIX(N, TRANS, ...) __VA_ARGS__
#endif

__device__ __forceinline__ void ldmatrix_x1(uint32_t (&r)[1], const void* p) {
  REMORA_LDMATRIX(1, false, asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n"
                                         : "=r"(r[0])
                                         : "r"(smem_u32(p))));
}
__device__ __forceinline__ void ldmatrix_x1_trans(uint32_t (&r)[1], const void* p) {
  REMORA_LDMATRIX(1, true, asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n"
                                        : "=r"(r[0])
                                        : "r"(smem_u32(p))));
}
__device__ __forceinline__ void ldmatrix_x2(uint32_t (&r)[2], const void* p) {
  REMORA_LDMATRIX(2, false, asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
                                         : "=r"(r[0]), "=r"(r[1])
                                         : "r"(smem_u32(p))));
}
__device__ __forceinline__ void ldmatrix_x2_trans(uint32_t (&r)[2], const void* p) {
  REMORA_LDMATRIX(2, true, asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
                                        : "=r"(r[0]), "=r"(r[1])
                                        : "r"(smem_u32(p))));
}
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
  REMORA_LDMATRIX(4, false, asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                                         : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                                         : "r"(smem_u32(p))));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* p) {
  REMORA_LDMATRIX(4, true,
                  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                               : "r"(smem_u32(p))));
}
#undef REMORA_LDMATRIX

// cp.async: 16 bytes global -> shared (16 zero bytes, nothing read, when not
// valid); commit closes a group; wait<N> returns when at most N of this
// thread's groups are in flight. (The emulator's versions are emu.h's.)
#ifdef REMORA_FLASH_EMULATED
using ::cp_async16;
using ::cp_async_commit;
using ::cp_async_wait;
#else
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(dst)), "l"(src),
               "r"(valid ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
#endif

#ifdef REMORA_MMA_TRAP
#undef REMORA_MMA_TRAP
#endif

}  // namespace mma

#ifndef REMORA_FLASH_EMULATED
// The mma.sync FlashAttention-2 forward of cuda_flash_mma.cu: O = softmax(
// scale q k^T + kp, causal) v and lse for q [B, H, Lq, D], k, v [B, H, Lk, D]
// (contiguous bf16, or f16 with f16 = true; 16-byte aligned), D = 32, 64 or
// 128; O [B, H, Lq, D] and lse [B, H, Lq] in f32. kp: null or [B, Lk] f32
// added to the scores (0 or -inf for key padding). causal: row i sees keys
// j <= i + Lk - Lq, and with window >= 0 only keys j > i + Lk - Lq - window.
// Returns false, having done nothing, when it does not take the problem (a
// D other than 32, 64, 128, misaligned operands, a pre-Ampere device, too
// little shared memory). Runs on the current backend's stream.
struct FlashMmaForward {
  int64_t B = 0, H = 0, Lq = 0, Lk = 0, D = 0;
  float scale = 1.f;
  bool f16 = false;
  const void *q = nullptr, *k = nullptr, *v = nullptr;
  const float* kp = nullptr;
  bool causal = false;
  int64_t window = -1;
  float* o = nullptr;
  float* lse = nullptr;
};
bool flash_mma_forward(const FlashMmaForward& p);
#endif

}  // namespace cuda
}  // namespace remora
