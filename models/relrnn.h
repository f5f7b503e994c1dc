// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// Relevancy screening (`docs/math.md#relevancy-screening-relrnn-and-rellstm`; Kerg et al. 2020, official bhargav104/MemoryNets)
/// and the recurrent language / sequence-labelling models (rnn, lstm, relrnn, rellstm).
///
/// Letters: B batch, L time, I input width, H hidden width (= d_model),
/// ν short-term buffer size (short_term), ρ relevant-set size (relevant),
/// K = ν + ρ memory slots, V vocabulary, C output classes.
///
/// The cell, per batch row, at step t:
///   S = the last ν hidden states {h_{t-ν}, ..., h_{t-1}} (h_{t-1} included),
///   R = at most ρ older states chosen by relevance.
///   e_i = vᵀ tanh(V_a s_{t-1} + U_a h_i) for h_i ∈ S ∪ R (empty slots -> -inf)
///   α = softmax(e);  c_t = Σ α_i h_i;  s_t = ½ (h_{t-1} + c_t)
///   RelRNN:  h_t = tanh(U x_t + V s_t + b)
///   RelLSTM: (h_t, c_t) = LSTM(x_t, recurrent input s_t, cell c_{t-1})
/// At t = 0 the memory is empty and s_0 = h_{-1} (the carried state, zeros at the
/// start of a stream), so step 0 is a plain RNN / LSTM step.
///
/// Relevance: C(i) = Σ of the detached α received while h_i is in S. When h_i
/// leaves S (at step t = i + ν, after h_t is computed and after step t's α has
/// been counted): if |R| < ρ it takes the first empty R slot; otherwise it
/// replaces the R member with the smallest C when C(i) > that C (strictly). Tie
/// rule: among R members with equal smallest C the lowest slot index is
/// replaced; C(i) equal to the smallest C is not admitted. R members keep their
/// C from the moment they left S (they collect no more α). Both as the official
/// code (torch.argmin picks the first minimum, the comparison is '>').
///
/// Memory layout, per batch row: K = ν + ρ slots, [B, K, H]; slots 0..ν-1 hold S
/// oldest first, slots ν.. hold R. The tensors are rebuilt functionally each step
/// (cat for the S shift, where for R replacements), so gradients flow through α
/// into the stored states. The screening decisions are made on the host on the
/// detached α (O(B K) per step); the attention itself is one batched op.
///
/// Differences from the official code: docs/relevancy.md lists them line by line
/// with the official file and line. In short:
///  - RelRNN: the official code sets s_0 to the pre-activation U x_0 + V h_{-1} + b
///    of step 0 (the query at t = 1); here s_0 = h_{-1}, as the official RelLSTM does.
///    This changes no number: at t = 1 the memory holds h_0 alone, so α = 1 and
///    s_1 = h_0 whatever the query (and no gradient reaches s_0 through α).
///  - The official code multiplies c_t by a constant `attn` (1.0 in every script).
///  - Initialisation and input encoding are options of RecurrentConfig (init,
///    recurrent_init, input_init, input); the cells' own reset_parameters() keep
///    U(-1/√H, 1/√H) for every weight (torch.nn.RNN's rule; the gradient checks use it).
///  - Per-example Python lists there; batched slot tensors here (same numbers).
///
/// The S/R memory restarts at the start of every run() call (every segment of a
/// stream); only h (and the LSTM cell c) are carried in SequenceState::cells.
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

/// A per-step record of the screening, for tests and analysis. Entry t of each
/// vector is the memory after step t (after the screening of the state leaving S
/// and the push of h_t), flattened row-major [B, K]. A cell's forward() clears
/// the trace it is given and fills one entry per step.
struct ScreeningTrace {
  std::vector<std::vector<int64_t>> slot_time;  ///< Time index of the state in each slot, -1 = empty.
  std::vector<std::vector<double>> relevance;   ///< C of each slot (0 for empty slots).
  /// α the bookkeeping used at step t (zeros at t = 0; the injected values under
  /// ScreeningOptions::inject_alpha).
  std::vector<std::vector<double>> alpha;
  std::vector<Tensor> slots;                    ///< The slot tensor [B, K, H] after step t, detached.
  int64_t admissions = 0;    ///< States that joined a non-full R (counted over all rows and steps).
  int64_t replacements = 0;  ///< States that replaced an R member.
  int64_t rejections = 0;    ///< States that left S and were dropped.
  /// The smallest decision margin seen: |C(leaving) - min C(R)| at every
  /// comparison with a full R, and the gap between the two smallest C of R when
  /// a replacement picked the minimum. A perturbation smaller than this cannot
  /// change a decision (gradient checks rely on it). Infinity when no
  /// comparison was made.
  double min_margin = std::numeric_limits<double>::infinity();
};

/// Options of a screened cell's forward pass, for tests and analysis; the
/// defaults change nothing.
struct ScreeningOptions {
  ScreeningTrace* trace = nullptr;  ///< Filled when given (cleared first); null = no trace.
  /// Test hook: replaces the detached α [B, K] (row-major) that the relevance
  /// bookkeeping adds up, (t, alpha) -> alpha', called at every step t >= 1. The
  /// forward pass still uses the computed α; only the screening decisions follow
  /// the injected values. It must return B * K values (else remora::Error).
  std::function<std::vector<double>(int64_t t, const std::vector<double>& alpha)> inject_alpha;
};

/// The RelRNN cell run over a sequence. Parameters (the official names):
/// U.weight [H, I], U.bias [H], V.weight [H, H], Ua.weight [H, H], Va.weight [H, H], v [1, H].
class RelRNNCell : public nn::Module {
 public:
  /// A cell of input width I = \p input_size (> 0), hidden width H = \p hidden_size
  /// (> 0), ν = \p short_term (>= 1) and ρ = \p relevant (>= 0); parameters of the
  /// floating dtype \p dt on the CPU, drawn by reset_parameters() from \p gen
  /// (null: the default generator). Invalid sizes or dtype throw remora::Error.
  RelRNNCell(int64_t input_size, int64_t hidden_size, int64_t short_term, int64_t relevant,
             DType dt = DType::f32, Generator* gen = nullptr);
  /// "RelMemRNN" (the official class name).
  std::string type_name() const override { return "RelMemRNN"; }
  /// The result of forward().
  struct Output {
    Tensor output;  ///< [B, L, H], h_t for every step.
    Tensor h_n;     ///< [B, H], the last h.
  };
  /// Runs the cell over x [B, L, I] (the parameters' dtype, CPU or CUDA) from
  /// h0 [B, H] (undefined: zeros). The memory starts empty. Records gradients to
  /// x, h0 and every parameter (through α into the stored states too; the
  /// screening decisions themselves are not differentiable). The screening reads
  /// α back to the host at every step. A wrong shape or dtype throws remora::Error.
  Output forward(const Tensor& x, const Tensor& h0 = Tensor(), const ScreeningOptions& opt = {}) const;
  /// Draws every parameter from U(-1/√H, 1/√H) (torch.nn.RNN's rule), in place.
  void reset_parameters(Generator* gen = nullptr);

  /// \var input_size
  /// I, the input width.
  /// \var hidden_size
  /// H, the hidden width.
  /// \var short_term
  /// ν, the short-term window S.
  /// \var relevant
  /// ρ, the size of the relevant set R.
  int64_t input_size, hidden_size, short_term, relevant;
  Tensor v;  ///< [1, H], the attention's score vector.
  /// \var U
  /// The input projection U x_t + b: weight [H, I], bias [H].
  /// \var V
  /// The recurrent matrix on s_t: weight [H, H], no bias.
  /// \var Ua
  /// The memory keys U_a h_i: weight [H, H], no bias.
  /// \var Va
  /// The query V_a s_{t-1}: weight [H, H], no bias.
  std::shared_ptr<nn::Linear> U, V, Ua, Va;
};

/// The RelLSTM cell: an LSTM whose recurrent input is s_t. Parameters:
/// weight_ih [4H, I], weight_hh [4H, H], bias_ih [4H], bias_hh [4H] (torch.nn.LSTMCell's
/// names, gate order i, f, g, o), v [1, H], Ua.weight [H, H], Va.weight [H, H].
class RelLSTMCell : public nn::Module {
 public:
  /// Sizes, dtype and generator as RelRNNCell's constructor (I, H > 0, ν >= 1,
  /// ρ >= 0, floating \p dt; else remora::Error).
  RelLSTMCell(int64_t input_size, int64_t hidden_size, int64_t short_term, int64_t relevant,
              DType dt = DType::f32, Generator* gen = nullptr);
  /// "RelLSTM".
  std::string type_name() const override { return "RelLSTM"; }
  /// The result of forward().
  struct Output {
    Tensor output;    ///< [B, L, H], h_t for every step.
    /// \var h_n
    /// [B, H], the last h.
    /// \var c_n
    /// [B, H], the last LSTM cell c.
    Tensor h_n, c_n;
  };
  /// x [B, L, I]; h0, c0 [B, H] (undefined: zeros; both or neither, else
  /// remora::Error). The memory starts empty. Devices, gradients and errors as
  /// RelRNNCell::forward.
  Output forward(const Tensor& x, const Tensor& h0 = Tensor(), const Tensor& c0 = Tensor(),
                 const ScreeningOptions& opt = {}) const;
  /// Draws every parameter from U(-1/√H, 1/√H) (torch.nn.LSTMCell's rule), in place.
  void reset_parameters(Generator* gen = nullptr);

  /// \var input_size
  /// I, the input width.
  /// \var hidden_size
  /// H, the hidden width.
  /// \var short_term
  /// ν, the short-term window S.
  /// \var relevant
  /// ρ, the size of the relevant set R.
  int64_t input_size, hidden_size, short_term, relevant;
  /// \var weight_ih
  /// [4H, I], the gates' input weights (order i, f, g, o).
  /// \var weight_hh
  /// [4H, H], the gates' weights on the recurrent input s_t.
  /// \var bias_ih
  /// [4H], the gates' input bias.
  /// \var bias_hh
  /// [4H], the gates' recurrent bias.
  /// \var v
  /// [1, H], the attention's score vector.
  Tensor weight_ih, weight_hh, bias_ih, bias_hh, v;
  /// \var Ua
  /// The memory keys U_a h_i: weight [H, H], no bias.
  /// \var Va
  /// The query V_a s_{t-1}: weight [H, H], no bias.
  std::shared_ptr<nn::Linear> Ua, Va;
};

/// Initialises a square recurrent matrix \p w [H, H] in place (no gradient
/// recorded) by the official rule \p kind: "henaff", "cayley", "xavier" or
/// "kaiming" (else remora::Error; a non-square \p w too), drawing from \p gen.
///
/// The official code's whole initialisation (RecurrentConfig::init "official";
/// bhargav104/MemoryNets; docs/relevancy.md):
/// xavier_normal_ std = sqrt(2 / (fan_in + fan_out)), kaiming_normal_ std = sqrt(2 / fan_in).
///   RNN-type cells (rnn, relrnn): U / weight_ih by input_init (xavier | kaiming),
///     V / weight_hh by recurrent_init: henaff | cayley = expm of a block-diagonal
///     skew matrix, i.e. 2x2 rotations by θ_k (henaff θ ~ U(-π, 0); cayley
///     θ = -tan(u / 2), u ~ U(0, π/2)), a lone 1 when H is odd; xavier | kaiming.
///     The input bias ~ U(±1/√I); bias_hh (nn::RNN) = 0 (the official RNN has one bias).
///   LSTM-type cells (lstm, rellstm): every gate weight (input and recurrent part)
///     ~ N(0, 2 / (I + 2H)) (xavier_normal of a gate's Linear(I + H, H)), bias_ih ~
///     U(±1/√(I + H)), bias_hh = 0 (one bias per gate there). input_init and
///     recurrent_init do not apply.
///   Screened cells: v ~ N(0, 2 / (1 + H)) (xavier_normal of [1, H]); U_a, V_a keep
///     U(±1/√H) (torch's Linear default, as there).
///   Head: input onehot (copytask.py): decoder.weight xavier_normal, bias U(±1/√H);
///     input embedding (PTBtask.py): encoder.weight and decoder.weight U(±0.1), bias 0.
void official_recurrent_init_(Tensor& w, const std::string& kind, Generator* gen);

/// The sizes and options of a RecurrentLM (the driver's model.type rnn, lstm,
/// relrnn and rellstm; docs/config_keys.md). validate() states the valid ranges.
struct RecurrentConfig {
  std::string type = "lstm";  ///< rnn | lstm | relrnn | rellstm.
  int64_t n_token = 256;      ///< Vocabulary of the input ids (>= 1).
  int64_t d_model = 128;      ///< Hidden size H and the embedding width (>= 1).
  /// Stacked layers (>= 1); rnn / lstm only, relrnn / rellstm need 1.
  int64_t n_layer = 1;
  int64_t short_term = 10;    ///< ν, the short-term window S (relrnn / rellstm; >= 1).
  /// ρ, relevant states kept in R (relrnn / rellstm; >= 0, 0 = no R); the
  /// driver's model.relevant.
  int64_t relevant = 10;
  /// Dropout probability in [0, 1) (the driver accepts [0, 0.99]), in training
  /// mode on the embeddings (the one-hot inputs), between layers and before the head.
  double dropout = 0.0;
  int64_t n_out = 0;          ///< Output width: 0 = n_token (language model), else classes (>= 0).
  /// Input encoding: "embedding" (encoder.weight [V, H], then the cell's input
  /// projection; the official PTB script) or "onehot" (the cell's input projection
  /// acts on the one-hot of the id directly, input size V, no encoder; the official
  /// copy and denoise scripts).
  std::string input = "embedding";
  /// Initialisation: "uniform" (every weight U(±1/√H), torch.nn.RNN's rule; Remora's
  /// rule) or "official" (the MemoryNets rule, official_recurrent_init_()). "" = the
  /// type's default: official for relrnn / rellstm
  /// (`docs/math.md#relevancy-screening-relrnn-and-rellstm` is silent), uniform for rnn / lstm.
  std::string init = "";
  /// Init "official": the recurrent matrix V / weight_hh (rnn, relrnn): henaff,
  /// cayley, xavier or kaiming.
  std::string recurrent_init = "henaff";
  /// Init "official": the input matrix U / weight_ih (rnn, relrnn): xavier or kaiming.
  std::string input_init = "xavier";
  /// init, or the type's default when init is empty.
  std::string resolved_init() const { return !init.empty() ? init : screened() ? "official" : "uniform"; }
  /// The cell's input width I: n_token for input "onehot", else d_model.
  int64_t input_width() const { return input == "onehot" ? n_token : d_model; }
  /// Throws remora::Error naming the field when a value is outside its range
  /// (above) or not one of its choices.
  void validate() const;
  /// The head's width: n_out, or n_token when n_out is 0.
  int64_t out_width() const { return n_out > 0 ? n_out : n_token; }
  /// True for the relevancy-screening types relrnn and rellstm.
  bool screened() const { return type == "relrnn" || type == "rellstm"; }
  /// \name Memory estimate
  /// For the driver's memory estimate (cli/memory_estimate.h), f32, from
  /// the sizes alone: the parameter count, and the activations of `s`.
  /// @{

  /// Number of parameters (an estimate from the sizes; the screened types count
  /// a few bias-sized vectors they do not have).
  double parameter_count() const;
  /// Activation bytes by kind (f32, 4 bytes per value).
  struct ActivationBytes {
    double states = 0;     ///< Every step's recurrent states (the gates of an LSTM type).
    double relevancy = 0;  ///< relrnn / rellstm: the [B, short_term + relevant, d_model] memory per step.
    double onehot = 0;     ///< Input "onehot": the one-hot inputs.
    double logits = 0;     ///< The output logits.
  };
  /// The activation bytes of a batch of shape \p s (training keeps every step's).
  ActivationBytes activation_bytes(const ActivationShape& s) const;
  /// @}
};

/// embedding -> recurrent core -> linear head, for type rnn | lstm | relrnn | rellstm.
/// Parameter names (torch's word_language_model RNNModel layout):
///   encoder.weight [V, H] (input "embedding" only); rnn.<core parameters> (nn::RNN / nn::LSTM names, or the
///   RelRNNCell / RelLSTMCell names above); decoder.weight [n_out, H], decoder.bias.
/// State carried across segments (SequenceState::cells, detached, each [B, H]):
///   rnn: h of every layer; lstm: h_0, c_0, h_1, c_1, ... (layer by layer);
///   relrnn: h; rellstm: h, c. The S/R memory is not carried (restarts per segment).
class RecurrentLM : public SequenceModel {
 public:
  /// Builds the model of \p c (validated first: remora::Error on a bad field),
  /// parameters of dtype \p dt on the CPU, initialised by c.resolved_init() from
  /// \p gen (null: the default generator), which also draws the dropout masks.
  explicit RecurrentLM(const RecurrentConfig& c, DType dt = DType::f32, Generator* gen = nullptr);
  /// "RecurrentLM(<type>)".
  std::string type_name() const override { return "RecurrentLM(" + cfg.type + ")"; }

  /// The result of forward().
  struct Output {
    Tensor logits;  ///< [B, L, n_out], the parameters' dtype.
    Tensor hidden;  ///< [B, L, H], the top layer's h_t (before the head's dropout).
    SequenceState state;  ///< The detached cells for the next segment (see the class).
  };
  /// ids i64 [B, L] (in [0, n_token)); state from the previous segment (empty:
  /// start of a stream; else as many [B, H] cells as the type carries, else
  /// remora::Error). CPU or CUDA; records gradients to every parameter (not into
  /// the carried state, which is detached). \p opt applies to relrnn / rellstm.
  Output forward(const Tensor& ids, const SequenceState& state = {},
                 const ScreeningOptions& opt = {}) const;
  /// forward() without screening options: x is ids i64 [B, L].
  SequenceOutput run(const Tensor& x, const SequenceState& state) const override {
    Output o = forward(x, state);
    return {o.logits, o.state};
  }
  /// Mean cross-entropy of logits [B, L, C] against targets i64 [B, L] (targets
  /// -100 are ignored); a scalar, differentiable to the logits.
  static Tensor loss(const Tensor& logits, const Tensor& targets);

  RecurrentConfig cfg;  ///< The configuration, as built.
  std::shared_ptr<nn::Embedding> encoder;  ///< [V, H]; null for input "onehot".
  /// \name The recurrent core
  /// Exactly one is set, by cfg.type; all are registered as "rnn".
  /// @{
  std::shared_ptr<nn::RNN> rnn;          ///< Type rnn.
  std::shared_ptr<nn::LSTM> lstm;        ///< Type lstm.
  std::shared_ptr<RelRNNCell> relrnn;    ///< Type relrnn.
  std::shared_ptr<RelLSTMCell> rellstm;  ///< Type rellstm.
  /// @}
  std::shared_ptr<nn::Linear> decoder;  ///< The head: H -> out_width(), with bias.
  Generator* gen;  ///< Draws the dropout masks (null: the default generator).

 private:
  void official_init(Generator* g);
};

}  // namespace models
}  // namespace remora
