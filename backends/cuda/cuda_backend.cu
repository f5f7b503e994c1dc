// SPDX-License-Identifier: BSD-3-Clause
// The CUDA backend: cuBLAS for gemm, Remora's own kernels for everything else.
//
// One backend object per device, each with one non-blocking stream (never the
// legacy default stream): every kernel, cuBLAS call, async copy and memset for
// that device is queued on it, so they run in order and a freed block can be
// handed out again at once (the caching allocator below never waits; see
// DeviceRaw::free). The host waits only where it must: copy_to_host (the
// caller reads the bytes), empty_cache and segment frees. copy_from_host
// stages the source through pinned slots and returns without waiting for the
// device. Kernels that validate data (cross-entropy targets, indices) record a
// deferred DeviceError instead of syncing; copy_to_host raises it.
//
// Kernels are grid-stride loops over flat indices (elementwise, fills, RNG),
// one warp per row (softmax, layer_norm, cross_entropy), or two-stage
// reductions (cuda_reduce.cu: blocks reduce slices into partials, then a
// finishing kernel). f32 data accumulates in f32 inside a thread and in a tree
// across threads, except where the CPU backend sums in double (reductions,
// layer_norm's dw/db), which use double here too.
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

#include "../../core/philox.h"
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
    if (CudaBackend* b = current_backend()) b->raise_device_error();
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

CudaAllocator::Options device_cache_options() {
  // 512-byte granularity; blocks of 1 MiB and more come from segments rounded
  // to 2 MiB; splits leave at least 512 bytes; at most 8 GiB cached by default
  // (REMORA_CUDA_CACHE_MB overrides).
  CudaAllocator::Options o;
  o.round = 512;
  o.min_cached = 0;
  o.min_split = 512;
  o.segment_round = size_t(2) << 20;
  o.cap = size_t(8) << 30;
  return CudaAllocator::Options::from_env("REMORA_CUDA_CACHE_MB", o);
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
  DeviceRaw::DeviceGuard g(dev);
  REMORA_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
}

cudaStream_t stream() {
  CudaBackend* b = t_current;
  REMORA_CHECK(b != nullptr, "cuda: a kernel was queued before any CUDA call on this thread");
  return b->stream();
}
DeviceError* device_error() {
  CudaBackend* b = t_current;
  REMORA_CHECK(b != nullptr, "cuda: a kernel was queued before any CUDA call on this thread");
  return b->device_error();
}
const void* device_constant(const void* host, size_t n) {
  CudaBackend* b = t_current;
  REMORA_CHECK(b != nullptr, "cuda: a kernel was queued before any CUDA call on this thread");
  return b->device_constant(host, n);
}

DeviceError* CudaBackend::device_error() {
  std::lock_guard<std::mutex> lock(host_mu_);
  if (!error_dev_) {
    use();
    void* h = nullptr;
    REMORA_CUDA_CHECK(cudaHostAlloc(&h, sizeof(DeviceError), cudaHostAllocMapped));
    std::memset(h, 0, sizeof(DeviceError));
    void* d = nullptr;
    REMORA_CUDA_CHECK(cudaHostGetDevicePointer(&d, h, 0));
    error_host_ = static_cast<DeviceError*>(h);
    error_dev_ = static_cast<DeviceError*>(d);
  }
  return error_dev_;
}

void CudaBackend::raise_device_error() {
  if (!error_host_) return;
  volatile DeviceError* e = error_host_;
  const unsigned long long code = e->code;
  if (code == kDevErrNone) return;
  const long long v = e->value, lim = e->limit, extra = e->extra;
  e->value = e->limit = e->extra = 0;
  e->code = kDevErrNone;
  switch (code) {
    case kDevErrTarget:
      REMORA_FAIL("cross_entropy: target " << v << " is out of range [0, " << lim
                                           << ") (ignore_index is " << extra
                                           << "; found on " << name_
                                           << " by a kernel queued before this point)");
    case kDevErrIndex:
      REMORA_FAIL("index_select / embedding / index_add: index "
                  << v << " is out of range [0, " << lim << ") (found on " << name_
                  << " by a kernel queued before this point; the entries it addressed were "
                     "skipped)");
    default:
      REMORA_FAIL("cuda: a kernel on " << name_ << " reported device error code " << code);
  }
}

void CudaBackend::synchronize() {
  use();
  REMORA_CUDA_CHECK(cudaStreamSynchronize(stream_));
  raise_device_error();
}

void CudaBackend::empty_cache() {
  use();
  REMORA_CUDA_CHECK(cudaStreamSynchronize(stream_));
  alloc_.release_cached();
}

const void* CudaBackend::device_constant(const void* host, size_t n) {
  std::string key(static_cast<const char*>(host), n);
  {
    std::lock_guard<std::mutex> lock(host_mu_);
    auto it = constants_.find(key);
    if (it != constants_.end()) return it->second;
  }
  use();
  // Outside the caching allocator: these live for the process (a handful of
  // distinct tables per model), so they would only be noise in its statistics.
  void* d = nullptr;
  REMORA_CUDA_CHECK(cudaMalloc(&d, n ? n : 1));
  copy_from_host(d, host, n);
  std::lock_guard<std::mutex> lock(host_mu_);
  auto ins = constants_.emplace(std::move(key), d);
  if (!ins.second) {  // another thread uploaded the same table meanwhile
    REMORA_CUDA_CHECK(cudaStreamSynchronize(stream_));
    cudaFree(d);
  }
  return ins.first->second;
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
// A free staging slot (waiting, if it must, for the device to have read the
// copy queued in it kStageSlots copies ago), or -1 without pinned memory.
// Called with host_mu_ held.
int CudaBackend::take_stage_slot() {
  if (stage_failed_) return -1;
  if (!stage_) {
    void* h = nullptr;
    if (cudaHostAlloc(&h, size_t(kStageSlots) * kStageBytes, cudaHostAllocDefault) != cudaSuccess) {
      cudaGetLastError();
      stage_failed_ = true;
      return -1;
    }
    for (int i = 0; i < kStageSlots; ++i)
      REMORA_CUDA_CHECK(cudaEventCreateWithFlags(&stage_done_[i], cudaEventDisableTiming));
    stage_ = static_cast<char*>(h);
  }
  const int s = stage_next_;
  stage_next_ = (stage_next_ + 1) % kStageSlots;
  if (stage_used_[s]) REMORA_CUDA_CHECK(cudaEventSynchronize(stage_done_[s]));
  return s;
}

void CudaBackend::copy_from_host(void* dst, const void* src, size_t n) {
  if (!n) return;
  use();
  std::lock_guard<std::mutex> lock(host_mu_);
  const char* from = static_cast<const char*>(src);
  char* to = static_cast<char*>(dst);
  while (n > 0) {
    const int s = take_stage_slot();
    if (s < 0) {
      // No pinned memory: the source must be consumed before returning.
      REMORA_CUDA_CHECK(cudaMemcpyAsync(to, from, n, cudaMemcpyHostToDevice, stream_));
      REMORA_CUDA_CHECK(cudaStreamSynchronize(stream_));
      return;
    }
    const size_t c = std::min(n, kStageBytes);
    char* slot = stage_ + size_t(s) * kStageBytes;
    std::memcpy(slot, from, c);
    REMORA_CUDA_CHECK(cudaMemcpyAsync(to, slot, c, cudaMemcpyHostToDevice, stream_));
    REMORA_CUDA_CHECK(cudaEventRecord(stage_done_[s], stream_));
    stage_used_[s] = true;
    from += c;
    to += c;
    n -= c;
  }
}

void CudaBackend::copy_to_host(void* dst, const void* src, size_t n) {
  use();
  if (n) {
    std::unique_lock<std::mutex> lock(host_mu_);
    const int s = n <= kStageBytes ? take_stage_slot() : -1;
    if (s >= 0) {  // through a pinned slot: a true async DMA, then one host memcpy
      char* slot = stage_ + size_t(s) * kStageBytes;
      REMORA_CUDA_CHECK(cudaMemcpyAsync(slot, src, n, cudaMemcpyDeviceToHost, stream_));
      REMORA_CUDA_CHECK(cudaEventRecord(stage_done_[s], stream_));
      stage_used_[s] = true;
      REMORA_CUDA_CHECK(cudaStreamSynchronize(stream_));
      std::memcpy(dst, slot, n);
    } else {
      lock.unlock();
      REMORA_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, stream_));
      REMORA_CUDA_CHECK(cudaStreamSynchronize(stream_));
    }
  } else {
    REMORA_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  raise_device_error();
}

cublasHandle_t CudaBackend::handle() {
  if (!cublas_) {
    REMORA_CUBLAS_CHECK(cublasCreate(&cublas_));
    REMORA_CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
    // cuBLAS's workspace comes from the caching allocator too (32 MiB, what
    // cuBLAS asks for on Hopper), so it is counted and bounded with the rest.
    const size_t ws = size_t(32) << 20;
    workspace_ = alloc_.alloc(ws);
    REMORA_CUBLAS_CHECK(cublasSetWorkspace(cublas_, workspace_, ws));
  }
  return cublas_;
}

void CudaBackend::gemm(const GemmArgs& args) {
  int64_t lda = args.lda, ldb = args.ldb, ldc = args.ldc;  // raised below where cuBLAS needs it
  if (args.m <= 0 || args.n <= 0 || args.batch <= 0) return;
  use();
  REMORA_CHECK(args.m < (int64_t(1) << 31) && args.n < (int64_t(1) << 31) && args.k < (int64_t(1) << 31) &&
                   args.batch < (int64_t(1) << 31),
               "cuda gemm: dims " << args.m << " x " << args.n << " x " << args.k << " (batch " << args.batch
                                  << ") exceed cuBLAS's int range; split the matmul");
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: cuBLAS
  // gets B first, with n and m swapped. A leading dimension that cuBLAS would
  // reject but that is never used (a single row or column) is raised to the
  // minimum it accepts.
  if (!args.tb && args.k == 1) ldb = std::max<int64_t>(ldb, args.n);
  if (args.tb && args.n == 1) ldb = std::max<int64_t>(ldb, args.k);
  if (!args.ta && args.m == 1) lda = std::max<int64_t>(lda, args.k);
  if (args.ta && args.k == 1) lda = std::max<int64_t>(lda, args.m);
  ldc = std::max<int64_t>(ldc, args.n);
  REMORA_CHECK(lda < (int64_t(1) << 31) && ldb < (int64_t(1) << 31) && ldc < (int64_t(1) << 31),
               "cuda gemm: leading dimensions lda = " << lda << ", ldb = " << ldb << ", ldc = "
                                                       << ldc
                                                       << " exceed cuBLAS's int range; make the "
                                                          "operands contiguous or split the matmul");
  const cublasOperation_t opA = args.ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t opB = args.tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasHandle_t h = handle();
  if (args.dt == DType::f32) {
    REMORA_CUBLAS_CHECK(cublasSetMathMode(
        h, cuda_tf32() || gemm_bf16_operands() ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    const float al = float(args.alpha), be = float(args.beta);
    REMORA_CUBLAS_CHECK(cublasSgemmStridedBatched(
        h, opB, opA, int(args.n), int(args.m), int(args.k), &al, static_cast<const float*>(args.b), int(ldb),
        args.stride_b, static_cast<const float*>(args.a), int(lda), args.stride_a, &be,
        static_cast<float*>(args.c), int(ldc), args.stride_c, int(args.batch)));
  } else if (args.dt == DType::f64) {
    REMORA_CUBLAS_CHECK(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));
    REMORA_CUBLAS_CHECK(cublasDgemmStridedBatched(
        h, opB, opA, int(args.n), int(args.m), int(args.k), &args.alpha, static_cast<const double*>(args.b),
        int(ldb), args.stride_b, static_cast<const double*>(args.a), int(lda), args.stride_a, &args.beta,
        static_cast<double*>(args.c), int(ldc), args.stride_c, int(args.batch)));
  } else if (is_half(args.dt)) {
    // bf16 / f16 operands on the tensor cores, f32 accumulation
    // (CUBLAS_COMPUTE_32F); C in f32 (c_f32, autocast) or in the operands' type.
    REMORA_CUBLAS_CHECK(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));
    const cudaDataType_t ab = args.dt == DType::bf16 ? CUDA_R_16BF : CUDA_R_16F;
    const cudaDataType_t ct = args.c_f32 ? CUDA_R_32F : ab;
    const float al = float(args.alpha), be = float(args.beta);
    REMORA_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
        h, opB, opA, int(args.n), int(args.m), int(args.k), &al, args.b, ab, int(ldb), args.stride_b, args.a,
        ab, int(lda), args.stride_a, &be, args.c, ct, int(ldc), args.stride_c, int(args.batch),
        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  } else {
    REMORA_FAIL("cuda gemm: expected f32, f64, bf16 or f16, got " << dtype_name(args.dt));
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

DeviceAllocator* get_cuda_device(int index) { return get_cuda_backend(index); }

// Registered when libremora_cuda loads (the registry of core/device_registry.h
// is constant-initialised, so the order of static initialisers does not matter).
const bool g_registered = [] {
  register_device(DeviceType::cuda, &get_cuda_device);
  return true;
}();

}  // namespace

bool CudaBackend::supports(OpKind op, const OpProblem& p) const {
  switch (op) {
    case OpKind::fused_dropout: return false;
    case OpKind::fused_adam: return p.dt == DType::f32 || p.dt == DType::f64;  // the kernel's dtypes
    case OpKind::fused_rsa: return p.rsa && rsa_fused_takes(p.dt, *p.rsa);
  }
  return false;
}

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
