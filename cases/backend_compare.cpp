// SPDX-License-Identifier: BSD-3-Clause
// Cross-backend comparison of registry cases (see backend_compare.h).
#include "backend_compare.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <sstream>

#include "../backends/backend.h"
#include "../core/generator.h"

namespace remora::cases {

namespace {

constexpr int64_t kChunk = int64_t(1) << 22;  // elements converted to host doubles at a time

// Calls fn on each chunk of t's logical elements as host doubles.
template <typename F>
void for_chunks(const Tensor& t, F fn) {
  const Tensor flat = t.reshape({-1});
  const int64_t n = flat.numel();
  for (int64_t a = 0; a < n; a += kChunk) {
    const int64_t b = std::min(n, a + kChunk);
    fn(a, flat.slice(0, a, b).to(Device::cpu()).to_vector());
  }
}

double max_abs(const Tensor& t) {
  double m = 0;
  for_chunks(t, [&](int64_t, const std::vector<double>& v) {
    for (double x : v)
      if (std::isfinite(x)) m = std::max(m, std::fabs(x));
  });
  return m;
}

// Compares one tensor pair into r; `what` names it in messages.
void compare_tensor(const Tensor& ref, const Tensor& got, const Tol& tol, const std::string& what,
                    CompareResult& r) {
  ++r.tensors;
  if (ref.shape() != got.shape()) {
    r.ok = false;
    r.message += what + ": shape " + got.str() + " vs reference " + ref.str() + "\n";
    return;
  }
  const double scale = std::max(1.0, max_abs(ref));
  // Both sides in chunks: ref and got are walked in step.
  const Tensor rf = ref.reshape({-1}), gf = got.reshape({-1});
  const int64_t n = rf.numel();
  int64_t bad = 0;
  std::ostringstream first;
  for (int64_t a = 0; a < n; a += kChunk) {
    const int64_t b = std::min(n, a + kChunk);
    const std::vector<double> w = rf.slice(0, a, b).to(Device::cpu()).to_vector();
    const std::vector<double> g = gf.slice(0, a, b).to(Device::cpu()).to_vector();
    for (size_t i = 0; i < w.size(); ++i) {
      ++r.elements;
      if (std::isnan(w[i]) && std::isnan(g[i])) continue;
      if (std::isinf(w[i]) && g[i] == w[i]) continue;
      const double err = std::fabs(g[i] - w[i]);
      const double allowed = tol.atol * scale + tol.rtol * std::fabs(w[i]);
      const double ratio = allowed > 0 ? err / allowed : (err == 0 ? 0 : INFINITY);
      if (!(ratio <= 1)) {
        if (bad < 4)
          first << "\n    [" << (a + int64_t(i)) << "] got " << g[i] << ", reference " << w[i] << " (|diff| "
                << err << ", allowed " << allowed << ")";
        ++bad;
      }
      if (!std::isnan(ratio)) r.worst = std::max(r.worst, ratio);
      else r.worst = INFINITY;
    }
  }
  if (bad) {
    r.ok = false;
    r.message += what + ": " + std::to_string(bad) + " of " + std::to_string(n) + " elements differ" + first.str() +
                 "\n";
  }
}

Tensor grad_or_zeros(const Tensor& x) {
  const Tensor g = x.grad();
  return g.defined() ? g : Tensor::zeros(x.shape(), x.dtype(), x.device());
}

}  // namespace

CompareResult compare_instances(const CaseInstance& ref, const CaseInstance& got, const Tol& tol) {
  CompareResult r;
  if (ref.inputs.size() != got.inputs.size()) {
    r.ok = false;
    r.message = "the instances have different input counts";
    return r;
  }
  Tensor out_ref, out_got;
  try {
    out_ref = ref.fn(ref.inputs);
  } catch (const std::exception& e) {
    r.ok = false;
    r.message = std::string("the reference threw: ") + e.what();
    return r;
  }
  try {
    out_got = got.fn(got.inputs);
  } catch (const std::exception& e) {
    r.ok = false;
    r.message = std::string("threw: ") + e.what();
    return r;
  }
  compare_tensor(out_ref, out_got, tol, "output", r);
  if (!r.ok || !out_ref.requires_grad()) return r;
  if (!out_got.requires_grad()) {
    r.ok = false;
    r.message += "output: the reference requires grad, this one does not\n";
    return r;
  }
  // The same upstream gradient for both: N(0, 1) drawn in f64 on the CPU.
  Generator g(4242);
  const Tensor w = Tensor::randn(out_ref.shape(), DType::f64, Device::cpu(), &g);
  try {
    out_ref.backward(w.to(out_ref.dtype()).to(out_ref.device()));
  } catch (const std::exception& e) {
    r.ok = false;
    r.message = std::string("the reference's backward threw: ") + e.what();
    return r;
  }
  try {
    out_got.backward(w.to(out_got.dtype()).to(out_got.device()));
  } catch (const std::exception& e) {
    r.ok = false;
    r.message = std::string("backward threw: ") + e.what();
    return r;
  }
  for (size_t i = 0; i < ref.inputs.size(); ++i) {
    const Tensor& a = ref.inputs[i];
    const Tensor& b = got.inputs[i];
    if (!a.defined() || !a.requires_grad()) continue;
    if (!b.defined() || !b.requires_grad()) {
      r.ok = false;
      r.message += "input " + std::to_string(i) + ": does not require grad here\n";
      continue;
    }
    compare_tensor(grad_or_zeros(a), grad_or_zeros(b), tol, "gradient of input " + std::to_string(i), r);
  }
  return r;
}

CompareResult compare_case(const GradcheckCase& c, Device dev, DType dt, const Tol& tol, Device ref_dev,
                           DType ref_dt) {
  CaseInstance ref, got;
  try {
    ref = c.make(ref_dev, ref_dt);
  } catch (const std::exception& e) {
    CompareResult r;
    r.ok = false;
    r.message = std::string("building the reference threw: ") + e.what();
    return r;
  }
  try {
    got = c.make(dev, dt);
  } catch (const std::exception& e) {
    CompareResult r;
    r.ok = false;
    r.message = std::string("building it on ") + dev.str() + " threw: " + e.what();
    return r;
  }
  return compare_instances(ref, got, tol);
}

std::vector<Device> accelerators(std::string* why) {
  std::vector<Device> out;
  std::string first_why;
  for (int i = 0; i < 64; ++i) {
    std::string w;
    if (!cuda_is_available(i, &w)) {
      if (i == 0) first_why = w;
      break;
    }
    out.push_back(Device::cuda(i));
  }
  if (why) *why = out.empty() ? first_why : std::string();
  return out;
}

}  // namespace remora::cases
