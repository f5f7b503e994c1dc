// SPDX-License-Identifier: BSD-3-Clause
// The 16-bit storage dtypes bf16 and f16 (core/half.h, docs/precision.md):
// conversions against references written from the definition and against
// PyTorch's (tests/data/golden_half.safetensors, tools/goldens/
// make_half_goldens.py), tensors of them (creation, item, printing, shape
// ops), every elementwise op and row kernel bit for bit against the f32 kernel
// rounded once, reductions, safetensors I/O, and the CPU products with 16-bit
// operands on every path this machine runs (against the scalar reference).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <remora/remora.h>

#include "../backends/backend.h"
#include "../backends/cpu/cpu_bgemm.h"
#include "../core/device_registry.h"
#include "../core/half.h"
#include "helpers.h"

using namespace remora;

namespace {

using remora_test::from_bits;
using remora_test::to_bits;

// Nearest value of a binary format with `p` significand bits (implicit bit
// included), minimum normal exponent emin and largest finite `maxf`, ties to
// even, in f64 arithmetic from the definition: the spacing at x's exponent,
// x / spacing rounded to an integer (exact for these magnitudes), inf at or
// past maxf + half a spacing.
double ref_round(double x, int p, int emin, double maxf) {
  if (std::isnan(x) || std::isinf(x) || x == 0) return x;
  const double ax = std::fabs(x);
  const int e = std::max(std::ilogb(ax), emin);
  const double ulp = std::ldexp(1.0, e - (p - 1));
  const double q = ax / ulp;  // exact: ax has <= 53 bits
  double r = std::floor(q);
  const double frac = q - r;
  if (frac > 0.5 || (frac == 0.5 && std::fmod(r, 2.0) != 0)) r += 1;
  double v = r * ulp;
  const double top_ulp = std::ldexp(1.0, std::ilogb(maxf) - (p - 1));
  if (v > maxf || ax >= maxf + top_ulp / 2) v = std::numeric_limits<double>::infinity();
  return std::copysign(v, x);
}
double ref_bf16(double x) { return ref_round(x, 8, -126, 0x1.fep127); }
double ref_f16(double x) { return ref_round(x, 11, -14, 65504.0); }

bool same_value(double got, double want) {
  if (std::isnan(want)) return std::isnan(got);
  return got == want && std::signbit(got) == std::signbit(want);
}

std::vector<float> probe_floats() {
  std::vector<float> v = {0.f, -0.f, 1.f, -1.f, std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::denorm_min(),
                          std::numeric_limits<float>::max(), std::numeric_limits<float>::min(), 65504.f,
                          65519.f, 65520.f, 65536.f, 0x1p-14f, 0x1p-24f, 0x1p-25f, 0x1.8p-25f, 0x1p-133f,
                          0x1p-134f, 0x1.8p-133f, 0x1.fep127f, 0x1.fefffep127f, 0x1.ff0000p127f};
  std::mt19937 rng(7);
  for (int i = 0; i < 200000; ++i) v.push_back(from_bits(uint32_t(rng())));
  // Exact ties of both formats (the dropped bits are 100...0) and their neighbours.
  for (int i = 0; i < 20000; ++i) {
    const uint32_t u = uint32_t(rng());
    v.push_back(from_bits((u & 0xffff0000u) | 0x8000u));
    v.push_back(from_bits((u & 0xffffe000u) | 0x1000u));
    v.push_back(from_bits(((u & 0xffffe000u) | 0x1000u) + 1));
    v.push_back(from_bits(((u & 0xffffe000u) | 0x1000u) - 1));
  }
  // f16's range, densely.
  for (int i = 0; i < 50000; ++i) v.push_back(from_bits((uint32_t(rng()) & 0x8fffffffu) | 0x30000000u));
  return v;
}

Tensor vec_f32(const std::vector<double>& v, const Shape& s) { return Tensor::from_vector(v, s, DType::f32); }

// Random f32 values already on the bf16 / f16 grid of dt (so that an f32 op on
// them sees the same inputs as the 16-bit op).
Tensor grid_values(const Shape& s, DType dt, uint64_t seed, double scale = 1.0) {
  Generator g(seed);
  return affine(Tensor::randn(s, DType::f32, Device::cpu(), &g), scale, 0).to(dt);
}

bool bits_equal(const Tensor& a, const Tensor& b) {
  REQUIRE(a.dtype() == b.dtype());
  REQUIRE(a.shape() == b.shape());
  const Tensor x = a.contiguous(), y = b.contiguous();
  return std::memcmp(x.raw_data(), y.raw_data(), size_t(x.numel()) * dtype_size(x.dtype())) == 0;
}

}  // namespace

TEST_CASE("half: dtype table", "[half]") {
  CHECK(dtype_size(DType::bf16) == 2);
  CHECK(dtype_size(DType::f16) == 2);
  CHECK(is_floating(DType::bf16));
  CHECK(is_floating(DType::f16));
  CHECK(is_half(DType::bf16));
  CHECK_FALSE(is_half(DType::f32));
  CHECK(std::string(dtype_name(DType::bf16)) == "bf16");
  CHECK(std::string(dtype_name(DType::f16)) == "f16");
  CHECK(std::string(dtype_name(DType::f32)) == "f32");
}

TEST_CASE("half: f32 -> bf16 / f16 against the references, and back exactly", "[half]") {
  const std::vector<float> v = probe_floats();
  int bad_b = 0, bad_h = 0;
  for (float x : v) {
    const double gb = f32_from_bf16_bits(bf16_bits_from_f32(x));
    if (!same_value(gb, ref_bf16(x)) && ++bad_b <= 5)
      FAIL_CHECK("bf16(" << std::hexfloat << x << ") = " << gb << ", expected " << ref_bf16(x));
    const double gh = f32_from_f16_bits(f16_bits_from_f32(x));
    if (!same_value(gh, ref_f16(x)) && ++bad_h <= 5)
      FAIL_CHECK("f16(" << std::hexfloat << x << ") = " << gh << ", expected " << ref_f16(x));
  }
  CHECK(bad_b == 0);
  CHECK(bad_h == 0);
  // NaN stays NaN and quiet, its sign kept.
  for (uint32_t nan : {0x7fc00000u, 0x7f800001u, 0xffa00000u, 0x7fffffffu}) {
    const uint16_t b = bf16_bits_from_f32(from_bits(nan)), h = f16_bits_from_f32(from_bits(nan));
    CHECK(std::isnan(f32_from_bf16_bits(b)));
    CHECK((b & 0x0040u) != 0);
    CHECK((b >> 15) == (nan >> 31));
    CHECK(std::isnan(f32_from_f16_bits(h)));
    CHECK((h & 0x0200u) != 0);
    CHECK((h >> 15) == (nan >> 31));
  }
  // Every 16-bit pattern converts to f32 exactly and back to itself.
  for (uint32_t b = 0; b < 65536; ++b) {
    const float fb = f32_from_bf16_bits(uint16_t(b));
    CHECK(to_bits(fb) == b << 16);
    if (!std::isnan(fb)) REQUIRE(bf16_bits_from_f32(fb) == b);
    const float fh = f32_from_f16_bits(uint16_t(b));
    const uint32_t e = (b >> 10) & 0x1f, m = b & 0x3ff;
    const double want = e == 31 ? (m ? std::nan("") : std::numeric_limits<double>::infinity())
                        : e == 0 ? std::ldexp(double(m), -24)
                                 : std::ldexp(double(m | 0x400), int(e) - 25);
    REQUIRE(same_value(fh, (b & 0x8000) ? -want : want));
    if (!std::isnan(fh)) REQUIRE(f16_bits_from_f32(fh) == b);
  }
}

TEST_CASE("half: f64 rounds once, not through f32", "[half]") {
  // 1 + 2^-8 + 2^-30 is above bf16's tie 1 + 2^-8: through f32 it would
  // become the tie and go to even (1.0); rounded once it is 1 + 2^-7.
  const double x = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -30);
  CHECK(f32_from_bf16_bits(bf16_bits_from_f64(x)) == 1.0f + 0x1p-7f);
  CHECK(f32_from_bf16_bits(bf16_bits_from_f32(float(x))) == 1.0f);
  const double y = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  CHECK(f32_from_f16_bits(f16_bits_from_f64(y)) == 1.0f + 0x1p-10f);
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> u(-30, 30);
  for (int i = 0; i < 100000; ++i) {
    const double d = std::ldexp(1.0 + (rng() >> 11) * 0x1p-53, int(u(rng))) * ((rng() & 1) ? -1 : 1);
    REQUIRE(same_value(f32_from_bf16_bits(bf16_bits_from_f64(d)), ref_bf16(d)));
    REQUIRE(same_value(f32_from_f16_bits(f16_bits_from_f64(d)), ref_f16(d)));
  }
  CHECK(std::isinf(f32_from_bf16_bits(bf16_bits_from_f64(1e300))));
  CHECK(f32_from_bf16_bits(bf16_bits_from_f64(1e-300)) == 0.0f);
  // Tensor::to from f64 uses the single rounding too.
  Tensor t = Tensor::from_vector(std::vector<double>{x, -x, y}, {3}, DType::f64);
  CHECK(t.to(DType::bf16).to_vector()[0] == 1.0 + std::ldexp(1.0, -7));
  CHECK(t.to(DType::f16).to_vector()[2] == 1.0 + std::ldexp(1.0, -10));
}

TEST_CASE("half: conversions equal PyTorch's (golden)", "[half]") {
  const Safetensors st = load_safetensors(std::string(REMORA_TEST_DATA) + "/golden_half.safetensors",
                                          SafetensorsLoad{true});
  const Tensor src = st.get("src_f32");
  for (const char* name : {"to_bf16", "to_f16"}) {
    const Tensor want = st.get(name);
    const DType dt = std::string(name) == "to_bf16" ? DType::bf16 : DType::f16;
    REQUIRE(want.dtype() == dt);
    const Tensor got = src.to(dt);
    const std::vector<double> g = got.to_vector(), w = want.to_vector();
    for (size_t i = 0; i < g.size(); ++i)
      if (!same_value(g[i], w[i])) FAIL_CHECK(name << "[" << i << "]: " << g[i] << ", torch " << w[i]);
  }
  // A bf16 weight as PyTorch saved it: kept in bf16, or widened to f32.
  const Tensor w = st.get("w_bf16");
  CHECK(w.dtype() == DType::bf16);
  CHECK(w.shape() == Shape{3, 5});
  CHECK(w.to_vector() == st.get("w_bf16_f32").to_vector());
  const Safetensors widened = load_safetensors(std::string(REMORA_TEST_DATA) + "/golden_half.safetensors");
  CHECK(widened.get("w_bf16").dtype() == DType::f32);
  CHECK(widened.get("w_bf16").to_vector() == st.get("w_bf16_f32").to_vector());
  CHECK(st.get("w_f16").dtype() == DType::f16);
  CHECK(st.get("w_f16").to_vector() == st.get("w_f16_f32").to_vector());
  CHECK(st.stored_dtypes.at("w_bf16") == "BF16");
}

TEST_CASE("half: safetensors round trip keeps the bits", "[half]") {
  Tensor b = grid_values({4, 3}, DType::bf16, 1);
  Tensor h = grid_values({5}, DType::f16, 2);
  const std::string bytes = serialize_safetensors({{"b", b}, {"h", h}, {"bt", b.t()}});
  const Safetensors st = parse_safetensors(bytes, "buffer", SafetensorsLoad{true});
  CHECK(st.stored_dtypes.at("b") == "BF16");
  CHECK(st.stored_dtypes.at("h") == "F16");
  CHECK(bits_equal(st.get("b"), b));
  CHECK(bits_equal(st.get("h"), h));
  CHECK(bits_equal(st.get("bt"), b.t().contiguous()));
  const Safetensors wide = parse_safetensors(bytes);
  CHECK(wide.get("b").dtype() == DType::f32);
  CHECK(wide.get("b").to_vector() == b.to_vector());
}

TEST_CASE("half: creation, item, to_vector, printing", "[half]") {
  for (DType dt : {DType::bf16, DType::f16}) {
    CAPTURE(dtype_name(dt));
    CHECK(Tensor::zeros({2, 3}, dt).to_vector() == std::vector<double>(6, 0.0));
    CHECK(Tensor::ones({2}, dt).dtype() == dt);
    CHECK(Tensor::full({1}, 0.1, dt).item() == (dt == DType::bf16 ? double(f32_from_bf16_bits(bf16_bits_from_f64(0.1)))
                                                                  : double(f32_from_f16_bits(f16_bits_from_f64(0.1)))));
    CHECK(Tensor::scalar(3.0, dt).item<float>() == 3.0f);
    Tensor r = Tensor::randn({1000}, dt);
    CHECK(r.dtype() == dt);
    double s2 = 0;
    for (double x : r.to_vector()) s2 += x * x;
    CHECK(s2 / 1000 == Approx(1.0).epsilon(0.15));
    Tensor u = Tensor::rand({1000}, dt);
    for (double x : u.to_vector()) REQUIRE((x >= 0 && x < 1));
    Tensor a = Tensor::arange(0, 5, 1, dt);
    CHECK(a.to_vector() == std::vector<double>{0, 1, 2, 3, 4});
    Tensor v = Tensor::from_vector(std::vector<double>{1.5, -2.25}, {2}, dt);
    CHECK(v.at({1}) == -2.25);
    std::ostringstream os;
    os << v;
    // As libtorch prints it, then Remora's dtype name.
    CHECK(os.str() == std::string("  1.5000\n -2.2500\n[ CPU") + (dt == DType::bf16 ? "BFloat16" : "Half") +
                          "Type{2} ] (" + dtype_name(dt) + ")");
    CHECK(Tensor::from_vector(std::vector<int64_t>{3, -4}, {2}, dt).to(DType::i64).to_i64_vector() ==
          std::vector<int64_t>{3, -4});
    CHECK(v.str() == std::string(dtype_name(dt)) + "[2] cpu");
  }
  // Conversions between the 16-bit types go through their exact f32 value.
  Tensor x = grid_values({100}, DType::f16, 5);
  CHECK(bits_equal(x.to(DType::bf16), x.to(DType::f32).to(DType::bf16)));
}

TEST_CASE("half: elementwise ops equal the f32 op rounded once", "[half]") {
  using F1 = std::function<Tensor(const Tensor&)>;
  using F2 = std::function<Tensor(const Tensor&, const Tensor&)>;
  const std::vector<std::pair<const char*, F1>> unary = {
      {"neg", [](const Tensor& x) { return neg(x); }},
      {"exp", [](const Tensor& x) { return exp(x); }},
      {"log", [](const Tensor& x) { return log(abs(x)); }},
      {"sqrt", [](const Tensor& x) { return sqrt(abs(x)); }},
      {"tanh", [](const Tensor& x) { return tanh(x); }},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }},
      {"relu", [](const Tensor& x) { return relu(x); }},
      {"gelu", [](const Tensor& x) { return gelu(x); }},
      {"abs", [](const Tensor& x) { return abs(x); }},
      {"sin", [](const Tensor& x) { return sin(x); }},
      {"cos", [](const Tensor& x) { return cos(x); }},
      {"affine", [](const Tensor& x) { return affine(x, 0.1, 0.3); }},
      {"pow", [](const Tensor& x) { return pow(abs(x), 1.5); }},
      {"square", [](const Tensor& x) { return pow(x, 2.0); }},
      {"round_bf16", [](const Tensor& x) { return round_bf16(x); }},
  };
  const std::vector<std::pair<const char*, F2>> binary = {
      {"add", [](const Tensor& a, const Tensor& b) { return add(a, b); }},
      {"sub", [](const Tensor& a, const Tensor& b) { return sub(a, b); }},
      {"mul", [](const Tensor& a, const Tensor& b) { return mul(a, b); }},
      {"div", [](const Tensor& a, const Tensor& b) { return div(a, b); }},
      {"maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); }},
      {"minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); }},
      {"gt", [](const Tensor& a, const Tensor& b) { return gt(a, b); }},
      {"eq", [](const Tensor& a, const Tensor& b) { return eq(a, b); }},
      {"where", [](const Tensor& a, const Tensor& b) { return where(gt(a, b), a, b); }},
  };
  for (DType dt : {DType::bf16, DType::f16}) {
    CAPTURE(dtype_name(dt));
    const Tensor x = grid_values({7, 130}, dt, 11, 2.0), y = grid_values({130}, dt, 12, 2.0);
    const Tensor xf = x.to(DType::f32), yf = y.to(DType::f32);
    for (const auto& u : unary) {
      CAPTURE(u.first);
      const Tensor got = u.second(x);
      REQUIRE(got.dtype() == dt);
      CHECK(bits_equal(got, u.second(xf).to(dt)));
      // A strided input (the transposed view goes through a copy).
      CHECK(bits_equal(u.second(x.t()), u.second(xf.t()).to(dt)));
    }
    for (const auto& b : binary) {
      CAPTURE(b.first);
      CHECK(bits_equal(b.second(x, y), b.second(xf, yf).to(dt)));  // broadcast
      CHECK(bits_equal(b.second(x.t(), x.t()), b.second(xf.t(), xf.t()).to(dt)));
    }
  }
}

TEST_CASE("half: reductions accumulate in f32 or wider", "[half]") {
  for (DType dt : {DType::bf16, DType::f16}) {
    CAPTURE(dtype_name(dt));
    // 60,000 ones: a 16-bit accumulator would stall at 256 (bf16) / 2048
    // (f16); a wide one gives 60,000, rounded once to the output's dtype.
    Tensor x = Tensor::full({60000}, 1.0, dt);
    CHECK(sum(x).item() == Tensor::full({}, 60000.0, dt).item());
    CHECK(sum(x).item() != 256.0);
    const Tensor v = grid_values({33, 517}, dt, 21);
    const Tensor vf = v.to(DType::f64);
    const double u = dt == DType::bf16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
    for (int64_t d : {int64_t(0), int64_t(1)}) {
      const std::vector<double> got = sum(v, {d}).to_vector(), want = sum(vf, {d}).to_vector();
      for (size_t i = 0; i < got.size(); ++i) REQUIRE(std::fabs(got[i] - want[i]) <= u * std::fabs(want[i]) + 1e-30);
      CHECK(bits_equal(max(v, d), max(vf, d).to(dt)));
    }
    CHECK(mean(v).item() == Approx(mean(vf).item()).epsilon(u));
  }
}

TEST_CASE("half: row kernels compute in f32 and round once", "[half]") {
  for (DType dt : {DType::bf16, DType::f16}) {
    CAPTURE(dtype_name(dt));
    const Tensor x = grid_values({9, 70}, dt, 31, 3.0);
    const Tensor xf = x.to(DType::f32);
    CHECK(bits_equal(softmax(x, -1), softmax(xf, -1).to(dt)));
    CHECK(bits_equal(log_softmax(x, -1), log_softmax(xf, -1).to(dt)));
    const Tensor w = grid_values({70}, dt, 32), b = grid_values({70}, dt, 33);
    CHECK(bits_equal(layer_norm(x, w, b, 1e-5), layer_norm(xf, w.to(DType::f32), b.to(DType::f32), 1e-5).to(dt)));
    const Tensor tgt = Tensor::from_vector(std::vector<int64_t>{0, 5, 69, 3, -100, 2, 1, 7, 8}, {9}, DType::i64);
    const Tensor ce = cross_entropy(x, tgt, -100);
    CHECK(ce.dtype() == dt);
    CHECK(ce.item() == Approx(cross_entropy(xf, tgt, -100).item()).epsilon(dt == DType::bf16 ? 4e-3 : 5e-4));
    // Backward through them in the 16-bit type, against f32 (inputs equal; the
    // gradient differs by the roundings of intermediate results).
    Tensor xr = x.detach().requires_grad_(), xfr = xf.detach().requires_grad_();
    sum(mul(softmax(layer_norm(xr, w, b, 1e-5), -1), x)).backward();
    sum(mul(softmax(layer_norm(xfr, w.to(DType::f32), b.to(DType::f32), 1e-5), -1), xf)).backward();
    REQUIRE(xr.grad().dtype() == dt);
    const std::vector<double> g = xr.grad().to_vector(), gf = xfr.grad().to_vector();
    double scale = 0;
    for (double v : gf) scale = std::max(scale, std::fabs(v));
    for (size_t i = 0; i < g.size(); ++i) REQUIRE(std::fabs(g[i] - gf[i]) <= 0.05 * scale);
  }
}

TEST_CASE("half: shape ops move the bits", "[half]") {
  const Tensor x = grid_values({4, 6}, DType::bf16, 41);
  const Tensor xf = x.to(DType::f32);
  CHECK(bits_equal(x.t().contiguous(), xf.t().contiguous().to(DType::bf16)));
  CHECK(bits_equal(cat({x, x.slice(0, 1, 3)}, 0), cat({xf, xf.slice(0, 1, 3)}, 0).to(DType::bf16)));
  CHECK(bits_equal(x.reshape({6, 4}).permute({1, 0}).contiguous(), xf.reshape({6, 4}).permute({1, 0}).contiguous().to(DType::bf16)));
  const Tensor idx = Tensor::from_vector(std::vector<int64_t>{3, 0, 3}, {3}, DType::i64);
  CHECK(bits_equal(index_select(x, 0, idx), index_select(xf, 0, idx).to(DType::bf16)));
  CHECK(bits_equal(x.expand({2, 4, 6}).contiguous(), xf.expand({2, 4, 6}).contiguous().to(DType::bf16)));
  // Gradients flow through views and dtype conversions in bf16.
  Tensor leaf = xf.detach().requires_grad_();
  sum(mul(leaf.to(DType::bf16).t(), leaf.to(DType::bf16).t())).backward();
  CHECK(leaf.grad().dtype() == DType::f32);
  CHECK(leaf.grad().to_vector() == affine(x, 2.0, 0).to(DType::f32).to_vector());
}

TEST_CASE("half: matmul in bf16 / f16 on the CPU", "[half]") {
  for (DType dt : {DType::bf16, DType::f16}) {
    CAPTURE(dtype_name(dt));
    const Tensor a = grid_values({3, 37, 29}, dt, 51), b = grid_values({29, 45}, dt, 52);
    const Tensor c = matmul(a, b);
    REQUIRE(c.dtype() == dt);
    // Exact products accumulated in f32, one rounding at the end: against f64,
    // one 16-bit rounding plus f32 accumulation (29 terms).
    const Tensor ref = matmul(a.to(DType::f64), b.to(DType::f64));
    const std::vector<double> got = c.to_vector(), want = ref.to_vector();
    const double u = dt == DType::bf16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
    for (size_t i = 0; i < got.size(); ++i)
      REQUIRE(std::fabs(got[i] - want[i]) <= u * std::fabs(want[i]) + 1e-5 * 6.0);
    // Backward in dt.
    Tensor ar = a.detach().requires_grad_(), br = b.detach().requires_grad_();
    sum(matmul(ar, br)).backward();
    CHECK(ar.grad().dtype() == dt);
    CHECK(br.grad().dtype() == dt);
    const Tensor gb = matmul(a.to(DType::f64).transpose(-2, -1), Tensor::ones({3, 37, 45}, DType::f64)).sum({0});
    const std::vector<double> g = br.grad().to_vector(), gw = gb.to_vector();
    for (size_t i = 0; i < g.size(); ++i) REQUIRE(std::fabs(g[i] - gw[i]) <= 4 * u * std::fabs(gw[i]) + 1e-3);
  }
}

TEST_CASE("half: every product path this CPU runs equals the scalar reference", "[half][cpu_kernels]") {
  using namespace remora::cpu_impl;
  INFO("bf16 gemm path of this process: " << bgemm_path_name(bgemm_path()));
  CHECK(bgemm_path_available(BgemmPath::scalar));
  CHECK(bgemm_path_available(BgemmPath::convert));
  // avx512bf16_emulated: the avx512bf16 path's packing and tile traversal with
  // the instruction in scalar code, so its indexing is checked here too.
  std::vector<BgemmPath> paths = {BgemmPath::convert, BgemmPath::avx512bf16_emulated};
  for (BgemmPath p : {BgemmPath::avx512bf16, BgemmPath::openblas})
    if (bgemm_path_available(p)) paths.push_back(p);
    else WARN("bf16 gemm path " << bgemm_path_name(p) << " does not run on this machine: not tested here");
  std::mt19937 rng(9);
  std::normal_distribution<float> nd;
  struct Shape3 { int64_t m, n, k; };
  for (DType dt : {DType::bf16, DType::f16})
    for (Shape3 s : {Shape3{1, 1, 1}, Shape3{6, 32, 2}, Shape3{7, 33, 3}, Shape3{13, 17, 64}, Shape3{64, 96, 130},
                     Shape3{5, 200, 1}, Shape3{100, 3, 257}})
      for (int t = 0; t < 4; ++t)
        for (float beta : {0.f, 0.5f}) {
          const bool ta = t & 1, tb = t & 2;
          CAPTURE(dtype_name(dt), s.m, s.n, s.k, ta, tb, beta);
          const int64_t lda = (ta ? s.m : s.k) + 3, ldb = (tb ? s.k : s.n) + 1, ldc = s.n + 2;
          std::vector<uint16_t> A(size_t((ta ? s.k : s.m) * lda)), B(size_t((tb ? s.n : s.k) * ldb));
          auto conv = [dt](float f) { return dt == DType::bf16 ? bf16_bits_from_f32(f) : f16_bits_from_f32(f); };
          for (auto& v : A) v = conv(nd(rng));
          for (auto& v : B) v = conv(nd(rng));
          std::vector<float> C0(size_t(s.m * ldc));
          for (auto& v : C0) v = nd(rng);
          std::vector<float> ref = C0;
          half_gemm_f32_on(BgemmPath::scalar, dt, ta, tb, s.m, s.n, s.k, 1.25f, A.data(), lda, B.data(), ldb, beta,
                           ref.data(), ldc);
          // The scalar reference itself against f64.
          for (int64_t i = 0; i < s.m; ++i)
            for (int64_t j = 0; j < s.n; ++j) {
              double acc = 0, mag = 0;
              for (int64_t p = 0; p < s.k; ++p) {
                const uint16_t x = ta ? A[size_t(p * lda + i)] : A[size_t(i * lda + p)];
                const uint16_t y = tb ? B[size_t(j * ldb + p)] : B[size_t(p * ldb + j)];
                const double xv = dt == DType::bf16 ? f32_from_bf16_bits(x) : f32_from_f16_bits(x);
                const double yv = dt == DType::bf16 ? f32_from_bf16_bits(y) : f32_from_f16_bits(y);
                acc += xv * yv;
                mag += std::fabs(xv * yv);
              }
              const double want = 1.25 * acc + (beta != 0 ? double(beta) * C0[size_t(i * ldc + j)] : 0.0);
              REQUIRE(std::fabs(ref[size_t(i * ldc + j)] - want) <= 1e-6 * (1.25 * mag + 1) * double(s.k + 1));
            }
          for (BgemmPath p : paths) {
            if (dt == DType::f16 && p != BgemmPath::convert) continue;
            CAPTURE(bgemm_path_name(p));
            std::vector<float> got = C0;
            half_gemm_f32_on(p, dt, ta, tb, s.m, s.n, s.k, 1.25f, A.data(), lda, B.data(), ldb, beta, got.data(),
                             ldc);
            for (int64_t i = 0; i < s.m; ++i) {
              for (int64_t j = 0; j < s.n; ++j)
                REQUIRE(std::fabs(got[size_t(i * ldc + j)] - ref[size_t(i * ldc + j)]) <=
                        2e-6 * double(s.k + 1) * (std::fabs(ref[size_t(i * ldc + j)]) + 8));
              for (int64_t j = s.n; j < ldc; ++j)  // padding of C untouched
                REQUIRE(got[size_t(i * ldc + j)] == C0[size_t(i * ldc + j)]);
            }
          }
        }
}

TEST_CASE("half: REMORA_BF16_GEMM names a path; a bad value is refused", "[half_path]") {
  // Run by ctest under REMORA_BF16_GEMM=scalar and =sse (tests/CMakeLists.txt).
  const char* e = std::getenv("REMORA_BF16_GEMM");
  if (!e || !*e || std::string(e) == "auto") {
    CHECK(cpu_impl::bgemm_path_available(cpu_impl::bgemm_path()));
    return;
  }
  bool refused = false;
  try {
    (void)cpu_impl::bgemm_path();
  } catch (const Error& err) {
    refused = true;
    std::printf("REMORA_BF16_GEMM='%s' was refused: %s\n", e, err.what());
  }
  using cpu_impl::BgemmPath;
  const std::string name = e;
  const std::vector<BgemmPath> all = {BgemmPath::scalar, BgemmPath::convert, BgemmPath::avx512bf16,
                                      BgemmPath::openblas, BgemmPath::avx512bf16_emulated};
  for (BgemmPath p : all) {
    if (name != cpu_impl::bgemm_path_name(p)) continue;
    // A known path is taken exactly where this machine runs it.
    CHECK(refused == !cpu_impl::bgemm_path_available(p));
    if (refused) return;
    CHECK(cpu_impl::bgemm_path() == p);
    // The whole product runs on it.
    const Tensor a = grid_values({8, 40}, DType::bf16, 61), b = grid_values({40, 9}, DType::bf16, 62);
    const std::vector<double> got = matmul(a, b).to_vector(),
                              want = matmul(a.to(DType::f64), b.to(DType::f64)).to_vector();
    for (size_t i = 0; i < got.size(); ++i) CHECK(std::fabs(got[i] - want[i]) <= 0.01 * std::fabs(want[i]) + 0.05);
    return;
  }
  CHECK(refused);  // not a path name
}

namespace {
size_t live_bytes() {
  const MemoryStats s = backend(Device::cpu()).memory_stats();
  return s.in_use + s.small_in_use;
}
}  // namespace

TEST_CASE("autocast: products keep bf16 operands for backward; relu_dropout keeps only its bits",
          "[half][precision]") {
  const int64_t N = 512, K = 1024, M = 768;
  Generator g(1);
  const Tensor w = Tensor::randn({M, K}, DType::f32, Device::cpu(), &g).requires_grad_();
  const Tensor w2 = Tensor::randn({M, K}, DType::f32, Device::cpu(), &g).requires_grad_();
  const double xbytes = double(N * K) * 4;
  // Live bytes held after the forward, with the input dropped by the caller.
  auto kept = [&](Precision p, bool ffn) {
    AutocastGuard guard(p);
    const size_t before = live_bytes();
    Tensor out;
    {
      Tensor x = Tensor::randn({N, K}, DType::f32, Device::cpu(), &g);
      if (ffn) {
        Tensor h = x.detach().requires_grad_();
        Tensor y = relu_dropout(h, 0.1, true, &g);  // [N, K]
        out = linear(y, w2.detach().requires_grad_());
      } else {
        out = linear(x, w);
      }
    }
    const size_t after = live_bytes();
    out.sum().backward();  // still runs
    return double(after) - double(before) - double(out.numel()) * 4;
  };
  // linear: f32 keeps x (f32), bf16 keeps x16.
  const double f32_lin = kept(Precision::f32, false), bf16_lin = kept(Precision::bf16, false);
  CHECK(f32_lin == Approx(xbytes).epsilon(0.05));
  CHECK(bf16_lin == Approx(xbytes / 2).epsilon(0.05));
  // relu_dropout -> linear with the leaf h requiring grad (its accumulator
  // keeps h: xbytes either way): relu_dropout keeps its mask bits alone (kept
  // and positive: its whole gradient), the product its operand, y in f32 or
  // y16 in bf16 (were relu_dropout to keep y too, f32 would be unchanged and
  // bf16 would add xbytes). The weight w2 is a parameter: its dA rounds it
  // again in backward, so no bf16 copy of it is kept (that would add M K 2 bytes).
  const double f32_ffn = kept(Precision::f32, true), bf16_ffn = kept(Precision::bf16, true);
  CHECK(f32_ffn == Approx(2 * xbytes).epsilon(0.05));
  CHECK(bf16_ffn == Approx(f32_ffn - xbytes / 2).epsilon(0.05));
}

TEST_CASE("autocast: a computed weight is kept as its bf16 copy, a parameter as itself", "[half][precision]") {
  const int64_t N = 256, K = 512, M = 384;
  Generator g(2);
  const Tensor w = Tensor::randn({M, K}, DType::f32, Device::cpu(), &g).requires_grad_();
  const Tensor x = Tensor::randn({N, K}, DType::f32, Device::cpu(), &g).requires_grad_();
  AutocastGuard guard(Precision::bf16);
  // x and w are leaves that require grad (alive anyway): kept as themselves,
  // the product adds its output alone.
  const size_t before = live_bytes();
  Tensor out = linear(x, w);
  CHECK(double(live_bytes() - before) == Approx(double(N * M) * 4).epsilon(0.02));
  // A weight computed in the graph (not a leaf) is kept as its bf16 copy, not in f32.
  const size_t before2 = live_bytes();
  Tensor w2 = affine(w, 0.5, 0.0);
  const size_t w2_bytes = live_bytes() - before2;
  Tensor out2 = linear(x, w2);
  CHECK(double(live_bytes() - before2 - w2_bytes) == Approx(double(N * M) * 4 + double(M * K) * 2).epsilon(0.02));
  // Either way the gradients are those of the rounded operands: the same as
  // through a parameter holding w2's values.
  Tensor w2p = w2.detach().requires_grad_();
  Tensor x2 = x.detach().requires_grad_();
  Tensor o3 = linear(x2, w2p);
  Tensor gy = Tensor::randn({N, M}, DType::f32, Device::cpu(), &g);
  (out2 * gy).sum().backward();
  (o3 * gy).sum().backward();
  CHECK(x.grad().equal(x2.grad()));
  CHECK(w.grad().equal(affine(w2p.grad(), 0.5, 0.0)));  // d(out2)/dw = 0.5 dW2, exactly
  (void)out;
}
