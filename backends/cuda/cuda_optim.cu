// SPDX-License-Identifier: BSD-3-Clause
// CUDA kernel of the fused optimizer step (backends/kernels.h, OptimKernels):
// one thread per element in a grid-stride loop. The CPU version
// (backends/cpu/cpu_optim.cpp) is the reference.
#include <cuda_runtime.h>

#include "../kernels.h"
#include "cuda_common.cuh"

namespace remora {
namespace cuda {

namespace {

// In T, as the CPU kernel.
template <typename T>
__global__ void k_adam(int64_t n, T keep, T l2, T b1, T c1, T b2, T c2, T step, T inv_bc2, T eps,
                       T* p, const T* g, T* m, T* v) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const T p0 = p[i];
    const T gi = g[i] + l2 * p0;
    const T mi = b1 * m[i] + c1 * gi;
    const T vi = b2 * v[i] + c2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] = p0 * keep - step * mi / (sqrt(vi) * inv_bc2 + eps);
  }
}

void adam(const AdamArgs& a) {
  if (a.n <= 0) return;
  dispatch_float(a.dt, "adam", [&](auto tag) {
    using T = decltype(tag);
    k_adam<T><<<grid_for(a.n), kThreads, 0, stream()>>>(
        a.n, T(1 - a.s.decay), T(a.s.l2), T(a.s.beta1), T(1 - a.s.beta1), T(a.s.beta2),
        T(1 - a.s.beta2), T(a.s.step_size), T(1 / a.s.sqrt_bc2), T(a.s.eps),
        static_cast<T*>(a.p), static_cast<const T*>(a.g), static_cast<T*>(a.m), static_cast<T*>(a.v));
  });
  check_launch("adam");
}

const OptimKernels kCudaOptim = {&adam};
const bool g_registered = [] {
  register_kernels(DeviceType::cuda, &kCudaOptim);
  return true;
}();

}  // namespace

}  // namespace cuda
}  // namespace remora
