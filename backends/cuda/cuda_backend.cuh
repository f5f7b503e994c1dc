// SPDX-License-Identifier: BSD-3-Clause
// The CUDA backend's class, shared by its translation units (never included
// outside backends/cuda/). Methods are defined by concern: cuda_backend.cu
// (the object, memory, gemm, registration), cuda_random.cu, cuda_elementwise.cu,
// cuda_reduce.cu (reductions, gather/scatter) and cuda_rows.cu (softmax,
// layer_norm, cross_entropy). The REM, SRU and fused RSA kernels are kernel
// tables (cuda_rem.cu, cuda_sru.cu, cuda_attention.cu; backends/kernels.h).
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <map>
#include <mutex>
#include <string>

#include "../caching_allocator.h"
#include "../kernels.h"
#include "cuda_common.cuh"

namespace remora {
namespace cuda {

// Device memory through the shared caching allocator (backends/caching_allocator.h).
struct DeviceRaw {
  int dev = 0;
  char label[16] = "cuda";
  // Both run with this device current (and restore the caller's), so a block
  // freed after a device switch goes back to the device that gave it.
  void* alloc(size_t n) {
    DeviceGuard g(dev);
    void* p = nullptr;
    if (cudaMalloc(&p, n) != cudaSuccess) {
      cudaGetLastError();  // clear the error; the allocator releases its cache and retries
      return nullptr;
    }
    return p;
  }
  // Blocks are reused in stream order: each device has exactly one stream (its
  // backend's, CudaBackend::stream()) and every kernel, cuBLAS call and copy
  // touching the device's memory is queued on it, so a block freed on the host
  // while a queued kernel still reads it can be handed out again at once: any
  // later use is queued behind that kernel. A segment given back to the driver
  // must be idle: the device is synchronised first (cudaFree would too, but
  // this does not rely on it).
  void free(void* p, size_t) {
    DeviceGuard g(dev);
    cudaDeviceSynchronize();
    cudaFree(p);
  }
  struct DeviceGuard {
    int prev = -1;
    bool switched = false;
    explicit DeviceGuard(int d) {
      if (cudaGetDevice(&prev) == cudaSuccess && prev != d) switched = cudaSetDevice(d) == cudaSuccess;
    }
    ~DeviceGuard() {
      if (switched) cudaSetDevice(prev);
    }
  };
  const char* name() const { return label; }
};
using CudaAllocator = CachingAllocator<DeviceRaw>;

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int dev);
  const char* name() const override { return name_; }
  Device device() const override { return Device::cuda(dev_); }
  // Makes this device current on this thread for the calls that follow
  // (kernel tables and Scratch use the thread's current backend).
  void activate() override;
  // Fused RSA where rsa_fused_takes, the fused Adam step in f32 and f64; no
  // fused dropout (ops/ keeps a mask tensor).
  bool supports(OpKind op, const OpProblem& p) const override;
  void use() { activate(); }
  CudaAllocator& allocator() { return alloc_; }

  void* alloc(size_t nbytes) override;
  void free(void* p, size_t nbytes) override;
  MemoryStats memory_stats() const override { return alloc_.stats(); }
  // Waits for the stream, then gives wholly free segments back.
  void empty_cache() override;
  // Asynchronous on stream(): the source is copied into a pinned staging slot
  // on the host before this returns (so the caller may reuse it at once), and
  // the device copy is queued behind the work already on the stream.
  void copy_from_host(void* dst, const void* src, size_t n) override;
  // Waits for the stream (the copy is queued behind the kernels that write
  // src), then raises a deferred device error if a kernel recorded one.
  void copy_to_host(void* dst, const void* src, size_t n) override;

  // This backend's non-blocking stream (created with the backend).
  cudaStream_t stream() const { return stream_; }
  void* native_stream() override { return stream_; }
  // Waits for every queued kernel and copy, then raises a pending device error.
  void synchronize();
  // Raises the error recorded in the DeviceError (if any) and clears it; call
  // only after the stream is synchronised.
  void raise_device_error();
  DeviceError* device_error();
  const void* device_constant(const void* host, size_t n);

  // cuda_random.cu
  void fill(DType dt, void* out, int64_t n, double value) override;
  void arange(DType dt, void* out, int64_t n, double start, double step) override;
  void uniform(const UniformArgs& a) override;
  void normal(const NormalArgs& a) override;
  void bernoulli_mask(const BernoulliMaskArgs& a) override;
  // cuda_elementwise.cu
  void copy(const CopyArgs& a) override;
  void binary(const BinaryArgs& a) override;
  void where(const WhereArgs& a) override;
  void unary(const UnaryArgs& a) override;
  void unary_grad(const UnaryGradArgs& a) override;
  // cuda_reduce.cu
  void reduce(const ReduceArgs& a) override;
  void index_select(const IndexArgs& a) override;
  void index_add(const IndexArgs& a) override;
  void cumsum(const CumsumArgs& a) override;
  // cuda_rows.cu
  void softmax(const SoftmaxArgs& a) override;
  void softmax_backward(const SoftmaxBackwardArgs& a) override;
  void layer_norm(const LayerNormArgs& a) override;
  void layer_norm_backward(const LayerNormBackwardArgs& a) override;
  void cross_entropy(const CrossEntropyArgs& a) override;
  void cross_entropy_backward(const CrossEntropyBackwardArgs& a) override;
  // cuda_backend.cu
  void gemm(const GemmArgs& a) override;

 private:
  cublasHandle_t handle();

  int dev_;
  char name_[16];
  CudaAllocator alloc_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  void* workspace_ = nullptr;  // cuBLAS workspace, from alloc_

  // Pinned staging for host <-> device copies: kStageSlots slots of
  // kStageBytes, used round robin; an event marks when the device has read a
  // slot, and a slot is reused only after its event (a copy queued
  // kStageSlots copies ago, normally long done).
  static constexpr int kStageSlots = 8;
  static constexpr size_t kStageBytes = size_t(1) << 20;
  char* stage_ = nullptr;  // kStageSlots * kStageBytes, cudaHostAlloc'ed on first use
  cudaEvent_t stage_done_[kStageSlots] = {};
  bool stage_used_[kStageSlots] = {};
  int stage_next_ = 0;
  bool stage_failed_ = false;  // no pinned memory: plain synchronous copies
  int take_stage_slot();

  DeviceError* error_host_ = nullptr;  // mapped pinned memory (host address)
  DeviceError* error_dev_ = nullptr;   // its device address

  std::map<std::string, void*> constants_;  // device_constant's cache, keyed by the bytes
  std::mutex host_mu_;                       // guards the staging slots and constants_
};

// The backend this thread made current last (null before any CUDA call).
CudaBackend* current_backend();

// Whether the fused RSA kernels (cuda_attention.cu) take a problem.
bool rsa_fused_takes(DType dt, const RsaFusedProblem& p);

}  // namespace cuda
}  // namespace remora
