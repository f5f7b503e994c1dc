// The CUDA backend: cuBLAS for gemm, Remora's own kernels for everything else.
//
// One backend object per device, all work on the legacy default stream, so
// every kernel, cuBLAS call and copy is ordered and a freed block can be handed
// out again at once (the caching allocator below never waits). Host <-> device
// copies are synchronous, as the Backend interface expects.
//
// Kernels are grid-stride loops over flat indices (elementwise, fills, RNG),
// one warp per row (softmax, layer_norm, cross_entropy), or one thread per
// output column (reductions over a middle axis). f32 data accumulates in f32
// inside a thread and in a tree across threads, except where the CPU backend
// sums in double (reductions, layer_norm's dw/db), which use double here too.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "../philox.h"
#include "cuda_backend.cuh"

namespace remora {
namespace cuda {

void check_launch(const char* kernel) {
  cudaError_t e = cudaGetLastError();
  REMORA_CHECK(e == cudaSuccess, "cuda: kernel " << kernel << " failed to launch: "
                                                 << cudaGetErrorString(e));
  static const bool sync = [] {
    const char* s = std::getenv("REMORA_CUDA_SYNC");
    return s && *s && std::strcmp(s, "0") != 0;
  }();
  if (sync) {
    e = cudaDeviceSynchronize();
    REMORA_CHECK(e == cudaSuccess, "cuda: kernel " << kernel << " failed: " << cudaGetErrorString(e));
  }
}

namespace {

const char* cublas_status_str(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "cuBLAS error";
  }
}
#define REMORA_CUBLAS_CHECK(expr)                                                     \
  do {                                                                                \
    cublasStatus_t remora_cublas_st_ = (expr);                                        \
    REMORA_CHECK(remora_cublas_st_ == CUBLAS_STATUS_SUCCESS,                          \
                 "cuda: " #expr " failed: " << cublas_status_str(remora_cublas_st_)); \
  } while (0)

// ---------------------------------------------------------------------------
// The backend object and memory.
// ---------------------------------------------------------------------------
thread_local CudaBackend* t_current = nullptr;  // for Scratch (the device of the running op)

DeviceAllocator::Options device_cache_options() {
  // 512-byte granularity; blocks of 1 MiB and more come from segments rounded
  // to 2 MiB; splits leave at least 512 bytes; at most 8 GiB cached by default
  // (REMORA_CUDA_CACHE_MB overrides).
  DeviceAllocator::Options o;
  o.round = 512;
  o.min_cached = 0;
  o.min_split = 512;
  o.segment_round = size_t(2) << 20;
  o.cap = size_t(8) << 30;
  return DeviceAllocator::Options::from_env("REMORA_CUDA_CACHE_MB", o);
}
DeviceRaw device_raw(int dev) {
  DeviceRaw r;
  r.dev = dev;
  snprintf(r.label, sizeof r.label, "cuda:%d", dev);
  return r;
}

}  // namespace

CudaBackend::CudaBackend(int dev) : dev_(dev), alloc_(device_raw(dev), device_cache_options()) {
  snprintf(name_, sizeof name_, "cuda:%d", dev);
}

void CudaBackend::activate() {
  int cur = -1;
  cudaGetDevice(&cur);
  if (cur != dev_) REMORA_CUDA_CHECK(cudaSetDevice(dev_));
  t_current = this;
}

CudaBackend* current_backend() { return t_current; }

void* CudaBackend::alloc(size_t nbytes) {
  use();
  return alloc_.alloc(nbytes);
}
void CudaBackend::free(void* p, size_t nbytes) { alloc_.free(p, nbytes); }
void CudaBackend::copy_from_host(void* dst, const void* src, size_t n) {
  if (!n) return;
  use();
  REMORA_CUDA_CHECK(cudaMemcpy(dst, src, n, cudaMemcpyHostToDevice));
}
void CudaBackend::copy_to_host(void* dst, const void* src, size_t n) {
  if (!n) return;
  use();
  REMORA_CUDA_CHECK(cudaMemcpy(dst, src, n, cudaMemcpyDeviceToHost));
}

cublasHandle_t CudaBackend::handle() {
  if (!cublas_) {
    REMORA_CUBLAS_CHECK(cublasCreate(&cublas_));
    // cuBLAS's workspace comes from the caching allocator too (32 MiB, what
    // cuBLAS asks for on Hopper), so it is counted and bounded with the rest.
    const size_t ws = size_t(32) << 20;
    workspace_ = alloc_.alloc(ws);
    REMORA_CUBLAS_CHECK(cublasSetWorkspace(cublas_, workspace_, ws));
  }
  return cublas_;
}

void CudaBackend::gemm(DType dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha,
          const void* a, int64_t lda, int64_t stride_a, const void* b, int64_t ldb,
          int64_t stride_b, double beta, void* c, int64_t ldc, int64_t stride_c,
          int64_t batch) {
  if (m <= 0 || n <= 0 || batch <= 0) return;
  use();
  REMORA_CHECK(m < (int64_t(1) << 31) && n < (int64_t(1) << 31) && k < (int64_t(1) << 31) &&
                   batch < (int64_t(1) << 31),
               "cuda gemm: dims " << m << " x " << n << " x " << k << " (batch " << batch
                                  << ") exceed cuBLAS's int range; split the matmul");
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: cuBLAS
  // gets B first, with n and m swapped. A leading dimension that cuBLAS would
  // reject but that is never used (a single row or column) is raised to the
  // minimum it accepts.
  if (!tb && k == 1) ldb = std::max<int64_t>(ldb, n);
  if (tb && n == 1) ldb = std::max<int64_t>(ldb, k);
  if (!ta && m == 1) lda = std::max<int64_t>(lda, k);
  if (ta && k == 1) lda = std::max<int64_t>(lda, m);
  ldc = std::max<int64_t>(ldc, n);
  REMORA_CHECK(lda < (int64_t(1) << 31) && ldb < (int64_t(1) << 31) && ldc < (int64_t(1) << 31),
               "cuda gemm: leading dimensions lda = " << lda << ", ldb = " << ldb << ", ldc = "
                                                       << ldc
                                                       << " exceed cuBLAS's int range; make the "
                                                          "operands contiguous or split the matmul");
  const cublasOperation_t opA = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t opB = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasHandle_t h = handle();
  if (dt == DType::f32) {
    REMORA_CUBLAS_CHECK(cublasSetMathMode(
        h, cuda_tf32() || gemm_bf16_operands() ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    const float al = float(alpha), be = float(beta);
    REMORA_CUBLAS_CHECK(cublasSgemmStridedBatched(
        h, opB, opA, int(n), int(m), int(k), &al, static_cast<const float*>(b), int(ldb),
        stride_b, static_cast<const float*>(a), int(lda), stride_a, &be,
        static_cast<float*>(c), int(ldc), stride_c, int(batch)));
  } else if (dt == DType::f64) {
    REMORA_CUBLAS_CHECK(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));
    REMORA_CUBLAS_CHECK(cublasDgemmStridedBatched(
        h, opB, opA, int(n), int(m), int(k), &alpha, static_cast<const double*>(b), int(ldb),
        stride_b, static_cast<const double*>(a), int(lda), stride_a, &beta,
        static_cast<double*>(c), int(ldc), stride_c, int(batch)));
  } else {
    REMORA_FAIL("cuda gemm: expected f32 or f64, got " << dtype_name(dt));
  }
}

namespace {

// cuda:index, or an Error that says why it cannot be had. The answer of
// cudaGetDeviceCount is asked once; backends live for the whole process
// (tensors may outlive static destructors).
Backend* get_cuda_backend(int index) {
  static std::mutex mu;
  static int count = -1;
  static std::string why;
  static std::vector<CudaBackend*> backends;
  std::lock_guard<std::mutex> lock(mu);
  if (count < 0) {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
      cudaGetLastError();
      why = std::string("cudaGetDeviceCount failed: ") + cudaGetErrorString(e) + " (" +
            cudaGetErrorName(e) + ")";
      n = 0;
    } else if (n == 0) {
      why = "cudaGetDeviceCount found no CUDA device";
    }
    count = n;
    backends.assign(size_t(n), nullptr);
  }
  REMORA_CHECK(count > 0, "device cuda:" << index
                                         << " was requested, but no CUDA GPU is usable on this "
                                            "machine: "
                                         << why
                                         << ". Check the GPU and its driver (nvidia-smi), or "
                                            "use device cpu");
  REMORA_CHECK(index >= 0 && index < count,
               "device cuda:" << index << " does not exist: this machine has " << count
                              << " CUDA device(s), cuda:0 .. cuda:" << count - 1);
  if (!backends[size_t(index)]) backends[size_t(index)] = new CudaBackend(index);
  return backends[size_t(index)];
}

// Registered when libremora loads (g_cuda in backends/backend.cpp is
// constant-initialised, so the order of static initialisers does not matter).
const bool g_registered = [] {
  register_backend(DeviceType::cuda, &get_cuda_backend);
  return true;
}();

}  // namespace

void* scratch_alloc(size_t nbytes, CudaBackend** owner) {
  CudaBackend* b = t_current;
  REMORA_CHECK(b != nullptr, "cuda: scratch memory asked for before any CUDA call on this thread");
  *owner = b;
  return b->allocator().alloc(nbytes);
}
void scratch_free(CudaBackend* owner, void* p, size_t nbytes) {
  // The allocator that gave the block takes it back, whatever device is current now.
  if (owner) owner->allocator().free(p, nbytes);
}

}  // namespace cuda
}  // namespace remora
