// SPDX-License-Identifier: BSD-3-Clause
// CPU backend: strided elementwise (copy, binary, where) and contiguous
// unary kernels.
#include <cstring>
#include <limits>

#include "cpu_backend.h"
#include "vec_math.h"

namespace remora {
namespace cpu_impl {

namespace {

// o[i] = f(a[i], b[i]) with the common stride patterns as tight loops.
template <typename T, typename F>
inline void binary_row(T* o, const T* a, const T* b, int64_t n, int64_t so, int64_t sa,
                       int64_t sb, F f) {
  if (so == 1 && sa == 1 && sb == 1) {
    for (int64_t i = 0; i < n; ++i) o[i] = f(a[i], b[i]);
  } else if (so == 1 && sa == 1 && sb == 0) {
    const T bv = b[0];
    for (int64_t i = 0; i < n; ++i) o[i] = f(a[i], bv);
  } else if (so == 1 && sa == 0 && sb == 1) {
    const T av = a[0];
    for (int64_t i = 0; i < n; ++i) o[i] = f(av, b[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) o[i * so] = f(a[i * sa], b[i * sb]);
  }
}

template <typename T, typename F>
void binary_kernel(const ElemIter& it, T* out, const T* a, const T* b, F f) {
  const int nd = it.ndim;
  const int64_t so = nd ? it.strides[0][nd - 1] : 1, sa = nd ? it.strides[1][nd - 1] : 1,
                sb = nd ? it.strides[2][nd - 1] : 1;
  iterate(it, 3, [&](const int64_t* off, int64_t n) {
    binary_row(out + off[0], a + off[1], b + off[2], n, so, sa, sb, f);
  });
}

// The exact (erf) GELU and its derivative; in f32 on the vectorisable erf and
// exp of vec_math.h, inlined by force so the loops over them run in SIMD.
template <typename T>
REMORA_VEC_INLINE T gelu_f(T x) {
  return T(0.5) * x * (T(1) + vec::verf(x * T(0.70710678118654752440)));
}
template <typename T>
REMORA_VEC_INLINE T gelu_grad_f(T x) {
  const T cdf = T(0.5) * (T(1) + vec::verf(x * T(0.70710678118654752440)));
  const T pdf = vec::vexp(T(-0.5) * x * x) * T(0.39894228040143267794);
  return cdf + x * pdf;
}
template <typename T>
inline T sigmoid_f(T x) {
  // Stable on both tails.
  if (x >= 0) return T(1) / (T(1) + std::exp(-x));
  const T e = std::exp(x);
  return e / (T(1) + e);
}

// The nearest bfloat16 (UnaryOp::round_bf16). f32: on the bits, branch-free so
// the loop vectorises: adding 0x7fff plus the kept part's lowest bit rounds
// to nearest even, a carry into the exponent gives the next binade or inf,
// and NaN (exponent all ones, mantissa non-zero) is kept quiet instead.
inline float round_bf16_f(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  const uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  const uint32_t q = (u | 0x00400000u) & 0xffff0000u;
  u = (u & 0x7fffffffu) > 0x7f800000u ? q : r;
  float y;
  std::memcpy(&y, &u, sizeof y);
  return y;
}
// f64: rounded once, straight to bf16 (not through f32): scaled to bf16's ulp at
// x's exponent (2^-133 below 2^-126), rounded to an integer (ties to even in the
// default rounding mode), scaled back; past bf16's largest finite, inf.
inline double round_bf16_f(double x) {
  if (!(std::fabs(x) <= std::numeric_limits<double>::max()) || x == 0) return x;  // NaN, inf, +-0
  const double ulp = std::ldexp(1.0, std::max(std::ilogb(x), -126) - 7);
  const double r = std::nearbyint(x / ulp) * ulp;
  return std::fabs(r) > 0x1.fep127 ? std::copysign(std::numeric_limits<double>::infinity(), x) : r;
}

// GELU and its gradient over f32 in 8 lanes with FMA where the CPU has AVX2
// (cpu_isa): the same code as gelu_f / gelu_grad_f, vectorised for that target.
// False where they do not apply (another dtype, another CPU): the caller's map_n
// runs the baseline copy.
template <typename T>
bool gelu_avx2(int64_t, const T*, T*) {
  return false;
}
template <typename T>
bool gelu_grad_avx2(int64_t, const T*, const T*, T*) {
  return false;
}
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
__attribute__((target("avx2,fma"))) void gelu_f32_avx2(const float* x, float* o, int64_t b, int64_t e) {
#pragma omp simd
  for (int64_t i = b; i < e; ++i) o[i] = gelu_f(x[i]);
}
__attribute__((target("avx2,fma"))) void gelu_grad_f32_avx2(const float* g, const float* x, float* o, int64_t b,
                                                            int64_t e) {
#pragma omp simd
  for (int64_t i = b; i < e; ++i) o[i] = g[i] * gelu_grad_f(x[i]);
}
template <>
bool gelu_avx2<float>(int64_t n, const float* x, float* o) {
  if (!use_avx2()) return false;
  parallel_ranges(n, n > kParallelGrain, [&](int64_t b, int64_t e) { gelu_f32_avx2(x, o, b, e); });
  return true;
}
template <>
bool gelu_grad_avx2<float>(int64_t n, const float* g, const float* x, float* o) {
  if (!use_avx2()) return false;
  parallel_ranges(n, n > kParallelGrain, [&](int64_t b, int64_t e) { gelu_grad_f32_avx2(g, x, o, b, e); });
  return true;
}
#endif

template <typename T, typename F>
void map_n(int64_t n, const T* x, T* out, F f) {
  parallel_ranges(n, n > kParallelGrain, [&](int64_t b, int64_t e) {
#pragma omp simd
    for (int64_t i = b; i < e; ++i) out[i] = f(x[i]);
  });
}
template <typename T, typename F>
void map2_n(int64_t n, const T* g, const T* v, T* out, F f) {
  parallel_ranges(n, n > kParallelGrain, [&](int64_t b, int64_t e) {
#pragma omp simd
    for (int64_t i = b; i < e; ++i) out[i] = f(g[i], v[i]);
  });
}


}  // namespace

void CpuBackend::copy(const CopyArgs& args) {
  const int nd = args.it.ndim;
  const int64_t so = nd ? args.it.strides[0][nd - 1] : 1, si = nd ? args.it.strides[1][nd - 1] : 1;
  dispatch(args.dt_out, [&](auto to) {
    using TO = decltype(to);
    dispatch(args.dt_in, [&](auto ti) {
      using TI = decltype(ti);
      TO* o = static_cast<TO*>(args.out);
      const TI* x = static_cast<const TI*>(args.in);
      iterate(args.it, 2, [&](const int64_t* off, int64_t n) {
        TO* oo = o + off[0];
        const TI* xx = x + off[1];
        if (so == 1 && si == 1) {
          if (std::is_same<TO, TI>::value)
            std::memcpy(oo, xx, size_t(n) * sizeof(TO));
          else
            for (int64_t i = 0; i < n; ++i) oo[i] = TO(xx[i]);
        } else {
          for (int64_t i = 0; i < n; ++i) oo[i * so] = TO(xx[i * si]);
        }
      });
    });
  });
}

void CpuBackend::binary(const BinaryArgs& args) {
  dispatch(args.dt, [&](auto tag) {
    using T = decltype(tag);
    T* o = static_cast<T*>(args.out);
    const T* x = static_cast<const T*>(args.a);
    const T* y = static_cast<const T*>(args.b);
    switch (args.op) {
      case BinaryOp::add: binary_kernel(args.it, o, x, y, [](T p, T q) { return p + q; }); break;
      case BinaryOp::sub: binary_kernel(args.it, o, x, y, [](T p, T q) { return p - q; }); break;
      case BinaryOp::mul: binary_kernel(args.it, o, x, y, [](T p, T q) { return p * q; }); break;
      case BinaryOp::div: binary_kernel(args.it, o, x, y, [](T p, T q) { return p / q; }); break;
      case BinaryOp::maximum: binary_kernel(args.it, o, x, y, [](T p, T q) { return p > q ? p : q; }); break;
      case BinaryOp::minimum: binary_kernel(args.it, o, x, y, [](T p, T q) { return p < q ? p : q; }); break;
      case BinaryOp::eq: binary_kernel(args.it, o, x, y, [](T p, T q) { return T(p == q); }); break;
      case BinaryOp::ne: binary_kernel(args.it, o, x, y, [](T p, T q) { return T(p != q); }); break;
      case BinaryOp::lt: binary_kernel(args.it, o, x, y, [](T p, T q) { return T(p < q); }); break;
      case BinaryOp::le: binary_kernel(args.it, o, x, y, [](T p, T q) { return T(p <= q); }); break;
      case BinaryOp::gt: binary_kernel(args.it, o, x, y, [](T p, T q) { return T(p > q); }); break;
      case BinaryOp::ge: binary_kernel(args.it, o, x, y, [](T p, T q) { return T(p >= q); }); break;
    }
  });
}

void CpuBackend::where(const WhereArgs& args) {
  const int nd = args.it.ndim;
  int64_t s[4];
  for (int k = 0; k < 4; ++k) s[k] = nd ? args.it.strides[k][nd - 1] : 1;
  dispatch(args.dt, [&](auto tag) {
    using T = decltype(tag);
    dispatch(args.dt_cond, [&](auto ctag) {
      using C = decltype(ctag);
      T* o = static_cast<T*>(args.out);
      const C* c = static_cast<const C*>(args.cond);
      const T* x = static_cast<const T*>(args.a);
      const T* y = static_cast<const T*>(args.b);
      iterate(args.it, 4, [&](const int64_t* off, int64_t n) {
        for (int64_t i = 0; i < n; ++i)
          o[off[0] + i * s[0]] =
              c[off[1] + i * s[1]] != C(0) ? x[off[2] + i * s[2]] : y[off[3] + i * s[3]];
      });
    });
  });
}

void CpuBackend::unary(const UnaryArgs& args) {
  if (args.op == UnaryOp::affine && args.dt == DType::i64) {
    const int64_t* x = static_cast<const int64_t*>(args.x);
    int64_t* o = static_cast<int64_t*>(args.out);
    map_n(args.n, x, o, [=](int64_t v) { return int64_t(args.alpha * double(v) + args.beta); });
    return;
  }
  if (args.op == UnaryOp::abs && args.dt == DType::i64) {
    map_n(args.n, static_cast<const int64_t*>(args.x), static_cast<int64_t*>(args.out),
          [](int64_t v) { return v < 0 ? -v : v; });
    return;
  }
  dispatch_float_half(args.dt, "unary", [&](auto tag) {
    using T = decltype(tag);
    const T* x = static_cast<const T*>(args.x);
    T* o = static_cast<T*>(args.out);
    using C = compute_t<T>;  // scalars stay f32 for the 16-bit types
    const C a = C(args.alpha), b = C(args.beta);
    switch (args.op) {
      case UnaryOp::affine: map_n(args.n, x, o, [=](C v) { return a * v + b; }); break;
      case UnaryOp::pow:
        if (args.alpha == 2)
          map_n(args.n, x, o, [](C v) { return v * v; });
        else
          map_n(args.n, x, o, [=](C v) { return std::pow(v, a); });
        break;
      case UnaryOp::exp: map_n(args.n, x, o, [](C v) { return vec::vexp(v); }); break;
      case UnaryOp::log: map_n(args.n, x, o, [](C v) { return std::log(v); }); break;
      case UnaryOp::sqrt: map_n(args.n, x, o, [](C v) { return std::sqrt(v); }); break;
      case UnaryOp::tanh: map_n(args.n, x, o, [](C v) { return std::tanh(v); }); break;
      case UnaryOp::sigmoid: map_n(args.n, x, o, [](C v) { return sigmoid_f(v); }); break;
      case UnaryOp::relu: map_n(args.n, x, o, [](C v) { return v > C(0) ? v : C(0); }); break;
      case UnaryOp::gelu:
        if (!gelu_avx2(args.n, x, o)) map_n(args.n, x, o, [](C v) REMORA_VEC_LAMBDA { return gelu_f(v); });
        break;
      case UnaryOp::abs: map_n(args.n, x, o, [](C v) { return std::abs(v); }); break;
      case UnaryOp::sin: map_n(args.n, x, o, [](C v) { return std::sin(v); }); break;
      case UnaryOp::cos: map_n(args.n, x, o, [](C v) { return std::cos(v); }); break;
      case UnaryOp::round_bf16: map_n(args.n, x, o, [](C v) { return round_bf16_f(v); }); break;
      case UnaryOp::erf: map_n(args.n, x, o, [](C v) REMORA_VEC_LAMBDA { return vec::verf(v); }); break;
    }
  });
}

void CpuBackend::unary_grad(const UnaryGradArgs& args) {
  dispatch_float_half(args.dt, "unary_grad", [&](auto tag) {
    using T = decltype(tag);
    const T* g = static_cast<const T*>(args.grad);
    const T* x = static_cast<const T*>(args.v);
    T* o = static_cast<T*>(args.out);
    using C = compute_t<T>;
    const C a = C(args.alpha);
    switch (args.op) {
      case UnaryGradOp::tanh: map2_n(args.n, g, x, o, [](C gg, C y) { return gg * (C(1) - y * y); }); break;
      case UnaryGradOp::sigmoid:
        map2_n(args.n, g, x, o, [](C gg, C y) { return gg * y * (C(1) - y); });
        break;
      case UnaryGradOp::relu:
        map2_n(args.n, g, x, o, [](C gg, C xx) { return xx > C(0) ? gg : C(0); });
        break;
      case UnaryGradOp::gelu:
        if (!gelu_grad_avx2(args.n, g, x, o))
          map2_n(args.n, g, x, o, [](C gg, C xx) REMORA_VEC_LAMBDA { return gg * gelu_grad_f(xx); });
        break;
      case UnaryGradOp::pow:
        map2_n(args.n, g, x, o, [=](C gg, C xx) { return gg * a * std::pow(xx, a - C(1)); });
        break;
    }
  });
}

}  // namespace cpu_impl
}  // namespace remora
