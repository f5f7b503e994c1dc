// SPDX-License-Identifier: BSD-3-Clause
#include "rsa.h"

#include <cmath>
#include <limits>

#include "../core/autograd.h"
#include "../core/generator.h"
#include "../ops/ops.h"
#include "init.h"

namespace remora {
namespace nn {

namespace {

// n values: explicit ones, else draws from [lo, hi] (or a coin between two intervals).
Tensor init_values(const char* name, int64_t n, const std::vector<double>& explicit_values,
                   const std::vector<double>& range, DType dt, Generator* gen) {
  if (!explicit_values.empty()) {
    REMORA_CHECK(int64_t(explicit_values.size()) == n,
                 "RemParameters: init." << name << " has " << explicit_values.size()
                                        << " values, expected " << n);
    return Tensor::from_vector(explicit_values, {n}, dt);
  }
  REMORA_CHECK(range.size() == 2 || range.size() == 4,
               "RemParameters: init." << name << "_range must be [lo, hi] or [lo1, hi1, lo2, hi2]");
  Tensor u = Tensor::rand({n}, DType::f64, Device::cpu(), gen);
  if (range.size() == 2) return (u * (range[1] - range[0]) + range[0]).to(dt);
  // Two intervals of widths w1, w2: map U[0, 1) onto their union.
  const double w1 = range[1] - range[0], w2 = range[3] - range[2];
  std::vector<double> v = u.to_vector();
  for (double& x : v) {
    const double t = x * (w1 + w2);
    x = t < w1 ? range[0] + t : range[2] + (t - w1);
  }
  return Tensor::from_vector(v, {n}, dt);
}

}  // namespace

RemParameters::RemParameters(const RemSpec& s, const std::string& g, const RemInit& in, DType dt,
                             Generator* gen)
    : spec(s), gate(g), init(in) {
  spec.validate("RemParameters");
  REMORA_CHECK(gate == "head" || gate == "layer",
               "RemParameters: gate must be \"head\" or \"layer\", got \"" << gate << "\"");
  if (spec.num_eta() > 0) eta = register_parameter("eta", Tensor::zeros({spec.num_eta()}, dt));
  if (spec.num_cyclic() > 0) {
    nu = register_parameter("nu", Tensor::zeros({spec.num_cyclic()}, dt));
    theta = register_parameter("theta", Tensor::zeros({spec.num_cyclic()}, dt));
  }
  mu = register_parameter("mu", Tensor::zeros({gate == "layer" ? 1 : spec.num_heads()}, dt));
  if (init.closed_gate) gate_scale = register_parameter("gate_scale", Tensor::zeros(mu.shape(), dt));
  reset_parameters(gen);
}

void RemParameters::reset_parameters(Generator* gen) {
  NoGradGuard ng;
  const DType dt = mu.dtype();
  if (eta.defined()) eta.copy_(init_values("eta", eta.numel(), init.eta, init.eta_range, dt, gen));
  if (nu.defined()) {
    nu.copy_(init_values("nu", nu.numel(), init.nu, init.nu_range, dt, gen));
    if (!init.thetas.empty())
      theta.copy_(init_values("thetas", theta.numel(), init.thetas, {}, dt, gen));
    else
      theta.fill_(init.theta);
  }
  mu.copy_(init_values("mu", mu.numel(), init.mu, init.mu_range, dt, gen));
  if (gate_scale.defined()) gate_scale.zero_();
}

HeadProjections project_heads(const Tensor& query, const Tensor& key, const Tensor& value,
                              const Tensor& in_proj_weight, const Tensor& in_proj_bias,
                              int64_t H) {
  const int64_t d = query.size(2), D = d / H, B = query.size(0);
  Tensor q, k, v;  // [B, L, d]
  if (query.is_same(key) && key.is_same(value)) {
    std::vector<Tensor> qkv = chunk(linear(query, in_proj_weight, in_proj_bias), 3, -1);
    q = qkv[0], k = qkv[1], v = qkv[2];
  } else {
    auto part = [&](const Tensor& x, int64_t i) {
      Tensor b = in_proj_bias.defined() ? in_proj_bias.slice(0, i * d, (i + 1) * d) : Tensor();
      return linear(x, in_proj_weight.slice(0, i * d, (i + 1) * d), b);
    };
    q = part(query, 0), k = part(key, 1), v = part(value, 2);
  }
  // [B, L, d] -> [B, H, L, D]
  auto heads = [&](const Tensor& x) { return x.reshape({B, x.size(1), H, D}).permute({0, 2, 1, 3}); };
  return {heads(q), heads(k), heads(v)};
}

RSAAttention::RSAAttention(int64_t d, int64_t H, const RemSpec& spec, const std::string& gate,
                           double p, bool has_bias, const RemInit& init, DType dt, Generator* g)
    : RSAAttention("RSAAttention", d, H, spec, gate, p, has_bias, init, dt, g) {}

RSAAttention::RSAAttention(const char* name, int64_t d, int64_t H, const RemSpec& spec,
                           const std::string& gate, double p, bool has_bias, const RemInit& init,
                           DType dt, Generator* g)
    : embed_dim(d), num_heads(H), head_dim(H > 0 ? d / H : 0), dropout(p), gen(g), name_(name) {
  REMORA_CHECK(d > 0 && H > 0,
               name << ": d and num_heads must be > 0, got d = " << d << ", num_heads = " << H);
  REMORA_CHECK(d % H == 0, name << ": d = " << d << " is not divisible by num_heads = " << H
                                << "; pick H dividing d");
  REMORA_CHECK(spec.num_heads() <= H, name << ": " << spec.num_heads() << " REM heads but only "
                                           << H << " heads; use at most " << H);
  REMORA_CHECK(p >= 0 && p < 1, name << ": dropout must be in [0, 1), got " << p);
  in_proj_weight = register_parameter("in_proj_weight", Tensor::empty({3 * d, d}, dt));
  if (has_bias) in_proj_bias = register_parameter("in_proj_bias", Tensor::empty({3 * d}, dt));
  out_proj = register_module("out_proj", std::make_shared<Linear>(d, d, has_bias, dt, g));
  if (spec.num_heads() > 0)
    rem = register_module("rem", std::make_shared<RemParameters>(spec, gate, init, dt, g));
  else
    REMORA_CHECK(gate == "head" || gate == "layer",
                 name << ": gate must be \"head\" or \"layer\", got \"" << gate << "\"");
  reset_projections(g);  // rem drew its values in its constructor
}

void RSAAttention::reset_parameters(Generator* g) {
  if (rem) rem->reset_parameters(g);
  reset_projections(g);
}

void RSAAttention::reset_projections(Generator* g) {
  // torch's _reset_parameters: xavier in_proj, zero biases; out_proj.weight keeps
  // the Linear default.
  init::xavier_uniform_(in_proj_weight, 1, g);
  if (in_proj_bias.defined()) init::zeros_(in_proj_bias);
  out_proj->reset_parameters(g);
  if (out_proj->bias.defined()) init::zeros_(out_proj->bias);
}

Tensor RSAAttention::forward(const Tensor& query, const Tensor& key, const Tensor& value,
                             const Tensor& attn_mask, const Tensor& key_padding_mask,
                             bool causal) const {
  const int64_t d = embed_dim, H = num_heads;
  const char* name = name_;
  auto sh = [](const Tensor& t) { return t.defined() ? shape_str(t.shape()) : std::string("undefined"); };
  REMORA_CHECK(query.defined() && query.dim() == 3 && query.size(2) == d,
               name << ": query must be [B, Lq, " << d << "], got " << sh(query));
  const int64_t B = query.size(0), Lq = query.size(1);
  REMORA_CHECK(key.defined() && key.dim() == 3 && key.size(0) == B && key.size(2) == d,
               name << ": key must be [" << B << ", Lk, " << d << "] (B from query " << sh(query)
                    << "), got " << sh(key));
  const int64_t Lk = key.size(1);
  REMORA_CHECK(value.defined() && value.shape() == key.shape(),
               name << ": value " << sh(value) << " must have key's shape " << sh(key));
  REMORA_CHECK(!attn_mask.defined() || attn_mask.shape() == Shape({Lq, Lk}),
               name << ": attn_mask must be [Lq, Lk] = [" << Lq << ", " << Lk << "], got "
                    << sh(attn_mask));
  REMORA_CHECK(!key_padding_mask.defined() || key_padding_mask.shape() == Shape({B, Lk}),
               name << ": key_padding_mask must be [B, Lk] = [" << B << ", " << Lk << "], got "
                    << sh(key_padding_mask));
  REMORA_CHECK(Lq <= Lk || !causal,
               name << ": causal attention needs Lq <= Lk (queries are the last keys), got Lq = "
                    << Lq << ", Lk = " << Lk);
  HeadProjections hp = project_heads(query, key, value, in_proj_weight, in_proj_bias, H);

  // One additive mask [Lq, Lk] from attn_mask and causal.
  const DType dt = hp.q.dtype();
  const Device dev = hp.q.device();
  const double ninf = -std::numeric_limits<double>::infinity();
  Tensor mask;
  if (attn_mask.defined())
    mask = is_floating(attn_mask.dtype())
               ? attn_mask.to(dt)
               : masked_fill(Tensor::zeros({Lq, Lk}, dt, dev), attn_mask, ninf);
  if (causal) {
    Tensor block = triu(Tensor::ones({Lq, Lk}, DType::i64, dev), Lk - Lq + 1);  // 1 where j > i + Lk - Lq
    mask = masked_fill(mask.defined() ? mask : Tensor::zeros({Lq, Lk}, dt, dev), block, ninf);
  }
  RsaOptions opt;
  opt.dropout = dropout;
  opt.train = is_training();
  opt.gen = gen;
  Tensor o = rsa_attention(hp.q, hp.k, hp.v, rem_weights(), mask, key_padding_mask, opt);  // [B, H, Lq, D]
  o = o.permute({0, 2, 1, 3}).reshape({B, Lq, d});  // concat heads
  return out_proj->forward(o);
}

}  // namespace nn
}  // namespace remora
