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

}  // namespace remora
