// SPDX-License-Identifier: BSD-3-Clause
// Relevancy screening (docs/math.md#relevancy-screening-relrnn-and-rellstm; Kerg et al. 2020, official bhargav104/MemoryNets)
// and the recurrent language / sequence-labelling models (rnn, lstm, relrnn, rellstm).
//
// Letters: B batch, L time, I input width, H hidden width (= d_model),
// ν short-term buffer size (short_term), ρ relevant-set size (relevant),
// K = ν + ρ memory slots, V vocabulary, C output classes.
//
// The cell, per batch row, at step t:
//   S = the last ν hidden states {h_{t-ν}, ..., h_{t-1}} (h_{t-1} included),
//   R = at most ρ older states chosen by relevance.
//   e_i = vᵀ tanh(V_a s_{t-1} + U_a h_i) for h_i ∈ S ∪ R (empty slots -> -inf)
//   α = softmax(e);  c_t = Σ α_i h_i;  s_t = ½ (h_{t-1} + c_t)
//   RelRNN:  h_t = tanh(U x_t + V s_t + b)
//   RelLSTM: (h_t, c_t) = LSTM(x_t, recurrent input s_t, cell c_{t-1})
// At t = 0 the memory is empty and s_0 = h_{-1} (the carried state, zeros at the
// start of a stream), so step 0 is a plain RNN / LSTM step.
//
// Relevance: C(i) = Σ of the detached α received while h_i is in S. When h_i
// leaves S (at step t = i + ν, after h_t is computed and after step t's α has
// been counted): if |R| < ρ it takes the first empty R slot; otherwise it
// replaces the R member with the smallest C when C(i) > that C (strictly). Tie
// rule: among R members with equal smallest C the lowest slot index is
// replaced; C(i) equal to the smallest C is not admitted. R members keep their
// C from the moment they left S (they collect no more α). Both as the official
// code (torch.argmin picks the first minimum, the comparison is '>').
//
// Memory layout, per batch row: K = ν + ρ slots, [B, K, H]; slots 0..ν-1 hold S
// oldest first, slots ν.. hold R. The tensors are rebuilt functionally each step
// (cat for the S shift, where for R replacements), so gradients flow through α
// into the stored states. The screening decisions are made on the host on the
// detached α (O(B K) per step); the attention itself is one batched op.
//
// Differences from the official code: docs/relevancy.md lists them line by line
// with the official file and line. In short:
//  - RelRNN: the official code sets s_0 to the pre-activation U x_0 + V h_{-1} + b
//    of step 0 (the query at t = 1); here s_0 = h_{-1}, as the official RelLSTM does.
//    This changes no number: at t = 1 the memory holds h_0 alone, so α = 1 and
//    s_1 = h_0 whatever the query (and no gradient reaches s_0 through α).
//  - The official code multiplies c_t by a constant `attn` (1.0 in every script).
//  - Initialisation and input encoding are options of RecurrentConfig (init,
//    recurrent_init, input_init, input); the cells' own reset_parameters() keep
//    U(-1/√H, 1/√H) for every weight (torch.nn.RNN's rule; the gradient checks use it).
//  - Per-example Python lists there; batched slot tensors here (same numbers).
//
// The S/R memory restarts at the start of every run() call (every segment of a
// stream); only h (and the LSTM cell c) are carried in SequenceState::cells.
#pragma once
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "../nn/layers.h"
#include "../nn/rnn.h"
#include "sequence_model.h"

namespace remora {
namespace models {

// A per-step record of the screening, for tests and analysis. Entry t is the
// memory after step t (after the screening of the state leaving S and the push
// of h_t), flattened row-major [B, K].
struct ScreeningTrace {
  std::vector<std::vector<int64_t>> slot_time;  // time index of the state in each slot, -1 = empty
  std::vector<std::vector<double>> relevance;   // C of each slot (0 for empty slots)
  std::vector<std::vector<double>> alpha;       // α the bookkeeping used at step t (0 at t = 0;
                                                // the injected values under inject_alpha)
  std::vector<Tensor> slots;                    // the slot tensor [B, K, H], detached
  int64_t admissions = 0;    // states that joined a non-full R
  int64_t replacements = 0;  // states that replaced an R member
  int64_t rejections = 0;    // states that left S and were dropped
  // The smallest decision margin seen: |C(leaving) - min C(R)| at every
  // comparison with a full R, and the gap between the two smallest C of R when
  // a replacement picked the minimum. A perturbation smaller than this cannot
  // change a decision (gradient checks rely on it).
  double min_margin = std::numeric_limits<double>::infinity();
};

struct ScreeningOptions {
  ScreeningTrace* trace = nullptr;  // filled when given
  // Test hook: replaces the detached α [B, K] (row-major) that the relevance
  // bookkeeping adds up, (t, alpha) -> alpha'. The forward pass still uses the
  // computed α; only the screening decisions follow the injected values.
  std::function<std::vector<double>(int64_t t, const std::vector<double>& alpha)> inject_alpha;
};

// The RelRNN cell run over a sequence. Parameters (the official names):
// U.weight [H, I], U.bias [H], V.weight [H, H], Ua.weight [H, H], Va.weight [H, H], v [1, H].
class RelRNNCell : public nn::Module {
 public:
  RelRNNCell(int64_t input_size, int64_t hidden_size, int64_t short_term, int64_t relevant,
             DType dt = DType::f32, Generator* gen = nullptr);
  std::string type_name() const override { return "RelMemRNN"; }
  struct Output {
    Tensor output;  // [B, L, H]
    Tensor h_n;     // [B, H], the last h
  };
  /// x [B, L, I]; h0 [B, H] (undefined: zeros). The memory starts empty.
  Output forward(const Tensor& x, const Tensor& h0 = Tensor(), const ScreeningOptions& opt = {}) const;
  void reset_parameters(Generator* gen = nullptr);

  int64_t input_size, hidden_size, short_term, relevant;
  Tensor v;  // [1, H]
  std::shared_ptr<nn::Linear> U, V, Ua, Va;
};

// The RelLSTM cell: an LSTM whose recurrent input is s_t. Parameters:
// weight_ih [4H, I], weight_hh [4H, H], bias_ih [4H], bias_hh [4H] (torch.nn.LSTMCell's
// names, gate order i, f, g, o), v [1, H], Ua.weight [H, H], Va.weight [H, H].
class RelLSTMCell : public nn::Module {
 public:
  RelLSTMCell(int64_t input_size, int64_t hidden_size, int64_t short_term, int64_t relevant,
              DType dt = DType::f32, Generator* gen = nullptr);
  std::string type_name() const override { return "RelLSTM"; }
  struct Output {
    Tensor output;    // [B, L, H]
    Tensor h_n, c_n;  // [B, H]
  };
  /// x [B, L, I]; h0, c0 [B, H] (undefined: zeros; both or neither).
  Output forward(const Tensor& x, const Tensor& h0 = Tensor(), const Tensor& c0 = Tensor(),
                 const ScreeningOptions& opt = {}) const;
  void reset_parameters(Generator* gen = nullptr);

  int64_t input_size, hidden_size, short_term, relevant;
  Tensor weight_ih, weight_hh, bias_ih, bias_hh, v;
  std::shared_ptr<nn::Linear> Ua, Va;
};

// The official code's initialisation (bhargav104/MemoryNets; docs/relevancy.md):
// xavier_normal_ std = sqrt(2 / (fan_in + fan_out)), kaiming_normal_ std = sqrt(2 / fan_in).
//   RNN-type cells (rnn, relrnn): U / weight_ih by input_init (xavier | kaiming),
//     V / weight_hh by recurrent_init: henaff | cayley = expm of a block-diagonal
//     skew matrix, i.e. 2x2 rotations by θ_k (henaff θ ~ U(-π, 0); cayley
//     θ = -tan(u / 2), u ~ U(0, π/2)), a lone 1 when H is odd; xavier | kaiming.
//     The input bias ~ U(±1/√I); bias_hh (nn::RNN) = 0 (the official RNN has one bias).
//   LSTM-type cells (lstm, rellstm): every gate weight (input and recurrent part)
//     ~ N(0, 2 / (I + 2H)) (xavier_normal of a gate's Linear(I + H, H)), bias_ih ~
//     U(±1/√(I + H)), bias_hh = 0 (one bias per gate there). input_init and
//     recurrent_init do not apply.
//   Screened cells: v ~ N(0, 2 / (1 + H)) (xavier_normal of [1, H]); U_a, V_a keep
//     U(±1/√H) (torch's Linear default, as there).
//   Head: input onehot (copytask.py): decoder.weight xavier_normal, bias U(±1/√H);
//     input embedding (PTBtask.py): encoder.weight and decoder.weight U(±0.1), bias 0.
void official_recurrent_init_(Tensor& w, const std::string& kind, Generator* gen);  // [H, H]

struct RecurrentConfig {
  std::string type = "lstm";  // rnn | lstm | relrnn | rellstm
  int64_t n_token = 256;      // vocabulary of the input ids
  int64_t d_model = 128;      // hidden size H (and the embedding width)
  int64_t n_layer = 1;        // stacked layers (rnn / lstm only; relrnn / rellstm need 1)
  int64_t short_term = 10;    // ν, the short-term buffer S (relrnn / rellstm; >= 1)
  int64_t relevant = 10;      // ρ, the relevant set R (relrnn / rellstm; >= 0)
  double dropout = 0.0;       // on the embeddings (the one-hot inputs), between layers and before the head
  int64_t n_out = 0;          // output width: 0 = n_token (language model), else classes
  // Input encoding: "embedding" (encoder.weight [V, H], then the cell's input
  // projection; the official PTB script) or "onehot" (the cell's input projection
  // acts on the one-hot of the id directly, input size V, no encoder; the official
  // copy and denoise scripts).
  std::string input = "embedding";
  // Initialisation: "uniform" (every weight U(±1/√H), torch.nn.RNN's rule; Remora's
  // rule) or "official" (see above). "" = the type's default:
  // official for relrnn / rellstm (docs/math.md#relevancy-screening-relrnn-and-rellstm is silent), uniform for rnn / lstm.
  std::string init = "";
  std::string recurrent_init = "henaff";  // official init of V / weight_hh (rnn, relrnn)
  std::string input_init = "xavier";      // official init of U / weight_ih (rnn, relrnn)
  std::string resolved_init() const { return !init.empty() ? init : screened() ? "official" : "uniform"; }
  int64_t input_width() const { return input == "onehot" ? n_token : d_model; }
  void validate() const;      // errors name the field
  int64_t out_width() const { return n_out > 0 ? n_out : n_token; }
  bool screened() const { return type == "relrnn" || type == "rellstm"; }
  // The memory estimate (tools/driver/memory_estimate.h), f32, from the sizes
  // alone: the parameter count, and the activations of `s`.
  double parameter_count() const;
  struct ActivationBytes {
    double states = 0;     // every step's recurrent states (the gates of an LSTM type)
    double relevancy = 0;  // relrnn / rellstm: the [B, short_term + relevant, d_model] memory per step
    double onehot = 0;     // input "onehot": the one-hot inputs
    double logits = 0;     // the output logits
  };
  ActivationBytes activation_bytes(const ActivationShape& s) const;
};

// embedding -> recurrent core -> linear head, for type rnn | lstm | relrnn | rellstm.
// Parameter names (torch's word_language_model RNNModel layout):
//   encoder.weight [V, H] (input "embedding" only); rnn.<core parameters> (nn::RNN / nn::LSTM names, or the
//   RelRNNCell / RelLSTMCell names above); decoder.weight [n_out, H], decoder.bias.
// State carried across segments (SequenceState::cells, detached, each [B, H]):
//   rnn: h of every layer; lstm: h_0, c_0, h_1, c_1, ... (layer by layer);
//   relrnn: h; rellstm: h, c. The S/R memory is not carried (restarts per segment).
class RecurrentLM : public SequenceModel {
 public:
  explicit RecurrentLM(const RecurrentConfig& c, DType dt = DType::f32, Generator* gen = nullptr);
  std::string type_name() const override { return "RecurrentLM(" + cfg.type + ")"; }

  struct Output {
    Tensor logits;  // [B, L, n_out]
    Tensor hidden;  // [B, L, H], the top layer's h_t
    SequenceState state;
  };
  /// ids i64 [B, L]; state from the previous segment (empty: start of a stream).
  Output forward(const Tensor& ids, const SequenceState& state = {},
                 const ScreeningOptions& opt = {}) const;
  SequenceOutput run(const Tensor& x, const SequenceState& state) const override {
    Output o = forward(x, state);
    return {o.logits, o.state};
  }
  /// Mean cross-entropy of logits [B, L, C] against targets i64 [B, L].
  static Tensor loss(const Tensor& logits, const Tensor& targets);

  RecurrentConfig cfg;
  std::shared_ptr<nn::Embedding> encoder;  // null for input "onehot"
  std::shared_ptr<nn::RNN> rnn;          // type rnn
  std::shared_ptr<nn::LSTM> lstm;        // type lstm
  std::shared_ptr<RelRNNCell> relrnn;    // type relrnn
  std::shared_ptr<RelLSTMCell> rellstm;  // type rellstm
  std::shared_ptr<nn::Linear> decoder;
  Generator* gen;

 private:
  void official_init(Generator* g);
};

}  // namespace models
}  // namespace remora
