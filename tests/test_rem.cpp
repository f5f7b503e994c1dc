// SPDX-License-Identifier: BSD-3-Clause
// REM, the scan form and RSA attention against their references (docs/math.md#recurrence-encoding-matrices-rem and #rsa-attention-and-the-gate and #the-scan-form-applying-a-rem-in-ol).
#include <catch2/catch.hpp>
#include <remora/remora.h>

#include "helpers.h"
#include "../backends/kernels.h"

#include <cmath>
#include <limits>

using namespace remora;
using remora_test::spec_of;

namespace {

// max |a - b| / max(1, |b|) over all entries.
double rel_err(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  const std::vector<double> x = a.to_vector(), y = b.to_vector();
  double e = 0;
  for (size_t i = 0; i < x.size(); ++i)
    e = std::max(e, std::fabs(x[i] - y[i]) / std::max(1.0, std::fabs(y[i])));
  return e;
}

Tensor uniform(Generator& g, const Shape& s, double lo, double hi, DType dt = DType::f64) {
  return (Tensor::rand(s, DType::f64, Device::cpu(), &g) * (hi - lo) + lo).to(dt);
}

double max_abs(const Tensor& t) {
  double m = 0;
  for (double x : t.to_vector()) m = std::max(m, std::fabs(x));
  return m;
}

// The dense reference applied to v: rows of P [.., Hr, Lq, Lk] @ v [B, Hr, Lk, D].
Tensor dense_apply(const RemSpec& s, const Tensor& eta, const Tensor& nu, const Tensor& th,
                   const Tensor& v, int64_t Lq, const Tensor& kp = Tensor()) {
  return matmul(rem_matrix(s, eta, nu, th, Lq, v.size(2), kp), v);
}

}  // namespace

TEST_CASE("rem_matrix entries follow docs/math.md#recurrence-encoding-matrices-rem exactly", "[rem]") {
  // One head of each kind; check P against f(n) written out by hand.
  RemSpec s = spec_of(1, 1, 1, 0, {3}, true);
  Tensor eta = Tensor::from_vector(std::vector<double>{-0.7, 0.4}, {}, DType::f64);
  Tensor nu = Tensor::from_vector(std::vector<double>{0.3}, {}, DType::f64);
  Tensor th = Tensor::from_vector(std::vector<double>{2.0}, {}, DType::f64);
  const int64_t Lq = 4, Lk = 9, M = 5;
  Tensor P = rem_matrix(s, eta, nu, th, Lq, Lk);
  REQUIRE(P.shape() == Shape{4, Lq, Lk});
  const double lam = std::tanh(-0.7), lam2 = std::tanh(0.4), gam = 1 / (1 + std::exp(-0.3));
  for (int64_t i = 0; i < Lq; ++i)
    for (int64_t j = 0; j < Lk; ++j) {
      const int64_t n = M + i - j;
      const double reg = n >= 1 ? std::pow(lam, double(n)) : 0;
      const double c = n >= 1 ? std::pow(gam, double(n)) * std::cos(2.0 * double(n)) : 0;
      const double sn = n >= 1 ? std::pow(gam, double(n)) * std::sin(2.0 * double(n)) : 0;
      const double dil = (n >= 1 && n % 3 == 0) ? std::pow(lam2, double(n / 3)) : 0;
      CHECK(P.at({0, i, j}) == Approx(reg).margin(1e-15));
      CHECK(P.at({1, i, j}) == Approx(c).margin(1e-15));
      CHECK(P.at({2, i, j}) == Approx(sn).margin(1e-15));
      CHECK(P.at({3, i, j}) == Approx(dil).margin(1e-15));
    }
  // Unmasked with M = 0 is P_masked + P_masked^T.
  RemSpec u = s;
  u.masked = false;
  Tensor Pm = rem_matrix(s, eta, nu, th, 6, 6), Pu = rem_matrix(u, eta, nu, th, 6, 6);
  CHECK(rel_err(Pu, Pm + Pm.transpose(-2, -1)) == 0);
}

TEST_CASE("rem_apply (scan) matches dense P·V to 1e-12 in float64", "[rem]") {
  Generator g(7);
  struct Case {
    RemSpec spec;
    int64_t Lq, Lk;
  };
  std::vector<Case> cases;
  for (int64_t d = 2; d <= 7; ++d) {
    cases.push_back({spec_of(2, 1, 1, 1, {d, 9 - d}, true), 13, 29});   // M = 16
    cases.push_back({spec_of(1, 2, 1, 1, {d, d + 1}, false), 17, 17});
    cases.push_back({spec_of(1, 1, 1, 1, {d, 2}, true, 3 * d + 1), 11, 20});
    cases.push_back({spec_of(0, 1, 0, 1, {d}, false, 2 * d), 9, 12});
  }
  for (const Case& c : cases) {
    const RemSpec& s = c.spec;
    // lambda in (-1, 1) including near +-1 and negative; theta in all four quadrants.
    Tensor eta = uniform(g, {s.num_eta()}, -4.0, 4.0);
    Tensor nu = uniform(g, {s.num_cyclic()}, -2.0, 5.0);
    Tensor th = uniform(g, {s.num_cyclic()}, -3.14, 3.14);
    Tensor v = Tensor::randn({2, s.num_heads(), c.Lk, 3}, DType::f64, Device::cpu(), &g);
    Tensor kp = gt(Tensor::rand({2, c.Lk}, DType::f64, Device::cpu(), &g),
                   Tensor::scalar(0.8, DType::f64));
    INFO("masked=" << s.masked << " max_distance=" << s.max_distance << " dilations "
                   << s.dilations[0] << " Lq=" << c.Lq << " Lk=" << c.Lk);
    CHECK(rel_err(rem_apply(s, eta, nu, th, v, c.Lq), dense_apply(s, eta, nu, th, v, c.Lq)) < 1e-12);
    CHECK(rel_err(rem_apply(s, eta, nu, th, v, c.Lq, kp),
                  dense_apply(s, eta, nu, th, v, c.Lq, kp)) < 1e-12);
  }
}

TEST_CASE("rem_apply gradients match the dense reference's", "[rem]") {
  Generator g(11);
  for (bool masked : {true, false}) {
    RemSpec s = spec_of(1, 1, 1, 1, {2, 5}, masked);
    auto leaf = [&](const Shape& sh, double lo, double hi) {
      return uniform(g, sh, lo, hi).requires_grad_();
    };
    Tensor eta = leaf({2}, -2, 2), nu = leaf({2}, -1, 3), th = leaf({2}, -3, 3);
    Tensor v = Tensor::randn({2, 6, 40, 4}, DType::f64, Device::cpu(), &g).requires_grad_();
    Tensor probe = Tensor::randn({2, 6, 25, 4}, DType::f64, Device::cpu(), &g);
    sum(rem_apply(s, eta, nu, th, v, 25) * probe).backward();
    std::vector<Tensor> fast{eta.grad(), nu.grad(), th.grad(), v.grad()};
    for (Tensor* t : {&eta, &nu, &th, &v}) t->zero_grad();
    sum(dense_apply(s, eta, nu, th, v, 25) * probe).backward();
    std::vector<Tensor> ref{eta.grad(), nu.grad(), th.grad(), v.grad()};
    for (size_t i = 0; i < fast.size(); ++i) {
      INFO("masked=" << masked << " grad " << i);
      CHECK(rel_err(fast[i], ref[i]) < 1e-11);
    }
  }
}

TEST_CASE("a carried scan state continues the stream exactly", "[rem]") {
  // Scanning [seg1; seg2] in one go equals seg1 then seg2 from seg1's state.
  Generator g(3);
  RemSpec s = spec_of(1, 1, 1, 1, {3, 2}, true);
  Tensor eta = uniform(g, {2}, -2, 2), nu = uniform(g, {2}, 0, 3), th = uniform(g, {2}, -3, 3);
  Tensor v = Tensor::randn({2, 6, 20, 3}, DType::f64, Device::cpu(), &g);
  Tensor whole = rem_apply(s, eta, nu, th, v, 20);
  Tensor st;
  Tensor a = rem_apply(s, eta, nu, th, v.slice(2, 0, 12), 12, Tensor(), Tensor(), &st);
  REQUIRE(st.shape() == Shape{2, 6, 3, 2, 3});
  Tensor st2;
  Tensor b = rem_apply(s, eta, nu, th, v.slice(2, 12, 20), 8, Tensor(), st, &st2);
  CHECK(rel_err(cat({a, b}, 2), whole) < 1e-12);
  // A segment shorter than the largest dilation still carries correctly.
  Tensor c1 = rem_apply(s, eta, nu, th, v.slice(2, 0, 10), 10, Tensor(), Tensor(), &st);
  Tensor c2 = rem_apply(s, eta, nu, th, v.slice(2, 10, 12), 2, Tensor(), st, &st2);
  Tensor c3 = rem_apply(s, eta, nu, th, v.slice(2, 12, 20), 8, Tensor(), st2, nullptr);
  CHECK(rel_err(cat({c1, c2, c3}, 2), whole) < 1e-12);
}

TEST_CASE("REM numerics: no NaN or Inf in float32 up to distance 1e6", "[rem]") {
  RemSpec s = spec_of(2, 1, 1, 1, {7, 3}, true);
  // lambda = 0 (eta = 0), lambda near -1, gamma -> 1 (nu large).
  Tensor eta = Tensor::from_vector(std::vector<double>{0.0, -9.0, 3.0});
  Tensor nu = Tensor::from_vector(std::vector<double>{40.0, 2.0});
  Tensor th = Tensor::from_vector(std::vector<double>{0.7853981, -2.5});
  // Single entries at huge distances: one query row far from key 0.
  const int64_t Lk = 1000001;
  auto non_finite = [](const Tensor& t) {
    int64_t n = 0;
    for (double x : t.to_vector()) n += !std::isfinite(x);
    return n;
  };
  Tensor P = rem_matrix(s, eta, nu, th, 1, Lk);
  CHECK(non_finite(P) == 0);
  // lambda = 0 gives an all-zero regular head.
  for (int64_t j = 0; j < Lk; j += 99991) CHECK(P.at({0, 0, j}) == 0);
  // The scan over a long sequence stays finite.
  Tensor v = Tensor::randn({1, 7, 200000, 2});
  CHECK(non_finite(rem_apply(s, eta, nu, th, v, 200000)) == 0);
  // Gradients at lambda = 0 are finite and right (df/dlambda = 1 at n = 1).
  Tensor e = Tensor::zeros({3}, DType::f64).requires_grad_();
  Tensor n64 = nu.to(DType::f64), t64 = th.to(DType::f64);
  sum(rem_matrix(s, e, n64, t64, 1, 2).select(0, 0)).backward();
  CHECK(e.grad().at({0}) == Approx(1.0));
}

TEST_CASE("fused rsa_attention matches the composite reference", "[rem][rsa]") {
  Generator g(5);
  RemSpec s = spec_of(1, 1, 1, 1, {2, 3}, true);
  const int64_t B = 2, H = 8, Lq = 9, Lk = 14, D = 4, M = Lk - Lq;
  auto leaf = [&](const Shape& sh) {
    return Tensor::randn(sh, DType::f64, Device::cpu(), &g).requires_grad_();
  };
  Tensor q = leaf({B, H, Lq, D}), k = leaf({B, H, Lk, D}), v = leaf({B, H, Lk, D});
  Tensor eta = uniform(g, {2}, -2, 2).requires_grad_(), nu = uniform(g, {2}, 0, 3).requires_grad_(),
         th = uniform(g, {2}, -3, 3).requires_grad_(), mu = uniform(g, {6}, -3, 3).requires_grad_();
  // Causal over absolute positions: key j visible to row i when j <= M + i.
  Tensor ii = Tensor::arange(Lq, DType::f64).reshape({Lq, 1}) + double(M);
  Tensor jj = Tensor::arange(Lk, DType::f64).reshape({1, Lk});
  Tensor mask = masked_fill(Tensor::zeros({Lq, Lk}, DType::f64), gt(jj, ii),
                            -std::numeric_limits<double>::infinity());
  Tensor kp = Tensor::zeros({B, Lk}, DType::i64);
  kp.slice(1, 0, 2).fill_(1);  // first two keys padded in every row
  Tensor probe = Tensor::randn({B, H, Lq, D}, DType::f64, Device::cpu(), &g);
  std::vector<Tensor*> ins{&q, &k, &v, &eta, &nu, &th, &mu};
  for (bool train : {false, true}) {
    Generator d1(42), d2(42);
    RsaOptions o1, o2;
    o1.dropout = o2.dropout = 0.2;
    o1.train = o2.train = train;
    o1.gen = &d1;
    o2.gen = &d2;
    Tensor fast = rsa_attention(q, k, v, s, eta, nu, th, mu, mask, kp, o1);
    sum(fast * probe).backward();
    std::vector<Tensor> gf;
    for (Tensor* t : ins) {
      gf.push_back(t->grad());
      t->zero_grad();
    }
    Tensor ref = rsa_attention_reference(q, k, v, s, eta, nu, th, mu, mask, kp, o2);
    sum(ref * probe).backward();
    INFO("train=" << train);
    CHECK(rel_err(fast, ref) < 1e-12);
    for (size_t i = 0; i < ins.size(); ++i) {
      INFO("gradient of input " << i);
      CHECK(rel_err(gf[i], ins[i]->grad()) < 1e-11);
      ins[i]->zero_grad();
    }
  }
}

TEST_CASE("fused rsa_attention's causal row blocks match the reference", "[rem][rsa]") {
  // Lq >= 256 with a causal mask takes the row-block path (keys past each
  // block's last visible column are skipped); memory M = 40, padded keys.
  Generator g(7);
  RemSpec s = spec_of(2, 1, 0, 0, {}, true);
  const int64_t B = 2, H = 5, Lq = 300, Lk = 340, D = 4, M = Lk - Lq;
  auto leaf = [&](const Shape& sh) {
    return Tensor::randn(sh, DType::f64, Device::cpu(), &g).requires_grad_();
  };
  Tensor q = leaf({B, H, Lq, D}), k = leaf({B, H, Lk, D}), v = leaf({B, H, Lk, D});
  Tensor eta = uniform(g, {2}, -2, 2).requires_grad_(), nu = uniform(g, {1}, 0, 3).requires_grad_(),
         th = uniform(g, {1}, -3, 3).requires_grad_(), mu = uniform(g, {4}, -3, 3).requires_grad_();
  Tensor ii = Tensor::arange(Lq, DType::f64).reshape({Lq, 1}) + double(M);
  Tensor jj = Tensor::arange(Lk, DType::f64).reshape({1, Lk});
  Tensor mask = masked_fill(Tensor::zeros({Lq, Lk}, DType::f64), gt(jj, ii),
                            -std::numeric_limits<double>::infinity());
  Tensor kp = Tensor::zeros({B, Lk}, DType::i64);
  kp.slice(1, Lk - 5, Lk).fill_(1);
  Tensor probe = Tensor::randn({B, H, Lq, D}, DType::f64, Device::cpu(), &g);
  std::vector<Tensor*> ins{&q, &k, &v, &eta, &nu, &th, &mu};
  Tensor fast = rsa_attention(q, k, v, s, eta, nu, th, mu, mask, kp);
  sum(fast * probe).backward();
  std::vector<Tensor> gf;
  for (Tensor* t : ins) {
    gf.push_back(t->grad());
    t->zero_grad();
  }
  Tensor ref = rsa_attention_reference(q, k, v, s, eta, nu, th, mu, mask, kp);
  sum(ref * probe).backward();
  CHECK(rel_err(fast, ref) < 1e-12);
  for (size_t i = 0; i < ins.size(); ++i) {
    INFO("gradient of input " << i);
    CHECK(rel_err(gf[i], ins[i]->grad()) < 1e-11);
  }
}

TEST_CASE("REM bad input gives clear errors naming the argument", "[rem][errors]") {
  Tensor eta = Tensor::zeros({1}), nu = Tensor::zeros({1}), th = Tensor::zeros({1});
  Tensor v = Tensor::zeros({1, 3, 5, 2});
  RemSpec s = spec_of(1, 1, 0, 0, {}, true);
  // A dilations list of the wrong length.
  RemSpec bad = spec_of(1, 0, 1, 0, {2, 3}, true);
  CHECK_THROWS_WITH(rem_apply(bad, Tensor::zeros({2}), Tensor(), Tensor(), Tensor::zeros({1, 2, 5, 2}), 5),
                    Catch::Contains("dilations: expected 1 entries"));
  // A dilation below 2.
  bad = spec_of(0, 0, 1, 0, {1}, true);
  CHECK_THROWS_WITH(rem_matrix(bad, Tensor::zeros({1}), Tensor(), Tensor(), 3, 3),
                    Catch::Contains("dilations[0] = 1"));
  // Negative counts and sizes.
  bad = spec_of(-1, 0, 0, 0, {}, true);
  CHECK_THROWS_WITH(rem_matrix(bad, Tensor::zeros({1}), Tensor(), Tensor(), 3, 3),
                    Catch::Contains("counts must be >= 0"));
  CHECK_THROWS_WITH(rem_matrix(s, eta, nu, th, 4, 3), Catch::Contains("Lq <= Lk"));
  CHECK_THROWS_WITH(rem_matrix(s, eta, nu, th, -1, 3), Catch::Contains("Lq <= Lk"));
  // Wrong parameter shapes.
  CHECK_THROWS_WITH(rem_apply(s, Tensor::zeros({2}), nu, th, v, 5), Catch::Contains("rem.eta"));
  // v with the wrong number of heads.
  CHECK_THROWS_WITH(rem_apply(s, eta, nu, th, Tensor::zeros({1, 2, 5, 2}), 5),
                    Catch::Contains("REM heads"));
  // More REM heads than attention heads.
  Tensor q = Tensor::zeros({1, 2, 4, 2});
  CHECK_THROWS_WITH(rsa_attention(q, q, q, s, eta, nu, th, Tensor::zeros({3})),
                    Catch::Contains("at most 2"));
  // mu of the wrong size, a key padding mask of the wrong shape.
  Tensor q4 = Tensor::zeros({1, 4, 4, 2});
  CHECK_THROWS_WITH(rsa_attention(q4, q4, q4, s, eta, nu, th, Tensor::zeros({2})),
                    Catch::Contains("mu must be [3]"));
  CHECK_THROWS_WITH(rsa_attention(q4, q4, q4, s, eta, nu, th, Tensor::zeros({3}), Tensor(),
                                  Tensor::zeros({1, 3}, DType::i64)),
                    Catch::Contains("key_padding must be [B, Lk]"));
  // A carried state needs the masked REM without max_distance.
  RemSpec u = s;
  u.masked = false;
  Tensor st;
  CHECK_THROWS_WITH(rem_apply(u, eta, nu, th, v, 5, Tensor(), Tensor(), &st),
                    Catch::Contains("carried state"));
}

TEST_CASE("maximum/minimum split the gradient on ties, as PyTorch does", "[ops]") {
  Tensor a = Tensor::from_vector(std::vector<double>{1, 2, 3}, {}, DType::f64).requires_grad_();
  Tensor b = Tensor::from_vector(std::vector<double>{1, 5, 0}, {}, DType::f64).requires_grad_();
  sum(maximum(a, b)).backward();
  CHECK(a.grad().to_vector() == std::vector<double>{0.5, 0, 1});
  CHECK(b.grad().to_vector() == std::vector<double>{0.5, 1, 0});
}

TEST_CASE("rsa_attention carry mode matches the composite reference", "[rem][rsa]") {
  Generator g(21);
  RemSpec s = spec_of(1, 1, 1, 0, {2}, true);
  const int64_t B = 2, H = 5, Lq = 6, M = 3, Lk = M + Lq, D = 3;
  auto leaf = [&](const Shape& sh) {
    return Tensor::randn(sh, DType::f64, Device::cpu(), &g).requires_grad_();
  };
  Tensor q = leaf({B, H, Lq, D}), k = leaf({B, H, Lk, D}), v = leaf({B, H, Lk, D});
  Tensor eta = uniform(g, {2}, -2, 2).requires_grad_(), nu = uniform(g, {1}, 0, 3).requires_grad_(),
         th = uniform(g, {1}, -3, 3).requires_grad_(), mu = uniform(g, {4}, -3, 3).requires_grad_();
  Tensor state = Tensor::randn({B, 4, 2, 2, D}, DType::f64, Device::cpu(), &g);
  Tensor probe = Tensor::randn({B, H, Lq, D}, DType::f64, Device::cpu(), &g);
  std::vector<Tensor*> ins{&q, &k, &v, &eta, &nu, &th, &mu};
  std::vector<Tensor> grads[2], outs(2), states(2);
  for (int which = 0; which < 2; ++which) {
    RsaOptions o;
    o.carry = true;
    o.rem_state_in = state;
    const RsaProblem p{q, k, v, RemWeights{s, eta, nu, th, mu}, Tensor(), Tensor(), o};
    const RsaResult r = which == 0 ? rsa_attention(p) : rsa_attention_reference(p);
    outs[size_t(which)] = r.out;
    states[size_t(which)] = r.rem_state;
    sum(outs[size_t(which)] * probe).backward();
    for (Tensor* t : ins) {
      grads[which].push_back(t->grad());
      t->zero_grad();
    }
  }
  CHECK(rel_err(outs[0], outs[1]) < 1e-12);
  CHECK(rel_err(states[0], states[1]) < 1e-12);
  for (size_t i = 0; i < ins.size(); ++i) {
    INFO("gradient of input " << i);
    CHECK(rel_err(grads[0][i], grads[1][i]) < 1e-11);
  }
}

// ---- edge cases of the REM and RSA ops, on the CPU ----

TEST_CASE("rem_apply with no keys passes the carried state through", "[rem]") {
  Generator g(11);
  RemSpec s = spec_of(1, 1, 1, 1, {3, 2}, true);
  Tensor eta = uniform(g, {2}, -2, 2), nu = uniform(g, {2}, 0, 3), th = uniform(g, {2}, -3, 3);
  Tensor v = Tensor::zeros({2, 6, 0, 3}, DType::f64);
  Tensor state = Tensor::randn({2, 6, 3, 2, 3}, DType::f64, Device::cpu(), &g);
  Tensor st;
  Tensor y = rem_apply(s, eta, nu, th, v, 0, Tensor(), state, &st);
  CHECK(y.shape() == Shape{2, 6, 0, 3});
  REQUIRE(st.defined());
  CHECK(rel_err(st, state) == 0);
  // Without a state in, the state out is zeros.
  Tensor st0 = Tensor::full({1}, 7.0, DType::f64);
  rem_apply(s, eta, nu, th, v, 0, Tensor(), Tensor(), &st0);
  REQUIRE(st0.shape() == Shape{2, 6, 3, 2, 3});
  CHECK(rel_err(st0, Tensor::zeros({2, 6, 3, 2, 3}, DType::f64)) == 0);
  // The kernel itself (Lk = 0 straight to the CPU table) writes state_out too.
  RemHeadDesc heads[1] = {};
  heads[0].complex = 1;
  RemScanArgs a;
  a.dt = DType::f64;
  a.p.B = 1; a.p.H = 1; a.p.Lq = 0; a.p.Lk = 0; a.p.D = 2; a.p.dmax = 1; a.p.heads = heads;
  std::vector<double> A{0.5}, TH{0.3}, sin_{1, 2, 3, 4}, sout(4, -1.0);
  a.a = A.data();
  a.theta = TH.data();
  a.state_in = sin_.data();
  a.state_out = sout.data();
  kern::rem_scan(Device::cpu(), a);
  CHECK(sout == sin_);
}

TEST_CASE("a truncated REM with a carried state is rejected by the op and the kernel front",
          "[rem][errors]") {
  Generator g(12);
  RemSpec s = spec_of(1, 1, 0, 0, {}, true);
  s.max_distance = 5;
  Tensor eta = uniform(g, {1}, -2, 2), nu = uniform(g, {1}, 0, 3), th = uniform(g, {1}, -3, 3);
  Tensor v = Tensor::randn({1, 3, 8, 2}, DType::f64, Device::cpu(), &g);
  Tensor state = Tensor::zeros({1, 3, 1, 2, 2}, DType::f64), st;
  CHECK_THROWS_WITH(rem_apply(s, eta, nu, th, v, 8, Tensor(), state),
                    Catch::Contains("without max_distance"));
  CHECK_THROWS_WITH(rem_apply(s, eta, nu, th, v, 8, Tensor(), Tensor(), &st),
                    Catch::Contains("without max_distance"));
  // Truncated without a state is fine.
  CHECK_NOTHROW(rem_apply(s, eta, nu, th, v, 8));
  // The same rule in the kernel front every backend goes through.
  RemHeadDesc heads[1] = {};
  RemScanArgs a;
  a.dt = DType::f64;
  a.p.B = 1; a.p.H = 1; a.p.Lq = 2; a.p.Lk = 2; a.p.D = 1; a.p.dmax = 1; a.p.heads = heads;
  a.p.max_distance = 1;
  std::vector<double> A{0.5}, TH{0}, V{1, 2}, Y(2), S(2), SO(2);
  a.a = A.data(); a.theta = TH.data(); a.v = V.data(); a.y = Y.data(); a.state_in = S.data();
  CHECK_THROWS_WITH(kern::rem_scan(Device::cpu(), a), Catch::Contains("carried state"));
  a.state_in = nullptr;
  a.state_out = SO.data();
  CHECK_THROWS_WITH(kern::rem_scan(Device::cpu(), a), Catch::Contains("carried state"));
  RemScanBackwardArgs b;
  b.dt = DType::f64;
  b.p = a.p;
  std::vector<double> DY(2), DV(2), DA(1), DT(1), DS(2);
  b.a = A.data(); b.theta = TH.data(); b.v = V.data(); b.dy = DY.data(); b.dv = DV.data();
  b.da = DA.data(); b.dtheta = DT.data(); b.dstate_in = DS.data();
  CHECK_THROWS_WITH(kern::rem_scan_backward(Device::cpu(), b), Catch::Contains("carried state"));
  // Carry mode of rsa_attention says so too.
  Tensor q = Tensor::randn({1, 3, 4, 2}, DType::f64, Device::cpu(), &g);
  RsaOptions o;
  o.carry = true;
  o.rem_state_in = state;
  CHECK_THROWS_WITH(rsa_attention(q, q, q, s, eta, nu, th, Tensor::zeros({3}, DType::f64),
                                  Tensor(), Tensor(), o),
                    Catch::Contains("without max_distance"));
}

TEST_CASE("rem_apply forward and backward with a carried state agree in float64",
          "[rem]") {
  // The state gradient of the scan against central differences, and the
  // forward against the dense form over [state keys; segment]: the CPU's
  // forward and backward treat the state the same way.
  Generator g(13);
  RemSpec s = spec_of(1, 1, 1, 0, {2}, true);
  Tensor eta = uniform(g, {2}, -0.9, 0.9), nu = uniform(g, {1}, 0, 2), th = uniform(g, {1}, -3, 3);
  const int64_t B = 2, Hr = 4, L = 7, D = 2, dm = 2;
  Tensor v = Tensor::randn({B, Hr, L, D}, DType::f64, Device::cpu(), &g);
  Tensor state = Tensor::randn({B, Hr, dm, 2, D}, DType::f64, Device::cpu(), &g).requires_grad_();
  Tensor probe = Tensor::randn({B, Hr, L, D}, DType::f64, Device::cpu(), &g);
  auto loss = [&](const Tensor& st) {
    return sum(rem_apply(s, eta, nu, th, v, L, Tensor(), st) * probe).item();
  };
  sum(rem_apply(s, eta, nu, th, v, L, Tensor(), state) * probe).backward();
  Tensor grad = state.grad();
  REQUIRE(grad.defined());
  const std::vector<double> gv = grad.to_vector();
  Tensor base = state.detach().clone();
  std::vector<double> x = base.to_vector();
  const double h = 1e-6;
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    std::vector<double> xp = x, xm = x;
    xp[i] += h;
    xm[i] -= h;
    const double fd = (loss(Tensor::from_vector(xp, base.shape(), DType::f64)) -
                       loss(Tensor::from_vector(xm, base.shape(), DType::f64))) /
                      (2 * h);
    worst = std::max(worst, std::fabs(fd - gv[i]) / std::max(1.0, std::fabs(fd)));
  }
  CHECK(worst < 1e-7);
  // A state written by a first segment continues it exactly (forward), and the
  // gradient into the first segment through the state matches the one-shot scan.
  Tensor v1 = Tensor::randn({B, Hr, 5, D}, DType::f64, Device::cpu(), &g).requires_grad_();
  Tensor st;
  Tensor y1 = rem_apply(s, eta, nu, th, v1, 5, Tensor(), Tensor(), &st);
  Tensor y2 = rem_apply(s, eta, nu, th, v, L, Tensor(), st);
  Tensor whole = rem_apply(s, eta, nu, th, cat({v1.detach(), v}, 2), 5 + L);
  CHECK(rel_err(cat({y1, y2}, 2), whole) < 1e-12);
}

TEST_CASE("fully masked query rows: attention 0 and finite gradients, fused and reference",
          "[rem][rsa]") {
  Generator g(14);
  RemSpec s = spec_of(1, 0, 0, 0, {}, true);  // one REM head, H = 3
  const int64_t B = 2, H = 3, Lq = 4, Lk = 6, D = 3;
  auto leaf = [&](const Shape& sh) {
    return Tensor::randn(sh, DType::f64, Device::cpu(), &g).requires_grad_();
  };
  Tensor q = leaf({B, H, Lq, D}), k = leaf({B, H, Lk, D}), v = leaf({B, H, Lk, D});
  Tensor eta = uniform(g, {1}, -2, 2).requires_grad_(), mu = uniform(g, {1}, -3, 3).requires_grad_();
  const double inf = std::numeric_limits<double>::infinity();
  // Row 1 masks every key; batch 1 pads every key (all its rows are dead).
  Tensor mask = Tensor::zeros({Lq, Lk}, DType::f64);
  mask.select(0, 1).fill_(-inf);
  mask.select(0, 2).slice(0, 3, Lk).fill_(-inf);
  Tensor kp = Tensor::zeros({B, Lk}, DType::i64);
  kp.select(0, 1).fill_(1);
  Tensor probe = Tensor::randn({B, H, Lq, D}, DType::f64, Device::cpu(), &g);
  std::vector<Tensor*> ins{&q, &k, &v, &eta, &mu};
  auto finite = [](const Tensor& t) {
    for (double x : t.to_vector())
      if (!std::isfinite(x)) return false;
    return true;
  };
  std::vector<Tensor> outs, grads[2];
  for (int which = 0; which < 2; ++which) {
    Tensor o = which == 0 ? rsa_attention(q, k, v, s, eta, Tensor(), Tensor(), mu, mask, kp)
                          : rsa_attention_reference(q, k, v, s, eta, Tensor(), Tensor(), mu, mask, kp);
    sum(o * probe).backward();
    outs.push_back(o.detach());
    for (Tensor* t : ins) {
      grads[which].push_back(t->grad());
      t->zero_grad();
    }
  }
  for (int which = 0; which < 2; ++which) {
    INFO((which == 0 ? "rsa_attention" : "rsa_attention_reference"));
    CHECK(finite(outs[size_t(which)]));
    for (const Tensor& gr : grads[which]) CHECK(finite(gr));
    // The plain heads of a dead row output exactly 0.
    CHECK(max_abs(outs[size_t(which)].select(0, 0).slice(0, 1, H).select(1, 1)) == 0);
    CHECK(max_abs(outs[size_t(which)].select(0, 1).slice(0, 1, H)) == 0);
    // No gradient reaches the queries of dead rows.
    CHECK(max_abs(grads[which][0].select(0, 0).select(1, 1)) == 0);
    CHECK(max_abs(grads[which][0].select(0, 1)) == 0);
  }
  CHECK(rel_err(outs[0], outs[1]) < 1e-12);
  for (size_t i = 0; i < ins.size(); ++i) {
    INFO("gradient of input " << i);
    CHECK(rel_err(grads[0][i], grads[1][i]) < 1e-11);
  }
  // A NaN that comes from the inputs (not from masking) is not hidden.
  Tensor qn = q.detach().clone();
  qn.select(0, 0).select(0, 2).select(0, 0).fill_(std::nan(""));
  Tensor on = rsa_attention(qn, k.detach(), v.detach(), s, eta.detach(), Tensor(), Tensor(),
                            mu.detach(), mask, kp);
  CHECK(std::isnan(on.select(0, 0).select(0, 2).select(0, 0).select(0, 0).item()));
}
