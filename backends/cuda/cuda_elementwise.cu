// SPDX-License-Identifier: BSD-3-Clause
// CUDA backend: strided elementwise (copy, binary, where) and contiguous
// unary kernels, grid-stride loops over flat indices.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>

#include "cuda_backend.cuh"

namespace remora {
namespace cuda {

namespace {

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
// UnaryOp::round_bf16, as the CPU's (backends/cpu/cpu_elementwise.cpp).
__device__ __forceinline__ float round_bf16_d(float x) {
  const unsigned u = __float_as_uint(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return __uint_as_float((u | 0x00400000u) & 0xffff0000u);
  return __uint_as_float((u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u);
}
__device__ __forceinline__ double round_bf16_d(double x) {
  if (!(fabs(x) <= 1.7976931348623157e308) || x == 0) return x;  // NaN, inf, +-0
  const double ulp = ldexp(1.0, max(ilogb(x), -126) - 7);
  const double r = rint(x / ulp) * ulp;
  return fabs(r) > 0x1.fep127 ? copysign(__longlong_as_double(0x7ff0000000000000ll), x) : r;
}
template <typename T>
__global__ void k_unary(UnaryOp op, int64_t n, const T* x, T* o, T a, T b) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const T v = x[i];
    T r = T(NAN);  // an op without a line here comes out NaN, not x
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
      case UnaryOp::round_bf16: r = round_bf16_d(v); break;
      case UnaryOp::erf: r = erf(v); break;
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


bool is_flat(const ElemIter& it, int nops) {
  if (it.ndim != 1) return it.ndim == 0;
  for (int k = 0; k < nops; ++k)
    if (it.strides[k][0] != 1) return false;
  return true;
}

}  // namespace

void CudaBackend::copy(const CopyArgs& args) {
  const int64_t n = args.it.numel();
  if (n <= 0) return;
  use();
  if (args.dt_out == args.dt_in && is_flat(args.it, 2)) {
    REMORA_CUDA_CHECK(cudaMemcpyAsync(args.out, args.in, size_t(n) * dtype_size(args.dt_out),
                                      cudaMemcpyDeviceToDevice, stream()));
    return;
  }
  dispatch_storage(args.dt_out, [&](auto to) {
    using TO = decltype(to);
    dispatch_storage(args.dt_in, [&](auto ti) {
      using TI = decltype(ti);
      k_copy<TO, TI><<<grid_for(n), kThreads, 0, stream()>>>(args.it, n, static_cast<TO*>(args.out),
                                                             static_cast<const TI*>(args.in));
    });
  });
  check_launch("copy");
}

void CudaBackend::binary(const BinaryArgs& args) {
  const int64_t n = args.it.numel();
  if (n <= 0) return;
  use();
  dispatch_copy(args.dt, [&](auto tag) {
    using T = decltype(tag);
    k_binary<T><<<grid_for(n), kThreads, 0, stream()>>>(args.op, args.it, n, static_cast<T*>(args.out),
                                                        static_cast<const T*>(args.a),
                                                        static_cast<const T*>(args.b));
  });
  check_launch("binary");
}

void CudaBackend::where(const WhereArgs& args) {
  const int64_t n = args.it.numel();
  if (n <= 0) return;
  use();
  dispatch_copy(args.dt, [&](auto tag) {
    using T = decltype(tag);
    dispatch_storage(args.dt_cond, [&](auto ctag) {
      using C = decltype(ctag);
      k_where<T, C><<<grid_for(n), kThreads, 0, stream()>>>(
          args.it, n, static_cast<T*>(args.out), static_cast<const C*>(args.cond),
          static_cast<const T*>(args.a), static_cast<const T*>(args.b));
    });
  });
  check_launch("where");
}

void CudaBackend::unary(const UnaryArgs& args) {
  if (args.n <= 0) return;
  use();
  if (args.dt == DType::i64) {
    REMORA_CHECK(args.op == UnaryOp::affine || args.op == UnaryOp::abs,
                 "cuda unary: only affine and abs take i64; convert with .to(DType::f32)");
    k_unary_i64<<<grid_for(args.n), kThreads, 0, stream()>>>(
        args.op == UnaryOp::abs, args.n, static_cast<const int64_t*>(args.x), static_cast<int64_t*>(args.out),
        args.alpha, args.beta);
  } else {
    dispatch_float(args.dt, "unary", [&](auto tag) {
      using T = decltype(tag);
      k_unary<T><<<grid_for(args.n), kThreads, 0, stream()>>>(args.op, args.n, static_cast<const T*>(args.x),
                                                              static_cast<T*>(args.out), T(args.alpha),
                                                              T(args.beta));
    });
  }
  check_launch("unary");
}

void CudaBackend::unary_grad(const UnaryGradArgs& args) {
  if (args.n <= 0) return;
  use();
  dispatch_float(args.dt, "unary_grad", [&](auto tag) {
    using T = decltype(tag);
    k_unary_grad<T><<<grid_for(args.n), kThreads, 0, stream()>>>(
        args.op, args.n, static_cast<const T*>(args.grad), static_cast<const T*>(args.v),
        static_cast<T*>(args.out), T(args.alpha));
  });
  check_launch("unary_grad");
}

}  // namespace cuda
}  // namespace remora
