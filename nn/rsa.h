// RSA attention as a layer: multi-head attention whose first REM heads mix in
// a Recurrence Encoding Matrix through a learned gate (SPEC §1-2).
#pragma once
#include <string>
#include <vector>

#include "../ops/rem.h"
#include "layers.h"

namespace remora {
namespace nn {

// How the REM parameters start (SPEC §1): eta ~ U([-2,-1] U [1,2]),
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

class RSAAttention : public Module {
 public:
  // d model width, H heads; spec.num_heads() <= H REM heads come first.
  RSAAttention(int64_t d, int64_t num_heads, const RemSpec& spec, const std::string& gate = "head",
               double dropout = 0, bool bias = true, const RemInit& init = {},
               DType dt = DType::f32, Generator* gen = nullptr);
  std::string type_name() const override { return "RSAAttention"; }

  /// query [B, Lq, d], key/value [B, Lk, d] -> [B, Lq, d]. Masks as in
  /// MultiHeadAttention; causal also lines the REM up with absolute positions
  /// (distance n = (Lk - Lq) + i - j). key_padding_mask also zeroes padded
  /// columns of P.
  Tensor forward(const Tensor& query, const Tensor& key, const Tensor& value,
                 const Tensor& attn_mask = Tensor(), const Tensor& key_padding_mask = Tensor(),
                 bool causal = false) const;
  Tensor self_attention(const Tensor& x, const Tensor& attn_mask = Tensor(),
                        const Tensor& key_padding_mask = Tensor(), bool causal = false) const {
    return forward(x, x, x, attn_mask, key_padding_mask, causal);
  }
  /// Re-initialises every parameter: the REM ones (rem->reset_parameters) and the projections.
  void reset_parameters(Generator* gen = nullptr);

  int64_t embed_dim, num_heads, head_dim;
  double dropout;
  Tensor in_proj_weight, in_proj_bias;
  std::shared_ptr<Linear> out_proj;
  std::shared_ptr<RemParameters> rem;
  Generator* gen;

 private:
  void reset_projections(Generator* gen);  // xavier in_proj, out_proj default, zero biases
};

}  // namespace nn
}  // namespace remora
