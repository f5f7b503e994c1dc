// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// bf16 autocast (docs/precision.md): a thread-local precision mode for the
/// matrix products, like torch.autocast(dtype=torch.bfloat16).
///
/// \code
///   {
///     AutocastGuard bf16(Precision::bf16);  // this thread's matmuls in bf16
///     Tensor loss = model.loss(batch);
///     loss.backward();                      // (backward follows the forward's mode anyway)
///   }
/// \endcode
///
/// Under Precision::bf16, matmul and linear on f32 tensors (and with them every
/// product built on them, e.g. the composed attention path's Q K^T and A V)
/// convert both operands to bf16 tensors, multiply them with f32 accumulation
/// into an f32 result, and keep the bf16 operands for backward (half the
/// memory of the f32 ones); backward converts the incoming gradient to bf16.
/// Everything else (softmax, layer norm, losses, reductions, elementwise ops),
/// parameters, gradients and the optimizer stay f32. f64 tensors are never
/// affected. The CPU runs bf16 products natively on AVX512_BF16 and converts
/// them to f32 products elsewhere; CUDA runs them on cuBLAS's bf16 gemm.
/// docs/precision.md lists what is stored in bf16 and what it saves.
#pragma once
#include <string>

namespace remora {

/// The precision of autocast matrix products: f32 (no autocast: products run
/// in their operands' dtype) or bf16 (matmul and linear convert f32 operands to
/// bf16 and accumulate in f32).
enum class Precision : unsigned char { f32, bf16 };

/// The name of p: "f32" or "bf16".
const char* precision_name(Precision p);  // "f32", "bf16"
/// Parses "f32" or "bf16"; anything else is an Error naming the allowed values.
Precision parse_precision(const std::string& s);

/// The calling thread's autocast precision (f32 unless a guard is active).
Precision autocast_precision();
/// Sets the calling thread's autocast precision until it is set again (prefer
/// AutocastGuard, which restores the previous one).
void set_autocast_precision(Precision p);

/// Sets the calling thread's autocast precision for its scope, restoring the
/// previous one on exit (guards nest). Not copyable.
class AutocastGuard {
 public:
  /// Saves the calling thread's precision and sets p.
  explicit AutocastGuard(Precision p) : prev_(autocast_precision()) { set_autocast_precision(p); }
  ~AutocastGuard() { set_autocast_precision(prev_); }
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  Precision prev_;
};

}  // namespace remora
