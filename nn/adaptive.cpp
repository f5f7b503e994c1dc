// SPDX-License-Identifier: BSD-3-Clause
#include "adaptive.h"

#include <cmath>

#include "../core/error.h"
#include "../ops/ops.h"
#include "init.h"
#include "layers.h"

namespace remora {
namespace nn {

namespace {
constexpr double kInitStd = 0.02, kProjInitStd = 0.01;  // the official init_std, proj_init_std

Tensor normal_param(const Shape& shape, double std, DType dt, Generator* gen) {
  Tensor t = Tensor::empty(shape, dt);
  init::normal_(t, 0, std, gen);
  return t;
}
}  // namespace

std::vector<int64_t> AdaptiveOptions::ends() const {
  std::vector<int64_t> e = cutoffs;
  e.push_back(n_token);
  return e;
}

int64_t AdaptiveOptions::width(size_t i) const {
  int64_t d = d_embed;
  for (size_t j = 0; j < i; ++j) d /= div_val;
  return d;
}

double AdaptiveOptions::expected_tail_logits() const {
  const std::vector<int64_t> e = ends();
  auto harmonic = [](double n) { return n < 1 ? 0.0 : std::log(n) + 0.5772156649 + 0.5 / n; };
  double tail = 0;
  for (size_t i = 1; i < e.size(); ++i) {
    const double lo = double(e[i - 1]), hi = double(e[i]);
    if (hi > lo) tail += (hi - lo) * (harmonic(hi) - harmonic(lo)) / harmonic(double(n_token));
  }
  return tail;
}

void AdaptiveOptions::check(const char* who) const {
  REMORA_CHECK(n_token > 0 && d_embed > 0 && d_proj > 0 && div_val >= 1,
               who << ": need n_token, d_embed, d_proj > 0 and div_val >= 1, got " << n_token << ", " << d_embed
                   << ", " << d_proj << ", " << div_val);
  int64_t prev = 0;
  for (int64_t c : ends()) {
    REMORA_CHECK(c > prev, who << ": cutoffs must increase strictly from > 0 and stay below n_token " << n_token);
    prev = c;
  }
  REMORA_CHECK(width(cutoffs.size()) > 0, who << ": d_embed " << d_embed << " / div_val^" << cutoffs.size()
                                              << " leaves the last part no width");
}

AdaptiveEmbedding::AdaptiveEmbedding(const AdaptiveOptions& o, DType dt, Generator* gen) : opts(o) {
  o.check("AdaptiveEmbedding");
  emb_layers = register_module("emb_layers", std::make_shared<ModuleList>());
  emb_projs = register_module("emb_projs", std::make_shared<ParameterList>());
  const std::vector<int64_t> ends = o.ends();
  for (size_t i = 0; i < (o.div_val == 1 ? 1 : ends.size()); ++i) {
    const int64_t rows = o.div_val == 1 ? o.n_token : ends[i] - (i == 0 ? 0 : ends[i - 1]);
    auto emb = std::make_shared<Embedding>(rows, o.width(i), -1, dt, gen);
    init::normal_(emb->weight, 0, kInitStd, gen);
    emb_layers->push_back(emb);
    if (o.div_val != 1 || o.d_proj != o.d_embed)
      emb_projs->push_back(normal_param({o.d_proj, o.width(i)}, kProjInitStd, dt, gen));
  }
}

Tensor AdaptiveEmbedding::forward(const Tensor& ids) const {
  const double scale = std::sqrt(double(opts.d_proj));
  Shape out_shape = ids.shape();
  out_shape.push_back(opts.d_proj);
  if (opts.div_val == 1) {
    Tensor e = emb_layers->at<Embedding>(0)->forward(ids);
    if (emb_projs->size() > 0) e = linear(e, (*emb_projs)[0]);
    return e * scale;
  }
  // Each id looks up its part's table and projection; rows go back in order.
  const Tensor flat = ids.reshape({-1});
  const AdaptiveParts parts_of = adaptive_parts(flat, opts.ends(), "AdaptiveEmbedding: id");
  std::vector<Tensor> parts;
  for (size_t p = 0; p < parts_of.rows.size(); ++p) {
    if (parts_of.rows[p].empty()) continue;
    const Tensor e = emb_layers->at<Embedding>(p)->forward(
        Tensor::from_vector(parts_of.local[p], {}, DType::i64, ids.device()));
    parts.push_back(linear(e, (*emb_projs)[p]));
  }
  if (parts.empty()) return Tensor::zeros(out_shape, (*emb_projs)[0].dtype(), ids.device());
  return adaptive_restore_order(parts, parts_of).reshape(out_shape) * scale;
}

AdaptiveOutLayer::AdaptiveOutLayer(Tensor shared_weight, int64_t rows, int64_t width, DType dt, Generator* gen) {
  weight = shared_weight.defined() ? shared_weight : register_parameter("weight", normal_param({rows, width}, kInitStd, dt, gen));
  bias = register_parameter("bias", Tensor::zeros({rows}, dt));
}

ProjectedAdaptiveLogSoftmax::ProjectedAdaptiveLogSoftmax(const AdaptiveOptions& o, DType dt, Generator* gen,
                                                         const AdaptiveEmbedding* tie, bool tie_weight,
                                                         std::vector<bool> tie_projs)
    : opts(o) {
  o.check("ProjectedAdaptiveLogSoftmax");
  const std::vector<int64_t> ends = o.ends();
  const size_t parts = ends.size();
  REMORA_CHECK(!(tie_weight || !tie_projs.empty()) || tie != nullptr,
               "ProjectedAdaptiveLogSoftmax: tying needs the AdaptiveEmbedding to tie to");
  REMORA_CHECK(tie_projs.empty() || tie_projs.size() == parts,
               "ProjectedAdaptiveLogSoftmax: tie_projs needs one entry per part (" << parts << "), got "
                                                                                   << tie_projs.size());
  REMORA_CHECK(!tie || (tie->opts.n_token == o.n_token && tie->opts.d_embed == o.d_embed &&
                        tie->opts.d_proj == o.d_proj && tie->opts.cutoffs == o.cutoffs && tie->opts.div_val == o.div_val),
               "ProjectedAdaptiveLogSoftmax: the tied AdaptiveEmbedding has other options");
  if (parts > 1) {
    cluster_weight = register_parameter("cluster_weight", normal_param({int64_t(parts) - 1, o.d_embed}, kInitStd, dt, gen));
    cluster_bias = register_parameter("cluster_bias", Tensor::zeros({int64_t(parts) - 1}, dt));
  }
  out_layers = register_module("out_layers", std::make_shared<ModuleList>());
  out_projs = register_module("out_projs", std::make_shared<ParameterList>());
  for (size_t i = 0; i < (o.div_val == 1 ? 1 : parts); ++i) {
    const int64_t rows = o.div_val == 1 ? o.n_token : ends[i] - (i == 0 ? 0 : ends[i - 1]);
    const Tensor shared = tie_weight ? tie->emb_layers->at<Embedding>(i)->weight : Tensor();
    out_layers->push_back(std::make_shared<AdaptiveOutLayer>(shared, rows, o.width(i), dt, gen));
  }
  for (size_t i = 0; i < parts; ++i) {
    const bool has_proj = o.div_val != 1 || o.d_proj != o.d_embed;
    Tensor p;
    if (has_proj && !tie_projs.empty() && tie_projs[i]) {
      p = (*tie->emb_projs)[o.div_val == 1 ? 0 : i];
      out_projs->push_back(Tensor());  // registered in the embedding
    } else if (has_proj) {
      p = out_projs->push_back(normal_param({o.d_proj, o.width(i)}, kProjInitStd, dt, gen));
    } else {
      out_projs->push_back(Tensor());
    }
    projs_.push_back(p);
  }
}

AdaptiveSoftmaxWeights ProjectedAdaptiveLogSoftmax::weights() const {
  AdaptiveSoftmaxWeights w;
  w.cutoffs = opts.ends();
  for (size_t i = 0; i < w.cutoffs.size(); ++i) {
    const int64_t lo = i == 0 ? 0 : w.cutoffs[i - 1];
    if (opts.div_val == 1) {
      const auto& out = *out_layers->at<AdaptiveOutLayer>(0);
      w.weight.push_back(slice(out.weight, 0, lo, w.cutoffs[i]));
      w.bias.push_back(slice(out.bias, 0, lo, w.cutoffs[i]));
    } else {
      const auto& out = *out_layers->at<AdaptiveOutLayer>(i);
      w.weight.push_back(out.weight);
      w.bias.push_back(out.bias);
    }
    w.proj.push_back(projs_[i]);
  }
  w.cluster_weight = cluster_weight;
  w.cluster_bias = cluster_bias;
  return w;
}

Tensor ProjectedAdaptiveLogSoftmax::nll(const Tensor& hidden, const Tensor& target) const {
  return adaptive_log_softmax_nll(hidden, target, weights());
}

Tensor ProjectedAdaptiveLogSoftmax::log_prob(const Tensor& hidden) const {
  return adaptive_log_prob(hidden, weights());
}

}  // namespace nn
}  // namespace remora
