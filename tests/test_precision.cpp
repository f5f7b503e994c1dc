// SPDX-License-Identifier: BSD-3-Clause
// bf16 autocast (core/autocast.h, docs/precision.md): the rounding kernel
// against a scalar reference, matmul / linear / attention under the guard
// against products of explicitly rounded operands, and the guard's scoping.
// The products run on the process's bf16 path (backends/cpu/cpu_bgemm.h): on
// `convert` they equal the f32 products of the rounded operands bit for bit;
// the native paths (vdpbf16ps, OpenBLAS's sbgemm) and the scalar loop
// accumulate in another order and are held to f32 accumulation's bound
// against f64. ctest runs this file once per path (tests/CMakeLists.txt),
// natively where the CPU has it, emulated where it does not. The driver's train.precision (loss parity over 200
// steps, the config error) is in tests/test_driver.cpp.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include <remora/remora.h>

#include "../backends/cpu/cpu_bgemm.h"
#include "helpers.h"

using namespace remora;

namespace {

using remora_test::from_bits;
using remora_test::to_bits;

// The reference, written from the definition rather than with the kernels'
// bit trick: the two bf16 neighbours of |x| (lo <= |x| < hi, hi = 2^128 past
// the largest finite), the nearer one, ties to the one with an even last
// significand bit; 2^128 means inf. Works for f32 and f64 inputs (differences
// of x and a neighbour are exact in f64: the neighbours are within one bf16
// ulp of x).
double ref_round_bf16(double x) {
  if (std::isnan(x)) return x;
  if (std::isinf(x) || x == 0) return x;
  const double ax = std::fabs(x);
  if (ax >= std::ldexp(1.0, 128)) return std::copysign(std::numeric_limits<double>::infinity(), x);
  // lo: the largest bf16 <= ax, found from the f32 truncated to 16 bits and
  // corrected by one step where the f32 conversion rounded up.
  const float f = float(ax);
  uint32_t lo_bits = std::isinf(f) ? 0x7f7f0000u : (to_bits(f) & 0xffff0000u);
  if (double(from_bits(lo_bits)) > ax) lo_bits -= 0x10000u;
  const double lo = from_bits(lo_bits);
  const uint32_t hi_bits = lo_bits + 0x10000u;
  const double hi = hi_bits == 0x7f800000u ? std::ldexp(1.0, 128) : double(from_bits(hi_bits));
  REQUIRE(lo <= ax);
  REQUIRE(ax < hi);
  const double dl = ax - lo, dh = hi - ax;
  double r;
  if (dl < dh)
    r = lo;
  else if (dh < dl)
    r = hi;
  else
    r = (lo_bits & 0x10000u) == 0 ? lo : hi;
  if (r == std::ldexp(1.0, 128)) r = std::numeric_limits<double>::infinity();
  return std::copysign(r, x);
}

Tensor f32_of(const std::vector<float>& v) {  // bit-exact (a signalling NaN stays one)
  return Tensor::from_vector(v, {int64_t(v.size())}, DType::f32);
}

bool same_value(double got, double want) {
  if (std::isnan(want)) return std::isnan(got);
  return got == want && std::signbit(got) == std::signbit(want);
}

cpu_impl::BgemmPath bf16_path() { return cpu_impl::bgemm_path(); }
bool exact_path() { return bf16_path() == cpu_impl::BgemmPath::convert; }

// A product computed under autocast (got) against the f32 product of the
// rounded operands (f32): equal bit for bit on the `convert` path; on every
// path within f32 accumulation's bound of the exact product (ref, in f64):
// |got - ref| <= (k + 2) u (|a| |b|) (mag), u = 2^-24, for k-term sums (the
// bias, where there is one, adds its own term).
void check_product(const Tensor& got, const Tensor& f32, const Tensor& ref, const Tensor& mag, int64_t k) {
  INFO("bf16 gemm path: " << cpu_impl::bgemm_path_name(bf16_path()) << ", k = " << k);
  if (exact_path()) CHECK(got.to_vector() == f32.to_vector());
  const std::vector<double> g = got.to_vector(), r = ref.to_vector(), m = mag.to_vector();
  REQUIRE(g.size() == r.size());
  const double bound = double(k + 2) * std::ldexp(1.0, -24);
  size_t bad = 0;
  for (size_t i = 0; i < g.size(); ++i) bad += std::fabs(g[i] - r[i]) > bound * m[i];
  CHECK(bad == 0);
}

Tensor wide(const Tensor& t) { return t.detach().to(DType::f64); }

}  // namespace

TEST_CASE("round_bf16: f32 against the scalar reference", "[precision]") {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> special = {
      0.0f, -0.0f, 1.0f, -1.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(),
      from_bits(0x7f800001u),           // signalling NaN: must stay NaN, not become inf
      from_bits(0xffc00001u),           // negative NaN with a payload below bit 16
      1.0f + 0x1p-8f,                   // tie between 1 and 1 + 2^-7: to even (1)
      1.0f + 3 * 0x1p-8f,               // tie between 1 + 2^-7 and 1 + 2^-6: to even (up)
      -(1.0f + 0x1p-8f), 1.0f + 0x1p-8f + 0x1p-20f,  // just past the tie: up
      from_bits(0x7f7f0000u),           // bf16's largest finite: kept
      from_bits(0x7f7f7fffu),           // just below the tie to 2^128: largest finite
      from_bits(0x7f7f8000u),           // the tie: the largest finite is odd, so inf
      std::numeric_limits<float>::max(),  // inf
      -std::numeric_limits<float>::max(),
      from_bits(0x00010000u),           // bf16's smallest subnormal: kept
      from_bits(0x00008000u),           // tie between 0 and it: to even (0)
      from_bits(0x00018000u),           // tie: to even (0x00020000)
      from_bits(0x00000001u),           // f32's smallest subnormal: 0
      from_bits(0x80008001u),           // past the tie, negative
      from_bits(0x007fffffu),           // largest f32 subnormal: up to the smallest normal
      std::numeric_limits<float>::min(), 3.14159265f, 65504.0f, 1e-30f};
  std::mt19937 rng(7);
  std::vector<float> all = special;
  for (int i = 0; i < 200000; ++i) all.push_back(from_bits(rng()));  // every exponent, NaNs too
  for (int i = 0; i < 20000; ++i)  // exact ties of random bf16 neighbours
    all.push_back(from_bits((rng() & 0xffff0000u) | 0x8000u));
  const std::vector<double> got = round_bf16(f32_of(all)).to_vector();
  int bad = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    const double want = ref_round_bf16(double(all[i]));
    if (!same_value(got[i], want) && ++bad <= 5)
      FAIL_CHECK("round_bf16(" << std::hexfloat << all[i] << " = 0x" << std::hex << to_bits(all[i])
                               << ") = " << std::hexfloat << got[i] << ", expected " << want);
    // The result is a bf16: its low 16 bits are zero (NaN included).
    if ((to_bits(float(got[i])) & 0xffffu) != 0 && ++bad <= 5) FAIL_CHECK("not a bf16: " << got[i]);
  }
  CHECK(bad == 0);
  // Spot checks that do not lean on the reference.
  CHECK(got[9] == 1.0);
  CHECK(got[10] == 1.0 + 0x1p-6);
  CHECK(std::isnan(got[7]));
  CHECK(std::isinf(got[15]));
  CHECK(got[14] == double(from_bits(0x7f7f0000u)));
  CHECK(got[19] == 0.0);
  CHECK(got[20] == double(from_bits(0x00020000u)));
}

TEST_CASE("round_bf16: f64 rounds once, straight to bf16", "[precision]") {
  std::mt19937_64 rng(11);
  std::vector<double> v = {0.0, -0.0, 1.0 + 0x1p-8, 1.0 + 0x1p-8 + 0x1p-40, 1.0 + 0x1p-8 - 0x1p-40,
                           std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN(),
                           0x1.fep127, 0x1.ffp127, 0x1.fefffffffp127, 1e300, 1e-300, 0x1p-134, 0x1.8p-133,
                           std::numeric_limits<double>::denorm_min()};
  // A value whose f32 rounding lands on a bf16 tie while the value itself is
  // above it: rounding through f32 would go to even (down); once, it goes up.
  v.push_back(1.0 + 0x1p-8 + 0x1p-30);
  std::uniform_real_distribution<double> mant(1.0, 2.0);
  std::uniform_int_distribution<int> ex(-140, 130);
  for (int i = 0; i < 50000; ++i) v.push_back((rng() & 1 ? -1 : 1) * std::ldexp(mant(rng), ex(rng)));
  const std::vector<double> got = round_bf16(Tensor::from_vector(v, {int64_t(v.size())}, DType::f64)).to_vector();
  int bad = 0;
  for (size_t i = 0; i < v.size(); ++i)
    if (!same_value(got[i], ref_round_bf16(v[i])) && ++bad <= 5)
      FAIL_CHECK("round_bf16(" << std::hexfloat << v[i] << ") = " << got[i] << ", expected "
                               << ref_round_bf16(v[i]));
  CHECK(bad == 0);
  CHECK(got[3] == 1.0 + 0x1p-7);
  CHECK(got[4] == 1.0);
  CHECK(got[15] == 1.0 + 0x1p-7);
  CHECK(std::isinf(got[8]));  // 0x1.ffp127 is the tie above the largest finite
}

TEST_CASE("round_bf16: straight-through gradient, non-contiguous input", "[precision]") {
  Tensor x = Tensor::randn({4, 3}, DType::f32).requires_grad_();
  Tensor y = round_bf16(x.t());
  CHECK(y.shape() == Shape({3, 4}));
  CHECK(y.to_vector() == round_bf16(x.t().contiguous()).to_vector());
  Tensor w = Tensor::randn({3, 4}, DType::f32);
  (y * w).sum().backward();
  CHECK(x.grad().to_vector() == w.t().contiguous().to_vector());
}

TEST_CASE("bf16 autocast: the guard is scoped, nests and is per thread", "[precision]") {
  CHECK(autocast_precision() == Precision::f32);
  {
    AutocastGuard a(Precision::bf16);
    CHECK(autocast_precision() == Precision::bf16);
    {
      AutocastGuard b(Precision::f32);
      CHECK(autocast_precision() == Precision::f32);
    }
    CHECK(autocast_precision() == Precision::bf16);
  }
  CHECK(autocast_precision() == Precision::f32);
  CHECK(parse_precision("bf16") == Precision::bf16);
  CHECK(std::string(precision_name(Precision::bf16)) == "bf16");
  CHECK_THROWS_WITH(parse_precision("fp16"), Catch::Contains("f32, bf16"));
}

TEST_CASE("bf16 autocast: linear and matmul are products of rounded operands, forward and backward",
          "[precision]") {
  Generator g(5);
  Tensor x = Tensor::randn({3, 5, 40}, DType::f32, Device::cpu(), &g);
  Tensor w = Tensor::randn({24, 40}, DType::f32, Device::cpu(), &g);
  Tensor b = Tensor::randn({24}, DType::f32, Device::cpu(), &g);
  Tensor dy = Tensor::randn({3, 5, 24}, DType::f32, Device::cpu(), &g);

  // f32 reference: the plain f32 op on rounded leaves, fed the rounded
  // gradient; the bias gradient is the sum of the unrounded one (no product).
  Tensor xr = round_bf16(x).requires_grad_(), wr = round_bf16(w).requires_grad_();
  Tensor yr = linear(xr, wr, b);
  yr.backward(round_bf16(dy));
  Tensor br = b.clone().requires_grad_();
  linear(round_bf16(x), round_bf16(w), br).backward(dy);
  // f64 reference and magnitudes of the same products.
  const Tensor xr64 = wide(xr), wr64 = wide(wr), dy64 = wide(round_bf16(dy));
  const Tensor y64 = linear(xr64, wr64, wide(b)), ymag = linear(xr64.abs(), wr64.abs(), wide(b).abs());
  const Tensor dx64 = matmul(dy64, wr64), dxmag = matmul(dy64.abs(), wr64.abs());
  const Tensor dw64 = matmul(dy64.reshape({15, 24}).t(), xr64.reshape({15, 40})),
               dwmag = matmul(dy64.abs().reshape({15, 24}).t(), xr64.abs().reshape({15, 40}));

  for (bool backward_in_guard : {true, false}) {
    DYNAMIC_SECTION("backward " << (backward_in_guard ? "inside" : "outside") << " the guard") {
      Tensor xa = x.clone().requires_grad_(), wa = w.clone().requires_grad_(), ba = b.clone().requires_grad_();
      Tensor y;
      {
        AutocastGuard bf16(Precision::bf16);
        y = linear(xa, wa, ba);
        if (backward_in_guard) y.backward(dy);
      }
      if (!backward_in_guard) y.backward(dy);  // follows the forward's mode
      check_product(y, yr, y64, ymag, 40);
      check_product(xa.grad(), xr.grad(), dx64, dxmag, 24);
      check_product(wa.grad(), wr.grad(), dw64, dwmag, 15);
      CHECK(ba.grad().to_vector() == br.grad().to_vector());  // the bias gradient is f32 (a sum)
    }
  }
  SECTION("a batched matmul with a broadcast 2-D right operand") {
    Tensor m = Tensor::randn({40, 7}, DType::f32, Device::cpu(), &g);
    Tensor xa = x.clone().requires_grad_(), ma = m.clone().requires_grad_();
    Tensor y;
    {
      AutocastGuard bf16(Precision::bf16);
      y = matmul(xa, ma);
    }
    Tensor dz = Tensor::randn({3, 5, 7}, DType::f32, Device::cpu(), &g);
    y.backward(dz);
    Tensor xr2 = round_bf16(x).requires_grad_(), mr = round_bf16(m).requires_grad_();
    Tensor y2 = matmul(xr2, mr);
    y2.backward(round_bf16(dz));
    const Tensor m64 = wide(mr), dz64 = wide(round_bf16(dz));
    check_product(y, y2, matmul(xr64, m64), matmul(xr64.abs(), m64.abs()), 40);
    check_product(xa.grad(), xr2.grad(), matmul(dz64, m64.t()), matmul(dz64.abs(), m64.abs().t()), 7);
    check_product(ma.grad(), mr.grad(), matmul(xr64.reshape({15, 40}).t(), dz64.reshape({15, 7})),
                  matmul(xr64.abs().reshape({15, 40}).t(), dz64.abs().reshape({15, 7})), 15);
  }
  SECTION("the result differs from f32 by bf16's rounding, not more") {
    Tensor y32 = linear(x, w, b), y16;
    {
      AutocastGuard bf16(Precision::bf16);
      y16 = linear(x, w, b);
    }
    const double diff = (y16 - y32).abs().max().item(), scale = y32.abs().max().item();
    CHECK(diff > 0);                  // it did round
    CHECK(diff < 2e-2 * scale);       // 40-term dot products of 2^-9-rounded operands
  }
  SECTION("f64 is never lowered") {
    Tensor x64 = x.to(DType::f64), w64 = w.to(DType::f64);
    Tensor y64 = linear(x64, w64), y;
    {
      AutocastGuard bf16(Precision::bf16);
      y = linear(x64, w64);
    }
    CHECK(y.to_vector() == y64.to_vector());
  }
}

TEST_CASE("bf16 autocast: attention's products (composed path) are bf16 in forward and backward",
          "[precision]") {
  Generator g(9);
  // More queries than keys: the fused kernels decline, the composed path runs.
  const int64_t B = 2, H = 2, L = 6, Lq = 8, D = 8;
  Tensor q = Tensor::randn({B, H, Lq, D}, DType::f32, Device::cpu(), &g);
  Tensor k = Tensor::randn({B, H, L, D}, DType::f32, Device::cpu(), &g);
  Tensor v = Tensor::randn({B, H, L, D}, DType::f32, Device::cpu(), &g);
  Tensor dO = Tensor::randn({B, H, Lq, D}, DType::f32, Device::cpu(), &g);
  const RemSpec none;  // plain softmax attention
  auto run = [&](bool guard, bool backward_in_guard, std::vector<Tensor>* grads) {
    Tensor qa = q.clone().requires_grad_(), ka = k.clone().requires_grad_(), va = v.clone().requires_grad_();
    Tensor O;
    {
      AutocastGuard ag(guard ? Precision::bf16 : Precision::f32);
      O = rsa_attention(qa, ka, va, none, Tensor(), Tensor(), Tensor(), Tensor());
      if (backward_in_guard) O.backward(dO);
    }
    if (!backward_in_guard) O.backward(dO);
    *grads = {qa.grad(), ka.grad(), va.grad()};
    return O;
  };
  std::vector<Tensor> g16, g16out, g32;
  Tensor O16 = run(true, true, &g16), O16b = run(true, false, &g16out), O32 = run(false, false, &g32);
  // Forward: S = round(q) round(k)^T * scale, A = softmax(S), O = round(A) round(v).
  INFO("bf16 gemm path: " << cpu_impl::bgemm_path_name(bf16_path()));
  Tensor S = affine(matmul(round_bf16(q), round_bf16(k).transpose(-2, -1)), 1.0 / std::sqrt(double(D)), 0);
  Tensor Oref = matmul(round_bf16(softmax(S, -1)), round_bf16(v));
  if (exact_path()) {
    CHECK(O16.to_vector() == Oref.to_vector());
    CHECK(O16b.to_vector() == Oref.to_vector());
  }
  // Every path: within one bf16 rounding of A (2^-8 relative, with 1e-4 for
  // the f32 scores and softmax) plus the f32 sum of L terms of the exact
  // attention of the rounded q, k, v.
  const Tensor v64 = wide(round_bf16(v));
  const Tensor A64 = softmax(affine(matmul(wide(round_bf16(q)), wide(round_bf16(k)).transpose(-2, -1)),
                                    1.0 / std::sqrt(double(D)), 0),
                             -1);
  const std::vector<double> o64 = matmul(A64, v64).to_vector(), omag = matmul(A64, v64.abs()).to_vector();
  const double bound = std::ldexp(1.0, -8) + 1e-4 + double(L + 2) * std::ldexp(1.0, -24);
  for (const Tensor& O : {O16, O16b}) {
    const std::vector<double> o = O.to_vector();
    for (size_t i = 0; i < o.size(); ++i) REQUIRE(std::fabs(o[i] - o64[i]) <= bound * omag[i]);
  }
  CHECK(O16.to_vector() == O16b.to_vector());
  CHECK((O16 - O32).abs().max().item() > 0);  // it did round
  // Backward follows the forward's mode wherever it runs, and differs from f32
  // by bf16 rounding only.
  for (size_t i = 0; i < 3; ++i) {
    INFO("gradient " << i);
    CHECK(g16[i].to_vector() == g16out[i].to_vector());
    const double diff = (g16[i] - g32[i]).abs().max().item(), scale = g32[i].abs().max().item();
    CHECK(diff > 0);
    CHECK(diff < 3e-2 * scale);
  }
}

TEST_CASE("bf16 autocast: the fused CPU attention kernel takes q, k, v and dO rounded to bf16",
          "[precision]") {
  // As the fused CUDA kernel (docs/precision.md): the operands are rounded
  // before the kernel, its P and dS stay f32. So under autocast it gives, bit
  // for bit, the f32 kernel's result on rounded operands.
  Generator g(10);
  const int64_t B = 2, H = 3, L = 70, D = 8;  // two row blocks
  Tensor q = Tensor::randn({B, H, L, D}, DType::f32, Device::cpu(), &g);
  Tensor k = Tensor::randn({B, H, L, D}, DType::f32, Device::cpu(), &g);
  Tensor v = Tensor::randn({B, H, L, D}, DType::f32, Device::cpu(), &g);
  Tensor dO = Tensor::randn({B, H, L, D}, DType::f32, Device::cpu(), &g);
  const RemSpec none;
  auto run = [&](bool bf16, const Tensor& q0, const Tensor& k0, const Tensor& v0,
                 const Tensor& dO0, std::vector<Tensor>* grads) {
    Tensor qa = q0.clone().requires_grad_(), ka = k0.clone().requires_grad_(),
           va = v0.clone().requires_grad_();
    AutocastGuard ag(bf16 ? Precision::bf16 : Precision::f32);
    Tensor O = rsa_attention(qa, ka, va, none, Tensor(), Tensor(), Tensor(), Tensor());
    O.backward(dO0);
    *grads = {qa.grad(), ka.grad(), va.grad()};
    return O;
  };
  std::vector<Tensor> g16, gr;
  Tensor O16 = run(true, q, k, v, dO, &g16);
  Tensor Or = run(false, round_bf16(q), round_bf16(k), round_bf16(v), round_bf16(dO), &gr);
  CHECK(O16.to_vector() == Or.to_vector());
  for (size_t i = 0; i < 3; ++i) {
    INFO("gradient " << i);
    CHECK(g16[i].to_vector() == gr[i].to_vector());
  }
}

TEST_CASE("bf16 autocast: the fused CPU attention reads bf16 positional operands as the f32 kernel reads them rounded",
          "[precision]") {
  // Transformer-XL's form: keys over memory and segment (Lk > Lq), the
  // positional term (pos_q, pos_r), a causal window, heads wider than a tile.
  // The kernel widens each head's keys, values and positional rows and each
  // block's queries, pos_q and dO as it reads them: bit for bit the f32
  // kernel's result on operands rounded beforehand.
  Generator g(11);
  const int64_t B = 2, H = 2, Lq = 70, Lk = 110, D = 16;
  auto rn = [&](Shape s) { return Tensor::randn(s, DType::f32, Device::cpu(), &g); };
  const Tensor q = rn({B, H, Lq, D}), k = rn({B, H, Lk, D}), v = rn({B, H, Lk, D}), pq = rn({B, H, Lq, D}),
               pr = rn({H, Lk, D}), dO = rn({B, H, Lq, D});
  auto run = [&](bool bf16, const std::vector<Tensor>& in, const Tensor& dO0, std::vector<Tensor>* grads) {
    std::vector<Tensor> t;
    for (const Tensor& x : in) t.push_back(x.clone().requires_grad_());
    AutocastGuard ag(bf16 ? Precision::bf16 : Precision::f32);
    RsaOptions opt;
    opt.pos_q = t[3];
    opt.pos_r = t[4];
    opt.causal = true;
    opt.window = 50;
    Tensor O = rsa_attention(RsaProblem{t[0], t[1], t[2], RemWeights{}, Tensor(), Tensor(), opt}).out;
    O.backward(dO0);
    grads->clear();
    for (const Tensor& x : t) grads->push_back(x.grad());
    return O;
  };
  std::vector<Tensor> g16, gr;
  const Tensor O16 = run(true, {q, k, v, pq, pr}, dO, &g16);
  const Tensor Or = run(false, {round_bf16(q), round_bf16(k), round_bf16(v), round_bf16(pq), round_bf16(pr)},
                        round_bf16(dO), &gr);
  CHECK(O16.to_vector() == Or.to_vector());
  for (size_t i = 0; i < g16.size(); ++i) {
    INFO("gradient " << i);
    CHECK(g16[i].to_vector() == gr[i].to_vector());
  }
}
