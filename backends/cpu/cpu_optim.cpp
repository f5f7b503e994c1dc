// SPDX-License-Identifier: BSD-3-Clause
// CPU kernel of the fused optimizer step (backends/kernels.h, OptimKernels).
// The reference is the composed update in nn/optim.cpp (Adam::update with fused = false).
#include <cmath>
#include <cstdint>

#include "../../core/error.h"
#include "../../core/parallel.h"
#include "../kernels.h"

namespace remora {

namespace {

constexpr int64_t kParallelElems = 1 << 15;

template <typename T>
void adam_rows(const AdamArgs& a) {
  T* p = static_cast<T*>(a.p);
  const T* g = static_cast<const T*>(a.g);
  T* m = static_cast<T*>(a.m);
  T* v = static_cast<T*>(a.v);
  // In T, as the composed ops compute (vector sqrt and divide: in double the
  // f32 update would be bound by their throughput, not by memory).
  const AdamStep& s = a.s;
  const T keep = T(1 - s.decay), l2 = T(s.l2), b1 = T(s.beta1), c1 = T(1 - s.beta1),
          b2 = T(s.beta2), c2 = T(1 - s.beta2), inv_bc2 = T(1 / s.sqrt_bc2), eps = T(s.eps),
          step = T(s.step_size);
  parallel_ranges(a.n, a.n >= kParallelElems, [&](int64_t lo, int64_t hi) {
#pragma omp simd
    for (int64_t i = lo; i < hi; ++i) {
      const T p0 = p[i];
      const T gi = g[i] + l2 * p0;
      const T mi = b1 * m[i] + c1 * gi;
      const T vi = b2 * v[i] + c2 * gi * gi;
      m[i] = mi;
      v[i] = vi;
      p[i] = p0 * keep - step * mi / (std::sqrt(vi) * inv_bc2 + eps);
    }
  });
}

void adam(const AdamArgs& a) {
  if (a.dt == DType::f32) adam_rows<float>(a);
  else if (a.dt == DType::f64) adam_rows<double>(a);
  else REMORA_FAIL("adam: expected f32 or f64, got " << dtype_name(a.dt));
}

const OptimKernels kCpuOptim = {&adam};
const bool g_registered = [] {
  register_kernels(DeviceType::cpu, &kCpuOptim);
  return true;
}();

}  // namespace

}  // namespace remora
