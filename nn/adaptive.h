// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// Adaptive input and adaptive softmax (Baevski & Auli 2019; Grave et al.
/// 2017) as the official Transformer-XL builds them for word-level data, with
/// its module and parameter names, so its state dicts load:
///
///     word_emb.emb_layers.{i}.weight, word_emb.emb_projs.{i}
///     crit.out_layers.{i}.weight / .bias, crit.out_projs.{i}, crit.cluster_weight / _bias
///
/// Example:
///
///     nn::AdaptiveOptions o{/*n_token=*/267735, /*d_embed=*/1024, /*d_proj=*/1024, {20000, 40000, 200000}, /*div_val=*/4};
///     auto emb = std::make_shared<nn::AdaptiveEmbedding>(o);
///     auto crit = std::make_shared<nn::ProjectedAdaptiveLogSoftmax>(o, DType::f32, nullptr, emb.get(),
///                                                                   /*tie_weight=*/true, std::vector<bool>{false, true, true, true});
///     Tensor x = emb->forward(ids);                          // [..., d_proj], scaled by sqrt(d_proj)
///     Tensor loss = crit->nll(hidden.reshape({-1, 1024}), target.reshape({-1})).mean();
///
/// The vocabulary [0, n_token) is cut at the cutoffs into parts: part 0 holds
/// [0, c_1), part i holds [c_i, c_{i+1}), the last ends at n_token; part i has
/// the width d_i = d_embed / div_val^i. The layers are built on the CPU (Module::to
/// moves them) and run on the CPU and CUDA (ops/adaptive_softmax.h); initial
/// values come from `gen` (null: the global generator).
#pragma once
#include <memory>
#include <vector>

#include "../ops/adaptive_softmax.h"
#include "module.h"

namespace remora {
namespace nn {

/// The vocabulary split and widths that AdaptiveEmbedding and
/// ProjectedAdaptiveLogSoftmax share (the official n_token, d_embed, d_model,
/// cutoffs, div_val).
struct AdaptiveOptions {
  /// Vocabulary size (> 0).
  int64_t n_token = 0;
  int64_t d_embed = 0;  ///< Width of part 0 (> 0); part i has d_embed / div_val^i (integer division, > 0).
  int64_t d_proj = 0;   ///< The model width (> 0): the embedding's output and the softmax's input.
  std::vector<int64_t> cutoffs;  ///< c_1 < ... < c_k < n_token, each > 0 (empty: one part).
  /// Width divisor between parts (>= 1; 1: every part has width d_embed and one
  /// table serves the whole vocabulary).
  int64_t div_val = 1;
  /// The parts' ends: cutoffs, then n_token.
  std::vector<int64_t> ends() const;
  /// Width of part i: d_embed / div_val^i.
  int64_t width(size_t i) const;
  /// The tail logits the adaptive softmax computes per row in training, expected
  /// for word-frequency data: each row evaluates the cluster of its target, and
  /// with frequencies following Zipf's law (p(rank r) ~ 1 / r) cluster
  /// [c_i, c_(i+1)) holds a share (H(c_(i+1)) - H(c_i)) / H(n_token) of the
  /// targets, H the harmonic numbers. For memory estimates.
  double expected_tail_logits() const;
  /// An Error prefixed by who unless n_token, d_embed, d_proj > 0, div_val >= 1,
  /// the cutoffs increase strictly from above 0 to below n_token, and the last part
  /// has a width above 0.
  void check(const char* who) const;
};

/// Token ids [...] -> [..., d_proj] times sqrt(d_proj). div_val 1: one table
/// [n_token, d_embed] and, when d_embed != d_proj, one projection [d_proj,
/// d_embed]; else one table and projection per part. Tables ~ N(0, 0.02),
/// projections ~ N(0, 0.01) (the official init).
/// Parameters emb_layers.{i}.weight [size_i, d_i] and emb_projs.{i}
/// [d_proj, d_i] (emb_projs empty with div_val 1 and d_embed == d_proj).
class AdaptiveEmbedding : public Module {
 public:
  /// Checks o (AdaptiveOptions::check) and draws the tables and projections in
  /// dtype dt from gen.
  explicit AdaptiveEmbedding(const AdaptiveOptions& o, DType dt = DType::f32, Generator* gen = nullptr);
  std::string type_name() const override { return "AdaptiveEmbedding"; }
  /// ids i64 [...] -> [..., d_proj], times sqrt(d_proj). Each id looks up its part's
  /// table and projection; with div_val != 1 the ids are read on the host, and an id
  /// outside [0, n_token) is an Error. Gradient to the tables and projections.
  Tensor forward(const Tensor& ids) const;

  /// The options it was built with.
  AdaptiveOptions opts;
  std::shared_ptr<ModuleList> emb_layers;   ///< An Embedding per part (one when div_val == 1), child "emb_layers".
  /// The projections [d_proj, d_i] per part, child "emb_projs".
  std::shared_ptr<ParameterList> emb_projs;
};

/// One part's output layer: weight [size_i, d_i] (possibly the embedding's
/// table, then not registered here) and its own bias. It prints as "Linear",
/// as the official nn.Linear does.
class AdaptiveOutLayer : public Module {
 public:
  /// A defined shared_weight is used as the weight without registering it; else a
  /// weight [rows, width] ~ N(0, 0.02) from gen is registered as "weight". The bias
  /// [rows] starts at zeros ("bias").
  AdaptiveOutLayer(Tensor shared_weight, int64_t rows, int64_t width, DType dt, Generator* gen);
  std::string type_name() const override { return "Linear"; }
  /// The weight [rows, width] (the embedding's table when shared).
  Tensor weight, bias;  ///< The bias [rows].
};

/// The official ProjectedAdaptiveLogSoftmax: log-probabilities of the
/// vocabulary from hidden states [N, d_proj] (ops/adaptive_softmax.h). Parameters
/// cluster_weight [k, d_embed] and cluster_bias [k] (k = cutoffs.size(), absent
/// when 0), out_layers.{i}.weight [size_i, d_i] and .bias [size_i] (one layer over
/// the whole vocabulary when div_val == 1), out_projs.{i} [d_proj, d_i] (when
/// div_val != 1 or d_proj != d_embed); tied tensors are registered in the
/// embedding only. Initial values: weights ~ N(0, 0.02), projections ~ N(0, 0.01),
/// biases 0.
class ProjectedAdaptiveLogSoftmax : public Module {
 public:
  /// With `tie` (the model's AdaptiveEmbedding): tie_weight shares its tables
  /// as the output weights, tie_projs[i] shares its projection i (of 0 when
  /// div_val == 1) as output projection i. Shared tensors are registered only
  /// in the embedding.
  /// An Error when o fails AdaptiveOptions::check, when tying without `tie`,
  /// when tie_projs has not one entry per part, or when tie's options differ
  /// from o.
  ProjectedAdaptiveLogSoftmax(const AdaptiveOptions& o, DType dt = DType::f32, Generator* gen = nullptr,
                              const AdaptiveEmbedding* tie = nullptr, bool tie_weight = false,
                              std::vector<bool> tie_projs = {});
  std::string type_name() const override { return "ProjectedAdaptiveLogSoftmax"; }
  /// -log p(target): hidden [N, d_proj], target i64 [N] in [0, n_token) (read on
  /// the host; an Error otherwise) -> [N]. Gradient to hidden and the parameters.
  Tensor nll(const Tensor& hidden, const Tensor& target) const;
  /// log p of every token: [N, d_proj] -> [N, n_token]. Gradient to hidden and the
  /// parameters.
  Tensor log_prob(const Tensor& hidden) const;
  /// The parameters as the ops of ops/adaptive_softmax.h take them (with div_val
  /// == 1, part i's slice of the single output layer).
  AdaptiveSoftmaxWeights weights() const;

  /// The options it was built with.
  AdaptiveOptions opts;
  /// The head's cluster rows [k, d_embed] (undefined when k = 0).
  Tensor cluster_weight, cluster_bias;  ///< [k] (undefined when k = 0).
  /// AdaptiveOutLayer per part (one when div_val == 1), child "out_layers".
  std::shared_ptr<ModuleList> out_layers;
  /// Output projections per part, child "out_projs"; absent entries where the
  /// part has none or ties the embedding's.
  std::shared_ptr<ParameterList> out_projs;

 private:
  std::vector<Tensor> projs_;  // per part (undefined: none), shared ones included
};

}  // namespace nn
}  // namespace remora
