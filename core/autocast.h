// bf16 autocast (docs/precision.md): a thread-local precision mode for the
// matrix products, like torch.autocast(dtype=torch.bfloat16).
//
//   {
//     AutocastGuard bf16(Precision::bf16);  // this thread's matmuls in bf16
//     Tensor loss = model.loss(batch);
//     loss.backward();                      // (backward follows the forward's mode anyway)
//   }
//
// Under Precision::bf16, matmul and linear on f32 tensors (and with them every
// product built on them, e.g. the composed attention path's Q K^T and A V)
// round both operands to bf16 (round to nearest even) and multiply them with
// f32 accumulation; their backward rounds the incoming gradient and the saved
// operands the same way. Results, parameters, gradients and the optimizer stay
// f32: storage is f32 throughout (no memory saving). f64 tensors are never
// affected. On the CPU this is an emulation (same numerics, no speedup); on
// CUDA the rounded operands run on TF32 tensor cores, which represent bf16
// values exactly.
#pragma once
#include <string>

namespace remora {

enum class Precision : unsigned char { f32, bf16 };

const char* precision_name(Precision p);  // "f32", "bf16"
// "f32" or "bf16"; anything else is an Error naming the allowed values.
Precision parse_precision(const std::string& s);

// The calling thread's autocast precision (f32 unless a guard is active).
Precision autocast_precision();
void set_autocast_precision(Precision p);

// Sets the calling thread's autocast precision for its scope, restoring the
// previous one on exit (guards nest).
class AutocastGuard {
 public:
  explicit AutocastGuard(Precision p) : prev_(autocast_precision()) { set_autocast_precision(p); }
  ~AutocastGuard() { set_autocast_precision(prev_); }
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  Precision prev_;
};

}  // namespace remora
