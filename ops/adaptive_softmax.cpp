// SPDX-License-Identifier: BSD-3-Clause
#include "adaptive_softmax.h"

#include "../core/error.h"
#include "ops.h"

namespace remora {

namespace {
void check(const Tensor& hidden, const AdaptiveSoftmaxWeights& w) {
  const size_t parts = w.cutoffs.size();
  REMORA_CHECK(parts >= 1 && w.weight.size() == parts && w.bias.size() == parts && w.proj.size() == parts,
               "adaptive softmax: need one weight, bias and proj (may be undefined) per part, "
                   << parts << " parts from the cutoffs; got " << w.weight.size() << ", " << w.bias.size()
                   << ", " << w.proj.size());
  REMORA_CHECK(hidden.dim() == 2, "adaptive softmax: hidden must be [N, d_proj], got " << shape_str(hidden.shape()));
  for (size_t i = 0; i < parts; ++i) {
    const int64_t lo = i == 0 ? 0 : w.cutoffs[i - 1];
    REMORA_CHECK(w.cutoffs[i] > lo, "adaptive softmax: cutoffs must increase from > 0");
    // The head may carry the clusters' rows (cluster_weight undefined).
    const int64_t rows = w.cutoffs[i] - lo + (i == 0 && !w.cluster_weight.defined() ? int64_t(parts) - 1 : 0);
    REMORA_CHECK(w.weight[i].dim() == 2 && w.weight[i].size(0) == rows,
                 "adaptive softmax: part " << i << " weight must have " << rows << " rows, got "
                                           << shape_str(w.weight[i].shape()));
    const int64_t d_in = w.proj[i].defined() ? w.proj[i].size(1) : hidden.size(1);
    REMORA_CHECK(w.weight[i].size(1) == d_in, "adaptive softmax: part " << i << " weight " << shape_str(w.weight[i].shape())
                                                  << " does not take width " << d_in);
    REMORA_CHECK(!w.proj[i].defined() || w.proj[i].size(0) == hidden.size(1),
                 "adaptive softmax: part " << i << " proj " << shape_str(w.proj[i].shape()) << " does not take hidden "
                                           << shape_str(hidden.shape()));
  }
  REMORA_CHECK(parts == 1 || !w.cluster_weight.defined() || w.cluster_weight.size(0) == int64_t(parts) - 1,
               "adaptive softmax: " << parts - 1 << " clusters need cluster_weight [" << parts - 1 << ", d]");
  REMORA_CHECK(w.dropout >= 0 && w.dropout < 1, "adaptive softmax: dropout must be in [0, 1), got " << w.dropout);
}

// hidden (projected, then dropped out) times part i's weight, plus its bias.
Tensor logits(const Tensor& hidden, const Tensor& weight, const Tensor& bias, const Tensor& proj,
              const AdaptiveSoftmaxWeights& w) {
  if (!proj.defined()) return linear(hidden, weight, bias);
  return linear(dropout(matmul(hidden, proj), w.dropout, w.dropout > 0, w.gen), weight, bias);
}

Tensor head_logits(const Tensor& hidden, const AdaptiveSoftmaxWeights& w) {
  if (w.cutoffs.size() == 1 || !w.cluster_weight.defined()) return logits(hidden, w.weight[0], w.bias[0], w.proj[0], w);
  return logits(hidden, cat({w.weight[0], w.cluster_weight}, 0), cat({w.bias[0], w.cluster_bias}, 0), w.proj[0], w);
}
}  // namespace

Tensor adaptive_log_softmax_nll(const Tensor& hidden, const Tensor& target, const AdaptiveSoftmaxWeights& w) {
  check(hidden, w);
  REMORA_CHECK(target.dim() == 1 && target.size(0) == hidden.size(0) && target.dtype() == DType::i64,
               "adaptive softmax: target must be i64 [" << hidden.size(0) << "], got " << shape_str(target.shape()));
  const int64_t k = static_cast<int64_t>(w.cutoffs.size()) - 1;
  const Tensor head = head_logits(hidden, w);
  if (k == 0) return cross_entropy(head, target, -100, Reduction::none);
  const AdaptiveParts parts_of = adaptive_parts(target, w.cutoffs, "adaptive softmax: target");
  const int64_t head_size = head.size(1);
  const Device dev = hidden.device();
  const auto& rows = parts_of.rows;
  std::vector<Tensor> parts;
  for (int64_t p = 0; p <= k; ++p) {
    if (rows[p].empty()) continue;
    const Tensor idx = Tensor::from_vector(rows[p], {}, DType::i64, dev);
    const Tensor tgt = Tensor::from_vector(parts_of.local[p], {}, DType::i64, dev);
    const Tensor head_p = index_select(head, 0, idx);
    if (p == 0) {
      parts.push_back(cross_entropy(head_p, tgt, -100, Reduction::none));
    } else {
      const Tensor cluster = Tensor::full({int64_t(rows[p].size())}, double(head_size - p), DType::i64, dev);
      const Tensor tail = logits(index_select(hidden, 0, idx), w.weight[p], w.bias[p], w.proj[p], w);
      parts.push_back(add(cross_entropy(head_p, cluster, -100, Reduction::none),
                          cross_entropy(tail, tgt, -100, Reduction::none)));
    }
  }
  return adaptive_restore_order(parts, parts_of);
}

AdaptiveParts adaptive_parts(const Tensor& ids, const std::vector<int64_t>& ends, const char* what) {
  AdaptiveParts out;
  out.rows.resize(ends.size());
  out.local.resize(ends.size());
  const std::vector<double> v = ids.to_vector();
  for (size_t r = 0; r < v.size(); ++r) {
    const int64_t id = static_cast<int64_t>(v[r]);
    REMORA_CHECK(id >= 0 && id < ends.back(), what << " " << id << " is outside [0, " << ends.back() << ")");
    size_t p = 0;
    while (id >= ends[p]) ++p;
    out.rows[p].push_back(static_cast<int64_t>(r));
    out.local[p].push_back(id - (p == 0 ? 0 : ends[p - 1]));
  }
  return out;
}

Tensor adaptive_restore_order(const std::vector<Tensor>& parts, const AdaptiveParts& p) {
  // Entry j of cat(parts) belongs to row order[j].
  std::vector<int64_t> order;
  for (const std::vector<int64_t>& r : p.rows) order.insert(order.end(), r.begin(), r.end());
  std::vector<int64_t> inverse(order.size());
  for (size_t j = 0; j < order.size(); ++j) inverse[order[j]] = static_cast<int64_t>(j);
  return index_select(cat(parts, 0), 0, Tensor::from_vector(inverse, {}, DType::i64, parts.front().device()));
}

Tensor adaptive_log_prob(const Tensor& hidden, const AdaptiveSoftmaxWeights& w) {
  check(hidden, w);
  const int64_t k = static_cast<int64_t>(w.cutoffs.size()) - 1;
  const Tensor head = log_softmax(head_logits(hidden, w), 1);
  if (k == 0) return head;
  const int64_t head_size = head.size(1);
  std::vector<Tensor> cols = {slice(head, 1, 0, w.cutoffs[0])};
  for (int64_t p = 1; p <= k; ++p) {
    const Tensor tail = log_softmax(logits(hidden, w.weight[p], w.bias[p], w.proj[p], w), 1);
    cols.push_back(add(tail, slice(head, 1, head_size - p, head_size - p + 1)));
  }
  return cat(cols, 1);
}

}  // namespace remora
