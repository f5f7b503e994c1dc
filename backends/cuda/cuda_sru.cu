// SPDX-License-Identifier: BSD-3-Clause
// CUDA kernels for the SRU recurrence (docs/math.md#the-sru-elementwise-recurrence): one thread per (batch, unit)
// lane in a grid-stride loop, sequential over time. The CPU version
// (backends/cpu/cpu_sru.cpp) is the reference.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>

#include "../kernels.h"
#include "cuda_common.cuh"

namespace remora {
namespace cuda {

namespace {

// ---- SRU: one thread per (batch, unit) lane, sequential over time ----

template <typename T>
__device__ __forceinline__ T sig(T x) {
  if (x >= T(0)) return T(1) / (T(1) + exp(-x));
  const T e = exp(x);
  return e / (T(1) + e);
}

template <typename T>
__global__ void k_sru_forward(int64_t L, int64_t B, int64_t D, int64_t k, bool bidir,
                              const T* U, const T* X, const T* V, const T* Bb, const T* C0,
                              const T* MASK, T* Hh, T* Cc, T* CL) {
  // A grid-stride loop: grid_for caps the grid, so one thread may run several lanes.
  for (int64_t lane = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; lane < B * D;
       lane += int64_t(gridDim.x) * blockDim.x) {
  const int64_t b = lane / D, j = lane % D;
  const bool rev = bidir && j >= D / 2;
  const T vf = V[j], vr = V[D + j], bf = Bb[j], br = Bb[D + j];
  const T m = MASK ? MASK[b * D + j] : T(1);
  T c = C0 ? C0[b * D + j] : T(0);
  for (int64_t s = 0; s < L; ++s) {
    const int64_t t = rev ? L - 1 - s : s;
    const int64_t idx = (t * B + b) * D + j;
    const T* u = U + idx * k;
    const T f = sig(u[1] + vf * c + bf);
    const T r = sig(u[2] + vr * c + br);
    c = f * c + (T(1) - f) * u[0];
    const T xp = k == 4 ? u[3] : X[idx];
    Hh[idx] = xp + m * r * (c - xp);  // the official placement of the mask on c
    Cc[idx] = c;
  }
  CL[b * D + j] = c;
  }
}

// acc [4, D] (double): dv_f, dv_r, db_f, db_r summed over the batch.
template <typename T>
__global__ void k_sru_backward(int64_t L, int64_t B, int64_t D, int64_t k, bool bidir,
                               const T* U, const T* X, const T* V, const T* Bb, const T* C0,
                               const T* MASK, const T* Cc, const T* DH, const T* DC,
                               const T* DCL, T* DU, T* DX, T* DC0, double* acc) {
  for (int64_t lane = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; lane < B * D;
       lane += int64_t(gridDim.x) * blockDim.x) {
  const int64_t b = lane / D, j = lane % D;
  const bool rev = bidir && j >= D / 2;
  const T vf = V[j], vr = V[D + j], bf = Bb[j], br = Bb[D + j];
  const T m = MASK ? MASK[b * D + j] : T(1);
  const T c0 = C0 ? C0[b * D + j] : T(0);
  T gc = DCL ? DCL[b * D + j] : T(0);
  double dvf = 0, dvr = 0, dbf = 0, dbr = 0;
  for (int64_t s = L - 1; s >= 0; --s) {
    const int64_t t = rev ? L - 1 - s : s;
    const int64_t idx = (t * B + b) * D + j;
    const int64_t tp = rev ? t + 1 : t - 1;  // the previous step of this direction
    const T cp = s == 0 ? c0 : Cc[(tp * B + b) * D + j];
    const T* u = U + idx * k;
    const T f = sig(u[1] + vf * cp + bf);
    const T r = sig(u[2] + vr * cp + br);
    const T c = Cc[idx];
    const T xp = k == 4 ? u[3] : X[idx];
    const T dh = DH[idx];
    if (DC) gc += DC[idx];
    const T gct = gc + dh * r * m;             // dL/dc_t in full
    const T dr = dh * m * (c - xp);
    const T dxp = dh * (T(1) - m * r);
    const T dzf = gct * (cp - u[0]) * f * (T(1) - f);
    const T dzr = dr * r * (T(1) - r);
    T* du = DU + idx * k;
    du[0] = gct * (T(1) - f);
    du[1] = dzf;
    du[2] = dzr;
    if (k == 4) du[3] = dxp;
    else DX[idx] = dxp;
    dvf += double(dzf * cp);
    dvr += double(dzr * cp);
    dbf += double(dzf);
    dbr += double(dzr);
    gc = gct * f + dzf * vf + dzr * vr;
  }
  if (DC0) DC0[b * D + j] = gc;
  atomicAdd(acc + 0 * D + j, dvf);
  atomicAdd(acc + 1 * D + j, dvr);
  atomicAdd(acc + 2 * D + j, dbf);
  atomicAdd(acc + 3 * D + j, dbr);
  }
}
template <typename T>
__global__ void k_sru_finish(int64_t D, const double* acc, T* DV, T* DB) {
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < D;
       j += int64_t(gridDim.x) * blockDim.x) {
    DV[j] = T(acc[j]);
    DV[D + j] = T(acc[D + j]);
    DB[j] = T(acc[2 * D + j]);
    DB[D + j] = T(acc[3 * D + j]);
  }
}


// The problem checks (k, x present, even D) run in kern::sru_forward / kern::sru_backward
// (backends/kernels.cpp), for every backend alike.
void sru_forward(const SruForwardArgs& a) {
  const SruProblem& p = a.p;
  const DType dt = a.dt;
  const void *U = a.U, *x = a.x, *v = a.v, *b = a.b, *c0 = a.c0, *mask = a.mask;
  void *h = a.h, *c = a.c, *c_last = a.c_last;
  const int64_t lanes = p.B * p.D;
  if (lanes <= 0) return;
  dispatch_float(dt, "sru_forward", [&](auto tag) {
    using T = decltype(tag);
    k_sru_forward<T><<<grid_for(lanes, 128), 128, 0, stream()>>>(
        p.L, p.B, p.D, p.k, p.bidirectional, static_cast<const T*>(U), static_cast<const T*>(x),
        static_cast<const T*>(v), static_cast<const T*>(b), static_cast<const T*>(c0),
        static_cast<const T*>(mask), static_cast<T*>(h), static_cast<T*>(c),
        static_cast<T*>(c_last));
  });
  check_launch("sru_forward");
}

void sru_backward(const SruBackwardArgs& a) {
  const SruProblem& p = a.p;
  const DType dt = a.dt;
  const void *U = a.U, *x = a.x, *v = a.v, *b = a.b, *c0 = a.c0, *mask = a.mask, *c = a.c,
             *dh = a.dh, *dc = a.dc, *dc_last = a.dc_last;
  void *dU = a.dU, *dx = a.dx, *dv = a.dv, *db = a.db, *dc0 = a.dc0;
  const int64_t lanes = p.B * p.D;
  if (p.D <= 0) return;
  Scratch acc(size_t(4 * p.D) * sizeof(double));
  REMORA_CUDA_CHECK(cudaMemsetAsync(acc.p, 0, acc.n, stream()));
  dispatch_float(dt, "sru_backward", [&](auto tag) {
    using T = decltype(tag);
    if (lanes > 0) {
      k_sru_backward<T><<<grid_for(lanes, 128), 128, 0, stream()>>>(
          p.L, p.B, p.D, p.k, p.bidirectional, static_cast<const T*>(U),
          static_cast<const T*>(x), static_cast<const T*>(v), static_cast<const T*>(b),
          static_cast<const T*>(c0), static_cast<const T*>(mask), static_cast<const T*>(c),
          static_cast<const T*>(dh), static_cast<const T*>(dc), static_cast<const T*>(dc_last),
          static_cast<T*>(dU), static_cast<T*>(dx), static_cast<T*>(dc0), acc.as<double>());
      check_launch("sru_backward");
    }
    k_sru_finish<T><<<grid_for(p.D, 128), 128, 0, stream()>>>(p.D, acc.as<double>(), static_cast<T*>(dv),
                                                static_cast<T*>(db));
    check_launch("sru_backward");
  });
}

const SruKernels kCudaSru = {&sru_forward, &sru_backward};
const bool g_registered = [] {
  register_kernels(DeviceType::cuda, &kCudaSru);
  return true;
}();

}  // namespace

}  // namespace cuda
}  // namespace remora
