// Shared by the CUDA backend's translation units (never included outside
// backends/cuda/): error checks, launch sizes, a scratch-buffer helper, and
// the entry points that cuda_backend.cu calls in cuda_rem.cu / cuda_attention.cu.
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

// Device scratch memory from the backend's caching allocator, freed on scope exit.
void* scratch_alloc(size_t nbytes);
void scratch_free(void* p, size_t nbytes);
struct Scratch {
  void* p = nullptr;
  size_t n = 0;
  explicit Scratch(size_t nbytes) : p(nbytes ? scratch_alloc(nbytes) : nullptr), n(nbytes) {}
  ~Scratch() { if (p) scratch_free(p, n); }
  void allocate(size_t nbytes) {  // (re)allocates; the old contents are dropped
    if (p) scratch_free(p, n);
    p = nbytes ? scratch_alloc(nbytes) : nullptr;
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
  }
}

// ---- REM and SRU (cuda_rem.cu) ----
void rem_matrix(DType dt, const RemProblem& p, const void* a, const void* theta, void* P);
void rem_matrix_backward(DType dt, const RemProblem& p, const void* a, const void* theta,
                         const void* dP, void* da, void* dtheta);
void rem_scan(DType dt, const RemProblem& p, const void* a, const void* theta, const void* v,
              const void* state_in, void* y, void* state_out);
void rem_scan_backward(DType dt, const RemProblem& p, const void* a, const void* theta,
                       const void* v, const void* state_in, const void* dy, void* dv, void* da,
                       void* dtheta, void* dstate_in);
void sru_forward(DType dt, const SruProblem& p, const void* U, const void* x, const void* v,
                 const void* b, const void* c0, const void* mask, void* h, void* c,
                 void* c_last);
void sru_backward(DType dt, const SruProblem& p, const void* U, const void* x, const void* v,
                  const void* b, const void* c0, const void* mask, const void* c,
                  const void* dh, const void* dc, const void* dc_last, void* dU, void* dx,
                  void* dv, void* db, void* dc0);

// ---- fused RSA attention (cuda_attention.cu) ----
bool rsa_attention_fused(DType dt, const RsaFusedProblem& p, const void* q, const void* k,
                         const void* v, const void* gs, const void* Y, void* O, void* Oatt_r,
                         void* lse);
bool rsa_attention_fused_backward(DType dt, const RsaFusedProblem& p, const void* q,
                                  const void* k, const void* v, const void* gs, const void* O,
                                  const void* Oatt_r, const void* lse, const void* dO, void* dq,
                                  void* dk, void* dv, void* dS);

}  // namespace cuda
}  // namespace remora
