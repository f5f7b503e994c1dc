// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// StarSaber (`docs/math.md#starsaber-our-reading`): a bidirectional RNN's fixed-point equation,
/// iterated n_layer times with separate weights per iteration. Only the paper's
/// abstract and introduction are public; this is Remora's reading of it (`docs/math.md#starsaber-our-reading`):
///
///   A^l_ij = softmax_j( s · h_i^l W_b^l h_j^l )   over j != i, padded keys masked
///   a_i    = Σ_{j<i} A^l_ij W_past^l h_j^l + Σ_{j>i} A^l_ij W_future^l h_j^l
///   plain: h_i^{l+1} = h_i^l + α_l · tanh( a_i + U^l x_i + b^l )
///   gated: z = σ(W_z [a_i; x_i] + b_z)
///          h_i^{l+1} = (1 − z) ⊙ h_i^l + z ⊙ tanh( a_i + U^l x_i + b^l )
///                    = gate(h^l, tanh(...), W_z [a; x] + b_z)        (the gate op, `docs/math.md#the-gate-op`)
///
/// No feed-forward sublayer, no LayerNorm, no position embeddings.
///
/// Letters: B batch, L length, d model width (d_model), V vocabulary, C classes.
/// Batch-major [B, L, d].
///
/// Choices where `docs/math.md#starsaber-our-reading` is silent (each is what the code does):
///   - x = dropout(E[ids]): token embeddings only. No absolute positions: the
///     past/future split of a_i is the model's only source of word order (the
///     abstract: "position encoding is done in the aggregation step").
///   - h^0 = x; every layer reads the same x through its direct path U^l x + b^l.
///   - The bilinear score is scaled by s = 1/sqrt(d) (scale_scores = true, the
///     Transformer's convention: with unit-variance h and Xavier W_b the raw
///     score has std ~ sqrt(d) and the softmax would start saturated);
///     scale_scores = false gives the raw h_i W_b h_j of `docs/math.md#starsaber-our-reading`.
///   - Masking: the diagonal (j == i) and padded keys get -1e30 before the
///     softmax and are then multiplied by 0, so a row with no admissible key (a
///     sequence with one real token, or L = 1) gives A_i = 0 and a_i = 0 instead
///     of NaN. Padded query rows are computed like the others (they attend to
///     the real tokens) and are ignored by the heads (mean pooling over real
///     tokens; MLM labels there should be -100).
///   - W_b, W_past, W_future have no bias (as written). U^l has bias b^l.
///   - α_l is one scalar per layer, [1], initialised to 0, so the plain model
///     starts as h^L = x. The gated variant has no α (as written): its update is
///     the gate alone, b_z = 0 at init (z = 1/2).
///   - Dropout (p = dropout, training only) on x (the embedded input), on the
///     candidate tanh(a + U x + b) before α-scaling / gating, and on the pooled
///     vector before the classifier. Not on A.
///   - MLM head: an untied linear layer d -> V with bias, straight on h^L
///     (logits = h^L W_mᵀ + b_m). Classification head: mean of h^L over real
///     tokens (attention_mask = 1; all L when the mask is undefined), dropout,
///     then a linear layer d -> C.
///   - Initialisation, init = "xavier" (default): embeddings N(0, 1) (torch's
///     nn.Embedding; x must be O(1) as there is no LayerNorm), every other weight
///     matrix Xavier-uniform (W_b, past, future, input, gate, mlm_head,
///     classifier), biases 0, α 0. init = "normal": every weight matrix and the
///     embeddings N(0, init_range) (HF BERT's _init_weights), biases 0, α 0.
///     Either way the padding row of the embeddings is zeroed when
///     pad_token_id >= 0, and that row gets no gradient (nn::Embedding).
///
/// Parameter names (our own; no official code is public), in this order:
///   embeddings.weight                [V, d]
///   layers.N.W_b                     [d, d]   score_ij = s · h_i W_b h_jᵀ
///   layers.N.alpha                   [1]      plain only
///   layers.N.past.weight             [d, d]   W_past (Linear layout [out, in])
///   layers.N.future.weight           [d, d]   W_future
///   layers.N.input.weight, .bias     [d, d], [d]     U^l, b^l
///   layers.N.gate.weight, .bias      [d, 2d], [d]    W_z (columns: a then x), b_z; gated only
///   mlm_head.weight, .bias           [V, d], [V]
///   classifier.weight, .bias         [C, d], [C]     num_classes > 0 only
///
/// \code
///   models::StarSaberConfig c;
///   c.vocab_size = 67; c.d_model = 132; c.n_layer = 9;
///   auto m = std::make_shared<models::StarSaber>(c);
///   Tensor logits = m->token_logits(ids, attention_mask);   // [B, L, V]
/// \endcode
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "../core/generator.h"
#include "../nn/layers.h"
#include "sequence_model.h"

namespace remora {
namespace models {

/// The sizes and options of a StarSaber (the driver's model.type starsaber;
/// docs/config_keys.md). validate() checks the ranges stated here. The driver
/// sets vocab_size, num_classes and pad_token_id from the task and uses its own
/// default model.n_layer 2.
struct StarSaberConfig {
  int64_t vocab_size = 0;       ///< V, including [MASK] and any padding id (>= 1; must be set).
  int64_t d_model = 128;        ///< d, the model width (>= 1).
  int64_t n_layer = 3;          ///< Fixed-point iterations (layers; >= 1).
  bool gated = false;           ///< GRU-like gated variant.
  bool causal = false;          ///< Past only (j < i): a causal language model (StarSaberLM).
  double dropout = 0.1;         ///< Dropout probability in [0, 1); the file's description says where it applies.
  int64_t num_classes = 0;      ///< > 0 adds classifier.*; 0 = none.
  int64_t pad_token_id = -1;    ///< Embedding row zeroed and frozen, in [0, vocab_size); -1 = none.
  bool scale_scores = true;     ///< Bilinear score times 1/sqrt(d).
  std::string init = "xavier";  ///< "xavier" | "normal".
  double init_range = 0.02;     ///< Std of init = "normal" (> 0, finite).

  /// Errors name the field and the bad value ("starsaber: d_model must be >= 1, got 0").
  void validate() const;
  /// starsaber_num_parameters in doubles (no overflow, no validation), for the
  /// memory estimate (cli/memory_estimate.h), and the activations of `s`.
  double parameter_count() const;
  /// Activation bytes by kind (f32, 4 bytes per value), for the memory estimate.
  struct ActivationBytes {
    double scores = 0;  ///< Relation scores [batch, seq_len, seq_len], 3 per layer.
    double layers = 0;  ///< About 6 [B, L, d_model] tensors per layer.
    double logits = 0;  ///< The logits over the vocabulary.
  };
  /// The activation bytes of a batch of shape \p s (training keeps every layer's).
  ActivationBytes activation_bytes(const ActivationShape& s) const;
};

/// Number of parameters (elements) of StarSaber(c), without building it:
///   V d + n_layer · (4 d² + d + 1)  [plain]  or  n_layer · (6 d² + 2 d)  [gated]
///   + V d + V (mlm_head) + (C d + C when num_classes > 0); causal: n_layer d² fewer
///   (no future projection). Validates \p c first (remora::Error).
int64_t starsaber_num_parameters(const StarSaberConfig& c);

/// One StarSaber layer (one fixed-point iteration) on explicit tensors, the
/// differentiable core that StarSaberLayer and the gradient checks share.
///   h, x [B, L, d]; key_padding [B, L] nonzero = padded (may be undefined);
///   W_b, W_past, W_future, U [d, d]; b [d]; alpha [1] (plain; undefined when
///   gated); W_z [d, 2d], b_z [d] (gated; undefined when plain). W_future
///   undefined = the causal layer: only keys j < i (a_i = Σ_{j<i} A_ij W_past h_j).
///   relation, when given, receives A [B, L, L] (rows i, columns j).
/// Returns h^{l+1} [B, L, d]. Dropout with probability \p dropout on the
/// candidate when \p train, drawn from \p gen. Any floating dtype (all alike),
/// CPU or CUDA; records gradients to h, x and every weight. Shape mismatches, or
/// both or neither of alpha and W_z, throw remora::Error.
Tensor starsaber_layer(const Tensor& h, const Tensor& x, const Tensor& key_padding,
                       const Tensor& W_b, const Tensor& W_past, const Tensor& W_future,
                       const Tensor& U, const Tensor& b, const Tensor& alpha, const Tensor& W_z,
                       const Tensor& b_z, bool scale_scores, double dropout = 0,
                       bool train = false, Generator* gen = nullptr, Tensor* relation = nullptr);

/// The relation graph alone: A [B, L, L] = masked softmax over j != i (j < i
/// when causal) of s · h_i W_b h_jᵀ (padded keys masked; rows with no
/// admissible key are 0). h [B, L, d], W_b [d, d] (else remora::Error),
/// key_padding [B, L] nonzero = padded (or undefined). Differentiable to h and W_b.
Tensor starsaber_relation(const Tensor& h, const Tensor& W_b, const Tensor& key_padding,
                          bool scale_scores, bool causal = false);

/// One StarSaber layer (one fixed-point iteration) with its parameters; the
/// parameter list in this file's description gives the names and shapes.
class StarSaberLayer : public nn::Module {
 public:
  /// The layer of \p c (plain or gated, bidirectional or causal), dtype \p dt on
  /// the CPU (initialised by StarSaber::reset_parameters).
  StarSaberLayer(const StarSaberConfig& c, DType dt, Generator* gen);
  /// "StarSaberLayer".
  std::string type_name() const override { return "StarSaberLayer"; }
  /// h, x [B, L, d]; key_padding [B, L] nonzero = padded (or undefined) -> [B, L, d].
  /// starsaber_layer with this layer's parameters (dropout in training mode
  /// only); \p relation, when given, receives A [B, L, L].
  Tensor forward(const Tensor& h, const Tensor& x, const Tensor& key_padding,
                 Tensor* relation = nullptr) const;

  StarSaberConfig cfg;  ///< The model's configuration.
  Tensor W_b;                                   ///< [d, d], the bilinear relation score.
  Tensor alpha;                                 ///< [1], plain only (undefined when gated).
  /// \var past
  /// W_past [d, d], no bias.
  /// \var future
  /// W_future [d, d], no bias; null when causal.
  std::shared_ptr<nn::Linear> past, future;
  std::shared_ptr<nn::Linear> input;            ///< U [d, d] and b [d], the direct path from x.
  std::shared_ptr<nn::Linear> gate;             ///< W_z [d, 2d], b_z; gated only.
  Generator* gen;  ///< Draws the dropout masks (null: the default generator).
};

/// The StarSaber encoder with an MLM head and, with num_classes > 0, a
/// mean-pooled classification head (the file's description gives the model).
class StarSaber : public EncoderModel {
 public:
  /// Builds the model of \p c (validated first: remora::Error on a bad field),
  /// parameters of dtype \p dt on the CPU, initialised by reset_parameters(gen);
  /// \p gen also draws the dropout masks.
  explicit StarSaber(const StarSaberConfig& c, DType dt = DType::f32, Generator* gen = nullptr);
  /// "StarSaber".
  std::string type_name() const override { return "StarSaber"; }

  /// The result of forward().
  struct Output {
    Tensor token_logits;                ///< [B, L, V]
    Tensor pooled;                      ///< [B, d] mean of h^L over real tokens (0 for a row without any).
    Tensor class_logits;                ///< [B, C] (num_classes > 0 only; else undefined).
    std::vector<Tensor> hidden_states;  ///< n_layer + 1 entries [B, L, d]: x = h^0, h^1, ..., h^L
    std::vector<Tensor> relations;      ///< n_layer entries A^l [B, L, L]
  };
  /// ids i64 [B, L]; attention_mask [B, L], any dtype, 1 = real, 0 = padding
  /// (undefined = all real). L >= 1; a wrong dtype or shape throws
  /// remora::Error. CPU or CUDA; records gradients to every parameter. Dropout
  /// in training mode only.
  Output forward(const Tensor& ids, const Tensor& attention_mask = Tensor()) const;
  /// h^L [B, L, d] (no heads); hidden/relations, when given, receive the per-layer tensors.
  Tensor encode(const Tensor& ids, const Tensor& attention_mask,
                std::vector<Tensor>* hidden = nullptr, std::vector<Tensor>* relations = nullptr) const;
  /// The MLM logits [B, L, V] of forward(), without the other outputs.
  Tensor token_logits(const Tensor& ids, const Tensor& attention_mask) const override;
  /// The class logits [B, C] of forward() (mean pooling, dropout, classifier).
  /// An Error when built with num_classes = 0.
  Tensor class_logits(const Tensor& ids, const Tensor& attention_mask) const override;
  /// Mean cross-entropy of logits [B, L, V] against labels i64 [B, L], -100 ignored.
  static Tensor mlm_loss(const Tensor& logits, const Tensor& labels);
  /// Mean cross-entropy of logits [B, C] against labels i64 [B] (-100 ignored).
  static Tensor class_loss(const Tensor& logits, const Tensor& labels);
  /// Re-draws the initialisation described in the header comment.
  void reset_parameters(Generator* gen = nullptr);

  StarSaberConfig cfg;  ///< The configuration, as built.
  std::shared_ptr<nn::Embedding> embeddings;  ///< embeddings.weight [V, d]
  std::shared_ptr<nn::ModuleList> layers;     ///< layers.N (StarSaberLayer)
  std::shared_ptr<nn::Linear> mlm_head;       ///< [V, d] + [V], untied.
  std::shared_ptr<nn::Linear> classifier;     ///< [C, d] + [C], num_classes > 0 only.
  Generator* gen;  ///< Draws the dropout masks (null: the default generator).
};

/// The causal reading of StarSaber as a language model (model.type starsaber
/// with causal = true): each position relates to earlier positions only, so
/// position t's logits depend on ids[:, :t+1]. Same parameters and names as
/// StarSaber (the modules are shared). No state crosses segments: a segment
/// is a fixed window, like BERT's (run() returns an empty state).
class StarSaberLM : public SequenceModel {
 public:
  /// Builds a StarSaber of \p c; c.causal must be true (else remora::Error).
  explicit StarSaberLM(const StarSaberConfig& c, DType dt = DType::f32, Generator* gen = nullptr);
  /// "StarSaberLM".
  std::string type_name() const override { return "StarSaberLM"; }
  /// ids i64 [B, L] -> logits [B, L, V] (no padding mask) and an empty state;
  /// \p state is ignored. The wrapped model follows this module's training mode.
  SequenceOutput run(const Tensor& ids, const SequenceState& state) const override;
  std::shared_ptr<StarSaber> model;  ///< The wrapped model; its modules are this one's children.
};

}  // namespace models

}  // namespace remora
