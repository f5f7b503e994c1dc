// SPDX-License-Identifier: BSD-3-Clause
// Recurrent models (models/relrnn.h, nn/rnn.h; docs/math.md#relevancy-screening-relrnn-and-rellstm):
//  - the screening rule step by step on a hand-made sequence (injected α, two
//    batch rows that decide differently, exact dyadic relevance values, ties);
//  - the batched cells against a naive per-example reference (lists of states,
//    one row at a time): values, slot traces and gradients;
//  - every model against PyTorch (tools/goldens/make_relrnn_goldens.py) in f64 and f32,
//    and nn::RNN / nn::LSTM against torch.nn.RNN / nn.LSTM directly;
//  - the recurrent float64 gradient checks; config errors; the carried state.
#include <catch2/catch.hpp>
#include <remora/remora.h>

#include <chrono>
#include <ctime>
#include <cstdlib>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "../models/relrnn.h"
#include "model_golden.h"

using namespace remora;
using models::RecurrentConfig;
using models::RecurrentLM;
using models::ScreeningOptions;
using models::ScreeningTrace;
using model_test::check_close;

namespace {

// ---------------------------------------------------------------- naive reference
//
// One example at a time, with lists: S holds {h, t, C} oldest first, R has ρ
// optional slots. The rule of models/relrnn.h written the obvious way.
struct Entry {
  Tensor h;  // [H], with history
  int64_t t;
  double C;
};

struct NaiveRow {
  std::vector<Tensor> hs;                   // h_t [H]
  std::vector<std::vector<int64_t>> times;  // per step, [K]
  std::vector<std::vector<double>> rel;     // per step, [K]
};

// step(t, s_t [H]) -> h_t [H] (and updates the cell's own state).
NaiveRow naive_row(int64_t L, int64_t nu, int64_t rho, const Tensor& Ua, const Tensor& Va, const Tensor& v,
                   Tensor h, const std::function<Tensor(int64_t, const Tensor&)>& step) {
  std::vector<Entry> S;
  std::vector<std::shared_ptr<Entry>> R(static_cast<size_t>(rho));
  NaiveRow out;
  Tensor s = h;  // s_0 = h_{-1}
  for (int64_t t = 0; t < L; ++t) {
    if (t > 0) {
      std::vector<Tensor> keys;
      for (auto& e : S) keys.push_back(e.h);
      for (auto& r : R)
        if (r) keys.push_back(r->h);
      Tensor Km = stack(keys, 0);                                           // [n, H]
      Tensor e = matmul(tanh(add(linear(Km, Ua), linear(s, Va))), v.reshape({-1}));  // [n]
      Tensor a = softmax(e, 0);
      std::vector<double> av = a.detach().to_vector();
      for (size_t i = 0; i < S.size(); ++i) S[i].C += av[i];
      s = affine(add(h, matmul(a, Km)), 0.5, 0);
    }
    h = step(t, s);
    if (int64_t(S.size()) == nu) {
      Entry leave = S.front();
      S.erase(S.begin());
      int64_t empty = -1;
      for (int64_t r = 0; r < rho && empty < 0; ++r)
        if (!R[size_t(r)]) empty = r;
      if (empty >= 0) {
        R[size_t(empty)] = std::make_shared<Entry>(leave);
      } else if (rho > 0) {
        int64_t m = 0;
        for (int64_t r = 1; r < rho; ++r)
          if (R[size_t(r)]->C < R[size_t(m)]->C) m = r;
        if (leave.C > R[size_t(m)]->C) R[size_t(m)] = std::make_shared<Entry>(leave);
      }
    }
    S.push_back({h, t, 0.0});
    std::vector<int64_t> tt(size_t(nu + rho), -1);
    std::vector<double> rr(size_t(nu + rho), 0.0);
    const size_t pad = size_t(nu) - S.size();
    for (size_t j = 0; j < S.size(); ++j) {
      tt[pad + j] = S[j].t;
      rr[pad + j] = S[j].C;
    }
    for (int64_t r = 0; r < rho; ++r)
      if (R[size_t(r)]) {
        tt[size_t(nu + r)] = R[size_t(r)]->t;
        rr[size_t(nu + r)] = R[size_t(r)]->C;
      }
    out.times.push_back(tt);
    out.rel.push_back(rr);
    out.hs.push_back(h);
  }
  return out;
}

NaiveRow naive_relrnn(const models::RelRNNCell& c, const Tensor& x /* [L, I] */, const Tensor& h0 /* [H] */) {
  return naive_row(x.size(0), c.short_term, c.relevant, c.Ua->weight, c.Va->weight, c.v, h0,
                   [&](int64_t t, const Tensor& s) {
                     return tanh(add(linear(x.select(0, t), c.U->weight, c.U->bias), linear(s, c.V->weight)));
                   });
}

NaiveRow naive_rellstm(const models::RelLSTMCell& c, const Tensor& x, const Tensor& h0, const Tensor& c0) {
  Tensor cell = c0.reshape({1, -1});
  return naive_row(x.size(0), c.short_term, c.relevant, c.Ua->weight, c.Va->weight, c.v, h0,
                   [&](int64_t t, const Tensor& s) {
                     // The LSTM step written out (not nn::lstm_step): gates i, f, g, o.
                     Tensor gates = add(add(linear(x.select(0, t).reshape({1, -1}), c.weight_ih, c.bias_ih),
                                            linear(s.reshape({1, -1}), c.weight_hh)),
                                        c.bias_hh);
                     const int64_t H = c.hidden_size;
                     Tensor i = sigmoid(gates.slice(1, 0, H)), f = sigmoid(gates.slice(1, H, 2 * H));
                     Tensor g = tanh(gates.slice(1, 2 * H, 3 * H)), o = sigmoid(gates.slice(1, 3 * H, 4 * H));
                     cell = add(mul(f, cell), mul(i, g));
                     return mul(o, tanh(cell)).reshape({-1});
                   });
}

template <typename Cell>
void sharpen(Cell& cell, double scale, Generator& g) {
  for (auto& kv : cell.named_parameters()) nn::init::uniform_(kv.second, -scale, scale, &g);
}

// Batched vs naive: outputs, slot traces, slot contents and every gradient.
template <typename Cell, typename Batched, typename Naive>
void compare_with_naive(Cell& cell, int64_t B, int64_t L, uint64_t seed, Batched batched, Naive naive) {
  Generator g(seed);
  const int64_t H = cell.hidden_size, K = cell.short_term + cell.relevant;
  Tensor x = Tensor::randn({B, L, cell.input_size}, DType::f64, Device::cpu(), &g);
  Tensor h0 = Tensor::randn({B, H}, DType::f64, Device::cpu(), &g) * 0.5;
  Tensor c0 = Tensor::randn({B, H}, DType::f64, Device::cpu(), &g) * 0.5;
  Tensor w = Tensor::randn({B, L, H}, DType::f64, Device::cpu(), &g);
  ScreeningTrace tr;
  ScreeningOptions opt;
  opt.trace = &tr;
  Tensor out = batched(x, h0, c0, opt);  // [B, L, H]
  REQUIRE(tr.replacements > 0);
  REQUIRE(tr.rejections > 0);
  cell.zero_grad();
  sum(mul(out, w)).backward();
  std::vector<Tensor> g_batched;
  for (const Tensor& p : cell.parameters()) g_batched.push_back(p.grad().clone());

  cell.zero_grad();
  Tensor total = Tensor::zeros({}, DType::f64);
  for (int64_t b = 0; b < B; ++b) {
    NaiveRow r = naive(x.select(0, b), h0.select(0, b), c0.select(0, b));
    Tensor hs = stack(r.hs, 0);  // [L, H]
    check_close(out.select(0, b), hs, 1e-12, 1e-12, "h of row " + std::to_string(b));
    total = add(total, sum(mul(hs, w.select(0, b))));
    for (int64_t t = 0; t < L; ++t) {
      INFO("row " << b << " step " << t);
      std::vector<int64_t> bt(tr.slot_time[size_t(t)].begin() + b * K, tr.slot_time[size_t(t)].begin() + (b + 1) * K);
      CHECK(bt == r.times[size_t(t)]);
      for (int64_t k = 0; k < K; ++k) {
        CHECK(tr.relevance[size_t(t)][size_t(b * K + k)] == Approx(r.rel[size_t(t)][size_t(k)]).margin(1e-12));
        // The slot holds exactly the state h_{slot_time}.
        const int64_t st = bt[size_t(k)];
        if (st >= 0)
          check_close(tr.slots[size_t(t)].select(0, b).select(0, k), out.select(0, b).select(0, st).detach(), 0,
                      1e-15, "slot content");
      }
    }
  }
  total.backward();
  size_t i = 0;
  for (const auto& kv : cell.named_parameters())
    check_close(g_batched[i++], kv.second.grad(), 1e-10, 1e-12, "grad " + kv.first);
}

// ---------------------------------------------------------------- goldens

Safetensors golden_of(const std::string& key) {
  return nn_test::open_golden(std::string(REMORA_TEST_DATA) + "/relrnn_" + key + ".safetensors",
                              "remora-golden-relrnn", "1", "tools/goldens/make_relrnn_goldens.py");
}

RecurrentConfig config_of(const Safetensors& st) {
  const nlohmann::json j = nlohmann::json::parse(st.metadata.at("config"));
  RecurrentConfig c;
  c.type = j["type"];
  c.n_token = j["n_token"];
  c.d_model = j["d_model"];
  c.n_layer = j["n_layer"];
  c.short_term = j["short_term"];
  c.relevant = j["relevant"];
  c.n_out = j["n_out"];
  c.dropout = 0;
  return c;
}

void run_golden(const std::string& key, DType dt, double rtol, double atol) {
  const Safetensors st = golden_of(key);
  const RecurrentConfig cfg = config_of(st);
  RecurrentLM m(cfg, dt);
  nn::NamedTensors sd;
  for (const auto& kv : st.tensors)
    if (kv.first.rfind("param.", 0) == 0) sd.emplace_back(kv.first.substr(6), kv.second);
  m.load_state_dict(sd);
  m.eval();
  models::SequenceState state;
  for (int s = 0; s < 2; ++s) {
    const std::string sg = "seg" + std::to_string(s) + ".";
    m.zero_grad();
    ScreeningTrace tr;
    ScreeningOptions opt;
    opt.trace = &tr;
    RecurrentLM::Output o = m.forward(st.get(sg + "ids"), state, opt);
    Tensor loss = RecurrentLM::loss(o.logits, st.get(sg + "targets"));
    check_close(o.logits, st.get(sg + "logits"), rtol, atol, key + " " + sg + "logits");
    check_close(loss.reshape({1}), st.get(sg + "loss"), rtol, atol, key + " " + sg + "loss");
    for (size_t i = 0; i < o.state.cells.size(); ++i)
      check_close(o.state.cells[i], st.get(sg + "cells." + std::to_string(i)), rtol, atol,
                  key + " " + sg + "cells." + std::to_string(i));
    REQUIRE_FALSE(st.contains(sg + "cells." + std::to_string(o.state.cells.size())));
    if (cfg.screened()) {
      // slot_time [L, B, K] (exact) and relevance [L, B, K] after every step.
      const std::vector<int64_t> want_t = st.get(sg + "slot_time").to_i64_vector();
      const std::vector<double> want_c = st.get(sg + "relevance").to_vector();
      std::vector<int64_t> got_t;
      std::vector<double> got_c;
      for (size_t t = 0; t < tr.slot_time.size(); ++t) {
        got_t.insert(got_t.end(), tr.slot_time[t].begin(), tr.slot_time[t].end());
        got_c.insert(got_c.end(), tr.relevance[t].begin(), tr.relevance[t].end());
      }
      CHECK(got_t == want_t);
      REQUIRE(got_c.size() == want_c.size());
      for (size_t i = 0; i < got_c.size(); ++i) CHECK(got_c[i] == Approx(want_c[i]).margin(atol + rtol));
    }
    loss.backward();
    state = o.state;
  }
  for (const auto& kv : m.named_parameters())
    check_close(kv.second.grad(), st.get("grad." + kv.first), rtol, atol, key + " grad." + kv.first);
}

// nn::RNN / nn::LSTM against torch.nn.RNN / nn.LSTM (real inputs, h0, c0).
void run_layer_golden(const std::string& key, DType dt, double rtol, double atol) {
  const Safetensors st = golden_of(key);
  const bool lstm = key == "lstm";
  Tensor x = st.get("layer.x").to(dt).detach().requires_grad_();
  Tensor h0 = st.get("layer.h0").to(dt).detach().requires_grad_();
  Tensor c0 = lstm ? st.get("layer.c0").to(dt).detach().requires_grad_() : Tensor();
  const int64_t I = x.size(2), H = h0.size(2), n = h0.size(0);
  std::shared_ptr<nn::Module> layer;
  Tensor out, total;
  nn::NamedTensors sd;
  for (const auto& kv : st.tensors)
    if (kv.first.rfind("layer.param.", 0) == 0) sd.emplace_back(kv.first.substr(12), kv.second);
  Tensor w = st.get("layer.w").to(dt);
  if (!lstm) {
    auto r = std::make_shared<nn::RNN>(I, H, n, "tanh", true, 0.0, dt);
    r->load_state_dict(sd);
    nn::RNN::Output o = r->forward(x, h0);
    check_close(o.h_n, st.get("layer.h_n"), rtol, atol, key + " layer.h_n");
    out = o.output;
    total = add(sum(mul(out, w)), sum(o.h_n));
    layer = r;
  } else {
    auto r = std::make_shared<nn::LSTM>(I, H, n, true, 0.0, dt);
    r->load_state_dict(sd);
    nn::LSTM::Output o = r->forward(x, h0, c0);
    check_close(o.h_n, st.get("layer.h_n"), rtol, atol, key + " layer.h_n");
    check_close(o.c_n, st.get("layer.c_n"), rtol, atol, key + " layer.c_n");
    out = o.output;
    total = add(add(sum(mul(out, w)), sum(o.h_n)), sum(o.c_n));
    layer = r;
  }
  check_close(out, st.get("layer.output"), rtol, atol, key + " layer.output");
  total.backward();
  check_close(x.grad(), st.get("layer.grad.x"), rtol, atol, key + " layer.grad.x");
  check_close(h0.grad(), st.get("layer.grad.h0"), rtol, atol, key + " layer.grad.h0");
  if (lstm) check_close(c0.grad(), st.get("layer.grad.c0"), rtol, atol, key + " layer.grad.c0");
  for (const auto& kv : layer->named_parameters())
    check_close(kv.second.grad(), st.get("layer.grad." + kv.first), rtol, atol, key + " layer.grad." + kv.first);
}

}  // namespace

// ---------------------------------------------------------------- the screening rule, by hand

TEST_CASE("relevancy screening admits, evicts and ties by the rule, per row", "[relrnn]") {
  // ν = 2, ρ = 2, K = 4 slots [S0, S1, R0, R1]; two rows, 8 steps. The α that the
  // bookkeeping adds up is injected (dyadic values, so every C is exact); the
  // S part [slot 0, slot 1] per step and row (the R part is ignored by the rule):
  const double a[8][2][2] = {
      {{0, 0}, {0, 0}},                  // t = 0: no read
      {{0, 0.5}, {0, 0.875}},            // t = 1: S = [-, h0]
      {{0.125, 0.25}, {0.0625, 0.25}},   // t = 2: S = [h0, h1]; h0 leaves -> R0 (both rows)
      {{0.25, 0.125}, {0.125, 0.125}},   // t = 3: h1 leaves -> R1 (both rows)
      {{0.625, 0.25}, {0.125, 0.5}},     // t = 4: h2 leaves: row 0 C 3/4 > 1/2 replaces R1; row 1 C 1/4 < 3/8 dropped
      {{0.125, 0.25}, {0.25, 0.125}},    // t = 5: h3 leaves: row 0 3/8 < 5/8 dropped; row 1 3/4 > 3/8 replaces R1
      {{0.375, 0.25}, {0.8125, 0.125}},  // t = 6: h4 leaves: row 0 5/8 == min 5/8 -> NOT admitted (strict >);
                                         //        row 1 15/16 > 3/4 replaces R1
      {{0.5, 0}, {1.0, 0}},              // t = 7: h5 leaves: row 0 3/4 > 5/8 replaces R0; row 1 9/8 > 15/16,
                                         //        R = {15/16, 15/16} tie -> the first slot, R0
  };
  // Expected memory after each step: slot times [S0, S1, R0, R1] and C per row.
  const int64_t want_t[8][2][4] = {
      {{-1, 0, -1, -1}, {-1, 0, -1, -1}}, {{0, 1, -1, -1}, {0, 1, -1, -1}}, {{1, 2, 0, -1}, {1, 2, 0, -1}},
      {{2, 3, 0, 1}, {2, 3, 0, 1}},       {{3, 4, 0, 2}, {3, 4, 0, 1}},     {{4, 5, 0, 2}, {4, 5, 0, 3}},
      {{5, 6, 0, 2}, {5, 6, 0, 4}},       {{6, 7, 5, 2}, {6, 7, 5, 4}},
  };
  const double want_c[8][2][4] = {
      {{0, 0, 0, 0}, {0, 0, 0, 0}},
      {{0.5, 0, 0, 0}, {0.875, 0, 0, 0}},
      {{0.25, 0, 0.625, 0}, {0.25, 0, 0.9375, 0}},
      {{0.125, 0, 0.625, 0.5}, {0.125, 0, 0.9375, 0.375}},
      {{0.25, 0, 0.625, 0.75}, {0.5, 0, 0.9375, 0.375}},
      {{0.25, 0, 0.625, 0.75}, {0.125, 0, 0.9375, 0.75}},
      {{0.25, 0, 0.625, 0.75}, {0.125, 0, 0.9375, 0.9375}},
      {{0, 0, 0.75, 0.75}, {0, 0, 1.125, 0.9375}},
  };
  for (const char* kind : {"relrnn", "rellstm"}) {
    DYNAMIC_SECTION(kind) {
      Generator g(3);
      std::shared_ptr<nn::Module> keep;
      ScreeningTrace tr;
      ScreeningOptions opt;
      opt.trace = &tr;
      opt.inject_alpha = [&](int64_t t, const std::vector<double>& alpha) {
        REQUIRE(alpha.size() == 8u);
        std::vector<double> out(8, 0.0);
        for (int b = 0; b < 2; ++b)
          for (int j = 0; j < 2; ++j) out[size_t(b * 4 + j)] = a[t][b][j];
        return out;
      };
      Tensor x = Tensor::randn({2, 8, 3}, DType::f64, Device::cpu(), &g);
      Tensor out;
      if (std::string(kind) == "relrnn") {
        auto c = std::make_shared<models::RelRNNCell>(3, 4, 2, 2, DType::f64, &g);
        out = c->forward(x, Tensor(), opt).output;
        keep = c;
      } else {
        auto c = std::make_shared<models::RelLSTMCell>(3, 4, 2, 2, DType::f64, &g);
        out = c->forward(x, Tensor(), Tensor(), opt).output;
        keep = c;
      }
      REQUIRE(tr.slot_time.size() == 8u);
      for (int t = 0; t < 8; ++t)
        for (int b = 0; b < 2; ++b) {
          INFO("step " << t << " row " << b);
          for (int k = 0; k < 4; ++k) {
            CHECK(tr.slot_time[size_t(t)][size_t(b * 4 + k)] == want_t[t][b][k]);
            CHECK(tr.relevance[size_t(t)][size_t(b * 4 + k)] == want_c[t][b][k]);  // exact (dyadic)
            const int64_t st = want_t[t][b][k];
            // The slot holds h_st itself; an empty slot is zeros.
            Tensor want = st >= 0 ? out.select(0, b).select(0, st).detach() : Tensor::zeros({4}, DType::f64);
            check_close(tr.slots[size_t(t)].select(0, b).select(0, k), want, 0, 0, "slot content");
          }
        }
      CHECK(tr.admissions == 4);    // h0, h1 in both rows
      CHECK(tr.replacements == 5);  // row 0: t 4, 7; row 1: t 5, 6, 7
      CHECK(tr.rejections == 3);    // row 0: t 5, 6 (the tie); row 1: t 4
      CHECK(tr.min_margin == 0);    // the two ties
    }
  }
}

TEST_CASE("relevancy screening: the attention ignores empty slots and reads h_{t-1} at t = 1", "[relrnn]") {
  // At t = 1 only h_0 is in memory: α = 1 on it, so s_1 = h_0 and h_1 = tanh(U x_1 + V h_0 + b).
  Generator g(4);
  models::RelRNNCell c(3, 4, 3, 2, DType::f64, &g);
  Tensor x = Tensor::randn({2, 2, 3}, DType::f64, Device::cpu(), &g);
  ScreeningTrace tr;
  ScreeningOptions opt;
  opt.trace = &tr;
  Tensor out = c.forward(x, Tensor(), opt).output;
  Tensor h0 = out.select(1, 0);
  Tensor want = tanh(add(linear(x.select(1, 1), c.U->weight, c.U->bias), linear(h0, c.V->weight)));
  check_close(out.select(1, 1), want, 1e-14, 1e-14, "h_1");
  // α at t = 1 over [S0, S1, S2, R0, R1] = [-, -, h0, -, -].
  for (int b = 0; b < 2; ++b)
    for (int k = 0; k < 5; ++k) CHECK(tr.alpha[1][size_t(b * 5 + k)] == (k == 2 ? 1.0 : 0.0));
}

// ---------------------------------------------------------------- batched vs naive

TEST_CASE("RelRNN / RelLSTM batched screening equals the per-example reference", "[relrnn]") {
  for (int64_t rho : {0, 1, 3}) {
    DYNAMIC_SECTION("relrnn rho " << rho) {
      Generator g(21 + uint64_t(rho));
      models::RelRNNCell c(3, 4, 3, rho, DType::f64, &g);
      sharpen(c, 1.5, g);
      if (rho == 0) return;  // no R: nothing to replace (covered by the no-R check below)
      compare_with_naive(
          c, 3, 16, 99,
          [&](const Tensor& x, const Tensor& h0, const Tensor&, const ScreeningOptions& o) {
            return c.forward(x, h0, o).output;
          },
          [&](const Tensor& x, const Tensor& h0, const Tensor&) { return naive_relrnn(c, x, h0); });
    }
    DYNAMIC_SECTION("rellstm rho " << rho) {
      if (rho == 0) return;
      Generator g(31 + uint64_t(rho));
      models::RelLSTMCell c(3, 4, 3, rho, DType::f64, &g);
      sharpen(c, 1.5, g);
      compare_with_naive(
          c, 3, 16, 98,
          [&](const Tensor& x, const Tensor& h0, const Tensor& c0, const ScreeningOptions& o) {
            return c.forward(x, h0, c0, o).output;
          },
          [&](const Tensor& x, const Tensor& h0, const Tensor& c0) { return naive_rellstm(c, x, h0, c0); });
    }
  }
}

TEST_CASE("RelRNN with rho = 0 attends over the last nu states only", "[relrnn]") {
  Generator g(8);
  models::RelRNNCell c(3, 4, 2, 0, DType::f64, &g);
  Tensor x = Tensor::randn({2, 6, 3}, DType::f64, Device::cpu(), &g);
  Tensor out = c.forward(x).output;
  for (int64_t b = 0; b < 2; ++b) {
    NaiveRow r = naive_relrnn(c, x.select(0, b), Tensor::zeros({4}, DType::f64));
    check_close(out.select(0, b), stack(r.hs, 0), 1e-12, 1e-12, "h");
  }
}

// ---------------------------------------------------------------- PyTorch goldens

TEST_CASE("recurrent models match PyTorch in float64", "[relrnn]") {
  for (const char* key : {"rnn", "lstm", "relrnn", "rellstm"}) {
    DYNAMIC_SECTION(key) { run_golden(key, DType::f64, 1e-9, 1e-9); }
  }
}

TEST_CASE("recurrent models match PyTorch in float32", "[relrnn]") {
  for (const char* key : {"rnn", "lstm", "relrnn", "rellstm"}) {
    DYNAMIC_SECTION(key) { run_golden(key, DType::f32, 1e-4, 1e-4); }
  }
}

TEST_CASE("nn::RNN and nn::LSTM match torch.nn.RNN / nn.LSTM", "[relrnn]") {
  for (const char* key : {"rnn", "lstm"}) {
    DYNAMIC_SECTION(key << " f64") { run_layer_golden(key, DType::f64, 1e-9, 1e-9); }
    DYNAMIC_SECTION(key << " f32") { run_layer_golden(key, DType::f32, 1e-4, 1e-4); }
  }
}

// ---------------------------------------------------------------- gradient checks

TEST_CASE("recurrent cores pass their float64 gradient checks", "[relrnn]") {
  std::set<std::string> seen;
  for (const GradcheckCase& c : gradcheck_cases()) {
    if (c.op != "rnn" && c.op != "lstm" && c.op != "relrnn" && c.op != "rellstm" && c.op != "unbind_steps" &&
        c.op != "split_last")
      continue;
    seen.insert(c.op);
    remora_test::check_gradcheck_case(c);
  }
  CHECK(seen == std::set<std::string>{"rnn", "lstm", "relrnn", "rellstm", "unbind_steps", "split_last"});
}

// ---------------------------------------------------------------- the model API

TEST_CASE("RecurrentLM: parameter names, shapes and the carried state", "[relrnn]") {
  struct Want {
    const char* type;
    std::vector<const char*> names;
    size_t cells;
  };
  const std::vector<Want> wants = {
      {"rnn", {"encoder.weight", "rnn.weight_ih_l0", "rnn.weight_hh_l0", "rnn.bias_ih_l0", "rnn.bias_hh_l0",
               "rnn.weight_ih_l1", "decoder.weight", "decoder.bias"}, 2},
      {"lstm", {"encoder.weight", "rnn.weight_ih_l0", "rnn.bias_hh_l1", "decoder.weight"}, 4},
      {"relrnn", {"encoder.weight", "rnn.v", "rnn.U.weight", "rnn.U.bias", "rnn.V.weight", "rnn.Ua.weight",
                  "rnn.Va.weight", "decoder.weight", "decoder.bias"}, 1},
      {"rellstm", {"encoder.weight", "rnn.weight_ih", "rnn.weight_hh", "rnn.bias_ih", "rnn.bias_hh", "rnn.v",
                   "rnn.Ua.weight", "rnn.Va.weight", "decoder.weight"}, 2},
  };
  for (const Want& w : wants) {
    DYNAMIC_SECTION(w.type) {
      RecurrentConfig c;
      c.type = w.type;
      c.n_token = 9;
      c.d_model = 6;
      c.n_layer = (c.type == "rnn" || c.type == "lstm") ? 2 : 1;
      c.short_term = 2;
      c.relevant = 2;
      c.n_out = 5;
      RecurrentLM m(c, DType::f64);
      std::set<std::string> names;
      for (const auto& kv : m.named_parameters()) names.insert(kv.first);
      for (const char* n : w.names) {
        INFO(n);
        CHECK(names.count(n) == 1);
      }
      Tensor ids = Tensor::from_vector(std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8, 0, 1, 2, 3}, {2, 6});
      models::SequenceOutput o = m.run(ids, {});
      CHECK(o.logits.shape() == Shape{2, 6, 5});
      REQUIRE(o.state.cells.size() == w.cells);
      for (const Tensor& t : o.state.cells) {
        CHECK(t.shape() == Shape{2, 6});
        CHECK_FALSE(t.requires_grad());
      }
      models::SequenceOutput o2 = m.run(ids, o.state);
      CHECK(o2.logits.shape() == Shape{2, 6, 5});
      // rnn / lstm carry everything: two segments equal one long sequence.
      if (c.type == "rnn" || c.type == "lstm") {
        Tensor both = Tensor::from_vector(std::vector<int64_t>{1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6,
                                                               7, 8, 0, 1, 2, 3, 7, 8, 0, 1, 2, 3},
                                          {2, 12});
        models::SequenceOutput whole = m.run(both, {});
        check_close(whole.logits.slice(1, 6, 12), o2.logits, 1e-12, 1e-12, "carried state");
      }
      CHECK_THROWS_WITH(m.run(ids.slice(0, 0, 1), o.state),
                        Catch::Contains("the batch size must stay the same"));
    }
  }
}

TEST_CASE("RecurrentConfig errors name the field", "[relrnn]") {
  auto err = [](std::function<void(RecurrentConfig&)> f, const std::string& what) {
    RecurrentConfig c;
    c.type = "relrnn";
    f(c);
    CHECK_THROWS_WITH(c.validate(), Catch::Contains(what));
  };
  err([](RecurrentConfig& c) { c.type = "gru"; }, "type must be");
  err([](RecurrentConfig& c) { c.n_token = 0; }, "n_token");
  err([](RecurrentConfig& c) { c.d_model = 0; }, "d_model");
  err([](RecurrentConfig& c) { c.n_layer = 2; }, "n_layer must be 1");
  err([](RecurrentConfig& c) { c.short_term = 0; }, "short_term");
  err([](RecurrentConfig& c) { c.relevant = -1; }, "relevant");
  err([](RecurrentConfig& c) { c.dropout = 1.0; }, "dropout");
  err([](RecurrentConfig& c) { c.n_out = -2; }, "n_out");
  RecurrentConfig ok;
  ok.type = "rnn";
  ok.n_layer = 3;
  CHECK_NOTHROW(ok.validate());
  CHECK_THROWS_WITH(RecurrentLM(RecurrentConfig{"relrnn", 5, 4, 1, 0}), Catch::Contains("short_term"));
}

// ---------------------------------------------------------------- the official options

namespace {

// Sample mean and standard deviation of a tensor's values.
std::pair<double, double> mean_std(const Tensor& t) {
  const std::vector<double> v = t.to_vector();
  double m = 0, q = 0;
  for (double x : v) m += x;
  m /= double(v.size());
  for (double x : v) q += (x - m) * (x - m);
  return {m, std::sqrt(q / double(v.size()))};
}

Tensor eye_f64(int64_t n) {
  std::vector<double> v(size_t(n * n), 0.0);
  for (int64_t i = 0; i < n; ++i) v[size_t(i * n + i)] = 1.0;
  return Tensor::from_vector(v, {n, n}, DType::f64);
}

Tensor param(const RecurrentLM& m, const std::string& name) {
  for (const auto& kv : m.named_parameters())
    if (kv.first == name) return kv.second;
  FAIL("no parameter " << name);
  return Tensor();
}

}  // namespace

TEST_CASE("RecurrentConfig: init defaults per type and the new options' errors", "[relrnn]") {
  RecurrentConfig c;
  for (const char* t : {"relrnn", "rellstm"}) {
    c.type = t;
    CHECK(c.resolved_init() == "official");
  }
  for (const char* t : {"rnn", "lstm"}) {
    c.type = t;
    CHECK(c.resolved_init() == "uniform");
  }
  c.init = "uniform";
  c.type = "relrnn";
  CHECK(c.resolved_init() == "uniform");
  auto err = [](std::function<void(RecurrentConfig&)> f, const std::string& what) {
    RecurrentConfig c;
    c.type = "relrnn";
    f(c);
    CHECK_THROWS_WITH(c.validate(), Catch::Contains(what));
  };
  err([](RecurrentConfig& c) { c.input = "one-hot"; }, "input must be");
  err([](RecurrentConfig& c) { c.init = "xavier"; }, "init must be");
  err([](RecurrentConfig& c) { c.recurrent_init = "random"; }, "recurrent_init must be");
  err([](RecurrentConfig& c) { c.input_init = "henaff"; }, "input_init must be");
}

TEST_CASE("input onehot: no encoder, the cell reads the one-hot, equal to an embedding model", "[relrnn]") {
  // An embedding model with encoder.weight = [I_V | 0] and the input weight's first
  // V columns = the onehot model's input weight (the rest 0) computes the same function.
  const std::map<std::string, std::string> input_weight = {
      {"rnn", "rnn.weight_ih_l0"}, {"lstm", "rnn.weight_ih_l0"}, {"relrnn", "rnn.U.weight"},
      {"rellstm", "rnn.weight_ih"}};
  for (const auto& tw : input_weight) {
    DYNAMIC_SECTION(tw.first) {
      RecurrentConfig c;
      c.type = tw.first;
      c.n_token = 5;
      c.d_model = 7;
      c.short_term = 2;
      c.relevant = 2;
      c.n_out = 4;
      c.input = "onehot";
      c.init = "official";
      Generator g(3);
      RecurrentLM one(c, DType::f64, &g);
      std::set<std::string> names;
      for (const auto& kv : one.named_parameters()) names.insert(kv.first);
      CHECK(names.count("encoder.weight") == 0);
      CHECK(param(one, tw.second).shape()[1] == 5);  // input size V
      c.input = "embedding";
      RecurrentLM emb(c, DType::f64, &g);
      CHECK(param(emb, tw.second).shape()[1] == 7);
      nn::NamedTensors sd;
      std::vector<double> eye(5 * 7, 0.0);
      for (int64_t i = 0; i < 5; ++i) eye[size_t(i * 7 + i)] = 1.0;
      sd.emplace_back("encoder.weight", Tensor::from_vector(eye, {5, 7}, DType::f64));
      for (const auto& kv : one.named_parameters()) {
        if (kv.first != tw.second) {
          sd.emplace_back(kv.first, kv.second.detach());
          continue;
        }
        const int64_t rows = kv.second.size(0);
        Tensor w = Tensor::zeros({rows, 7}, DType::f64);
        w.slice(1, 0, 5).copy_(kv.second.detach());
        sd.emplace_back(kv.first, w);
      }
      emb.load_state_dict(sd);
      Tensor ids = Tensor::from_vector(std::vector<int64_t>{1, 4, 0, 2, 3, 3, 0, 1, 4, 2, 2, 1, 0, 4}, {2, 7});
      RecurrentLM::Output a = one.forward(ids), b = emb.forward(ids);
      check_close(a.logits, b.logits, 1e-12, 1e-12, "onehot == embedding [I | 0]");
      // Gradients reach the onehot model's input weight.
      Tensor loss = RecurrentLM::loss(a.logits, Tensor::from_vector(std::vector<int64_t>(14, 1), {2, 7}));
      loss.backward();
      CHECK(mean_std(param(one, tw.second).grad()).second > 0);
      CHECK_THROWS_WITH(one.forward(Tensor::from_vector(std::vector<int64_t>{0, 5}, {1, 2})),
                        Catch::Contains("outside the vocabulary"));
    }
  }
}

TEST_CASE("official recurrent init: henaff / cayley are block rotations, the others normal", "[relrnn]") {
  for (const char* kind : {"henaff", "cayley"}) {
    DYNAMIC_SECTION(kind) {
      for (int64_t H : {6, 7}) {
        Tensor w = Tensor::empty({H, H}, DType::f64);
        Generator g(11);
        models::official_recurrent_init_(w, kind, &g);
        // Orthogonal: W Wᵀ = I.
        check_close(matmul(w, w.t()), eye_f64(H), 1e-12, 1e-12, "W W^T = I");
        const std::vector<double> m = w.to_vector();
        const double lo = std::string(kind) == "henaff" ? -std::acos(-1.0) : -1.0;
        std::set<double> angles;
        for (int64_t k = 0; k < H / 2; ++k) {
          const int64_t i = 2 * k;
          const double c = m[size_t(i * H + i)], s = m[size_t(i * H + i + 1)];
          const double th = std::atan2(s, c);
          CHECK(th <= 0);
          CHECK(th >= lo);
          CHECK(m[size_t((i + 1) * H + i)] == Approx(-s).margin(1e-15));
          CHECK(m[size_t((i + 1) * H + i + 1)] == Approx(c).margin(1e-15));
          angles.insert(th);
        }
        CHECK(angles.size() == size_t(H / 2));  // independent angles
        if (H % 2) CHECK(m[size_t(H * H - 1)] == 1.0);
        // Nothing outside the 2x2 diagonal blocks.
        for (int64_t r = 0; r < H; ++r)
          for (int64_t col = 0; col < H; ++col)
            if (r / 2 != col / 2) CHECK(m[size_t(r * H + col)] == 0.0);
      }
    }
  }
  SECTION("xavier and kaiming are N(0, 1/H) and N(0, 2/H)") {
    const int64_t H = 200;
    Generator g(5);
    Tensor w = Tensor::empty({H, H}, DType::f64);
    models::official_recurrent_init_(w, "xavier", &g);
    CHECK(mean_std(w).second == Approx(std::sqrt(1.0 / H)).epsilon(0.03));
    models::official_recurrent_init_(w, "kaiming", &g);
    CHECK(mean_std(w).second == Approx(std::sqrt(2.0 / H)).epsilon(0.03));
    CHECK_THROWS_WITH(models::official_recurrent_init_(w, "random", &g), Catch::Contains("recurrent_init"));
  }
}

TEST_CASE("RecurrentLM official init: the official scales, one bias, and the uniform rule kept", "[relrnn]") {
  const int64_t H = 96, V = 10;
  auto build = [&](const std::string& type, const std::string& init, const std::string& input) {
    RecurrentConfig c;
    c.type = type;
    c.n_token = V;
    c.d_model = H;
    c.n_out = 9;
    c.input = input;
    c.init = init;
    Generator g(7);
    return std::make_shared<RecurrentLM>(c, DType::f64, &g);
  };
  auto std_of = [](const std::shared_ptr<RecurrentLM>& m, const std::string& n) { return mean_std(param(*m, n)).second; };
  auto max_abs = [](const std::shared_ptr<RecurrentLM>& m, const std::string& n) {
    double a = 0;
    for (double x : param(*m, n).to_vector()) a = std::max(a, std::fabs(x));
    return a;
  };
  SECTION("relrnn, onehot (copytask.py): xavier U, henaff V, xavier v and head") {
    auto m = build("relrnn", "", "onehot");  // the default init of relrnn is official
    CHECK(std_of(m, "rnn.U.weight") == Approx(std::sqrt(2.0 / (V + H))).epsilon(0.1));
    CHECK(max_abs(m, "rnn.U.bias") <= 1 / std::sqrt(double(V)));
    CHECK(max_abs(m, "rnn.U.bias") > 1 / std::sqrt(double(H)));  // the fan-in is V, not H
    Tensor Vw = param(*m, "rnn.V.weight");
    check_close(matmul(Vw, Vw.t()), eye_f64(H), 1e-12, 1e-12, "henaff V orthogonal");
    CHECK(std_of(m, "rnn.v") == Approx(std::sqrt(2.0 / (1 + H))).epsilon(0.2));
    CHECK(max_abs(m, "rnn.Ua.weight") <= 1 / std::sqrt(double(H)));
    CHECK(std_of(m, "decoder.weight") == Approx(std::sqrt(2.0 / (H + 9))).epsilon(0.1));
  }
  SECTION("relrnn with kaiming input and cayley recurrent weights") {
    RecurrentConfig c;
    c.type = "relrnn";
    c.n_token = V;
    c.d_model = H;
    c.input = "onehot";
    c.input_init = "kaiming";
    c.recurrent_init = "cayley";
    Generator g(7);
    RecurrentLM m(c, DType::f64, &g);
    CHECK(mean_std(param(m, "rnn.U.weight")).second == Approx(std::sqrt(2.0 / V)).epsilon(0.1));
    // cayley angles lie in (-1, 0]: cos θ > cos 1 on the diagonal.
    const std::vector<double> w = param(m, "rnn.V.weight").to_vector();
    for (int64_t i = 0; i < H; ++i) CHECK(w[size_t(i * H + i)] > std::cos(1.0));
  }
  SECTION("rellstm and lstm: xavier gates over I + H inputs, one bias") {
    for (const char* type : {"rellstm", "lstm"}) {
      INFO(type);
      auto m = build(type, "official", "onehot");
      const std::string p = "rnn.weight_";
      const std::string sfx = std::string(type) == "lstm" ? "_l0" : "";
      CHECK(std_of(m, p + "hh" + sfx) == Approx(std::sqrt(2.0 / (V + 2 * H))).epsilon(0.05));
      CHECK(std_of(m, p + "ih" + sfx) == Approx(std::sqrt(2.0 / (V + 2 * H))).epsilon(0.05));
      CHECK(max_abs(m, "rnn.bias_hh" + sfx) == 0.0);
      CHECK(max_abs(m, "rnn.bias_ih" + sfx) <= 1 / std::sqrt(double(V + H)));
      CHECK(max_abs(m, "rnn.bias_ih" + sfx) > 0.0);
    }
  }
  SECTION("rnn: henaff weight_hh, xavier weight_ih, bias_hh = 0") {
    auto m = build("rnn", "official", "onehot");
    Tensor w = param(*m, "rnn.weight_hh_l0");
    check_close(matmul(w, w.t()), eye_f64(H), 1e-12, 1e-12, "rnn weight_hh orthogonal");
    CHECK(std_of(m, "rnn.weight_ih_l0") == Approx(std::sqrt(2.0 / (V + H))).epsilon(0.1));
    CHECK(max_abs(m, "rnn.bias_hh_l0") == 0.0);
  }
  SECTION("input embedding (PTBtask.py): encoder and decoder U(±0.1), decoder bias 0") {
    auto m = build("relrnn", "official", "embedding");
    CHECK(max_abs(m, "encoder.weight") <= 0.1);
    CHECK(std_of(m, "encoder.weight") == Approx(0.1 / std::sqrt(3.0)).epsilon(0.1));
    CHECK(max_abs(m, "decoder.weight") <= 0.1);
    CHECK(max_abs(m, "decoder.bias") == 0.0);
  }
  SECTION("uniform: the rule before issue 16, bit for bit; rnn / lstm keep it by default") {
    for (const char* type : {"rnn", "lstm", "relrnn", "rellstm"}) {
      INFO(type);
      auto u = build(type, "uniform", "embedding");
      auto d = build(type, std::string(type) == "rnn" || std::string(type) == "lstm" ? "" : "uniform", "embedding");
      for (const auto& kv : u->named_parameters()) {
        CHECK(param(*d, kv.first).to_vector() == kv.second.to_vector());
        if (kv.first.rfind("rnn.", 0) == 0) CHECK(max_abs(u, kv.first) <= 1 / std::sqrt(double(H)));
      }
      // The cells draw exactly what they did before: a bare cell from the same
      // generator state holds the same numbers.
      if (std::string(type) == "relrnn") {
        Generator g(7);
        nn::Embedding e(V, H, -1, DType::f64, &g);
        models::RelRNNCell cell(H, H, 10, 10, DType::f64, &g);
        CHECK(cell.V->weight.to_vector() == param(*u, "rnn.V.weight").to_vector());
        CHECK(cell.v.to_vector() == param(*u, "rnn.v").to_vector());
      }
      if (std::string(type) == "rellstm") {
        Generator g(7);
        nn::Embedding e(V, H, -1, DType::f64, &g);
        models::RelLSTMCell cell(H, H, 10, 10, DType::f64, &g);
        CHECK(cell.weight_hh.to_vector() == param(*u, "rnn.weight_hh").to_vector());
        CHECK(cell.bias_hh.to_vector() == param(*u, "rnn.bias_hh").to_vector());
      }
    }
  }
}

// ---------------------------------------------------------------- speed (hidden)

// One training step (forward + backward) on a copy-task batch: B 32, L 120
// (10 symbols, delay 100, 10 outputs), d_model 128, ν = ρ = 10. Run with
//   ./build/tests/remora_tests "[.relrnn_bench]"   (REMORA_BENCH_TYPE=relrnn: one type only)
TEST_CASE("recurrent training step timing", "[.relrnn_bench]") {
  const char* only = std::getenv("REMORA_BENCH_TYPE");  // e.g. relrnn: time one type
  for (const char* type : {"rnn", "lstm", "relrnn", "rellstm"}) {
    if (only && std::string(only) != type) continue;
    RecurrentConfig c;
    c.type = type;
    c.n_token = 10;
    c.d_model = 128;
    c.short_term = 10;
    c.relevant = 10;
    c.n_out = 9;
    Generator g(1);
    RecurrentLM m(c, DType::f32, &g);
    std::vector<int64_t> iv(32 * 120), tv(32 * 120);
    for (size_t i = 0; i < iv.size(); ++i) {
      iv[i] = int64_t(i * 7919 % 10);
      tv[i] = int64_t(i * 104729 % 9);
    }
    Tensor ids = Tensor::from_vector(iv, {32, 120}), tg = Tensor::from_vector(tv, {32, 120});
    double best = 1e30, best_cpu = 1e30;
    for (int rep = 0; rep < 4; ++rep) {
      m.zero_grad();
      auto t0 = std::chrono::steady_clock::now();
      const std::clock_t c0 = std::clock();
      Tensor loss = RecurrentLM::loss(m.forward(ids).logits, tg);
      loss.backward();
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      const double cpu_ms = 1000.0 * double(std::clock() - c0) / CLOCKS_PER_SEC;
      if (rep > 0) best = std::min(best, ms), best_cpu = std::min(best_cpu, cpu_ms);
    }
    // Wall time depends on the machine's load; process CPU time (all threads) less so.
    WARN(type << ": fwd+bwd " << best << " ms wall, " << best_cpu << " ms CPU (best of 3 after a warm-up)");
  }
}
