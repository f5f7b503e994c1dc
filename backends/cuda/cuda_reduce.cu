// CUDA backend: reductions over the middle axis of [outer, r, inner] and
// gather / scatter along it.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>

#include "cuda_backend.cuh"

namespace remora {
namespace cuda {

namespace {

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


}  // namespace

void CudaBackend::reduce(ReduceOp op, DType dt, int64_t outer, int64_t r, int64_t inner, const void* in,
            void* out, int64_t* argidx) {
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

void CudaBackend::index_select(DType dt, int64_t outer, int64_t r, int64_t inner, const void* src,
                  const int64_t* idx, int64_t n_idx, void* out) {
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

void CudaBackend::index_add(DType dt, int64_t outer, int64_t r, int64_t inner, void* dst,
               const int64_t* idx, int64_t n_idx, const void* src) {
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

}  // namespace cuda
}  // namespace remora
