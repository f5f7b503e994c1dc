// SPDX-License-Identifier: BSD-3-Clause
// Transformer-XL (Dai et al. 2019) and RSA-XL, following docs/math.md#relative-attention-and-rel-shift and the
// official pytorch/mem_transformer.py (MemTransformerLM, attn_type 0).
//
// Letters: B batch, L = Lq segment length, M memory length, Lk = M + L keys,
// d model width, H heads, D head width, V vocabulary. Batch-major [B, L, d]
// throughout (the official code is time-major; the numbers are the same).
//
// Parameter names are the official state dict's, so checkpoints move both ways:
//   word_emb.emb_layers.0.weight, r_w_bias, r_r_bias, crit.out_layers.0.bias,
//   layers.N.dec_attn.{qkv_net,r_net,o_net}.weight, layers.N.dec_attn.layer_norm.*,
//   layers.N.pos_ff.CoreNet.{0,3}.*, layers.N.pos_ff.layer_norm.*,
//   layers.N.dec_attn.rem.{eta,nu,theta,mu} (RSA-XL);
// with the adaptive input and softmax (XLConfig::adaptive()) word_emb and crit
// are nn::AdaptiveEmbedding and nn::ProjectedAdaptiveLogSoftmax, named as the
// official AdaptiveEmbedding and ProjectedAdaptiveLogSoftmax:
//   word_emb.emb_layers.{i}.weight, word_emb.emb_projs.{i},
//   crit.out_layers.{i}.weight (untied only) / .bias, crit.out_projs.{i} (untied only),
//   crit.cluster_weight, crit.cluster_bias.
#pragma once
#include <string>
#include <vector>

#include "../nn/adaptive.h"
#include "../nn/layers.h"
#include "../nn/rsa.h"
#include "sequence_model.h"

namespace remora {
namespace models {

struct XLConfig {
  int64_t n_token = 256;
  int64_t n_layer = 2, n_head = 2, d_model = 64, d_head = 0, d_inner = 256;  // d_head 0: d_model / n_head
  double dropout = 0.1, dropatt = 0.0;
  int64_t mem_len = 0, clamp_len = 0;  // clamp_len 0: no clamping
  bool same_length = false, pre_lnorm = false;
  // The positional term BD through rsa_attention's fused positional path
  // (RsaOptions::pos_q / pos_r, computed inside the device's kernel where it
  // has one: memory linear in the segment length); false materialises it as a
  // [B, H, L, L + M] bias (the reference form, same numbers).
  bool fused_position = true;
  // RSA-XL: "rsa" mixes a masked REM into the first rem.num_heads() heads.
  std::string attention = "softmax";
  RemSpec rem;
  std::string gate = "head";  // head | layer
  nn::RemInit rem_init;
  bool carry = false;  // carry the REM scan state across segments (docs/math.md#the-scan-form-applying-a-rem-in-ol)
  double init_std = 0.02;
  double proj_init_std = 0.01;  ///< N(0, proj_init_std): the adaptive projections (word_emb.emb_projs, crit.out_projs)
  // Adaptive input and adaptive softmax (Baevski & Auli 2019; Grave et al.
  // 2017) as the official MemTransformerLM takes them. With none of them set
  // (no cutoffs, d_embed = d_model, div_val 1, tie_weight) the model has the
  // plain tied embedding and output layer.
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
  // Sequence labelling: > 0 replaces the tied LM head by an untied linear layer
  // "out_head" producing n_out logits per position.
  int64_t n_out = 0;
  // Real-valued inputs: > 0 replaces the embedding by a linear layer "in_proj"
  // from n_in features (needs n_out > 0); forward then takes f32/f64 [B, L, n_in].
  int64_t n_in = 0;
  void validate() const;  // errors name the field
  // The memory estimate (tools/driver/memory_estimate.h), f32, from the sizes
  // alone (doubles: absurd sizes do not overflow): the parameter count, and
  // the activations of `s` (activation_bytes).
  double parameter_count() const;
  struct ActivationBytes {
    double scores = 0;  // materialised positional scores [batch, n_head, seq_len, seq_len + mem_len], 3 per layer (0 when fused)
    double layers = 0;  // per layer about 12 [B, L, d_model], the [B, L, d_inner] ones, keys and values over L + M
    double logits = 0;  // the output logits (and their gradient, softmax when training); adaptive: see activation_bytes
    double memory = 0;  // the carried memory [n_layer + 1, B, mem_len, d_model]
  };
  ActivationBytes activation_bytes(const ActivationShape& s) const;
};

// What one segment hands to the next: per-layer memories [B, M, d] (detached)
// and, in carry mode, per-layer REM scan states.
using XLState = SequenceState;

class RelPartialAttention : public nn::Module {
 public:
  RelPartialAttention(const XLConfig& c, DType dt, Generator* gen);
  std::string type_name() const override { return "RelPartialLearnableMultiHeadAttn"; }
  // h [B, L, d], r [Lk, d] positional embeddings, mem [B, M, d] (may be empty),
  // mask additive [L, Lk]; undefined (with cfg.fused_position): XL's causal
  // mask (and same_length window) applied inside the kernel. Returns [B, L, d].
  Tensor forward(const Tensor& h, const Tensor& r, const Tensor& mem, const Tensor& r_w_bias,
                 const Tensor& r_r_bias, const Tensor& mask, const Tensor& rem_state_in,
                 Tensor* rem_state_out) const;

  XLConfig cfg;
  std::shared_ptr<nn::Linear> qkv_net, r_net, o_net;
  std::shared_ptr<nn::LayerNorm> layer_norm;
  std::shared_ptr<nn::RemParameters> rem;  // RSA-XL only
  Generator* gen;
};

class PositionwiseFF : public nn::Module {
 public:
  PositionwiseFF(const XLConfig& c, DType dt, Generator* gen);
  std::string type_name() const override { return "PositionwiseFF"; }
  Tensor forward(const Tensor& x) const;

  XLConfig cfg;
  std::shared_ptr<nn::Linear> fc1, fc2;  // CoreNet.0, CoreNet.3
  std::shared_ptr<nn::LayerNorm> layer_norm;
  Generator* gen;
};

class XLLayer : public nn::Module {
 public:
  XLLayer(const XLConfig& c, DType dt, Generator* gen);
  std::string type_name() const override { return "RelPartialLearnableDecoderLayer"; }
  std::shared_ptr<RelPartialAttention> dec_attn;
  std::shared_ptr<PositionwiseFF> pos_ff;
};

class TransformerXL : public SequenceModel {
 public:
  explicit TransformerXL(const XLConfig& c, DType dt = DType::f32, Generator* gen = nullptr);
  std::string type_name() const override { return "MemTransformerLM"; }

  struct Output {
    // [B, L, V] (or [B, L, n_out]); with the adaptive softmax the log-probabilities
    // (adaptive_log_prob), undefined when forward was given targets.
    Tensor logits;
    Tensor hidden;  // [B, L, d], the last layer's output
    XLState state;  // for the next segment
    std::vector<Tensor> layer_inputs;  // n_layer + 1 entries, [B, L, d]
    Tensor nll;  ///< [B, L] -log p(target): adaptive softmax and targets given only
  };
  // ids i64 [B, L] (or features [B, L, n_in] with n_in > 0); state from the
  // previous segment (empty: start of stream). targets i64 [B, L] (adaptive
  // softmax only; ignored otherwise): nll instead of logits, through
  // adaptive_log_softmax_nll (no [B, L, V] for the tail clusters).
  Output forward(const Tensor& ids, const XLState& state = {}, const Tensor& targets = Tensor()) const;
  // Mean cross-entropy of logits [B, L, V] against targets i64 [B, L].
  static Tensor loss(const Tensor& logits, const Tensor& targets);
  SequenceOutput run(const Tensor& x, const SequenceState& state) const override {
    Output o = forward(x, state);
    return {o.logits, o.state};
  }
  /// forward with the targets: the adaptive softmax's nll and no logits (else the logits).
  ScoredSequenceOutput run_scored(const Tensor& x, const Tensor& y, const SequenceState& state) const override {
    Output o = forward(x, state, y);
    ScoredSequenceOutput s;
    s.logits = o.logits;
    s.state = o.state;
    s.nll = o.nll;
    return s;
  }
  void reset_parameters(Generator* gen = nullptr);

  XLConfig cfg;
  std::shared_ptr<nn::Embedding> embedding;  // word_emb.emb_layers.0 (plain LM and sequence labelling)
  Tensor r_w_bias, r_r_bias, out_bias;       // [H, D], [H, D], [V] (plain LM head only)
  std::shared_ptr<nn::AdaptiveEmbedding> word_emb;         ///< The adaptive input (adaptive only).
  std::shared_ptr<nn::ProjectedAdaptiveLogSoftmax> crit;   ///< The adaptive softmax (adaptive only).
  std::shared_ptr<nn::Linear> out_head;      // n_out > 0 only
  std::shared_ptr<nn::Linear> in_proj;       // n_in > 0 only (then embedding is null)
  std::shared_ptr<nn::ModuleList> layers;
  Generator* gen;
};

}  // namespace models
}  // namespace remora
