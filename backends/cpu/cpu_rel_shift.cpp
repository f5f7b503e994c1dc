// SPDX-License-Identifier: BSD-3-Clause
// CPU kernels of Transformer-XL's relative shift (backends/kernels.h,
// RelShiftKernels; docs/math.md#relative-attention-and-rel-shift). Row i of a [Lq, Lk] block reads its input
// shifted left by s_i = Lq - 1 - i columns: one contiguous copy of Lk - s_i
// elements, scaled, then the tail. The reference is the composed form in
// tests/test_transformer_xl.cpp (zero padding, a strided view, affine, add).
#include <algorithm>
#include <cstdint>

#include "../../core/error.h"
#include "../../core/parallel.h"
#include "../kernels.h"

namespace remora {

namespace {

// Rows of at least this many elements in all go to the pool.
constexpr int64_t kParallelElems = 1 << 15;

template <typename T>
void forward_rows(const RelShiftArgs& a) {
  const T* x = static_cast<const T*>(a.x);
  const T* bias = static_cast<const T*>(a.bias);
  T* out = static_cast<T*>(a.out);
  const int64_t Lq = a.Lq, Lk = a.Lk;
  const T scale = T(a.scale);
  parallel_for(a.N * Lq, a.N * Lq * Lk >= kParallelElems, [&](int64_t r) {
    const int64_t i = r % Lq, s = Lq - 1 - i, valid = std::max<int64_t>(Lk - s, 0);
    const T* xr = x + r * Lk + std::min(s, Lk);  // read where j < valid only
    const T* br = bias ? bias + i * Lk : nullptr;
    T* o = out + r * Lk;
    if (br) {
#pragma omp simd
      for (int64_t j = 0; j < valid; ++j) o[j] = scale * xr[j] + br[j];
      for (int64_t j = valid; j < Lk; ++j) o[j] = br[j];
    } else {
#pragma omp simd
      for (int64_t j = 0; j < valid; ++j) o[j] = scale * xr[j];
      for (int64_t j = valid; j < Lk; ++j) o[j] = T(0);
    }
  });
}

template <typename T>
void backward_rows(const RelShiftBackwardArgs& a) {
  const T* dout = static_cast<const T*>(a.dout);
  T* dx = static_cast<T*>(a.dx);
  const int64_t Lq = a.Lq, Lk = a.Lk;
  const T scale = T(a.scale);
  parallel_for(a.N * Lq, a.N * Lq * Lk >= kParallelElems, [&](int64_t r) {
    const int64_t i = r % Lq, s = std::min(Lq - 1 - i, Lk);
    const T* g = dout + r * Lk;
    T* d = dx + r * Lk;
    for (int64_t c = 0; c < s; ++c) d[c] = T(0);
#pragma omp simd
    for (int64_t c = s; c < Lk; ++c) d[c] = scale * g[c - s];
  });
}

void rel_shift_forward(const RelShiftArgs& a) {
  if (a.dt == DType::f32) forward_rows<float>(a);
  else if (a.dt == DType::f64) forward_rows<double>(a);
  else REMORA_FAIL("rel_shift: expected f32 or f64, got " << dtype_name(a.dt));
}

void rel_shift_backward(const RelShiftBackwardArgs& a) {
  if (a.dt == DType::f32) backward_rows<float>(a);
  else if (a.dt == DType::f64) backward_rows<double>(a);
  else REMORA_FAIL("rel_shift backward: expected f32 or f64, got " << dtype_name(a.dt));
}

const RelShiftKernels kCpuRelShift = {&rel_shift_forward, &rel_shift_backward};
const bool g_registered = [] {
  register_kernels(DeviceType::cpu, &kCpuRelShift);
  return true;
}();

}  // namespace

}  // namespace remora
