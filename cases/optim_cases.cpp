// SPDX-License-Identifier: BSD-3-Clause
// The fused optimizer step (ops::adam_step_, the OptimKernels table of
// backends/kernels.h): not differentiable, an in-place update, so these cases
// are forward-only (GradcheckCase::differentiable = false): [backends] compares
// the updated parameter and state across devices, gradcheck skips them.
#include <cmath>

#include "../core/error.h"
#include "../ops/ops.h"
#include "cases.h"

namespace remora::cases {

namespace {

struct AdamCase {
  double lr = 1e-2, wd = 0;
  bool decoupled = false;  // AdamW
  double eps = 1e-8;
  int steps = 3;
  int first_step = 5;  // bias corrections of steps first_step .. first_step + steps - 1
};

// Inputs: p [n], g [steps, n] (one gradient per step), m [n], v [n] > 0 (a
// state from earlier steps). The function updates copies of p, m, v through
// the fused kernel (an Error where the device has none: the case is there to
// reach it) and returns them with the update p - p0, whose small entries the
// comparison of p alone would hide under p's scale.
Inputs adam_inputs(Maker& m, int64_t n, int steps) {
  return Inputs{m.value({n}), m.value({steps, n}), m.on(Tensor::randn({n}, DType::f64, Device::cpu(), &m.g) * 0.1), m.value({n}, 0.01, 1.0)};
}

GradFn adam_fn(AdamCase c) {
  return [c](const Inputs& x) {
    const Tensor p0 = x[0];
    Tensor p = x[0].clone(), m = x[2].clone(), v = x[3].clone();
    const double beta1 = 0.9, beta2 = 0.999;
    for (int s = 0; s < c.steps; ++s) {
      const double t = c.first_step + s;
      AdamStep st;  // as nn::Adam::update builds it
      st.decay = c.decoupled ? c.lr * c.wd : 0;
      st.l2 = c.decoupled ? 0 : c.wd;
      st.beta1 = beta1;
      st.beta2 = beta2;
      st.step_size = c.lr / (1 - std::pow(beta1, t));
      st.sqrt_bc2 = std::sqrt(1 - std::pow(beta2, t));
      st.eps = c.eps;
      REMORA_CHECK(adam_step_(p, x[1].select(0, s), m, v, st),
                   "adam_step_: no fused Adam kernel took the step on " << p.device().str() << " in "
                                                                   << dtype_name(p.dtype()));
    }
    return cat({p, m, v, p - p0}, 0);
  };
}

void add_adam(const std::string& variant, int64_t n, AdamCase c) {
  add_forward_only("adam_step_", variant, [n, c](Maker& m) { return adam_inputs(m, n, c.steps); },
                   adam_fn(c));
}

}  // namespace

void register_optim_cases() {
  // Adam: L2 weight decay on the gradient.
  add_adam("adam_l2_n1", 1, {1e-2, 0.1, false});
  add_adam("adam_l2_n37", 37, {1e-2, 0.1, false});
  add_adam("adam_l2_n1000", 1000, {1e-2, 0.1, false, 1e-6, 4, 1});
  add_adam("adam_no_decay_n37", 37, {3e-2, 0, false, 1e-3, 2, 1});
  // AdamW: decoupled decay of the weights.
  add_adam("adamw_n1", 1, {1e-2, 0.1, true});
  add_adam("adamw_n37", 37, {1e-2, 0.1, true, 1e-8, 3, 1});
  add_adam("adamw_n1000", 1000, {1e-2, 0.01, true, 1e-6, 4, 100});
}

}  // namespace remora::cases
