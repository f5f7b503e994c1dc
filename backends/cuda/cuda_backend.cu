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
#include "cuda_common.cuh"

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
// Caching allocator. Blocks are rounded up (512 B below 1 MiB, 2 MiB above),
// kept by size when freed and handed out again, so a training loop that
// allocates the same shapes every step calls cudaMalloc only in its first step.
// When cudaMalloc fails the cache is released and the call retried once.
// ---------------------------------------------------------------------------
class DeviceAllocator {
 public:
  explicit DeviceAllocator(int dev) : dev_(dev) {}
  void* alloc(size_t nbytes) {
    const size_t sz = round(nbytes);
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = free_.find(sz);
      if (it != free_.end() && !it->second.empty()) {
        void* p = it->second.back();
        it->second.pop_back();
        cached_ -= sz;
        live_[p] = sz;
        return p;
      }
    }
    void* p = nullptr;
    cudaError_t e = cudaMalloc(&p, sz);
    if (e != cudaSuccess) {
      cudaGetLastError();  // clear the error, free the cache, try once more
      release_cached();
      e = cudaMalloc(&p, sz);
    }
    REMORA_CHECK(e == cudaSuccess, "cuda:" << dev_ << ": out of memory allocating " << nbytes
                                           << " bytes (" << cudaGetErrorString(e)
                                           << "); use a smaller batch or sequence length");
    std::lock_guard<std::mutex> lock(mu_);
    live_[p] = sz;
    return p;
  }
  void free(void* p) {
    if (!p) return;
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(p);
    if (it == live_.end()) return;  // not ours (cannot happen through Storage)
    const size_t sz = it->second;
    live_.erase(it);
    free_[sz].push_back(p);  // stream-ordered: the default stream serialises reuse
    cached_ += sz;
  }
  void release_cached() {
    std::lock_guard<std::mutex> lock(mu_);
    cudaDeviceSynchronize();
    for (auto& kv : free_)
      for (void* p : kv.second) cudaFree(p);
    free_.clear();
    cached_ = 0;
  }

 private:
  static size_t round(size_t n) {
    if (n < (size_t(1) << 20)) return std::max<size_t>(512, (n + 511) / 512 * 512);
    const size_t m = size_t(2) << 20;
    return (n + m - 1) / m * m;
  }
  int dev_;
  std::mutex mu_;
  std::map<size_t, std::vector<void*>> free_;
  std::unordered_map<void*, size_t> live_;
  size_t cached_ = 0;
};

// ---------------------------------------------------------------------------
// Fills and random numbers. The Philox streams are the CPU's (backends/philox.h):
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
    o[i] = philox::uniform(philox::philox(seed, off + uint64_t(i))) < keep ? scale : T(0);
}

// ---------------------------------------------------------------------------
// Strided elementwise: operand k of flat index idx sits at sum_d i_d strides[k][d].
// make_iter (ops/) coalesces dims, so contiguous operands arrive as ndim == 1.
// ---------------------------------------------------------------------------
template <int NOPS>
__device__ __forceinline__ void iter_offsets(const ElemIter& it, int64_t idx, int64_t* off) {
#pragma unroll
  for (int k = 0; k < NOPS; ++k) off[k] = 0;
  for (int d = it.ndim - 1; d >= 0; --d) {
    const int64_t n = it.shape[d];
    const int64_t i = idx % n;
    idx /= n;
#pragma unroll
    for (int k = 0; k < NOPS; ++k) off[k] += i * it.strides[k][d];
  }
}

template <typename TO, typename TI>
__global__ void k_copy(ElemIter it, int64_t n, TO* o, const TI* x) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t off[2];
    iter_offsets<2>(it, i, off);
    o[off[0]] = TO(x[off[1]]);
  }
}

template <typename T>
__device__ __forceinline__ T binary_op(BinaryOp op, T p, T q) {
  switch (op) {
    case BinaryOp::add: return p + q;
    case BinaryOp::sub: return p - q;
    case BinaryOp::mul: return p * q;
    case BinaryOp::div: return p / q;
    case BinaryOp::maximum: return p > q ? p : q;
    case BinaryOp::minimum: return p < q ? p : q;
    case BinaryOp::eq: return T(p == q);
    case BinaryOp::ne: return T(p != q);
    case BinaryOp::lt: return T(p < q);
    case BinaryOp::le: return T(p <= q);
    case BinaryOp::gt: return T(p > q);
    case BinaryOp::ge: return T(p >= q);
  }
  return T(0);
}
template <typename T>
__global__ void k_binary(BinaryOp op, ElemIter it, int64_t n, T* o, const T* a, const T* b) {
  const bool flat = it.ndim == 1 && it.strides[0][0] == 1 && it.strides[1][0] == 1 &&
                    it.strides[2][0] == 1;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    if (flat) {
      o[i] = binary_op(op, a[i], b[i]);
    } else {
      int64_t off[3];
      iter_offsets<3>(it, i, off);
      o[off[0]] = binary_op(op, a[off[1]], b[off[2]]);
    }
  }
}
template <typename T, typename C>
__global__ void k_where(ElemIter it, int64_t n, T* o, const C* c, const T* a, const T* b) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t off[4];
    iter_offsets<4>(it, i, off);
    o[off[0]] = c[off[1]] != C(0) ? a[off[2]] : b[off[3]];
  }
}

// ---------------------------------------------------------------------------
// Contiguous unary maps (the CPU's formulas: stable sigmoid, exact erf gelu).
// ---------------------------------------------------------------------------
template <typename T>
__device__ __forceinline__ T sigmoid_d(T x) {
  if (x >= T(0)) return T(1) / (T(1) + exp(-x));
  const T e = exp(x);
  return e / (T(1) + e);
}
template <typename T>
__device__ __forceinline__ T gelu_d(T x) {
  return T(0.5) * x * (T(1) + erf(x * T(0.70710678118654752440)));
}
template <typename T>
__device__ __forceinline__ T gelu_grad_d(T x) {
  const T cdf = T(0.5) * (T(1) + erf(x * T(0.70710678118654752440)));
  const T pdf = exp(T(-0.5) * x * x) * T(0.39894228040143267794);
  return cdf + x * pdf;
}
template <typename T>
__global__ void k_unary(UnaryOp op, int64_t n, const T* x, T* o, T a, T b) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const T v = x[i];
    T r;
    switch (op) {
      case UnaryOp::affine: r = a * v + b; break;
      case UnaryOp::pow: r = a == T(2) ? v * v : pow(v, a); break;
      case UnaryOp::exp: r = exp(v); break;
      case UnaryOp::log: r = log(v); break;
      case UnaryOp::sqrt: r = sqrt(v); break;
      case UnaryOp::tanh: r = tanh(v); break;
      case UnaryOp::sigmoid: r = sigmoid_d(v); break;
      case UnaryOp::relu: r = v > T(0) ? v : T(0); break;
      case UnaryOp::gelu: r = gelu_d(v); break;
      case UnaryOp::abs: r = fabs(v); break;
      case UnaryOp::sin: r = sin(v); break;
      case UnaryOp::cos: r = cos(v); break;
      default: r = v;
    }
    o[i] = r;
  }
}
__global__ void k_unary_i64(bool is_abs, int64_t n, const int64_t* x, int64_t* o, double a,
                            double b) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t v = x[i];
    o[i] = is_abs ? (v < 0 ? -v : v) : int64_t(__dadd_rn(__dmul_rn(a, double(v)), b));
  }
}
template <typename T>
__global__ void k_unary_grad(UnaryGradOp op, int64_t n, const T* g, const T* v, T* o, T a) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const T gg = g[i], x = v[i];
    T r;
    switch (op) {
      case UnaryGradOp::tanh: r = gg * (T(1) - x * x); break;
      case UnaryGradOp::sigmoid: r = gg * x * (T(1) - x); break;
      case UnaryGradOp::relu: r = x > T(0) ? gg : T(0); break;
      case UnaryGradOp::gelu: r = gg * gelu_grad_d(x); break;
      case UnaryGradOp::pow: r = gg * a * pow(x, a - T(1)); break;
      default: r = gg;
    }
    o[i] = r;
  }
}

// ---------------------------------------------------------------------------
// Reductions over the middle axis of [outer, r, inner].
// ---------------------------------------------------------------------------
template <typename T> struct AccOf { using type = double; };
template <> struct AccOf<int64_t> { using type = int64_t; };

template <typename T>
__device__ __forceinline__ bool is_nan_d(T v) { return v != v; }

// (best, bi) vs (v, vi): NaN beats everything, then the larger (max) or
// smaller (min) value, then the lower index (the first extreme wins, as on CPU).
template <typename T>
__device__ __forceinline__ bool better_d(bool is_max, T v, int64_t vi, T best, int64_t bi) {
  const bool vn = is_nan_d(v), bn = is_nan_d(best);
  if (vn || bn) return vn && (!bn || vi < bi);
  if (v == best) return vi < bi;
  return is_max ? v > best : v < best;
}

// inner > 1: one thread per (o, j) column, a sequential loop over r
// (adjacent threads read adjacent memory).
template <typename T>
__global__ void k_reduce_cols(ReduceOp op, int64_t outer, int64_t r, int64_t inner, const T* x,
                              T* out, int64_t* argidx) {
  using Acc = typename AccOf<T>::type;
  const int64_t n = outer * inner;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < n;
       t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t o = t / inner, j = t % inner;
    const T* p = x + o * r * inner + j;
    if (op == ReduceOp::sum) {
      Acc s = 0;
      for (int64_t k = 0; k < r; ++k) s += Acc(p[k * inner]);
      out[t] = T(s);
    } else {
      const bool mx = op == ReduceOp::max;
      T best = p[0];
      int64_t bi = 0;
      for (int64_t k = 1; k < r; ++k)
        if (better_d(mx, p[k * inner], k, best, bi)) { best = p[k * inner]; bi = k; }
      out[t] = best;
      if (argidx) argidx[t] = bi;
    }
  }
}

// inner == 1: one block per row of r contiguous elements, a tree in shared memory.
template <typename T>
__global__ void k_reduce_rows(ReduceOp op, int64_t r, const T* x, T* out, int64_t* argidx) {
  using Acc = typename AccOf<T>::type;
  __shared__ Acc ss[kThreads];
  __shared__ T sv[kThreads];
  __shared__ int64_t si[kThreads];
  const int64_t row = blockIdx.x;
  const T* p = x + row * r;
  const int tid = threadIdx.x;
  if (op == ReduceOp::sum) {
    Acc s = 0;
    for (int64_t k = tid; k < r; k += blockDim.x) s += Acc(p[k]);
    ss[tid] = s;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w >>= 1) {
      if (tid < w) ss[tid] += ss[tid + w];
      __syncthreads();
    }
    if (tid == 0) out[row] = T(ss[0]);
  } else {
    // si = -1 marks a thread that saw no element (r < blockDim).
    const bool mx = op == ReduceOp::max;
    T best = T(0);
    int64_t bi = -1;
    for (int64_t k = tid; k < r; k += blockDim.x)
      if (bi < 0 || better_d(mx, p[k], k, best, bi)) {
        best = p[k];
        bi = k;
      }
    sv[tid] = best;
    si[tid] = bi;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w >>= 1) {
      if (tid < w && si[tid + w] >= 0 &&
          (si[tid] < 0 || better_d(mx, sv[tid + w], si[tid + w], sv[tid], si[tid]))) {
        sv[tid] = sv[tid + w];
        si[tid] = si[tid + w];
      }
      __syncthreads();
    }
    if (tid == 0) {
      out[row] = sv[0];
      if (argidx) argidx[row] = si[0] < 0 ? 0 : si[0];
    }
  }
}

// ---------------------------------------------------------------------------
// Row kernels: one warp per row of `cols` contiguous elements, 8 rows a block.
// ---------------------------------------------------------------------------
constexpr int kRowsPerBlock = kThreads / 32;

template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
template <typename T>
__device__ __forceinline__ T warp_max(T v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const T w = __shfl_xor_sync(0xffffffffu, v, o);
    v = w > v ? w : v;
  }
  return v;
}

template <typename T>
__global__ void k_softmax(int64_t rows, int64_t cols, const T* X, T* Y, bool log_out) {
  const int64_t row = int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const T* x = X + row * cols;
  T* y = Y + row * cols;
  T mx = -INFINITY;
  for (int64_t j = lane; j < cols; j += 32) mx = x[j] > mx ? x[j] : mx;
  mx = warp_max(mx);
  T s = 0;
  for (int64_t j = lane; j < cols; j += 32) s += exp(x[j] - mx);
  s = warp_sum(s);
  if (log_out) {
    const T lse = mx + log(s);
    for (int64_t j = lane; j < cols; j += 32) y[j] = x[j] - lse;
  } else {
    const T inv = T(1) / s;
    for (int64_t j = lane; j < cols; j += 32) y[j] = exp(x[j] - mx) * inv;
  }
}

template <typename T>
__global__ void k_softmax_backward(int64_t rows, int64_t cols, const T* DY, const T* Y, T* DX,
                                   bool log_in) {
  const int64_t row = int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const T* dy = DY + row * cols;
  const T* y = Y + row * cols;
  T* dx = DX + row * cols;
  T s = 0;
  if (log_in) {
    for (int64_t j = lane; j < cols; j += 32) s += dy[j];
    s = warp_sum(s);
    for (int64_t j = lane; j < cols; j += 32) dx[j] = dy[j] - exp(y[j]) * s;
  } else {
    for (int64_t j = lane; j < cols; j += 32) s += dy[j] * y[j];
    s = warp_sum(s);
    for (int64_t j = lane; j < cols; j += 32) dx[j] = y[j] * (dy[j] - s);
  }
}

template <typename T>
__global__ void k_layer_norm(int64_t rows, int64_t cols, const T* X, const T* W, const T* Bb,
                             double eps, T* Y, T* MEAN, T* RSTD) {
  const int64_t row = int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const T* x = X + row * cols;
  T* y = Y + row * cols;
  // Two passes, summed in double (as the CPU does).
  double s = 0;
  for (int64_t j = lane; j < cols; j += 32) s += double(x[j]);
  s = warp_sum(s);
  const T mean = T(s / double(cols));
  double v = 0;
  for (int64_t j = lane; j < cols; j += 32) {
    const double d = double(x[j] - mean);
    v += d * d;
  }
  v = warp_sum(v);
  const T rstd = T(1.0 / sqrt(v / double(cols) + eps));
  for (int64_t j = lane; j < cols; j += 32) {
    T r = (x[j] - mean) * rstd;
    if (W) r = r * W[j];
    if (Bb) r = r + Bb[j];
    y[j] = r;
  }
  if (lane == 0) {
    MEAN[row] = mean;
    RSTD[row] = rstd;
  }
}

// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * w.
template <typename T>
__global__ void k_layer_norm_backward_dx(int64_t rows, int64_t cols, const T* DY, const T* X,
                                         const T* MEAN, const T* RSTD, const T* W, T* DX) {
  const int64_t row = int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const T* dy = DY + row * cols;
  const T* x = X + row * cols;
  T* dx = DX + row * cols;
  const T mean = MEAN[row], rstd = RSTD[row];
  double s1 = 0, s2 = 0;
  for (int64_t j = lane; j < cols; j += 32) {
    const T g = W ? dy[j] * W[j] : dy[j];
    const T xh = (x[j] - mean) * rstd;
    s1 += double(g);
    s2 += double(g * xh);
  }
  s1 = warp_sum(s1);
  s2 = warp_sum(s2);
  const T m1 = T(s1 / double(cols)), m2 = T(s2 / double(cols));
  for (int64_t j = lane; j < cols; j += 32) {
    const T g = W ? dy[j] * W[j] : dy[j];
    dx[j] = rstd * (g - m1 - (x[j] - mean) * rstd * m2);
  }
}

// dw, db partials: block (jx, chunk) sums rows [chunk * rpc, ...) of columns
// jx*256 ..; the partials [chunks, 2, cols] (double) are summed by k_ln_finish.
template <typename T>
__global__ void k_layer_norm_backward_dwdb(int64_t rows, int64_t cols, int64_t rpc, const T* DY,
                                           const T* X, const T* MEAN, const T* RSTD,
                                           double* part) {
  const int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= cols) return;
  const int64_t r0 = int64_t(blockIdx.y) * rpc, r1 = min(rows, r0 + rpc);
  double sw = 0, sb = 0;
  for (int64_t r = r0; r < r1; ++r) {
    const T dy = DY[r * cols + j];
    sw += double(dy * ((X[r * cols + j] - MEAN[r]) * RSTD[r]));
    sb += double(dy);
  }
  part[(int64_t(blockIdx.y) * 2 + 0) * cols + j] = sw;
  part[(int64_t(blockIdx.y) * 2 + 1) * cols + j] = sb;
}
template <typename T>
__global__ void k_ln_finish(int64_t cols, int64_t chunks, const double* part, T* DW, T* DB) {
  const int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= cols) return;
  double sw = 0, sb = 0;
  for (int64_t c = 0; c < chunks; ++c) {
    sw += part[(c * 2 + 0) * cols + j];
    sb += part[(c * 2 + 1) * cols + j];
  }
  if (DW) DW[j] = T(sw);
  if (DB) DB[j] = T(sb);
}

template <typename T>
__global__ void k_cross_entropy(int64_t rows, int64_t cols, const T* X, const int64_t* target,
                                int64_t ignore, T* L, T* LSE) {
  const int64_t row = int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const T* x = X + row * cols;
  T mx = -INFINITY;
  for (int64_t j = lane; j < cols; j += 32) mx = x[j] > mx ? x[j] : mx;
  mx = warp_max(mx);
  double s = 0;
  for (int64_t j = lane; j < cols; j += 32) s += double(exp(x[j] - mx));
  s = warp_sum(s);
  if (lane == 0) {
    const T lse = mx + T(log(s));
    LSE[row] = lse;
    const int64_t t = target[row];
    L[row] = t == ignore ? T(0) : lse - x[t];
  }
}
template <typename T>
__global__ void k_cross_entropy_backward(int64_t rows, int64_t cols, const T* X,
                                         const int64_t* target, int64_t ignore, const T* LSE,
                                         const T* G, T* DX) {
  const int64_t row = int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const T* x = X + row * cols;
  T* dx = DX + row * cols;
  const int64_t t = target[row];
  if (t == ignore) {
    for (int64_t j = lane; j < cols; j += 32) dx[j] = T(0);
    return;
  }
  const T g = G[row], lse = LSE[row];
  for (int64_t j = lane; j < cols; j += 32) dx[j] = g * exp(x[j] - lse) - (j == t ? g : T(0));
}

// ---------------------------------------------------------------------------
// Gather / scatter along the middle axis of [outer, r, inner].
// ---------------------------------------------------------------------------
template <typename W>  // a word of the element's size (bit copies)
__global__ void k_index_select(int64_t outer, int64_t r, int64_t inner, const W* src,
                               const int64_t* idx, int64_t n_idx, W* out) {
  const int64_t n = outer * n_idx * inner;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < n;
       t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t j = t % inner, oi = t / inner, i = oi % n_idx, o = oi / n_idx;
    out[t] = src[(o * r + idx[i]) * inner + j];
  }
}
template <typename T>
__device__ __forceinline__ void atomic_add_d(T* p, T v) { atomicAdd(p, v); }
template <>
__device__ __forceinline__ void atomic_add_d<int64_t>(int64_t* p, int64_t v) {
  atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));
}
// Duplicate indices meet in atomicAdd (f64 atomicAdd needs sm_60+).
template <typename T>
__global__ void k_index_add(int64_t outer, int64_t r, int64_t inner, T* dst, const int64_t* idx,
                            int64_t n_idx, const T* src) {
  const int64_t n = outer * n_idx * inner;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < n;
       t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t j = t % inner, oi = t / inner, i = oi % n_idx, o = oi / n_idx;
    atomic_add_d(dst + (o * r + idx[i]) * inner + j, src[t]);
  }
}

// ---------------------------------------------------------------------------
// The backend.
// ---------------------------------------------------------------------------
class CudaBackend;
CudaBackend* g_current = nullptr;  // for scratch_alloc (the device of the running op)

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int dev) : dev_(dev), alloc_(dev) {
    snprintf(name_, sizeof name_, "cuda:%d", dev);
  }
  const char* name() const override { return name_; }

  // Makes this device current for the calls that follow.
  void use() {
    int cur = -1;
    cudaGetDevice(&cur);
    if (cur != dev_) REMORA_CUDA_CHECK(cudaSetDevice(dev_));
    g_current = this;
  }
  void* raw_alloc(size_t n) { return alloc_.alloc(n); }
  void raw_free(void* p) { alloc_.free(p); }

  void* alloc(size_t nbytes) override {
    use();
    return alloc_.alloc(nbytes);
  }
  void free(void* p, size_t) override { alloc_.free(p); }
  void copy_from_host(void* dst, const void* src, size_t n) override {
    if (!n) return;
    use();
    REMORA_CUDA_CHECK(cudaMemcpy(dst, src, n, cudaMemcpyHostToDevice));
  }
  void copy_to_host(void* dst, const void* src, size_t n) override {
    if (!n) return;
    use();
    REMORA_CUDA_CHECK(cudaMemcpy(dst, src, n, cudaMemcpyDeviceToHost));
  }

  void fill(DType dt, void* out, int64_t n, double value) override {
    if (n <= 0) return;
    use();
    dispatch_all(dt, [&](auto tag) {
      using T = decltype(tag);
      k_fill<T><<<grid_for(n), kThreads>>>(static_cast<T*>(out), n, T(value));
    });
    check_launch("fill");
  }
  void arange(DType dt, void* out, int64_t n, double start, double step) override {
    if (n <= 0) return;
    use();
    dispatch_all(dt, [&](auto tag) {
      using T = decltype(tag);
      k_arange<T><<<grid_for(n), kThreads>>>(static_cast<T*>(out), n, start, step);
    });
    check_launch("arange");
  }
  void uniform(DType dt, void* out, int64_t n, double lo, double hi, uint64_t seed,
               uint64_t offset) override {
    if (n <= 0) return;
    use();
    dispatch_float(dt, "uniform", [&](auto tag) {
      using T = decltype(tag);
      k_uniform<T><<<grid_for(n), kThreads>>>(static_cast<T*>(out), n, lo, hi, seed, offset);
    });
    check_launch("uniform");
  }
  void normal(DType dt, void* out, int64_t n, double mean, double sd, uint64_t seed,
              uint64_t offset) override {
    if (n <= 0) return;
    use();
    dispatch_float(dt, "normal", [&](auto tag) {
      using T = decltype(tag);
      k_normal<T><<<grid_for(n), kThreads>>>(static_cast<T*>(out), n, mean, sd, seed, offset);
    });
    check_launch("normal");
  }
  void bernoulli_mask(DType dt, void* out, int64_t n, double keep, double scale, uint64_t seed,
                      uint64_t offset) override {
    if (n <= 0) return;
    use();
    dispatch_float(dt, "bernoulli_mask", [&](auto tag) {
      using T = decltype(tag);
      k_bernoulli<T><<<grid_for(n), kThreads>>>(static_cast<T*>(out), n, keep, T(scale), seed,
                                                offset);
    });
    check_launch("bernoulli_mask");
  }

  void copy(const ElemIter& it, DType dt_out, void* out, DType dt_in, const void* in) override {
    const int64_t n = it.numel();
    if (n <= 0) return;
    use();
    if (dt_out == dt_in && is_flat(it, 2)) {
      REMORA_CUDA_CHECK(cudaMemcpyAsync(out, in, size_t(n) * dtype_size(dt_out),
                                        cudaMemcpyDeviceToDevice, 0));
      return;
    }
    dispatch_all(dt_out, [&](auto to) {
      using TO = decltype(to);
      dispatch_all(dt_in, [&](auto ti) {
        using TI = decltype(ti);
        k_copy<TO, TI><<<grid_for(n), kThreads>>>(it, n, static_cast<TO*>(out),
                                                  static_cast<const TI*>(in));
      });
    });
    check_launch("copy");
  }
  void binary(BinaryOp op, DType dt, const ElemIter& it, void* out, const void* a,
              const void* b) override {
    const int64_t n = it.numel();
    if (n <= 0) return;
    use();
    dispatch_all(dt, [&](auto tag) {
      using T = decltype(tag);
      k_binary<T><<<grid_for(n), kThreads>>>(op, it, n, static_cast<T*>(out),
                                             static_cast<const T*>(a), static_cast<const T*>(b));
    });
    check_launch("binary");
  }
  void where(DType dt, const ElemIter& it, void* out, DType dt_cond, const void* cond,
             const void* a, const void* b) override {
    const int64_t n = it.numel();
    if (n <= 0) return;
    use();
    dispatch_all(dt, [&](auto tag) {
      using T = decltype(tag);
      dispatch_all(dt_cond, [&](auto ctag) {
        using C = decltype(ctag);
        k_where<T, C><<<grid_for(n), kThreads>>>(it, n, static_cast<T*>(out),
                                                 static_cast<const C*>(cond),
                                                 static_cast<const T*>(a), static_cast<const T*>(b));
      });
    });
    check_launch("where");
  }

  void unary(UnaryOp op, DType dt, int64_t n, const void* x, void* out, double alpha,
             double beta) override {
    if (n <= 0) return;
    use();
    if (dt == DType::i64) {
      REMORA_CHECK(op == UnaryOp::affine || op == UnaryOp::abs,
                   "cuda unary: only affine and abs take i64; convert with .to(DType::f32)");
      k_unary_i64<<<grid_for(n), kThreads>>>(op == UnaryOp::abs, n,
                                             static_cast<const int64_t*>(x),
                                             static_cast<int64_t*>(out), alpha, beta);
    } else {
      dispatch_float(dt, "unary", [&](auto tag) {
        using T = decltype(tag);
        k_unary<T><<<grid_for(n), kThreads>>>(op, n, static_cast<const T*>(x),
                                              static_cast<T*>(out), T(alpha), T(beta));
      });
    }
    check_launch("unary");
  }
  void unary_grad(UnaryGradOp op, DType dt, int64_t n, const void* grad, const void* v,
                  void* out, double alpha) override {
    if (n <= 0) return;
    use();
    dispatch_float(dt, "unary_grad", [&](auto tag) {
      using T = decltype(tag);
      k_unary_grad<T><<<grid_for(n), kThreads>>>(op, n, static_cast<const T*>(grad),
                                                 static_cast<const T*>(v), static_cast<T*>(out),
                                                 T(alpha));
    });
    check_launch("unary_grad");
  }

  void reduce(ReduceOp op, DType dt, int64_t outer, int64_t r, int64_t inner, const void* in,
              void* out, int64_t* argidx) override {
    if (outer * inner <= 0) return;
    use();
    dispatch_all(dt, [&](auto tag) {
      using T = decltype(tag);
      const T* x = static_cast<const T*>(in);
      T* o = static_cast<T*>(out);
      // Long contiguous rows: a block per row; otherwise a thread per output.
      if (inner == 1 && r >= 512 && outer < (int64_t(1) << 31))
        k_reduce_rows<T><<<unsigned(outer), kThreads>>>(op, r, x, o, argidx);
      else
        k_reduce_cols<T><<<grid_for(outer * inner), kThreads>>>(op, outer, r, inner, x, o, argidx);
    });
    check_launch("reduce");
  }

  void gemm(DType dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha,
            const void* a, int64_t lda, int64_t stride_a, const void* b, int64_t ldb,
            int64_t stride_b, double beta, void* c, int64_t ldc, int64_t stride_c,
            int64_t batch) override {
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
    const cublasOperation_t opA = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t opB = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasHandle_t h = handle();
    if (dt == DType::f32) {
      REMORA_CUBLAS_CHECK(cublasSetMathMode(
          h, cuda_tf32() ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
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

  void softmax(DType dt, int64_t rows, int64_t cols, const void* x, void* y, bool log) override {
    if (rows <= 0 || cols <= 0) return;
    use();
    dispatch_float(dt, "softmax", [&](auto tag) {
      using T = decltype(tag);
      k_softmax<T><<<row_grid(rows), kThreads>>>(rows, cols, static_cast<const T*>(x),
                                                 static_cast<T*>(y), log);
    });
    check_launch("softmax");
  }
  void softmax_backward(DType dt, int64_t rows, int64_t cols, const void* dy, const void* y,
                        void* dx, bool log) override {
    if (rows <= 0 || cols <= 0) return;
    use();
    dispatch_float(dt, "softmax_backward", [&](auto tag) {
      using T = decltype(tag);
      k_softmax_backward<T><<<row_grid(rows), kThreads>>>(rows, cols, static_cast<const T*>(dy),
                                                          static_cast<const T*>(y),
                                                          static_cast<T*>(dx), log);
    });
    check_launch("softmax_backward");
  }
  void layer_norm(DType dt, int64_t rows, int64_t cols, const void* x, const void* w,
                  const void* b, double eps, void* y, void* mean, void* rstd) override {
    if (rows <= 0 || cols <= 0) return;
    use();
    dispatch_float(dt, "layer_norm", [&](auto tag) {
      using T = decltype(tag);
      k_layer_norm<T><<<row_grid(rows), kThreads>>>(
          rows, cols, static_cast<const T*>(x), static_cast<const T*>(w),
          static_cast<const T*>(b), eps, static_cast<T*>(y), static_cast<T*>(mean),
          static_cast<T*>(rstd));
    });
    check_launch("layer_norm");
  }
  void layer_norm_backward(DType dt, int64_t rows, int64_t cols, const void* dy, const void* x,
                           const void* mean, const void* rstd, const void* w, void* dx,
                           void* dw, void* db) override {
    if (rows <= 0 || cols <= 0) return;
    use();
    dispatch_float(dt, "layer_norm_backward", [&](auto tag) {
      using T = decltype(tag);
      const T* DY = static_cast<const T*>(dy);
      const T* X = static_cast<const T*>(x);
      const T* MEAN = static_cast<const T*>(mean);
      const T* RSTD = static_cast<const T*>(rstd);
      if (dx)
        k_layer_norm_backward_dx<T><<<row_grid(rows), kThreads>>>(
            rows, cols, DY, X, MEAN, RSTD, static_cast<const T*>(w), static_cast<T*>(dx));
      check_launch("layer_norm_backward");
      if (dw || db) {
        // Rows split into chunks so that narrow layers still fill the GPU.
        const int64_t chunks = std::min<int64_t>(rows, 64);
        const int64_t rpc = (rows + chunks - 1) / chunks;
        Scratch part(size_t(chunks) * 2 * size_t(cols) * sizeof(double));
        dim3 grid(unsigned((cols + kThreads - 1) / kThreads), unsigned(chunks));
        k_layer_norm_backward_dwdb<T><<<grid, kThreads>>>(rows, cols, rpc, DY, X, MEAN, RSTD,
                                                          part.as<double>());
        check_launch("layer_norm_backward (dw, db)");
        k_ln_finish<T><<<unsigned((cols + kThreads - 1) / kThreads), kThreads>>>(
            cols, chunks, part.as<double>(), static_cast<T*>(dw), static_cast<T*>(db));
        check_launch("layer_norm_backward (dw, db)");
      }
    });
  }
  void cross_entropy(DType dt, int64_t rows, int64_t cols, const void* logits,
                     const int64_t* target, int64_t ignore_index, void* loss,
                     void* lse) override {
    if (rows <= 0) return;
    use();
    dispatch_float(dt, "cross_entropy", [&](auto tag) {
      using T = decltype(tag);
      k_cross_entropy<T><<<row_grid(rows), kThreads>>>(rows, cols, static_cast<const T*>(logits),
                                                       target, ignore_index,
                                                       static_cast<T*>(loss), static_cast<T*>(lse));
    });
    check_launch("cross_entropy");
  }
  void cross_entropy_backward(DType dt, int64_t rows, int64_t cols, const void* logits,
                              const int64_t* target, int64_t ignore_index, const void* lse,
                              const void* g, void* dx) override {
    if (rows <= 0) return;
    use();
    dispatch_float(dt, "cross_entropy_backward", [&](auto tag) {
      using T = decltype(tag);
      k_cross_entropy_backward<T><<<row_grid(rows), kThreads>>>(
          rows, cols, static_cast<const T*>(logits), target, ignore_index,
          static_cast<const T*>(lse), static_cast<const T*>(g), static_cast<T*>(dx));
    });
    check_launch("cross_entropy_backward");
  }

  void index_select(DType dt, int64_t outer, int64_t r, int64_t inner, const void* src,
                    const int64_t* idx, int64_t n_idx, void* out) override {
    const int64_t n = outer * n_idx * inner;
    if (n <= 0) return;
    use();
    if (dtype_size(dt) == 4)
      k_index_select<uint32_t><<<grid_for(n), kThreads>>>(
          outer, r, inner, static_cast<const uint32_t*>(src), idx, n_idx,
          static_cast<uint32_t*>(out));
    else
      k_index_select<uint64_t><<<grid_for(n), kThreads>>>(
          outer, r, inner, static_cast<const uint64_t*>(src), idx, n_idx,
          static_cast<uint64_t*>(out));
    check_launch("index_select");
  }
  void index_add(DType dt, int64_t outer, int64_t r, int64_t inner, void* dst,
                 const int64_t* idx, int64_t n_idx, const void* src) override {
    const int64_t n = outer * n_idx * inner;
    if (n <= 0) return;
    use();
    dispatch_all(dt, [&](auto tag) {
      using T = decltype(tag);
      k_index_add<T><<<grid_for(n), kThreads>>>(outer, r, inner, static_cast<T*>(dst), idx,
                                                n_idx, static_cast<const T*>(src));
    });
    check_launch("index_add");
  }

  void rem_matrix(DType dt, const RemProblem& p, const void* a, const void* theta,
                  void* P) override {
    use();
    cuda::rem_matrix(dt, p, a, theta, P);
  }
  void rem_matrix_backward(DType dt, const RemProblem& p, const void* a, const void* theta,
                           const void* dP, void* da, void* dtheta) override {
    use();
    cuda::rem_matrix_backward(dt, p, a, theta, dP, da, dtheta);
  }
  void rem_scan(DType dt, const RemProblem& p, const void* a, const void* theta, const void* v,
                const void* state_in, void* y, void* state_out) override {
    use();
    cuda::rem_scan(dt, p, a, theta, v, state_in, y, state_out);
  }
  void rem_scan_backward(DType dt, const RemProblem& p, const void* a, const void* theta,
                         const void* v, const void* state_in, const void* dy, void* dv,
                         void* da, void* dtheta, void* dstate_in) override {
    use();
    cuda::rem_scan_backward(dt, p, a, theta, v, state_in, dy, dv, da, dtheta, dstate_in);
  }
  void sru_forward(DType dt, const SruProblem& p, const void* U, const void* x, const void* v,
                   const void* b, const void* c0, const void* mask, void* h, void* c,
                   void* c_last) override {
    use();
    cuda::sru_forward(dt, p, U, x, v, b, c0, mask, h, c, c_last);
  }
  void sru_backward(DType dt, const SruProblem& p, const void* U, const void* x, const void* v,
                    const void* b, const void* c0, const void* mask, const void* c,
                    const void* dh, const void* dc, const void* dc_last, void* dU, void* dx,
                    void* dv, void* db, void* dc0) override {
    use();
    cuda::sru_backward(dt, p, U, x, v, b, c0, mask, c, dh, dc, dc_last, dU, dx, dv, db, dc0);
  }
  bool rsa_attention_fused(DType dt, const RsaFusedProblem& p, const void* q, const void* k,
                           const void* v, const void* gs, const void* Y, void* O, void* Oatt_r,
                           void* lse) override {
    use();
    return cuda::rsa_attention_fused(dt, p, q, k, v, gs, Y, O, Oatt_r, lse);
  }
  bool rsa_attention_fused_backward(DType dt, const RsaFusedProblem& p, const void* q,
                                    const void* k, const void* v, const void* gs, const void* O,
                                    const void* Oatt_r, const void* lse, const void* dO,
                                    void* dq, void* dk, void* dv, void* dS) override {
    use();
    return cuda::rsa_attention_fused_backward(dt, p, q, k, v, gs, O, Oatt_r, lse, dO, dq, dk,
                                              dv, dS);
  }

 private:
  static bool is_flat(const ElemIter& it, int nops) {
    if (it.ndim != 1) return it.ndim == 0;
    for (int k = 0; k < nops; ++k)
      if (it.strides[k][0] != 1) return false;
    return true;
  }
  static unsigned row_grid(int64_t rows) {
    return unsigned((rows + kRowsPerBlock - 1) / kRowsPerBlock);
  }
  cublasHandle_t handle() {
    if (!cublas_) REMORA_CUBLAS_CHECK(cublasCreate(&cublas_));
    return cublas_;
  }

  int dev_;
  char name_[16];
  DeviceAllocator alloc_;
  cublasHandle_t cublas_ = nullptr;
};

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

void* scratch_alloc(size_t nbytes) {
  REMORA_CHECK(g_current != nullptr, "cuda: scratch memory asked for before any CUDA call");
  return g_current->raw_alloc(nbytes);
}
void scratch_free(void* p, size_t) {
  if (g_current) g_current->raw_free(p);
}

}  // namespace cuda
}  // namespace remora
