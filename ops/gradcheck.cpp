// SPDX-License-Identifier: BSD-3-Clause
#include "gradcheck.h"

#include <cmath>
#include <cstring>
#include <sstream>

#include "../core/autograd.h"
#include "../core/tensor_impl.h"

namespace remora {

namespace {

// Pointer to the logical (row-major) element i of a CPU f64 view.
double* element(const Tensor& t, int64_t i) {
  int64_t off = t.offset();
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    const int64_t n = t.shape()[size_t(d)];
    off += (i % n) * t.strides()[size_t(d)];
    i /= n;
  }
  return static_cast<double*>(t.impl()->storage->data) + off;
}

std::vector<double> flat(const Tensor& t, int64_t n) {
  if (!t.defined()) return std::vector<double>(size_t(n), 0.0);
  return t.to_vector();
}

}  // namespace

GradcheckResult gradcheck(const GradFn& f, const std::vector<Tensor>& inputs,
                          const GradcheckOptions& opt) {
  GradcheckResult res;
  std::vector<size_t> wrt;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& x = inputs[i];
    if (!x.defined() || !x.requires_grad()) continue;
    REMORA_CHECK(x.dtype() == DType::f64 && x.is_leaf() && x.device().is_cpu(),
                 "gradcheck: input " << i << " must be an f64 cpu leaf, got " << x.str());
    wrt.push_back(i);
  }
  REMORA_CHECK(!wrt.empty(), "gradcheck: no input requires grad");

  Tensor out = f(inputs);
  REMORA_CHECK(out.dtype() == DType::f64, "gradcheck: output must be f64, got " << out.str());
  const int64_t n_out = out.numel();

  // Analytic Jacobian: row k of J holds d out[k] / d inputs, one backward each.
  std::vector<std::vector<std::vector<double>>> ja(wrt.size());  // [input][elem][k]
  for (size_t w = 0; w < wrt.size(); ++w)
    ja[w].assign(size_t(inputs[wrt[w]].numel()), std::vector<double>(size_t(n_out), 0.0));
  for (int64_t k = 0; k < n_out; ++k) {
    for (size_t w : wrt) inputs[w].impl()->grad = Tensor();
    Tensor onehot = Tensor::zeros(out.shape(), DType::f64);
    onehot.data_ptr<double>()[k] = 1.0;
    out.backward(onehot, /*retain_graph=*/true);
    for (size_t w = 0; w < wrt.size(); ++w) {
      const Tensor& x = inputs[wrt[w]];
      const std::vector<double> g = flat(x.grad(), x.numel());
      for (size_t e = 0; e < g.size(); ++e) ja[w][e][size_t(k)] = g[e];
    }
  }
  // Determinism: a second backward of a fresh graph gives the same bits.
  if (opt.check_determinism && n_out > 0) {
    Tensor probe = Tensor::zeros(out.shape(), DType::f64);
    for (int64_t k = 0; k < n_out; ++k) probe.data_ptr<double>()[k] = 1.0 + 0.001 * double(k);
    std::vector<std::vector<double>> first;
    for (int rep = 0; rep < 2; ++rep) {
      for (size_t w : wrt) inputs[w].impl()->grad = Tensor();
      f(inputs).backward(probe);
      for (size_t w = 0; w < wrt.size(); ++w) {
        const Tensor& x = inputs[wrt[w]];
        std::vector<double> g = flat(x.grad(), x.numel());
        if (rep == 0) {
          first.push_back(g);
        } else if (!g.empty() &&  // an empty input: memcmp must not see null pointers
                   std::memcmp(g.data(), first[w].data(), g.size() * sizeof(double)) != 0) {
          res.ok = false;
          res.message = "backward is not deterministic: two runs gave different gradients for "
                        "input " + std::to_string(wrt[w]);
          return res;
        }
      }
    }
  }
  for (size_t w : wrt) inputs[w].impl()->grad = Tensor();

  // Numeric Jacobian by central differences, compared entry by entry.
  NoGradGuard ng;
  for (size_t w = 0; w < wrt.size(); ++w) {
    const Tensor& x = inputs[wrt[w]];
    for (int64_t e = 0; e < x.numel(); ++e) {
      double* p = element(x, e);
      const double orig = *p;
      *p = orig + opt.eps;
      const std::vector<double> plus = f(inputs).to_vector();
      *p = orig - opt.eps;
      const std::vector<double> minus = f(inputs).to_vector();
      *p = orig;
      for (int64_t k = 0; k < n_out; ++k) {
        const double num = (plus[size_t(k)] - minus[size_t(k)]) / (2 * opt.eps);
        const double ana = ja[w][size_t(e)][size_t(k)];
        const double err = std::fabs(ana - num);
        ++res.entries;
        res.max_abs_err = std::max(res.max_abs_err, err);
        if (!(err <= opt.atol + opt.rtol * std::fabs(num)) && res.ok) {
          res.ok = false;
          std::ostringstream os;
          os << "input " << wrt[w] << " " << x.str() << ", element " << e << ", output " << k
             << ": analytic " << ana << " vs numeric " << num << " (|diff| " << err << ")";
          res.message = os.str();
        }
      }
    }
  }
  return res;
}

namespace {
std::vector<GradcheckCase>& registry() {
  static std::vector<GradcheckCase> r;
  return r;
}
}  // namespace

void register_gradcheck(GradcheckCase c) {
  REMORA_CHECK(!c.op.empty() && !c.name.empty() && c.make, "register_gradcheck: a case needs op, name and make");
  for (const GradcheckCase& o : registry())
    REMORA_CHECK(o.name != c.name, "register_gradcheck: case '" << c.name << "' is registered twice");
  registry().push_back(std::move(c));
}

const std::vector<GradcheckCase>& gradcheck_cases() { return registry(); }

const std::vector<OpRow>& op_table() {
#define REMORA_OP_CHECK_gradcheck OpCheck::gradcheck, ""
#define REMORA_OP_CHECK_forward_case OpCheck::forward_case, ""
#define REMORA_OP_CHECK_no_case(why) OpCheck::no_case, why
#define REMORA_OP_ROW(name, header, method, check) OpRow{#name, header, method, REMORA_OP_CHECK_##check},
#define REMORA_FUNCTION(Ret, name, params, check) REMORA_OP_ROW(name, "ops/ops.def", false, check)
#define REMORA_METHOD(Ret, name, params, method_params, call, check) REMORA_OP_ROW(name, "ops/ops.def", true, check)
#define REMORA_DECLARED_IN(name, header, check) REMORA_OP_ROW(name, header, false, check)
  static const std::vector<OpRow> rows = {
#include "ops.def"
  };
#undef REMORA_FUNCTION
#undef REMORA_METHOD
#undef REMORA_DECLARED_IN
#undef REMORA_OP_ROW
  return rows;
}

GradcheckResult gradcheck(const GradcheckCase& c) {
  REMORA_CHECK(!c.backend_only, "gradcheck: case '" << c.name << "' is backend-only (no float64 Jacobian)");
  REMORA_CHECK(c.differentiable, "gradcheck: case '" << c.name << "' is forward-only (not differentiable)");
  CaseInstance inst = c.make(Device::cpu(), DType::f64);
  return gradcheck(inst.fn, inst.inputs, c.options);
}

}  // namespace remora
