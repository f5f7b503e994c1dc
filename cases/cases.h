// SPDX-License-Identifier: BSD-3-Clause
// The gradient-check and backend-check fixtures (static library remora_cases).
// The registry API (GradcheckCase, register_gradcheck, gradcheck_cases,
// gradcheck) is in ops/gradcheck.h; this library fills it. It is linked by the
// test suite and by the `remora` CLI (`remora gradcheck`), each of which calls
// register_all_cases() once: a static library's self-registering objects would
// be dropped by the linker, so the registration is explicit.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "../core/generator.h"
#include "../ops/gradcheck.h"

namespace remora::cases {

// Registers every case (idempotent; thread-compatible, call before threads).
void register_all_cases();

using Inputs = std::vector<Tensor>;

// What a case's recipe gets: the device and dtype to build on, and a
// generator seeded from the case name. Every draw is made in f64 on the CPU
// (the same values on every device; f32 is their rounding), then converted.
struct Maker {
  Maker(uint64_t seed, Device dev, DType dt) : g(seed), dev(dev), dt(dt) {}
  Generator g;
  Device dev;
  DType dt;

  // A leaf N(0,1) (or U[lo, hi) when lo < hi) that requires grad.
  Tensor leaf(const Shape& s, double lo = 0, double hi = 0);
  // The same, scaled by `scale` (N(0, scale^2)).
  Tensor scaled_leaf(const Shape& s, double scale);
  // A non-contiguous leaf of shape s: the transpose of a [s reversed] buffer
  // that lives on the device (so the device sees the strided view).
  Tensor strided_leaf(const Shape& s, double lo = 0, double hi = 0);
  // sign * U[0.2, 1.5): away from the kinks of relu and abs.
  Tensor away_from_zero(const Shape& s);
  // A constant (no grad) N(0,1) or U[lo, hi) tensor of the case dtype.
  Tensor value(const Shape& s, double lo = 0, double hi = 0);
  // Constants of the case dtype / i64 indices, on the device.
  Tensor floats(const std::vector<double>& v, const Shape& s);
  Tensor ids(const std::vector<int64_t>& v, const Shape& s);
  // Any CPU tensor moved to the device (floating ones converted to the dtype).
  Tensor on(const Tensor& cpu) const;
  // Makes t a leaf of the case that requires grad (t already on the device).
  static Tensor grad_leaf(const Tensor& t);
};

// Registers op/variant. make returns the inputs; fn is stateless.
void add(const std::string& op, const std::string& variant, std::function<Inputs(Maker&)> make,
         GradFn fn, GradcheckOptions opt = {}, bool backend_only = false, bool huge = false);
// Registers op/variant whose function holds state (a module) made with the inputs.
void add_instance(const std::string& op, const std::string& variant,
                  std::function<CaseInstance(Maker&)> make, GradcheckOptions opt = {},
                  bool backend_only = false);
// Registers a forward-only op/variant (GradcheckCase::differentiable = false):
// make returns inputs that do not require grad, fn (stateless) returns what
// [backends] compares, e.g. the tensors an in-place update wrote.
void add_forward_only(const std::string& op, const std::string& variant, std::function<Inputs(Maker&)> make,
                      GradFn fn);

// The parts of the registry (one file each).
void register_op_cases();         // op_cases.cpp: elementwise .. nn
void register_attention_cases();  // attention_cases.cpp: REM, gate, RSA
void register_sru_cases();        // sru_cases.cpp
void register_recurrent_cases();  // recurrent_cases.cpp: RNN, LSTM, RelRNN, RelLSTM
void register_starsaber_cases();  // starsaber_cases.cpp
void register_edge_cases();       // edge_cases.cpp: kernel edges (mostly backend-only)
void register_split_cases();      // split_cases.cpp: unbind, split, split_with_sizes
void register_optim_cases();      // optim_cases.cpp: the fused Adam/AdamW step (forward-only)
void register_adaptive_cases();   // adaptive_cases.cpp: the adaptive softmax
void register_loss_cases();       // loss_cases.cpp: mse, l1, smooth l1, nll, label-smoothed cross entropy
void register_api_cases();        // api_cases.cpp: gather, index, clamp, cumsum, topk, ...

}  // namespace remora::cases
