// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// Attention layers. RSAAttention: multi-head attention whose first REM heads
/// mix in a Recurrence Encoding Matrix through a learned gate (docs/math.md,
/// sections Recurrence Encoding Matrices (REM) and RSA attention and the gate).
/// MultiHeadAttention is RSAAttention with no REM heads: torch's
/// nn.MultiheadAttention, parameter for parameter. Both run rsa_attention
/// (ops/rem.h), so one op and one set of kernels serve every attention layer.
///
/// The layers are built on the CPU (Module::to moves them) and run on the CPU and
/// CUDA, with the dtypes of rsa_attention (f32 and f64; 16-bit inputs computed in
/// f32). They are held by std::shared_ptr (no `layer(x)` or `Name{nullptr}`
/// spellings).
#pragma once
#include <string>
#include <vector>

#include "../ops/rem.h"
#include "layers.h"

namespace remora {
namespace nn {

/// How the REM parameters start (docs/math.md, section Initialisation and
/// checkpoint names): eta ~ U([-2,-1] U [1,2]), nu ~ U(1, 2), theta = pi/4,
/// mu ~ U(-3, 3). Explicit values win over ranges. A range is [lo, hi], or
/// [lo1, hi1, lo2, hi2] for the union of two intervals (each drawn in proportion
/// to its width); another length is an Error.
struct RemInit {
  std::vector<double> eta_range{-2, -1, 1, 2};  ///< Range of eta, [lo, hi] or [lo1, hi1, lo2, hi2].
  /// Range of nu.
  std::vector<double> nu_range{1, 2};
  /// Value of every theta (pi/4) when `thetas` is empty.
  double theta = 0.7853981633974483;
  /// Range of mu.
  std::vector<double> mu_range{-3, 3};
  /// The gate starts closed: a learned gate_scale (mu's shape, zero at the
  /// start) multiplies sigmoid(mu) (RemWeights::gate_scale), so the REM heads
  /// begin as plain softmax heads, exactly, and learn to open the gate. For
  /// turning a pretrained softmax model into an RSA one.
  bool closed_gate = false;
  /// Explicit values, used instead of the draws when not empty (a wrong count is
  /// an Error). eta: one per regular and dilated regular head.
  std::vector<double> eta, nu, thetas, mu;  ///< Explicit mu: one per REM head (one with gate "layer").
  /// \var nu
  /// Explicit nu: one per cyclic and dilated cyclic pair.

  /// \var thetas
  /// Explicit theta values, one per pair, used instead of `theta`.
};

/// The learnable REM parameters of one layer, named as in checkpoints:
/// eta [regular + dilated_regular], nu and theta [cyclic + dilated_cyclic],
/// mu [REM heads] (or [1] with gate "layer"), and gate_scale (mu's shape) with
/// RemInit::closed_gate. The raw values: lambda = tanh(eta), gamma = sigmoid(nu),
/// the gate sigmoid(mu) (times gate_scale) (ops/rem.h).
class RemParameters : public Module {
 public:
  /// Validates spec (RemSpec::validate) and gate ("head" or "layer"), then draws
  /// the values as `init` says from gen (null: the global generator), in dtype
  /// dt; an Error for a bad spec, gate or explicit-value count.
  RemParameters(const RemSpec& spec, const std::string& gate = "head", const RemInit& init = {},
                DType dt = DType::f32, Generator* gen = nullptr);
  std::string type_name() const override { return "RemParameters"; }
  /// Draws the values again as `init` says (in place, under NoGradGuard).
  void reset_parameters(Generator* gen = nullptr);
  /// The spec and the four tensors as rsa_attention takes them.
  RemWeights weights() const { return {spec, eta, nu, theta, mu, gate_scale}; }

  /// Which REM heads the layer has.
  RemSpec spec;
  /// "head" (one mu per REM head) or "layer" (one mu shared).
  std::string gate;
  /// How reset_parameters draws the values.
  RemInit init;
  /// eta [num_eta()]; undefined when the spec has no regular or dilated regular
  /// head (so are nu and theta without cyclic pairs).
  Tensor eta, nu, theta, mu;  ///< mu [REM heads], or [1] with gate "layer".
  /// gate_scale, mu's shape, zero at the start: only with RemInit::closed_gate
  /// (undefined otherwise, and not a parameter).
  Tensor gate_scale;
  /// \var nu
  /// nu [num_cyclic()].

  /// \var theta
  /// theta [num_cyclic()].
};

/// Per-head queries, keys and values: what project_heads returns.
struct HeadProjections {
  /// q [B, H, Lq, D].
  Tensor q, k, v;  ///< v [B, H, Lk, D].
  /// \var k
  /// k [B, H, Lk, D].
};

/// torch.nn.MultiheadAttention's in-projection: query [B, Lq, d], key/value
/// [B, Lk, d] through the packed weight [3d, d] (and bias [3d], may be
/// undefined) into per-head q [B, H, Lq, D], k, v [B, H, Lk, D]. One matmul when
/// query, key and value are the same tensor, as in torch.
/// H must divide d (not checked here: RSAAttention::forward checks the shapes).
/// Gradient to query, key, value and the in-projection weight and bias.
HeadProjections project_heads(const Tensor& query, const Tensor& key, const Tensor& value,
                              const Tensor& in_proj_weight, const Tensor& in_proj_bias,
                              int64_t num_heads);

/// Parameters as torch.nn.MultiheadAttention(d, H, dropout, bias, batch_first=True):
/// in_proj_weight [3d, d], in_proj_bias [3d], out_proj.weight [d, d],
/// out_proj.bias [d] (no biases when bias = false), same init (xavier_uniform
/// in_proj, zero biases, Linear default for out_proj.weight); plus `rem`
/// (RemParameters: rem.eta, rem.nu, rem.theta, rem.mu) when the spec has REM
/// heads. Math per head h (docs/math.md, section RSA attention and the gate):
///
///     A = softmax(q k^T / sqrt(D) + mask); O_h = dropout(A) v                    (plain head)
///     O_h = (1 - sigmoid(mu_h)) dropout(A) v + sigmoid(mu_h) P_h v             (REM head)
///     out = out_proj(concat heads).
class RSAAttention : public Module {
 public:
  /// d model width, H heads; spec.num_heads() <= H REM heads come first. d, H > 0,
  /// H dividing d, dropout in [0, 1) and gate "head" or "layer", else an Error.
  /// bias = false drops in_proj_bias and out_proj.bias. gen draws the initial
  /// values (the REM ones as `init` says) and the dropout masks (null: the
  /// global generator); it must outlive the layer.
  RSAAttention(int64_t d, int64_t num_heads, const RemSpec& spec, const std::string& gate = "head",
               double dropout = 0, bool bias = true, const RemInit& init = {},
               DType dt = DType::f32, Generator* gen = nullptr);
  std::string type_name() const override { return "RSAAttention"; }

  /// query [B, Lq, d], key and value [B, Lk, d] -> [B, Lq, d].
  /// attn_mask [Lq, Lk]: floating = added to the scores (use -inf to block; it
  ///   gets a gradient); another dtype (bool, integers) = nonzero blocked
  ///   (torch's bool mask).
  /// key_padding_mask [B, Lk], any dtype: nonzero = padded key (blocked in A,
  ///   and its column of P zeroed).
  /// causal: also block key j for query i when j > i + (Lk - Lq) (queries are the
  ///   last Lq positions of the keys; for Lq == Lk this is j > i); Lq > Lk is then
  ///   an Error. The REM always measures the distance n = (Lk - Lq) + i - j.
  /// A query row whose keys are all blocked has A = 0 (FlashAttention-2's rule,
  /// rsa_attention's policy), where torch's softmax gives NaN. Shapes other than
  /// these are an Error. Dropout on A in training mode. Gradient to query, key,
  /// value, a floating attn_mask and every parameter.
  Tensor forward(const Tensor& query, const Tensor& key, const Tensor& value,
                 const Tensor& attn_mask = Tensor(), const Tensor& key_padding_mask = Tensor(),
                 bool causal = false) const;
  /// Self-attention convenience: forward(x, x, x, ...).
  Tensor self_attention(const Tensor& x, const Tensor& attn_mask = Tensor(),
                        const Tensor& key_padding_mask = Tensor(), bool causal = false) const {
    return forward(x, x, x, attn_mask, key_padding_mask, causal);
  }
  /// Re-initialises every parameter: the REM ones (rem->reset_parameters) and the projections.
  void reset_parameters(Generator* gen = nullptr);
  /// The REM as rsa_attention takes it (an empty spec when there are no REM heads).
  RemWeights rem_weights() const { return rem ? rem->weights() : RemWeights{}; }

  /// Model width d.
  int64_t embed_dim, num_heads, head_dim;  ///< Head width D = d / H.
  /// \var num_heads
  /// Number of heads H (the REM heads first).

  /// Dropout probability on the attention probabilities A (training mode), read
  /// at each forward.
  double dropout;
  /// The packed in-projection [3d, d]: rows [0, d) for q, [d, 2d) for k, [2d, 3d) for v.
  Tensor in_proj_weight, in_proj_bias;  ///< [3d] (q, k, v parts); undefined when bias = false.
  /// The output projection, Linear d -> d (child "out_proj").
  std::shared_ptr<Linear> out_proj;
  std::shared_ptr<RemParameters> rem;  ///< The REM parameters (child "rem"); null when the spec has no REM heads.
  Generator* gen;                      ///< The dropout masks' generator; null: the global generator.

 protected:
  /// `name` prefixes the error messages (the derived layer's name); otherwise as
  /// the public constructor.
  RSAAttention(const char* name, int64_t d, int64_t num_heads, const RemSpec& spec,
               const std::string& gate, double dropout, bool bias, const RemInit& init, DType dt,
               Generator* gen);

 private:
  void reset_projections(Generator* gen);  // xavier in_proj, out_proj default, zero biases
  const char* name_;
};

/// torch.nn.MultiheadAttention(d, H, dropout, bias, batch_first=True): RSAAttention
/// with no REM heads, so a torch state_dict loads with load_state_dict and gives the
/// same numbers (except fully masked query rows: 0 here, NaN in torch).
class MultiHeadAttention : public RSAAttention {
 public:
  /// torch.nn.MultiheadAttention(d, num_heads, dropout, bias, batch_first=True):
  /// d, num_heads > 0, num_heads dividing d and dropout in [0, 1), else an Error.
  /// gen draws the initial values and the dropout masks.
  MultiHeadAttention(int64_t d, int64_t num_heads, double dropout = 0, bool bias = true,
                     DType dt = DType::f32, Generator* gen = nullptr)
      : RSAAttention("MultiHeadAttention", d, num_heads, RemSpec{}, "head", dropout, bias, {}, dt,
                     gen) {}
  std::string type_name() const override { return "MultiHeadAttention"; }
};

}  // namespace nn
}  // namespace remora
