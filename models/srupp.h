// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// SRU++ (Lei 2021, `docs/math.md#the-sru-elementwise-recurrence`) as a language model, following the official
/// asappresearch/sru 3.0.0-dev (sru/modules.py: SRUppAttention,
/// SRUppProjectedLinear, SRUppCell, SRUpp) and its enwik8 wrapper
/// (experiments/srupp_experiments/train_enwik8.py: class Model).
///
/// Letters: B batch, L segment length, M memory length, Lk = M + L keys,
/// d = d_model (hidden units), d' = d_attn (attention / projection width),
/// V vocabulary. The model is batch-major [B, L, ...] outside; inside, the layer
/// stack runs time-major [L, B, d] like the official code and the op
/// (one transpose in and one out; memories are transposed per layer).
///
/// One layer i, input x [L, B, d] (memory mem [M, B, d] of the previous segment's
/// inputs of this layer):
///   with attention ((i + 1) % attn_every == 0):
///     z = W_q [mem; x]  (linear1)            Q = z[M:]            [L, B, d']
///     [K; V] = W_kv z   (linear2, 2d' rows)                      [Lk, B, d'] each
///     A = softmax(Q Kᵀ / √d' + causal mask) V, attention dropout on the weights
///     U = W_o Dropout(LN(Q + α A))          (linear3, α scalar init 0)
///   without attention:  U = W_o Dropout(LN(W_in x))  (linear1, linear2)
///   h, c_last = sru_recurrence(U [L, B, d, 3], x' = x, v = weight_c, b = bias, c0,
///                              dropout mask on c for every layer but the last)
///   with layer_norm (SRUppConfig::layer_norm) the transform reads LN(x) in place of x.
/// Model: emb = Dropout(E[ids]); h = SRUpp(emb); logits = output_layer(Dropout(h)).
/// The output layer is untied (as the official enwik8 Model), with a bias. With
/// the adaptive input and softmax (the official WikiText-103 Model), E is
/// SRUppAdaptiveEmbedding and output_layer SRUppAdaptiveLogSoftmax, which
/// share their tables and projections.
///
/// Parameter names are the official state dict's, so checkpoints move both ways:
///   embedding_layer.weight, output_layer.{weight,bias},
///   rnn.rnn_lst.N.{weight_c,bias} (+ buffer rnn.rnn_lst.N.scale_x, always 1),
///   rnn.rnn_lst.N.transform_module.{linear1,linear2,linear3}.weight,
///   rnn.rnn_lst.N.transform_module.alpha, rnn.rnn_lst.N.transform_module.layer_norm.*
///   rnn.rnn_lst.N.layer_norm.{weight,bias} (layer_norm only),
///   adaptive: output_layer.out_layers.{i}.{weight,bias}, output_layer.out_projs.{i}
///   (the official state dict repeats the projections as embedding_layer.emb_projs.{i}).
/// weight_c [2d] and bias [2d] are (v_f; v_r) and (b_f; b_r) flattened.
///
/// State across segments (SequenceState): mems[i] = the last mem_len rows of
/// [mem; input of layer i], detached, batch-major [B, M, d] (the official code
/// keeps exactly the previous segment's inputs: the same when mem_len = L);
/// cells[i] = c_last of layer i [B, d], detached (the official `hidden`).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "../nn/adaptive.h"
#include "../nn/layers.h"
#include "sequence_model.h"

namespace remora {
namespace models {

/// The sizes and options of an SRUppLM (the driver's model.type srupp;
/// docs/config_keys.md). validate() checks the ranges stated here. The driver
/// fills the struct from its keys with its own defaults (model.d_model 128,
/// model.n_layer 2, model.d_attn max(1, d_model / 4), model.dropatt 0).
struct SRUppConfig {
  int64_t n_token = 256;    ///< Vocabulary (>= 1; ignored when n_in > 0).
  int64_t d_model = 256;    ///< d: hidden units (= embedding width; >= 1).
  int64_t d_attn = 64;      ///< d': attention / projection width (>= 1).
  int64_t n_layer = 4;      ///< Layers (>= 1).
  /// Attention in every N-th layer (>= 1): layer i (from 0) has attention when
  /// (i + 1) % attn_every == 0, else a projected linear transform.
  int64_t attn_every = 1;
  /// Dropout probability in [0, 1) on the embedding, inside each transform (U),
  /// on c (a mask, all but the last layer) and before the output layer.
  double dropout = 0.1;
  /// Dropout probability in [0, 1) on the attention weights (the driver's model.dropatt).
  double attn_dropout = 0.1;
  /// Rows of the previous segments' layer inputs kept for attention (>= 0; 0:
  /// attention sees the current segment only and no memory is carried).
  int64_t mem_len = 0;
  double highway_bias = -2.0;  ///< Initial b_r (the official SRUpp default); finite.
  /// A layer norm over each layer's input before its transform (the official
  /// SRUpp `layer_norm`, normalize_after false; the recipes' `--layer_norm`):
  /// the transform reads LN(x), while the highway term x' and the memory
  /// handed to the next segment stay the raw input. Parameters
  /// rnn.rnn_lst.N.layer_norm.{weight,bias}.
  bool layer_norm = false;
  /// With mem_len > 0: every query attends to itself and the mem_len keys
  /// before it, no further (the official evaluation's same_length mask); false:
  /// to every earlier key of memory and segment.
  bool same_length = false;
  /// \name Adaptive input and adaptive softmax
  /// The official WikiText-103 model (experiments/srupp_experiments/
  /// train_wt103.py with its embedding.py): an AdaptiveLogSoftmax output layer
  /// whose tables and projections the AdaptiveEmbedding shares. Used when
  /// cutoffs is non-empty or d_embed > 0 (language models over tokens only).
  /// @{

  /// The vocabulary's cluster ends c_1 < ... < c_k < n_token (empty: one part).
  std::vector<int64_t> cutoffs;
  /// Width n_e of the first part's table (0: d_model when cutoffs are set);
  /// projected to d_model.
  int64_t d_embed = 0;
  int64_t div_val = 1;  ///< Part i has width d_embed / div_val^i (>= 1).
  /// Dropout probability in [0, 1) on the embedding rows before their
  /// projection and on the projected hidden rows before each output part (the
  /// official emb_dropout).
  double emb_dropout = 0;
  /// Whether the output and input layers are the adaptive ones.
  bool adaptive() const { return !cutoffs.empty() || d_embed > 0; }
  /// The options of the adaptive layers (n_token, d_embed or d_model, d_proj =
  /// d_model, cutoffs, div_val).
  nn::AdaptiveOptions adaptive_options() const;
  /// @}

  /// Sequence labelling: > 0 makes output_layer produce n_out logits per position
  /// (0: n_token, a language model).
  int64_t n_out = 0;
  /// Real-valued inputs: > 0 replaces the embedding by a linear layer "in_proj"
  /// from n_in features (needs n_out > 0); run() then takes f32/f64 [B, L, n_in].
  int64_t n_in = 0;
  /// Throws remora::Error naming the field when a value is outside its range.
  void validate() const;
  /// \name Memory estimate
  /// For the driver's memory estimate (cli/memory_estimate.h), f32, from
  /// the sizes alone: the parameter count, and the activations of `s`.
  /// @{

  /// Number of parameters, from the sizes.
  double parameter_count() const;
  /// Activation bytes by kind (f32, 4 bytes per value).
  struct ActivationBytes {
    double scores = 0;  ///< The attention layers' z, k, v over seq_len + mem_len and q, output over seq_len, d_attn wide (no scores are kept).
    double layers = 0;  ///< About 6 [B, L, d_model] tensors per layer.
    double logits = 0;  ///< The output logits.
    double memory = 0;  ///< The carried memory [n_layer, B, mem_len, d_model].
  };
  /// The activation bytes of a batch of shape \p s (training keeps every layer's).
  ActivationBytes activation_bytes(const ActivationShape& s) const;
  /// @}
};

/// SRUppProjectedLinear: U = linear2(Dropout(LN(linear1 x))), the transform of a
/// layer without attention.
class SRUppProjectedLinear : public nn::Module {
 public:
  /// linear1: in -> proj, linear2: proj -> out (no biases), layer_norm over proj;
  /// parameters of dtype \p dt on the CPU, initialised by reset_parameters(gen).
  SRUppProjectedLinear(int64_t in, int64_t out, int64_t proj, double dropout, DType dt,
                       Generator* gen);
  /// "SRUppProjectedLinear".
  std::string type_name() const override { return "SRUppProjectedLinear"; }
  /// x [L, B, in] -> [L, B, out]; dropout in training mode only. Records
  /// gradients to x and the parameters.
  Tensor forward(const Tensor& x) const;
  /// xavier_uniform_ on both weights, linear2's scaled by √(1 - dropout) (the
  /// official rule); the layer norm is left as it is.
  void reset_parameters(Generator* gen);
  double dropout;  ///< Dropout probability before linear2.
  /// \var linear1
  /// in -> proj, no bias.
  /// \var linear2
  /// proj -> out, no bias.
  std::shared_ptr<nn::Linear> linear1, linear2;
  std::shared_ptr<nn::LayerNorm> layer_norm;  ///< Over proj features, eps 1e-5.
  Generator* gen;  ///< Draws the dropout masks (null: the default generator).
};

/// SRUppAttention: one head, causal, over [mem; x] (the formulas in this file's
/// description), the transform of a layer with attention.
class SRUppAttention : public nn::Module {
 public:
  /// linear1: in -> proj (W_q), linear2: proj -> 2 proj (W_kv), linear3: proj ->
  /// out (W_o), no biases; layer_norm over proj; alpha = 0. Dtype \p dt on the
  /// CPU, initialised by reset_parameters(gen).
  SRUppAttention(int64_t in, int64_t out, int64_t proj, double dropout, double attn_dropout,
                 DType dt, Generator* gen);
  /// "SRUppAttention".
  std::string type_name() const override { return "SRUppAttention"; }
  /// x [L, B, in], mem [M, B, in] (undefined or M = 0: none) -> U [L, B, out].
  /// Query i (position M + i) sees keys 0..M + i. Dropout in training mode only.
  /// Records gradients to x, mem and the parameters.
  Tensor forward(const Tensor& x, const Tensor& mem) const;
  /// xavier_uniform_ on the three weights, linear3's scaled by √(1 - dropout);
  /// alpha = 0 (U starts as W_o LN(W_q x)); the layer norm is left as it is.
  void reset_parameters(Generator* gen);
  int64_t proj;  ///< d', the attention width.
  /// \var dropout
  /// Dropout probability before linear3.
  /// \var attn_dropout
  /// Dropout probability on the attention weights.
  double dropout, attn_dropout;
  Tensor alpha;  ///< [1], the attention's scale α in LN(Q + α A) (initially 0).
  /// > 0: each query sees itself and the `window` keys before it only
  /// (SRUppConfig::same_length); 0: every earlier key.
  int64_t window = 0;
  /// \var linear1
  /// W_q: in -> proj.
  /// \var linear2
  /// W_kv: proj -> 2 proj (K then V).
  /// \var linear3
  /// W_o: proj -> out.
  std::shared_ptr<nn::Linear> linear1, linear2, linear3;
  std::shared_ptr<nn::LayerNorm> layer_norm;  ///< Over proj features, eps 1e-5.
  Generator* gen;  ///< Draws the dropout masks (null: the default generator).
};

/// SRUppCell: the transform module plus the recurrence parameters.
class SRUppCell : public nn::Module {
 public:
  /// One layer of width d = c.d_model over \p in input features, with attention
  /// or the projected linear transform, \p last: no dropout mask on c. Dtype \p dt
  /// on the CPU, initialised from \p gen.
  SRUppCell(const SRUppConfig& c, int64_t in, bool attention, bool last, DType dt, Generator* gen);
  /// "SRUppCell".
  std::string type_name() const override { return "SRUppCell"; }
  /// x [L, B, in] (f32 or f64, CPU or CUDA), c0 [B, d] (undefined: zeros), mem
  /// [M, B, in] (attention only; ignored otherwise). With layer_norm the
  /// transform reads LN(x) and the raw mem; x' is x.
  /// Returns h [L, B, d]; *c_last = [B, d] when c_last is not null. Records
  /// gradients to x, c0, mem and the parameters (the fused SRU recurrence).
  Tensor forward(const Tensor& x, const Tensor& c0, const Tensor& mem, Tensor* c_last) const;
  /// bias = (b_f = 0; b_r = highway_bias), weight_c ~ U(-1, 1), scale_x = 1
  /// (the transform module has its own reset_parameters).
  void reset_parameters(Generator* gen);
  /// \var in
  /// Input features.
  /// \var d
  /// Hidden units (d_model).
  /// \var k
  /// Columns of U per unit: 3 when in == d (x is the highway input x'), else 4
  /// (the fourth column is x').
  int64_t in, d, k;
  bool attention;  ///< Whether the transform is SRUppAttention.
  double highway_bias;  ///< Initial b_r.
  double c_dropout;  ///< Dropout probability of the mask on c (0 for the last layer).
  /// \var weight_c
  /// [2d], (v_f; v_r), the recurrent weights on c.
  /// \var bias
  /// [2d], (b_f; b_r).
  /// \var scale_x
  /// Buffer [1], always 1 (kept for the official state dict).
  Tensor weight_c, bias, scale_x;
  std::shared_ptr<nn::LayerNorm> layer_norm;   ///< Over the input (SRUppConfig::layer_norm), else null.
  std::shared_ptr<SRUppAttention> attn;        ///< "transform_module" when attention, else null.
  std::shared_ptr<SRUppProjectedLinear> proj;  ///< "transform_module" otherwise, else null.
  Generator* gen;  ///< Draws the dropout masks (null: the default generator).
};

/// The official SRUpp module: rnn_lst of SRUppCell.
class SRUpp : public nn::Module {
 public:
  /// c.n_layer cells of width c.d_model, attention per c.attn_every, the last
  /// one without the mask on c.
  SRUpp(const SRUppConfig& c, DType dt, Generator* gen);
  /// "SRUpp".
  std::string type_name() const override { return "SRUpp"; }
  std::shared_ptr<nn::ModuleList> rnn_lst;  ///< The layers, SRUppCell each.
};

/// SRU++'s AdaptiveLogSoftmax (the official experiments' embedding.py): per
/// part i an output layer out_layers.{i} (weight [size_i, d_i], bias), the head's
/// with the k clusters' rows after the shortlist ([c_1 + k, d_0]), and a
/// projection out_projs.{i} [d_model, d_i] for every part. Initial values: the
/// weights ~ U(±√(3 / d_model)), biases 0, projections xavier_uniform_.
class SRUppAdaptiveLogSoftmax : public nn::Module {
 public:
  /// Checks o (nn::AdaptiveOptions::check) and draws the parameters in dtype \p dt from \p gen.
  SRUppAdaptiveLogSoftmax(const nn::AdaptiveOptions& o, double dropout, DType dt, Generator* gen);
  /// "AdaptiveLogSoftmax".
  std::string type_name() const override { return "AdaptiveLogSoftmax"; }
  /// The parameters as ops/adaptive_softmax.h takes them, with the dropout on
  /// the projected rows in training mode.
  AdaptiveSoftmaxWeights weights() const;
  /// -log p(target): hidden [N, d_model], target i64 [N] -> [N]. Gradient to
  /// hidden and the parameters.
  Tensor nll(const Tensor& hidden, const Tensor& target) const;
  /// log p of every token: [N, d_model] -> [N, n_token].
  Tensor log_prob(const Tensor& hidden) const;
  /// The official init: weights ~ U(±√(3 / d_model)), biases 0, projections
  /// xavier_uniform_. In place, no gradient.
  void reset_parameters(Generator* gen);
  nn::AdaptiveOptions opts;  ///< The options it was built with.
  double dropout;            ///< The emb_dropout on the projected rows (training only).
  std::shared_ptr<nn::ModuleList> out_layers;  ///< nn::AdaptiveOutLayer per part, child "out_layers".
  std::shared_ptr<nn::ParameterList> out_projs;  ///< [d_model, d_i] per part, child "out_projs".
  Generator* gen;  ///< Draws the dropout masks (null: the default generator).
};

/// SRU++'s AdaptiveEmbedding with the output layer's tables and projections
/// (the official WikiText-103 model ties both); it owns no parameters. Part i's
/// ids look up rows of out_layers.{i}.weight, are dropped out (emb_dropout),
/// and projected by out_projs.{i} to d_model; scaled by √d_model unless the
/// model has layer_norm (the official scale_emb).
class SRUppAdaptiveEmbedding : public nn::Module {
 public:
  /// Shares \p out's tables and projections; \p scale multiplies the result.
  SRUppAdaptiveEmbedding(const SRUppAdaptiveLogSoftmax* out, double scale);
  /// "AdaptiveEmbedding".
  std::string type_name() const override { return "AdaptiveEmbedding"; }
  /// ids i64 [...] in [0, n_token) (read on the host; an Error otherwise) ->
  /// [..., d_model]. Gradient to the shared tables and projections.
  Tensor forward(const Tensor& ids) const;
  const SRUppAdaptiveLogSoftmax* out;  ///< The output layer whose tensors it reads.
  double scale;                        ///< √d_model, or 1 with layer_norm.
};

/// The SRU++ language model (or sequence labeller): embedding (or in_proj) ->
/// SRUpp -> output_layer, with the state described in this file's description.
class SRUppLM : public SequenceModel {
 public:
  /// Builds the model of \p c (validated first: remora::Error on a bad field),
  /// parameters of dtype \p dt (f32 or f64) on the CPU, initialised by
  /// reset_parameters(gen); \p gen also draws the dropout masks.
  explicit SRUppLM(const SRUppConfig& c, DType dt = DType::f32, Generator* gen = nullptr);
  /// "SRUppLM".
  std::string type_name() const override { return "SRUppLM"; }

  /// The result of forward().
  struct Output {
    Tensor logits;          ///< [B, L, V] (or [B, L, n_out]); see forward for the adaptive softmax.
    Tensor nll;             ///< [B, L] -log p(target): adaptive softmax and targets given only.
    Tensor hidden;          ///< [B, L, d], the last layer's output.
    /// mems [B, M', d] per layer (M' = min(mem_len, M + L); none when mem_len
    /// is 0) and cells [B, d] per layer, detached.
    SequenceState state;
  };
  /// ids i64 [B, L] (or floating features [B, L, n_in] with n_in > 0, converted
  /// to the parameters' dtype); state from the previous segment (empty: start of
  /// stream; else n_layer memories [B, M, d] and/or n_layer cells [B, d]). A
  /// wrong dtype or shape throws remora::Error. CPU or CUDA; records gradients to
  /// the parameters (and to real-valued inputs); the carried state is detached.
  /// With the adaptive softmax, logits are the log-probabilities
  /// (adaptive_log_prob), or, when targets i64 [B, L] are given, undefined and
  /// nll [B, L] holds -log p(target) (no [B, L, V] for the tail clusters);
  /// targets are ignored otherwise.
  Output forward(const Tensor& ids, const SequenceState& state = {}, const Tensor& targets = Tensor()) const;
  /// forward(x, state) as a SequenceOutput.
  SequenceOutput run(const Tensor& x, const SequenceState& state) const override {
    Output o = forward(x, state);
    return {o.logits, o.state};
  }
  /// forward with the targets: the adaptive softmax's nll and no logits (else the logits).
  ScoredSequenceOutput run_scored(const Tensor& x, const Tensor& y, const SequenceState& state) const override {
    return scored_output(forward(x, state, y));
  }
  /// Mean cross-entropy of logits [B, L, V] against targets i64 [B, L] (targets
  /// -100 are ignored); a scalar, differentiable to the logits.
  static Tensor loss(const Tensor& logits, const Tensor& targets);
  /// The official initialisation (SRUpp + the enwik8 Model.init_weights): every
  /// layer's reset_parameters, then the embedding, in_proj and output_layer
  /// weights ~ U(±√(3 / size(0))) and their biases 0; the adaptive output
  /// layer as SRUppAdaptiveLogSoftmax states. In place, no gradient.
  void reset_parameters(Generator* gen = nullptr);

  SRUppConfig cfg;  ///< The configuration, as built.
  std::shared_ptr<nn::Embedding> embedding_layer;  ///< [V, d]; null when n_in > 0 or adaptive.
  std::shared_ptr<nn::Linear> in_proj;             ///< n_in -> d with bias; n_in > 0 only.
  std::shared_ptr<SRUpp> rnn;                      ///< The layer stack.
  std::shared_ptr<nn::Linear> output_layer;        ///< d -> V (or n_out), with bias; untied; null when adaptive.
  /// "embedding_layer" when adaptive (sharing adaptive_output's tensors), else null.
  std::shared_ptr<SRUppAdaptiveEmbedding> adaptive_embedding;
  std::shared_ptr<SRUppAdaptiveLogSoftmax> adaptive_output;  ///< "output_layer" when adaptive, else null.
  Generator* gen;  ///< Draws the dropout masks (null: the default generator).
};

}  // namespace models
}  // namespace remora
