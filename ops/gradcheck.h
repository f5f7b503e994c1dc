// SPDX-License-Identifier: BSD-3-Clause
// Float64 gradient checks (docs/math.md#gradient-checks): the full analytic Jacobian, one backward
// per output element, against central differences, one pair of forwards per
// input element. Pass when |analytic - numeric| <= atol + rtol * |numeric|.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "../core/tensor.h"

namespace remora {

using GradFn = std::function<Tensor(const std::vector<Tensor>&)>;

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-3;
  bool check_determinism = true;  // a second backward must give identical bits
};

struct GradcheckResult {
  bool ok = true;
  double max_abs_err = 0;      // over all Jacobian entries
  int64_t entries = 0;         // Jacobian entries compared
  std::string message;         // the first mismatch, or why it failed
};

// Inputs that require grad are checked; they must be f64 leaves (may be
// non-contiguous views). f must be deterministic.
GradcheckResult gradcheck(const GradFn& f, const std::vector<Tensor>& inputs,
                          const GradcheckOptions& opt = {});

// The registry behind `remora gradcheck`, the test suite's float64 Jacobian
// checks ([gradcheck]) and the cross-backend checks ([backends]). A case is a
// recipe that can be instantiated on any (device, dtype): its make() draws the
// same values everywhere (in f64 on the CPU from the case's seed, then
// converted), puts every tensor the function needs on that device as an input
// (non-differentiable ones too: indices, masks, constants) and returns the
// function, which may hold state made for these inputs (a module whose
// parameters are among the inputs). The cases themselves live outside the
// library (ops/cases/, static library remora_cases; call
// cases::register_all_cases() once before reading the registry).
struct CaseInstance {
  std::vector<Tensor> inputs;  // leaves that require grad are the checked ones
  GradFn fn;
};

struct GradcheckCase {
  std::string op;    // "matmul"
  std::string name;  // "matmul/broadcast_batch"
  std::function<CaseInstance(Device, DType)> make;
  GradcheckOptions options;
  // Too large for a float64 Jacobian (or a kernel edge that only a device
  // kernel has): [backends] compares it across devices, gradcheck skips it.
  bool backend_only = false;
  // False for a forward-only case: a function that is not differentiable (an
  // in-place update such as the fused optimizer step, whose inputs do not
  // require grad). [backends] compares its output across devices; gradcheck
  // skips it.
  bool differentiable = true;
  // Over 2^31 elements: only run against a non-CPU device, in f32, and only
  // where the device can hold it ([backends] skips it with a WARN otherwise).
  bool huge = false;
};
void register_gradcheck(GradcheckCase c);
const std::vector<GradcheckCase>& gradcheck_cases();
// The float64 Jacobian check of one case on the CPU (an Error for a
// backend_only or forward-only case).
GradcheckResult gradcheck(const GradcheckCase& c);

}  // namespace remora
