// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// The hyperparameters of one fused Adam / AdamW step (ops/ops.h: adam_step_;
/// the kernels' argument struct AdamArgs in backends/kernels.h carries one).
/// A plain struct in core so that ops/ (and nn/ through it) and the backends
/// share it without ops/ exposing the kernel argument structs.
///
/// One Adam / AdamW step (torch.optim 1.13's rule) over n contiguous elements,
/// in place, in one pass:
/// \code
///   p *= 1 - decay                      (AdamW's decoupled decay, lr * wd; else 0)
///   g' = g + l2 * p                     (Adam's L2 term, wd; 0 for AdamW)
///   m = beta1 m + (1 - beta1) g',  v = beta2 v + (1 - beta2) g'^2
///   p -= step_size * m / (sqrt(v) / sqrt_bc2 + eps)
/// \endcode
/// (step_size = lr / (1 - beta1^t), sqrt_bc2 = sqrt(1 - beta2^t)), computed in
/// the tensors' dtype, as the composed ops do.
#pragma once

namespace remora {

/// The hyperparameters of one Adam / AdamW step at step count t (the rule is in
/// this file's description). optim::Adam and optim::AdamW fill one per parameter update.
struct AdamStep {
  /// \var decay
  /// Decoupled weight decay: p is scaled by 1 - decay (AdamW: lr * weight_decay; 0 for Adam).
  /// \var l2
  /// L2 coefficient: the gradient used is g + l2 * p (Adam: weight_decay; 0 for AdamW).
  /// \var beta1
  /// Decay rate of the first moment m (exp_avg); default 0.9.
  /// \var beta2
  /// Decay rate of the second moment v (exp_avg_sq); default 0.999.
  /// \var step_size
  /// lr / (1 - beta1^t): the learning rate with the first moment's bias correction.
  /// \var sqrt_bc2
  /// sqrt(1 - beta2^t): the second moment's bias correction (default 1: none).
  /// \var eps
  /// Added to sqrt(v) / sqrt_bc2 in the denominator; default 1e-8.
  double decay = 0, l2 = 0, beta1 = 0.9, beta2 = 0.999, step_size = 0, sqrt_bc2 = 1, eps = 1e-8;
};

}  // namespace remora
