// Float64 gradient checks (SPEC §10): the full analytic Jacobian, one backward
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

// The registry behind `remora gradcheck` and the test suite: every
// differentiable op registers one or more cases.
struct GradcheckCase {
  std::string op;    // "matmul"
  std::string name;  // "matmul/broadcast_batch"
  std::function<std::vector<Tensor>()> make_inputs;  // fresh f64 leaves
  GradFn fn;
  GradcheckOptions options;
};
void register_gradcheck(GradcheckCase c);
const std::vector<GradcheckCase>& gradcheck_cases();

}  // namespace remora
