// SPDX-License-Identifier: BSD-3-Clause
// Cases (docs/math.md#gradient-checks) of the recurrent cores: nn::RNN, nn::LSTM (two layers
// each) and the relevancy-screening cells RelRNNCell, RelLSTMCell, w.r.t. the
// input sequence, the initial state and every parameter. The module is built
// in f64 on the CPU from the case seed, then moved to the case's device and
// dtype (Module::to_): its parameters are among the inputs.
//
// Screening decisions are made on forward values, so a finite-difference
// perturbation must not flip one: make draws seeds in a fixed order and keeps
// the first whose run (ν = 2, ρ = 2, T = 7, B = 2; on the CPU in f64) has
// admissions, at least one replacement and one rejection, and a decision
// margin (ScreeningTrace::min_margin) above 1e-3, far above what eps = 1e-6
// (or f32 rounding on another device) can move.
#include <memory>

#include "../core/autograd.h"
#include "../models/relrnn.h"
#include "../nn/init.h"
#include "../nn/rnn.h"
#include "../ops/ops.h"
#include "cases.h"

namespace remora::cases {

namespace {

constexpr int64_t kB = 2, kT = 7, kI = 2, kH = 3, kNu = 2, kRho = 2;

Tensor cpu_leaf(Generator& g, const Shape& s, double scale = 1) {
  return (Tensor::randn(s, DType::f64, Device::cpu(), &g) * scale).detach().requires_grad_();
}

// Moves the module to the case's device and dtype and appends its
// parameters (now leaves there) to the inputs, which are moved too.
Inputs place(Maker& m, const Inputs& cpu_in, nn::Module& mod) {
  mod.to_(m.dt);
  mod.to_(m.dev);
  Inputs in;
  for (const Tensor& t : cpu_in) in.push_back(Maker::grad_leaf(m.on(t)));
  for (const Tensor& p : mod.parameters()) in.push_back(p);
  return in;
}

// Scales a screened cell's attention weights so that α is far from uniform
// (otherwise every state collects about the same relevance and ties are close).
void sharpen(nn::Module& cell, double scale, Generator& g) {
  NoGradGuard ng;
  for (auto& kv : cell.named_parameters()) nn::init::uniform_(kv.second, -scale, scale, &g);
}

template <typename Cell, typename Run>
void screened_case(const std::string& op, bool with_c, Run run) {
  add_instance(op, "nu2_rho2_T7", [op, with_c, run](Maker& m) {
    for (uint64_t seed = 1; seed < 200; ++seed) {
      Generator g(seed);
      auto cell = std::make_shared<Cell>(kI, kH, kNu, kRho, DType::f64, &g);
      sharpen(*cell, 1.2, g);
      Inputs in{cpu_leaf(g, {kB, kT, kI}), cpu_leaf(g, {kB, kH}, 0.5)};
      if (with_c) in.push_back(cpu_leaf(g, {kB, kH}, 0.5));
      models::ScreeningTrace tr;
      {
        NoGradGuard ng;
        run(*cell, in, &tr);
      }
      if (tr.replacements >= 1 && tr.rejections >= 1 && tr.admissions >= 1 && tr.min_margin > 1e-3) {
        Inputs placed = place(m, in, *cell);
        return CaseInstance{placed, [cell, run](const Inputs& x) { return run(*cell, x, nullptr); }};
      }
    }
    REMORA_FAIL(op << " gradcheck: no seed in 1..199 gives a run with clear screening margins");
  });
}

}  // namespace

void register_recurrent_cases() {
  // The two one-node splits of nn/rnn.h (some outputs unused: zeros in backward).
  add("unbind_steps", "some_steps_unused", [](Maker& m) { return Inputs{m.leaf({4, 2, 3})}; },
      [](const Inputs& in) {
        std::vector<Tensor> s = nn::unbind_steps(in[0]);
        return cat({mul(s[0], s[3]), tanh(s[1])}, 0);
      });
  add("split_last", "some_parts_unused", [](Maker& m) { return Inputs{m.leaf({2, 8})}; },
      [](const Inputs& in) {
        std::vector<Tensor> s = nn::split_last(in[0], 4);
        return cat({mul(s[0], s[2]), sigmoid(s[3])}, 0);
      });
  // nn::RNN / nn::LSTM, two layers, from a given initial state.
  add_instance("rnn", "2layers_h0", [](Maker& m) {
    Generator g(11);
    auto rnn = std::make_shared<nn::RNN>(kI, kH, 2, "tanh", true, 0.0, DType::f64, &g);
    Inputs in = place(m, {cpu_leaf(g, {kB, 4, kI}), cpu_leaf(g, {2, kB, kH}, 0.5)}, *rnn);
    return CaseInstance{in, [rnn](const Inputs& x) {
                          nn::RNN::Output o = rnn->forward(x[0], x[1]);
                          return cat({o.output.reshape({-1}), o.h_n.reshape({-1})}, 0);
                        }};
  });
  add_instance("lstm", "2layers_h0_c0", [](Maker& m) {
    Generator g(12);
    auto lstm = std::make_shared<nn::LSTM>(kI, kH, 2, true, 0.0, DType::f64, &g);
    Inputs in = place(m, {cpu_leaf(g, {kB, 4, kI}), cpu_leaf(g, {2, kB, kH}, 0.5), cpu_leaf(g, {2, kB, kH}, 0.5)},
                      *lstm);
    return CaseInstance{in, [lstm](const Inputs& x) {
                          nn::LSTM::Output o = lstm->forward(x[0], x[1], x[2]);
                          return cat({o.output.reshape({-1}), o.c_n.reshape({-1})}, 0);
                        }};
  });
  // The screened cells: outputs h_0..h_{T-1} (and c_T for the LSTM).
  screened_case<models::RelRNNCell>(
      "relrnn", false, [](const models::RelRNNCell& m, const Inputs& in, models::ScreeningTrace* tr) {
        models::ScreeningOptions opt;
        opt.trace = tr;
        return m.forward(in[0], in[1], opt).output.reshape({-1});
      });
  screened_case<models::RelLSTMCell>(
      "rellstm", true, [](const models::RelLSTMCell& m, const Inputs& in, models::ScreeningTrace* tr) {
        models::ScreeningOptions opt;
        opt.trace = tr;
        models::RelLSTMCell::Output o = m.forward(in[0], in[1], in[2], opt);
        return cat({o.output.reshape({-1}), o.c_n.reshape({-1})}, 0);
      });
}

}  // namespace remora::cases
