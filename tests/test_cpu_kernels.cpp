// SPDX-License-Identifier: BSD-3-Clause
// The CPU backend's fast paths against their naive references:
// - vec::exp_f32 and vec::erf_f32 (vectorisable exp and erf) against std::exp / std::erf in
//   double, over the float range;
// - vec::sum_f64 (8 partial sums) and vec::sum_lanes / sum2_lanes (four streams)
//   against the plain serial loop; exp_f32_nonpos against exp_f32; the
//   softmax rows' vector exp (simd_f32.h) against std::exp;
// - the f32 softmax / log_softmax / layer_norm kernels, forward and backward
//   (the explicit-SIMD AVX-512 and AVX2 copies where the CPU has them, the
//   baseline templates otherwise), against the same ops in f64, which run the
//   baseline templates with std::exp.
// - the fused f32 RSA attention kernel (backends/cpu/cpu_attention.cpp: its
//   register-tiled products with per-tile causal limits on AVX2, OpenBLAS on
//   whole blocks otherwise) against the composed reference in f64.
// ctest runs this file again with REMORA_CPU_ISA=avx2, =baseline and
// =avx512_emulated, so every copy of the f32 kernels is checked on every CPU:
// natively where the CPU runs it, the explicit-SIMD AVX-512 copies (rows,
// register tiles) with their 16 lanes in scalar code where it does not.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <cstdlib>
#include <string>
#include <functional>
#include <limits>
#include <remora/remora.h>
#include <random>
#include <vector>

#include "../backends/cpu/cpu_backend.h"
#include "../backends/cpu/cpu_sgemm.h"
#include "../backends/cpu/vec_math.h"
#include "../ops/rem.h"

using namespace remora;

namespace {

// Units in the last place of the float nearest to ref.
double ulp_error(float got, double ref) {
  const float rf = float(ref);
  const double ulp = double(std::nextafter(rf, std::numeric_limits<float>::infinity())) - double(rf);
  return std::fabs(double(got) - ref) / ulp;
}

// max |a - b| / (atol + rtol |b|) over all entries; <= 1 passes.
double worst(const Tensor& a, const Tensor& b, double atol, double rtol) {
  const std::vector<double> va = a.to_vector(), vb = b.to_vector();
  REQUIRE(va.size() == vb.size());
  double w = 0;
  for (size_t i = 0; i < va.size(); ++i) {
    if (std::isnan(vb[i])) {
      CHECK(std::isnan(va[i]));
      continue;
    }
    w = std::max(w, std::fabs(va[i] - vb[i]) / (atol + rtol * std::fabs(vb[i])));
  }
  return w;
}

}  // namespace

TEST_CASE("the CPU kernels run the widest ISA the CPU has, capped by REMORA_CPU_ISA", "[cpu_kernels][cpu_isa]") {
  using cpu_impl::Isa;
  Isa have = Isa::baseline;
#if defined(__GNUC__) && defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    have = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                   __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq")
               ? Isa::avx512
               : Isa::avx2;
#endif
  Isa cap = Isa::avx512;
  const char* b = std::getenv("REMORA_CPU_BASELINE");
  const std::string e = std::getenv("REMORA_CPU_ISA") ? std::getenv("REMORA_CPU_ISA") : "";
  if (b && std::string(b) != "" && std::string(b) != "0") cap = Isa::baseline;
  else if (e == "baseline") cap = Isa::baseline;
  else if (e == "avx2") cap = Isa::avx2;
  else if (e == "avx512_emulated") cap = Isa::avx512_emulated;
  else if (!e.empty() && e != "avx512") {  // ctest's cpu_isa_bad_value expects this to fail
    CHECK_THROWS_WITH(cpu_impl::cpu_isa(), Catch::Contains("REMORA_CPU_ISA") && Catch::Contains(e));
    FAIL("REMORA_CPU_ISA='" << e << "' was refused, as it should be");
  }
  WARN("CPU kernels: " << cpu_impl::isa_name(cpu_impl::cpu_isa()) << " (this CPU: "
                       << cpu_impl::isa_name(have) << ")");
  // avx512_emulated runs on any CPU with AVX2, AVX-512 or not.
  if (cap == Isa::avx512_emulated)
    CHECK(cpu_impl::cpu_isa() == (have >= Isa::avx2 ? Isa::avx512_emulated : have));
  else
    CHECK(cpu_impl::cpu_isa() == std::min(cap, have));
}

TEST_CASE("exp_f32 is within 2 ulp of std::exp over the float range", "[cpu_kernels]") {
  double max_ulp = 0;
  float worst_x = 0;
  // Every 1009th float bit pattern with a normal result, both signs.
  for (uint32_t sign : {0u, 0x80000000u})
    for (uint32_t b = 0; b < 0x42b20000u; b += 1009) {  // |x| < 89
      const float x = vec::bits_to_float(int32_t(b | sign));
      if (x < -87.0f || x > 88.7f) continue;
      const double e = ulp_error(vec::exp_f32(x), std::exp(double(x)));
      if (e > max_ulp) {
        max_ulp = e;
        worst_x = x;
      }
    }
  INFO("worst x = " << worst_x);
  CHECK(max_ulp <= 2.0);
  // Denormal results: within one denormal step.
  for (float x = -103.9f; x < -87.0f; x += 0.01f)
    CHECK(std::fabs(double(vec::exp_f32(x)) - std::exp(double(x))) <= 1.5e-45);
  // Edges.
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(vec::exp_f32(0.0f) == 1.0f);
  CHECK(vec::exp_f32(-inf) == 0.0f);
  CHECK(vec::exp_f32(-200.0f) == 0.0f);
  CHECK(vec::exp_f32(inf) == inf);
  CHECK(vec::exp_f32(100.0f) == inf);
  CHECK(std::isnan(vec::exp_f32(std::numeric_limits<float>::quiet_NaN())));
}

TEST_CASE("erf_f32 is within 2 ulp of std::erf over the float range", "[cpu_kernels]") {
  double max_ulp = 0;
  float worst_x = 0;
  auto check = [&](float x) {
    const double e = ulp_error(vec::erf_f32(x), std::erf(double(x)));
    if (e > max_ulp) {
      max_ulp = e;
      worst_x = x;
    }
  };
  // Every 101st float bit pattern up to |x| = 4 (where erf rounds to +-1), both
  // signs: denormals, the polynomial near 0, the switch at 0.84375, the tail.
  for (uint32_t sign : {0u, 0x80000000u}) {
    for (uint32_t b = 0; b <= 0x40800000u; b += 101) check(vec::bits_to_float(int32_t(b | sign)));
    // Every float around the two switches (0.84375 and 3.925).
    for (float c : {0.84375f, 3.925f}) {
      float x = c;
      for (int i = 0; i < 4096; ++i) x = std::nextafter(x, 0.0f);
      for (int i = 0; i < 8192; ++i, x = std::nextafter(x, 10.0f)) check(sign ? -x : x);
    }
  }
  INFO("worst x = " << worst_x);
  CHECK(max_ulp <= 2.0);
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(vec::erf_f32(0.0f) == 0.0f);
  CHECK(std::signbit(vec::erf_f32(-0.0f)));
  CHECK(vec::erf_f32(4.0f) == 1.0f);
  CHECK(vec::erf_f32(1e30f) == 1.0f);
  CHECK(vec::erf_f32(inf) == 1.0f);
  CHECK(vec::erf_f32(-inf) == -1.0f);
  CHECK(std::isnan(vec::erf_f32(std::numeric_limits<float>::quiet_NaN())));
}

// f32 GELU runs in 8 lanes on AVX2 and 4 on the baseline (cpu_elementwise.cpp): both
// against the f64 formula, on a range that crosses every erf segment, in parallel
// chunks with odd tails (the ctest REMORA_CPU_ISA runs take the baseline copy).
TEST_CASE("f32 gelu and its gradient follow the f64 formula on every ISA copy", "[cpu_kernels]") {
  const int64_t n = 3 * 32768 + 13;
  std::vector<double> xs(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) xs[size_t(i)] = -9.0 + 18.0 * double(i) / double(n - 1);
  Tensor x = Tensor::from_vector(xs, {n}, DType::f32).requires_grad_();
  Tensor y = gelu(x);
  y.sum().backward();
  const std::vector<double> got = y.to_vector(), grad = x.grad().to_vector(), xf = x.to_vector();
  double worst_y = 0, worst_g = 0;
  for (size_t i = 0; i < xf.size(); ++i) {
    const double v = xf[i], cdf = 0.5 * (1 + std::erf(v / std::sqrt(2.0)));
    const double pdf = std::exp(-0.5 * v * v) / std::sqrt(2 * M_PI);
    worst_y = std::max(worst_y, std::fabs(got[i] - v * cdf) / (1e-7 + 1e-6 * std::fabs(v * cdf)));
    worst_g = std::max(worst_g, std::fabs(grad[i] - (cdf + v * pdf)) / (1e-7 + 1e-6 * std::fabs(cdf + v * pdf)));
  }
  CHECK(worst_y <= 1);
  CHECK(worst_g <= 1);
}

TEST_CASE("exp_f32_nonpos gives exp_f32's results for every x <= 0", "[cpu_kernels]") {
  // Every 257th float bit pattern in [-inf, 0] (normal, denormal and zero results).
  int64_t checked = 0;
  for (uint32_t b = 0x80000000u; b <= 0xff800000u; b += 257) {
    const float x = vec::bits_to_float(int32_t(b));
    const float want = vec::exp_f32(x), got = vec::exp_f32_nonpos(x);
    if (want != got) {
      INFO("x = " << x);
      CHECK(got == want);
    }
    ++checked;
  }
  CHECK(checked > 8000000);
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(vec::exp_f32_nonpos(-inf) == 0.0f);
  CHECK(vec::exp_f32_nonpos(0.0f) == 1.0f);
  CHECK(vec::exp_f32_nonpos(-0.0f) == 1.0f);
  CHECK(std::isnan(vec::exp_f32_nonpos(std::numeric_limits<float>::quiet_NaN())));
  // Small positive x (a log-probability rounded above 0) is still right.
  for (float x : {1e-7f, 0.5f, 10.0f, 44.0f}) CHECK(vec::exp_f32_nonpos(x) == vec::exp_f32(x));
}

TEST_CASE("the softmax rows' vector exp is within 2 ulp of std::exp for every x <= 0", "[cpu_kernels]") {
  // cpu_impl::exp_nonpos_f32 runs the explicit-SIMD exp of the f32 softmax
  // rows at this process's ISA (ctest runs the file under each cap); the
  // scalar vec::exp_f32_nonpos takes the ragged ends. Every 257th float bit
  // pattern in [-inf, 0], in one call, so nearly all go through full vectors.
  std::vector<float> x;
  for (uint32_t b = 0x80000000u; b <= 0xff800000u; b += 257) x.push_back(vec::bits_to_float(int32_t(b)));
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (float v : {nan, -inf, 0.0f, -0.0f, -104.0f, -87.0f, -1e-30f}) x.push_back(v);
  std::vector<float> y(x.size(), -1.0f);
  cpu_impl::exp_nonpos_f32(x.data(), y.data(), int64_t(x.size()));
  double max_ulp = 0;
  float worst_x = 0;
  int64_t bad_small = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const float xi = x[i];
    if (std::isnan(xi)) {
      CHECK(std::isnan(y[i]));
    } else if (xi >= -87.0f) {  // a normal result
      const double e = ulp_error(y[i], std::exp(double(xi)));
      if (e > max_ulp) {
        max_ulp = e;
        worst_x = xi;
      }
    } else if (std::fabs(double(y[i]) - std::exp(double(xi))) > 1.5e-45) {  // denormal or zero
      ++bad_small;
    }
  }
  INFO("worst x = " << worst_x);
  CHECK(x.size() > 8000000);
  CHECK(max_ulp <= 2.0);
  CHECK(bad_small == 0);
  CHECK(y[y.size() - 6] == 0.0f);  // -inf
  CHECK(y[y.size() - 5] == 1.0f);  // 0
  CHECK(y[y.size() - 4] == 1.0f);  // -0
}

TEST_CASE("sum_lanes and sum2_lanes match the serial loop", "[cpu_kernels]") {
  for (int64_t n : {0, 1, 3, 4, 5, 31, 32, 33, 256, 1027}) {
    std::vector<float> x(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) x[size_t(i)] = float(std::sin(0.37 * double(i)) * 3.0 + 0.1);
    double ref = 0, ref2 = 0, abs_sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      ref += double(x[size_t(i)]);
      ref2 += double(x[size_t(i)]) * double(x[size_t(i)]);
      abs_sum += std::fabs(double(x[size_t(i)]));
    }
    const float s = vec::sum_lanes<float>(n, [&](int64_t j) { return x[size_t(j)]; });
    float a = 0, b = 0;
    vec::sum2_lanes<float>(n, [&](int64_t j) { return x[size_t(j)]; },
                           [&](int64_t j) { return x[size_t(j)] * x[size_t(j)]; }, &a, &b);
    // Float sums of n terms: |error| <= n * 2^-24 * sum |terms| (first order).
    const double bound = double(n) * std::ldexp(1.0, -24) * abs_sum + 1e-30;
    const double bound2 = double(n) * std::ldexp(1.0, -24) * ref2 * 1.01 + 1e-30;
    INFO("n = " << n);
    CHECK(std::fabs(double(s) - ref) <= bound);
    CHECK(std::fabs(double(a) - ref) <= bound);
    CHECK(std::fabs(double(b) - ref2) <= bound2);
  }
}

TEST_CASE("sum_f64 matches the serial double loop", "[cpu_kernels]") {
  for (int64_t n : {0, 1, 7, 8, 9, 1000, 1027}) {
    std::vector<float> x(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) x[size_t(i)] = float(std::sin(0.37 * double(i)) * 3.0 + 0.1);
    double ref = 0;
    for (int64_t i = 0; i < n; ++i) ref += double(x[size_t(i)]);
    const double s = vec::sum_f64(n, [&](int64_t j) { return x[size_t(j)]; });
    INFO("n = " << n);
    CHECK(s == Approx(ref).margin(1e-12));
  }
}

// Runs op on x in f32 and in f64 (the reference), forward and backward with
// the same upstream gradient; compares outputs and every input's gradient.
static void check_f32_against_f64(const char* name, const std::vector<Tensor>& inputs64,
                                  const std::function<Tensor(const std::vector<Tensor>&)>& op,
                                  double atol, double rtol) {
  std::vector<Tensor> in32, in64;
  for (const Tensor& t : inputs64) {
    in64.push_back(t.detach().requires_grad_());
    in32.push_back(t.to(DType::f32).detach().requires_grad_());
  }
  Tensor y64 = op(in64), y32 = op(in32);
  Tensor dy = Tensor::randn(y64.shape(), DType::f64);
  y64.backward(dy);
  y32.backward(dy.to(DType::f32));
  INFO(name);
  CHECK(worst(y32, y64, atol, rtol) <= 1.0);
  for (size_t i = 0; i < in64.size(); ++i) {
    INFO("gradient of input " << i);
    CHECK(worst(in32[i].grad(), in64[i].grad(), atol, rtol) <= 1.0);
  }
}

TEST_CASE("f32 softmax, log_softmax and layer_norm kernels match float64", "[cpu_kernels]") {
  manual_seed(7);
  // Widths that are not multiples of the vector length exercise the tails;
  // enough rows to go parallel.
  // 1024 and 1027 take the prefetching path (rows of at most 8 KiB), 3000 the
  // plain one; both are several kChunk (256) chunks with a ragged last one.
  for (int64_t cols : {1, 5, 37, 1024, 1027, 3000}) {
    const int64_t rows = std::max<int64_t>(3, 70000 / cols);
    DYNAMIC_SECTION("cols = " << cols) {
      Tensor x = Tensor::randn({rows, cols}, DType::f64) * 3.0;
      check_f32_against_f64("softmax", {x}, [](const std::vector<Tensor>& v) { return softmax(v[0], -1); },
                            1e-6, 1e-4);
      check_f32_against_f64("log_softmax", {x},
                            [](const std::vector<Tensor>& v) { return log_softmax(v[0], -1); },
                            1e-5, 1e-5);
      if (cols > 1) {
        Tensor w = Tensor::randn({cols}, DType::f64), b = Tensor::randn({cols}, DType::f64);
        check_f32_against_f64("layer_norm affine", {x, w, b},
                              [](const std::vector<Tensor>& v) {
                                return layer_norm(v[0], v[1], v[2], 1e-5);
                              },
                              1e-4, 1e-4);
        check_f32_against_f64("layer_norm", {x},
                              [](const std::vector<Tensor>& v) {
                                return layer_norm(v[0], Tensor(), Tensor(), 1e-5);
                              },
                              1e-4, 1e-4);
      }
    }
  }
}

TEST_CASE("f32 softmax and layer_norm of 32 MiB and more (streamed stores) give each row's own result",
          "[cpu_kernels]") {
  // Outputs of at least 32 MiB are written with non-temporal stores
  // (cpu_rows.cpp, AVX2 and up): by the explicit-SIMD row kernel itself where
  // the row is 64-byte aligned, else through a scratch row; a single row is
  // written with plain stores. Every row must come out bit for bit as when it
  // is computed alone: sampled at the ends of each thread's share. With 4100
  // columns every fourth row is aligned, so both streamed paths are taken.
  const int64_t rows = 2048;
  const int64_t cols = GENERATE(int64_t(4096), int64_t(4100));  // 32 MiB of f32 and more
  INFO("cols = " << cols);
  manual_seed(8);
  Tensor x = (Tensor::randn({rows, cols}) * 3.0).requires_grad_();
  Tensor dy = Tensor::randn({rows, cols});
  Tensor w = Tensor::randn({cols}), b = Tensor::randn({cols});
  auto fwd_bwd = [&](const std::function<Tensor(const Tensor&)>& f, const Tensor& in, const Tensor& g) {
    Tensor xi = in.detach().clone().requires_grad_();
    Tensor y = f(xi);
    y.backward(g);
    return std::make_pair(y.detach(), xi.grad());
  };
  const std::vector<std::pair<const char*, std::function<Tensor(const Tensor&)>>> ops = {
      {"softmax", [](const Tensor& t) { return softmax(t, -1); }},
      {"layer_norm", [&](const Tensor& t) { return layer_norm(t, w, b, 1e-5); }}};
  for (const auto& op : ops) {
    INFO(op.first);
    auto full = fwd_bwd(op.second, x, dy);
    for (int64_t r : {int64_t(0), int64_t(1), rows / 2 - 1, rows / 2, rows - 1}) {
      INFO("row " << r);
      auto one = fwd_bwd(op.second, x.slice(0, r, r + 1), dy.slice(0, r, r + 1));
      CHECK(full.first.slice(0, r, r + 1).to_vector() == one.first.to_vector());
      CHECK(full.second.slice(0, r, r + 1).to_vector() == one.second.to_vector());
    }
  }
}

TEST_CASE("f32 softmax handles masked entries like float64", "[cpu_kernels]") {
  const float inf = std::numeric_limits<float>::infinity();
  // Row 0: two masked entries (-> exactly 0); row 1: fully masked (-> NaN, as in PyTorch).
  Tensor x = Tensor::from_vector(std::vector<float>{1, -inf, 2, -inf, 0.5f, -inf, -inf, -inf, -inf, -inf},
                                 {2, 5});
  const std::vector<double> y = softmax(x, -1).to_vector();
  CHECK(y[1] == 0.0);
  CHECK(y[3] == 0.0);
  CHECK(y[0] + y[2] + y[4] == Approx(1.0).epsilon(1e-6));
  for (int j = 5; j < 10; ++j) CHECK(std::isnan(y[size_t(j)]));
  const std::vector<double> ly = log_softmax(x, -1).to_vector();
  CHECK(ly[1] == -std::numeric_limits<double>::infinity());
}

// ---------------------------------------------------------------- dropout masks

#include "../backends/backend.h"
#include "../core/philox.h"

namespace {
// The mask's definition (core/philox.h) written out: element i of a mask
// at counter offset `off` reads word (i / 8) % 4 of counter off + (i / 32) * 8
// + i % 8 and is kept when that word is below keep * 2^32.
bool kept_reference(uint64_t seed, uint64_t off, uint64_t i, double keep) {
  const philox::U4 r = philox::philox(seed, off + (i / 32) * 8 + i % 8);
  return double(r.x[(i / 8) % 4]) < keep * 4294967296.0;
}
}  // namespace

namespace {
BernoulliMaskArgs mask_args(DType dt, void* out, int64_t n, double keep, double scale, uint64_t seed,
                            uint64_t offset) {
  BernoulliMaskArgs a;
  a.dt = dt;
  a.out = out;
  a.n = n;
  a.keep = keep;
  a.scale = scale;
  a.seed = seed;
  a.offset = offset;
  return a;
}
DropoutArgs dropout_args(DType dt, const void* x, void* out, uint64_t* bits, int64_t n, double keep,
                         uint64_t seed, uint64_t offset) {
  DropoutArgs a;
  a.mask = mask_args(dt, out, n, keep, 1 / keep, seed, offset);
  a.x = x;
  a.bits = bits;
  return a;
}
}  // namespace

TEST_CASE("bernoulli_mask: the lane-wise kernel equals scalar philox bit for bit", "[cpu_kernels]") {
  // Sizes below, at and across the 32-element lane groups, the 64-element
  // blocks and the parallel chunks; an offset whose counters cross 2^32 (the
  // high counter word changes mid-block).
  const uint64_t seed = 0x123456789abcdefull;
  for (int64_t n : {1, 15, 16, 17, 31, 32, 33, 63, 64, 65, 1000, 4096 * 16 + 5, 70001})
    for (uint64_t offset : {uint64_t(0), uint64_t(7), (uint64_t(1) << 32) - 9})
      for (double keep : {0.0, 0.1, 0.9, 1.0}) {
        std::vector<float> got(size_t(n), -1.f);
        std::vector<double> got64(size_t(n), -1.0);
        backend(Device::cpu()).bernoulli_mask(mask_args(DType::f32, got.data(), n, keep, 2.5, seed, offset));
        backend(Device::cpu()).bernoulli_mask(mask_args(DType::f64, got64.data(), n, keep, 2.5, seed, offset));
        int64_t bad = 0;
        for (int64_t i = 0; i < n; ++i) {
          const bool kept = kept_reference(seed, offset, uint64_t(i), keep);
          bad += got[size_t(i)] != (kept ? 2.5f : 0.f);
          bad += got64[size_t(i)] != (kept ? 2.5 : 0.0);
          bad += philox::kept(seed, offset, uint64_t(i), philox::keep_threshold(keep)) != kept;
          // The counters of an n-element mask stay in [offset, offset + n).
          bad += philox::keep_counter(offset, uint64_t(i)) > offset + uint64_t(i);
        }
        INFO("n " << n << " offset " << offset << " keep " << keep);
        CHECK(bad == 0);
      }
  // Keep probabilities on and beside the 2^-32 grid: the integer threshold
  // must round the same way as the comparison with keep * 2^32.
  for (double keep : {0.5, std::nextafter(0.5, 1.0), std::nextafter(0.5, 0.0), 1.0 / 3,
                      3000000000.0 / 4294967296.0, std::nextafter(3000000000.0 / 4294967296.0, 0.0)}) {
    const int64_t n = 4096;
    std::vector<float> got(static_cast<size_t>(n));
    backend(Device::cpu()).bernoulli_mask(mask_args(DType::f32, got.data(), n, keep, 1.0, seed, 0));
    int64_t bad = 0, kept = 0;
    for (int64_t i = 0; i < n; ++i) {
      bad += (got[size_t(i)] != 0) != kept_reference(seed, 0, uint64_t(i), keep);
      kept += got[size_t(i)] != 0;
    }
    CHECK(bad == 0);
    CHECK(std::abs(double(kept) / double(n) - keep) < 0.05);  // and it is a mask of rate keep
  }
}

TEST_CASE("dropout_forward / dropout_backward: the bernoulli_mask mask, bit for bit, in place too",
          "[cpu_kernels]") {
  // The one-pass dropout kernels against their reference: bernoulli_mask, then a multiply.
  const uint64_t seed = 0xfeedbeefull;
  Backend& be = backend(Device::cpu());
  for (int64_t n : {1, 15, 17, 64, 65, 4096 * 16 + 5})
    for (uint64_t offset : {uint64_t(3), (uint64_t(1) << 32) - 9}) {
      const size_t len = static_cast<size_t>(n), words = static_cast<size_t>((n + 63) / 64);
      std::vector<float> x(len), mask(len), got(len), dx(len);
      std::vector<double> x64(len), mask64(len), got64(len);
      std::vector<uint64_t> bits(words, ~uint64_t(0)), bits64(words), bits_in(words);
      for (int64_t i = 0; i < n; ++i) x[size_t(i)] = float(x64[size_t(i)] = std::sin(double(i)) * 3);
      x[0] = std::numeric_limits<float>::infinity();  // a dropped inf gives NaN, as inf * 0 does
      x64[0] = std::numeric_limits<double>::infinity();
      be.bernoulli_mask(mask_args(DType::f32, mask.data(), n, 0.7, 1 / 0.7, seed, offset));
      be.bernoulli_mask(mask_args(DType::f64, mask64.data(), n, 0.7, 1 / 0.7, seed, offset));
      REQUIRE(be.supports(OpKind::fused_dropout, {DType::f32}));
      REQUIRE(be.supports(OpKind::fused_dropout, {DType::f64}));
      be.dropout_forward(dropout_args(DType::f32, x.data(), got.data(), bits.data(), n, 0.7, seed, offset));
      be.dropout_forward(
          dropout_args(DType::f64, x64.data(), got64.data(), bits64.data(), n, 0.7, seed, offset));
      std::vector<float> inplace = x;
      be.dropout_forward(dropout_args(DType::f32, inplace.data(), inplace.data(), bits_in.data(), n, 0.7, seed,
                                      offset));
      DropoutBackwardArgs db;
      db.dt = DType::f32;
      db.dy = x.data();
      db.dx = dx.data();
      db.bits = bits.data();
      db.n = n;
      db.scale = 1 / 0.7;
      be.dropout_backward(db);
      auto same = [](double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); };
      int64_t bad = 0;
      for (int64_t i = 0; i < n; ++i) {
        const size_t k = size_t(i);
        const float want = x[k] * mask[k];
        const bool bit = (bits[k / 64] >> (k % 64)) & 1;
        bad += !same(got[k], want) + !same(inplace[k], want) + !same(got64[k], x64[k] * mask64[k]);
        bad += bit != (mask[k] != 0) || bits64[k / 64] != bits[k / 64] || bits_in[k / 64] != bits[k / 64];
        bad += !same(dx[k], want);  // backward: the same mask on dy = x
      }
      for (size_t w = 0; w < words; ++w)  // no bit beyond n
        if (n % 64 && w == words - 1) bad += (bits[w] >> (n % 64)) != 0;
      INFO("n " << n << " offset " << offset);
      CHECK(bad == 0);
    }
}

// ---------------------------------------------------------------- backend seam checks

#include "../backends/kernels.h"

TEST_CASE("backend kernels: an unknown dtype or an out-of-range gemm is an Error", "[cpu_kernels]") {
  Backend& be = backend(Device::cpu());
  std::vector<double> buf(8, 0.0);
  const DType bogus = static_cast<DType>(97);
  CHECK_THROWS_WITH(be.fill(bogus, buf.data(), 8, 1.0), Catch::Contains("unknown dtype"));
  CHECK_THROWS_WITH(be.arange(bogus, buf.data(), 8, 0.0, 1.0), Catch::Contains("unknown dtype"));
  // CBLAS takes int: a leading dimension of 2^31 is refused before any memory is touched.
  const int64_t big = int64_t(1) << 31;
  GemmArgs g;
  g.dt = DType::f64;
  g.m = g.n = g.k = 1;
  g.a = g.b = g.c = buf.data();
  g.lda = g.ldb = g.ldc = 1;
  g.lda = big;
  CHECK_THROWS_WITH(be.gemm(g), Catch::Contains("exceed BLAS's int range"));
  g.lda = 1;
  g.ldc = big;
  CHECK_THROWS_WITH(be.gemm(g), Catch::Contains("ldc"));
}

TEST_CASE("kernel tables: registered per device, found with one error, checks shared",
          "[cpu_kernels]") {
  // The CPU registers REM, SRU and the fused RSA kernels; these take f32 and
  // f64 problems of any size, and decline an empty one or another dtype.
  CHECK(detail::kernel_slot<RemKernels>(DeviceType::cpu) != nullptr);
  CHECK(detail::kernel_slot<SruKernels>(DeviceType::cpu) != nullptr);
  REQUIRE(detail::kernel_slot<RsaKernels>(DeviceType::cpu) != nullptr);
  RsaFusedProblem rp;
  rp.B = rp.H = rp.Lq = rp.Lk = rp.D = 1;
  const RsaFusedProblem empty;
  CHECK(supports(Device::cpu(), OpKind::fused_rsa, {DType::f32, &rp}));
  CHECK(supports(Device::cpu(), OpKind::fused_rsa, {DType::f64, &rp}));
  CHECK_FALSE(supports(Device::cpu(), OpKind::fused_rsa, {DType::i64, &rp}));
  CHECK_FALSE(supports(Device::cpu(), OpKind::fused_rsa, {DType::f32, &empty}));
  // The other optional kernels: dropout and Adam are there, Adam for floats.
  CHECK(supports(Device::cpu(), OpKind::fused_dropout, {DType::f32}));
  CHECK(supports(Device::cpu(), OpKind::fused_adam, {DType::f64}));
  CHECK_FALSE(supports(Device::cpu(), OpKind::fused_adam, {DType::i64}));
  // The SRU problem checks live in the front, for every backend alike.
  SruBackwardArgs b;
  b.dt = DType::f64;
  b.p.L = 2;
  b.p.B = 1;
  b.p.D = 3;
  b.p.k = 3;
  std::vector<double> m(64, 0.0);
  b.U = b.v = b.b = b.c = b.dh = m.data();
  b.dU = b.dv = b.db = m.data();
  CHECK_THROWS_WITH(kern::sru_backward(Device::cpu(), b), Catch::Contains("needs x"));
  b.x = m.data();
  CHECK_THROWS_WITH(kern::sru_backward(Device::cpu(), b), Catch::Contains("needs dx"));
  b.dx = m.data();
  b.p.bidirectional = true;
  CHECK_THROWS_WITH(kern::sru_backward(Device::cpu(), b), Catch::Contains("even D"));
  b.p.k = 5;
  CHECK_THROWS_WITH(kern::sru_backward(Device::cpu(), b), Catch::Contains("k must be 3 or 4"));
  SruForwardArgs f;
  f.p.k = 3;
  f.p.L = f.p.B = f.p.D = 1;
  CHECK_THROWS_WITH(kern::sru_forward(Device::cpu(), f), Catch::Contains("needs x"));
}

TEST_CASE("sgemm (the register-tiled f32 gemm) matches a double loop: tile and panel edges, transposes, leading dims, alpha, beta",
          "[cpu_kernels]") {
#ifdef REMORA_SGEMM_TILES
  if (!cpu_impl::use_sgemm_tiles()) {
    SUCCEED("no AVX2 on this CPU (or REMORA_CPU_ISA=baseline): the gemm is OpenBLAS's");
    return;
  }
  // m: a partial tile of 6 rows, whole tiles and a remainder; n: panels of 16
  // ending before, on and after their edge, a pair whose second panel has one
  // column (17, 33), three panels (48), two column blocks of 384 (400); k: no
  // depth, one step, depth passes of 256 and a remainder (300).
  std::mt19937 rng(11);
  std::normal_distribution<float> nd;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  int cases = 0;
  for (int64_t m : {1, 6, 7, 13, 64})
    for (int64_t n : {1, 15, 16, 17, 33, 48, 400})
      for (int64_t k : {0, 1, 7, 300})
        for (int t = 0; t < 4; ++t)
          for (int ab = 0; ab < 2; ++ab) {
            const bool ta = t & 1, tb = t & 2;
            const float alpha = ab ? 0.5f : 1.f, beta = ab ? -1.5f : 0.f;
            const int64_t lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + (n % 16 == 0 && ab ? 0 : 2),
                          ldc = n + 5;
            std::vector<float> A(size_t((ta ? k : m) * lda + 1)), B(size_t((tb ? n : k) * ldb + 1)),
                C(size_t(m * ldc));
            for (float& x : A) x = nd(rng);
            for (float& x : B) x = nd(rng);
            for (float& x : C) x = beta != 0 ? nd(rng) : nan;  // beta = 0 never reads C
            const std::vector<float> C0 = C;
            cpu_impl::sgemm(ta, tb, m, n, k, alpha, A.data(), lda, B.data(), ldb, beta, C.data(), ldc);
            ++cases;
            for (int64_t i = 0; i < m; ++i)
              for (int64_t j = 0; j < ldc; ++j) {
                const float got = C[size_t(i * ldc + j)];
                if (j >= n) {  // past column n: untouched
                  REQUIRE(std::memcmp(&got, &C0[size_t(i * ldc + j)], sizeof(float)) == 0);
                  continue;
                }
                double ref = 0, mag = 0;
                for (int64_t p = 0; p < k; ++p) {
                  const double x = A[size_t(ta ? p * lda + i : i * lda + p)];
                  const double y = B[size_t(tb ? j * ldb + p : p * ldb + j)];
                  ref += x * y;
                  mag += std::fabs(x * y);
                }
                const double c0 = beta != 0 ? double(C0[size_t(i * ldc + j)]) : 0.0;
                ref = alpha * ref + beta * c0;
                const double tol = double(k + 3) * 0x1p-24 * (std::fabs(alpha) * mag + std::fabs(beta * c0));
                INFO("m " << m << " n " << n << " k " << k << " ta " << ta << " tb " << tb << " alpha "
                          << alpha << " beta " << beta << " at (" << i << ", " << j << ")");
                REQUIRE(std::fabs(double(got) - ref) <= tol);
              }
          }
  CHECK(cases == 5 * 7 * 4 * 8);
#else
  SUCCEED("not an x86-64 GCC build: the gemm is OpenBLAS's");
#endif
}

TEST_CASE("gemm: one thread pool; every split (batch, row panels, column panels) matches one thread",
          "[cpu_kernels]") {
  // The CPU gemm keeps OpenBLAS single-threaded and spreads a product over
  // the pool's threads: by batch element when there are enough (each element
  // the same single-threaded call: bit for bit), else by panels of C along
  // its longer side (a panel edge can change which BLAS micro-kernel handles
  // a row or column, so a few elements may differ in rounding: bounded by the
  // dot product's error, 2 k eps (|A| |B|)_ij). Shapes reach each path (work
  // above the 2^20 multiply-add threshold) with transposed operands and odd
  // sizes.
  struct Case {
    Shape a, b;
    bool ta, tb, exact;
  };
  const std::vector<Case> cases = {
      {{3, 150, 70}, {3, 70, 130}, false, false, true},    // batch >= threads
      {{1, 700, 60}, {1, 60, 90}, false, false, false},    // rows split (m >= n)
      {{1, 50, 120}, {1, 120, 900}, false, false, false},  // columns split (n > m)
      {{1, 120, 333}, {1, 777, 120}, true, true, false},   // both transposed, columns
      {{1, 90, 521}, {1, 90, 130}, true, false, false},    // A transposed, rows
      {{1, 17, 5}, {1, 5, 3}, false, false, true},         // tiny: serial
  };
  const int threads = get_num_threads();
  for (DType dt : {DType::f32, DType::f64}) {
    const double eps = dt == DType::f32 ? 0x1p-24 : 0x1p-53;
    for (const Case& c : cases) {
      INFO(dtype_name(dt) << " a " << shape_str(c.a) << " b " << shape_str(c.b) << " ta " << c.ta
                          << " tb " << c.tb);
      Tensor a = Tensor::randn(c.a, dt, Device::cpu()), b = Tensor::randn(c.b, dt, Device::cpu());
      Tensor A = c.ta ? a.transpose(-2, -1) : a, B = c.tb ? b.transpose(-2, -1) : b;
      const double k = double(A.size(-1));
      set_num_threads(1);
      const std::vector<double> one = matmul(A, B).to_vector();
      const std::vector<double> mag = matmul(abs(A), abs(B)).to_vector();
      for (int t : {2, 3}) {
        set_num_threads(t);
        const std::vector<double> got = matmul(A, B).to_vector();
        REQUIRE(got.size() == one.size());
        if (c.exact) {
          CHECK(got == one);
        } else {
          size_t bad = 0;
          for (size_t i = 0; i < got.size(); ++i) bad += std::fabs(got[i] - one[i]) > 2 * k * eps * mag[i];
          CHECK(bad == 0);
        }
      }
      set_num_threads(threads);
    }
  }
}

TEST_CASE("fused f32 RSA attention matches the f64 reference: tile edges, causal limits, padding, a learned bias",
          "[cpu_kernels][rsa]") {
  // Lq 77 = a 64-row block and a partial one (13 rows: 6 + 6 + 1 row tiles);
  // Lk 100 (memory 23): key panels of 16 end partway; D 5, 16 and 33 end a
  // column panel before, on and past a panel edge, D 20 in the second panel of
  // a pair (the AVX-512 tiles take panels two at a time). Three biases with the same
  // causal -inf pattern (the per-tile limits): the plain mask shared by all
  // heads (never read by the row passes), a shared [Lq, Lk] bias with values,
  // and a per-(b, h) learned bias (its rows scanned per head, its gradient dS
  // returned); and two padded keys.
  // Then Lq 130, Lk 256: blocks of 190, 254 and all 256 keys (whole panels,
  // and two rows in the last block).
  const double inf = std::numeric_limits<double>::infinity();
  RemSpec spec;
  spec.regular = 1;
  spec.masked = true;
  for (auto lens : {std::pair<int64_t, int64_t>{77, 100}, std::pair<int64_t, int64_t>{130, 256}})
  for (int64_t D : {5, 16, 20, 33}) {
    const int64_t B = 2, H = 3, Lq = lens.first, Lk = lens.second, M = Lk - Lq;
    if (Lk == 256 && D != 16) continue;
    for (int bias_kind : {0, 1, 2}) {
      const bool learned_bias = bias_kind == 2;
      INFO("Lq " << Lq << ", Lk " << Lk << ", D " << D << ", bias " << (bias_kind == 0 ? "causal mask" : bias_kind == 1 ? "shared, with values" : "learned, per head"));
      Generator g(uint64_t(100 + D));
      Tensor q = Tensor::randn({B, H, Lq, D}, DType::f64, Device::cpu(), &g);
      Tensor k = Tensor::randn({B, H, Lk, D}, DType::f64, Device::cpu(), &g);
      Tensor v = Tensor::randn({B, H, Lk, D}, DType::f64, Device::cpu(), &g);
      Tensor probe = Tensor::randn({B, H, Lq, D}, DType::f64, Device::cpu(), &g);
      Tensor eta = Tensor::full({1}, 0.3, DType::f64), mu = Tensor::full({1}, -0.4, DType::f64);
      Tensor ii = Tensor::arange(Lq, DType::f64).reshape({Lq, 1}) + double(M);
      Tensor jj = Tensor::arange(Lk, DType::f64).reshape({1, Lk});
      Tensor mask = masked_fill(Tensor::zeros({Lq, Lk}, DType::f64), gt(jj, ii), -inf);
      if (bias_kind == 1) mask = add(mask, Tensor::randn({Lq, Lk}, DType::f64, Device::cpu(), &g) * 0.5);
      if (bias_kind == 2)
        mask = add(mask, Tensor::randn({B, H, Lq, Lk}, DType::f64, Device::cpu(), &g) * 0.5);
      Tensor kp = Tensor::zeros({B, Lk}, DType::i64);
      kp.select(0, 1).slice(0, 3, 5).fill_(1);
      auto run = [&](DType dt, bool reference, std::vector<Tensor>* grads) {
        std::vector<Tensor> in{q.to(dt), k.to(dt), v.to(dt), eta.to(dt), mu.to(dt), mask.to(dt)};
        for (size_t i = 0; i < in.size(); ++i)
          if (i < 5 || learned_bias) in[i].requires_grad_();
        Tensor o = reference ? rsa_attention_reference(in[0], in[1], in[2], spec, in[3], Tensor(), Tensor(),
                                                       in[4], in[5], kp)
                             : rsa_attention(in[0], in[1], in[2], spec, in[3], Tensor(), Tensor(), in[4],
                                             in[5], kp);
        sum(mul(o, probe.to(dt))).backward();
        grads->clear();
        for (size_t i = 0; i < in.size(); ++i)
          grads->push_back(in[i].requires_grad() ? in[i].grad().to(DType::f64) : Tensor());
        return o.to(DType::f64);
      };
      std::vector<Tensor> g32, g64;
      Tensor o32 = run(DType::f32, false, &g32), o64 = run(DType::f64, true, &g64);
      CHECK(worst(o32, o64, 1e-5, 1e-4) <= 1);
      for (size_t i = 0; i < g32.size(); ++i) {
        if (!g64[i].defined()) continue;
        INFO("gradient of input " << i);
        CHECK(worst(g32[i], g64[i], 1e-4, 1e-3) <= 1);
      }
    }
  }
}

TEST_CASE("strided elementwise iteration matches an index loop: rows in chunks, shares split mid-row",
          "[cpu_kernels]") {
  // Each thread steps its share of rows like an odometer; rows longer than a
  // chunk (16384) split into several tasks, and a share may start inside a
  // row. A permute copy and a broadcast add are checked element by element
  // against the index arithmetic, at 1, 2 and 3 threads.
  const int threads = get_num_threads();
  struct Case {
    Shape shape;  // of x; the op runs on x.permute(perm)
    Shape perm;
  };
  const std::vector<Case> cases = {{{3, 2, 17000}, {1, 0, 2}},   // 2 chunks per row, 6 rows
                                   {{5, 7, 3, 33}, {2, 0, 1, 3}},  // short rows, 3 wrapping dims
                                   {{2, 40000}, {0, 1}},          // contiguous, 3 chunks per row
                                   {{4, 6, 5}, {2, 1, 0}}};       // inner stride != 1
  for (const Case& c : cases) {
    Tensor x = Tensor::randn(c.shape, DType::f64, Device::cpu());
    Tensor xp = x.permute(c.perm);
    const Shape ps = xp.shape();
    Tensor bias = Tensor::randn({ps.back()}, DType::f64, Device::cpu());
    // The expected values by index arithmetic on x's contiguous storage.
    const std::vector<double> xv = x.to_vector(), bv = bias.to_vector();
    const int64_t n = xp.numel(), nd = int64_t(ps.size());
    std::vector<double> want_copy(static_cast<size_t>(n)), want_add(static_cast<size_t>(n));
    Shape xstr(c.shape.size(), 1);
    for (int64_t d = int64_t(c.shape.size()) - 2; d >= 0; --d)
      xstr[size_t(d)] = xstr[size_t(d + 1)] * c.shape[size_t(d + 1)];
    for (int64_t i = 0; i < n; ++i) {
      int64_t rem = i, off = 0;
      for (int64_t d = nd - 1; d >= 0; --d) {
        const int64_t id = rem % ps[size_t(d)];
        rem /= ps[size_t(d)];
        off += id * xstr[size_t(c.perm[size_t(d)])];
      }
      want_copy[size_t(i)] = xv[size_t(off)];
      want_add[size_t(i)] = xv[size_t(off)] + bv[size_t(i % ps.back())];
    }
    for (int t : {1, 2, 3}) {
      INFO("shape " << shape_str(c.shape) << " perm " << shape_str(c.perm) << ", " << t << " threads");
      set_num_threads(t);
      CHECK(xp.contiguous().to_vector() == want_copy);
      CHECK(add(xp, bias).to_vector() == want_add);
    }
  }
  set_num_threads(threads);
}
