// SPDX-License-Identifier: BSD-3-Clause
// Cross-backend comparison of registry cases ([backends], tests/test_backends.cpp):
// one case instantiated twice (say CPU f64, the reference, and cuda:0 f32),
// run forward, then backward with the same upstream gradient; the output and
// the gradient of every input that requires grad are compared elementwise.
#pragma once
#include <string>
#include <vector>

#include "../ops/gradcheck.h"

namespace remora::cases {

// Element passes when |got - ref| <= atol * max(1, max|ref|) + rtol * |ref|:
// rtol bounds the relative error of each element, atol the error relative to
// the tensor's scale (where cancellation leaves an element near zero). NaN
// passes only against NaN, an infinity only against the same infinity.
struct Tol {
  double rtol = 0;
  double atol = 0;
};

struct CompareResult {
  bool ok = true;
  int64_t tensors = 0;   // output + gradients compared
  int64_t elements = 0;  // elements compared in all of them
  double worst = 0;      // max of |got - ref| / allowed over all elements: < 1 passes
  std::string message;   // the failures (first few elements of each), or what threw
};

// Compares got against ref (instances of one case, any devices and dtypes).
CompareResult compare_instances(const CaseInstance& ref, const CaseInstance& got, const Tol& tol);

// Instantiates c on (ref_dev, ref_dt) and on (dev, dt) and compares them.
CompareResult compare_case(const GradcheckCase& c, Device dev, DType dt, const Tol& tol,
                           Device ref_dev = Device::cpu(), DType ref_dt = DType::f64);

// The usable non-CPU devices (cuda:0, cuda:1, ...); when none, *why says why.
std::vector<Device> accelerators(std::string* why = nullptr);

}  // namespace remora::cases
