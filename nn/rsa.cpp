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
}

RSAAttention::RSAAttention(int64_t d, int64_t H, const RemSpec& spec, const std::string& gate,
                           double p, bool has_bias, const RemInit& init, DType dt, Generator* g)
    : embed_dim(d), num_heads(H), head_dim(H > 0 ? d / H : 0), dropout(p), gen(g) {
  REMORA_CHECK(d > 0 && H > 0 && d % H == 0,
               "RSAAttention: d = " << d << " must be a positive multiple of num_heads = " << H);
  REMORA_CHECK(spec.num_heads() <= H, "RSAAttention: " << spec.num_heads()
                                                       << " REM heads but only " << H
                                                       << " heads; use at most " << H);
  REMORA_CHECK(p >= 0 && p < 1, "RSAAttention: dropout must be in [0, 1), got " << p);
  in_proj_weight = register_parameter("in_proj_weight", Tensor::empty({3 * d, d}, dt));
  if (has_bias) in_proj_bias = register_parameter("in_proj_bias", Tensor::empty({3 * d}, dt));
  out_proj = register_module("out_proj", std::make_shared<Linear>(d, d, has_bias, dt, g));
  rem = register_module("rem", std::make_shared<RemParameters>(spec, gate, init, dt, g));
  reset_projections(g);  // rem drew its values in its constructor
}

void RSAAttention::reset_parameters(Generator* g) {
  rem->reset_parameters(g);
  reset_projections(g);
}

void RSAAttention::reset_projections(Generator* g) {
  init::xavier_uniform_(in_proj_weight, 1, g);
  if (in_proj_bias.defined()) init::zeros_(in_proj_bias);
  out_proj->reset_parameters(g);
  if (out_proj->bias.defined()) init::zeros_(out_proj->bias);
}

Tensor RSAAttention::forward(const Tensor& query, const Tensor& key, const Tensor& value,
                             const Tensor& attn_mask, const Tensor& key_padding_mask,
                             bool causal) const {
  const int64_t d = embed_dim, H = num_heads;
  REMORA_CHECK(query.defined() && query.dim() == 3 && query.size(2) == d,
               "RSAAttention: query must be [B, Lq, " << d << "], got "
                                                      << (query.defined() ? shape_str(query.shape()) : "undefined"));
  const int64_t B = query.size(0), Lq = query.size(1);
  REMORA_CHECK(key.defined() && key.dim() == 3 && key.size(0) == B && key.size(2) == d &&
                   value.defined() && value.shape() == key.shape(),
               "RSAAttention: key and value must be [" << B << ", Lk, " << d << "]");
  const int64_t Lk = key.size(1);
  REMORA_CHECK(!attn_mask.defined() || attn_mask.shape() == Shape({Lq, Lk}),
               "RSAAttention: attn_mask must be [Lq, Lk] = [" << Lq << ", " << Lk << "], got "
                                                              << shape_str(attn_mask.shape()));
  HeadProjections hp = project_heads(query, key, value, in_proj_weight, in_proj_bias, H);
  Tensor q = hp.q, k = hp.k, v = hp.v;  // [B, H, L, D]

  // One additive mask [Lq, Lk] from attn_mask and causal.
  const double ninf = -std::numeric_limits<double>::infinity();
  Tensor mask;
  if (attn_mask.defined())
    mask = is_floating(attn_mask.dtype())
               ? attn_mask.to(q.dtype())
               : masked_fill(Tensor::zeros({Lq, Lk}, q.dtype(), q.device()), attn_mask, ninf);
  if (causal) {
    Tensor block = triu(Tensor::ones({Lq, Lk}, DType::i64, q.device()), Lk - Lq + 1);
    mask = masked_fill(mask.defined() ? mask : Tensor::zeros({Lq, Lk}, q.dtype(), q.device()),
                       block, ninf);
  }
  RsaOptions opt;
  opt.dropout = dropout;
  opt.train = is_training();
  opt.gen = gen;
  Tensor o = rsa_attention(q, k, v, rem->weights(), mask, key_padding_mask, opt);  // [B, H, Lq, D]
  o = o.permute({0, 2, 1, 3}).reshape({B, Lq, d});
  return out_proj->forward(o);
}

}  // namespace nn
}  // namespace remora
