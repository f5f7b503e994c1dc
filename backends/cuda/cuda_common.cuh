// SPDX-License-Identifier: BSD-3-Clause
// Shared by the CUDA backend's translation units (never included outside
// backends/cuda/): error checks, launch sizes, the current backend's stream, a
// scratch-buffer helper, device-cached constants, the deferred device error
// record, and dtype dispatch.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "../../core/error.h"
#include "../../core/half.h"
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

// The stream of the backend current on this thread (CudaBackend::activate):
// every kernel launch, cuBLAS call, async copy and memset in backends/cuda/ is
// queued on it (`k<<<grid, block, 0, stream()>>>`), never on the legacy default
// stream. An Error before any CUDA call on this thread.
cudaStream_t stream();

// A device copy of `n` host bytes (small, read-only tables such as the REM head
// descriptors), cached on the current backend by content: uploaded once per
// distinct content on stream() without a host sync, then reused; never freed.
const void* device_constant(const void* host, size_t n);

// A deferred device error: kernels that validate their inputs (cross-entropy
// targets, gather / scatter indices) record the first bad value here instead of
// reading out of bounds, and the host raises it as a remora::Error at the next
// synchronisation (copy_to_host, hence .item() / to_vector(); or after the launch
// with REMORA_CUDA_SYNC=1). The record is mapped pinned host memory, one per
// backend, so reading it costs no copy.
enum DeviceErrorCode : unsigned long long {
  kDevErrNone = 0,
  kDevErrTarget = 1,  // cross_entropy: value = target, limit = classes, extra = ignore_index
  kDevErrIndex = 2,   // index_select / embedding / index_add: value = index, limit = size
};
struct DeviceError {
  unsigned long long code;
  long long value, limit, extra;
};
// The current backend's record (device address).
DeviceError* device_error();
#ifdef __CUDACC__
// The first report wins (a later bad value in the same or another kernel is dropped).
__device__ __forceinline__ void report_device_error(DeviceError* e, unsigned long long code,
                                                    long long value, long long limit,
                                                    long long extra) {
  if (atomicCAS(&e->code, 0ull, code) == 0ull) {
    e->value = value;
    e->limit = limit;
    e->extra = extra;
    __threadfence_system();
  }
}
#endif

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
// dispatch_all plus the 16-bit storage types (core/half.h: each element
// computed in float, or a double accumulator, and rounded once), for copy
// (dtype conversions), binary, where, fill, arange and reduce. The other CUDA
// kernels take f32 and f64 only (an Error names them); 16-bit products go to
// cuBLAS through gemm.
template <typename F>
void dispatch_copy(DType dt, F&& f) {
  switch (dt) {
    case DType::bf16: f(bf16_t{}); break;
    case DType::f16: f(f16_t{}); break;
    default: dispatch_all(dt, f);
  }
}

// dispatch_copy plus the storage dtypes (bool, i32, u8): for the copy that
// converts between dtypes and for where's condition.
template <typename F>
void dispatch_storage(DType dt, F&& f) {
  switch (dt) {
    case DType::b8: f(bool{}); break;
    case DType::i32: f(int32_t{}); break;
    case DType::u8: f(uint8_t{}); break;
    default: dispatch_copy(dt, f);
  }
}

}  // namespace cuda
}  // namespace remora
