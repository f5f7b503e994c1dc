// SPDX-License-Identifier: BSD-3-Clause
// Optimizers, clipping and schedules against torch.optim 1.13 (float64 goldens).
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>

#include "nn_golden.h"

using namespace remora;
using nn_test::check_close;
using nn_test::g;
using nn_test::golden;
using nn_test::leaf;

namespace {

constexpr int kSteps = 5;
constexpr int kLongSteps = 10;  // LONG_OPTIMIZERS: RAdam rectifies from step 6
constexpr int kParams = 3;

// The steps the golden holds for an optimizer (STEPS or LONG_STEPS in the script).
int steps_of(const std::string& name) { return name.rfind("radam", 0) == 0 ? kLongSteps : kSteps; }

std::vector<Tensor> fresh_params() {
  std::vector<Tensor> ps;
  for (int j = 0; j < kParams; ++j) ps.push_back(leaf("optim.init." + std::to_string(j), true));
  return ps;
}

// The same hyper-parameters as OPTIMIZERS and LONG_OPTIMIZERS in tools/goldens/make_nn_goldens.py.
std::unique_ptr<optim::Optimizer> make(const std::string& name, std::vector<Tensor> ps) {
  if (name == "sgd_nesterov") return std::make_unique<optim::SGD>(ps, 0.1, 0.9, 0, 0.01, true);
  if (name == "sgd_dampening") return std::make_unique<optim::SGD>(ps, 0.05, 0.8, 0.1);
  if (name == "sgd_plain") return std::make_unique<optim::SGD>(ps, 0.2);
  if (name == "adam") return std::make_unique<optim::Adam>(ps, 0.01, 0.8, 0.95, 1e-6, 0.05);
  if (name == "adamw") return std::make_unique<optim::AdamW>(ps, 0.01, 0.9, 0.999, 1e-8, 0.1);
  if (name == "radam") return std::make_unique<optim::RAdam>(ps, 0.01, 0.9, 0.999, 1e-8, 0.1);
  if (name == "radam_decoupled") return std::make_unique<optim::RAdam>(ps, 0.01, 0.9, 0.999, 1e-8, 0.1, true);
  FAIL("unknown optimizer " << name);
  return nullptr;
}

// Sets the golden gradients of step s (undefined where torch had None).
void set_grads(std::vector<Tensor>& ps, int s) {
  for (int j = 0; j < kParams; ++j) {
    const std::string k = "optim.grad." + std::to_string(s) + "." + std::to_string(j);
    ps[size_t(j)].set_grad(golden().contains(k) ? leaf(k) : Tensor());
  }
}

}  // namespace

TEST_CASE("optimizers match torch.optim 1.13 step by step", "[optim]") {
  REQUIRE_FALSE(golden().contains("optim.grad.2.1"));  // the skipped-gradient case is present
  for (const char* name :
       {"sgd_nesterov", "sgd_dampening", "sgd_plain", "adam", "adamw", "radam", "radam_decoupled"}) {
    DYNAMIC_SECTION(name) {
      std::vector<Tensor> ps = fresh_params();
      auto opt = make(name, ps);
      const int steps = steps_of(name);
      for (int s = 0; s < steps; ++s) {
        opt->zero_grad();
        set_grads(ps, s);
        opt->step();
        for (int j = 0; j < kParams; ++j) {
          const std::string k = std::string(name) + ".param." + std::to_string(s) + "." + std::to_string(j);
          check_close(ps[size_t(j)], g(k), 1e-12, k);
        }
      }
      CHECK(opt->steps_taken() == steps);
    }
  }
}

TEST_CASE("clip_grad_norm_ matches torch.nn.utils.clip_grad_norm_", "[optim]") {
  for (auto c : {std::make_pair("clip", 0.5), std::make_pair("noclip", 100.0)}) {
    DYNAMIC_SECTION(c.first) {
      std::vector<Tensor> ps;
      for (int j = 0; j < kParams; ++j) {
        Tensor p = Tensor::zeros(g("clip.grad." + std::to_string(j)).shape(), DType::f64).requires_grad_();
        p.set_grad(leaf("clip.grad." + std::to_string(j)));
        ps.push_back(p);
      }
      ps.push_back(Tensor::zeros({2}, DType::f64).requires_grad_());  // no grad: ignored
      const std::string pre = std::string("clip.") + c.first;
      const double total = optim::clip_grad_norm_(ps, c.second);
      CHECK(total == Approx(g(pre + ".total_norm").item()).epsilon(1e-14));
      for (int j = 0; j < kParams; ++j)
        check_close(ps[size_t(j)].grad(), g(pre + ".grad." + std::to_string(j)), 1e-14,
                    pre + ".grad." + std::to_string(j));
      CHECK_FALSE(ps.back().grad().defined());
    }
  }
}

// The per-parameter formula clip_grad_norm_ used before it ran on the device
// (one .item() per gradient): the device version must give the same total and
// the same gradients up to one rounding (the f64 summation order of the norms).
TEST_CASE("clip_grad_norm_ matches the per-parameter reference formula", "[optim]") {
  for (int fused = 0; fused < 2; ++fused)
  for (DType dt : {DType::f32, DType::f64}) {
    for (double max_norm : {0.05, 1.0, 1e6}) {
      DYNAMIC_SECTION((fused ? "fused " : "host ") << dtype_name(dt) << " max_norm " << max_norm) {
        Generator gen(1234);
        std::vector<Tensor> ps, want;
        double sq = 0;
        for (int64_t n : {7, 64, 1, 300}) {
          Tensor p = Tensor::zeros({n}, dt).requires_grad_();
          Tensor gr = Tensor::randn({n}, dt, Device::cpu(), &gen);
          p.set_grad(gr);
          const double nrm = std::sqrt(sum(mul(gr, gr)).item());
          sq += nrm * nrm;
          ps.push_back(p);
        }
        ps.push_back(Tensor::zeros({3}, dt).requires_grad_());  // no grad: ignored
        ps.push_back(Tensor());                                  // undefined: ignored
        const double total = std::sqrt(sq);
        const double coef = max_norm / (total + 1e-6);
        for (size_t i = 0; i + 2 < ps.size(); ++i)
          want.push_back(coef < 1 ? affine(ps[i].grad(), coef, 0) : ps[i].grad().clone());
        const double got = fused ? optim::clip_grad_norm_fused_(ps, max_norm)
                                 : optim::clip_grad_norm_(ps, max_norm);
        CHECK(got == Approx(total).epsilon(1e-15));
        for (size_t i = 0; i + 2 < ps.size(); ++i) {
          const std::vector<double> a = ps[i].grad().to_vector(), b = want[i].to_vector();
          REQUIRE(a.size() == b.size());
          // One rounding of the dtype: the f64 sum of the squared norms runs in
          // the reduction's order, not the loop's, so coef may differ by an ulp.
          const double tol = dt == DType::f32 ? 1.2e-7 : 4.5e-16;
          for (size_t j = 0; j < a.size(); ++j) CHECK(std::fabs(a[j] - b[j]) <= tol * std::fabs(b[j]));
        }
        CHECK_FALSE(ps[ps.size() - 2].grad().defined());
      }
    }
  }
  SECTION("no gradients at all: 0, nothing changes") {
    std::vector<Tensor> ps{Tensor::zeros({2}).requires_grad_()};
    CHECK(optim::clip_grad_norm_(ps, 1.0) == 0.0);
    CHECK(optim::clip_grad_norm_fused_(ps, 1.0) == 0.0);
    CHECK_FALSE(ps[0].grad().defined());
  }
}

TEST_CASE("optimizer state: save, load, resume gives identical parameters", "[optim]") {
  for (const char* name : {"sgd_nesterov", "adam", "adamw", "radam_decoupled"}) {
    DYNAMIC_SECTION(name) {
      const int steps = steps_of(name);  // radam_decoupled: saved before its rectified steps, resumed through them
      std::vector<Tensor> a = fresh_params();
      auto oa = make(name, a);
      for (int s = 0; s < 3; ++s) {
        set_grads(a, s);
        oa->step();
      }
      const std::string path = std::string("optim_state_test_") + name + ".safetensors";
      save_safetensors(path, oa->state());
      // A resumed run: copies of the parameters, a new optimizer, the loaded state.
      std::vector<Tensor> b;
      for (const Tensor& p : a) b.push_back(p.detach().clone().requires_grad_());
      auto ob = make(name, b);
      ob->set_lr(123);  // overwritten by the stored lr
      ob->load_state(load_safetensors(path).tensors);
      std::remove(path.c_str());
      CHECK(ob->steps_taken() == 3);
      CHECK(ob->lr() == oa->lr());
      for (int s = 3; s < steps; ++s) {
        set_grads(a, s);
        set_grads(b, s);
        oa->step();
        ob->step();
      }
      for (int j = 0; j < kParams; ++j) CHECK(a[size_t(j)].to_vector() == b[size_t(j)].to_vector());
      // and both still equal torch's
      for (int j = 0; j < kParams; ++j)
        check_close(b[size_t(j)],
                    g(std::string(name) + ".param." + std::to_string(steps - 1) + "." + std::to_string(j)), 1e-12,
                    "resumed");
    }
  }
  // Names as documented.
  std::vector<Tensor> ps = fresh_params();
  optim::Adam adam(ps);
  set_grads(ps, 0);
  adam.step();
  std::vector<std::string> names;
  for (auto& kv : adam.state()) names.push_back(kv.first);
  CHECK(names == std::vector<std::string>{"step", "lr", "0.step", "0.exp_avg", "0.exp_avg_sq", "1.step",
                                          "1.exp_avg", "1.exp_avg_sq", "2.step", "2.exp_avg",
                                          "2.exp_avg_sq"});
  optim::SGD sgd(ps, 0.1, 0.9);
  sgd.step();
  CHECK(sgd.state()[2].first == "0.momentum_buffer");
}

TEST_CASE("optimizer load_state and constructor errors are clear", "[optim]") {
  std::vector<Tensor> ps = fresh_params();
  optim::Adam adam(ps);
  set_grads(ps, 0);
  adam.step();
  const auto good = adam.state();
  auto without = [&](const std::string& k) {
    optim::NamedTensors out;
    for (auto& kv : good)
      if (kv.first != k) out.push_back(kv);
    return out;
  };
  CHECK_THROWS_WITH(adam.load_state(without("step")), Catch::Contains("missing key 'step'"));
  CHECK_THROWS_WITH(adam.load_state(without("1.exp_avg_sq")), Catch::Contains("missing key '1.exp_avg_sq'"));
  auto extra = good;
  extra.emplace_back("3.exp_avg", Tensor::zeros({1}, DType::f64));
  CHECK_THROWS_WITH(adam.load_state(extra), Catch::Contains("names parameter 3 but the optimizer has 3"));
  extra = good;
  extra.emplace_back("0.momentum_buffer", Tensor::zeros({3, 4}, DType::f64));
  CHECK_THROWS_WITH(adam.load_state(extra), Catch::Contains("unexpected key '0.momentum_buffer'"));
  auto bad = without("0.exp_avg");
  bad.emplace_back("0.exp_avg", Tensor::zeros({4, 3}, DType::f64));
  CHECK_THROWS_WITH(adam.load_state(bad),
                    Catch::Contains("size mismatch for '0.exp_avg': checkpoint has [4, 3], parameter 0 is [3, 4]"));
  CHECK_NOTHROW(adam.load_state(good));

  CHECK_THROWS_WITH(optim::Adam(ps, 1e-3, 1.0), Catch::Contains("beta1"));
  CHECK_THROWS_WITH(optim::SGD(ps, 0.1, 0, 0, 0, true), Catch::Contains("nesterov"));
  CHECK_THROWS_WITH(optim::SGD({ps[0], ps[0]}, 0.1), Catch::Contains("more than once"));
  Tensor nonleaf = ps[0] * 2.0;
  CHECK_THROWS_WITH(optim::SGD({nonleaf}, 0.1), Catch::Contains("not a leaf"));
}

TEST_CASE("optimizers train a module end to end (f32)", "[optim]") {
  manual_seed(3);
  nn::Linear m(4, 1);
  Tensor x = Tensor::randn({64, 4});
  Tensor w_true = Tensor::from_vector(std::vector<double>{1, -2, 0.5, 3}, {4, 1});
  Tensor y = matmul(x, w_true) + 0.25;
  optim::AdamW opt(m.parameters(), 0.05, 0.9, 0.999, 1e-8, 0.0);
  double first = 0, last = 0;
  for (int s = 0; s < 300; ++s) {
    opt.zero_grad();
    Tensor loss = pow(m.forward(x) - y, 2).mean();
    loss.backward();
    optim::clip_grad_norm_(m.parameters(), 10.0);
    opt.step();
    (s == 0 ? first : last) = loss.item();
  }
  CHECK(last < 1e-3 * first);
  CHECK(m.bias.item() == Approx(0.25).margin(0.02));
}

TEST_CASE("LR schedules: documented values", "[optim]") {
  using S = optim::LRSchedule;
  S cos{S::warmup_cosine, 10, 110, 0.1};
  CHECK(cos.lr_at(0) == 0);
  CHECK(cos.lr_at(5) == Approx(0.5));
  CHECK(cos.lr_at(10) == Approx(1));
  CHECK(cos.lr_at(35) == Approx(0.1 + 0.9 * 0.5 * (1 + std::cos(3.14159265358979323846 / 4))));
  CHECK(cos.lr_at(60) == Approx(0.55));
  CHECK(cos.lr_at(110) == Approx(0.1));
  CHECK(cos.lr_at(1000) == Approx(0.1));
  S lin{S::warmup_linear, 10, 110, 0.1};
  CHECK(lin.lr_at(2) == Approx(0.2));
  CHECK(lin.lr_at(35) == Approx(0.775));
  CHECK(lin.lr_at(60) == Approx(0.55));
  CHECK(lin.lr_at(110) == Approx(0.1));
  CHECK(lin.lr_at(500) == Approx(0.1));
  S con{S::constant, 4, 0, 0};
  CHECK(con.lr_at(1) == Approx(0.25));
  CHECK(con.lr_at(4) == 1);
  CHECK(con.lr_at(100000) == 1);
  S nowarm{S::warmup_cosine, 0, 100, 0};
  CHECK(nowarm.lr_at(0) == 1);
  CHECK(nowarm.lr_at(50) == Approx(0.5));
  CHECK(nowarm.lr_at(100) == Approx(0).margin(1e-15));
  CHECK(S::parse_kind("warmup_linear") == S::warmup_linear);
  CHECK_THROWS_WITH(S::parse_kind("step"), Catch::Contains("unknown schedule 'step'"));
  CHECK_THROWS(cos.lr_at(-1));
}

TEST_CASE("optimizer option builders give the positional forms' updates", "[optim]") {
  // The golden hyper-parameters through the builders: the same numbers as the
  // positional constructors, bit for bit.
  auto run = [](std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)> mk) {
    std::vector<Tensor> ps = fresh_params();
    auto opt = mk(ps);
    for (int s = 0; s < kSteps; ++s) {
      opt->zero_grad();
      set_grads(ps, s);
      opt->step();
    }
    std::vector<double> out;
    for (const Tensor& p : ps)
      for (double v : p.to_vector()) out.push_back(v);
    return std::make_pair(opt->type_name(), out);
  };
  using P = std::vector<Tensor>;
  const std::vector<std::pair<const char*, std::function<std::unique_ptr<optim::Optimizer>(P)>>> built = {
      {"sgd_nesterov", [](P ps) { return std::make_unique<optim::SGD>(ps, optim::SGDOptions(0.1).momentum(0.9).weight_decay(0.01).nesterov(true)); }},
      {"sgd_dampening", [](P ps) { return std::make_unique<optim::SGD>(ps, optim::SGDOptions(0.05).momentum(0.8).dampening(0.1)); }},
      {"sgd_plain", [](P ps) { return std::make_unique<optim::SGD>(ps, optim::SGDOptions(0.2)); }},
      {"adam", [](P ps) { return std::make_unique<optim::Adam>(ps, optim::AdamOptions(0.01).betas(0.8, 0.95).eps(1e-6).weight_decay(0.05)); }},
      {"adamw", [](P ps) { return std::make_unique<optim::AdamW>(ps, optim::AdamWOptions(0.01).weight_decay(0.1)); }},
      {"radam", [](P ps) { return std::make_unique<optim::RAdam>(ps, optim::RAdamOptions(0.01).weight_decay(0.1)); }},
      {"radam_decoupled", [](P ps) {
         return std::make_unique<optim::RAdam>(
             ps, optim::RAdamOptions(0.01).weight_decay(0.1).decoupled_weight_decay(true));
       }},
  };
  for (const auto& b : built) {
    DYNAMIC_SECTION(b.first) {
      const auto want = run([&](P ps) { return make(b.first, ps); });
      const auto got = run(b.second);
      CHECK(got.first == want.first);
      CHECK(got.second == want.second);
    }
  }
  // Getters read back what was set; defaults are the positional defaults.
  optim::AdamWOptions o(3e-4);
  CHECK(o.lr() == 3e-4);
  CHECK(o.weight_decay() == 0.01);
  CHECK(o.weight_decay(0.1).beta2(0.98).weight_decay() == 0.1);
  CHECK(o.beta2() == 0.98);
  CHECK(optim::AdamOptions().lr() == 1e-3);
  CHECK(optim::AdamOptions().weight_decay() == 0);
  CHECK(optim::SGDOptions(0.5).momentum() == 0);
  // A bad value through a builder gets the constructor's error.
  std::vector<Tensor> ps = fresh_params();
  CHECK_THROWS_AS(optim::SGD(ps, optim::SGDOptions(-1)), Error);
}

TEST_CASE("the fused Adam / AdamW step matches the composed ops", "[optim]") {
  for (DType dt : {DType::f64, DType::f32}) {
    for (bool decoupled : {false, true}) {
      INFO(dtype_name(dt) << (decoupled ? " AdamW" : " Adam"));
      Generator gen(5);
      // Sizes below and above the kernel's parallel split, one with an odd tail.
      std::vector<Tensor> init = {Tensor::randn({3, 5}, dt, Device::cpu(), &gen),
                                  Tensor::randn({70001}, dt, Device::cpu(), &gen)};
      auto make = [&](bool fused) {
        std::vector<Tensor> ps;
        for (const Tensor& t : init) ps.push_back(t.clone().requires_grad_());
        std::unique_ptr<optim::Adam> opt;
        if (decoupled) opt = std::make_unique<optim::AdamW>(ps, 0.01, 0.9, 0.99, 1e-6, 0.1);
        else opt = std::make_unique<optim::Adam>(ps, 0.01, 0.8, 0.95, 1e-6, 0.05);
        opt->fused = fused;
        return std::make_pair(ps, std::move(opt));
      };
      auto fused = make(true), composed = make(false);
      for (int s = 0; s < 4; ++s) {
        Generator gg(100 + uint64_t(s));
        for (size_t j = 0; j < init.size(); ++j) {
          // The first gradient a transposed (non-contiguous) view.
          Tensor g = j == 0 ? Tensor::randn({5, 3}, dt, Device::cpu(), &gg).t()
                            : Tensor::randn(init[j].shape(), dt, Device::cpu(), &gg);
          fused.first[j].set_grad(g);
          composed.first[j].set_grad(g.clone());
        }
        fused.second->step();
        composed.second->step();
        for (size_t j = 0; j < init.size(); ++j) {
          const std::vector<double> a = fused.first[j].to_vector(), b = composed.first[j].to_vector();
          // Relative to max(1, |p|): the composed f32 update rounds ~10 times
          // (each up to 6e-8), the fused one once.
          double worst = 0;
          for (size_t i = 0; i < a.size(); ++i)
            worst = std::max(worst, std::fabs(a[i] - b[i]) / std::max(1.0, std::fabs(b[i])));
          INFO("step " << s << " param " << j);
          CHECK(worst <= (dt == DType::f64 ? 1e-14 : 1e-6));
        }
      }
      // The state checkpoints save is the same too.
      const optim::NamedTensors sf = fused.second->state(), sc = composed.second->state();
      REQUIRE(sf.size() == sc.size());
      for (size_t k = 0; k < sf.size(); ++k) {
        const std::vector<double> a = sf[k].second.to_vector(), b = sc[k].second.to_vector();
        double worst = 0;
        for (size_t i = 0; i < a.size(); ++i)
          worst = std::max(worst, std::fabs(a[i] - b[i]) / std::max(1.0, std::fabs(b[i])));
        INFO(sf[k].first);
        CHECK(worst <= (dt == DType::f64 ? 1e-14 : 1e-6));
      }
    }
  }
}
