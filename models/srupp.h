// SPDX-License-Identifier: BSD-3-Clause
// SRU++ (Lei 2021, docs/math.md#the-sru-elementwise-recurrence) as a language model, following the official
// asappresearch/sru 3.0.0-dev (sru/modules.py: SRUppAttention,
// SRUppProjectedLinear, SRUppCell, SRUpp) and its enwik8 wrapper
// (experiments/srupp_experiments/train_enwik8.py: class Model).
//
// Letters: B batch, L segment length, M memory length, Lk = M + L keys,
// d = d_model (hidden units), d' = d_attn (attention / projection width),
// V vocabulary. The model is batch-major [B, L, ...] outside; inside, the layer
// stack runs time-major [L, B, d] like the official code and the op
// (one transpose in and one out; memories are transposed per layer).
//
// One layer i, input x [L, B, d] (memory mem [M, B, d] of the previous segment's
// inputs of this layer):
//   with attention ((i + 1) % attn_every == 0):
//     z = W_q [mem; x]  (linear1)            Q = z[M:]            [L, B, d']
//     [K; V] = W_kv z   (linear2, 2d' rows)                      [Lk, B, d'] each
//     A = softmax(Q Kᵀ / √d' + causal mask) V, attention dropout on the weights
//     U = W_o Dropout(LN(Q + α A))          (linear3, α scalar init 0)
//   without attention:  U = W_o Dropout(LN(W_in x))  (linear1, linear2)
//   h, c_last = sru_recurrence(U [L, B, d, 3], x' = x, v = weight_c, b = bias, c0,
//                              dropout mask on c for every layer but the last)
// Model: emb = Dropout(E[ids]); h = SRUpp(emb); logits = output_layer(Dropout(h)).
// The output layer is untied (as the official enwik8 Model), with a bias.
//
// Parameter names are the official state dict's, so checkpoints move both ways:
//   embedding_layer.weight, output_layer.{weight,bias},
//   rnn.rnn_lst.N.{weight_c,bias} (+ buffer rnn.rnn_lst.N.scale_x, always 1),
//   rnn.rnn_lst.N.transform_module.{linear1,linear2,linear3}.weight,
//   rnn.rnn_lst.N.transform_module.alpha, rnn.rnn_lst.N.transform_module.layer_norm.*
// weight_c [2d] and bias [2d] are (v_f; v_r) and (b_f; b_r) flattened.
//
// State across segments (SequenceState): mems[i] = the last mem_len rows of
// [mem; input of layer i], detached, batch-major [B, M, d] (the official code
// keeps exactly the previous segment's inputs: the same when mem_len = L);
// cells[i] = c_last of layer i [B, d], detached (the official `hidden`).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "../nn/layers.h"
#include "sequence_model.h"

namespace remora {
namespace models {

struct SRUppConfig {
  int64_t n_token = 256;    // vocabulary (ignored when n_in > 0)
  int64_t d_model = 256;    // d: hidden units (= embedding width)
  int64_t d_attn = 64;      // d': attention / projection width
  int64_t n_layer = 4;
  int64_t attn_every = 1;   // k: layer i has attention when (i + 1) % k == 0
  double dropout = 0.1;     // embedding, U, c mask (all but the last layer), output
  double attn_dropout = 0.1;
  int64_t mem_len = 0;      // 0: attention sees the current segment only
  double highway_bias = -2.0;  // initial b_r (the official SRUpp default)
  // Sequence labelling: > 0 makes output_layer produce n_out logits per position.
  int64_t n_out = 0;
  // Real-valued inputs: > 0 replaces the embedding by a linear layer "in_proj"
  // from n_in features (needs n_out > 0); run() then takes f32/f64 [B, L, n_in].
  int64_t n_in = 0;
  void validate() const;  // errors name the field
  // The memory estimate (tools/driver/memory_estimate.h), f32, from the sizes
  // alone: the parameter count, and the activations of `s`.
  double parameter_count() const;
  struct ActivationBytes {
    double scores = 0;  // attention scores [batch, seq_len, seq_len + mem_len], 3 per layer
    double layers = 0;  // about 6 [B, L, d_model] tensors per layer
    double logits = 0;  // the output logits
    double memory = 0;  // the carried memory [n_layer, B, mem_len, d_model]
  };
  ActivationBytes activation_bytes(const ActivationShape& s) const;
};

// SRUppProjectedLinear: U = linear2(Dropout(LN(linear1 x))).
class SRUppProjectedLinear : public nn::Module {
 public:
  SRUppProjectedLinear(int64_t in, int64_t out, int64_t proj, double dropout, DType dt,
                       Generator* gen);
  std::string type_name() const override { return "SRUppProjectedLinear"; }
  Tensor forward(const Tensor& x) const;  // [L, B, in] -> [L, B, out]
  void reset_parameters(Generator* gen);
  double dropout;
  std::shared_ptr<nn::Linear> linear1, linear2;
  std::shared_ptr<nn::LayerNorm> layer_norm;
  Generator* gen;
};

// SRUppAttention: one head, causal, over [mem; x].
class SRUppAttention : public nn::Module {
 public:
  SRUppAttention(int64_t in, int64_t out, int64_t proj, double dropout, double attn_dropout,
                 DType dt, Generator* gen);
  std::string type_name() const override { return "SRUppAttention"; }
  // x [L, B, in], mem [M, B, in] (undefined: none) -> U [L, B, out].
  Tensor forward(const Tensor& x, const Tensor& mem) const;
  void reset_parameters(Generator* gen);
  int64_t proj;
  double dropout, attn_dropout;
  Tensor alpha;  // [1]
  std::shared_ptr<nn::Linear> linear1, linear2, linear3;
  std::shared_ptr<nn::LayerNorm> layer_norm;
  Generator* gen;
};

// SRUppCell: the transform module plus the recurrence parameters.
class SRUppCell : public nn::Module {
 public:
  SRUppCell(const SRUppConfig& c, int64_t in, bool attention, bool last, DType dt, Generator* gen);
  std::string type_name() const override { return "SRUppCell"; }
  // x [L, B, in], c0 [B, d] (undefined: zeros), mem [M, B, in] (attention only).
  // Returns h [L, B, d]; *c_last = [B, d].
  Tensor forward(const Tensor& x, const Tensor& c0, const Tensor& mem, Tensor* c_last) const;
  // bias = (b_f = 0; b_r = highway_bias), weight_c ~ U(-1, 1), scale_x = 1
  // (the transform module has its own reset_parameters).
  void reset_parameters(Generator* gen);
  int64_t in, d, k;
  bool attention;
  double highway_bias;
  double c_dropout;  // dropout mask on c (0 for the last layer)
  Tensor weight_c, bias, scale_x;  // [2d], [2d], buffer [1]
  std::shared_ptr<SRUppAttention> attn;        // "transform_module" when attention
  std::shared_ptr<SRUppProjectedLinear> proj;  // "transform_module" otherwise
  Generator* gen;
};

// The official SRUpp module: rnn_lst of SRUppCell.
class SRUpp : public nn::Module {
 public:
  SRUpp(const SRUppConfig& c, DType dt, Generator* gen);
  std::string type_name() const override { return "SRUpp"; }
  std::shared_ptr<nn::ModuleList> rnn_lst;
};

class SRUppLM : public SequenceModel {
 public:
  explicit SRUppLM(const SRUppConfig& c, DType dt = DType::f32, Generator* gen = nullptr);
  std::string type_name() const override { return "SRUppLM"; }

  struct Output {
    Tensor logits;          // [B, L, V] (or [B, L, n_out])
    Tensor hidden;          // [B, L, d], the last layer's output
    SequenceState state;    // mems [B, M', d] and cells [B, d] per layer
  };
  // ids i64 [B, L] (or features [B, L, n_in] with n_in > 0); state from the
  // previous segment (empty: start of stream).
  Output forward(const Tensor& ids, const SequenceState& state = {}) const;
  SequenceOutput run(const Tensor& x, const SequenceState& state) const override {
    Output o = forward(x, state);
    return {o.logits, o.state};
  }
  // Mean cross-entropy of logits [B, L, V] against targets i64 [B, L].
  static Tensor loss(const Tensor& logits, const Tensor& targets);
  // The official initialisation (SRUpp + the enwik8 Model.init_weights).
  void reset_parameters(Generator* gen = nullptr);

  SRUppConfig cfg;
  std::shared_ptr<nn::Embedding> embedding_layer;  // null when n_in > 0
  std::shared_ptr<nn::Linear> in_proj;             // n_in > 0 only
  std::shared_ptr<SRUpp> rnn;
  std::shared_ptr<nn::Linear> output_layer;
  Generator* gen;
};

}  // namespace models
}  // namespace remora
