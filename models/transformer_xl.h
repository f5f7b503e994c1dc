// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// Transformer-XL (Dai et al. 2019) and RSA-XL, following `docs/math.md#relative-attention-and-rel-shift` and the
/// official pytorch/mem_transformer.py (MemTransformerLM, attn_type 0).
///
/// Letters: B batch, L = Lq segment length, M memory length, Lk = M + L keys,
/// d model width, H heads, D head width, V vocabulary. Batch-major [B, L, d]
/// throughout (the official code is time-major; the numbers are the same).
///
/// Parameter names are the official state dict's, so checkpoints move both ways:
///   word_emb.emb_layers.0.weight, r_w_bias, r_r_bias, crit.out_layers.0.bias,
///   layers.N.dec_attn.{qkv_net,r_net,o_net}.weight, layers.N.dec_attn.layer_norm.*,
///   layers.N.pos_ff.CoreNet.{0,3}.*, layers.N.pos_ff.layer_norm.*,
///   layers.N.dec_attn.rem.{eta,nu,theta,mu} (RSA-XL).
///
/// With the adaptive input and softmax (XLConfig::adaptive()) word_emb and crit
/// are nn::AdaptiveEmbedding and nn::ProjectedAdaptiveLogSoftmax, named as the
/// official AdaptiveEmbedding and ProjectedAdaptiveLogSoftmax:
///   word_emb.emb_layers.{i}.weight, word_emb.emb_projs.{i},
///   crit.out_layers.{i}.weight (untied only) / .bias, crit.out_projs.{i} (untied only),
///   crit.cluster_weight, crit.cluster_bias.
#pragma once
#include <string>
#include <vector>

#include "../nn/adaptive.h"
#include "../nn/layers.h"
#include "../nn/rsa.h"
#include "sequence_model.h"

namespace remora {
namespace models {

/// The sizes and options of a TransformerXL (the driver's model.type
/// transformer_xl; docs/config_keys.md). validate() checks the ranges stated
/// here. The driver fills the struct from its keys with its own defaults
/// (model.n_layer 2, model.n_head 4, model.d_model 128, model.d_inner 512).
struct XLConfig {
  int64_t n_token = 256;  ///< Vocabulary (>= 1).
  /// \var n_layer
  /// Layers (>= 1).
  /// \var n_head
  /// Attention heads H (>= 1).
  /// \var d_model
  /// Model width d (>= 1; the sinusoidal positions need it even).
  /// \var d_head
  /// Head width D (>= 0); 0: d_model / n_head, which must then divide evenly.
  /// \var d_inner
  /// Feed-forward width (>= 1).
  int64_t n_layer = 2, n_head = 4, d_model = 128, d_head = 0, d_inner = 512;
  /// \var dropout
  /// Dropout probability in [0, 1) on the embeddings, the positional
  /// embeddings, each sublayer's output, inside the feed-forward and before the head.
  /// \var dropatt
  /// Dropout probability in [0, 1) on the attention weights.
  double dropout = 0.1, dropatt = 0.0;
  /// \var mem_len
  /// Rows of past layer inputs kept per layer for the next segment (>= 0; 0: no
  /// memory is carried).
  /// \var clamp_len
  /// Relative distances clamped to at most this (>= 0; 0: no clamping).
  int64_t mem_len = 0, clamp_len = 0;
  /// \var same_length
  /// Every query attends to the same number of keys: a window of mem_len keys
  /// (applies when the keys outnumber mem_len).
  /// \var pre_lnorm
  /// Layer norm before each sublayer (the residual added after); false: after
  /// the residual sum (the driver's model.pre_ln).
  bool same_length = false, pre_lnorm = false;
  /// The positional term BD through rsa_attention's fused positional path
  /// (RsaOptions::pos_q / pos_r, computed inside the device's kernel where it
  /// has one: memory linear in the segment length); false materialises it as a
  /// [B, H, L, L + M] bias (the reference form, same numbers).
  bool fused_position = true;
  /// Activation checkpointing of the feed-forward blocks (core/activation_checkpoint.h):
  /// in training each block keeps only its input and runs again in backward,
  /// instead of keeping its [B, L, d_inner] activations and a few [B, L, d]
  /// ones per layer (one more feed-forward pass per step; the same numbers).
  bool recompute_ff = false;
  /// "softmax" or "rsa". RSA-XL: "rsa" mixes a masked REM into the first
  /// rem.num_heads() heads.
  std::string attention = "softmax";
  /// attention "rsa": the REM heads (1..n_head of them; must be masked).
  RemSpec rem;
  std::string gate = "head";  ///< attention "rsa": one REM gate per head ("head") or per layer ("layer").
  nn::RemInit rem_init;       ///< attention "rsa": the REM parameters' initialisation.
  /// attention "rsa": carry the REM scan state across segments
  /// (`docs/math.md#the-scan-form-applying-a-rem-in-ol`); needs rem.max_distance 0.
  bool carry = false;
  /// Standard deviation of the normal initialisation (reset_parameters()).
  double init_std = 0.02;
  double proj_init_std = 0.01;  ///< N(0, proj_init_std): the adaptive projections (word_emb.emb_projs, crit.out_projs)
  /// \name Adaptive input and adaptive softmax
  /// Adaptive input and adaptive softmax (Baevski & Auli 2019; Grave et al.
  /// 2017) as the official MemTransformerLM takes them. With none of them set
  /// (no cutoffs, d_embed = d_model, div_val 1, tie_weight) the model has the
  /// plain tied embedding and output layer.
  /// @{

  /// The vocabulary's cluster ends c_1 < ... < c_k < n_token (empty: one part).
  std::vector<int64_t> cutoffs;
  int64_t d_embed = 0;  ///< Width of the first part's embedding (0: d_model); projected to d_model when different.
  int64_t div_val = 1;  ///< Part i has width d_embed / div_val^i (and then a table and projection of its own).
  bool tie_weight = true;  ///< The output layer's weights are the embedding's tables.
  /// Output projection i is the embedding's (one entry per part, or none).
  std::vector<bool> tie_projs;
  /// Whether word_emb and crit are the adaptive modules (any of the options above set).
  bool adaptive() const;
  /// d_embed, or d_model when 0.
  int64_t embed_width() const { return d_embed > 0 ? d_embed : d_model; }
  /// The options of the adaptive modules (n_token, d_embed, d_proj = d_model, cutoffs, div_val).
  nn::AdaptiveOptions adaptive_options() const;
  /// @}

  /// Sequence labelling: > 0 replaces the tied LM head by an untied linear layer
  /// "out_head" producing n_out logits per position.
  int64_t n_out = 0;
  /// Real-valued inputs: > 0 replaces the embedding by a linear layer "in_proj"
  /// from n_in features (needs n_out > 0); forward then takes f32/f64 [B, L, n_in].
  int64_t n_in = 0;
  /// Throws remora::Error when a value is outside its range (the message names it).
  void validate() const;
  /// \name Memory estimate
  /// For the driver's memory estimate (cli/memory_estimate.h), f32, from
  /// the sizes alone (doubles: absurd sizes do not overflow): the parameter
  /// count, and the activations of `s` (activation_bytes).
  /// @{

  /// Number of parameters, from the sizes.
  double parameter_count() const;
  /// Activation bytes by kind (f32, 4 bytes per value).
  struct ActivationBytes {
    double scores = 0;  ///< Materialised positional scores [batch, n_head, seq_len, seq_len + mem_len], 3 per layer (0 when fused).
    double layers = 0;  ///< Per layer about 12 [B, L, d_model], the [B, L, d_inner] ones, keys and values over L + M.
    double logits = 0;  ///< The output logits (and their gradient, softmax when training); adaptive: see activation_bytes.
    double memory = 0;  ///< The carried memory [n_layer, B, mem_len, d_model].
  };
  /// The activation bytes of a batch of shape \p s (training keeps every layer's).
  ActivationBytes activation_bytes(const ActivationShape& s) const;
  /// @}
};

/// What one segment hands to the next: per-layer memories [B, M, d] (detached)
/// and, in carry mode, per-layer REM scan states.
using XLState = SequenceState;

/// Transformer-XL's relative multi-head attention sublayer (the official
/// RelPartialLearnableMultiHeadAttn), with the residual and layer norm; with
/// attention "rsa" a REM in the first heads.
class RelPartialAttention : public nn::Module {
 public:
  /// The sublayer of \p c: qkv_net d -> 3 H D, r_net d -> H D, o_net H D -> d (no
  /// biases), layer_norm over d, and rem for attention "rsa". Dtype \p dt on the
  /// CPU; the weights are initialised by TransformerXL::reset_parameters.
  RelPartialAttention(const XLConfig& c, DType dt, Generator* gen);
  /// "RelPartialLearnableMultiHeadAttn" (the official class name).
  std::string type_name() const override { return "RelPartialLearnableMultiHeadAttn"; }
  /// h [B, L, d], r [Lk, d] positional embeddings, mem [B, M, d] (may be empty),
  /// r_w_bias and r_r_bias [H, D], mask additive [L, Lk]; undefined (with
  /// cfg.fused_position): XL's causal mask (and same_length window) applied
  /// inside the kernel; without cfg.fused_position the mask is required
  /// (remora::Error). rem_state_in / rem_state_out: the REM scan state in carry
  /// mode (undefined / null otherwise; the state written is detached). Returns
  /// [B, L, d]. Dropout in training mode only. Records gradients to h, r, the
  /// biases and the parameters.
  Tensor forward(const Tensor& h, const Tensor& r, const Tensor& mem, const Tensor& r_w_bias,
                 const Tensor& r_r_bias, const Tensor& mask, const Tensor& rem_state_in,
                 Tensor* rem_state_out) const;

  XLConfig cfg;  ///< The model's configuration.
  /// \var qkv_net
  /// d -> 3 H D: q, k and v (memory rows use the k and v rows only), no bias.
  /// \var r_net
  /// d -> H D: the positional embeddings' projection, no bias.
  /// \var o_net
  /// H D -> d: the output projection, no bias.
  std::shared_ptr<nn::Linear> qkv_net, r_net, o_net;
  std::shared_ptr<nn::LayerNorm> layer_norm;  ///< Over d, eps 1e-5.
  std::shared_ptr<nn::RemParameters> rem;  ///< RSA-XL only (null for softmax attention).
  Generator* gen;  ///< Draws the dropout masks (null: the default generator).
};

/// The position-wise feed-forward sublayer: fc2(Dropout(ReLU(fc1 x))) with
/// dropout, the residual and layer norm (before or after, by cfg.pre_lnorm).
class PositionwiseFF : public nn::Module {
 public:
  /// fc1 d -> d_inner, fc2 d_inner -> d (with biases), layer_norm over d; dtype
  /// \p dt on the CPU.
  PositionwiseFF(const XLConfig& c, DType dt, Generator* gen);
  /// "PositionwiseFF".
  std::string type_name() const override { return "PositionwiseFF"; }
  /// x [B, L, d] -> [B, L, d]; dropout in training mode only. Records gradients
  /// to x and the parameters.
  Tensor forward(const Tensor& x) const;

  XLConfig cfg;  ///< The model's configuration.
  /// \var fc1
  /// d -> d_inner (CoreNet.0).
  /// \var fc2
  /// d_inner -> d (CoreNet.3).
  std::shared_ptr<nn::Linear> fc1, fc2;
  std::shared_ptr<nn::LayerNorm> layer_norm;  ///< Over d, eps 1e-5.
  Generator* gen;  ///< Draws the dropout masks (null: the default generator).
};

/// One layer: dec_attn then pos_ff (the official RelPartialLearnableDecoderLayer).
class XLLayer : public nn::Module {
 public:
  /// The layer of \p c, dtype \p dt on the CPU.
  XLLayer(const XLConfig& c, DType dt, Generator* gen);
  /// "RelPartialLearnableDecoderLayer".
  std::string type_name() const override { return "RelPartialLearnableDecoderLayer"; }
  std::shared_ptr<RelPartialAttention> dec_attn;  ///< The attention sublayer.
  std::shared_ptr<PositionwiseFF> pos_ff;         ///< The feed-forward sublayer.
};

/// The Transformer-XL / RSA-XL language model (or sequence labeller): the
/// embedding scaled by √d (or in_proj), n_layer layers with sinusoidal relative
/// positions and memory, and a head tied to the embedding (or out_head).
class TransformerXL : public SequenceModel {
 public:
  /// Builds the model of \p c (validated first: remora::Error on a bad field),
  /// parameters of dtype \p dt on the CPU, initialised by reset_parameters(gen);
  /// \p gen also draws the dropout masks.
  explicit TransformerXL(const XLConfig& c, DType dt = DType::f32, Generator* gen = nullptr);
  /// "MemTransformerLM" (the official class name).
  std::string type_name() const override { return "MemTransformerLM"; }

  /// The result of forward().
  struct Output {
    /// [B, L, V] (or [B, L, n_out]); with the adaptive softmax the
    /// log-probabilities (adaptive_log_prob), undefined when forward was given targets.
    Tensor logits;
    Tensor hidden;  ///< [B, L, d], the last layer's output.
    /// For the next segment: mems, n_layer entries [B, min(mem_len, M + L), d]
    /// when mem_len > 0 (the last rows of [mem; layer input]), and in carry mode
    /// rem_states, one per layer; all detached.
    XLState state;
    /// n_layer + 1 entries, [B, L, d]: the (dropped-out) embedding, then every
    /// layer's output (not detached).
    std::vector<Tensor> layer_inputs;
    Tensor nll;  ///< [B, L] -log p(target): adaptive softmax and targets given only.
  };
  /// ids i64 [B, L] (or floating features [B, L, n_in] with n_in > 0, converted
  /// to the parameters' dtype); state from the previous segment (empty: start of
  /// stream; else n_layer memories [B, M, d]). A wrong dtype or shape throws
  /// remora::Error. CPU or CUDA; records gradients to the parameters (and to
  /// real-valued inputs); the carried state is detached. targets i64 [B, L]
  /// (adaptive softmax only; ignored otherwise): nll instead of logits, through
  /// adaptive_log_softmax_nll (no [B, L, V] for the tail clusters).
  Output forward(const Tensor& ids, const XLState& state = {}, const Tensor& targets = Tensor()) const;
  /// Mean cross-entropy of logits [B, L, V] against targets i64 [B, L] (targets
  /// -100 are ignored); a scalar, differentiable to the logits.
  static Tensor loss(const Tensor& logits, const Tensor& targets);
  /// forward(x, state) as a SequenceOutput.
  SequenceOutput run(const Tensor& x, const SequenceState& state) const override {
    Output o = forward(x, state);
    return {o.logits, o.state};
  }
  /// forward with the targets: the adaptive softmax's nll and no logits (else the logits).
  ScoredSequenceOutput run_scored(const Tensor& x, const Tensor& y, const SequenceState& state) const override {
    return scored_output(forward(x, state, y));
  }
  /// The official weights_init: weights ~ N(0, init_std), biases 0, layer-norm
  /// weights ~ N(1, init_std), r_w_bias and r_r_bias ~ N(0, init_std); the REM
  /// parameters keep their own initialisation. In place, no gradient.
  void reset_parameters(Generator* gen = nullptr);

  XLConfig cfg;  ///< The configuration, as built.
  std::shared_ptr<nn::Embedding> embedding;  ///< [V, d], word_emb.emb_layers.0; null when n_in > 0 or adaptive.
  /// \var r_w_bias
  /// [H, D], u: the content bias added to the queries.
  /// \var r_r_bias
  /// [H, D], v: the position bias added to the queries of the positional term.
  /// \var out_bias
  /// [V], the tied head's bias, crit.out_layers.0.bias (plain LM head only; else undefined).
  Tensor r_w_bias, r_r_bias, out_bias;
  std::shared_ptr<nn::AdaptiveEmbedding> word_emb;         ///< The adaptive input (adaptive only).
  std::shared_ptr<nn::ProjectedAdaptiveLogSoftmax> crit;   ///< The adaptive softmax (adaptive only).
  std::shared_ptr<nn::Linear> out_head;      ///< d -> n_out with bias; n_out > 0 only.
  std::shared_ptr<nn::Linear> in_proj;       ///< n_in -> d with bias; n_in > 0 only (then embedding is null).
  std::shared_ptr<nn::ModuleList> layers;    ///< n_layer XLLayer modules.
  Generator* gen;  ///< Draws the dropout masks (null: the default generator).
};

}  // namespace models
}  // namespace remora
