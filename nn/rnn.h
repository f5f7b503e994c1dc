// SPDX-License-Identifier: BSD-3-Clause
// Elman RNN and LSTM layers with torch.nn.RNN / torch.nn.LSTM semantics
// (batch_first = True), parameter names and initialisation, so a torch
// state_dict loads with load_state_dict and gives the same numbers.
//
// Letters: B batch, L time, I input width, H hidden width, G gate width
// (H for the RNN, 4H for the LSTM), n layers.
//
//   Elman:  h_t = tanh(x_t W_ihᵀ + b_ih + h_{t-1} W_hhᵀ + b_hh)      (or relu)
//   LSTM:   [i f g o] = x_t W_ihᵀ + b_ih + h_{t-1} W_hhᵀ + b_hh     (gate order i, f, g, o)
//           c_t = σ(f) c_{t-1} + σ(i) tanh(g);   h_t = σ(o) tanh(c_t)
//
// Names per layer l: weight_ih_l{l} [G, I or H], weight_hh_l{l} [G, H],
// bias_ih_l{l} [G], bias_hh_l{l} [G]. Init: every tensor ~ U(-1/√H, 1/√H).
//
// Fast path: the input part x W_ihᵀ + b_ih + b_hh of all L steps is one matmul;
// each step then does one matmul (h W_hhᵀ) and elementwise ops. The naive
// reference (one full cell per step, tests/test_relrnn.cpp) and torch.nn.RNN /
// nn.LSTM (tests/data/relrnn_*.safetensors) check it.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "../core/generator.h"
#include "../ops/ops.h"
#include "module.h"
#include "options.h"

namespace remora {
namespace nn {

// One LSTM step from precomputed gate inputs. gates_x [B, 4H] (the input part,
// biases included), h, c [B, H], w_hh [4H, H]. Returns {h_t, c_t}.
std::pair<Tensor, Tensor> lstm_step(const Tensor& gates_x, const Tensor& h, const Tensor& c,
                                    const Tensor& w_hh);

class RNN : public Module {
 public:
  /// nonlinearity "tanh" or "relu"; dropout is applied to every layer's output
  /// except the last (torch's semantics; training mode only).
  RNN(int64_t input_size, int64_t hidden_size, int64_t num_layers = 1,
      const std::string& nonlinearity = "tanh", bool bias = true, double dropout = 0,
      DType dt = DType::f32, Generator* gen = nullptr);
  explicit RNN(const RNNOptions& o, DType dt = DType::f32, Generator* gen = nullptr);
  std::string type_name() const override { return "RNN"; }

  struct Output {
    Tensor output;  // [B, L, H], the last layer's h_t for every t
    Tensor h_n;     // [n, B, H], each layer's last h
  };
  /// x [B, L, I]; h0 [n, B, H] (undefined: zeros).
  Output forward(const Tensor& x, const Tensor& h0 = Tensor()) const;
  void reset_parameters(Generator* gen = nullptr);

  int64_t input_size, hidden_size, num_layers;
  std::string nonlinearity;
  double dropout;
  std::vector<Tensor> weight_ih, weight_hh, bias_ih, bias_hh;  // per layer (biases may be undefined)
  Generator* gen;
};

class LSTM : public Module {
 public:
  LSTM(int64_t input_size, int64_t hidden_size, int64_t num_layers = 1, bool bias = true,
       double dropout = 0, DType dt = DType::f32, Generator* gen = nullptr);
  explicit LSTM(const LSTMOptions& o, DType dt = DType::f32, Generator* gen = nullptr);
  std::string type_name() const override { return "LSTM"; }

  struct Output {
    Tensor output;    // [B, L, H]
    Tensor h_n, c_n;  // [n, B, H]
  };
  /// x [B, L, I]; h0, c0 [n, B, H] (undefined: zeros; give both or neither).
  Output forward(const Tensor& x, const Tensor& h0 = Tensor(), const Tensor& c0 = Tensor()) const;
  void reset_parameters(Generator* gen = nullptr);

  int64_t input_size, hidden_size, num_layers;
  double dropout;
  std::vector<Tensor> weight_ih, weight_hh, bias_ih, bias_hh;
  Generator* gen;
};

// Former names of ops::unbind / ops::split (ops/ops.h), kept for callers outside nn/
// (models/relrnn.cpp, the recurrent gradcheck cases); they define no op of their own.
inline std::vector<Tensor> unbind_steps(const Tensor& x) { return unbind(x, 0); }
inline std::vector<Tensor> split_last(const Tensor& x, int64_t n) {
  REMORA_CHECK(x.defined() && x.dim() >= 1 && n >= 1 && x.size(-1) % n == 0,
               "split_last: the last dim of " << (x.defined() ? x.str() : "undefined")
                                              << " must split into " << n << " equal parts");
  return split(x, x.size(-1) / n, -1);
}

// The input part of a recurrence for all steps, time-major so that each step's
// slice is contiguous: x [B, L, I] -> [L, B, G] = x W_ihᵀ + b_ih + b_hh.
Tensor recurrent_input_projection(const Tensor& x, const Tensor& w_ih, const Tensor& b_ih,
                                  const Tensor& b_hh);

}  // namespace nn
}  // namespace remora
