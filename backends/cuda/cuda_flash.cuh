// SPDX-License-Identifier: BSD-3-Clause
// The tensor-core FlashAttention-2 path of the fused RSA attention
// (backends/cuda/cuda_flash.cu): TF32 on f32 operands, or bf16 operands
// (RsaFusedProblem::bf16_operands). The cuda RsaKernels entries in
// cuda_attention.cu call these first; each returns false, having done
// nothing, when it does not take the problem (f32 operands with TF32 off, a
// dtype other than f32, a head width other than 32, 64 or 128, the
// positional term at 128, a pre-Ampere device, misaligned operands, too
// little shared memory), and the reference kernels run.
#pragma once
#include <cstdint>

#include "../kernels.h"

namespace remora {
namespace cuda {

bool flash_rsa_forward(const RsaForwardArgs& args);
bool flash_rsa_backward(const RsaBackwardArgs& args);
// Calls of the two entries above that ran the tensor-core kernels, in this
// process (RsaKernels::tensor_core_launches; tests assert that it moves).
int64_t flash_rsa_launches();

}  // namespace cuda
}  // namespace remora
