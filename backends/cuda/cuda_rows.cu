// SPDX-License-Identifier: BSD-3-Clause
// CUDA backend: the row kernels of the fused NN ops (softmax, layer_norm,
// cross_entropy), one warp per row. cross_entropy checks its targets on the
// device (a deferred DeviceError, cuda_common.cuh); an out-of-range target
// is never read through (its loss is NaN, its gradient row has no -1 term).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>

#include "cuda_backend.cuh"

namespace remora {
namespace cuda {

namespace {

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
    const T ls = T(log(s));  // logsumexp's parts kept apart (see the CPU's rows)
    for (int64_t j = lane; j < cols; j += 32) y[j] = (x[j] - mx) - ls;
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
                                int64_t ignore, T* L, T* LSE, DeviceError* err) {
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
    // logsumexp = mx + log(s), saved as its two parts (CrossEntropyArgs::lse).
    const T ls = T(log(s));
    LSE[2 * row] = mx;
    LSE[2 * row + 1] = ls;
    const int64_t t = target[row];
    if (t == ignore) {
      L[row] = T(0);
    } else if (t < 0 || t >= cols) {  // checked here, raised at the next sync (no host copy)
      report_device_error(err, kDevErrTarget, t, cols, ignore);
      L[row] = T(NAN);
    } else {
      L[row] = (mx - x[t]) + ls;
    }
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
  const T g = G[row], mx = LSE[2 * row], ls = LSE[2 * row + 1];
  // At the target, g (p_t - 1) as g expm1(.), without the cancellation of p_t - 1.
  for (int64_t j = lane; j < cols; j += 32)
    dx[j] = j == t ? g * T(expm1((x[j] - mx) - ls)) : g * exp((x[j] - mx) - ls);
}


unsigned row_grid(int64_t rows) {
  return unsigned((rows + kRowsPerBlock - 1) / kRowsPerBlock);
}

}  // namespace

void CudaBackend::softmax(const SoftmaxArgs& args) {
  if (args.rows <= 0 || args.cols <= 0) return;
  use();
  dispatch_float(args.dt, "softmax", [&](auto tag) {
    using T = decltype(tag);
    k_softmax<T><<<row_grid(args.rows), kThreads, 0, stream()>>>(
        args.rows, args.cols, static_cast<const T*>(args.x), static_cast<T*>(args.y), args.log);
  });
  check_launch("softmax");
}

void CudaBackend::softmax_backward(const SoftmaxBackwardArgs& args) {
  if (args.rows <= 0 || args.cols <= 0) return;
  use();
  dispatch_float(args.dt, "softmax_backward", [&](auto tag) {
    using T = decltype(tag);
    k_softmax_backward<T><<<row_grid(args.rows), kThreads, 0, stream()>>>(
        args.rows, args.cols, static_cast<const T*>(args.dy), static_cast<const T*>(args.y),
        static_cast<T*>(args.dx), args.log);
  });
  check_launch("softmax_backward");
}

void CudaBackend::layer_norm(const LayerNormArgs& args) {
  if (args.rows <= 0 || args.cols <= 0) return;
  use();
  dispatch_float(args.dt, "layer_norm", [&](auto tag) {
    using T = decltype(tag);
    k_layer_norm<T><<<row_grid(args.rows), kThreads, 0, stream()>>>(
        args.rows, args.cols, static_cast<const T*>(args.x), static_cast<const T*>(args.w),
        static_cast<const T*>(args.b), args.eps, static_cast<T*>(args.y), static_cast<T*>(args.mean),
        static_cast<T*>(args.rstd));
  });
  check_launch("layer_norm");
}

void CudaBackend::layer_norm_backward(const LayerNormBackwardArgs& args) {
  if (args.rows <= 0 || args.cols <= 0) return;
  use();
  dispatch_float(args.dt, "layer_norm_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* DY = static_cast<const T*>(args.dy);
    const T* X = static_cast<const T*>(args.x);
    const T* MEAN = static_cast<const T*>(args.mean);
    const T* RSTD = static_cast<const T*>(args.rstd);
    if (args.dx)
      k_layer_norm_backward_dx<T><<<row_grid(args.rows), kThreads, 0, stream()>>>(
          args.rows, args.cols, DY, X, MEAN, RSTD, static_cast<const T*>(args.w), static_cast<T*>(args.dx));
    check_launch("layer_norm_backward");
    if (args.dw || args.db) {
      // Rows split into chunks so that narrow layers still fill the GPU.
      const int64_t chunks = std::min<int64_t>(args.rows, 64);
      const int64_t rpc = (args.rows + chunks - 1) / chunks;
      Scratch part(size_t(chunks) * 2 * size_t(args.cols) * sizeof(double));
      dim3 grid(unsigned((args.cols + kThreads - 1) / kThreads), unsigned(chunks));
      k_layer_norm_backward_dwdb<T>
          <<<grid, kThreads, 0, stream()>>>(args.rows, args.cols, rpc, DY, X, MEAN, RSTD, part.as<double>());
      check_launch("layer_norm_backward (dw, db)");
      k_ln_finish<T><<<unsigned((args.cols + kThreads - 1) / kThreads), kThreads, 0, stream()>>>(
          args.cols, chunks, part.as<double>(), static_cast<T*>(args.dw), static_cast<T*>(args.db));
      check_launch("layer_norm_backward (dw, db)");
    }
  });
}

void CudaBackend::cross_entropy(const CrossEntropyArgs& args) {
  if (args.rows <= 0) return;
  use();
  DeviceError* err = device_error();
  dispatch_float(args.dt, "cross_entropy", [&](auto tag) {
    using T = decltype(tag);
    k_cross_entropy<T><<<row_grid(args.rows), kThreads, 0, stream()>>>(
        args.rows, args.cols, static_cast<const T*>(args.logits), args.target, args.ignore_index,
        static_cast<T*>(args.loss), static_cast<T*>(args.lse), err);
  });
  check_launch("cross_entropy");
}

void CudaBackend::cross_entropy_backward(const CrossEntropyBackwardArgs& args) {
  if (args.rows <= 0) return;
  use();
  dispatch_float(args.dt, "cross_entropy_backward", [&](auto tag) {
    using T = decltype(tag);
    k_cross_entropy_backward<T><<<row_grid(args.rows), kThreads, 0, stream()>>>(
        args.rows, args.cols, static_cast<const T*>(args.logits), args.target, args.ignore_index,
        static_cast<const T*>(args.lse), static_cast<const T*>(args.g), static_cast<T*>(args.dx));
  });
  check_launch("cross_entropy_backward");
}

}  // namespace cuda
}  // namespace remora
