// SPDX-License-Identifier: BSD-3-Clause
// Checks specific to one CUDA kernel or mechanism: device errors, copies and
// the caching allocator, Philox streams, the fused RSA entry (it must run),
// the SRU kernel entries. Every op, forward and backward, in f32 and f64, is
// compared with the CPU by [backends] (tests/test_backends.cpp, from the
// gradcheck registry), and every model's training by [models_parity]
// (tests/test_backends_models.cpp).
//
// Every case is compiled and registered in every build. Without a usable GPU
// (no CUDA build, no device, no driver) each case says why in a WARN and
// returns, so `ctest` shows the skip; "[cuda]" runs only these.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <remora/remora.h>

#include "helpers.h"

#include "../backends/backend.h"
#include "../backends/kernels.h"

using namespace remora;
using remora_test::spec_of;

namespace {

const Device kCuda = Device::cuda(0);

// The reason CUDA cannot be used here, or "" when it can.
std::string no_cuda_reason() {
  std::string why;
  return cuda_is_available(0, &why) ? std::string() : why;
}

#define REMORA_REQUIRE_GPU()                                        \
  do {                                                              \
    const std::string why_ = no_cuda_reason();                      \
    if (!why_.empty()) {                                            \
      WARN("skipped: no CUDA device: " << why_);                    \
      return;                                                       \
    }                                                               \
  } while (0)

// |got - want| <= atol + rtol |want| elementwise (NaN matches NaN, inf matches
// the same inf); on failure the first mismatches are printed.
void expect_close(const Tensor& got, const Tensor& want, const std::string& what,
                  double atol = 1e-5, double rtol = 1e-4) {
  INFO(what);
  REQUIRE(got.defined() == want.defined());
  if (!got.defined()) return;
  REQUIRE(got.shape() == want.shape());
  CHECK(got.device().is_cuda());
  const std::vector<double> g = got.to_vector(), w = want.to_vector();
  int64_t bad = 0;
  std::ostringstream first;
  for (size_t i = 0; i < g.size(); ++i) {
    const bool same_special = (std::isnan(g[i]) && std::isnan(w[i])) ||
                              (std::isinf(g[i]) && g[i] == w[i]);
    if (same_special) continue;
    if (!(std::fabs(g[i] - w[i]) <= atol + rtol * std::fabs(w[i]))) {
      if (bad < 5)
        first << "\n  [" << i << "] cuda " << g[i] << " cpu " << w[i] << " (|diff| "
              << std::fabs(g[i] - w[i]) << ")";
      ++bad;
    }
  }
  if (bad) FAIL_CHECK(what << ": " << bad << " of " << g.size() << " elements differ" << first.str());
}


Tensor randn(const Shape& s, uint64_t seed, bool grad = true, DType dt = DType::f32) {
  Generator g(seed);
  Tensor t = Tensor::randn(s, dt, Device::cpu(), &g);
  if (grad) t.requires_grad_();
  return t;
}
Tensor uniform(const Shape& s, uint64_t seed, double lo, double hi, bool grad = true) {
  Generator g(seed);
  Tensor t = (Tensor::rand(s, DType::f32, Device::cpu(), &g) * (hi - lo) + lo).detach();
  if (grad) t.requires_grad_();
  return t;
}

}  // namespace

// ---------------------------------------------------------------------------

TEST_CASE("cuda: asking for a device that cannot be had is a clear Error", "[cuda]") {
  const std::string why = no_cuda_reason();
  if (why.empty()) {
    // With a GPU: an index past the last device is the error to check.
    CHECK_THROWS_AS(Tensor::zeros({2}, DType::f32, Device::cuda(999)), Error);
    CHECK_THROWS_WITH(Tensor::zeros({2}, DType::f32, Device::cuda(999)),
                      Catch::Contains("cuda:999 does not exist"));
    return;
  }
  // Without one (this build, or this machine): an Error naming the problem, never a crash.
  CHECK_THROWS_AS(Tensor::zeros({2, 3}, DType::f32, Device::cuda()), Error);
  CHECK_THROWS_WITH(Tensor::zeros({2, 3}, DType::f32, Device::cuda()),
                    Catch::Contains("cuda:0") && Catch::Contains("use device cpu"));
  CHECK_THROWS_AS(Tensor::ones({3}).to(Device::cuda()), Error);
  CHECK_FALSE(cuda_is_available());
  WARN("cuda: no GPU here (" << why << "); the error path is all that ran");
}

TEST_CASE("cuda: operands on different devices are a clear Error", "[cuda]") {
  REMORA_REQUIRE_GPU();
  Tensor a = Tensor::ones({2, 3}), b = Tensor::ones({2, 3}, DType::f32, kCuda);
  CHECK_THROWS_WITH(add(a, b), Catch::Contains("different devices"));
  CHECK_THROWS_WITH(matmul(a, b.t()), Catch::Contains("different devices"));
  CHECK_THROWS_WITH(linear(b, a), Catch::Contains("different devices"));
  CHECK_THROWS_WITH(gate(a, b, Tensor::zeros({1})), Catch::Contains("different devices"));
  RemSpec s = spec_of(1, 0, 0, 0, {}, true);
  Tensor q = Tensor::ones({1, 1, 4, 8}, DType::f32, kCuda);
  CHECK_THROWS_WITH(rsa_attention(q, q, q, s, Tensor::zeros({1}), Tensor(), Tensor(),
                                  Tensor::zeros({1}, DType::f32, kCuda)),
                    Catch::Contains("rem.eta on cpu"));
}

TEST_CASE("cuda: host <-> device copies, dtypes, the caching allocator", "[cuda]") {
  REMORA_REQUIRE_GPU();
  for (DType dt : {DType::f32, DType::f64, DType::i64}) {
    Tensor h = Tensor::arange(0, 1000, 1, dt);
    Tensor d = h.to(kCuda);
    CHECK(d.device() == kCuda);
    CHECK(d.to(Device::cpu()).to_vector() == h.to_vector());
    CHECK(d.at({17}) == 17);
  }
  // A freed block of the same size comes back without a cudaMalloc.
  void* p1;
  {
    Tensor t = Tensor::empty({1 << 20}, DType::f32, kCuda);
    p1 = t.raw_data();
  }
  Tensor t2 = Tensor::empty({1 << 20}, DType::f32, kCuda);
  CHECK(t2.raw_data() == p1);
  // Strided views and dtype conversion on the device.
  Tensor x = randn({5, 7}, 1, false);
  expect_close(x.to(kCuda).t().contiguous(), x.t().contiguous(), "transpose copy");
  expect_close(x.to(kCuda).to(DType::f64), x.to(DType::f64), "f32 -> f64");
  expect_close(x.to(kCuda).slice(1, 1, 6, 2).to(DType::i64), x.slice(1, 1, 6, 2).to(DType::i64),
               "strided f32 -> i64");
}

TEST_CASE("cuda: copies through the pinned staging slots keep order and bytes", "[cuda]") {
  REMORA_REQUIRE_GPU();
  // Larger than all staging slots together (8 x 1 MiB): copied in chunks.
  const int64_t n = (int64_t(14) << 20) / 4 + 123;
  Tensor h = Tensor::arange(0, double(n), 1, DType::f32);
  Tensor d = h.to(kCuda);
  CHECK(d.to(Device::cpu()).to_vector() == h.to_vector());
  // Many small uploads in a row (more than there are slots), each reused on the
  // host at once: every one must land intact and in order with the kernels.
  Tensor acc = Tensor::zeros({4}, DType::f64, kCuda);
  std::vector<double> host(4);
  for (int i = 0; i < 40; ++i) {
    for (int j = 0; j < 4; ++j) host[size_t(j)] = double(i * 4 + j);
    acc = add(acc, Tensor::from_vector(host, {4}, DType::f64).to(kCuda));
  }
  const std::vector<double> got = acc.to_vector();
  for (int j = 0; j < 4; ++j) CHECK(got[size_t(j)] == 4.0 * 780 + 40.0 * j);
}

TEST_CASE("cuda: bad targets and indices are deferred device errors, raised at the next sync",
          "[cuda]") {
  REMORA_REQUIRE_GPU();
  Tensor logits = Tensor::zeros({2, 5}, DType::f32, kCuda).requires_grad_();
  auto ids = [](std::vector<int64_t> v) { return Tensor::from_vector(v).to(kCuda); };
  SECTION("cross_entropy") {
    Tensor loss;
    REQUIRE_NOTHROW(loss = cross_entropy(logits, ids({1, 7})));  // no host sync in the op
    CHECK_ERROR(loss.item(), "cross_entropy", "target 7", "[0, 5)", "ignore_index is -100");
    // Raised once, then cleared: the next sync is clean.
    CHECK(cross_entropy(logits, ids({1, -100})).item() == Approx(std::log(5.0)));
    // A backward over a bad target reads nothing out of bounds; the error comes at the sync.
    Tensor bad = cross_entropy(logits, ids({-3, 0}), -100, Reduction::sum);
    bad.backward();
    CHECK_ERROR(logits.grad().to_vector(), "cross_entropy", "target -3");
    // The mean divides by a count kept on the device: all ignored gives NaN, as in PyTorch.
    CHECK(std::isnan(cross_entropy(logits.detach(), ids({-100, -100})).item()));
    Tensor l3 = cross_entropy(logits, ids({4, -100}));
    CHECK(l3.item() == Approx(std::log(5.0)));
  }
  SECTION("embedding, index_select, index_add") {
    Tensor w = Tensor::ones({5, 3}, DType::f32, kCuda);
    Tensor e;
    REQUIRE_NOTHROW(e = embedding(w, ids({0, 9})));
    CHECK_ERROR(e.to_vector(), "embedding", "index 9", "[0, 5)");
    CHECK(sum(embedding(w, ids({0, 4}))).item() == 6.0);
    Tensor x = Tensor::ones({3, 4}, DType::f32, kCuda);
    CHECK_ERROR(sum(index_select(x, 0, ids({-2}))).item(), "index_select", "-2", "[0, 3)");
    CHECK(sum(index_select(x, 1, ids({3, 3}))).item() == 6.0);
  }
}

TEST_CASE("cuda: two-stage reductions agree with the CPU, first index on ties", "[cuda]") {
  REMORA_REQUIRE_GPU();
  // A full reduction (split over many blocks) and a column sum over many rows
  // (split over row slices), sums in double as on the CPU.
  Tensor big = randn({3000, 1024}, 5, false);
  expect_close(sum(big.to(kCuda)), sum(big), "full sum", 1e-3, 1e-5);
  expect_close(sum(big.to(kCuda), {0}), sum(big, {0}), "sum(dim=0)", 1e-4, 1e-5);
  expect_close(max(big.to(kCuda), 0), max(big, 0), "max(dim=0)", 0, 0);
  // Ties: the first extreme wins in both split shapes.
  Tensor flat = Tensor::zeros({int64_t(3) << 20}, DType::f32);
  flat.reshape({-1}).narrow(0, 2000000, 1).fill_(1);
  flat.reshape({-1}).narrow(0, 3000000, 1).fill_(1);
  CHECK(argmax(flat.to(kCuda), 0).item() == 2000000);
  Tensor cols = Tensor::zeros({100000, 3}, DType::f64);
  cols.narrow(0, 70000, 1).fill_(-1);
  cols.narrow(0, 90000, 1).fill_(-1);
  const std::vector<double> am = argmax(neg(cols.to(kCuda)), 0).to_vector();
  CHECK(am == std::vector<double>{70000, 70000, 70000});
}

TEST_CASE("cuda: clip_grad_norm_ on the device matches the CPU", "[cuda][optim]") {
  REMORA_REQUIRE_GPU();
  for (double max_norm : {0.1, 1e6}) {
    std::vector<Tensor> pc, pg;
    for (int64_t n : {5, 1000, 33}) {
      Tensor g = randn({n}, int(n), false);
      Tensor a = Tensor::zeros({n}).requires_grad_(), b = Tensor::zeros({n}, DType::f32, kCuda).requires_grad_();
      a.set_grad(g);
      b.set_grad(g.to(kCuda));
      pc.push_back(a);
      pg.push_back(b);
    }
    const double tc = optim::clip_grad_norm_(pc, max_norm), tg = optim::clip_grad_norm_(pg, max_norm);
    CHECK(tg == Approx(tc).epsilon(1e-6));
    for (size_t i = 0; i < pc.size(); ++i)
      expect_close(pg[i].grad(), pc[i].grad(), "clipped grad", 1e-7, 1e-6);
  }
}

TEST_CASE("cuda: fills and Philox streams are the CPU's", "[cuda]") {
  REMORA_REQUIRE_GPU();
  for (DType dt : {DType::f32, DType::f64}) {
    Generator g1(1234), g2(1234);
    g1.advance(5);
    g2.advance(5);
    Tensor a = Tensor::rand({1001}, dt, Device::cpu(), &g1);
    Tensor b = Tensor::rand({1001}, dt, kCuda, &g2);
    CHECK(b.to_vector() == a.to_vector());  // bit-identical
    Tensor c = Tensor::randn({1001}, dt, Device::cpu(), &g1);
    Tensor d = Tensor::randn({1001}, dt, kCuda, &g2);
    // Box-Muller's log/cos come from different libms: f32 is identical after
    // rounding, f64 agrees to a few ulp.
    expect_close(d, c, "randn", 0, dt == DType::f32 ? 0 : 1e-14);
    Tensor x = Tensor::ones({999}, dt);
    expect_close(dropout(x.to(kCuda), 0.3, true, &g2), dropout(x, 0.3, true, &g1),
                 "dropout mask", 0, 0);
  }
  expect_close(Tensor::full({3, 4}, 2.5, DType::f32, kCuda), Tensor::full({3, 4}, 2.5), "full");
  expect_close(Tensor::arange(-3, 7, 0.5, DType::f64, kCuda), Tensor::arange(-3, 7, 0.5, DType::f64),
               "arange f64", 0, 0);
  expect_close(Tensor::arange(100, DType::i64, kCuda), Tensor::arange(100), "arange i64", 0, 0);
}

// ---- the fused RSA kernel: it must actually run (no silent fallback) ----

namespace {

// Plain softmax attention in f64 on the CPU (the mathematics of the fused
// entry with Hr = 0, no bias, no dropout): O [B, H, Lq, D], lse [B, H, Lq].
void attention_f64(const Tensor& q, const Tensor& k, const Tensor& v, double scale, Tensor* O, Tensor* lse) {
  Tensor s = matmul(q.to(DType::f64), k.to(DType::f64).transpose(-2, -1)) * scale;
  Tensor m = max(s, -1, true);
  Tensor e = exp(s - m);
  Tensor z = sum(e, {-1}, true);
  *O = matmul(e / z, v.to(DType::f64));
  *lse = (log(z) + m).squeeze(-1);
}

}  // namespace

// TF32 on or off for one scope (the flag is process-wide).
struct Tf32Scope {
  bool old;
  explicit Tf32Scope(bool on) : old(cuda_tf32()) { set_cuda_tf32(on); }
  ~Tf32Scope() { set_cuda_tf32(old); }
  Tf32Scope(const Tf32Scope&) = delete;
  Tf32Scope& operator=(const Tf32Scope&) = delete;
};

TEST_CASE("cuda: the fused RSA kernel runs on the device (its entry returns true)", "[cuda][rsa][backends]") {
  // The reference (FP32) kernels, to 1e-4: with TF32 on, the f32 D = 64 / 128
  // problems below would go to the tensor-core kernels (tested next).
  const Tf32Scope fp32(false);
  // The assertions below catch a device backend whose entry declines, leaving
  // ops/ to run the composed path silently.
  REMORA_REQUIRE_GPU();
  struct Shape4 {
    DType dt;
    int64_t B, H, Lq, Lk, D;
  };
  for (const Shape4& c : {Shape4{DType::f32, 2, 3, 37, 53, 64}, Shape4{DType::f32, 1, 2, 1, 1100, 128},
                          Shape4{DType::f32, 2, 2, 19, 19, 33}, Shape4{DType::f64, 2, 3, 29, 41, 64},
                          Shape4{DType::f64, 1, 1, 5, 3, 7}}) {
    INFO(dtype_name(c.dt) << " B " << c.B << " H " << c.H << " Lq " << c.Lq << " Lk " << c.Lk << " D " << c.D);
    Tensor q = randn({c.B, c.H, c.Lq, c.D}, 1, false, c.dt), k = randn({c.B, c.H, c.Lk, c.D}, 2, false, c.dt),
           v = randn({c.B, c.H, c.Lk, c.D}, 3, false, c.dt);
    RsaFusedProblem p;
    p.B = c.B;
    p.H = c.H;
    p.Hr = 0;
    p.Lq = c.Lq;
    p.Lk = c.Lk;
    p.D = c.D;
    p.scale = 1.0 / std::sqrt(double(c.D));
    Tensor qd = q.to(kCuda), kd = k.to(kCuda), vd = v.to(kCuda);
    // Poisoned outputs: every element must be written.
    Tensor O = Tensor::full({c.B, c.H, c.Lq, c.D}, NAN, c.dt, kCuda);
    Tensor lse = Tensor::full({c.B, c.H, c.Lq}, NAN, c.dt, kCuda);
    // The device must take this problem: a false here means ops/ would silently
    // run the composed path instead of the fused kernel.
    REQUIRE(supports(kCuda, OpKind::fused_rsa, {c.dt, &p}));
    RsaForwardArgs fa;
    fa.dt = c.dt;
    fa.p = p;
    fa.q = qd.raw_data();
    fa.k = kd.raw_data();
    fa.v = vd.raw_data();
    fa.O = O.raw_data();
    fa.lse = lse.raw_data();
    kern::rsa_forward(kCuda, fa);
    Tensor Ow, lw;
    attention_f64(q, k, v, p.scale, &Ow, &lw);
    const double tol = c.dt == DType::f32 ? 1e-4 : 1e-10;
    expect_close(O, Ow.to(c.dt), "fused O", tol, tol);
    expect_close(lse, lw.to(c.dt), "fused lse", tol, tol);
    // The backward entry runs too (dS requested: the learned-bias path).
    Tensor dO = randn({c.B, c.H, c.Lq, c.D}, 4, false, c.dt).to(kCuda);
    Tensor dq = Tensor::full(q.shape(), NAN, c.dt, kCuda), dk = Tensor::full(k.shape(), NAN, c.dt, kCuda),
           dv = Tensor::full(v.shape(), NAN, c.dt, kCuda), dS = Tensor::full({c.B, c.H, c.Lq, c.Lk}, NAN, c.dt, kCuda);
    RsaBackwardArgs ba;
    ba.dt = c.dt;
    ba.p = p;
    ba.q = qd.raw_data();
    ba.k = kd.raw_data();
    ba.v = vd.raw_data();
    ba.O = O.raw_data();
    ba.lse = lse.raw_data();
    ba.dO = dO.raw_data();
    ba.dq = dq.raw_data();
    ba.dk = dk.raw_data();
    ba.dv = dv.raw_data();
    ba.dS = dS.raw_data();
    kern::rsa_backward(kCuda, ba);
    // Against autograd through the f64 composition.
    Tensor q6 = q.to(DType::f64).requires_grad_(), k6 = k.to(DType::f64).requires_grad_(),
           v6 = v.to(DType::f64).requires_grad_();
    Tensor O6, l6;
    attention_f64(q6, k6, v6, p.scale, &O6, &l6);
    O6.backward(dO.to(Device::cpu()).to(DType::f64));
    expect_close(dq, q6.grad().to(c.dt), "fused dq", tol, tol);
    expect_close(dk, k6.grad().to(c.dt), "fused dk", tol, tol);
    expect_close(dv, v6.grad().to(c.dt), "fused dv", tol, tol);
    int64_t bad = 0;
    for (double x : dS.to_vector()) bad += !std::isfinite(x);
    CHECK(bad == 0);  // every dS element written
  }
}

// ---- the tensor-core (TF32) FlashAttention path: it must run, and match ----

namespace {

// The [backends] TF32 rule (tests/test_backends.cpp, kTf32, where the bound is
// derived): |got - ref| <= 5e-3 max(1, max|ref|) + 1e-2 |ref|, ref in f64.
void expect_tf32_close(const Tensor& got, const Tensor& ref, const std::string& what) {
  INFO(what);
  REQUIRE(got.defined());
  REQUIRE(ref.defined());
  REQUIRE(got.shape() == ref.shape());
  const std::vector<double> g = got.to_vector(), w = ref.to_vector();
  double scale = 1;
  for (double x : w) scale = std::max(scale, std::fabs(x));
  int64_t bad = 0;
  std::ostringstream first;
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isnan(g[i]) && std::isnan(w[i])) continue;
    if (!(std::fabs(g[i] - w[i]) <= 5e-3 * scale + 1e-2 * std::fabs(w[i]))) {
      if (bad < 5) first << "\n  [" << i << "] cuda " << g[i] << " cpu f64 " << w[i];
      ++bad;
    }
  }
  if (bad) FAIL_CHECK(what << ": " << bad << " of " << g.size() << " elements outside the TF32 bound" << first.str());
}

}  // namespace

TEST_CASE("cuda: with TF32 on, fused RSA attention runs the tensor-core kernels (D 64 and 128)",
          "[cuda][rsa][backends]") {
  REMORA_REQUIRE_GPU();
  const RsaKernels& rk = kernels<RsaKernels>(kCuda);
  REQUIRE(rk.tensor_core_launches != nullptr);
  const RemSpec spec = spec_of(1, 1, 0, 0, {}, true);  // 3 REM heads of 4
  struct Config {
    int64_t D, L;
    bool pad_dropout;  // key padding and dropout 0.2 instead of a causal mask
  };
  // L = 150: partial 64-row blocks and 32-key tiles at the ends.
  for (const Config& c : {Config{64, 150, false}, Config{128, 150, false}, Config{64, 97, true},
                          Config{128, 97, true}}) {
    INFO("D " << c.D << " L " << c.L << (c.pad_dropout ? " padding + dropout" : " causal"));
    const int64_t B = 2, H = 4;
    Tensor q = randn({B, H, c.L, c.D}, 11, false), k = randn({B, H, c.L, c.D}, 12, false),
           v = randn({B, H, c.L, c.D}, 13, false), probe = randn({B, H, c.L, c.D}, 14, false);
    Tensor eta = Tensor::from_vector(std::vector<double>{0.8}, {1}, DType::f32);
    Tensor nu = Tensor::from_vector(std::vector<double>{1.1}, {1}, DType::f32);
    Tensor th = Tensor::from_vector(std::vector<double>{0.6}, {1}, DType::f32);
    Tensor mu = Tensor::from_vector(std::vector<double>{-0.5, 0.3, 1.0}, {3}, DType::f32);
    Tensor mask, pad;
    if (c.pad_dropout) {
      std::vector<int64_t> p(size_t(B * c.L), 0);
      for (int64_t j = c.L - 20; j < c.L; ++j) p[size_t(c.L + j)] = 1;  // batch row 1: the last 20 keys
      pad = Tensor::from_vector(p, {B, c.L}, DType::i64);
    } else {
      mask = masked_fill(Tensor::zeros({c.L, c.L}), triu(Tensor::ones({c.L, c.L}, DType::i64), 1),
                         -std::numeric_limits<double>::infinity());
    }
    // One run per device and dtype: returns the output and every gradient.
    auto run = [&](Device dev, DType dt) {
      std::vector<Tensor> leaves;
      for (const Tensor* t : {&q, &k, &v, &eta, &nu, &th, &mu}) leaves.push_back(t->to(dt).to(dev).detach().requires_grad_());
      Generator gen(99);
      RsaOptions o;
      o.dropout = c.pad_dropout ? 0.2 : 0;
      o.train = c.pad_dropout;
      o.gen = &gen;
      Tensor out = rsa_attention(leaves[0], leaves[1], leaves[2], spec, leaves[3], leaves[4], leaves[5],
                                 leaves[6], mask.defined() ? mask.to(dt).to(dev) : Tensor(),
                                 pad.defined() ? pad.to(dev) : Tensor(), o);
      sum(mul(out, probe.to(dt).to(dev))).backward();
      std::vector<Tensor> r{out.detach().to(Device::cpu())};
      for (Tensor& t : leaves) r.push_back(t.grad().to(Device::cpu()));
      return r;
    };
    const std::vector<Tensor> want = run(Device::cpu(), DType::f64);
    const Tf32Scope tf32(true);
    const int64_t before = rk.tensor_core_launches();
    const std::vector<Tensor> got = run(kCuda, DType::f32);
    // One forward and one backward on tensor cores: anything less is a silent fallback.
    CHECK(rk.tensor_core_launches() - before == 2);
    const char* names[] = {"out", "dq", "dk", "dv", "deta", "dnu", "dtheta", "dmu"};
    for (size_t t = 0; t < got.size(); ++t) expect_tf32_close(got[t], want[t], names[t]);
  }
  // TF32 off: the reference kernels run, the counter stays.
  {
    const Tf32Scope fp32(false);
    const int64_t before = rk.tensor_core_launches();
    Tensor x = randn({1, 2, 40, 64}, 21, false).to(kCuda);
    Tensor out = rsa_attention(x, x, x, RemSpec{}, Tensor(), Tensor(), Tensor(), Tensor());
    (void)out.at({0, 0, 0, 0});
    CHECK(rk.tensor_core_launches() == before);
  }
}

namespace {

// The REM parameters of spec_of(1, 1, 0, 0, {}, true) in f32: eta, nu, theta, mu.
std::vector<Tensor> rem_params_3heads() {
  return {Tensor::from_vector(std::vector<double>{0.8}, {1}, DType::f32),
          Tensor::from_vector(std::vector<double>{1.1}, {1}, DType::f32),
          Tensor::from_vector(std::vector<double>{0.6}, {1}, DType::f32),
          Tensor::from_vector(std::vector<double>{-0.5, 0.3, 1.0}, {3}, DType::f32)};
}

// rsa_attention of in = {q, k, v, eta, nu, theta, mu[, pos_q, pos_r]} on dev
// in dt under autocast prec, the options set by `set` from the device leaves;
// sum(out * probe) backward. Returns the output and every leaf's gradient on
// the CPU.
std::vector<Tensor> attention_grads(const std::vector<Tensor>& in, const Tensor& probe, const RemSpec& spec,
                                    Device dev, DType dt, Precision prec,
                                    const std::function<void(RsaOptions&, const std::vector<Tensor>&)>& set) {
  std::vector<Tensor> leaves;
  for (const Tensor& t : in) leaves.push_back(t.to(dt).to(dev).detach().requires_grad_());
  Generator gen(99);
  RsaOptions o;
  o.gen = &gen;
  set(o, leaves);
  Tensor out;
  {
    AutocastGuard precision(prec);
    out = rsa_attention(leaves[0], leaves[1], leaves[2], spec, leaves[3], leaves[4], leaves[5], leaves[6],
                        Tensor(), Tensor(), o);
  }
  sum(mul(out, probe.to(dt).to(dev))).backward();
  std::vector<Tensor> r{out.detach().to(Device::cpu())};
  for (Tensor& t : leaves) r.push_back(t.grad().to(Device::cpu()));
  return r;
}

}  // namespace

TEST_CASE("cuda: with TF32 on, Transformer-XL's positional term runs in the tensor-core kernels",
          "[cuda][rsa][backends]") {
  // The positional term inside the flash kernels (D = 32 and 64; D = 64 needs
  // the 181 KiB of opt-in shared memory of an sm_90 device: H100, H200), with
  // memory before the segment, the causal window as numbers, a same_length
  // window and dropout. tests/flash_emu runs the same kernels on the CPU.
  REMORA_REQUIRE_GPU();
  const RsaKernels& rk = kernels<RsaKernels>(kCuda);
  REQUIRE(rk.tensor_core_launches != nullptr);
  const RemSpec spec = spec_of(1, 1, 0, 0, {}, true);  // 3 REM heads of 4
  struct Config {
    int64_t D, Lq, Lk, window;
    double dropout;
  };
  for (const Config& c : {Config{32, 97, 160, -1, 0}, Config{64, 130, 200, -1, 0}, Config{32, 100, 164, 64, 0.2}}) {
    INFO("D " << c.D << " Lq " << c.Lq << " Lk " << c.Lk << " window " << c.window << " dropout " << c.dropout);
    const int64_t B = 2, H = 4;
    std::vector<Tensor> in{randn({B, H, c.Lq, c.D}, 31, false), randn({B, H, c.Lk, c.D}, 32, false),
                           randn({B, H, c.Lk, c.D}, 33, false)};
    for (const Tensor& t : rem_params_3heads()) in.push_back(t);
    in.push_back(randn({B, H, c.Lq, c.D}, 34, false));
    in.push_back(randn({H, c.Lk, c.D}, 35, false));
    const Tensor probe = randn({B, H, c.Lq, c.D}, 36, false);
    auto run = [&](Device dev, DType dt) {
      return attention_grads(in, probe, spec, dev, dt, Precision::f32, [&](RsaOptions& o, const std::vector<Tensor>& x) {
        o.dropout = c.dropout;
        o.train = c.dropout > 0;
        o.pos_q = x[7];
        o.pos_r = x[8];
        o.causal = true;
        o.window = c.window;
      });
    };
    const std::vector<Tensor> want = run(Device::cpu(), DType::f64);
    const Tf32Scope tf32(true);
    const int64_t before = rk.tensor_core_launches();
    const std::vector<Tensor> got = run(kCuda, DType::f32);
    CHECK(rk.tensor_core_launches() - before == 2);
    const char* names[] = {"out", "dq", "dk", "dv", "deta", "dnu", "dtheta", "dmu", "dpos_q", "dpos_r"};
    for (size_t t = 0; t < got.size(); ++t) expect_tf32_close(got[t], want[t], names[t]);
  }
}

TEST_CASE("cuda: under bf16 autocast, fused RSA attention runs the bf16 tensor-core kernels",
          "[cuda][rsa][backends]") {
  // bf16 operands straight into the kernels (RsaFusedProblem::bf16_operands),
  // P and dS rounded to bf16 for their products, f32 accumulation; against the
  // CPU under the same autocast (which widens the operands and keeps P and dS
  // in f32). TF32 stays off: the bf16 path does not need it.
  REMORA_REQUIRE_GPU();
  const RsaKernels& rk = kernels<RsaKernels>(kCuda);
  REQUIRE(rk.tensor_core_launches != nullptr);
  const RemSpec spec = spec_of(1, 1, 0, 0, {}, true);  // 3 REM heads of 4
  struct Config {
    int64_t D, Lq, Lk;
    bool pos;
  };
  for (const Config& c : {Config{64, 150, 150, false}, Config{128, 97, 97, false}, Config{32, 97, 160, true},
                          Config{64, 130, 200, true}}) {
    INFO("D " << c.D << " Lq " << c.Lq << " Lk " << c.Lk << (c.pos ? " positional term" : ""));
    const int64_t B = 2, H = 4;
    std::vector<Tensor> in{randn({B, H, c.Lq, c.D}, 41, false), randn({B, H, c.Lk, c.D}, 42, false),
                           randn({B, H, c.Lk, c.D}, 43, false)};
    for (const Tensor& t : rem_params_3heads()) in.push_back(t);
    if (c.pos) {
      in.push_back(randn({B, H, c.Lq, c.D}, 44, false));
      in.push_back(randn({H, c.Lk, c.D}, 45, false));
    }
    const Tensor probe = randn({B, H, c.Lq, c.D}, 46, false);
    auto run = [&](Device dev) {
      return attention_grads(in, probe, spec, dev, DType::f32, Precision::bf16,
                             [&](RsaOptions& o, const std::vector<Tensor>& x) {
                               o.causal = true;
                               if (c.pos) {
                                 o.pos_q = x[7];
                                 o.pos_r = x[8];
                               }
                             });
    };
    const std::vector<Tensor> want = run(Device::cpu());
    const Tf32Scope fp32(false);
    const int64_t before = rk.tensor_core_launches();
    const std::vector<Tensor> got = run(kCuda);
    CHECK(rk.tensor_core_launches() - before == 2);
    const char* names[] = {"out", "dq", "dk", "dv", "deta", "dnu", "dtheta", "dmu", "dpos_q", "dpos_r"};
    for (size_t t = 0; t < got.size(); ++t) {
      INFO(names[t]);
      // P and dS in bf16 (2^-9) on the device, f32 on the CPU: 3e-2 of the
      // largest entry, as the [backends] row rsa_attention/bf16_autocast.
      const double scale = std::max(1.0, want[t].abs().max().item());
      CHECK(sub(got[t].to(DType::f64), want[t].to(DType::f64)).abs().max().item() <= 3e-2 * scale);
    }
  }
}

// ---- SRU: the backend entries against a naive host loop ----

TEST_CASE("cuda: SRU recurrence, forward and backward", "[cuda][sru]") {
  REMORA_REQUIRE_GPU();
  // The CUDA kernels against the CPU backend's (which tests/test_srupp.cpp checks
  // against the composed-op reference and PyTorch), same inputs, f32.
  for (int64_t k : {3, 4})
    for (bool bidir : {false, true}) {
      SruProblem p;
      p.L = 37;
      p.B = 3;
      p.D = 10;
      p.k = k;
      p.bidirectional = bidir;
      Tensor U = randn({p.L, p.B, p.D, k}, 1, false), x = randn({p.L, p.B, p.D}, 2, false);
      Tensor v = uniform({2, p.D}, 3, -1, 1, false), b = randn({2, p.D}, 4, false);
      Tensor c0 = randn({p.B, p.D}, 5, false), mask = uniform({p.B, p.D}, 6, 0, 2, false);
      Tensor dh = randn({p.L, p.B, p.D}, 7, false), dc = randn({p.L, p.B, p.D}, 8, false);
      Tensor dcl = randn({p.B, p.D}, 9, false);
      struct Out {
        Tensor h, c, cl, dU, dx, dv, db, dc0;
      };
      auto run_on = [&](Device d) {
        auto g = [&](const Tensor& t) { return t.to(d); };
        Tensor Ug = g(U), xg = g(x), vg = g(v), bg = g(b), c0g = g(c0), mg = g(mask);
        Out o;
        o.h = Tensor::empty({p.L, p.B, p.D}, DType::f32, d);
        o.c = Tensor::empty({p.L, p.B, p.D}, DType::f32, d);
        o.cl = Tensor::empty({p.B, p.D}, DType::f32, d);
        SruForwardArgs fa;
        fa.dt = DType::f32;
        fa.p = p;
        fa.U = Ug.raw_data();
        fa.x = k == 3 ? xg.raw_data() : nullptr;
        fa.v = vg.raw_data();
        fa.b = bg.raw_data();
        fa.c0 = c0g.raw_data();
        fa.mask = mg.raw_data();
        fa.h = o.h.raw_data();
        fa.c = o.c.raw_data();
        fa.c_last = o.cl.raw_data();
        kern::sru_forward(d, fa);
        o.dU = Tensor::empty({p.L, p.B, p.D, k}, DType::f32, d);
        o.dx = Tensor::zeros({p.L, p.B, p.D}, DType::f32, d);
        o.dv = Tensor::empty({2, p.D}, DType::f32, d);
        o.db = Tensor::empty({2, p.D}, DType::f32, d);
        o.dc0 = Tensor::empty({p.B, p.D}, DType::f32, d);
        Tensor dhg = g(dh), dcg = g(dc), dclg = g(dcl);
        SruBackwardArgs ba;
        ba.dt = DType::f32;
        ba.p = p;
        ba.U = Ug.raw_data();
        ba.x = k == 3 ? xg.raw_data() : nullptr;
        ba.v = vg.raw_data();
        ba.b = bg.raw_data();
        ba.c0 = c0g.raw_data();
        ba.mask = mg.raw_data();
        ba.c = o.c.raw_data();
        ba.dh = dhg.raw_data();
        ba.dc = dcg.raw_data();
        ba.dc_last = dclg.raw_data();
        ba.dU = o.dU.raw_data();
        ba.dx = k == 3 ? o.dx.raw_data() : nullptr;
        ba.dv = o.dv.raw_data();
        ba.db = o.db.raw_data();
        ba.dc0 = o.dc0.raw_data();
        kern::sru_backward(d, ba);
        return o;
      };
      const Out want = run_on(Device::cpu()), got = run_on(kCuda);
      const std::string what = "sru k=" + std::to_string(k) + (bidir ? " bidirectional" : "");
      expect_close(got.h, want.h, what + " h");
      expect_close(got.c, want.c, what + " c");
      expect_close(got.cl, want.cl, what + " c_last");
      expect_close(got.dU, want.dU, what + " dU");
      if (k == 3) expect_close(got.dx, want.dx, what + " dx");
      expect_close(got.dv, want.dv, what + " dv");
      expect_close(got.db, want.db, what + " db");
      expect_close(got.dc0, want.dc0, what + " dc0");
    }
}
