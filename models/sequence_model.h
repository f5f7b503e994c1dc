// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// The two shapes of model the driver trains, whatever is inside them.
///
///   SequenceModel: causal, per-position outputs, with a state carried from one
///     segment of a stream to the next (Transformer-XL, SRU++, RNNs, RelRNN).
///   EncoderModel: bidirectional, per-token logits (masked LM) and, when built
///     with classes, one logits row per sequence (BERT, StarSaber).
///
/// A new model type implements one of these and, for the driver, a factory in
/// cli/models/ listed in cli/models/models.def;
/// train/eval/generate/infer then work unchanged.
#pragma once
#include <utility>
#include <vector>

#include "../nn/module.h"

namespace remora {
namespace models {

/// What one segment hands to the next. Every entry is per layer (or per cell)
/// and detached; an empty state means the start of a stream. The batch size
/// must stay the same along a stream.
struct SequenceState {
  std::vector<Tensor> mems;        ///< Inputs of the previous segment kept for attention [B, M, d], per layer.
  std::vector<Tensor> rem_states;  ///< REM scan states (RSA carry mode), per layer.
  std::vector<Tensor> cells;       ///< Recurrent states (SRU c, RNN h, LSTM h and c, ...).
  /// True when no entry is held: the start of a stream.
  bool empty() const { return mems.empty() && rem_states.empty() && cells.empty(); }
};

/// The batch a memory estimate is for (the models' activation_bytes functions):
/// training keeps every layer's activations for backward, inference holds one
/// layer's at a time.
struct ActivationShape {
  /// \var batch
  /// Sequences per batch B.
  /// \var seq_len
  /// Positions per sequence L.
  int64_t batch = 1, seq_len = 1;
  bool train = true;  ///< Training (keeps activations for backward) or inference.
};

/// What SequenceModel::run returns.
struct SequenceOutput {
  Tensor logits;          ///< [B, L, n_out] (n_out = vocabulary for a language model).
  SequenceState state;    ///< For the next segment.
};

/// What SequenceModel::run_scored returns: run's output and, where the model
/// scores the targets itself, their -log p (then logits may be undefined).
struct ScoredSequenceOutput : SequenceOutput {
  Tensor nll;  ///< [B, L] -log p(target); undefined: score the logits.
};

/// A model's forward output (logits, state, nll members) as run_scored returns it.
template <typename Output>
ScoredSequenceOutput scored_output(Output o) {
  ScoredSequenceOutput s;
  s.logits = std::move(o.logits);
  s.state = std::move(o.state);
  s.nll = std::move(o.nll);
  return s;
}

/// A causal model with per-position outputs and a state carried between the
/// segments of a stream (Transformer-XL, SRU++, the recurrent models, causal
/// StarSaber).
class SequenceModel : public nn::Module {
 public:
  /// x: ids i64 [B, L], or features f32/f64 [B, L, n_in] for real-valued inputs.
  /// Position t's logits depend on x[:, :t+1] and the state only.
  virtual SequenceOutput run(const Tensor& x, const SequenceState& state) const = 0;
  /// A language model's training and validation: run with the targets y i64
  /// [B, L] known. A model whose output layer scores targets without every
  /// logit (an adaptive softmax) returns nll [B, L] and no logits; the default
  /// is run (logits, nll undefined).
  virtual ScoredSequenceOutput run_scored(const Tensor& x, const Tensor& y, const SequenceState& state) const {
    (void)y;
    ScoredSequenceOutput o;
    static_cast<SequenceOutput&>(o) = run(x, state);
    return o;
  }
};

/// A bidirectional encoder with per-token logits and, when built with classes,
/// per-sequence logits (BERT, StarSaber).
class EncoderModel : public nn::Module {
 public:
  /// ids i64 [B, L]; attention_mask [B, L] (1 = real token, 0 = padding;
  /// undefined = all real). Returns per-token vocabulary logits [B, L, V].
  virtual Tensor token_logits(const Tensor& ids, const Tensor& attention_mask) const = 0;
  /// One row per sequence [B, n_classes]; an Error when built without classes.
  virtual Tensor class_logits(const Tensor& ids, const Tensor& attention_mask) const = 0;
};

}  // namespace models
}  // namespace remora
