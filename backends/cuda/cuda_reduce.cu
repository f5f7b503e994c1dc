// SPDX-License-Identifier: BSD-3-Clause
// CUDA backend: reductions over the middle axis of [outer, r, inner] (one pass
// or two stages, see below) and gather / scatter along it (indices checked on
// the device, errors deferred: cuda_common.cuh's DeviceError).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

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

// Reductions run in one pass where the work is already spread over many
// threads, and in two stages where it is not (a full reduction, a bias-shaped
// sum over many rows): stage one splits r into S slices reduced in parallel
// into partials (scratch memory from the allocator), stage two combines each
// output's S partials in slice order. S and the slice bounds depend only on
// the shape, and floats never meet in atomics, so results are deterministic.
// max / min keep the first extreme (better_d compares indices).

// inner > 1: one thread per (o, j) column and slice of r (blockIdx.y; S =
// gridDim.y slices of `chunk` rows), a sequential loop over the slice
// (adjacent threads read adjacent memory). S == 1 writes the result; S > 1
// writes partial [slice, o * inner + j] (psum for sum, pval / pidx for max / min).
template <typename T>
__global__ void k_reduce_cols(ReduceOp op, int64_t outer, int64_t r, int64_t inner, int64_t chunk,
                              const T* x, T* out, int64_t* argidx,
                              typename AccOf<T>::type* psum, T* pval, int64_t* pidx) {
  using Acc = typename AccOf<T>::type;
  const int64_t n = outer * inner;
  const int64_t slice = blockIdx.y, S = gridDim.y;
  const int64_t k0 = slice * chunk, k1 = k0 + chunk < r ? k0 + chunk : r;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < n;
       t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t o = t / inner, j = t % inner;
    const T* p = x + o * r * inner + j;
    if (op == ReduceOp::sum) {
      Acc s = 0;
      for (int64_t k = k0; k < k1; ++k) s += Acc(p[k * inner]);
      if (S == 1) out[t] = T(s);
      else psum[slice * n + t] = s;
    } else {
      const bool mx = op == ReduceOp::max;
      T best = p[k0 * inner];
      int64_t bi = k0;
      for (int64_t k = k0 + 1; k < k1; ++k)
        if (better_d(mx, p[k * inner], k, best, bi)) { best = p[k * inner]; bi = k; }
      if (S == 1) {
        out[t] = best;
        if (argidx) argidx[t] = bi;
      } else {
        pval[slice * n + t] = best;
        pidx[slice * n + t] = bi;
      }
    }
  }
}
// Stage two of the column split: thread t combines its S partials in order.
template <typename T>
__global__ void k_finish_cols(ReduceOp op, int64_t n, int64_t S,
                              const typename AccOf<T>::type* psum, const T* pval,
                              const int64_t* pidx, T* out, int64_t* argidx) {
  using Acc = typename AccOf<T>::type;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < n;
       t += int64_t(gridDim.x) * blockDim.x) {
    if (op == ReduceOp::sum) {
      Acc s = 0;
      for (int64_t c = 0; c < S; ++c) s += psum[c * n + t];
      out[t] = T(s);
    } else {
      const bool mx = op == ReduceOp::max;
      T best = pval[t];
      int64_t bi = pidx[t];
      for (int64_t c = 1; c < S; ++c)
        if (better_d(mx, pval[c * n + t], pidx[c * n + t], best, bi)) {
          best = pval[c * n + t];
          bi = pidx[c * n + t];
        }
      out[t] = best;
      if (argidx) argidx[t] = bi;
    }
  }
}

// A block's tree over (value, index) pairs in shared memory; si = -1 marks a
// thread that saw no element. The result is in sv[0], si[0].
template <typename T>
__device__ void block_best(bool mx, T* sv, int64_t* si) {
  const int tid = threadIdx.x;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w >>= 1) {
    if (tid < w && si[tid + w] >= 0 &&
        (si[tid] < 0 || better_d(mx, sv[tid + w], si[tid + w], sv[tid], si[tid]))) {
      sv[tid] = sv[tid + w];
      si[tid] = si[tid + w];
    }
    __syncthreads();
  }
}
template <typename Acc>
__device__ void block_sum(Acc* ss) {
  const int tid = threadIdx.x;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w >>= 1) {
    if (tid < w) ss[tid] += ss[tid + w];
    __syncthreads();
  }
}

// inner == 1: block b reduces slice b % S of row b / S (`chunk` contiguous
// elements of a row of r) with a tree in shared memory. S == 1 writes the
// result; S > 1 writes partial b.
template <typename T>
__global__ void k_reduce_rows(ReduceOp op, int64_t r, int64_t S, int64_t chunk, const T* x, T* out,
                              int64_t* argidx, typename AccOf<T>::type* psum, T* pval,
                              int64_t* pidx) {
  using Acc = typename AccOf<T>::type;
  __shared__ Acc ss[kThreads];
  __shared__ T sv[kThreads];
  __shared__ int64_t si[kThreads];
  const int64_t b = blockIdx.x, row = b / S, slice = b % S;
  const T* p = x + row * r;
  const int64_t k0 = slice * chunk, k1 = k0 + chunk < r ? k0 + chunk : r;
  const int tid = threadIdx.x;
  if (op == ReduceOp::sum) {
    Acc s = 0;
    for (int64_t k = k0 + tid; k < k1; k += blockDim.x) s += Acc(p[k]);
    ss[tid] = s;
    block_sum(ss);
    if (tid == 0) {
      if (S == 1) out[row] = T(ss[0]);
      else psum[b] = ss[0];
    }
  } else {
    const bool mx = op == ReduceOp::max;
    T best = T(0);
    int64_t bi = -1;
    for (int64_t k = k0 + tid; k < k1; k += blockDim.x)
      if (bi < 0 || better_d(mx, p[k], k, best, bi)) {
        best = p[k];
        bi = k;
      }
    sv[tid] = best;
    si[tid] = bi;
    block_best(mx, sv, si);
    if (tid == 0) {
      if (S == 1) {
        out[row] = sv[0];
        if (argidx) argidx[row] = si[0] < 0 ? 0 : si[0];
      } else {
        pval[b] = sv[0];
        pidx[b] = si[0];
      }
    }
  }
}
// Stage two of the row split: block `row` combines the row's S partials.
template <typename T>
__global__ void k_finish_rows(ReduceOp op, int64_t S, const typename AccOf<T>::type* psum,
                              const T* pval, const int64_t* pidx, T* out, int64_t* argidx) {
  using Acc = typename AccOf<T>::type;
  __shared__ Acc ss[kThreads];
  __shared__ T sv[kThreads];
  __shared__ int64_t si[kThreads];
  const int64_t row = blockIdx.x;
  const int tid = threadIdx.x;
  if (op == ReduceOp::sum) {
    Acc s = 0;
    for (int64_t c = tid; c < S; c += blockDim.x) s += psum[row * S + c];
    ss[tid] = s;
    block_sum(ss);
    if (tid == 0) out[row] = T(ss[0]);
  } else {
    const bool mx = op == ReduceOp::max;
    T best = T(0);
    int64_t bi = -1;
    for (int64_t c = tid; c < S; c += blockDim.x) {
      const T v = pval[row * S + c];
      const int64_t vi = pidx[row * S + c];
      if (vi >= 0 && (bi < 0 || better_d(mx, v, vi, best, bi))) {
        best = v;
        bi = vi;
      }
    }
    sv[tid] = best;
    si[tid] = bi;
    block_best(mx, sv, si);
    if (tid == 0) {
      out[row] = sv[0];
      if (argidx) argidx[row] = si[0] < 0 ? 0 : si[0];
    }
  }
}

// Split sizes. Rows: a block per slice of at least kRowSlice elements, as many
// slices as make about kRowBlocks blocks in all (a row of 10^7 gets 611).
// Columns: slices of at least kColChunk rows, at most kMaxPartials partial
// values in all (beyond that the outputs alone fill the GPU) and 65535 slices.
constexpr int64_t kRowSlice = 16384, kRowBlocks = 2048;
constexpr int64_t kColChunk = 128, kMaxPartials = int64_t(1) << 22;

// ---------------------------------------------------------------------------
// Gather / scatter along the middle axis of [outer, r, inner].
// ---------------------------------------------------------------------------
// Indices are validated here, not on the host (that would be a sync per call):
// an index outside [0, r) is recorded as a deferred DeviceError (raised at the
// next copy_to_host) and its entries are skipped (index_select writes zeros).
template <typename W>  // a word of the element's size (bit copies)
__global__ void k_index_select(int64_t outer, int64_t r, int64_t inner, const W* src,
                               const int64_t* idx, int64_t n_idx, W* out, DeviceError* err) {
  const int64_t n = outer * n_idx * inner;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < n;
       t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t j = t % inner, oi = t / inner, i = oi % n_idx, o = oi / n_idx;
    const int64_t k = idx[i];
    if (k < 0 || k >= r) {
      report_device_error(err, kDevErrIndex, k, r, 0);
      out[t] = W(0);
      continue;
    }
    out[t] = src[(o * r + k) * inner + j];
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
                            int64_t n_idx, const T* src, DeviceError* err) {
  const int64_t n = outer * n_idx * inner;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < n;
       t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t j = t % inner, oi = t / inner, i = oi % n_idx, o = oi / n_idx;
    const int64_t k = idx[i];
    if (k < 0 || k >= r) {
      report_device_error(err, kDevErrIndex, k, r, 0);
      continue;
    }
    atomic_add_d(dst + (o * r + k) * inner + j, src[t]);
  }
}

// One thread per (o, j) line walks it along n (sums in double for floats).
template <typename T>
__global__ void k_cumsum(int64_t outer, int64_t n, int64_t inner, bool reverse, const T* src, T* dst) {
  using Acc = typename std::conditional<std::is_same<T, int64_t>::value, int64_t, double>::type;
  const int64_t lines = outer * inner;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < lines;
       t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t o = t / inner, j = t % inner;
    Acc acc = 0;
    for (int64_t step = 0; step < n; ++step) {
      const int64_t i = reverse ? n - 1 - step : step;
      const int64_t off = (o * n + i) * inner + j;
      acc += Acc(src[off]);
      dst[off] = T(acc);
    }
  }
}

}  // namespace

void CudaBackend::cumsum(const CumsumArgs& args) {
  const int64_t lines = args.outer * args.inner;
  if (lines <= 0 || args.n <= 0) return;
  use();
  switch (args.dt) {
    case DType::f32:
      k_cumsum<float><<<grid_for(lines), kThreads, 0, stream()>>>(
          args.outer, args.n, args.inner, args.reverse, static_cast<const float*>(args.src),
          static_cast<float*>(args.dst));
      break;
    case DType::f64:
      k_cumsum<double><<<grid_for(lines), kThreads, 0, stream()>>>(
          args.outer, args.n, args.inner, args.reverse, static_cast<const double*>(args.src),
          static_cast<double*>(args.dst));
      break;
    case DType::i64:
      k_cumsum<int64_t><<<grid_for(lines), kThreads, 0, stream()>>>(
          args.outer, args.n, args.inner, args.reverse, static_cast<const int64_t*>(args.src),
          static_cast<int64_t*>(args.dst));
      break;
    default: REMORA_FAIL("cumsum kernel: expected f32, f64 or i64, got " << dtype_name(args.dt));
  }
  check_launch("cumsum");
}

void CudaBackend::reduce(const ReduceArgs& args) {
  if (args.outer * args.inner <= 0) return;
  use();
  dispatch_copy(args.dt, [&](auto tag) {
    using T = decltype(tag);
    using Acc = typename AccOf<T>::type;
    const T* x = static_cast<const T*>(args.in);
    T* o = static_cast<T*>(args.out);
    const bool sum = args.op == ReduceOp::sum;
    if (args.inner == 1 && args.r >= 512 && args.outer < (int64_t(1) << 31)) {
      // Long contiguous rows: blocks over slices of each row.
      int64_t S =
          std::min((args.r + kRowSlice - 1) / kRowSlice, std::max<int64_t>(1, kRowBlocks / args.outer));
      if (S <= 1) {
        k_reduce_rows<T><<<unsigned(args.outer), kThreads, 0, stream()>>>(
            args.op, args.r, 1, args.r, x, o, args.argidx, nullptr, nullptr, nullptr);
        check_launch("reduce");
        return;
      }
      const int64_t chunk = (args.r + S - 1) / S;
      S = (args.r + chunk - 1) / chunk;  // no empty slice
      const int64_t np = args.outer * S;
      Scratch psum(sum ? size_t(np) * sizeof(Acc) : 0);
      Scratch pval(sum ? 0 : size_t(np) * sizeof(T)), pidx(sum ? 0 : size_t(np) * sizeof(int64_t));
      k_reduce_rows<T><<<unsigned(np), kThreads, 0, stream()>>>(
          args.op, args.r, S, chunk, x, o, args.argidx, psum.as<Acc>(), pval.as<T>(), pidx.as<int64_t>());
      check_launch("reduce (slices)");
      k_finish_rows<T><<<unsigned(args.outer), kThreads, 0, stream()>>>(
          args.op, S, psum.as<Acc>(), pval.as<T>(), pidx.as<int64_t>(), o, args.argidx);
      check_launch("reduce (finish)");
      return;
    }
    // Columns (or short rows): a thread per output and slice of r.
    const int64_t n = args.outer * args.inner;
    int64_t S = 1;
    if (args.r > 2 * kColChunk && n < kMaxPartials / 2)
      S = std::min<int64_t>({(args.r + kColChunk - 1) / kColChunk, kMaxPartials / n, 65535});
    if (S <= 1) {
      k_reduce_cols<T><<<grid_for(n), kThreads, 0, stream()>>>(
          args.op, args.outer, args.r, args.inner, args.r, x, o, args.argidx, nullptr, nullptr, nullptr);
      check_launch("reduce");
      return;
    }
    const int64_t chunk = (args.r + S - 1) / S;
    S = (args.r + chunk - 1) / chunk;  // no empty slice
    Scratch psum(sum ? size_t(S * n) * sizeof(Acc) : 0);
    Scratch pval(sum ? 0 : size_t(S * n) * sizeof(T)), pidx(sum ? 0 : size_t(S * n) * sizeof(int64_t));
    const dim3 grid(std::min<unsigned>(grid_for(n), 65535u), unsigned(S));
    k_reduce_cols<T><<<grid, kThreads, 0, stream()>>>(args.op, args.outer, args.r, args.inner, chunk, x, o,
                                                      args.argidx, psum.as<Acc>(), pval.as<T>(),
                                                      pidx.as<int64_t>());
    check_launch("reduce (slices)");
    k_finish_cols<T><<<grid_for(n), kThreads, 0, stream()>>>(args.op, n, S, psum.as<Acc>(), pval.as<T>(),
                                                             pidx.as<int64_t>(), o, args.argidx);
    check_launch("reduce (finish)");
  });
}

void CudaBackend::index_select(const IndexArgs& args) {
  const int64_t n = args.outer * args.n_idx * args.inner;
  if (n <= 0) return;
  use();
  DeviceError* err = device_error();
  // A copy of elements of the dtype's size, moved as unsigned words of that size.
  auto launch = [&](auto word) {
    using W = decltype(word);
    k_index_select<W><<<grid_for(n), kThreads, 0, stream()>>>(args.outer, args.r, args.inner,
                                                              static_cast<const W*>(args.src), args.idx,
                                                              args.n_idx, static_cast<W*>(args.dst), err);
  };
  switch (dtype_size(args.dt)) {
    case 1: launch(uint8_t{}); break;
    case 2: launch(uint16_t{}); break;
    case 4: launch(uint32_t{}); break;
    case 8: launch(uint64_t{}); break;
    default: REMORA_FAIL("index_select: no CUDA copy for elements of " << dtype_size(args.dt) << " bytes");
  }
  check_launch("index_select");
}

void CudaBackend::index_add(const IndexArgs& args) {
  const int64_t n = args.outer * args.n_idx * args.inner;
  if (n <= 0) return;
  use();
  DeviceError* err = device_error();
  dispatch_all(args.dt, [&](auto tag) {
    using T = decltype(tag);
    k_index_add<T><<<grid_for(n), kThreads, 0, stream()>>>(args.outer, args.r, args.inner,
                                                           static_cast<T*>(args.dst), args.idx, args.n_idx,
                                                           static_cast<const T*>(args.src), err);
  });
  check_launch("index_add");
}

}  // namespace cuda
}  // namespace remora
