// SPDX-License-Identifier: BSD-3-Clause
// nn::RSAAttention against an RSA attention layer written in PyTorch 1.13
// (float64 goldens from tools/goldens/make_rsa_goldens.py), and its unit tests:
// parameter names and shapes, docs/math.md#initialisation-and-checkpoint-names initialisation, errors, dropout.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>

#include "nn_golden.h"

#include "helpers.h"

using namespace remora;
using remora_test::contains;
using remora_test::error_of;
using nn_test::check_close;

namespace {

constexpr double kRtol = 1e-10;
constexpr const char* kScript = "tools/goldens/make_rsa_goldens.py";
constexpr const char* kRegenHint = "regenerate with /usr/bin/python3 tools/goldens/make_rsa_goldens.py";

const Safetensors& rsa_golden() {
  static const Safetensors st = nn_test::open_golden(
      std::string(REMORA_TEST_DATA) + "/golden_rsa.safetensors", "remora-golden-rsa", "1", kScript);
  return st;
}
const Tensor& rg(const std::string& name) { return rsa_golden().get(name); }
Tensor rleaf(const std::string& name, bool requires_grad = false) {
  Tensor t = rg(name).detach().clone();
  if (requires_grad) t.requires_grad_();
  return t;
}
nn::NamedTensors rstate(const std::string& prefix) {
  nn::NamedTensors out;
  const std::string p = prefix + ".state.";
  for (const auto& kv : rsa_golden().tensors)
    if (kv.first.compare(0, p.size(), p) == 0) out.emplace_back(kv.first.substr(p.size()), kv.second);
  REQUIRE(!out.empty());
  return out;
}

std::vector<int64_t> ints(const Tensor& t) {
  std::vector<int64_t> out;
  for (double x : t.to_vector()) out.push_back(int64_t(x));
  return out;
}

// One golden case: the spec and layer config the C++ side builds (it must match
// what the generator recorded, else the file is stale).
struct Case {
  std::string name;
  int64_t d, H;
  RemSpec spec;
  std::string gate;
  bool bias, causal;
};

Case case_of(const std::string& name) {
  Case c{name, 0, 0, {}, "head", true, true};
  if (name == "causal") {
    c.d = 32, c.H = 8;
    c.spec.regular = 1, c.spec.cyclic = 1, c.spec.dilated_regular = 1, c.spec.dilated_cyclic = 1;
    c.spec.dilations = {2, 3};
  } else if (name == "unmasked") {
    c.d = 24, c.H = 6, c.gate = "layer", c.causal = false;
    c.spec.regular = 1, c.spec.cyclic = 1, c.spec.dilated_regular = 1, c.spec.dilations = {2};
    c.spec.masked = false;
  } else if (name == "cross") {
    c.d = 24, c.H = 6;
    c.spec.regular = 1, c.spec.cyclic = 1, c.spec.dilated_cyclic = 1, c.spec.dilations = {2};
  } else if (name == "nobias_maxdist") {
    c.d = 16, c.H = 4, c.bias = false;
    c.spec.regular = 2, c.spec.cyclic = 1, c.spec.max_distance = 4;
  } else if (name == "long_causal") {
    c.d = 6, c.H = 3;
    c.spec.regular = 1, c.spec.dilated_regular = 1, c.spec.dilations = {3};
  } else {
    FAIL("unknown case " << name);
  }
  // The generator's record of the case.
  INFO("golden case '" << name << "' does not match this test's spec; " << kRegenHint);
  std::vector<int64_t> spec = {c.spec.regular, c.spec.cyclic, c.spec.dilated_regular,
                               c.spec.dilated_cyclic, int64_t(c.spec.masked), c.spec.max_distance};
  spec.insert(spec.end(), c.spec.dilations.begin(), c.spec.dilations.end());
  REQUIRE(ints(rg(name + ".spec")) == spec);
  const std::vector<int64_t> config = {c.d, c.H, int64_t(c.gate == "layer"), int64_t(c.bias),
                                       int64_t(c.causal)};
  REQUIRE(ints(rg(name + ".config")) == config);
  return c;
}

std::shared_ptr<nn::RSAAttention> build(const Case& c, DType dt = DType::f64) {
  auto m = std::make_shared<nn::RSAAttention>(c.d, c.H, c.spec, c.gate, /*dropout=*/0.1, c.bias,
                                              nn::RemInit{}, dt);
  m->eval();
  return m;
}

// Loads the case's state into m, runs fwd on the named inputs, compares the
// output and, for loss = sum(out * probe), every parameter and input gradient.
void check_case(const std::string& prefix, nn::Module& m, const std::vector<std::string>& names,
                const std::function<Tensor(const std::vector<Tensor>&)>& fwd) {
  INFO("golden case '" << prefix << "'; " << kRegenHint << " if the file is stale");
  m.load_state_dict(rstate(prefix));
  std::vector<Tensor> in;
  for (const auto& n : names) in.push_back(rleaf(prefix + "." + n, n.rfind("input", 0) == 0));
  Tensor out = fwd(in);
  check_close(out, rg(prefix + ".output"), kRtol, prefix + ".output");
  (out * rg(prefix + ".probe")).sum().backward();
  size_t n_grads = 0;
  for (const auto& kv : m.named_parameters()) {
    check_close(kv.second.grad(), rg(prefix + ".grad." + kv.first), kRtol,
                prefix + ".grad." + kv.first);
    ++n_grads;
  }
  for (size_t i = 0; i < in.size(); ++i)
    if (in[i].requires_grad()) {
      check_close(in[i].grad(), rg(prefix + ".grad." + names[i]), kRtol,
                  prefix + ".grad." + names[i]);
      ++n_grads;
    }
  // Every gradient the golden holds was compared.
  size_t golden_grads = 0;
  const std::string gp = prefix + ".grad.";
  for (const auto& kv : rsa_golden().tensors)
    if (kv.first.compare(0, gp.size(), gp) == 0) ++golden_grads;
  CHECK(n_grads == golden_grads);
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  const auto x = a.to_vector(), y = b.to_vector();
  REQUIRE(x.size() == y.size());
  double d = 0;
  for (size_t i = 0; i < x.size(); ++i) d = std::max(d, std::fabs(x[i] - y[i]));
  return d;
}


RemSpec all_kinds_spec() {
  RemSpec s;
  s.regular = 1, s.cyclic = 1, s.dilated_regular = 1, s.dilated_cyclic = 1, s.dilations = {2, 3};
  return s;
}

}  // namespace

// ---- goldens ----

TEST_CASE("RSA goldens: causal self-attention, every REM kind, gate per head", "[rsa][nn]") {
  const Case c = case_of("causal");
  auto m = build(c);
  SECTION("causal flag (fused q/k/v projection)") {
    check_case(c.name, *m, {"input"},
               [&](const std::vector<Tensor>& x) { return m->self_attention(x[0], Tensor(), Tensor(), true); });
  }
  SECTION("float -inf attn_mask instead of the flag") {
    Tensor mask = masked_fill(Tensor::zeros({9, 9}, DType::f64), triu(Tensor::ones({9, 9}, DType::i64), 1),
                              -std::numeric_limits<double>::infinity());
    check_case(c.name, *m, {"input"},
               [&](const std::vector<Tensor>& x) { return m->self_attention(x[0], mask); });
  }
  SECTION("boolean (i64) attn_mask and the flag together") {
    Tensor block = triu(Tensor::ones({9, 9}, DType::i64), 1);
    check_case(c.name, *m, {"input"},
               [&](const std::vector<Tensor>& x) { return m->self_attention(x[0], block, Tensor(), true); });
  }
  SECTION("query, key, value as distinct tensors (separate projections)") {
    m->load_state_dict(rstate(c.name));
    Tensor q = rleaf("causal.input", true), k = rleaf("causal.input", true),
           v = rleaf("causal.input", true);
    Tensor out = m->forward(q, k, v, Tensor(), Tensor(), true);
    check_close(out, rg("causal.output"), kRtol, "causal.output (distinct q, k, v)");
    (out * rg("causal.probe")).sum().backward();
    check_close(q.grad() + k.grad() + v.grad(), rg("causal.grad.input"), kRtol,
                "causal.grad.input = dq + dk + dv");
    check_close(m->rem->mu.grad(), rg("causal.grad.rem.mu"), kRtol, "causal.grad.rem.mu");
  }
  SECTION("the REM matters: the gate shut gives a different output") {
    m->load_state_dict(rstate(c.name));
    {
      NoGradGuard ng;
      m->rem->mu.fill_(-1e4);
    }
    Tensor out = m->self_attention(rleaf("causal.input"), Tensor(), Tensor(), true);
    CHECK(max_abs_diff(out, rg("causal.output")) > 1e-2);
  }
}

TEST_CASE("RSA goldens: unmasked REM with key padding, one gate for the layer", "[rsa][nn]") {
  const Case c = case_of("unmasked");
  auto m = build(c);
  REQUIRE(m->rem->mu.shape() == Shape({1}));
  check_case(c.name, *m, {"input", "key_padding_mask"}, [&](const std::vector<Tensor>& x) {
    return m->self_attention(x[0], Tensor(), x[1], false);
  });
}

TEST_CASE("RSA goldens: causal cross-attention with Lq < Lk (queries last)", "[rsa][nn]") {
  const Case c = case_of("cross");
  auto m = build(c);
  REQUIRE(rg("cross.input_q").size(1) < rg("cross.input_k").size(1));
  check_case(c.name, *m, {"input_q", "input_k", "input_v"}, [&](const std::vector<Tensor>& x) {
    return m->forward(x[0], x[1], x[2], Tensor(), Tensor(), true);
  });
}

TEST_CASE("RSA goldens: no biases, every head a REM head, max_distance", "[rsa][nn]") {
  const Case c = case_of("nobias_maxdist");
  auto m = build(c);
  REQUIRE(m->named_parameters().size() == 6);
  check_case(c.name, *m, {"input"},
             [&](const std::vector<Tensor>& x) { return m->self_attention(x[0], Tensor(), Tensor(), true); });
}

TEST_CASE("RSA goldens: long causal self-attention with key padding (row blocks)", "[rsa][nn]") {
  // L = 260 >= 256: rsa_attention splits the causal rows into blocks of 128.
  const Case c = case_of("long_causal");
  auto m = build(c);
  check_case(c.name, *m, {"input", "key_padding_mask"}, [&](const std::vector<Tensor>& x) {
    return m->self_attention(x[0], Tensor(), x[1], true);
  });
}

TEST_CASE("RSA goldens: an f32 layer agrees with the f64 reference to f32 precision", "[rsa][nn]") {
  const Case c = case_of("causal");
  auto m = build(c, DType::f32);
  m->load_state_dict(rstate(c.name));
  Tensor x = rg("causal.input").to(DType::f32).detach().requires_grad_();
  Tensor out = m->self_attention(x, Tensor(), Tensor(), true);
  CHECK(out.dtype() == DType::f32);
  check_close(out.to(DType::f64), rg("causal.output"), 1e-5, "f32 output");
  (out * rg("causal.probe").to(DType::f32)).sum().backward();
  check_close(x.grad().to(DType::f64), rg("causal.grad.input"), 1e-5, "f32 input grad");
  check_close(m->rem->eta.grad().to(DType::f64), rg("causal.grad.rem.eta"), 1e-5, "f32 eta grad");
}

TEST_CASE("RSA goldens: a missing or stale file fails with the regenerate hint", "[rsa][nn]") {
  std::string e = error_of([] {
    nn_test::open_golden("no_such_golden_rsa.safetensors", "remora-golden-rsa", "1", kScript);
  });
  CHECK(contains(e, "is missing"));
  CHECK(contains(e, kRegenHint));
  const std::string path = "stale_golden_rsa_test.safetensors";
  save_safetensors(path, {{"x", Tensor::zeros({1}, DType::f64)}},
                   {{"format", "remora-golden-rsa"}, {"version", "0"}});
  e = error_of([&] { nn_test::open_golden(path, "remora-golden-rsa", "1", kScript); });
  std::remove(path.c_str());
  CHECK(contains(e, "is stale"));
  CHECK(contains(e, kRegenHint));
}

// ---- unit tests ----

TEST_CASE("RSAAttention: parameter names and shapes", "[rsa][nn]") {
  const RemSpec spec = all_kinds_spec();  // Hr = 6, eta 2, nu/theta 2
  nn::RSAAttention m(32, 8, spec, "head");
  const std::vector<std::pair<std::string, Shape>> want = {
      {"in_proj_weight", {96, 32}}, {"in_proj_bias", {96}},  {"out_proj.weight", {32, 32}},
      {"out_proj.bias", {32}},      {"rem.eta", {2}},        {"rem.nu", {2}},
      {"rem.theta", {2}},           {"rem.mu", {6}}};
  auto np = m.named_parameters();
  REQUIRE(np.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    CHECK(np[i].first == want[i].first);
    CHECK(shape_str(np[i].second.shape()) == shape_str(want[i].second));
  }
  CHECK(m.state_dict().size() == want.size());
  CHECK(m.rem->mu.is_same(np[7].second));

  nn::RSAAttention layer(32, 8, spec, "layer");
  CHECK(shape_str(layer.rem->mu.shape()) == "[1]");

  // Kinds the spec lacks have no parameter; bias = false drops both biases.
  RemSpec reg;
  reg.regular = 3;
  nn::RSAAttention r(16, 4, reg, "head", 0, /*bias=*/false);
  std::vector<std::string> names;
  for (auto& kv : r.named_parameters()) names.push_back(kv.first);
  CHECK(names == std::vector<std::string>{"in_proj_weight", "out_proj.weight", "rem.eta", "rem.mu"});
  RemSpec cyc;
  cyc.dilated_cyclic = 1, cyc.dilations = {4};
  nn::RSAAttention cy(16, 4, cyc);
  names.clear();
  for (auto& kv : cy.named_parameters()) names.push_back(kv.first);
  CHECK(names == std::vector<std::string>{"in_proj_weight", "in_proj_bias", "out_proj.weight",
                                          "out_proj.bias", "rem.nu", "rem.theta", "rem.mu"});
  CHECK(shape_str(cy.rem->mu.shape()) == "[2]");
}

TEST_CASE("RSAAttention: docs/math.md#initialisation-and-checkpoint-names initialisation ranges", "[rsa][nn]") {
  manual_seed(11);
  RemSpec spec;
  spec.regular = 400, spec.cyclic = 150, spec.dilated_regular = 100, spec.dilated_cyclic = 50;
  spec.dilations.assign(150, 2);
  const int64_t Hr = spec.num_heads();  // 400 + 300 + 100 + 100
  nn::RSAAttention m(Hr, Hr, spec, "head", 0, true, nn::RemInit{}, DType::f64);
  const auto eta = m.rem->eta.to_vector(), nu = m.rem->nu.to_vector(),
             theta = m.rem->theta.to_vector(), mu = m.rem->mu.to_vector();
  REQUIRE(eta.size() == 500);
  REQUIRE(nu.size() == 200);
  REQUIRE(mu.size() == size_t(Hr));
  int neg = 0, pos = 0;
  double eta_lo = 9, eta_hi = -9;
  for (double x : eta) {
    CHECK(((x >= -2 && x <= -1) || (x >= 1 && x <= 2)));
    (x < 0 ? neg : pos)++;
    eta_lo = std::min(eta_lo, x), eta_hi = std::max(eta_hi, x);
  }
  CHECK(neg > 200);  // both intervals, about equally
  CHECK(pos > 200);
  CHECK(eta_lo < -1.95);
  CHECK(eta_hi > 1.95);
  double nu_lo = 9, nu_hi = -9;
  for (double x : nu) {
    CHECK((x >= 1 && x <= 2));
    nu_lo = std::min(nu_lo, x), nu_hi = std::max(nu_hi, x);
  }
  CHECK(nu_lo < 1.05);
  CHECK(nu_hi > 1.95);
  for (double x : theta) CHECK(x == std::atan(1.0));  // pi / 4
  double mu_lo = 9, mu_hi = -9, mu_sum = 0;
  for (double x : mu) {
    CHECK((x >= -3 && x <= 3));
    mu_lo = std::min(mu_lo, x), mu_hi = std::max(mu_hi, x), mu_sum += x;
  }
  CHECK(mu_lo < -2.9);
  CHECK(mu_hi > 2.9);
  CHECK(std::fabs(mu_sum / double(mu.size())) < 0.25);
  // Trainable leaves, like every parameter.
  for (const Tensor& t : {m.rem->eta, m.rem->nu, m.rem->theta, m.rem->mu})
    CHECK((t.requires_grad() && t.is_leaf() && t.dtype() == DType::f64));
  // Same generator seed, same draws.
  Generator g1(5), g2(5);
  nn::RSAAttention a(32, 8, all_kinds_spec(), "head", 0, true, {}, DType::f64, &g1);
  nn::RSAAttention b(32, 8, all_kinds_spec(), "head", 0, true, {}, DType::f64, &g2);
  CHECK(a.rem->eta.to_vector() == b.rem->eta.to_vector());
  CHECK(a.rem->mu.to_vector() == b.rem->mu.to_vector());
  CHECK(a.in_proj_weight.to_vector() == b.in_proj_weight.to_vector());
}

TEST_CASE("RSAAttention: explicit initial values and ranges via nn::RemInit", "[rsa][nn]") {
  nn::RemInit init;
  init.eta = {0.5, -0.25};
  init.nu = {3.0, -1.0};
  init.thetas = {0.1, 2.5};
  init.mu = {-1, -2, -3, 1, 2, 3};
  nn::RSAAttention m(32, 8, all_kinds_spec(), "head", 0, true, init, DType::f64);
  CHECK(m.rem->eta.to_vector() == std::vector<double>{0.5, -0.25});
  CHECK(m.rem->nu.to_vector() == std::vector<double>{3.0, -1.0});
  CHECK(m.rem->theta.to_vector() == std::vector<double>{0.1, 2.5});
  CHECK(m.rem->mu.to_vector() == std::vector<double>{-1, -2, -3, 1, 2, 3});
  // reset_parameters() restores them after training moved them.
  {
    NoGradGuard ng;
    m.rem->eta.fill_(9);
    m.rem->mu.fill_(9);
  }
  m.rem->reset_parameters();
  CHECK(m.rem->eta.to_vector() == std::vector<double>{0.5, -0.25});
  CHECK(m.rem->mu.to_vector() == std::vector<double>{-1, -2, -3, 1, 2, 3});

  // Ranges and a single theta for every pair.
  nn::RemInit r;
  r.eta_range = {0.1, 0.2};
  r.nu_range = {-0.5, -0.4};
  r.theta = 1.25;
  r.mu_range = {-3, -2.5, 2.5, 3};
  nn::RSAAttention n(32, 8, all_kinds_spec(), "layer", 0, true, r, DType::f64);
  for (double x : n.rem->eta.to_vector()) CHECK((x >= 0.1 && x <= 0.2));
  for (double x : n.rem->nu.to_vector()) CHECK((x >= -0.5 && x <= -0.4));
  for (double x : n.rem->theta.to_vector()) CHECK(x == 1.25);
  REQUIRE(n.rem->mu.numel() == 1);
  const double mu0 = n.rem->mu.to_vector()[0];
  CHECK(((mu0 >= -3 && mu0 <= -2.5) || (mu0 >= 2.5 && mu0 <= 3)));
  nn::RemInit one;
  one.mu = {0.75};
  CHECK(nn::RSAAttention(32, 8, all_kinds_spec(), "layer", 0, true, one, DType::f64)
            .rem->mu.to_vector() == std::vector<double>{0.75});
}

TEST_CASE("RSAAttention: configuration errors", "[rsa][nn]") {
  const RemSpec spec = all_kinds_spec();  // 6 REM heads
  std::string e = error_of([&] { nn::RSAAttention(16, 4, spec); });
  CHECK(contains(e, "6 REM heads but only 4 heads"));
  e = error_of([&] { nn::RSAAttention(32, 8, spec, "heads"); });
  CHECK(contains(e, "gate must be \"head\" or \"layer\""));
  CHECK(contains(e, "\"heads\""));
  // An init that `edit` spoils, with gate `gate`, gives an error containing `msg`.
  auto bad_init = [&](void (*edit)(nn::RemInit&), const char* gate, const char* msg) {
    nn::RemInit bad;
    edit(bad);
    CHECK(contains(error_of([&] { nn::RSAAttention(32, 8, spec, gate, 0, true, bad); }), msg));
  };
  bad_init([](nn::RemInit& i) { i.eta = {1, 2, 3}; }, "head", "init.eta has 3 values, expected 2");
  bad_init([](nn::RemInit& i) { i.nu = {1}; }, "head", "init.nu has 1 values, expected 2");
  bad_init([](nn::RemInit& i) { i.thetas = {1, 2, 3}; }, "head", "init.thetas has 3 values, expected 2");
  // Per-head values for a layer gate.
  bad_init([](nn::RemInit& i) { i.mu = {1, 2, 3, 4, 5, 6}; }, "layer", "init.mu has 6 values, expected 1");
  bad_init([](nn::RemInit& i) { i.eta_range = {1, 2, 3}; }, "head",
           "init.eta_range must be [lo, hi] or [lo1, hi1, lo2, hi2]");
  RemSpec nodil = spec;
  nodil.dilations = {2};
  e = error_of([&] { nn::RSAAttention(32, 8, nodil); });
  CHECK(contains(e, "dilations"));
  e = error_of([&] { nn::RSAAttention(30, 8, spec); });
  CHECK(contains(e, "RSAAttention: d = 30 is not divisible by num_heads = 8"));
  e = error_of([&] { nn::RSAAttention(32, 8, spec, "head", 1.0); });
  CHECK(contains(e, "dropout must be in [0, 1)"));
  // Forward shape errors name the argument.
  nn::RSAAttention m(32, 8, spec);
  e = error_of([&] { m.self_attention(Tensor::zeros({2, 5, 16})); });
  CHECK(contains(e, "query must be [B, Lq, 32], got [2, 5, 16]"));
  e = error_of([&] { m.self_attention(Tensor::zeros({2, 5, 32}), Tensor::zeros({5, 4})); });
  CHECK(contains(e, "attn_mask must be [Lq, Lk] = [5, 5], got [5, 4]"));
  e = error_of([&] { m.forward(Tensor::zeros({2, 5, 32}), Tensor::zeros({2, 4, 32}), Tensor::zeros({2, 4, 32})); });
  CHECK(contains(e, "exceeds key length"));
}

TEST_CASE("RSAAttention: dropout acts in train mode only", "[rsa][nn]") {
  manual_seed(3);
  nn::RSAAttention m(32, 8, all_kinds_spec(), "head", 0.5, true, {}, DType::f64);
  CHECK(m.is_training());
  CHECK(m.rem->is_training());
  Tensor x = Tensor::randn({2, 7, 32}, DType::f64);
  Tensor a = m.self_attention(x, Tensor(), Tensor(), true), b = m.self_attention(x, Tensor(), Tensor(), true);
  CHECK(max_abs_diff(a, b) > 1e-3);
  // The dropout-free layer with the same weights: what eval mode must give.
  nn::RSAAttention ref(32, 8, all_kinds_spec(), "head", 0.0, true, {}, DType::f64);
  ref.load_state_dict(m.state_dict());
  const Tensor want = ref.self_attention(x, Tensor(), Tensor(), true);
  CHECK(max_abs_diff(a, want) > 1e-3);
  m.eval();
  Tensor c = m.self_attention(x, Tensor(), Tensor(), true), d = m.self_attention(x, Tensor(), Tensor(), true);
  CHECK(c.to_vector() == d.to_vector());
  CHECK(max_abs_diff(c, want) <= 1e-14 * std::max(1.0, max_abs_diff(want, want * 0.0)));
  // Train mode again: gradients still flow to every parameter through the dropout.
  m.train();
  (m.self_attention(x, Tensor(), Tensor(), true) * 1.0).sum().backward();
  for (const auto& kv : m.named_parameters()) {
    INFO(kv.first);
    CHECK(kv.second.grad().defined());
  }
}

TEST_CASE("RSAAttention: reset_parameters re-initialises the REM parameters too", "[rsa][nn]") {
  nn::RemInit init;
  init.eta = {0.5, -0.25};
  init.mu = {-1, -2, -3, 1, 2, 3};
  nn::RSAAttention m(32, 8, all_kinds_spec(), "head", 0, true, init, DType::f64);
  {
    NoGradGuard ng;
    for (auto& kv : m.named_parameters()) kv.second.fill_(9);
  }
  m.reset_parameters();
  CHECK(m.rem->eta.to_vector() == std::vector<double>{0.5, -0.25});
  CHECK(m.rem->mu.to_vector() == std::vector<double>{-1, -2, -3, 1, 2, 3});
  for (double x : m.rem->nu.to_vector()) CHECK((x >= 1 && x <= 2));
  for (double x : m.rem->theta.to_vector()) CHECK(x == std::atan(1.0));
  for (double x : m.in_proj_bias.to_vector()) CHECK(x == 0);
  for (double x : m.out_proj->bias.to_vector()) CHECK(x == 0);
  for (const Tensor& t : {m.in_proj_weight, m.out_proj->weight})
    for (double x : t.to_vector()) CHECK(std::fabs(x) < 1);
}
