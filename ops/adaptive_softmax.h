// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// Adaptive softmax as the official Transformer-XL computes it
/// (ProjectedAdaptiveLogSoftmax; docs/math.md, section Adaptive input and
/// adaptive softmax): the vocabulary [0, n_token) is cut at cutoffs
/// c_1 < ... < c_k into a head (the shortlist [0, c_1) plus one logit per tail
/// cluster) and k tail clusters [c_i, c_{i+1}). A token of cluster i >= 1 has
/// log p = log p_head(cluster i) + log p_tail_i(token); only the rows whose
/// target lies in a cluster evaluate that cluster's logits, so no
/// [N, n_token] matrix is built in training.
///
/// Cluster i's logit is head column (head_size - i), where head_size =
/// c_1 + k: the clusters' rows are appended to the head in order 1..k and the
/// official code reads them from the end (`head_logprob[:, -i]`); weights
/// trained there load and give the same log-probabilities here.
///
/// Devices: the CPU and CUDA (every tensor on one device); the targets are
/// read on the host. Floating hidden and weights of one dtype. Built from
/// matmul, linear, cross_entropy and log_softmax, so the results have
/// gradients to hidden and every weight, bias, projection and cluster tensor.
#pragma once
#include <vector>

#include "../core/tensor.h"

namespace remora {

/// The parameters of an adaptive softmax with k tail clusters (k + 1 parts).
/// Shapes that do not fit each other are an Error naming the part.
struct AdaptiveSoftmaxWeights {
  /// The cluster ends: c_1 < ... < c_k < n_token, then n_token (k + 1 values).
  std::vector<int64_t> cutoffs;
  /// Per part i = 0 (shortlist) to k: weight [size_i, d_i], bias [size_i],
  /// proj [d_proj, d_i] (undefined: no projection, d_i = d_proj). A tail's
  /// bias may be undefined (no bias); the shortlist's is needed when k > 0.
  std::vector<Tensor> weight, bias, proj;  ///< Per part: the projection [d_proj, d_i] or undefined.
  /// \var bias
  /// Per part: [size_i] (see weight).

  /// The head's cluster rows: cluster_weight [k, d_0] (undefined when k = 0).
  /// Undefined with k > 0: the clusters' rows are the last k rows of weight[0]
  /// and bias[0] instead, which then have c_1 + k rows (the layout of SRU++'s
  /// official AdaptiveLogSoftmax, a single head layer).
  Tensor cluster_weight, cluster_bias;  ///< The head's cluster biases [k] (undefined when k = 0).
  /// Dropout probability on each part's projected hidden rows before its
  /// output layer (SRU++'s official AdaptiveLogSoftmax; parts without a
  /// projection have none). Set it only in training; 0: none.
  double dropout = 0;
  Generator* gen = nullptr;  ///< Draws the dropout masks (null: the default generator).
};

/// -log p(target) per row: hidden [N, d_proj], target i64 [N] in [0, n_token)
/// (an Error otherwise) -> [N]. Gradient to hidden and the weights.
Tensor adaptive_log_softmax_nll(const Tensor& hidden, const Tensor& target, const AdaptiveSoftmaxWeights& w);
/// Every token's log-probability: hidden [N, d_proj] -> [N, n_token] (evaluation,
/// generation). Gradient to hidden and the weights.
Tensor adaptive_log_prob(const Tensor& hidden, const AdaptiveSoftmaxWeights& w);

/// The rows of ids [N] (any device; read on the host) by part: part p
/// holds ids in [ends[p-1], ends[p]) (ends[-1] = 0); `local` are the ids less
/// the part's start. An id outside [0, ends.back()) is an Error naming `what`.
struct AdaptiveParts {
  /// Per part, the row numbers (positions in ids) whose id falls in it, ascending.
  std::vector<std::vector<int64_t>> rows, local;  ///< Per part, those rows' ids less the part's start.
};
/// Sorts the rows of ids [N] into the parts that `ends` delimits (see
/// AdaptiveParts); `what` names the ids in an Error.
AdaptiveParts adaptive_parts(const Tensor& ids, const std::vector<int64_t>& ends, const char* what);
/// The per-part results (one per non-empty part, in part order, rows along
/// dim 0) put back in the rows' order. Gradient to each part.
Tensor adaptive_restore_order(const std::vector<Tensor>& parts, const AdaptiveParts& p);

}  // namespace remora
