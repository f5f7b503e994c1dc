// SPDX-License-Identifier: BSD-3-Clause
// Matrix products with 16-bit operands (bf16 or f16) and f32 accumulation on
// the CPU (cpu_bgemm.cpp), behind the backend's gemm for DType::bf16 / f16.
// Not included outside backends/cpu/ (and the tests of its paths).
//
// Paths, chosen once per process (bgemm_path()):
//  - openblas: OpenBLAS's cblas_sbgemm (bf16 only), where the loaded OpenBLAS
//    exports it and runs a kernel set with native bf16 instructions
//    (cooperlake, sapphirerapids); elsewhere its sbgemm is a slow generic loop.
//  - avx512bf16: Remora's 6 x 32 register tiles on vdpbf16ps (bf16 only;
//    AVX-512 F/BW/VL + AVX512_BF16, compiled with a target attribute, picked by
//    cpuid and REMORA_CPU_ISA's cap). vdpbf16ps treats subnormal inputs as
//    zero and flushes subnormal results, as the instruction does.
//  - convert: the operand blocks converted to f32 (exact) and multiplied by
//    the f32 kernel (Remora's AVX2 tiles or OpenBLAS's sgemm): on CPUs without
//    bf16 arithmetic (AVX2), and for f16.
//  - scalar: a plain loop with one f32 accumulator per element of C; the
//    reference the tests hold the others to.
//  - avx512bf16_emulated: the avx512bf16 path's packing and tiles with the
//    instruction done in scalar code (its order, its subnormal flushing):
//    slow, for the tests, which thus check that path's indexing on CPUs
//    without AVX512_BF16.
// REMORA_BF16_GEMM=auto|openblas|avx512bf16|convert|scalar|avx512bf16_emulated overrides the
// choice; a path this machine cannot run is an Error naming what it lacks.
#pragma once
#include <cstdint>

#include "../../core/dtype.h"

namespace remora {
namespace cpu_impl {

enum class BgemmPath { scalar = 0, convert = 1, avx512bf16 = 2, openblas = 3, avx512bf16_emulated = 4 };
const char* bgemm_path_name(BgemmPath p);
// The path of bf16 products in this process (f16 runs `convert` unless
// `scalar` is forced).
BgemmPath bgemm_path();
// Whether this machine (CPU, REMORA_CPU_ISA cap, loaded OpenBLAS) can run p.
bool bgemm_path_available(BgemmPath p);

// Row-major C[m, n] = alpha op(A) op(B) + beta C, single-threaded, with A and
// B of dt (bf16 or f16; op: transposed when ta / tb) and C in f32. beta = 0
// never reads C. On `path` (bgemm_path() by default).
void half_gemm_f32(DType dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                   const void* a, int64_t lda, const void* b, int64_t ldb, float beta, float* c,
                   int64_t ldc);
void half_gemm_f32_on(BgemmPath path, DType dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                      float alpha, const void* a, int64_t lda, const void* b, int64_t ldb, float beta,
                      float* c, int64_t ldc);

}  // namespace cpu_impl
}  // namespace remora
