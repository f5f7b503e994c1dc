// SPDX-License-Identifier: BSD-3-Clause
// Attention layers. RSAAttention: multi-head attention whose first REM heads
// mix in a Recurrence Encoding Matrix through a learned gate (docs/math.md#recurrence-encoding-matrices-rem and #rsa-attention-and-the-gate).
// MultiHeadAttention is RSAAttention with no REM heads: torch's
// nn.MultiheadAttention, parameter for parameter. Both run rsa_attention
// (ops/rem.h), so one op and one set of kernels serve every attention layer.
#pragma once
#include <string>
#include <vector>

#include "../ops/rem.h"
#include "layers.h"

namespace remora {
namespace nn {

// How the REM parameters start (docs/math.md#initialisation-and-checkpoint-names): eta ~ U([-2,-1] U [1,2]),
// nu ~ U(1, 2), theta = pi/4, mu ~ U(-3, 3). Explicit values win over ranges.
struct RemInit {
  std::vector<double> eta_range{-2, -1, 1, 2};  // [lo, hi] or [lo1, hi1, lo2, hi2]
  std::vector<double> nu_range{1, 2};
  double theta = 0.7853981633974483;
  std::vector<double> mu_range{-3, 3};
  std::vector<double> eta, nu, thetas, mu;  // explicit values (sizes checked)
};

// The learnable REM parameters of one layer, named as in checkpoints:
// eta [regular + dilated_regular], nu and theta [cyclic + dilated_cyclic],
// mu [REM heads] (or [1] with gate "layer").
class RemParameters : public Module {
 public:
  RemParameters(const RemSpec& spec, const std::string& gate = "head", const RemInit& init = {},
                DType dt = DType::f32, Generator* gen = nullptr);
  std::string type_name() const override { return "RemParameters"; }
  void reset_parameters(Generator* gen = nullptr);
  /// The spec and the four tensors as rsa_attention takes them.
  RemWeights weights() const { return {spec, eta, nu, theta, mu}; }

  RemSpec spec;
  std::string gate;
  RemInit init;
  Tensor eta, nu, theta, mu;  // undefined when the spec has none of that kind
};

/// torch.nn.MultiheadAttention's in-projection: query [B, Lq, d], key/value
/// [B, Lk, d] through the packed weight [3d, d] (and bias [3d], may be
/// undefined) into per-head q [B, H, Lq, D], k, v [B, H, Lk, D]. One matmul when
/// query, key and value are the same tensor, as in torch.
struct HeadProjections {
  Tensor q, k, v;
};
HeadProjections project_heads(const Tensor& query, const Tensor& key, const Tensor& value,
                              const Tensor& in_proj_weight, const Tensor& in_proj_bias,
                              int64_t num_heads);

/// Parameters as torch.nn.MultiheadAttention(d, H, dropout, bias, batch_first=True):
/// in_proj_weight [3d, d], in_proj_bias [3d], out_proj.weight [d, d],
/// out_proj.bias [d] (no biases when bias = false), same init (xavier_uniform
/// in_proj, zero biases, Linear default for out_proj.weight); plus `rem`
/// (RemParameters: rem.eta, rem.nu, rem.theta, rem.mu) when the spec has REM
/// heads. Math per head h (docs/math.md#rsa-attention-and-the-gate):
///   A = softmax(q kᵀ / sqrt(D) + mask); O_h = dropout(A) v            (plain head)
///   O_h = (1 - σ(μ_h)) dropout(A) v + σ(μ_h) P_h v                     (REM head)
///   out = out_proj(concat heads).
class RSAAttention : public Module {
 public:
  // d model width, H heads; spec.num_heads() <= H REM heads come first.
  RSAAttention(int64_t d, int64_t num_heads, const RemSpec& spec, const std::string& gate = "head",
               double dropout = 0, bool bias = true, const RemInit& init = {},
               DType dt = DType::f32, Generator* gen = nullptr);
  std::string type_name() const override { return "RSAAttention"; }

  /// query [B, Lq, d], key and value [B, Lk, d] -> [B, Lq, d].
  /// attn_mask [Lq, Lk]: floating = added to the scores (use -inf to block);
  ///   i64 = boolean, nonzero = blocked (torch's bool mask).
  /// key_padding_mask [B, Lk], any dtype: nonzero = padded key (blocked in A,
  ///   and its column of P zeroed).
  /// causal: also block key j for query i when j > i + (Lk - Lq) (queries are the
  ///   last Lq positions of the keys; for Lq == Lk this is j > i), and line the
  ///   REM up with absolute positions (distance n = (Lk - Lq) + i - j).
  /// A query row whose keys are all blocked has A = 0 (FlashAttention-2's rule,
  /// rsa_attention's policy), where torch's softmax gives NaN.
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

  int64_t embed_dim, num_heads, head_dim;
  double dropout;
  Tensor in_proj_weight, in_proj_bias;  // in_proj_bias undefined when bias = false
  std::shared_ptr<Linear> out_proj;
  std::shared_ptr<RemParameters> rem;  // null when the spec has no REM heads
  Generator* gen;                      // dropout draws; null: the global generator

 protected:
  // `name` prefixes the error messages (the derived layer's name).
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
  MultiHeadAttention(int64_t d, int64_t num_heads, double dropout = 0, bool bias = true,
                     DType dt = DType::f32, Generator* gen = nullptr)
      : RSAAttention("MultiHeadAttention", d, num_heads, RemSpec{}, "head", dropout, bias, {}, dt,
                     gen) {}
  std::string type_name() const override { return "MultiHeadAttention"; }
};

}  // namespace nn
}  // namespace remora
