// SPDX-License-Identifier: BSD-3-Clause
// The tensor-core attention kernels of backends/cuda/cuda_flash.cu, run on
// the CPU by the emulator of emu.h and compared with a float64 reference of
// the same mathematics (docs/math.md, sections RSA attention and the gate,
// and Relative attention and rel-shift): forward O and lse, then dq, dk, dv
// and the positional term's d pos_q and d pos_r. The cases cover what the
// kernels' index arithmetic turns on: several 64-row blocks, partial tiles,
// memory before the segment (the positional band straddling it), the causal
// window as numbers and as a shared mask tensor (the pre-pass and its
// skipping), same_length windows, key padding, REM heads, dropout, fully
// masked rows, and D = 32, 64 and 128; with f32 operands (the TF32 path) and
// with bf16 operands (the bf16 autocast path, inputs rounded to bf16 for the
// reference too). f32 products are exact here (TF32 rounding off), so their
// tolerance is float32 summation order; bf16 rounds P and dS to 8 bits.
//
// Before those, the self-tests of the lane-by-lane mma.sync / ldmatrix
// emulation (mma_selftest.cpp), and with them the mma.sync forward kernel of
// backends/cuda/cuda_flash_mma.cu (mma_forward.cpp).
//
// Usage: flash_emu [--tf32] [--mma]   (exit 0 when every case matches;
//        --mma: only the mma.sync / ldmatrix tests and kernel)
#include "emu.h"

#include "../../backends/cuda/cuda_flash.cu"
#include "../../backends/cuda/cuda_flash_mma.cu"
#include "mma_selftest.cpp"

#include <algorithm>
#include <cinttypes>
#include <random>
#include <string>
#include <type_traits>

namespace {

using namespace remora::cuda;
using remora::cuda::Args;

struct Case {
  std::string name;
  int64_t B, H, Hr, Lq, Lk, D;
  bool pos = false;
  bool causal = false;
  int64_t window = -1;
  bool mask_tensor = false;  // the causal mask as one shared [Lq, Lk] tensor
  bool key_padding = false;  // the last two keys of batch row 0 padded
  double dropout = 0;
};

struct Data {
  std::vector<float> q, k, v, pq, pr, dO, G, Y, bias, kp;
};

std::vector<float> randn(size_t n, std::mt19937& rng, float s = 1.f) {
  std::normal_distribution<float> d(0.f, s);
  std::vector<float> x(n);
  for (float& e : x) e = d(rng);
  return x;
}

// The memory a kernel is given: n elements between two guard zones of NaN
// (for ints: a marker), as a memory checker would place red zones. A read
// past either end that reaches a result makes it NaN; a write there is found
// by intact().
template <class T>
struct Guarded {
  static constexpr size_t kGuard = 4096;
  std::vector<T> buf;
  size_t n;
  explicit Guarded(size_t n_, T fill = T()) : buf(n_ + 2 * kGuard, marker()), n(n_) {
    std::fill(buf.begin() + kGuard, buf.begin() + kGuard + n, fill);
  }
  static T marker() {
    if constexpr (std::is_same<T, int>::value) return -123456789;
    else if constexpr (std::is_same<T, float>::value) return NAN;
    else if constexpr (std::is_same<T, __half>::value) return __half{0x7e00};
    else return __float2bfloat16_rn(NAN);
  }
  T* data() { return buf.data() + kGuard; }
  const T* data() const { return buf.data() + kGuard; }
  size_t size() const { return n; }
  T& operator[](size_t i) { return data()[i]; }
  const T& operator[](size_t i) const { return data()[i]; }
  bool intact() const {
    const T m = marker();
    for (size_t i = 0; i < kGuard; ++i)
      if (std::memcmp(&buf[i], &m, sizeof(T)) != 0 || std::memcmp(&buf[kGuard + n + i], &m, sizeof(T)) != 0)
        return false;
    return true;
  }
};

// The float64 reference: forward and backward of one case.
struct Ref {
  std::vector<double> O, lse, dq, dk, dv, dpq, dpr;
};

Ref reference(const Case& c, const Data& x) {
  const int64_t B = c.B, H = c.H, Lq = c.Lq, Lk = c.Lk, D = c.D;
  const double scale = 1.0 / std::sqrt(double(D));
  Ref r;
  r.O.assign(size_t(B * H * Lq * D), 0);
  r.lse.assign(size_t(B * H * Lq), 0);
  r.dq.assign(size_t(B * H * Lq * D), 0);
  r.dk.assign(size_t(B * H * Lk * D), 0);
  r.dv.assign(size_t(B * H * Lk * D), 0);
  r.dpq.assign(size_t(B * H * Lq * D), 0);
  r.dpr.assign(size_t(B * H * Lk * D), 0);
  const uint32_t thr = remora::philox::keep_threshold(1 - c.dropout);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t bh = b * H + h;
      const double g = h < c.Hr ? x.G[size_t(h)] : 0;
      for (int64_t i = 0; i < Lq; ++i) {
        const float* qi = &x.q[size_t((bh * Lq + i) * D)];
        std::vector<double> s(size_t(Lk), -INFINITY), p(size_t(Lk), 0), keep(size_t(Lk), 1);
        double m = -INFINITY;
        for (int64_t j = 0; j < Lk; ++j) {
          const int64_t last = i + Lk - Lq;
          if (c.causal && (j > last || (c.window >= 0 && j <= last - c.window))) continue;
          double e = 0;
          if (c.mask_tensor) e += x.bias[size_t(i * Lk + j)];
          if (c.key_padding) e += x.kp[size_t(b * Lk + j)];
          if (std::isinf(e)) continue;
          const float* kj = &x.k[size_t((bh * Lk + j) * D)];
          double dot = 0;
          for (int64_t d = 0; d < D; ++d) dot += double(qi[d]) * kj[d];
          const int64_t cc = j + Lq - 1 - i;
          if (c.pos && cc < Lk) {
            const float* a = &x.pq[size_t((bh * Lq + i) * D)];
            const float* rr = &x.pr[size_t((h * Lk + cc) * D)];
            for (int64_t d = 0; d < D; ++d) dot += double(a[d]) * rr[d];
          }
          s[size_t(j)] = dot * scale + e;
          m = std::max(m, s[size_t(j)]);
          if (c.dropout > 0)
            keep[size_t(j)] = remora::philox::kept(77, 5, uint64_t((bh * Lq + i) * Lk + j), thr)
                                  ? 1.0 / (1 - c.dropout)
                                  : 0.0;
        }
        double l = 0;
        if (m != -INFINITY)
          for (int64_t j = 0; j < Lk; ++j) l += (p[size_t(j)] = std::exp(s[size_t(j)] - m));
        r.lse[size_t(bh * Lq + i)] = l > 0 ? m + std::log(l) : INFINITY;
        if (!(l > 0)) continue;  // a fully masked row: O = 0, no gradient
        for (double& e : p) e /= l;
        std::vector<double> oatt(size_t(D), 0);
        for (int64_t j = 0; j < Lk; ++j)
          for (int64_t d = 0; d < D; ++d)
            oatt[size_t(d)] += p[size_t(j)] * keep[size_t(j)] * x.v[size_t((bh * Lk + j) * D + d)];
        for (int64_t d = 0; d < D; ++d) {
          const double y = h < c.Hr ? x.Y[size_t(((b * c.Hr + h) * Lq + i) * D + d)] : 0;
          r.O[size_t((bh * Lq + i) * D + d)] = h < c.Hr ? oatt[size_t(d)] + g * (y - oatt[size_t(d)]) : oatt[size_t(d)];
        }
        // Backward of sum(O * dO).
        const double f = h < c.Hr ? 1 - g : 1;
        const float* go = &x.dO[size_t((bh * Lq + i) * D)];
        double di = 0;
        for (int64_t d = 0; d < D; ++d) di += f * go[d] * oatt[size_t(d)];
        for (int64_t j = 0; j < Lk; ++j) {
          if (p[size_t(j)] == 0) continue;
          const float* vj = &x.v[size_t((bh * Lk + j) * D)];
          double dp = 0;
          for (int64_t d = 0; d < D; ++d) dp += f * go[d] * vj[d];
          dp *= keep[size_t(j)];
          const double ds = p[size_t(j)] * (dp - di) * scale;
          const int64_t cc = j + Lq - 1 - i;
          for (int64_t d = 0; d < D; ++d) {
            r.dq[size_t((bh * Lq + i) * D + d)] += ds * x.k[size_t((bh * Lk + j) * D + d)];
            r.dk[size_t((bh * Lk + j) * D + d)] += ds * qi[d];
            r.dv[size_t((bh * Lk + j) * D + d)] += p[size_t(j)] * keep[size_t(j)] * f * go[d];
            if (c.pos && cc < Lk) {
              r.dpq[size_t((bh * Lq + i) * D + d)] += ds * x.pr[size_t((h * Lk + cc) * D + d)];
              r.dpr[size_t((bh * Lk + cc) * D + d)] += ds * x.pq[size_t((bh * Lq + i) * D + d)];
            }
          }
        }
      }
    }
  return r;
}

// Worst |got - want| over the tensor, relative to its largest finite |want|
// (>= 1e-3); where want is inf, got must be the same inf.
bool close(const char* what, const Case& c, const Guarded<float>& got, const std::vector<double>& want,
           double tol) {
  double worst = 0, big = 1e-3;
  size_t at = 0;
  for (size_t t = 0; t < want.size(); ++t)
    if (std::isfinite(want[t])) big = std::max(big, std::abs(want[t]));  // (lse = inf: a row that sees no key)
  for (size_t t = 0; t < want.size(); ++t) {
    const double e = std::isinf(want[t]) && want[t] == got[t] ? 0 : std::abs(double(got[t]) - want[t]);
    if (!(e <= worst)) {
      worst = std::isnan(e) ? INFINITY : e;
      at = t;
    }
  }
  const bool ok = worst <= tol * big;
  std::printf("  %-6s worst %.3g of %.3g (at %zu: got %.6g want %.6g) %s\n", what, worst, tol * big, at,
              double(got[at]), want[at], ok ? "ok" : "FAILED");
  return ok;
}

// The operand arrays in type E (bf16: the values of x, which are already
// bf16-exact), in guarded memory.
template <class E>
Guarded<E> as(const std::vector<float>& x) {
  Guarded<E> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    if constexpr (std::is_same<E, float>::value) y[i] = x[i];
    else y[i] = __float2bfloat16_rn(x[i]);
  }
  return y;
}
void round_bf16(std::vector<float>& x) {
  for (float& e : x) e = __bfloat162float(__float2bfloat16_rn(e));
}

template <class E, int D, bool POS>
bool run(const Case& c, double tol) {
  constexpr bool kBf16 = !std::is_same<E, float>::value;
  std::mt19937 rng(1234);
  const int64_t B = c.B, H = c.H, Lq = c.Lq, Lk = c.Lk;
  Data x;
  x.q = randn(size_t(B * H * Lq * D), rng);
  x.k = randn(size_t(B * H * Lk * D), rng);
  x.v = randn(size_t(B * H * Lk * D), rng);
  x.pq = randn(size_t(B * H * Lq * D), rng);
  x.pr = randn(size_t(H * Lk * D), rng);
  x.dO = randn(size_t(B * H * Lq * D), rng);
  if (kBf16)  // the operands as bf16 autocast gives them: the reference sees the same values
    for (std::vector<float>* t : {&x.q, &x.k, &x.v, &x.pq, &x.pr, &x.dO}) round_bf16(*t);
  x.G = randn(size_t(std::max<int64_t>(c.Hr, 1)), rng, 0.3f);
  for (float& g : x.G) g = 1 / (1 + std::exp(-g));
  x.Y = randn(size_t(B * std::max<int64_t>(c.Hr, 1) * Lq * D), rng);
  if (c.mask_tensor) {
    x.bias.assign(size_t(Lq * Lk), 0.f);
    for (int64_t i = 0; i < Lq; ++i)
      for (int64_t j = 0; j < Lk; ++j)
        if (j > i + Lk - Lq) x.bias[size_t(i * Lk + j)] = -INFINITY;
  }
  if (c.key_padding) {
    x.kp.assign(size_t(B * Lk), 0.f);
    x.kp[size_t(Lk - 1)] = x.kp[size_t(Lk - 2)] = -INFINITY;
  }
  const Ref want = reference(c, x);
  const Guarded<E> q = as<E>(x.q), k = as<E>(x.k), v = as<E>(x.v), pq = as<E>(x.pq), pr = as<E>(x.pr),
                   dO = as<E>(x.dO);
  const Guarded<float> G = as<float>(x.G), Y = as<float>(x.Y), bias = as<float>(x.bias), kp = as<float>(x.kp);

  Args a{};
  a.B = B; a.H = H; a.Hr = c.Hr; a.Lq = Lq; a.Lk = Lk;
  a.scale = float(1.0 / std::sqrt(double(D)));
  a.bias = c.mask_tensor ? bias.data() : nullptr;
  a.bs0 = 0; a.bs1 = 0; a.bs2 = Lk; a.bs3 = 1;
  a.kp = c.key_padding ? kp.data() : nullptr;
  a.drop = c.dropout > 0;
  a.keep = 1 - c.dropout;
  a.seed = 77;
  a.offset = 5;
  a.pq = POS ? pq.data() : nullptr;
  a.pr = POS ? pr.data() : nullptr;
  a.causal = c.causal;
  a.window = c.window;
  // The pre-pass over a shared mask, as flash_rsa_forward runs it.
  const int64_t ntq = (Lq + kTile - 1) / kTile;
  Guarded<int> ext(size_t(Lq + 1 + ntq), 0);
  if (c.mask_tensor) {
    int* e = ext.data();
    emu::launch(dim3(unsigned((Lq + 7) / 8)), 256, 0,
                [&] { k_flash_ext(Lq, Lk, bias.data(), Lk, 1, e, e + Lq, e + Lq + 1); });
    a.ext = e;
    a.impure = e + Lq;
    a.text = e + Lq + 1;
  }
  const dim3 rows_q(unsigned((Lq + kBlockRows - 1) / kBlockRows), unsigned(B * H));
  const dim3 rows_k(unsigned((Lk + kBlockRows - 1) / kBlockRows), unsigned(B * H));
  Guarded<float> O(size_t(B * H * Lq * D)), OR(size_t(B * std::max<int64_t>(c.Hr, 1) * Lq * D)),
      lse(size_t(B * H * Lq)), Di(size_t(B * H * Lq)), dq(O.size()), dk(size_t(B * H * Lk * D)), dv(dk.size()),
      dpq(O.size(), NAN), dpr(dk.size(), NAN);
  using Gm = Geo<D, E>;
  emu::launch(rows_q, kFlashThreads, POS ? Gm::kFwdPosSmem : Gm::kFwdSmem, [&] {
    k_flash_fwd<E, D, POS>(a, q.data(), k.data(), v.data(), G.data(), Y.data(), O.data(), OR.data(),
                           lse.data());
  });
  emu::launch(dim3(unsigned((B * H * Lq + 7) / 8)), 256, 0,
              [&] { k_flash_delta<E>(a, D, G.data(), O.data(), OR.data(), dO.data(), Di.data()); });
  emu::launch(rows_k, kFlashThreads, POS ? Gm::kDkdvPosSmem : Gm::kDkdvSmem, [&] {
    k_flash_dkdv<E, D, POS>(a, q.data(), k.data(), v.data(), G.data(), lse.data(), Di.data(), dO.data(),
                            dk.data(), dv.data());
  });
  emu::launch(rows_q, kFlashThreads, POS ? Gm::kDqPosSmem : Gm::kDqSmem, [&] {
    k_flash_dq<E, D, POS>(a, q.data(), k.data(), v.data(), G.data(), lse.data(), Di.data(), dO.data(),
                          dq.data(), nullptr, POS ? dpq.data() : nullptr);
  });
  if (POS)
    emu::launch(rows_k, kFlashThreads, Gm::kDposSmem, [&] {
      k_flash_dpos<E, D>(a, q.data(), k.data(), v.data(), G.data(), lse.data(), Di.data(), dO.data(),
                         dpr.data());
    });

  std::printf("%s (%s, D %d, B %" PRId64 " H %" PRId64 " Hr %" PRId64 " Lq %" PRId64 " Lk %" PRId64 ")\n",
              c.name.c_str(), kBf16 ? "bf16" : "f32", D, B, H, c.Hr, Lq, Lk);
  bool ok = close("O", c, O, want.O, tol);
  ok &= close("lse", c, lse, want.lse, tol);
  ok &= close("dq", c, dq, want.dq, tol);
  ok &= close("dk", c, dk, want.dk, tol);
  ok &= close("dv", c, dv, want.dv, tol);
  if (POS) {
    ok &= close("dpos_q", c, dpq, want.dpq, tol);
    ok &= close("dpos_r", c, dpr, want.dpr, tol);
  }
  // Nothing written outside the arrays (inputs included).
  bool guards = ext.intact() && G.intact() && Y.intact() && bias.intact() && kp.intact();
  for (const Guarded<E>* t : {&q, &k, &v, &pq, &pr, &dO}) guards &= t->intact();
  for (const Guarded<float>* t : {&O, &OR, &lse, &Di, &dq, &dk, &dv, &dpq, &dpr}) guards &= t->intact();
  if (!guards) std::printf("  a write outside an array: FAILED\n");
  return ok && guards;
}

}  // namespace

#include "mma_forward.cpp"

int main(int argc, char** argv) {
  bool tf32 = false, mma_only = false;
  std::vector<bool> copy_modes = {false, true};  // cp.async copies land at once, at their waits
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--tf32") tf32 = true;
    else if (a == "--mma") mma_only = true;
    else if (a == "--copies-at-wait") copy_modes = {true};
    else {
      std::fprintf(stderr, "usage: flash_emu [--tf32] [--mma] [--copies-at-wait]\n");
      return 2;
    }
  }
  emu::round_tf32() = tf32;
  const double tol = tf32 ? 2e-2 : 2e-5;
  // bf16 operands: P and dS are rounded to bf16 for their products (8 bits),
  // so the results move by about 2^-8 of their size.
  const double tol_bf16 = 2e-2;
  int failed = 0, n = 0;
  auto check = [&](bool ok) {
    ++n;
    failed += !ok;
  };
  failed += mma_selftest::run_all(n);
  // Every case twice: cp.async copies landing at once, then at their waits
  // (--copies-at-wait: the second only, the one that exposes a missing wait).
  for (bool deferred : copy_modes) {
    emu::deferred_copies() = deferred;
    std::printf("== cp.async copies land %s\n", deferred ? "at their wait_group" : "at once");
    // The mma.sync forward (cuda_flash_mma.cu).
    failed += run_mma_forward(n);
    if (mma_only) continue;
    // Transformer-XL: memory of Lk - Lq keys, the causal window as numbers.
    check(run<float, 64, true>({"xl_memory", 1, 2, 1, 130, 260, 64, true, true}, tol));
    check(run<float, 32, true>({"xl_same_length_window", 2, 1, 0, 100, 164, 32, true, true, 64}, tol));
    check(run<float, 32, true>({"xl_dropout", 1, 2, 1, 70, 134, 32, true, true, -1, false, false, 0.2}, tol));
    check(run<float, 32, true>({"xl_no_memory_window_2", 1, 1, 0, 67, 67, 32, true, true, 2}, tol));
    // The positional term without a mask: rows past the band get no term.
    check(run<float, 32, true>({"xl_unmasked", 1, 1, 0, 70, 100, 32, true, false}, tol));
    // The causal mask as a shared tensor (pre-pass, pure mask) with key padding.
    check(run<float, 32, true>({"xl_mask_tensor_padding", 2, 1, 1, 40, 90, 32, true, false, -1, true, true}, tol));
    // Without the positional term.
    check(run<float, 64, false>({"causal_numbers", 1, 2, 1, 100, 100, 64, false, true}, tol));
    check(run<float, 128, false>({"mask_tensor_memory", 1, 1, 0, 70, 140, 128, false, false, -1, true}, tol));
    check(run<float, 64, false>({"rows_fully_masked", 1, 1, 0, 100, 30, 64, false, true}, tol));
    check(run<float, 32, false>({"padding_dropout", 2, 1, 0, 33, 45, 32, false, false, -1, false, true, 0.25}, tol));
    // bf16 operands (bf16 autocast): the same kernels on m16n16k16.
    check(run<bf16, 64, true>({"bf16_xl_memory", 1, 2, 1, 130, 260, 64, true, true}, tol_bf16));
    check(run<bf16, 32, true>({"bf16_xl_window_dropout", 1, 2, 1, 100, 164, 32, true, true, 64, false, false, 0.2},
                              tol_bf16));
    check(run<bf16, 32, true>({"bf16_xl_mask_tensor_padding", 2, 1, 1, 40, 90, 32, true, false, -1, true, true},
                              tol_bf16));
    check(run<bf16, 128, false>({"bf16_mask_tensor_memory", 1, 1, 0, 70, 140, 128, false, false, -1, true},
                                tol_bf16));
    check(run<bf16, 64, false>({"bf16_causal_numbers", 1, 2, 1, 100, 100, 64, false, true}, tol_bf16));
  }
  std::printf("flash_emu: %d cases, %d failed%s\n", n, failed, tf32 ? " (TF32 rounding)" : "");
  return failed ? 1 : 0;
}
