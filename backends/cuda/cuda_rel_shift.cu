// SPDX-License-Identifier: BSD-3-Clause
// CUDA kernels of Transformer-XL's relative shift (backends/kernels.h,
// RelShiftKernels; docs/math.md#relative-attention-and-rel-shift): one thread per output element in a grid-stride
// loop. The CPU version (backends/cpu/cpu_rel_shift.cpp) is the reference.
#include <cuda_runtime.h>

#include "../kernels.h"
#include "cuda_common.cuh"

namespace remora {
namespace cuda {

namespace {

// out[n, i, j] = scale * x[n, i, j + s_i] (0 past the row) + bias[i, j], s_i = Lq - 1 - i.
template <typename T>
__global__ void k_rel_shift(int64_t total, int64_t Lq, int64_t Lk, T scale, const T* x,
                            const T* bias, T* out) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t j = e % Lk, r = e / Lk, i = r % Lq, c = j + Lq - 1 - i;
    T v = c < Lk ? scale * x[r * Lk + c] : T(0);
    if (bias) v += bias[i * Lk + j];
    out[e] = v;
  }
}

// dx[n, i, c] = scale * dout[n, i, c - s_i] where c >= s_i, else 0.
template <typename T>
__global__ void k_rel_shift_backward(int64_t total, int64_t Lq, int64_t Lk, T scale,
                                     const T* dout, T* dx) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < total;
       e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = e % Lk, r = e / Lk, s = Lq - 1 - r % Lq;
    dx[e] = c >= s ? scale * dout[r * Lk + c - s] : T(0);
  }
}

void rel_shift_forward(const RelShiftArgs& a) {
  const int64_t total = a.N * a.Lq * a.Lk;
  if (total <= 0) return;
  dispatch_float(a.dt, "rel_shift", [&](auto tag) {
    using T = decltype(tag);
    k_rel_shift<T><<<grid_for(total), kThreads, 0, stream()>>>(
        total, a.Lq, a.Lk, T(a.scale), static_cast<const T*>(a.x), static_cast<const T*>(a.bias),
        static_cast<T*>(a.out));
  });
  check_launch("rel_shift");
}

void rel_shift_backward(const RelShiftBackwardArgs& a) {
  const int64_t total = a.N * a.Lq * a.Lk;
  if (total <= 0) return;
  dispatch_float(a.dt, "rel_shift backward", [&](auto tag) {
    using T = decltype(tag);
    k_rel_shift_backward<T><<<grid_for(total), kThreads, 0, stream()>>>(
        total, a.Lq, a.Lk, T(a.scale), static_cast<const T*>(a.dout), static_cast<T*>(a.dx));
  });
  check_launch("rel_shift backward");
}

const RelShiftKernels kCudaRelShift = {&rel_shift_forward, &rel_shift_backward};
const bool g_registered = [] {
  register_kernels(DeviceType::cuda, &kCudaRelShift);
  return true;
}();

}  // namespace

}  // namespace cuda
}  // namespace remora
