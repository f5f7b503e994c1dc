// SPDX-License-Identifier: BSD-3-Clause
// Maker's draws, the add helpers and register_all_cases (see cases.h).
#include "cases.h"

#include "../ops/ops.h"

namespace remora::cases {

namespace {

Tensor draw(Generator& g, const Shape& s, double lo, double hi) {
  return lo < hi ? Tensor::rand(s, DType::f64, Device::cpu(), &g) * (hi - lo) + lo
                 : Tensor::randn(s, DType::f64, Device::cpu(), &g);
}

}  // namespace

Tensor Maker::on(const Tensor& cpu) const {
  Tensor t = cpu.detach();
  if (t.dtype() == DType::f32 || t.dtype() == DType::f64) t = t.to(dt);
  return t.to(dev).detach();
}

Tensor Maker::grad_leaf(const Tensor& t) { return t.detach().requires_grad_(); }

Tensor Maker::leaf(const Shape& s, double lo, double hi) { return grad_leaf(on(draw(g, s, lo, hi))); }

Tensor Maker::scaled_leaf(const Shape& s, double scale) {
  return grad_leaf(on(Tensor::randn(s, DType::f64, Device::cpu(), &g) * scale));
}

Tensor Maker::strided_leaf(const Shape& s, double lo, double hi) {
  Shape rev(s.rbegin(), s.rend()), perm;
  for (int64_t i = int64_t(s.size()) - 1; i >= 0; --i) perm.push_back(i);
  return grad_leaf(on(draw(g, rev, lo, hi)).permute(perm));
}

Tensor Maker::away_from_zero(const Shape& s) {
  Tensor mag = Tensor::rand(s, DType::f64, Device::cpu(), &g) * 1.3 + 0.2;
  Tensor sign = Tensor::rand(s, DType::f64, Device::cpu(), &g);
  return grad_leaf(on(where(gt(sign, Tensor::scalar(0.5, DType::f64)), mag, neg(mag))));
}

Tensor Maker::value(const Shape& s, double lo, double hi) { return on(draw(g, s, lo, hi)); }

Tensor Maker::floats(const std::vector<double>& v, const Shape& s) {
  return on(Tensor::from_vector(v, s, DType::f64));
}

Tensor Maker::ids(const std::vector<int64_t>& v, const Shape& s) {
  return on(Tensor::from_vector(v, s, DType::i64));
}

namespace {
GradcheckCase stateless_case(const std::string& op, const std::string& variant,
                             std::function<Inputs(Maker&)> make, GradFn fn) {
  const std::string name = op + "/" + variant;
  const uint64_t seed = std::hash<std::string>{}(name);
  GradcheckCase c;
  c.op = op;
  c.name = name;
  c.make = [make, fn, seed](Device dev, DType dt) {
    Maker m(seed, dev, dt);
    return CaseInstance{make(m), fn};
  };
  return c;
}
}  // namespace

void add(const std::string& op, const std::string& variant, std::function<Inputs(Maker&)> make,
         GradFn fn, GradcheckOptions opt, bool backend_only, bool huge) {
  GradcheckCase c = stateless_case(op, variant, std::move(make), std::move(fn));
  c.options = opt;
  c.backend_only = backend_only;
  c.huge = huge;
  register_gradcheck(std::move(c));
}

void add_forward_only(const std::string& op, const std::string& variant, std::function<Inputs(Maker&)> make,
                      GradFn fn) {
  GradcheckCase c = stateless_case(op, variant, std::move(make), std::move(fn));
  c.differentiable = false;
  register_gradcheck(std::move(c));
}

void add_instance(const std::string& op, const std::string& variant,
                  std::function<CaseInstance(Maker&)> make, GradcheckOptions opt, bool backend_only) {
  const std::string name = op + "/" + variant;
  const uint64_t seed = std::hash<std::string>{}(name);
  GradcheckCase c;
  c.op = op;
  c.name = name;
  c.make = [make, seed](Device dev, DType dt) {
    Maker m(seed, dev, dt);
    return make(m);
  };
  c.options = opt;
  c.backend_only = backend_only;
  register_gradcheck(std::move(c));
}

void register_all_cases() {
  static const bool once = [] {
    register_attention_cases();
    register_op_cases();
    register_sru_cases();
    register_starsaber_cases();
    register_recurrent_cases();
    register_edge_cases();
    register_split_cases();
    register_optim_cases();
    register_adaptive_cases();
    register_loss_cases();
    register_api_cases();
    return true;
  }();
  (void)once;
}

}  // namespace remora::cases
