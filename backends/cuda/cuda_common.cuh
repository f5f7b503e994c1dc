// Shared by the CUDA backend's translation units (never included outside
// backends/cuda/): error checks, launch sizes, a scratch-buffer helper, and
// dtype dispatch.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "../../core/error.h"
#include "../backend.h"

namespace remora {
namespace cuda {

// A CUDA runtime call that fails becomes a remora::Error naming the call.
#define REMORA_CUDA_CHECK(expr)                                                          \
  do {                                                                                   \
    cudaError_t remora_cuda_err_ = (expr);                                               \
    REMORA_CHECK(remora_cuda_err_ == cudaSuccess,                                        \
                 "cuda: " #expr " failed: " << cudaGetErrorString(remora_cuda_err_)      \
                                            << " (" << cudaGetErrorName(remora_cuda_err_) \
                                            << ")");                                     \
  } while (0)

// After every launch: a bad configuration is reported here; with
// REMORA_CUDA_SYNC=1 in the environment the kernel is also waited for, so an
// illegal address is reported by the kernel that caused it.
void check_launch(const char* kernel);

constexpr int kThreads = 256;
inline unsigned grid_for(int64_t n, int threads = kThreads) {
  int64_t b = (n + threads - 1) / threads;
  if (b < 1) b = 1;
  if (b > (int64_t(1) << 20)) b = int64_t(1) << 20;  // grid-stride loops cover the rest
  return unsigned(b);
}

// Device scratch memory from the caching allocator of the backend current on
// this thread, freed on scope exit to that same allocator (a device switch in
// between does not matter).
class CudaBackend;
void* scratch_alloc(size_t nbytes, CudaBackend** owner);
void scratch_free(CudaBackend* owner, void* p, size_t nbytes);
struct Scratch {
  void* p = nullptr;
  size_t n = 0;
  CudaBackend* owner = nullptr;
  explicit Scratch(size_t nbytes) : n(nbytes) {
    if (nbytes) p = scratch_alloc(nbytes, &owner);
  }
  ~Scratch() {
    if (p) scratch_free(owner, p, n);
  }
  void allocate(size_t nbytes) {  // (re)allocates; the old contents are dropped
    if (p) scratch_free(owner, p, n);
    p = nbytes ? scratch_alloc(nbytes, &owner) : nullptr;
    n = nbytes;
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  template <typename T>
  T* as() const { return static_cast<T*>(p); }
};

// f32 -> float, f64 -> double; anything else is an Error naming the kernel.
template <typename F>
void dispatch_float(DType dt, const char* kernel, F&& f) {
  switch (dt) {
    case DType::f32: f(float{}); break;
    case DType::f64: f(double{}); break;
    default: REMORA_FAIL("cuda " << kernel << ": expected f32 or f64, got " << dtype_name(dt));
  }
}
template <typename F>
void dispatch_all(DType dt, F&& f) {
  switch (dt) {
    case DType::f32: f(float{}); break;
    case DType::f64: f(double{}); break;
    case DType::i64: f(int64_t{}); break;
    default: REMORA_FAIL("cuda: unknown dtype code " << int(dt) << " (a kernel would launch nothing)");
  }
}

}  // namespace cuda
}  // namespace remora
