// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// Float64 gradient checks (docs/math.md, section Gradient checks): the full
/// analytic Jacobian, one backward per output element, against central
/// differences, one pair of forwards per input element. Pass when
/// |analytic - numeric| <= atol + rtol * |numeric|. CPU only.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "../core/tensor.h"

namespace remora {

/// The function under test: the inputs in, one f64 tensor (any shape) out.
using GradFn = std::function<Tensor(const std::vector<Tensor>&)>;

/// Tolerances of a gradient check.
struct GradcheckOptions {
  double eps = 1e-6;   ///< Step of the central differences (x +- eps).
  double atol = 1e-5;  ///< Absolute tolerance per Jacobian entry.
  double rtol = 1e-3;  ///< Relative tolerance, times |numeric|.
  bool check_determinism = true;  ///< A second backward must give identical bits.
};

/// The outcome of a gradient check.
struct GradcheckResult {
  bool ok = true;              ///< Every entry within tolerance (and deterministic when checked).
  double max_abs_err = 0;      ///< Largest |analytic - numeric| over all Jacobian entries.
  int64_t entries = 0;         ///< Jacobian entries compared.
  std::string message;         ///< The first mismatch, or why it failed; empty when ok.
};

/// Checks f's gradients with respect to every input that requires grad; those
/// must be f64 CPU leaves (may be non-contiguous views), else an Error, and at
/// least one is required. The other inputs are passed through unchanged. f
/// must be deterministic and return an f64 tensor. The check overwrites the
/// checked inputs' grad (and leaves it cleared when it runs to the end).
GradcheckResult gradcheck(const GradFn& f, const std::vector<Tensor>& inputs,
                          const GradcheckOptions& opt = {});

/// \name The case registry
/// The registry behind `remora gradcheck`, the test suite's float64 Jacobian
/// checks ([gradcheck]) and the cross-backend checks ([backends]). A case is a
/// recipe that can be instantiated on any (device, dtype): its make() draws the
/// same values everywhere (in f64 on the CPU from the case's seed, then
/// converted), puts every tensor the function needs on that device as an input
/// (non-differentiable ones too: indices, masks, constants) and returns the
/// function, which may hold state made for these inputs (a module whose
/// parameters are among the inputs). The cases themselves live outside the
/// library (cases/, static library remora_cases; call
/// cases::register_all_cases() once before reading the registry).
/// @{

/// One instantiation of a case: the inputs and the function of them.
struct CaseInstance {
  std::vector<Tensor> inputs;  ///< Leaves that require grad are the checked ones.
  GradFn fn;                   ///< The function under test, called with inputs.
};

/// A registered case: a recipe for a CaseInstance on any (device, dtype).
struct GradcheckCase {
  std::string op;    ///< The op it exercises, e.g. "matmul".
  std::string name;  ///< Unique name, op/variant, e.g. "matmul/broadcast_batch".
  std::function<CaseInstance(Device, DType)> make;  ///< Builds the inputs and function on a device, in a dtype.
  GradcheckOptions options;  ///< Tolerances for the float64 check.
  /// Too large for a float64 Jacobian (or a kernel edge that only a device
  /// kernel has): [backends] compares it across devices, gradcheck skips it.
  bool backend_only = false;
  /// False for a forward-only case: a function that is not differentiable (an
  /// in-place update such as the fused optimizer step, whose inputs do not
  /// require grad). [backends] compares its output across devices; gradcheck
  /// skips it.
  bool differentiable = true;
  /// Over 2^31 elements: only run against a non-CPU device, in f32, and only
  /// where the device can hold it ([backends] skips it with a WARN otherwise).
  bool huge = false;
};
/// Adds a case; it needs op, name and make, and a name registered twice is an Error.
void register_gradcheck(GradcheckCase c);
/// Every registered case, in registration order.
const std::vector<GradcheckCase>& gradcheck_cases();
/// The float64 Jacobian check of one case on the CPU (an Error for a
/// backend_only or forward-only case).
GradcheckResult gradcheck(const GradcheckCase& c);

/// What the registry must hold for one op of the op table (ops/ops.def).
enum class OpCheck {
  gradcheck,     ///< a case named after the op that checks its gradient
  forward_case,  ///< a forward-only case (the op has no gradient)
  no_case,       ///< no case, for the reason given in the row
};
/// One row of the op table, as the registry-coverage test reads it.
struct OpRow {
  const char* name;        ///< The op's function name (overloads share one row each).
  const char* declared_in; ///< The header that declares it ("ops/ops.def" for the table's own rows).
  bool method;             ///< Whether it is a Tensor method too.
  OpCheck check;           ///< What the registry must hold.
  const char* why_no_case; ///< The reason, for OpCheck::no_case ("" otherwise).
};
/// Every row of the op table, in its order.
const std::vector<OpRow>& op_table();
/// @}

}  // namespace remora
