// SPDX-License-Identifier: BSD-3-Clause
// Adaptive input and adaptive softmax (Baevski & Auli 2019; Grave et al.
// 2017) as the official Transformer-XL builds them for word-level data, with
// its module and parameter names, so its state dicts load:
//   word_emb.emb_layers.{i}.weight, word_emb.emb_projs.{i}
//   crit.out_layers.{i}.weight / .bias, crit.out_projs.{i}, crit.cluster_weight / _bias
//
//   nn::AdaptiveOptions o{/*n_token=*/267735, /*d_embed=*/1024, /*d_proj=*/1024, {20000, 40000, 200000}, /*div_val=*/4};
//   auto emb = std::make_shared<nn::AdaptiveEmbedding>(o);
//   auto crit = std::make_shared<nn::ProjectedAdaptiveLogSoftmax>(o, DType::f32, nullptr, emb.get(),
//                                                                 /*tie_weight=*/true, std::vector<bool>{false, true, true, true});
//   Tensor x = emb->forward(ids);                          // [..., d_proj], scaled by sqrt(d_proj)
//   Tensor loss = crit->nll(hidden.reshape({-1, 1024}), target.reshape({-1})).mean();
#pragma once
#include <memory>
#include <vector>

#include "../ops/adaptive_softmax.h"
#include "module.h"

namespace remora {
namespace nn {

struct AdaptiveOptions {
  int64_t n_token = 0;
  int64_t d_embed = 0;  // width of part 0; part i has d_embed / div_val^i
  int64_t d_proj = 0;   // the model width
  std::vector<int64_t> cutoffs;  // c_1 < ... < c_k < n_token (empty: one part)
  int64_t div_val = 1;
  // The parts' ends: cutoffs, then n_token.
  std::vector<int64_t> ends() const;
  // Width of part i.
  int64_t width(size_t i) const;
  void check(const char* who) const;
};

// Token ids [...] -> [..., d_proj] times sqrt(d_proj). div_val 1: one table
// [n_token, d_embed] and, when d_embed != d_proj, one projection [d_proj,
// d_embed]; else one table and projection per part. Tables ~ N(0, 0.02),
// projections ~ N(0, 0.01) (the official init).
class AdaptiveEmbedding : public Module {
 public:
  explicit AdaptiveEmbedding(const AdaptiveOptions& o, DType dt = DType::f32, Generator* gen = nullptr);
  std::string type_name() const override { return "AdaptiveEmbedding"; }
  Tensor forward(const Tensor& ids) const;

  AdaptiveOptions opts;
  std::shared_ptr<ModuleList> emb_layers;   // Embedding per part (one when div_val == 1)
  std::shared_ptr<ParameterList> emb_projs;
};

// One part's output layer: weight [size_i, d_i] (possibly the embedding's
// table, then not registered here) and its own bias.
class AdaptiveOutLayer : public Module {
 public:
  AdaptiveOutLayer(Tensor shared_weight, int64_t rows, int64_t width, DType dt, Generator* gen);
  std::string type_name() const override { return "Linear"; }
  Tensor weight, bias;
};

class ProjectedAdaptiveLogSoftmax : public Module {
 public:
  // With `tie` (the model's AdaptiveEmbedding): tie_weight shares its tables
  // as the output weights, tie_projs[i] shares its projection i (of 0 when
  // div_val == 1) as output projection i. Shared tensors are registered only
  // in the embedding.
  ProjectedAdaptiveLogSoftmax(const AdaptiveOptions& o, DType dt = DType::f32, Generator* gen = nullptr,
                              const AdaptiveEmbedding* tie = nullptr, bool tie_weight = false,
                              std::vector<bool> tie_projs = {});
  std::string type_name() const override { return "ProjectedAdaptiveLogSoftmax"; }
  // -log p(target): hidden [N, d_proj], target i64 [N] -> [N].
  Tensor nll(const Tensor& hidden, const Tensor& target) const;
  // log p of every token: [N, d_proj] -> [N, n_token].
  Tensor log_prob(const Tensor& hidden) const;
  AdaptiveSoftmaxWeights weights() const;

  AdaptiveOptions opts;
  Tensor cluster_weight, cluster_bias;  // [k, d_embed], [k] (undefined when k = 0)
  std::shared_ptr<ModuleList> out_layers;
  std::shared_ptr<ParameterList> out_projs;

 private:
  std::vector<Tensor> projs_;  // per part (undefined: none), shared ones included
};

}  // namespace nn
}  // namespace remora
