// SPDX-License-Identifier: BSD-3-Clause
// CUDA backend: fills, Philox random numbers and dropout masks.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>

#include "../../core/philox.h"

#include "cuda_backend.cuh"

namespace remora {
namespace cuda {

namespace {

// ---------------------------------------------------------------------------
// Fills and random numbers. The Philox streams are the CPU's (core/philox.h):
// the same counters, the same 53-bit uniforms, and the mul/add of the affine
// maps rounded separately (__dmul_rn / __dadd_rn: nvcc would otherwise fuse
// them into one FMA and round differently from the CPU).
// ---------------------------------------------------------------------------
template <typename T>
__global__ void k_fill(T* o, int64_t n, T v) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    o[i] = v;
}
template <typename T>
__global__ void k_arange(T* o, int64_t n, double start, double step) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    o[i] = T(__dadd_rn(start, __dmul_rn(double(i), step)));
}
template <typename T>
__global__ void k_uniform(T* o, int64_t n, double lo, double hi, uint64_t seed, uint64_t off) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const double u = philox::uniform(philox::philox(seed, off + uint64_t(i)));
    const T v = T(__dadd_rn(lo, __dmul_rn(__dadd_rn(hi, -lo), u)));
    o[i] = v < T(hi) ? v : T(lo);
  }
}
template <typename T>
__global__ void k_normal(T* o, int64_t n, double mean, double sd, uint64_t seed, uint64_t off) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    o[i] = T(__dadd_rn(mean, __dmul_rn(sd, philox::normal(philox::philox(seed, off + uint64_t(i))))));
}
template <typename T>
__global__ void k_bernoulli(T* o, int64_t n, double keep, T scale, uint64_t seed, uint64_t off) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    o[i] = philox::kept(seed, off, uint64_t(i), philox::keep_threshold(keep)) ? scale : T(0);
}


}  // namespace

void CudaBackend::fill(DType dt, void* out, int64_t n, double value) {
  if (n <= 0) return;
  use();
  dispatch_storage(dt, [&](auto tag) {  // every dtype: zeros(.., kBool) too
    using T = decltype(tag);
    k_fill<T><<<grid_for(n), kThreads, 0, stream()>>>(static_cast<T*>(out), n, T(value));
  });
  check_launch("fill");
}

void CudaBackend::arange(DType dt, void* out, int64_t n, double start, double step) {
  if (n <= 0) return;
  use();
  dispatch_storage(dt, [&](auto tag) {
    using T = decltype(tag);
    k_arange<T><<<grid_for(n), kThreads, 0, stream()>>>(static_cast<T*>(out), n, start, step);
  });
  check_launch("arange");
}

void CudaBackend::uniform(const UniformArgs& args) {
  if (args.n <= 0) return;
  use();
  dispatch_float(args.dt, "uniform", [&](auto tag) {
    using T = decltype(tag);
    k_uniform<T><<<grid_for(args.n), kThreads, 0, stream()>>>(static_cast<T*>(args.out), args.n, args.lo,
                                                              args.hi, args.seed, args.offset);
  });
  check_launch("uniform");
}

void CudaBackend::normal(const NormalArgs& args) {
  if (args.n <= 0) return;
  use();
  dispatch_float(args.dt, "normal", [&](auto tag) {
    using T = decltype(tag);
    k_normal<T><<<grid_for(args.n), kThreads, 0, stream()>>>(static_cast<T*>(args.out), args.n, args.mean,
                                                             args.std, args.seed, args.offset);
  });
  check_launch("normal");
}

void CudaBackend::bernoulli_mask(const BernoulliMaskArgs& args) {
  if (args.n <= 0) return;
  use();
  dispatch_float(args.dt, "bernoulli_mask", [&](auto tag) {
    using T = decltype(tag);
    k_bernoulli<T><<<grid_for(args.n), kThreads, 0, stream()>>>(static_cast<T*>(args.out), args.n, args.keep,
                                                                T(args.scale), args.seed, args.offset);
  });
  check_launch("bernoulli_mask");
}

}  // namespace cuda
}  // namespace remora
