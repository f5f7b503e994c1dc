// SPDX-License-Identifier: BSD-3-Clause
// CUDA kernels for the Recurrence Encoding Matrices (docs/math.md#recurrence-encoding-matrices-rem and #the-scan-form-applying-a-rem-in-ol), registered
// as the cuda RemKernels table (backends/kernels.h). The CPU versions
// (backends/cpu/cpu_rem.cpp) are the reference; the backend-parity tests
// compare the two.
//
// One file on purpose (about 680 lines): the scan, its backward and the dense
// reference form share the coefficient kernel (k_coef) and the head tables, and
// the host entries at the bottom are the whole RemKernels table for CUDA.
//
// The scan. Every REM head is the linear recurrence of a complex coefficient
// rho = a e^{i theta} with lag delta (the dilation). All of the scan work here
// is one primitive, the "w-form" scan
//
//     W_t = rho W_{t - delta} + src_t      (W_t = init slot for t < 0)
//
// run in parallel over time as well as over (batch, head, d): the time axis is
// cut into chunks of C = delta * Q positions (Q steps of each of the delta
// interleaved residues); (1) every chunk scans from a zero state, (2) a carry
// pass walks the chunk boundaries, E_c = rho^Q E_{c-1} + (chunk c's local end),
// one thread per (b, h, d), and (3) a fix-up adds rho^{m} E_{c-1} to the m-th
// step of each residue in chunk c. Everything else is elementwise around it:
//
//   untruncated z_t = sum_{m>=1} rho^m s_{t - delta m} = W_t - s_t  (src = s)
//   truncated   z^K_t = z_t - rho^K z_{t - delta K}      (K = max_distance / delta)
//   dz_t/drho   q_t = W'_t with src'_t = w_{t - delta}   (a second scan)
//   q^K_t = q_t - K rho^{K-1} z_{t - delta K} - rho^K q_{t - delta K}
//
// dv is the causal scan of dy run backwards in time (as on the CPU), and
// da, dtheta are sum_t dy_t R(e^{i theta} q^K_t) and sum_t dy_t R(i rho q^K_t),
// R = Re (regular, cos heads) or Im (sin heads).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "../kernels.h"
#include "cuda_common.cuh"

namespace remora {
namespace cuda {

namespace {

constexpr int kQ = 32;  // steps of each residue per chunk

// Per-head coefficients, computed on the device from a and theta (which live there).
struct HeadCoef {
  double rr, ri;                  // rho
  double er, ei;                  // e^{i theta}
  double pr[kQ + 1], pi[kQ + 1];  // rho^m, m = 0..Q
  double kr, ki;                  // rho^K          (K >= 0 only)
  double dr, di;                  // K rho^{K-1}    (K >= 1; 0 otherwise)
  int64_t del, K;                 // K < 0: no truncation
  int imag, cplx;
};

__device__ double powi_d(double a, int64_t m) {
  if (m == 0) return 1;
  if (a == 0) return 0;
  const double r = exp(double(m) * log(fabs(a)));
  return (a < 0 && (m & 1)) ? -r : r;
}

template <typename T>
__global__ void k_coef(int64_t H, const RemHeadDesc* heads, int64_t max_distance, const T* A,
                       const T* TH, HeadCoef* out) {
  const int64_t h = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (h >= H) return;
  const RemHeadDesc hd = heads[h];
  HeadCoef c;
  const double a = double(A[h]);
  const double th = hd.complex ? double(TH[h]) : 0.0;
  c.er = cos(th);
  c.ei = sin(th);
  c.rr = a * c.er;
  c.ri = a * c.ei;
  for (int m = 0; m <= kQ; ++m) {
    const double am = powi_d(a, m);
    c.pr[m] = am * cos(double(m) * th);
    c.pi[m] = am * sin(double(m) * th);
  }
  c.del = hd.dilation;
  c.K = max_distance > 0 ? max_distance / hd.dilation : -1;
  c.kr = c.ki = c.dr = c.di = 0;
  if (c.K >= 0) {
    const double aK = powi_d(a, c.K);
    c.kr = aK * cos(double(c.K) * th);
    c.ki = aK * sin(double(c.K) * th);
    if (c.K >= 1) {
      const double aK1 = double(c.K) * powi_d(a, c.K - 1);
      c.dr = aK1 * cos(double(c.K - 1) * th);
      c.di = aK1 * sin(double(c.K - 1) * th);
    }
  }
  c.imag = hd.reads_imag;
  c.cplx = hd.complex;
  out[h] = c;
}

// The head table on the device: uploaded once per distinct table and cached by
// content (device_constant), so a call queues no copy and never waits.
const RemHeadDesc* device_heads(const RemProblem& p) {
  if (p.H <= 0) return nullptr;
  return static_cast<const RemHeadDesc*>(
      device_constant(p.heads, size_t(p.H) * sizeof(RemHeadDesc)));
}

// The head table and the per-head coefficients on the device.
struct Coefs {
  const RemHeadDesc* desc;
  Scratch coef;
  Coefs(DType dt, const RemProblem& p, const void* a, const void* theta)
      : desc(device_heads(p)), coef(size_t(p.H) * sizeof(HeadCoef)) {
    if (p.H <= 0) return;
    dispatch_float(dt, "rem", [&](auto tag) {
      using T = decltype(tag);
      k_coef<T><<<grid_for(p.H, 64), 64, 0, stream()>>>(p.H, desc, p.max_distance,
                                           static_cast<const T*>(a), static_cast<const T*>(theta),
                                           coef.as<HeadCoef>());
    });
    check_launch("rem coefficients");
  }
  const HeadCoef* get() const { return coef.as<HeadCoef>(); }
};

// ---- the w-form scan: W = scan(src) over n positions, [BH, n, D] arrays ----

// (1) Local scans from zero: thread (bh, c, d).
template <typename T>
__global__ void k_scan_local(int64_t BH, int64_t H, int64_t n, int64_t D, int64_t NC,
                             const HeadCoef* coef, const T* sr, const T* si, T* Wr, T* Wi) {
  const int64_t total = BH * NC * D;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < total;
       t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t d = t % D, c = (t / D) % NC, bh = t / (D * NC);
    const HeadCoef& h = coef[bh % H];
    const int64_t del = h.del, C = del * kQ;
    const int64_t t0 = c * C;
    if (t0 >= n) continue;
    const int64_t t1 = min(n, t0 + C);
    const T rr = T(h.rr), ri = T(h.ri);
    const int64_t base = bh * n * D + d;
    for (int64_t q = 0; q < del; ++q) {
      T wr = 0, wi = 0;
      for (int64_t tt = t0 + q; tt < t1; tt += del) {
        const T s_r = sr[base + tt * D], s_i = si ? si[base + tt * D] : T(0);
        const T nr = rr * wr - ri * wi + s_r;
        const T ni = rr * wi + ri * wr + s_i;
        wr = nr;
        wi = ni;
        Wr[base + tt * D] = wr;
        Wi[base + tt * D] = wi;
      }
    }
  }
}

// (2) Carries across chunk boundaries: thread (bh, d). Cin[bh, c, q] is the
// true W at time c*C - delta + q (the state chunk c starts from).
// init [BH, dm, 2, D]: slot k holds W at time k - dm (re, then im).
template <typename T>
__global__ void k_scan_carry(int64_t BH, int64_t H, int64_t n, int64_t D, int64_t NC,
                             int64_t dm, const HeadCoef* coef, const T* init, const T* Wr,
                             const T* Wi, T* Cr, T* Ci) {
  const int64_t total = BH * D;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < total;
       t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t d = t % D, bh = t / D;
    const HeadCoef& h = coef[bh % H];
    const int64_t del = h.del, C = del * kQ;
    const int64_t nc = (n + C - 1) / C;
    const T qr = T(h.pr[kQ]), qi = T(h.pi[kQ]);
    for (int64_t q = 0; q < del; ++q) {
      T er = 0, ei = 0;
      if (init) {
        const int64_t slot = q - del + dm;  // time q - del
        er = init[((bh * dm + slot) * 2 + 0) * D + d];
        ei = init[((bh * dm + slot) * 2 + 1) * D + d];
      }
      for (int64_t c = 0; c < nc; ++c) {
        const int64_t ci = ((bh * NC + c) * dm + q) * D + d;
        Cr[ci] = er;
        Ci[ci] = ei;
        const int64_t last = c * C + q + (kQ - 1) * del;  // this residue's last step in chunk c
        if (last >= n) break;                            // a partial (final) chunk: no successor
        const T lr = Wr[(bh * n + last) * D + d], li = Wi[(bh * n + last) * D + d];
        const T nr = qr * er - qi * ei + lr;
        const T ni = qr * ei + qi * er + li;
        er = nr;
        ei = ni;
      }
    }
  }
}

// (3) Fix-up: W_t += rho^{m} Cin[c, q], m = the step of t within its residue + 1.
template <typename T>
__global__ void k_scan_fix(int64_t BH, int64_t H, int64_t n, int64_t D, int64_t NC, int64_t dm,
                           const HeadCoef* coef, const T* Cr, const T* Ci, T* Wr, T* Wi) {
  const int64_t total = BH * n * D;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < total;
       t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t d = t % D, tt = (t / D) % n, bh = t / (D * n);
    const HeadCoef& h = coef[bh % H];
    const int64_t del = h.del, C = del * kQ;
    const int64_t c = tt / C, rel = tt - c * C, q = rel % del, m = rel / del + 1;
    const int64_t ci = ((bh * NC + c) * dm + q) * D + d;
    const T er = Cr[ci], ei = Ci[ci];
    const T pr = T(h.pr[m]), pi = T(h.pi[m]);
    Wr[t] += pr * er - pi * ei;
    Wi[t] += pr * ei + pi * er;
  }
}

// W [BH, n, D] (re, im) = scan(src) with the optional initial state.
template <typename T>
void scan_w(const RemProblem& p, const HeadCoef* coef, int64_t n, const T* sr, const T* si,
            const T* init, T* Wr, T* Wi) {
  const int64_t BH = p.B * p.H, D = p.D, dm = p.dmax;
  const int64_t NC = (n + kQ - 1) / kQ;  // chunks of a dilation-1 head (the most)
  Scratch cr(size_t(BH * NC * dm * D) * sizeof(T)), ci(size_t(BH * NC * dm * D) * sizeof(T));
  k_scan_local<T><<<grid_for(BH * NC * D), kThreads, 0, stream()>>>(BH, p.H, n, D, NC, coef, sr, si, Wr, Wi);
  check_launch("rem scan (local)");
  k_scan_carry<T><<<grid_for(BH * D, 128), 128, 0, stream()>>>(BH, p.H, n, D, NC, dm, coef, init, Wr, Wi,
                                                  cr.as<T>(), ci.as<T>());
  check_launch("rem scan (carry)");
  k_scan_fix<T><<<grid_for(BH * n * D), kThreads, 0, stream()>>>(BH, p.H, n, D, NC, dm, coef, cr.as<T>(),
                                                   ci.as<T>(), Wr, Wi);
  check_launch("rem scan (fix-up)");
}

// ---- the elementwise kernels around the scan ----

// dst[bh, tau, d] = src[bh, pos, d] with pos = rev ? Lsrc - 1 - tau : tau, and
// 0 where pos - off is outside [0, Lsrc_rows): src row pos lives at row pos - off.
// (off = M maps key positions to dy's query rows.)
template <typename T>
__global__ void k_gather_rows(int64_t BH, int64_t n, int64_t D, int64_t L, bool rev, int64_t off,
                              int64_t rows, const T* src, T* dst) {
  const int64_t total = BH * n * D;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < total;
       t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t d = t % D, tau = (t / D) % n, bh = t / (D * n);
    const int64_t pos = rev ? L - 1 - tau : tau;
    const int64_t row = pos - off;
    dst[t] = (row >= 0 && row < rows) ? src[(bh * rows + row) * D + d] : T(0);
  }
}

// z^K at scan position tau: (W - s) - rho^K (W - s)_{tau - del K}.
template <typename T>
__device__ __forceinline__ void z_at(const HeadCoef& h, int64_t bh, int64_t n, int64_t D,
                                     int64_t tau, int64_t d, const T* Wr, const T* Wi,
                                     const T* s, T* zr, T* zi) {
  const int64_t i = (bh * n + tau) * D + d;
  T r = Wr[i] - s[i], im = Wi[i];
  if (h.K >= 0) {
    const int64_t t2 = tau - h.del * h.K;
    if (t2 >= 0) {
      const int64_t j = (bh * n + t2) * D + d;
      const T ur = Wr[j] - s[j], ui = Wi[j];
      const T kr = T(h.kr), ki = T(h.ki);
      r -= kr * ur - ki * ui;
      im -= kr * ui + ki * ur;
    }
  }
  *zr = r;
  *zi = im;
}

// out[bh, pos - off, d] (=, or += when acc) R(z^K_tau) for pos = rev ? L-1-tau : tau
// in [off, L); positions below 0 go to the state gradient when ds is given:
// ds[bh, pos + dm] = (R(u), R(i u)) for pos >= -del, else 0.
template <typename T>
__global__ void k_emit(int64_t BH, int64_t H, int64_t n, int64_t D, int64_t L, bool rev,
                       int64_t off, bool acc, const HeadCoef* coef, const T* Wr, const T* Wi,
                       const T* s, T* out, int64_t dm, T* ds) {
  const int64_t total = BH * n * D;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < total;
       t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t d = t % D, tau = (t / D) % n, bh = t / (D * n);
    const int64_t pos = rev ? L - 1 - tau : tau;
    if (pos >= 0 && pos < off) continue;
    if (pos < 0 && !ds) continue;
    const HeadCoef& h = coef[bh % H];
    T zr, zi;
    z_at(h, bh, n, D, tau, d, Wr, Wi, s, &zr, &zi);
    if (pos >= 0) {
      T* o = out + (bh * (L - off) + (pos - off)) * D + d;
      const T v = h.imag ? zi : zr;
      *o = acc ? *o + v : v;
    } else {
      const int64_t k = pos + dm;
      const bool read = pos >= -h.del;
      T* o = ds + (bh * dm + k) * 2 * D;
      o[d] = read ? (h.imag ? zi : zr) : T(0);
      o[D + d] = read ? (h.imag ? zr : -zi) : T(0);
    }
  }
}

// state_out [BH, dm, 2, D]: W at positions L - dm + k (the initial slot when < 0).
template <typename T>
__global__ void k_state_out(int64_t BH, int64_t n, int64_t D, int64_t dm, const T* Wr,
                            const T* Wi, const T* init, T* so) {
  const int64_t total = BH * dm * D;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < total;
       t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t d = t % D, k = (t / D) % dm, bh = t / (D * dm);
    const int64_t pos = n - dm + k;
    T r = 0, i = 0;
    if (pos >= 0) {
      r = Wr[(bh * n + pos) * D + d];
      i = Wi[(bh * n + pos) * D + d];
    } else if (init) {
      r = init[((bh * dm + pos + dm) * 2 + 0) * D + d];
      i = init[((bh * dm + pos + dm) * 2 + 1) * D + d];
    }
    so[((bh * dm + k) * 2 + 0) * D + d] = r;
    so[((bh * dm + k) * 2 + 1) * D + d] = i;
  }
}

// The source of the q scan: w_{tau - del} (the initial slot, or 0, before 0).
template <typename T>
__global__ void k_shift_w(int64_t BH, int64_t H, int64_t n, int64_t D, int64_t dm,
                          const HeadCoef* coef, const T* Wr, const T* Wi, const T* init, T* qr,
                          T* qi) {
  const int64_t total = BH * n * D;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < total;
       t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t d = t % D, tau = (t / D) % n, bh = t / (D * n);
    const int64_t src = tau - coef[bh % H].del;
    T r = 0, i = 0;
    if (src >= 0) {
      r = Wr[(bh * n + src) * D + d];
      i = Wi[(bh * n + src) * D + d];
    } else if (init) {
      r = init[((bh * dm + src + dm) * 2 + 0) * D + d];
      i = init[((bh * dm + src + dm) * 2 + 1) * D + d];
    }
    qr[t] = r;
    qi[t] = i;
  }
}

// acc[h] += sum over (tau, d) with pos in [M, L) of g R(e^{i th} q^K), g R(i rho q^K).
// Work item blk = bh * nper + part: part-th slice of (bh)'s n * D terms. The
// items run on grid.x in a block-stride loop (B * H on grid.y would be an
// invalid configuration above 65,535); double partials, a block tree, one
// atomicAdd per item.
template <typename T>
__global__ void k_grad_rho(int64_t BH, int64_t nper, int64_t H, int64_t n, int64_t D, int64_t L,
                           bool rev, int64_t M, const HeadCoef* coef, const T* Wr, const T* Wi,
                           const T* s, const T* Qr, const T* Qi, const T* dy, double* acc) {
  __shared__ double sa[kThreads], st[kThreads];
  const int64_t per = n * D;
  for (int64_t blk = blockIdx.x; blk < BH * nper; blk += gridDim.x) {  // uniform per block
    const int64_t bh = blk / nper, part = blk % nper;
    const HeadCoef& h = coef[bh % H];
    double pa = 0, pt = 0;
    for (int64_t t = part * int64_t(blockDim.x) + threadIdx.x; t < per;
         t += nper * int64_t(blockDim.x)) {
      const int64_t d = t % D, tau = t / D;
      const int64_t pos = rev ? L - 1 - tau : tau;
      if (pos < M || pos >= L) continue;
      const double g = double(dy[(bh * (L - M) + pos - M) * D + d]);
      const int64_t i = (bh * n + tau) * D + d;
      double qr = double(Qr[i]), qi = double(Qi[i]);
      if (h.K >= 0) {
        const int64_t t2 = tau - h.del * h.K;
        if (t2 >= 0) {
          const int64_t j = (bh * n + t2) * D + d;
          const double ur = double(Wr[j] - s[j]), ui = double(Wi[j]);
          const double q2r = double(Qr[j]), q2i = double(Qi[j]);
          qr -= h.dr * ur - h.di * ui + h.kr * q2r - h.ki * q2i;
          qi -= h.dr * ui + h.di * ur + h.kr * q2i + h.ki * q2r;
        }
      }
      const double ar = qr * h.er - qi * h.ei, ai = qr * h.ei + qi * h.er;  // e^{i th} q
      const double rr = h.rr * qr - h.ri * qi, ri = h.rr * qi + h.ri * qr;  // rho q
      pa += g * (h.imag ? ai : ar);
      pt += g * (h.imag ? rr : -ri);  // R(i x): Re(i x) = -Im x, Im(i x) = Re x
    }
    sa[threadIdx.x] = pa;
    st[threadIdx.x] = pt;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w >>= 1) {
      if (int(threadIdx.x) < w) {
        sa[threadIdx.x] += sa[threadIdx.x + w];
        st[threadIdx.x] += st[threadIdx.x + w];
      }
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      atomicAdd(acc + (bh % H) * 2 + 0, sa[0]);
      atomicAdd(acc + (bh % H) * 2 + 1, st[0]);
    }
    __syncthreads();  // sa/st are rewritten by the next item
  }
}

template <typename T>
__global__ void k_finish_rho(int64_t H, const RemHeadDesc* heads, const double* acc, T* da,
                             T* dth) {
  const int64_t h = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (h >= H) return;
  da[h] = T(acc[h * 2]);
  dth[h] = heads[h].complex ? T(acc[h * 2 + 1]) : T(0);
}

// ---- the dense reference form ----

__device__ int64_t rem_steps_d(bool masked, int64_t max_distance, int64_t dil, int64_t n) {
  if (!masked) n = n < 0 ? -n : n;
  if (n < 1) return 0;
  if (max_distance > 0 && n > max_distance) return 0;
  if (n % dil != 0) return 0;
  return n / dil;
}

template <typename T>
__global__ void k_rem_matrix(int64_t H, int64_t Lq, int64_t Lk, bool masked, int64_t maxd,
                             const RemHeadDesc* heads, const T* A, const T* TH, T* P) {
  const int64_t total = H * Lq * Lk, M = Lk - Lq;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < total;
       t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t j = t % Lk, i = (t / Lk) % Lq, h = t / (Lk * Lq);
    const RemHeadDesc hd = heads[h];
    const int64_t m = rem_steps_d(masked, maxd, hd.dilation, M + i - j);
    double f = 0;
    if (m > 0) {
      const double am = powi_d(double(A[h]), m), th = hd.complex ? double(TH[h]) : 0.0;
      f = !hd.complex ? am : hd.reads_imag ? am * sin(double(m) * th) : am * cos(double(m) * th);
    }
    P[t] = T(f);
  }
}

template <typename T>
__global__ void k_rem_matrix_backward(int64_t H, int64_t Lq, int64_t Lk, bool masked,
                                      int64_t maxd, const RemHeadDesc* heads, const T* A,
                                      const T* TH, const T* G, double* acc) {
  __shared__ double sa[kThreads], st[kThreads];
  const int64_t h = blockIdx.y, M = Lk - Lq, per = Lq * Lk;
  const RemHeadDesc hd = heads[h];
  const double av = double(A[h]), th = hd.complex ? double(TH[h]) : 0.0;
  double pa = 0, pt = 0;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < per;
       t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t j = t % Lk, i = t / Lk;
    const int64_t m = rem_steps_d(masked, maxd, hd.dilation, M + i - j);
    const double g = double(G[h * per + t]);
    if (m == 0 || g == 0) continue;
    const double dam = double(m) * powi_d(av, m - 1);
    if (!hd.complex) {
      pa += g * dam;
    } else {
      const double am = powi_d(av, m), cs = cos(double(m) * th), sn = sin(double(m) * th);
      pa += g * dam * (hd.reads_imag ? sn : cs);
      pt += g * am * double(m) * (hd.reads_imag ? cs : -sn);
    }
  }
  sa[threadIdx.x] = pa;
  st[threadIdx.x] = pt;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w >>= 1) {
    if (int(threadIdx.x) < w) {
      sa[threadIdx.x] += sa[threadIdx.x + w];
      st[threadIdx.x] += st[threadIdx.x + w];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    atomicAdd(acc + h * 2, sa[0]);
    atomicAdd(acc + h * 2 + 1, st[0]);
  }
}
template <typename T>
__global__ void k_finish_matrix(int64_t H, const double* acc, T* da, T* dth) {
  const int64_t h = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (h >= H) return;
  da[h] = T(acc[h * 2]);
  dth[h] = T(acc[h * 2 + 1]);
}

unsigned blocks_per(int64_t n, int64_t cap) {
  return unsigned(std::max<int64_t>(1, std::min<int64_t>(cap, (n + kThreads - 1) / kThreads)));
}

// ---------------------------------------------------------------------------

void rem_matrix(const RemMatrixArgs& args) {
  const DType dt = args.dt;
  const RemProblem& p = args.p;
  const void *a = args.a, *theta = args.theta;
  void* P = args.P;
  const int64_t total = p.H * p.Lq * p.Lk;
  if (total <= 0) return;
  const RemHeadDesc* desc = device_heads(p);
  dispatch_float(dt, "rem_matrix", [&](auto tag) {
    using T = decltype(tag);
    k_rem_matrix<T><<<grid_for(total), kThreads, 0, stream()>>>(p.H, p.Lq, p.Lk, p.masked, p.max_distance,
                                                   desc, static_cast<const T*>(a),
                                                   static_cast<const T*>(theta), static_cast<T*>(P));
  });
  check_launch("rem_matrix");
}

void rem_matrix_backward(const RemMatrixBackwardArgs& args) {
  const DType dt = args.dt;
  const RemProblem& p = args.p;
  const void *a = args.a, *theta = args.theta, *dP = args.dP;
  void *da = args.da, *dtheta = args.dtheta;
  if (p.H <= 0) return;
  const RemHeadDesc* desc = device_heads(p);
  Scratch acc(size_t(p.H) * 2 * sizeof(double));
  REMORA_CUDA_CHECK(cudaMemsetAsync(acc.p, 0, acc.n, stream()));
  dispatch_float(dt, "rem_matrix_backward", [&](auto tag) {
    using T = decltype(tag);
    if (p.Lq * p.Lk > 0) {
      dim3 grid(blocks_per(p.Lq * p.Lk, 256), unsigned(p.H));
      k_rem_matrix_backward<T><<<grid, kThreads, 0, stream()>>>(p.H, p.Lq, p.Lk, p.masked, p.max_distance,
                                                   desc, static_cast<const T*>(a),
                                                   static_cast<const T*>(theta),
                                                   static_cast<const T*>(dP), acc.as<double>());
      check_launch("rem_matrix_backward");
    }
    k_finish_matrix<T><<<grid_for(p.H, 64), 64, 0, stream()>>>(p.H, acc.as<double>(), static_cast<T*>(da),
                                                 static_cast<T*>(dtheta));
    check_launch("rem_matrix_backward");
  });
}

// The problem checks (shapes, a state only untruncated and masked) run in
// kern::rem_scan / kern::rem_scan_backward (backends/kernels.cpp).
void rem_scan(const RemScanArgs& args) {
  const DType dt = args.dt;
  const RemProblem& p = args.p;
  const void *a = args.a, *theta = args.theta, *v = args.v, *state_in = args.state_in;
  void *y = args.y, *state_out = args.state_out;
  const int64_t BH = p.B * p.H, Lk = p.Lk, D = p.D, M = p.Lk - p.Lq, dm = p.dmax;
  if (BH <= 0 || D <= 0) return;
  if (Lk <= 0) {
    // No keys: y is empty and the state passes through (zeros without one).
    if (state_out) {
      dispatch_float(dt, "rem_scan", [&](auto tag) {
        using T = decltype(tag);
        k_state_out<T><<<grid_for(BH * dm * D), kThreads, 0, stream()>>>(
            BH, 0, D, dm, (const T*)nullptr, (const T*)nullptr, static_cast<const T*>(state_in),
            static_cast<T*>(state_out));
      });
      check_launch("rem_scan (state, no keys)");
    }
    return;
  }
  Coefs cf(dt, p, a, theta);
  dispatch_float(dt, "rem_scan", [&](auto tag) {
    using T = decltype(tag);
    const T* V = static_cast<const T*>(v);
    const T* SIN = static_cast<const T*>(state_in);
    T* Y = static_cast<T*>(y);
    const size_t nb = size_t(BH * Lk * D) * sizeof(T);
    Scratch wr(nb), wi(nb);
    // Causal direction, from the carried state.
    scan_w<T>(p, cf.get(), Lk, V, nullptr, SIN, wr.as<T>(), wi.as<T>());
    if (p.Lq > 0) {
      k_emit<T><<<grid_for(BH * Lk * D), kThreads, 0, stream()>>>(BH, p.H, Lk, D, Lk, false, M, false,
                                                     cf.get(), wr.as<T>(), wi.as<T>(), V, Y, dm,
                                                     (T*)nullptr);
      check_launch("rem_scan (emit)");
    }
    if (state_out) {
      k_state_out<T><<<grid_for(BH * dm * D), kThreads, 0, stream()>>>(BH, Lk, D, dm, wr.as<T>(), wi.as<T>(),
                                                         SIN, static_cast<T*>(state_out));
      check_launch("rem_scan (state)");
    }
    if (!p.masked && p.Lq > 0) {
      // Anti-causal direction: the same scan over reversed keys, added.
      Scratch vr(nb);
      k_gather_rows<T><<<grid_for(BH * Lk * D), kThreads, 0, stream()>>>(BH, Lk, D, Lk, true, 0, Lk, V,
                                                            vr.as<T>());
      check_launch("rem_scan (reverse)");
      scan_w<T>(p, cf.get(), Lk, vr.as<T>(), nullptr, nullptr, wr.as<T>(), wi.as<T>());
      k_emit<T><<<grid_for(BH * Lk * D), kThreads, 0, stream()>>>(BH, p.H, Lk, D, Lk, true, M, true, cf.get(),
                                                     wr.as<T>(), wi.as<T>(), vr.as<T>(), Y, dm,
                                                     (T*)nullptr);
      check_launch("rem_scan (emit)");
    }
  });
}

void rem_scan_backward(const RemScanBackwardArgs& args) {
  const DType dt = args.dt;
  const RemProblem& p = args.p;
  const void *a = args.a, *theta = args.theta, *v = args.v, *state_in = args.state_in,
             *dy = args.dy;
  void *dv = args.dv, *da = args.da, *dtheta = args.dtheta, *dstate_in = args.dstate_in;
  const int64_t BH = p.B * p.H, Lk = p.Lk, D = p.D, M = p.Lk - p.Lq, dm = p.dmax;
  Coefs cf(dt, p, a, theta);
  Scratch acc(size_t(std::max<int64_t>(p.H, 1)) * 2 * sizeof(double));
  REMORA_CUDA_CHECK(cudaMemsetAsync(acc.p, 0, acc.n, stream()));
  dispatch_float(dt, "rem_scan_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* V = static_cast<const T*>(v);
    const T* SIN = static_cast<const T*>(state_in);
    const T* DY = static_cast<const T*>(dy);
    T* DV = static_cast<T*>(dv);
    if (BH > 0 && D > 0 && Lk > 0) {
      // dv (and the state gradient): the causal scan of g run backwards in time,
      // continued dm steps past the start when the state gradient is wanted.
      const int64_t n2 = Lk + (dstate_in ? dm : 0);
      const size_t nb2 = size_t(BH * n2 * D) * sizeof(T), nb = size_t(BH * Lk * D) * sizeof(T);
      {
        Scratch g(nb2), wr(nb2), wi(nb2);
        k_gather_rows<T><<<grid_for(BH * n2 * D), kThreads, 0, stream()>>>(BH, n2, D, Lk, true, M, p.Lq, DY,
                                                              g.as<T>());
        check_launch("rem_scan_backward (gather)");
        scan_w<T>(p, cf.get(), n2, g.as<T>(), nullptr, nullptr, wr.as<T>(), wi.as<T>());
        k_emit<T><<<grid_for(BH * n2 * D), kThreads, 0, stream()>>>(BH, p.H, n2, D, Lk, true, 0, false,
                                                       cf.get(), wr.as<T>(), wi.as<T>(), g.as<T>(),
                                                       DV, dm, static_cast<T*>(dstate_in));
        check_launch("rem_scan_backward (dv)");
        if (!p.masked) {
          // The anti-causal half's adjoint: the forward scan of g.
          k_gather_rows<T><<<grid_for(BH * Lk * D), kThreads, 0, stream()>>>(BH, Lk, D, Lk, false, M, p.Lq,
                                                                DY, g.as<T>());
          check_launch("rem_scan_backward (gather)");
          scan_w<T>(p, cf.get(), Lk, g.as<T>(), nullptr, nullptr, wr.as<T>(), wi.as<T>());
          k_emit<T><<<grid_for(BH * Lk * D), kThreads, 0, stream()>>>(BH, p.H, Lk, D, Lk, false, 0, true,
                                                         cf.get(), wr.as<T>(), wi.as<T>(),
                                                         g.as<T>(), DV, dm, (T*)nullptr);
          check_launch("rem_scan_backward (dv)");
        }
      }
      // da, dtheta: forward scan (w), the q scan of the shifted w, then the sums.
      if (p.Lq > 0) {
        Scratch wr(nb), wi(nb), qs_r(nb), qs_i(nb), qr(nb), qi(nb);
        for (int dir = 0; dir < (p.masked ? 1 : 2); ++dir) {
          const bool rev = dir == 1;
          Scratch vr(rev ? nb : 0);
          const T* src = V;
          if (rev) {
            k_gather_rows<T><<<grid_for(BH * Lk * D), kThreads, 0, stream()>>>(BH, Lk, D, Lk, true, 0, Lk, V,
                                                                  vr.as<T>());
            check_launch("rem_scan_backward (reverse)");
            src = vr.as<T>();
          }
          const T* init = rev ? nullptr : SIN;
          scan_w<T>(p, cf.get(), Lk, src, nullptr, init, wr.as<T>(), wi.as<T>());
          k_shift_w<T><<<grid_for(BH * Lk * D), kThreads, 0, stream()>>>(BH, p.H, Lk, D, dm, cf.get(),
                                                            wr.as<T>(), wi.as<T>(), init,
                                                            qs_r.as<T>(), qs_i.as<T>());
          check_launch("rem_scan_backward (shift)");
          scan_w<T>(p, cf.get(), Lk, qs_r.as<T>(), qs_i.as<T>(), nullptr, qr.as<T>(), qi.as<T>());
          const int64_t nper = blocks_per(Lk * D, 64);
          const unsigned nblk = unsigned(std::min<int64_t>(BH * nper, int64_t(1) << 20));
          k_grad_rho<T><<<nblk, kThreads, 0, stream()>>>(BH, nper, p.H, Lk, D, Lk, rev, M, cf.get(),
                                            wr.as<T>(), wi.as<T>(), src, qr.as<T>(), qi.as<T>(),
                                            DY, acc.as<double>());
          check_launch("rem_scan_backward (da, dtheta)");
        }
      }
    } else if (dstate_in && BH > 0 && D > 0) {
      REMORA_CUDA_CHECK(cudaMemsetAsync(dstate_in, 0, size_t(BH * dm * 2 * D) * sizeof(T), stream()));
    }
    if (p.H > 0) {
      k_finish_rho<T><<<grid_for(p.H, 64), 64, 0, stream()>>>(p.H, cf.desc, acc.as<double>(),
                                                static_cast<T*>(da), static_cast<T*>(dtheta));
      check_launch("rem_scan_backward (finish)");
    }
  });
}

const RemKernels kCudaRem = {&rem_matrix, &rem_matrix_backward, &rem_scan, &rem_scan_backward};
const bool g_registered = [] {
  register_kernels(DeviceType::cuda, &kCudaRem);
  return true;
}();

}  // namespace

}  // namespace cuda
}  // namespace remora
