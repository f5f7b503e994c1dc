// SPDX-License-Identifier: BSD-3-Clause
#include "losses.h"

#include "internal.h"

#include <algorithm>

namespace remora {

Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& targets,
                                        const Tensor& mask, Reduction reduction) {
  REMORA_CHECK(logits.defined() && targets.defined(),
               "binary_cross_entropy_with_logits: logits and targets must be defined");
  REMORA_CHECK(logits.shape() == targets.shape(),
               "binary_cross_entropy_with_logits: targets " << shape_str(targets.shape())
                   << " must have the logits' shape " << shape_str(logits.shape()));
  REMORA_CHECK(is_floating(logits.dtype()) && targets.dtype() == logits.dtype(),
               "binary_cross_entropy_with_logits: logits and targets need the same float dtype, got "
                   << dtype_name(logits.dtype()) << " and " << dtype_name(targets.dtype())
                   << "; fix: targets.to(logits.dtype())");
  detail::check_devices("binary_cross_entropy_with_logits", {logits, targets, mask},
                        {"logits", "targets", "mask"});
  const Tensor& x = logits;
  // relu(x) - x y + log(1 + exp(-|x|)): exp never overflows, and it equals
  // -[y log sigmoid(x) + (1 - y) log(1 - sigmoid(x))].
  Tensor loss = relu(x) - x * targets + log(affine(exp(neg(abs(x))), 1, 1));
  Tensor m;
  if (mask.defined()) {
    m = mask.dtype() == x.dtype() ? mask : mask.to(x.dtype());
    REMORA_CHECK(m.device() == x.device(),
                 "binary_cross_entropy_with_logits: mask must be on the logits' device");
    loss = loss * m;  // broadcast checked by mul
    REMORA_CHECK(loss.shape() == x.shape(),
                 "binary_cross_entropy_with_logits: mask " << shape_str(mask.shape())
                     << " must broadcast to logits " << shape_str(x.shape())
                     << "; fix: e.g. mask.unsqueeze(-1) for a [B, L] position mask");
  }
  if (reduction == Reduction::none) return loss;
  Tensor total = sum(loss);
  if (reduction == Reduction::sum) return total;
  if (!m.defined()) return total * (1.0 / std::max(double(x.numel()), 1.0));
  Tensor nonzero = sum(expand(ne(m, Tensor::zeros({}, m.dtype(), m.device())), x.shape()));
  if (x.device().is_cpu()) return total * (1.0 / std::max(nonzero.item(), 1.0));
  // Off the CPU the count stays on the device (.item() would be a host sync).
  Tensor inv;
  {
    NoGradGuard ng;
    Tensor one = Tensor::ones({}, nonzero.dtype(), nonzero.device());
    inv = div(one, maximum(nonzero, one));
  }
  return total * inv;
}

namespace {

void check_pair(const char* op, const Tensor& input, const Tensor& target) {
  REMORA_CHECK(input.defined() && target.defined(), op << ": input and target must be defined");
  REMORA_CHECK(input.shape() == target.shape(), op << ": target " << shape_str(target.shape())
                                                   << " must have the input's shape " << shape_str(input.shape())
                                                   << " (fix: reshape or expand the target)");
  REMORA_CHECK(is_floating(input.dtype()) && target.dtype() == input.dtype(),
               op << ": input and target need the same float dtype, got " << dtype_name(input.dtype()) << " and "
                  << dtype_name(target.dtype()) << "; fix: target.to(input.dtype())");
  detail::check_devices(op, {input, target}, {"input", "target"});
}

Tensor reduce(const Tensor& loss, Reduction reduction) {
  switch (reduction) {
    case Reduction::none: return loss;
    case Reduction::sum: return sum(loss);
    case Reduction::mean: break;
  }
  return mean(loss);
}

// total / max(count, 1), the count a tensor (no host sync off the CPU).
Tensor divide_by_count(const Tensor& total, const Tensor& count) {
  Tensor c;
  {
    NoGradGuard ng;
    c = maximum(count.to(total.dtype()), Tensor::ones({}, total.dtype(), total.device()));
  }
  return div(total, c);
}

void check_class_target(const char* op, const Tensor& scores, const Tensor& target, int64_t ignore_index) {
  REMORA_CHECK(scores.defined() && target.defined(), op << ": input and target must be defined");
  REMORA_CHECK(is_floating(scores.dtype()), op << ": input must be floating, got " << scores.str());
  REMORA_CHECK(target.dtype() == DType::i64, op << ": target must be i64 class indices, got " << target.str());
  REMORA_CHECK(scores.dim() >= 1, op << ": input needs a class dim (the last), got a 0-d tensor");
  Shape lead(scores.shape().begin(), scores.shape().end() - 1);
  REMORA_CHECK(target.shape() == lead, op << ": target " << shape_str(target.shape()) << " must be the input "
                                          << shape_str(scores.shape())
                                          << " without its last (class) dim; classes go on the LAST dim");
  detail::check_devices(op, {scores, target}, {"input", "target"});
  if (target.device().is_cpu()) {
    const int64_t C = scores.size(-1);
    for (int64_t t : target.to_i64_vector())
      REMORA_CHECK(t == ignore_index || (t >= 0 && t < C),
                   op << ": target " << t << " is outside [0, " << C << ") and is not ignore_index " << ignore_index);
  }
}

}  // namespace

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  check_pair("mse_loss", input, target);
  Tensor d = sub(input, target);
  return reduce(mul(d, d), reduction);
}

Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  check_pair("l1_loss", input, target);
  return reduce(abs(sub(input, target)), reduction);
}

Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, Reduction reduction, double beta) {
  check_pair("smooth_l1_loss", input, target);
  REMORA_CHECK(beta > 0, "smooth_l1_loss: beta must be > 0, got " << beta << " (beta = 0 is l1_loss)");
  Tensor d = sub(input, target);
  Tensor ad = abs(d);
  Tensor quad = mul(d, d) * (0.5 / beta);
  Tensor lin = ad - 0.5 * beta;
  Tensor small = lt(ad.detach(), Tensor::scalar(beta, ad.dtype(), ad.device()));
  return reduce(where(small, quad, lin), reduction);
}

Tensor nll_loss(const Tensor& log_probs, const Tensor& target, int64_t ignore_index, Reduction reduction) {
  check_class_target("nll_loss", log_probs, target, ignore_index);
  const int64_t C = log_probs.size(-1);
  // One-hot rows of the targets (all zero for ignore_index, which is never in [0, C)
  // once checked; a negative ignore_index matches no class either).
  Tensor onehot;
  {
    NoGradGuard ng;
    Tensor classes = Tensor::arange(0, double(C), 1, DType::i64, target.device());
    onehot = eq(target.unsqueeze(-1), classes).to(log_probs.dtype());
    if (ignore_index >= 0 && ignore_index < C)
      onehot = mul(onehot, ne(target, Tensor::scalar(double(ignore_index), DType::i64, target.device()))
                               .to(log_probs.dtype())
                               .unsqueeze(-1));
  }
  Tensor loss = neg(sum(mul(log_probs, onehot), {-1}));
  if (reduction == Reduction::none) return loss;
  if (reduction == Reduction::sum) return sum(loss);
  return divide_by_count(sum(loss), sum(onehot));
}

namespace detail {
Tensor cross_entropy_smoothed(const Tensor& logits, const Tensor& target, int64_t ignore_index,
                              Reduction reduction, double label_smoothing) {
  check_class_target("cross_entropy", logits, target, ignore_index);
  const int64_t C = logits.size(-1);
  Tensor nll = cross_entropy(logits, target, ignore_index, Reduction::none);  // 0 where ignored
  Tensor valid;
  {
    NoGradGuard ng;
    valid = ne(target, Tensor::scalar(double(ignore_index), DType::i64, target.device())).to(logits.dtype());
  }
  Tensor smooth = mul(neg(sum(log_softmax(logits, -1), {-1})), valid);
  Tensor loss = nll * (1 - label_smoothing) + smooth * (label_smoothing / double(C));
  if (reduction == Reduction::none) return loss;
  if (reduction == Reduction::sum) return sum(loss);
  return divide_by_count(sum(loss), sum(valid));
}
}  // namespace detail

}  // namespace remora
