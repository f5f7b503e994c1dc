// SPDX-License-Identifier: BSD-3-Clause
#include "rnn.h"

#include <cmath>
#include <functional>
#include <tuple>

#include "../core/autograd.h"
#include "../ops/ops.h"
#include "init.h"

namespace remora {
namespace nn {

namespace {

void check_sizes(const char* who, int64_t input_size, int64_t hidden_size, int64_t num_layers,
                 double dropout, DType dt) {
  REMORA_CHECK(input_size > 0 && hidden_size > 0 && num_layers > 0,
               who << ": input_size, hidden_size and num_layers must be > 0, got " << input_size
                   << ", " << hidden_size << ", " << num_layers);
  REMORA_CHECK(dropout >= 0 && dropout < 1, who << ": dropout must be in [0, 1), got " << dropout);
  REMORA_CHECK(is_floating(dt), who << ": dtype must be floating, got " << dtype_name(dt));
}

// Registers weight_ih_l{l}, weight_hh_l{l}, bias_ih_l{l}, bias_hh_l{l} (torch's order).
void make_layers(Module& m, int64_t I, int64_t H, int64_t G, int64_t n, bool bias, DType dt,
                 std::vector<Tensor>& wih, std::vector<Tensor>& whh, std::vector<Tensor>& bih,
                 std::vector<Tensor>& bhh, const std::function<Tensor(const std::string&, Tensor)>& reg) {
  for (int64_t l = 0; l < n; ++l) {
    const std::string s = "_l" + std::to_string(l);
    wih.push_back(reg("weight_ih" + s, Tensor::empty({G, l == 0 ? I : H}, dt)));
    whh.push_back(reg("weight_hh" + s, Tensor::empty({G, H}, dt)));
    bih.push_back(bias ? reg("bias_ih" + s, Tensor::empty({G}, dt)) : Tensor());
    bhh.push_back(bias ? reg("bias_hh" + s, Tensor::empty({G}, dt)) : Tensor());
  }
}

void uniform_all(Module& m, int64_t H, Generator* gen) {
  const double k = 1.0 / std::sqrt(double(H));
  for (auto& kv : m.named_parameters()) init::uniform_(kv.second, -k, k, gen);
}

void check_input(const char* who, const Tensor& x, int64_t I) {
  REMORA_CHECK(x.defined() && is_floating(x.dtype()) && x.dim() == 3 && x.size(2) == I,
               who << "::forward: x must be floating [B, L, " << I << "] (batch first), got "
                   << (x.defined() ? x.str() : "undefined"));
}

void check_state(const char* who, const char* name, const Tensor& s, int64_t n, int64_t B, int64_t H) {
  if (!s.defined()) return;
  REMORA_CHECK(s.dim() == 3 && s.size(0) == n && s.size(1) == B && s.size(2) == H,
               who << "::forward: " << name << " " << shape_str(s.shape()) << " must be [n, B, H] = ["
                   << n << ", " << B << ", " << H << "]");
}

}  // namespace

Tensor recurrent_input_projection(const Tensor& x, const Tensor& w_ih, const Tensor& b_ih,
                                  const Tensor& b_hh) {
  Tensor b = b_ih.defined() && b_hh.defined() ? add(b_ih, b_hh) : (b_ih.defined() ? b_ih : b_hh);
  return linear(x.transpose(0, 1).contiguous(), w_ih, b);  // [L, B, G]
}

std::pair<Tensor, Tensor> lstm_step(const Tensor& gates_x, const Tensor& h, const Tensor& c,
                                    const Tensor& w_hh) {
  Tensor gates = add(gates_x, linear(h, w_hh));  // [B, 4H]
  std::vector<Tensor> q = split(gates, gates.size(-1) / 4, -1);  // i, f, g, o: [B, H] each
  Tensor c_t = add(mul(sigmoid(q[1]), c), mul(sigmoid(q[0]), tanh(q[2])));
  Tensor h_t = mul(sigmoid(q[3]), tanh(c_t));
  return {h_t, c_t};
}

// ---- RNN ----

RNN::RNN(const RNNOptions& o, DType dt, Generator* g)
    : RNN(o.input_size(), o.hidden_size(), o.num_layers(), o.nonlinearity(), o.bias(), o.dropout(), dt, g) {}

RNN::RNN(int64_t I, int64_t H, int64_t n, const std::string& nl, bool bias, double p, DType dt,
         Generator* g)
    : input_size(I), hidden_size(H), num_layers(n), nonlinearity(nl), dropout(p), gen(g) {
  check_sizes("RNN", I, H, n, p, dt);
  REMORA_CHECK(nl == "tanh" || nl == "relu",
               "RNN: nonlinearity must be \"tanh\" or \"relu\", got \"" << nl << "\"");
  make_layers(*this, I, H, H, n, bias, dt, weight_ih, weight_hh, bias_ih, bias_hh,
              [this](const std::string& name, Tensor t) { return register_parameter(name, t); });
  reset_parameters(g);
}

void RNN::reset_parameters(Generator* g) { uniform_all(*this, hidden_size, g); }

RNN::Output RNN::forward(const Tensor& x, const Tensor& h0) const {
  check_input("RNN", x, input_size);
  const int64_t B = x.size(0), L = x.size(1), H = hidden_size;
  check_state("RNN", "h0", h0, num_layers, B, H);
  REMORA_CHECK(x.dtype() == weight_ih[0].dtype(),
               "RNN::forward: x is " << dtype_name(x.dtype()) << " but the weights are "
                                     << dtype_name(weight_ih[0].dtype()) << "; convert one of them");
  Output out;
  std::vector<Tensor> last;
  Tensor in = x;
  for (int64_t l = 0; l < num_layers; ++l) {
    if (l > 0) in = remora::dropout(in, dropout, is_training(), gen);
    std::vector<Tensor> xp = unbind(recurrent_input_projection(
        in, weight_ih[size_t(l)], bias_ih[size_t(l)], bias_hh[size_t(l)]));  // L x [B, H]
    Tensor h = h0.defined() ? h0.select(0, l) : Tensor::zeros({B, H}, x.dtype(), x.device());
    std::vector<Tensor> hs;
    for (int64_t t = 0; t < L; ++t) {
      Tensor pre = add(xp[size_t(t)], linear(h, weight_hh[size_t(l)]));  // [B, H]
      h = nonlinearity == "tanh" ? tanh(pre) : relu(pre);
      hs.push_back(h);
    }
    last.push_back(h);
    in = stack(hs, 1);  // [B, L, H]
  }
  out.output = in;
  out.h_n = stack(last, 0);
  return out;
}

// ---- LSTM ----

LSTM::LSTM(const LSTMOptions& o, DType dt, Generator* g)
    : LSTM(o.input_size(), o.hidden_size(), o.num_layers(), o.bias(), o.dropout(), dt, g) {}

LSTM::LSTM(int64_t I, int64_t H, int64_t n, bool bias, double p, DType dt, Generator* g)
    : input_size(I), hidden_size(H), num_layers(n), dropout(p), gen(g) {
  check_sizes("LSTM", I, H, n, p, dt);
  make_layers(*this, I, H, 4 * H, n, bias, dt, weight_ih, weight_hh, bias_ih, bias_hh,
              [this](const std::string& name, Tensor t) { return register_parameter(name, t); });
  reset_parameters(g);
}

void LSTM::reset_parameters(Generator* g) { uniform_all(*this, hidden_size, g); }

LSTM::Output LSTM::forward(const Tensor& x, const Tensor& h0, const Tensor& c0) const {
  check_input("LSTM", x, input_size);
  const int64_t B = x.size(0), L = x.size(1), H = hidden_size;
  REMORA_CHECK(h0.defined() == c0.defined(), "LSTM::forward: give both h0 and c0, or neither");
  check_state("LSTM", "h0", h0, num_layers, B, H);
  check_state("LSTM", "c0", c0, num_layers, B, H);
  REMORA_CHECK(x.dtype() == weight_ih[0].dtype(),
               "LSTM::forward: x is " << dtype_name(x.dtype()) << " but the weights are "
                                      << dtype_name(weight_ih[0].dtype()) << "; convert one of them");
  Output out;
  std::vector<Tensor> hl, cl;
  Tensor in = x;
  for (int64_t l = 0; l < num_layers; ++l) {
    if (l > 0) in = remora::dropout(in, dropout, is_training(), gen);
    std::vector<Tensor> xp = unbind(recurrent_input_projection(
        in, weight_ih[size_t(l)], bias_ih[size_t(l)], bias_hh[size_t(l)]));  // L x [B, 4H]
    Tensor h = h0.defined() ? h0.select(0, l) : Tensor::zeros({B, H}, x.dtype(), x.device());
    Tensor c = c0.defined() ? c0.select(0, l) : Tensor::zeros({B, H}, x.dtype(), x.device());
    std::vector<Tensor> hs;
    for (int64_t t = 0; t < L; ++t) {
      std::tie(h, c) = lstm_step(xp[size_t(t)], h, c, weight_hh[size_t(l)]);
      hs.push_back(h);
    }
    hl.push_back(h);
    cl.push_back(c);
    in = stack(hs, 1);
  }
  out.output = in;
  out.h_n = stack(hl, 0);
  out.c_n = stack(cl, 0);
  return out;
}

}  // namespace nn
}  // namespace remora
