// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// Elman RNN and LSTM layers with torch.nn.RNN / torch.nn.LSTM semantics
/// (batch_first = True, one direction), parameter names and initialisation, so a
/// torch state_dict loads with load_state_dict and gives the same numbers.
///
/// Letters: B batch, L time, I input width, H hidden width, G gate width
/// (H for the RNN, 4H for the LSTM), n layers.
///
///     Elman:  h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)      (or relu)
///     LSTM:   [i f g o] = x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh     (gate order i, f, g, o)
///             c_t = sigmoid(f) c_{t-1} + sigmoid(i) tanh(g);   h_t = sigmoid(o) tanh(c_t)
///
/// Names per layer l: weight_ih_l{l} [G, I or H], weight_hh_l{l} [G, H],
/// bias_ih_l{l} [G], bias_hh_l{l} [G]. Init: every tensor ~ U(-1/sqrt(H), 1/sqrt(H)).
///
/// Fast path: the input part x W_ih^T + b_ih + b_hh of all L steps is one matmul;
/// each step then does one matmul (h W_hh^T) and elementwise ops. The naive
/// reference (one full cell per step, tests/test_relrnn.cpp) and torch.nn.RNN /
/// nn.LSTM (tests/data/relrnn_*.safetensors) check it.
///
/// The layers are built on the CPU (Module::to moves them) and run on the CPU and
/// CUDA, in their floating dtype. They are held by std::shared_ptr: they have no
/// `layer(x)` or `Name{nullptr}` spellings.
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

/// One LSTM step from precomputed gate inputs. gates_x [B, 4H] (the input part,
/// biases included), h, c [B, H], w_hh [4H, H]. Returns {h_t, c_t}, each [B, H].
/// Gradient to every input.
std::pair<Tensor, Tensor> lstm_step(const Tensor& gates_x, const Tensor& h, const Tensor& c,
                                    const Tensor& w_hh);

/// torch.nn.RNN (Elman), batch first: n stacked layers of
/// h_t = act(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh), act tanh or relu.
/// Parameters weight_ih_l{l} [H, I or H], weight_hh_l{l} [H, H], bias_ih_l{l} [H],
/// bias_hh_l{l} [H] (no biases when bias = false).
class RNN : public Module {
 public:
  /// nonlinearity "tanh" or "relu"; dropout is applied to every layer's output
  /// except the last (torch's semantics; training mode only). input_size,
  /// hidden_size, num_layers > 0, dropout in [0, 1) and a floating dt, else an
  /// Error. gen draws the initial values and the dropout masks (null: the
  /// global generator); it must outlive the layer.
  RNN(int64_t input_size, int64_t hidden_size, int64_t num_layers = 1,
      const std::string& nonlinearity = "tanh", bool bias = true, double dropout = 0,
      DType dt = DType::f32, Generator* gen = nullptr);
  /// From RNNOptions.
  explicit RNN(const RNNOptions& o, DType dt = DType::f32, Generator* gen = nullptr);
  std::string type_name() const override { return "RNN"; }

  /// What forward returns (torch returns the pair (output, h_n)).
  struct Output {
    Tensor output;  ///< [B, L, H], the last layer's h_t for every t.
    Tensor h_n;     ///< [n, B, H], each layer's last h.
  };
  /// x [B, L, I]; h0 [n, B, H] (undefined: zeros). x must be floating of the
  /// weights' dtype and on their device; another shape of x or h0, or another
  /// dtype of x, is an Error. Gradient to x, h0 and every parameter.
  Output forward(const Tensor& x, const Tensor& h0 = Tensor()) const;
  /// Re-draws every parameter from U(-1/sqrt(H), 1/sqrt(H)) (gen, or the global
  /// generator).
  void reset_parameters(Generator* gen = nullptr);

  /// Input width I.
  int64_t input_size, hidden_size, num_layers;  ///< Number of layers n.
  /// \var hidden_size
  /// Hidden width H.

  /// "tanh" or "relu", read at each forward.
  std::string nonlinearity;
  /// Dropout probability between layers, read at each forward.
  double dropout;
  /// The parameters per layer l: weight_ih_l{l}.
  std::vector<Tensor> weight_ih, weight_hh, bias_ih, bias_hh;  ///< bias_hh_l{l} per layer (undefined without biases).
  /// \var weight_hh
  /// weight_hh_l{l} per layer.

  /// \var bias_ih
  /// bias_ih_l{l} per layer (undefined without biases).

  /// The dropout masks' generator (null: the global generator).
  Generator* gen;
};

/// torch.nn.LSTM, batch first: n stacked layers of the LSTM cell above (gate order
/// i, f, g, o). Parameters weight_ih_l{l} [4H, I or H], weight_hh_l{l} [4H, H],
/// bias_ih_l{l} [4H], bias_hh_l{l} [4H] (no biases when bias = false). No
/// proj_size.
class LSTM : public Module {
 public:
  /// dropout is applied to every layer's output except the last (training mode
  /// only). input_size, hidden_size, num_layers > 0, dropout in [0, 1) and a
  /// floating dt, else an Error. gen draws the initial values and the dropout
  /// masks (null: the global generator); it must outlive the layer.
  LSTM(int64_t input_size, int64_t hidden_size, int64_t num_layers = 1, bool bias = true,
       double dropout = 0, DType dt = DType::f32, Generator* gen = nullptr);
  /// From LSTMOptions.
  explicit LSTM(const LSTMOptions& o, DType dt = DType::f32, Generator* gen = nullptr);
  std::string type_name() const override { return "LSTM"; }

  /// What forward returns (torch returns (output, (h_n, c_n))).
  struct Output {
    Tensor output;    ///< [B, L, H], the last layer's h_t for every t.
    /// [n, B, H], each layer's last h.
    Tensor h_n, c_n;  ///< [n, B, H], each layer's last c.
  };
  /// x [B, L, I]; h0, c0 [n, B, H] (undefined: zeros; give both or neither, else
  /// an Error). x must be floating of the weights' dtype and on their device;
  /// another shape of x, h0 or c0, or another dtype of x, is an Error. Gradient
  /// to x, h0, c0 and every parameter.
  Output forward(const Tensor& x, const Tensor& h0 = Tensor(), const Tensor& c0 = Tensor()) const;
  /// Re-draws every parameter from U(-1/sqrt(H), 1/sqrt(H)) (gen, or the global
  /// generator).
  void reset_parameters(Generator* gen = nullptr);

  /// Input width I.
  int64_t input_size, hidden_size, num_layers;  ///< Number of layers n.
  /// \var hidden_size
  /// Hidden width H.

  /// Dropout probability between layers, read at each forward.
  double dropout;
  /// The parameters per layer l: weight_ih_l{l}.
  std::vector<Tensor> weight_ih, weight_hh, bias_ih, bias_hh;  ///< bias_hh_l{l} per layer (undefined without biases).
  /// \var weight_hh
  /// weight_hh_l{l} per layer.

  /// \var bias_ih
  /// bias_ih_l{l} per layer (undefined without biases).

  /// The dropout masks' generator (null: the global generator).
  Generator* gen;
};

/// unbind(x, 0) (ops/ops.h): the slices of x along dim 0, e.g. the steps of a
/// time-major [L, B, ...] tensor.
inline std::vector<Tensor> unbind_steps(const Tensor& x) { return unbind(x, 0); }
/// split (ops/ops.h) of the last dim into n equal parts; an Error when x is
/// undefined, 0-d, n < 1 or n does not divide the last dim.
inline std::vector<Tensor> split_last(const Tensor& x, int64_t n) {
  REMORA_CHECK(x.defined() && x.dim() >= 1 && n >= 1 && x.size(-1) % n == 0,
               "split_last: the last dim of " << (x.defined() ? x.str() : "undefined")
                                              << " must split into " << n << " equal parts");
  return split(x, x.size(-1) / n, -1);
}

/// The input part of a recurrence for all steps, time-major so that each step's
/// slice is contiguous: x [B, L, I] -> [L, B, G] = x W_ih^T + b_ih + b_hh, with
/// w_ih [G, I] and either bias [G] possibly undefined. Gradient to x, w_ih and
/// the biases.
Tensor recurrent_input_projection(const Tensor& x, const Tensor& w_ih, const Tensor& b_ih,
                                  const Tensor& b_hh);

}  // namespace nn
}  // namespace remora
