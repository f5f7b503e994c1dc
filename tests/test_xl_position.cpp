// SPDX-License-Identifier: BSD-3-Clause
// Transformer-XL's positional term inside the fused attention
// (RsaOptions::pos_q / pos_r, backends/cpu/cpu_attention.cpp):
// - the fused CPU kernel against the composed reference, over the registry's
//   xl_position cases (cases/attention_cases.cpp), values and gradients;
// - whole models (softmax and RSA heads, memory, clamp_len, same_length) with
//   the fused positional path against the materialised bias, in f64 and f32;
// - a training run at L = 4,096 whose allocator peak stays under a limit that
//   the materialised [B, H, L, L + M] scores alone exceed.
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <remora/remora.h>
#include <string>
#include <vector>

#include "../backends/backend.h"
#include "../backends/kernels.h"
#include "../models/transformer_xl.h"
#include "../cases/cases.h"
#include "sanitizer.h"

extern char** environ;

using namespace remora;
using models::TransformerXL;
using models::XLConfig;
using models::XLState;

namespace {

double max_abs_diff(const Tensor& a, const Tensor& b) {
  if (!a.defined() && !b.defined()) return 0;
  REQUIRE(a.defined());
  REQUIRE(b.defined());
  REQUIRE(a.shape() == b.shape());
  return sub(a.to(DType::f64), b.to(DType::f64)).abs().max().item();
}
Tensor random_ids(int64_t B, int64_t L, int64_t n, uint32_t seed) {
  std::mt19937 r(seed);
  std::vector<int64_t> v(size_t(B * L));
  for (int64_t& x : v) x = int64_t(r() % uint32_t(n));
  return Tensor::from_vector(v, {B, L}, DType::i64);
}
double max_abs(const Tensor& a) { return a.defined() ? a.to(DType::f64).abs().max().item() : 0; }

const GradcheckCase* find_case(const std::string& name) {
  for (const GradcheckCase& c : gradcheck_cases())
    if (c.name == name) return &c;
  return nullptr;
}

// Output and input gradients of fn on fresh copies of `inputs` (one fixed
// cotangent), so that two functions can be compared on the same values.
struct Run {
  Tensor out;
  std::vector<Tensor> grads;
};
Run run_case(const GradFn& fn, const std::vector<Tensor>& inputs, uint64_t seed) {
  std::vector<Tensor> x;
  for (const Tensor& t : inputs) {
    if (!t.defined()) {
      x.push_back(Tensor());
      continue;
    }
    Tensor c = t.detach().clone();
    if (t.requires_grad()) c.requires_grad_();
    x.push_back(c);
  }
  Run r;
  r.out = fn(x);
  Generator g(seed);
  Tensor w = Tensor::randn(r.out.shape(), r.out.dtype(), r.out.device(), &g);
  sum(mul(r.out, w)).backward();
  for (const Tensor& t : x) r.grads.push_back(t.defined() && t.requires_grad() ? t.grad() : Tensor());
  return r;
}

}  // namespace

TEST_CASE("xl position: the fused CPU kernel matches the composed reference, values and gradients",
          "[xl_position][cpu_kernels]") {
  cases::register_all_cases();
  int compared = 0;
  for (const GradcheckCase& c : gradcheck_cases()) {
    if (c.op != "rsa_attention" || c.name.find("/xl_position_") == std::string::npos) continue;
    const std::string variant = c.name.substr(c.name.find('/') + 1);
    const GradcheckCase* ref = find_case("rsa_attention_reference/" + variant);
    REQUIRE(ref != nullptr);
    for (DType dt : {DType::f64, DType::f32}) {
      DYNAMIC_SECTION(c.name << " " << dtype_name(dt)) {
        CaseInstance fused = c.make(Device::cpu(), dt);
        CaseInstance composed = ref->make(Device::cpu(), dt);
        const Run a = run_case(fused.fn, fused.inputs, 5);
        const Run b = run_case(composed.fn, fused.inputs, 5);  // the same inputs
        const double tol = dt == DType::f64 ? 1e-11 : 2e-5;
        CHECK(max_abs_diff(a.out, b.out) <= tol * (1 + max_abs(b.out)));
        REQUIRE(a.grads.size() == b.grads.size());
        for (size_t i = 0; i < a.grads.size(); ++i) {
          INFO("input " << i);
          CHECK(max_abs_diff(a.grads[i], b.grads[i]) <= tol * (1 + max_abs(b.grads[i])));
        }
        ++compared;
      }
    }
  }
  CHECK(compared > 0);
}

TEST_CASE("xl position: the fused kernel is what the CPU runs (it declines no xl_position problem)",
          "[xl_position]") {
  RsaFusedProblem p;
  p.B = 1; p.H = 2; p.Lq = 4096; p.Lk = 8192; p.D = 8;
  p.causal = true;
  p.window = 4096;
  float dummy = 0;
  p.pos_q = &dummy;
  p.pos_r = &dummy;
  CHECK(supports(Device::cpu(), OpKind::fused_rsa, {DType::f32, &p}));
  CHECK(supports(Device::cpu(), OpKind::fused_rsa, {DType::f64, &p}));
}

TEST_CASE("xl position: bad positional inputs are clear errors", "[xl_position][errors]") {
  Tensor q = Tensor::randn({1, 2, 3, 4}), k = Tensor::randn({1, 2, 5, 4}), v = Tensor::randn({1, 2, 5, 4});
  auto attend = [&](const RsaOptions& o) { return rsa_attention(q, k, v, RemWeights{}, Tensor(), Tensor(), o); };
  RsaOptions o;
  o.pos_q = Tensor::randn({1, 2, 3, 4});
  CHECK_THROWS_WITH(attend(o), Catch::Contains("needs both pos_q and pos_r"));
  o.pos_r = Tensor::randn({2, 4, 4});
  CHECK_THROWS_WITH(attend(o), Catch::Contains("pos_r must be [H, Lk, D]"));
  o.pos_r = Tensor::randn({2, 5, 4});
  o.pos_q = Tensor::randn({1, 2, 2, 4});
  CHECK_THROWS_WITH(attend(o), Catch::Contains("pos_q must be [B, H, Lq, D]"));
  RsaOptions w;
  w.window = 3;
  CHECK_THROWS_WITH(attend(w), Catch::Contains("needs causal = true"));
  RsaOptions longer;  // more queries than keys
  longer.causal = true;
  CHECK_THROWS_WITH(rsa_attention(k, q, q, RemWeights{}, Tensor(), Tensor(), longer),
                    Catch::Contains("need Lq <= Lk"));
}

namespace {

XLConfig small_config(const std::string& attention, bool same_length, int64_t clamp_len) {
  XLConfig c;
  c.n_token = 13;
  c.n_layer = 2;
  c.n_head = 3;
  c.d_model = 12;
  c.d_inner = 20;
  c.dropout = 0;
  c.mem_len = 7;
  c.same_length = same_length;
  c.clamp_len = clamp_len;
  if (attention == "rsa") {
    c.attention = "rsa";
    c.rem.regular = 1;
    c.rem.cyclic = 1;
  }
  return c;
}

// Three segments (the first without memory, then 7 memory rows for 5
// queries): the summed loss and every parameter's gradient.
struct ModelRun {
  double loss = 0;
  std::vector<std::pair<std::string, Tensor>> grads;
};
ModelRun run_model(XLConfig c, bool fused, DType dt) {
  c.fused_position = fused;
  Generator g(17);
  TransformerXL m(c, dt, &g);
  m.train();
  Tensor ids = random_ids(2, 16, c.n_token, 3);
  XLState st;
  Tensor total;
  for (int64_t s = 0; s < 3; ++s) {
    Tensor x = ids.slice(1, 5 * s, 5 * s + 5).contiguous();
    TransformerXL::Output o = m.forward(x, st);
    Tensor loss = TransformerXL::loss(o.logits, ids.slice(1, 5 * s + 1, 5 * s + 6).contiguous());
    total = total.defined() ? add(total, loss) : loss;
    st = o.state;
  }
  total.backward();
  ModelRun r;
  r.loss = total.item();
  for (const auto& kv : m.named_parameters()) r.grads.push_back({kv.first, kv.second.grad()});
  return r;
}

}  // namespace

TEST_CASE("xl position: whole models with the fused positional term match the materialised bias",
          "[xl_position][xl]") {
  struct Variant {
    const char* name;
    const char* attention;
    bool same_length;
    int64_t clamp_len;
  };
  for (const Variant& v : {Variant{"softmax", "softmax", false, 0}, Variant{"softmax_same_length_clamp", "softmax", true, 4},
                           Variant{"rsa", "rsa", false, 0}, Variant{"rsa_same_length", "rsa", true, 0}}) {
    for (DType dt : {DType::f64, DType::f32}) {
      DYNAMIC_SECTION(v.name << " " << dtype_name(dt)) {
        const XLConfig c = small_config(v.attention, v.same_length, v.clamp_len);
        const ModelRun fused = run_model(c, true, dt), composed = run_model(c, false, dt);
        const double tol = dt == DType::f64 ? 1e-11 : 2e-5;
        INFO("loss fused " << fused.loss << ", composed " << composed.loss);
        CHECK(std::abs(fused.loss - composed.loss) <= tol * std::abs(composed.loss));
        REQUIRE(fused.grads.size() == composed.grads.size());
        for (size_t i = 0; i < fused.grads.size(); ++i) {
          INFO(fused.grads[i].first);
          CHECK(max_abs_diff(fused.grads[i].second, composed.grads[i].second) <=
                tol * (1 + max_abs(composed.grads[i].second)));
        }
      }
    }
  }
}

TEST_CASE("xl position: the activation estimate grows linearly in L with the fused term, quadratically without",
          "[xl_position][memory]") {
  XLConfig c = small_config("softmax", false, 0);
  auto at = [&](int64_t L) {
    c.mem_len = L;
    const XLConfig::ActivationBytes a = c.activation_bytes({4, L, true});
    return a.layers + a.scores + a.logits + a.memory;
  };
  c.fused_position = true;
  const double fused = at(16384) / at(4096);
  c.fused_position = false;
  const double composed = at(16384) / at(4096);
  CHECK(fused == Approx(4.0).epsilon(0.01));
  CHECK(composed > 12);
}

// ---- long context under a memory limit ----

namespace {

// The long-context run: XL with tiny width at L = 4,096 and mem_len = 4,096,
// batch 1; three training steps (the second and third with 4,096 memory rows,
// so every layer attends over 8,192 keys).
constexpr int64_t kLongL = 4096, kLongBatch = 1;
XLConfig long_config(const std::string& attention) {
  XLConfig c;
  c.n_token = 32;
  c.n_layer = 2;
  c.n_head = 2;
  c.d_model = 16;
  c.d_inner = 32;
  c.dropout = 0.1;
  c.mem_len = kLongL;
  c.same_length = true;
  c.clamp_len = 1000;
  if (attention == "rsa") {
    c.attention = "rsa";
    c.rem.regular = 1;
  }
  return c;
}

// Runs this test binary's hidden child case in a fresh process (its allocator
// peak counts that run alone) and returns the peak of live bytes it wrote.
double peak_of_child(const std::string& attention, std::string* why) {
  char tmpl[] = "/tmp/remora_xl_long_XXXXXX";
  const int fd = ::mkstemp(tmpl);
  REQUIRE(fd >= 0);
  ::close(fd);
  const std::string out = tmpl;
  std::vector<std::string> args{"/proc/self/exe", "[.xl_long_child]"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(&a[0]);
  argv.push_back(nullptr);
  std::vector<std::string> env_s;
  for (char** e = environ; *e; ++e) env_s.push_back(*e);
  env_s.push_back("REMORA_XL_LONG_OUT=" + out);
  env_s.push_back("REMORA_XL_LONG_ATTENTION=" + attention);
  std::vector<char*> envp;
  for (std::string& e : env_s) envp.push_back(&e[0]);
  envp.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  const std::string log = out + ".log";
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, "/proc/self/exe", &fa, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  REQUIRE(rc == 0);
  int status = 0;
  ::waitpid(pid, &status, 0);
  double peak = -1;
  std::ifstream f(out);
  if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0 && f >> peak)) {
    std::ifstream l(log);
    *why = std::string((std::istreambuf_iterator<char>(l)), std::istreambuf_iterator<char>());
    peak = -1;
  }
  std::remove(out.c_str());
  std::remove(log.c_str());
  return peak;
}

}  // namespace

// The limit: 32 MiB of live tensors (the fused runs measure 13-14 MiB). The
// materialised positional term alone is one [B, H, L, L + M] f32 tensor per
// layer kept for backward: 256 MiB per layer here, 8 times the limit.
TEST_CASE("xl position: training at L = 4096 stays in linear memory", "[xl_position][memory]") {
  constexpr double kLimit = 32.0 * 1024 * 1024;
  const XLConfig c = long_config("softmax");
  const double scores = 4.0 * kLongBatch * c.n_head * kLongL * (kLongL + c.mem_len);
  REQUIRE(scores > 2 * kLimit);  // the composed path exceeds the limit several times over
  // The allocator's peak is the same with or without the sanitizers; under ASan only
  // the RSA run (the fused kernel with its REM heads) checks the long path's accesses,
  // and the softmax run is left to the uninstrumented build (about 100 s of the
  // sanitizer run).
  const std::vector<const char*> attentions =
      remora_test::kAddressSanitizer ? std::vector<const char*>{"rsa"} : std::vector<const char*>{"softmax", "rsa"};
  for (const char* attention : attentions) {
    DYNAMIC_SECTION(attention) {
      std::string why;
      const double peak = peak_of_child(attention, &why);
      INFO("the training child failed: " << why);
      REQUIRE(peak > 0);
      std::printf("xl position: L = %lld, %s: allocator peak %.1f MiB (limit %.0f MiB; one materialised score tensor %.0f MiB)\n",
                  (long long)kLongL, attention, peak / 1048576.0, kLimit / 1048576.0, scores / 1048576.0);
      CHECK(peak < kLimit);
    }
  }
}

TEST_CASE("xl position: long-context training child", "[.xl_long_child]") {
  const char* out = std::getenv("REMORA_XL_LONG_OUT");
  const char* attention = std::getenv("REMORA_XL_LONG_ATTENTION");
  REQUIRE(out);
  REQUIRE(attention);
  const XLConfig c = long_config(attention);
  Generator g(1);
  TransformerXL m(c, DType::f32, &g);
  m.train();
  optim::SGD opt(m.parameters(), 0.01);
  XLState st;
  for (int step = 0; step < 3; ++step) {
    Tensor ids = random_ids(kLongBatch, kLongL + 1, c.n_token, uint32_t(step + 1));
    TransformerXL::Output o = m.forward(ids.slice(1, 0, kLongL).contiguous(), st);
    Tensor loss = TransformerXL::loss(o.logits, ids.slice(1, 1, kLongL + 1).contiguous());
    opt.zero_grad();
    loss.backward();
    opt.step();
    REQUIRE(std::isfinite(loss.item()));
    st = o.state;
  }
  std::ofstream(out) << double(backend(Device::cpu()).memory_stats().peak_live) << "\n";
}

TEST_CASE("xl: recompute_ff trains the same numbers, dropout included", "[xl][checkpoint]") {
  for (const char* attention : {"softmax", "rsa"}) {
    DYNAMIC_SECTION(attention) {
      XLConfig c = small_config(attention, false, 0);
      c.dropout = 0.3;
      const ModelRun kept = run_model(c, true, DType::f64);
      c.recompute_ff = true;
      const ModelRun again = run_model(c, true, DType::f64);
      CHECK(again.loss == kept.loss);
      REQUIRE(again.grads.size() == kept.grads.size());
      for (size_t i = 0; i < kept.grads.size(); ++i) {
        INFO(kept.grads[i].first);
        REQUIRE(again.grads[i].second.defined());
        CHECK(max_abs_diff(again.grads[i].second, kept.grads[i].second) <= 1e-13 * (1 + max_abs(kept.grads[i].second)));
      }
    }
  }
}

TEST_CASE("xl: recompute_ff lowers the activation estimate by the feed-forward activations of all layers but one",
          "[xl][checkpoint][memory]") {
  XLConfig c = small_config("softmax", false, 0);  // no dropout: two [B, T, d_inner] tensors per block
  c.n_layer = 4;
  c.d_inner = 64;
  const double kept = c.activation_bytes({4, 256, true}).layers, eval = c.activation_bytes({4, 256, false}).layers;
  c.recompute_ff = true;
  const double ff = 4.0 * 2 * 4 * 256 * 64;  // one block's 2 x [B, T, d_inner]
  CHECK(c.activation_bytes({4, 256, true}).layers == Approx(kept - 3 * ff));
  CHECK(c.activation_bytes({4, 256, false}).layers == eval);  // evaluation keeps nothing either way
}
