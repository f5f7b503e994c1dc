// SPDX-License-Identifier: BSD-3-Clause
// CPU kernels for the Recurrence Encoding Matrices (docs/math.md#recurrence-encoding-matrices-rem and #the-scan-form-applying-a-rem-in-ol).
//
// Every REM head is one linear recurrence with a complex coefficient
// rho = a e^{i theta} (theta = 0 for a regular head, a = lambda), lag delta
// (the dilation) and an optional truncation to K = floor(max_distance / delta)
// steps. For a real sequence s the causal scan is
//
//   z_t = sum_{m=1..K} rho^m s_{t - delta m}
//       = rho (z_{t-delta} + s_{t-delta}) - rho^{K+1} s_{t - delta (K+1)}
//
// and a head reads Re z (regular, cos) or Im z (sin). The dense kernels build
// the same P entry by entry and stay as the reference.
#include "../../core/parallel.h"

#include <cmath>
#include <vector>

#include "../../core/error.h"
#include "../kernels.h"

namespace remora {

namespace {

// a^m for integer m >= 0 without NaN for negative a or huge m.
double powi(double a, int64_t m) {
  if (m == 0) return 1;
  if (a == 0) return 0;
  const double r = std::exp(double(m) * std::log(std::fabs(a)));
  return (a < 0 && (m & 1)) ? -r : r;
}

// The number of dilated steps m for distance n, or 0 when P is 0 there.
int64_t rem_steps(const RemProblem& p, const RemHeadDesc& h, int64_t n) {
  if (!p.masked) n = n < 0 ? -n : n;
  if (n < 1) return 0;
  if (p.max_distance > 0 && n > p.max_distance) return 0;
  if (n % h.dilation != 0) return 0;  // f is not evaluated off the dilation grid
  return n / h.dilation;
}

template <typename F>
void dispatch_fp(DType dt, F&& f) {
  if (dt == DType::f32) f(float{});
  else if (dt == DType::f64) f(double{});
  else REMORA_FAIL("rem: expected f32 or f64, got " << dtype_name(dt));
}

// Per-head coefficients of the scan, in double.
struct Coef {
  double rr, ri;        // rho
  double cr, ci;        // rho^{K+1}        (truncated only)
  double kr, ki;        // (K+1) rho^K      (truncated only)
  double er, ei;        // e^{i theta}
  int64_t del, K;       // K < 0: no truncation
  bool imag, cplx;
};

Coef coef(const RemProblem& p, const RemHeadDesc& h, double a, double th) {
  Coef c{};
  if (!h.complex) th = 0;
  c.er = std::cos(th);
  c.ei = std::sin(th);
  c.rr = a * c.er;
  c.ri = a * c.ei;
  c.del = h.dilation;
  c.K = p.max_distance > 0 ? p.max_distance / h.dilation : -1;
  c.imag = h.reads_imag;
  c.cplx = h.complex;
  if (c.K >= 0) {
    const double m1 = powi(a, c.K + 1), m0 = powi(a, c.K);
    c.cr = m1 * std::cos(double(c.K + 1) * th);
    c.ci = m1 * std::sin(double(c.K + 1) * th);
    c.kr = double(c.K + 1) * m0 * std::cos(double(c.K) * th);
    c.ki = double(c.K + 1) * m0 * std::sin(double(c.K) * th);
  }
  return c;
}

// One direction of the scan over n positions of D lanes. Position t reads the
// source row s(t) and the history buffer w (w_t = z_t + s_t) at t - del; slots
// for t < 0 hold the initial state (zeros, or state_in). When q is given it
// also carries dz/drho (q_t = w_{t-del} + rho q_{t-del} - (K+1) rho^K s_{t-del(K+1)}).
// emit(t, zr, zi, qr, qi) sees each row.
template <typename T, typename Src, typename Emit>
void scan_dir(const Coef& c, int64_t n, int64_t D, int64_t pre, Src s, T* wr, T* wi, T* qr,
              T* qi, Emit emit) {
  const T rr = T(c.rr), ri = T(c.ri), cr = T(c.cr), ci = T(c.ci), kr = T(c.kr), ki = T(c.ki);
  for (int64_t t = 0; t < n; ++t) {
    const int64_t src = t - c.del;  // >= -pre
    const T* pwr = wr + (src + pre) * D;
    const T* pwi = wi + (src + pre) * D;
    T* owr = wr + (t + pre) * D;
    T* owi = wi + (t + pre) * D;
    const T* st = s(t);
    const int64_t drop = c.K >= 0 ? t - c.del * (c.K + 1) : -1;
    const T* sd = drop >= 0 ? s(drop) : nullptr;
    T* zr_row = owr;  // z is written into w's row first, then s is added
    T* zi_row = owi;
    for (int64_t d = 0; d < D; ++d) {
      T zr = rr * pwr[d] - ri * pwi[d];
      T zi = rr * pwi[d] + ri * pwr[d];
      if (sd) {
        zr -= cr * sd[d];
        zi -= ci * sd[d];
      }
      zr_row[d] = zr;
      zi_row[d] = zi;
    }
    if (qr) {
      const T* pqr = qr + (src + pre) * D;
      const T* pqi = qi + (src + pre) * D;
      T* oqr = qr + (t + pre) * D;
      T* oqi = qi + (t + pre) * D;
      for (int64_t d = 0; d < D; ++d) {
        T a = pwr[d] + rr * pqr[d] - ri * pqi[d];
        T b = pwi[d] + rr * pqi[d] + ri * pqr[d];
        if (sd) {
          a -= kr * sd[d];
          b -= ki * sd[d];
        }
        oqr[d] = a;
        oqi[d] = b;
      }
      emit(t, zr_row, zi_row, oqr, oqi);
    } else {
      emit(t, zr_row, zi_row, (const T*)nullptr, (const T*)nullptr);
    }
    for (int64_t d = 0; d < D; ++d) owr[d] += st[d];
  }
}

template <typename T>
void rem_scan_impl(const RemProblem& p, const T* A, const T* TH, const T* V, const T* SIN, T* Y,
                   T* SOUT) {
  const int64_t B = p.B, H = p.H, Lk = p.Lk, Lq = p.Lq, D = p.D, M = Lk - Lq, dm = p.dmax;
  parallel_team(pool_threads(), [&](int tid, int team) {
    std::vector<T> wr(static_cast<size_t>((Lk + dm) * D)), wi(static_cast<size_t>((Lk + dm) * D));
    int64_t bh0, bh1;
    static_range(B * H, tid, team, &bh0, &bh1);
    for (int64_t bh = bh0; bh < bh1; ++bh) {
      const int64_t h = bh % H;
      const Coef c = coef(p, p.heads[h], double(A[h]), double(TH[h]));
      const T* v = V + bh * Lk * D;
      T* y = Y + bh * Lq * D;
      // Causal direction: slots -dm..-1 start from the carried state.
      for (int64_t k = 0; k < dm; ++k)
        for (int64_t d = 0; d < D; ++d) {
          wr[size_t(k * D + d)] = SIN ? SIN[((bh * dm + k) * 2 + 0) * D + d] : T(0);
          wi[size_t(k * D + d)] = SIN ? SIN[((bh * dm + k) * 2 + 1) * D + d] : T(0);
        }
      scan_dir<T>(c, Lk, D, dm, [&](int64_t t) { return v + t * D; }, wr.data(), wi.data(),
                  (T*)nullptr, (T*)nullptr,
                  [&](int64_t t, const T* zr, const T* zi, const T*, const T*) {
                    if (t < M) return;
                    const T* z = c.imag ? zi : zr;
                    T* yt = y + (t - M) * D;
                    for (int64_t d = 0; d < D; ++d) yt[d] = z[d];
                  });
      if (SOUT)
        for (int64_t k = 0; k < dm; ++k)
          for (int64_t d = 0; d < D; ++d) {
            const int64_t pos = Lk - dm + k;  // >= -dm
            SOUT[((bh * dm + k) * 2 + 0) * D + d] = wr[size_t((pos + dm) * D + d)];
            SOUT[((bh * dm + k) * 2 + 1) * D + d] = wi[size_t((pos + dm) * D + d)];
          }
      if (!p.masked) {
        // Anti-causal direction: the same scan over reversed time.
        std::fill(wr.begin(), wr.end(), T(0));
        std::fill(wi.begin(), wi.end(), T(0));
        scan_dir<T>(c, Lk, D, dm, [&](int64_t t) { return v + (Lk - 1 - t) * D; }, wr.data(),
                    wi.data(), (T*)nullptr, (T*)nullptr,
                    [&](int64_t t, const T* zr, const T* zi, const T*, const T*) {
                      const int64_t pos = Lk - 1 - t;
                      if (pos < M) return;
                      const T* z = c.imag ? zi : zr;
                      T* yt = y + (pos - M) * D;
                      for (int64_t d = 0; d < D; ++d) yt[d] += z[d];
                    });
      }
    }
  });
}

template <typename T>
void rem_scan_backward_impl(const RemProblem& p, const T* A, const T* TH, const T* V,
                            const T* SIN, const T* DY, T* DV, T* DA, T* DTH, T* DSIN) {
  const int64_t B = p.B, H = p.H, Lk = p.Lk, Lq = p.Lq, D = p.D, M = Lk - Lq, dm = p.dmax;
  std::vector<double> pa(size_t(B * H), 0.0), pth(size_t(B * H), 0.0);
  std::vector<T> zero_row(size_t(D), T(0));
  parallel_team(pool_threads(), [&](int tid, int team) {
    const size_t n = size_t((Lk + 2 * dm) * D);  // the reverse scan runs dm past the start
    std::vector<T> wr(n), wi(n), qr(n), qi(n);
    int64_t bh0, bh1;
    static_range(B * H, tid, team, &bh0, &bh1);
    for (int64_t bh = bh0; bh < bh1; ++bh) {
      const int64_t h = bh % H;
      const Coef c = coef(p, p.heads[h], double(A[h]), double(TH[h]));
      const T* v = V + bh * Lk * D;
      const T* dy = DY + bh * Lq * D;
      T* dv = DV + bh * Lk * D;
      // g_t: the output gradient at key position t (0 on memory rows).
      auto g = [&](int64_t t) { return t >= M ? dy + (t - M) * D : zero_row.data(); };
      double sa = 0, sth = 0;
      // d/da and d/dtheta from dz/drho: dz/da = q e^{i theta}, dz/dtheta = i rho q.
      auto accumulate = [&](const T* g_row, const T* q_r, const T* q_i) {
        for (int64_t d = 0; d < D; ++d) {
          const double gq_r = double(q_r[d]), gq_i = double(q_i[d]), gg = double(g_row[d]);
          const double da_r = gq_r * c.er - gq_i * c.ei, da_i = gq_r * c.ei + gq_i * c.er;
          const double rq_r = c.rr * gq_r - c.ri * gq_i, rq_i = c.rr * gq_i + c.ri * gq_r;
          sa += gg * (c.imag ? da_i : da_r);
          sth += gg * (c.imag ? rq_r : -rq_i);  // Re(i x) = -Im x, Im(i x) = Re x
        }
      };
      for (int64_t k = 0; k < dm; ++k)
        for (int64_t d = 0; d < D; ++d) {
          wr[size_t(k * D + d)] = SIN ? SIN[((bh * dm + k) * 2 + 0) * D + d] : T(0);
          wi[size_t(k * D + d)] = SIN ? SIN[((bh * dm + k) * 2 + 1) * D + d] : T(0);
          qr[size_t(k * D + d)] = qi[size_t(k * D + d)] = T(0);
        }
      scan_dir<T>(c, Lk, D, dm, [&](int64_t t) { return v + t * D; }, wr.data(), wi.data(),
                  qr.data(), qi.data(),
                  [&](int64_t t, const T*, const T*, const T* q_r, const T* q_i) {
                    if (t >= M) accumulate(g(t), q_r, q_i);
                  });
      // dv_j = R(u_j), u_j = sum_m rho^m g_{j + del m}: the causal scan of g run
      // backwards in time, continued to the state slots j < 0.
      std::fill(wr.begin(), wr.end(), T(0));
      std::fill(wi.begin(), wi.end(), T(0));
      const int64_t n_rev = Lk + (DSIN ? dm : 0);
      scan_dir<T>(c, n_rev, D, dm,
                  [&](int64_t t) { return g(Lk - 1 - t); }, wr.data(), wi.data(), (T*)nullptr,
                  (T*)nullptr, [&](int64_t t, const T* ur, const T* ui, const T*, const T*) {
                    const int64_t j = Lk - 1 - t;
                    if (j >= 0) {
                      const T* u = c.imag ? ui : ur;
                      for (int64_t d = 0; d < D; ++d) dv[j * D + d] = u[d];
                    } else {  // state slot k = j + dm: d(re w) = R(u), d(im w) = R(i u)
                      const int64_t k = j + dm;
                      T* o = DSIN + (bh * dm + k) * 2 * D;
                      const bool read = j >= -c.del;  // the head reads only slots -del..-1
                      for (int64_t d = 0; d < D; ++d) {
                        o[d] = read ? (c.imag ? ui[d] : ur[d]) : T(0);
                        o[D + d] = read ? (c.imag ? ur[d] : -ui[d]) : T(0);
                      }
                    }
                  });
      if (!p.masked) {
        // Anti-causal half: zb_t = sum_m rho^m v_{t + del m}.
        std::fill(wr.begin(), wr.end(), T(0));
        std::fill(wi.begin(), wi.end(), T(0));
        std::fill(qr.begin(), qr.end(), T(0));
        std::fill(qi.begin(), qi.end(), T(0));
        scan_dir<T>(c, Lk, D, dm, [&](int64_t t) { return v + (Lk - 1 - t) * D; }, wr.data(),
                    wi.data(), qr.data(), qi.data(),
                    [&](int64_t t, const T*, const T*, const T* q_r, const T* q_i) {
                      const int64_t pos = Lk - 1 - t;
                      if (pos >= M) accumulate(g(pos), q_r, q_i);
                    });
        std::fill(wr.begin(), wr.end(), T(0));
        std::fill(wi.begin(), wi.end(), T(0));
        scan_dir<T>(c, Lk, D, dm, [&](int64_t t) { return g(t); }, wr.data(), wi.data(),
                    (T*)nullptr, (T*)nullptr,
                    [&](int64_t t, const T* ur, const T* ui, const T*, const T*) {
                      const T* u = c.imag ? ui : ur;
                      for (int64_t d = 0; d < D; ++d) dv[t * D + d] += u[d];
                    });
      }
      pa[size_t(bh)] = sa;
      pth[size_t(bh)] = sth;
    }
  });
  for (int64_t h = 0; h < H; ++h) {
    double sa = 0, sth = 0;
    for (int64_t b = 0; b < B; ++b) {
      sa += pa[size_t(b * H + h)];
      sth += pth[size_t(b * H + h)];
    }
    DA[h] = T(sa);
    DTH[h] = p.heads[h].complex ? T(sth) : T(0);
  }
}

void matrix(const RemMatrixArgs& args) {
  const RemProblem& p = args.p;
  dispatch_fp(args.dt, [&](auto tag) {
    using T = decltype(tag);
    const T* A = static_cast<const T*>(args.a);
    const T* TH = static_cast<const T*>(args.theta);
    T* out = static_cast<T*>(args.P);
    const int64_t M = p.Lk - p.Lq;
    parallel_for(p.H * p.Lq, true, [&](int64_t hi) {
        const int64_t h = hi / p.Lq, i = hi % p.Lq;
        const RemHeadDesc& hd = p.heads[h];
        const double av = double(A[h]), th = hd.complex ? double(TH[h]) : 0.0;
        T* row = out + (h * p.Lq + i) * p.Lk;
        for (int64_t j = 0; j < p.Lk; ++j) {
          const int64_t m = rem_steps(p, hd, M + i - j);
          double f = 0;
          if (m > 0) {
            const double am = powi(av, m);
            f = !hd.complex ? am : hd.reads_imag ? am * std::sin(double(m) * th)
                                                 : am * std::cos(double(m) * th);
          }
          row[j] = T(f);
        }
      });
  });
}

void matrix_backward(const RemMatrixBackwardArgs& args) {
  const RemProblem& p = args.p;
  dispatch_fp(args.dt, [&](auto tag) {
    using T = decltype(tag);
    const T* A = static_cast<const T*>(args.a);
    const T* TH = static_cast<const T*>(args.theta);
    const T* G = static_cast<const T*>(args.dP);
    const int64_t M = p.Lk - p.Lq;
    for (int64_t h = 0; h < p.H; ++h) {
      const RemHeadDesc& hd = p.heads[h];
      const double av = double(A[h]), th = hd.complex ? double(TH[h]) : 0.0;
      // Partial sums per thread, added in thread order.
      std::vector<double> psa(size_t(pool_threads()), 0.0), psth(psa.size(), 0.0);
      parallel_team(pool_threads(), [&](int tid, int team) {
       int64_t i0, i1;
       static_range(p.Lq, tid, team, &i0, &i1);
       double sa = 0, sth = 0;
       for (int64_t i = i0; i < i1; ++i) {
        const T* g = G + (h * p.Lq + i) * p.Lk;
        for (int64_t j = 0; j < p.Lk; ++j) {
          const int64_t m = rem_steps(p, hd, M + i - j);
          if (m == 0 || g[j] == T(0)) continue;
          const double dam = double(m) * powi(av, m - 1), am = powi(av, m);
          if (!hd.complex) {
            sa += double(g[j]) * dam;
          } else {
            const double cs = std::cos(double(m) * th), sn = std::sin(double(m) * th);
            // cos head: f = a^m cos(m th); sin head: f = a^m sin(m th)
            sa += double(g[j]) * dam * (hd.reads_imag ? sn : cs);
            sth += double(g[j]) * am * double(m) * (hd.reads_imag ? cs : -sn);
          }
        }
       }
       psa[size_t(tid)] = sa;
       psth[size_t(tid)] = sth;
      });
      double sa = 0, sth = 0;
      for (size_t t = 0; t < psa.size(); ++t) {
        sa += psa[t];
        sth += psth[t];
      }
      static_cast<T*>(args.da)[h] = T(sa);
      static_cast<T*>(args.dtheta)[h] = T(sth);
    }
  });
}

void scan(const RemScanArgs& a) {
  dispatch_fp(a.dt, [&](auto tag) {
    using T = decltype(tag);
    rem_scan_impl<T>(a.p, static_cast<const T*>(a.a), static_cast<const T*>(a.theta),
                     static_cast<const T*>(a.v), static_cast<const T*>(a.state_in),
                     static_cast<T*>(a.y), static_cast<T*>(a.state_out));
  });
}

void scan_backward(const RemScanBackwardArgs& a) {
  dispatch_fp(a.dt, [&](auto tag) {
    using T = decltype(tag);
    rem_scan_backward_impl<T>(a.p, static_cast<const T*>(a.a), static_cast<const T*>(a.theta),
                              static_cast<const T*>(a.v), static_cast<const T*>(a.state_in),
                              static_cast<const T*>(a.dy), static_cast<T*>(a.dv),
                              static_cast<T*>(a.da), static_cast<T*>(a.dtheta),
                              static_cast<T*>(a.dstate_in));
  });
}

const RemKernels kCpuRem = {&matrix, &matrix_backward, &scan, &scan_backward};
const bool g_registered = [] {
  register_kernels(DeviceType::cpu, &kCpuRem);
  return true;
}();

}  // namespace

}  // namespace remora
