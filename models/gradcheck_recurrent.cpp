// Float64 gradient checks (SPEC §10) of the recurrent cores: nn::RNN, nn::LSTM
// (two layers each) and the relevancy-screening cells RelRNNCell, RelLSTMCell,
// w.r.t. the input sequence, the initial state and every parameter.
//
// They live in models/ because ops/ must not depend on models/; ops/gradcheck.cpp
// calls register_recurrent_gradchecks() once, through a forward declaration.
//
// Screening decisions are made on forward values, so a finite-difference
// perturbation must not flip one: make_inputs draws seeds in a fixed order and
// keeps the first whose run (ν = 2, ρ = 2, T = 7, B = 2) has admissions, at
// least one replacement and one rejection, and a decision margin (see
// ScreeningTrace::min_margin) above 1e-3, far above what eps = 1e-6 can move.
#include <functional>
#include <memory>

#include "../core/autograd.h"
#include "../core/generator.h"
#include "../nn/init.h"
#include "../ops/gradcheck.h"
#include "../ops/ops.h"
#include "../nn/rnn.h"
#include "relrnn.h"

namespace remora {

namespace {

using Inputs = std::vector<Tensor>;
constexpr int64_t kB = 2, kT = 7, kI = 2, kH = 3, kNu = 2, kRho = 2;

Tensor leaf(Generator& g, const Shape& s, double scale = 1) {
  return (Tensor::randn(s, DType::f64, Device::cpu(), &g) * scale).detach().requires_grad_();
}

// Inputs = {x, h0, [c0,] parameters...}; the module is shared between
// make_inputs and fn (its parameters ARE the checked leaves).
template <typename M>
struct Holder {
  std::shared_ptr<M> m;
};

Inputs with_params(Inputs in, const nn::Module& m) {
  for (const Tensor& p : m.parameters()) in.push_back(p);
  return in;
}

void add_case(const std::string& op, const std::string& variant, std::function<Inputs()> make, GradFn fn) {
  register_gradcheck({op, op + "/" + variant, std::move(make), std::move(fn), GradcheckOptions{}});
}

// Scales a screened cell's attention weights so that α is far from uniform
// (otherwise every state collects about the same relevance and ties are close).
void sharpen(nn::Module& cell, double scale, Generator& g) {
  NoGradGuard ng;
  for (auto& kv : cell.named_parameters()) nn::init::uniform_(kv.second, -scale, scale, &g);
}

template <typename Cell, typename Run>
void screened_case(const std::string& op, bool with_c, Run run) {
  auto hold = std::make_shared<Holder<Cell>>();
  auto make = [hold, run, with_c, op]() {
    for (uint64_t seed = 1; seed < 200; ++seed) {
      Generator g(seed);
      hold->m = std::make_shared<Cell>(kI, kH, kNu, kRho, DType::f64, &g);
      sharpen(*hold->m, 1.2, g);
      Inputs in{leaf(g, {kB, kT, kI}), leaf(g, {kB, kH}, 0.5)};
      if (with_c) in.push_back(leaf(g, {kB, kH}, 0.5));
      models::ScreeningTrace tr;
      {
        NoGradGuard ng;
        run(*hold->m, in, &tr);
      }
      if (tr.replacements >= 1 && tr.rejections >= 1 && tr.admissions >= 1 && tr.min_margin > 1e-3)
        return with_params(in, *hold->m);
    }
    REMORA_FAIL(op << " gradcheck: no seed in 1..199 gives a run with clear screening margins");
  };
  add_case(op, "nu2_rho2_T7", make, [hold, run](const Inputs& in) { return run(*hold->m, in, nullptr); });
}

}  // namespace

void register_recurrent_gradchecks() {
  // The two one-node splits of nn/rnn.h (some outputs unused: zeros in backward).
  add_case("unbind_steps", "some_steps_unused",
           []() {
             Generator g(13);
             return Inputs{leaf(g, {4, 2, 3})};
           },
           [](const Inputs& in) {
             std::vector<Tensor> s = nn::unbind_steps(in[0]);
             return cat({mul(s[0], s[3]), tanh(s[1])}, 0);
           });
  add_case("split_last", "some_parts_unused",
           []() {
             Generator g(14);
             return Inputs{leaf(g, {2, 8})};
           },
           [](const Inputs& in) {
             std::vector<Tensor> s = nn::split_last(in[0], 4);
             return cat({mul(s[0], s[2]), sigmoid(s[3])}, 0);
           });
  // nn::RNN / nn::LSTM, two layers, from a given initial state.
  {
    auto hold = std::make_shared<Holder<nn::RNN>>();
    add_case("rnn", "2layers_h0",
             [hold]() {
               Generator g(11);
               hold->m = std::make_shared<nn::RNN>(kI, kH, 2, "tanh", true, 0.0, DType::f64, &g);
               return with_params({leaf(g, {kB, 4, kI}), leaf(g, {2, kB, kH}, 0.5)}, *hold->m);
             },
             [hold](const Inputs& in) {
               nn::RNN::Output o = hold->m->forward(in[0], in[1]);
               return cat({o.output.reshape({-1}), o.h_n.reshape({-1})}, 0);
             });
  }
  {
    auto hold = std::make_shared<Holder<nn::LSTM>>();
    add_case("lstm", "2layers_h0_c0",
             [hold]() {
               Generator g(12);
               hold->m = std::make_shared<nn::LSTM>(kI, kH, 2, true, 0.0, DType::f64, &g);
               return with_params({leaf(g, {kB, 4, kI}), leaf(g, {2, kB, kH}, 0.5), leaf(g, {2, kB, kH}, 0.5)},
                                  *hold->m);
             },
             [hold](const Inputs& in) {
               nn::LSTM::Output o = hold->m->forward(in[0], in[1], in[2]);
               return cat({o.output.reshape({-1}), o.c_n.reshape({-1})}, 0);
             });
  }
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

}  // namespace remora
