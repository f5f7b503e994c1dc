// SPDX-License-Identifier: BSD-3-Clause
#include "optim.h"

#include <cmath>
#include <algorithm>
#include <set>

#include "../core/autograd.h"
#include "../ops/ops.h"

namespace remora {
namespace optim {

// ---- Optimizer ----

OptimizerOptions& OptimizerParamGroup::options() {
  REMORA_CHECK(options_ != nullptr, "OptimizerParamGroup::options: this group has no options yet (a group "
                                    "takes the optimizer's defaults when it is added to one)");
  return *options_;
}

const OptimizerOptions& OptimizerParamGroup::options() const {
  return const_cast<OptimizerParamGroup*>(this)->options();
}

namespace {
// The Adam family's state of p ("step", "exp_avg", "exp_avg_sq"), made on its
// first update; counts the update and returns the new step number t.
double adam_state_step(const Tensor& p, std::map<std::string, Tensor>& st) {
  if (st.empty()) {
    st["step"] = Tensor::scalar(0, DType::f64);
    st["exp_avg"] = Tensor::zeros(p.shape(), p.dtype(), p.device());
    st["exp_avg_sq"] = Tensor::zeros(p.shape(), p.dtype(), p.device());
  }
  Tensor& t = st["step"];
  const double step = t.item() + 1;
  t.fill_(step);
  return step;
}

void check_param(const Tensor& p, size_t i, std::set<const void*>& seen) {
  REMORA_CHECK(p.defined(), "optimizer: parameter " << i << " is undefined");
  REMORA_CHECK(is_floating(p.dtype()),
               "optimizer: parameter " << i << " must be floating, got " << p.str());
  REMORA_CHECK(p.is_leaf(), "optimizer: parameter " << i << " (" << p.str()
                                                     << ") is not a leaf; optimize the leaf "
                                                        "tensors (module->parameters())");
  REMORA_CHECK(seen.insert(p.impl()).second,
               "optimizer: parameter " << i << " appears more than once in the list (or in two groups)");
}
}  // namespace

Optimizer::Optimizer(std::vector<Tensor> params, double lr)
    : Optimizer(std::vector<OptimizerParamGroup>{OptimizerParamGroup(std::move(params))}, lr) {}

Optimizer::Optimizer(std::vector<OptimizerParamGroup> groups, double lr) : groups_(std::move(groups)), lr_(lr) {
  REMORA_CHECK(lr >= 0, "optimizer: lr must be >= 0, got " << lr);
  std::set<const void*> seen;
  for (size_t k = 0; k < groups_.size(); ++k)
    for (const Tensor& p : groups_[k].params()) {
      check_param(p, params_.size(), seen);
      params_.push_back(p);
      group_of_.push_back(k);
    }
  state_.resize(params_.size());
}

void Optimizer::set_defaults(const OptimizerOptions& defaults) {
  defaults_ = defaults.clone();
  if (groups_.empty()) groups_.emplace_back(std::vector<Tensor>{});
  for (auto& g : groups_) {
    if (!g.has_options()) g.set_options(defaults_->clone());
    apply_options(g.options());  // checks the group's values
  }
  apply_options(groups_[0].options());
}

const OptimizerOptions& Optimizer::defaults() const {
  REMORA_CHECK(defaults_ != nullptr, type_name() << ": no default options");
  return *defaults_;
}

void Optimizer::apply_options(const OptimizerOptions& o) {
  REMORA_CHECK(o.get_lr() >= 0, type_name() << ": lr must be >= 0, got " << o.get_lr());
  lr_ = o.get_lr();
}

void Optimizer::add_param_group(const OptimizerParamGroup& group) {
  std::set<const void*> seen;
  for (const Tensor& p : params_) seen.insert(p.impl());
  size_t i = params_.size();
  for (const Tensor& p : group.params()) check_param(p, i++, seen);
  OptimizerParamGroup g = group;
  if (!g.has_options()) g.set_options(defaults().clone());
  apply_options(g.options());  // checks it
  apply_options(groups_[0].options());
  for (const Tensor& p : g.params()) {
    params_.push_back(p);
    group_of_.push_back(groups_.size());
    state_.emplace_back();
  }
  groups_.push_back(std::move(g));
}

void Optimizer::set_lr(double lr) {
  REMORA_CHECK(lr >= 0, type_name() << "::set_lr: lr must be >= 0, got " << lr);
  lr_ = lr;
  for (auto& g : groups_)
    if (g.has_options()) g.options().set_lr(lr);
}

void Optimizer::zero_grad() {
  for (Tensor& p : params_) p.zero_grad();
}

void Optimizer::step() {
  NoGradGuard no_grad;
  ++step_count_;
  // Each group's options are loaded into the rule's members for its parameters;
  // the first group's are put back afterwards (also when an update throws). A
  // group whose options fail their check throws its Error from apply_options;
  // putting back an invalid first group here then fails too, and is left at that.
  struct Restore {
    Optimizer* o;
    ~Restore() {
      try {
        if (!o->groups_.empty() && o->groups_[0].has_options()) o->apply_options(o->groups_[0].options());
      } catch (const Error&) {
      }
    }
  } restore{this};
  size_t current = size_t(-1);
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& g = params_[i].grad();
    if (!g.defined()) continue;
    if (group_of_[i] != current && groups_[group_of_[i]].has_options()) {
      current = group_of_[i];
      apply_options(groups_[current].options());
    }
    if (!g.defined()) continue;
    REMORA_CHECK(g.shape() == params_[i].shape() && g.dtype() == params_[i].dtype(),
                 type_name() << "::step: gradient " << g.str() << " of parameter " << i
                             << " does not match the parameter " << params_[i].str());
    update(i, g, state_[i]);
  }
}

NamedTensors Optimizer::state() const {
  NamedTensors out;
  out.emplace_back("step", Tensor::scalar(double(step_count_), DType::i64));
  out.emplace_back("lr", Tensor::scalar(lr(), DType::f64));
  for (size_t k = 1; k < groups_.size(); ++k)  // the other groups' rates (absent with one group)
    if (groups_[k].has_options())
      out.emplace_back("group." + std::to_string(k) + ".lr", Tensor::scalar(groups_[k].options().get_lr(), DType::f64));
  for (size_t i = 0; i < state_.size(); ++i)
    for (const std::string& name : state_names()) {
      auto it = state_[i].find(name);
      if (it != state_[i].end()) out.emplace_back(std::to_string(i) + "." + name, it->second);
    }
  return out;
}

void Optimizer::load_state(const NamedTensors& state) {
  const std::string who = type_name() + "::load_state: ";
  const std::vector<std::string> names = state_names();
  std::vector<std::map<std::string, Tensor>> fresh(params_.size());
  int64_t step = -1;
  double lr = lr_;
  std::map<size_t, double> group_lrs;
  std::set<std::string> seen;
  for (const auto& kv : state) {
    const std::string& key = kv.first;
    const Tensor& t = kv.second;
    REMORA_CHECK(seen.insert(key).second, who << "duplicate key '" << key << "'");
    REMORA_CHECK(t.defined(), who << "key '" << key << "' holds an undefined tensor");
    if (key == "step" || key == "lr") {
      REMORA_CHECK(t.numel() == 1, who << "'" << key << "' must be a scalar, got "
                                       << shape_str(t.shape()));
      if (key == "step") {
        step = int64_t(t.item());
        REMORA_CHECK(step >= 0, who << "'step' must be >= 0, got " << step);
      } else {
        lr = t.item();
      }
      continue;
    }
    if (key.rfind("group.", 0) == 0) {
      const std::string mid = key.substr(6, key.size() >= 9 ? key.size() - 9 : 0);
      REMORA_CHECK(key.size() > 9 && key.compare(key.size() - 3, 3, ".lr") == 0 && mid.size() < 10 &&
                       mid.find_first_not_of("0123456789") == std::string::npos,
                   who << "unexpected key '" << key << "' (expected 'group.<index>.lr')");
      const size_t k = size_t(std::stoull(mid));
      REMORA_CHECK(k >= 1 && k < groups_.size(), who << "key '" << key << "' names group " << k << " but the optimizer has "
                                                     << groups_.size() << " groups");
      REMORA_CHECK(t.numel() == 1, who << "'" << key << "' must be a scalar");
      group_lrs[k] = t.item();
      continue;
    }
    const size_t dot = key.find('.');
    const std::string idx = dot == std::string::npos ? "" : key.substr(0, dot);
    const std::string name = dot == std::string::npos ? key : key.substr(dot + 1);
    REMORA_CHECK(!idx.empty() && idx.size() < 10 &&
                     idx.find_first_not_of("0123456789") == std::string::npos,
                 who << "unexpected key '" << key
                     << "' (expected 'step', 'lr' or '<param index>.<state name>')");
    const size_t i = size_t(std::stoull(idx));
    REMORA_CHECK(i < params_.size(), who << "key '" << key << "' names parameter " << i
                                         << " but the optimizer has " << params_.size()
                                         << " parameters");
    bool known = false;
    for (const auto& n : names) known = known || n == name;
    REMORA_CHECK(known, who << "unexpected key '" << key << "': " << type_name()
                            << " keeps no state called '" << name << "'");
    const Tensor& p = params_[i];
    if (name == "step") {
      REMORA_CHECK(t.numel() == 1, who << "'" << key << "' must be a scalar, got "
                                       << shape_str(t.shape()));
      fresh[i][name] = Tensor::scalar(t.item(), DType::f64);
    } else {
      REMORA_CHECK(t.shape() == p.shape(), who << "size mismatch for '" << key
                                               << "': checkpoint has " << shape_str(t.shape())
                                               << ", parameter " << i << " is "
                                               << shape_str(p.shape()));
      Tensor c = Tensor::empty(p.shape(), p.dtype(), p.device());
      NoGradGuard ng;
      c.copy_(t.detach().to(p.device()));
      fresh[i][name] = c;
    }
  }
  REMORA_CHECK(step >= 0, who << "missing key 'step'");
  for (size_t i = 0; i < fresh.size(); ++i) {
    if (fresh[i].empty()) continue;
    for (const auto& n : names)
      REMORA_CHECK(fresh[i].count(n), who << "missing key '" << i << "." << n
                                          << "' (parameter " << i << " has other state)");
  }
  state_ = std::move(fresh);
  step_count_ = step;
  lr_ = lr;
  if (!groups_.empty() && groups_[0].has_options()) groups_[0].options().set_lr(lr);
  for (const auto& kv : group_lrs) groups_[kv.first].options().set_lr(kv.second);
}

// ---- SGD ----

SGD::SGD(std::vector<Tensor> params, double lr, double momentum_, double dampening_,
         double weight_decay_, bool nesterov_)
    : Optimizer(std::move(params), lr),
      momentum(momentum_),
      dampening(dampening_),
      weight_decay(weight_decay_),
      nesterov(nesterov_) {
  REMORA_CHECK(momentum >= 0, "SGD: momentum must be >= 0, got " << momentum);
  REMORA_CHECK(weight_decay >= 0, "SGD: weight_decay must be >= 0, got " << weight_decay);
  REMORA_CHECK(!nesterov || (momentum > 0 && dampening == 0),
               "SGD: nesterov needs momentum > 0 and dampening = 0 (got momentum "
                   << momentum << ", dampening " << dampening << ")");
  set_defaults(SGDOptions(lr).momentum(momentum).dampening(dampening).weight_decay(weight_decay).nesterov(nesterov));
}

SGD::SGD(std::vector<OptimizerParamGroup> groups, const SGDOptions& o)
    : Optimizer(std::move(groups), o.lr()),
      momentum(o.momentum()),
      dampening(o.dampening()),
      weight_decay(o.weight_decay()),
      nesterov(o.nesterov()) {
  set_defaults(o);
}

void SGD::apply_options(const OptimizerOptions& opts) {
  const auto* o = dynamic_cast<const SGDOptions*>(&opts);
  REMORA_CHECK(o != nullptr, "SGD: a parameter group's options must be optim::SGDOptions");
  REMORA_CHECK(o->momentum() >= 0, "SGD: momentum must be >= 0, got " << o->momentum());
  REMORA_CHECK(o->weight_decay() >= 0, "SGD: weight_decay must be >= 0, got " << o->weight_decay());
  REMORA_CHECK(!o->nesterov() || (o->momentum() > 0 && o->dampening() == 0),
               "SGD: nesterov needs momentum > 0 and dampening = 0 (got momentum " << o->momentum()
                                                                                 << ", dampening " << o->dampening()
                                                                                 << ")");
  Optimizer::apply_options(opts);
  momentum = o->momentum();
  dampening = o->dampening();
  weight_decay = o->weight_decay();
  nesterov = o->nesterov();
}

std::vector<std::string> SGD::state_names() const {
  bool any = momentum != 0;
  for (const auto& g : groups_)
    if (g.has_options()) any = any || static_cast<const SGDOptions&>(g.options()).momentum() != 0;
  if (!any) return {};
  return {"momentum_buffer"};
}

void SGD::update(size_t i, const Tensor& g, std::map<std::string, Tensor>& st) {
  Tensor& p = params_[i];
  Tensor d = g;
  if (weight_decay != 0) d = add(g, affine(p, weight_decay, 0));  // g + wd p
  if (momentum != 0) {
    auto it = st.find("momentum_buffer");
    Tensor buf;
    if (it == st.end()) {
      buf = d.clone();  // first step: buf = d (never alias the gradient)
      st["momentum_buffer"] = buf;
    } else {
      buf = it->second;
      buf.mul_(momentum).add_(d, 1 - dampening);
    }
    d = nesterov ? add(d, affine(buf, momentum, 0)) : buf;
  }
  p.add_(d, -lr_);
}

// ---- Adam / AdamW ----

Adam::Adam(std::vector<Tensor> params, double lr, double b1, double b2, double eps_, double wd)
    : Adam(std::move(params), lr, b1, b2, eps_, wd, false) {}

Adam::Adam(std::vector<Tensor> params, double lr, double b1, double b2, double eps_, double wd,
           bool decoupled)
    : Optimizer(std::move(params), lr), beta1(b1), beta2(b2), eps(eps_), weight_decay(wd),
      decoupled_(decoupled) {
  const char* n = decoupled ? "AdamW" : "Adam";
  REMORA_CHECK(b1 >= 0 && b1 < 1, n << ": beta1 must be in [0, 1), got " << b1);
  REMORA_CHECK(b2 >= 0 && b2 < 1, n << ": beta2 must be in [0, 1), got " << b2);
  REMORA_CHECK(eps >= 0, n << ": eps must be >= 0, got " << eps);
  REMORA_CHECK(wd >= 0, n << ": weight_decay must be >= 0, got " << wd);
  if (decoupled)
    set_defaults(AdamWOptions(lr).betas(b1, b2).eps(eps_).weight_decay(wd));
  else
    set_defaults(AdamOptions(lr).betas(b1, b2).eps(eps_).weight_decay(wd));
}

Adam::Adam(std::vector<OptimizerParamGroup> groups, const AdamOptions& o)
    : Optimizer(std::move(groups), o.lr()), beta1(o.beta1()), beta2(o.beta2()), eps(o.eps()),
      weight_decay(o.weight_decay()), decoupled_(false) {
  set_defaults(o);
}

Adam::Adam(std::vector<OptimizerParamGroup> groups, const AdamWOptions& o)
    : Optimizer(std::move(groups), o.lr()), beta1(o.beta1()), beta2(o.beta2()), eps(o.eps()),
      weight_decay(o.weight_decay()), decoupled_(true) {
  set_defaults(o);
}

void Adam::apply_options(const OptimizerOptions& opts) {
  const char* n = decoupled_ ? "AdamW" : "Adam";
  double b1, b2, e, wd;
  if (const auto* a = dynamic_cast<const AdamOptions*>(&opts)) {
    b1 = a->beta1(), b2 = a->beta2(), e = a->eps(), wd = a->weight_decay();
  } else if (const auto* w = dynamic_cast<const AdamWOptions*>(&opts)) {
    b1 = w->beta1(), b2 = w->beta2(), e = w->eps(), wd = w->weight_decay();
  } else {
    throw Error(std::string(n) + ": a parameter group's options must be optim::AdamOptions or optim::AdamWOptions");
  }
  REMORA_CHECK(b1 >= 0 && b1 < 1, n << ": beta1 must be in [0, 1), got " << b1);
  REMORA_CHECK(b2 >= 0 && b2 < 1, n << ": beta2 must be in [0, 1), got " << b2);
  REMORA_CHECK(e >= 0, n << ": eps must be >= 0, got " << e);
  REMORA_CHECK(wd >= 0, n << ": weight_decay must be >= 0, got " << wd);
  Optimizer::apply_options(opts);
  beta1 = b1;
  beta2 = b2;
  eps = e;
  weight_decay = wd;
}

std::vector<std::string> Adam::state_names() const { return {"step", "exp_avg", "exp_avg_sq"}; }

void Adam::update(size_t i, const Tensor& g, std::map<std::string, Tensor>& st) {
  Tensor& p = params_[i];
  const double step = adam_state_step(p, st);

  Tensor& m = st["exp_avg"];
  Tensor& v = st["exp_avg_sq"];
  const double bc1 = 1 - std::pow(beta1, step), bc2 = 1 - std::pow(beta2, step);
  const double step_size = lr_ / bc1;
  // The whole rule in one pass where the device has the fused kernel
  // (backends/kernels.h, AdamArgs); the composed ops below are its reference.
  AdamStep fs;
  fs.decay = decoupled_ ? lr_ * weight_decay : 0;
  fs.l2 = decoupled_ ? 0 : weight_decay;
  fs.beta1 = beta1;
  fs.beta2 = beta2;
  fs.step_size = step_size;
  fs.sqrt_bc2 = std::sqrt(bc2);
  fs.eps = eps;
  if (fused && adam_step_(p, g, m, v, fs)) return;

  Tensor grad = g;
  if (decoupled_)
    p.mul_(1 - lr_ * weight_decay);                      // AdamW: decay the weights
  else if (weight_decay != 0)
    grad = add(g, affine(p, weight_decay, 0));           // Adam: L2 on the gradient

  m.mul_(beta1).add_(grad, 1 - beta1);
  v.mul_(beta2).add_(mul(grad, grad), 1 - beta2);
  // eps is added after the bias correction of sqrt(v), as torch does.
  Tensor denom = affine(div(sqrt(v), Tensor::scalar(std::sqrt(bc2), p.dtype(), p.device())), 1, eps);
  p.add_(div(m, denom), -step_size);
}

// ---- RAdam ----

namespace {
void check_radam(double lr, double b1, double b2, double eps, double wd) {
  REMORA_CHECK(lr >= 0, "RAdam: lr must be >= 0, got " << lr);
  REMORA_CHECK(b1 >= 0 && b1 < 1, "RAdam: beta1 must be in [0, 1), got " << b1);
  REMORA_CHECK(b2 >= 0 && b2 < 1, "RAdam: beta2 must be in [0, 1), got " << b2);
  REMORA_CHECK(eps >= 0, "RAdam: eps must be >= 0, got " << eps);
  REMORA_CHECK(wd >= 0, "RAdam: weight_decay must be >= 0, got " << wd);
}
}  // namespace

RAdam::RAdam(std::vector<Tensor> params, double lr, double b1, double b2, double eps_, double wd,
             bool decoupled)
    : Optimizer(std::move(params), lr), beta1(b1), beta2(b2), eps(eps_), weight_decay(wd),
      decoupled_weight_decay(decoupled) {
  check_radam(lr, b1, b2, eps_, wd);
  set_defaults(RAdamOptions(lr).betas(b1, b2).eps(eps_).weight_decay(wd).decoupled_weight_decay(decoupled));
}

RAdam::RAdam(std::vector<OptimizerParamGroup> groups, const RAdamOptions& o)
    : Optimizer(std::move(groups), o.lr()), beta1(o.beta1()), beta2(o.beta2()), eps(o.eps()),
      weight_decay(o.weight_decay()), decoupled_weight_decay(o.decoupled_weight_decay()) {
  set_defaults(o);
}

void RAdam::apply_options(const OptimizerOptions& opts) {
  const auto* o = dynamic_cast<const RAdamOptions*>(&opts);
  REMORA_CHECK(o != nullptr, "RAdam: a parameter group's options must be optim::RAdamOptions");
  check_radam(o->lr(), o->beta1(), o->beta2(), o->eps(), o->weight_decay());
  Optimizer::apply_options(opts);
  beta1 = o->beta1();
  beta2 = o->beta2();
  eps = o->eps();
  weight_decay = o->weight_decay();
  decoupled_weight_decay = o->decoupled_weight_decay();
}

std::vector<std::string> RAdam::state_names() const { return {"step", "exp_avg", "exp_avg_sq"}; }

void RAdam::update(size_t i, const Tensor& g, std::map<std::string, Tensor>& st) {
  Tensor& p = params_[i];
  const double step = adam_state_step(p, st);

  Tensor grad = g;
  if (weight_decay != 0) {
    if (decoupled_weight_decay)
      p.mul_(1 - lr_ * weight_decay);              // decay the weights, as AdamW
    else
      grad = add(g, affine(p, weight_decay, 0));   // L2 on the gradient
  }
  Tensor& m = st["exp_avg"];
  Tensor& v = st["exp_avg_sq"];
  m.mul_(beta1).add_(grad, 1 - beta1);
  v.mul_(beta2).add_(mul(grad, grad), 1 - beta2);

  const double bc1 = 1 - std::pow(beta1, step), bc2 = 1 - std::pow(beta2, step);
  const double rho_inf = 2 / (1 - beta2) - 1;                          // the SMA's maximum length
  const double rho_t = rho_inf - 2 * step * std::pow(beta2, step) / bc2;  // its length at step t
  if (rho_t > 5) {
    // The variance is tractable: the Adam step, rectified by r. eps is added to
    // sqrt(v) before the bias correction, as torch's RAdam does.
    const double r = std::sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t));
    p.add_(div(m, affine(sqrt(v), 1, eps)), -lr_ * r * std::sqrt(bc2) / bc1);
  } else {
    p.add_(m, -lr_ / bc1);  // momentum SGD with the bias-corrected average
  }
}

// ---- clipping ----

namespace {
// On the CPU reading a value costs nothing: the per-parameter norms are read
// as they come and the gradients are scaled only when clipping.
double clip_grad_norm_host(const std::vector<Tensor>& params, double max_norm) {
  double sq = 0;
  for (const Tensor& p : params) {
    if (!p.defined() || !p.grad().defined()) continue;
    const double n = std::sqrt(sum(mul(p.grad(), p.grad())).item());  // ||g||
    sq += n * n;
  }
  const double total = std::sqrt(sq);
  const double coef = max_norm / (total + 1e-6);
  if (coef < 1)
    for (const Tensor& p : params) {
      if (!p.defined() || !p.grad().defined()) continue;
      Tensor q = p;  // handle; set_grad replaces the grad (it may be shared)
      q.set_grad(affine(p.grad(), coef, 0));
    }
  return total;
}

}  // namespace

// On an accelerator everything stays on the device until the one .item() that
// returns the norm: the per-parameter norms ||g_i|| (in f64, on the first
// gradient's device) are gathered into one vector, total = ||(||g_0||, ||g_1||,
// ...)|| as torch does, and every gradient is scaled by the device scalar
// coef < 1 ? coef : 1 with coef = max_norm / (total + 1e-6) (torch's clip
// coefficient, clamped; a factor of 1 leaves a gradient's values unchanged).
double clip_grad_norm_fused_(const std::vector<Tensor>& params, double max_norm) {
  NoGradGuard no_grad;
  std::vector<Tensor> norms;
  Device dev = Device::cpu();
  for (const Tensor& p : params) {
    if (!p.defined() || !p.grad().defined()) continue;
    const Tensor& g = p.grad();
    if (norms.empty()) dev = g.device();
    Tensor sq = sum(mul(g, g)).to(DType::f64);
    if (sq.device() != dev) sq = sq.to(dev);
    norms.push_back(sqrt(sq).reshape({1}));  // ||g||
  }
  if (norms.empty()) return 0;
  Tensor n = cat(norms, 0);
  Tensor total = sqrt(sum(mul(n, n)));
  Tensor one = Tensor::ones({}, DType::f64, dev);
  Tensor coef = div(Tensor::scalar(max_norm, DType::f64, dev), affine(total, 1, 1e-6));
  coef = where(lt(coef, one), coef, one);  // a NaN total leaves the gradients as they are
  for (const Tensor& p : params) {
    if (!p.defined() || !p.grad().defined()) continue;
    const Tensor& g = p.grad();
    Tensor c = coef.to(g.dtype());
    if (c.device() != g.device()) c = c.to(g.device());
    Tensor q = p;  // handle; set_grad replaces the grad (it may be shared)
    q.set_grad(mul(g, c));
  }
  return total.item();
}

double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm) {
  NoGradGuard no_grad;
  for (const Tensor& p : params)
    if (p.defined() && p.grad().defined() && !p.grad().device().is_cpu())
      return clip_grad_norm_fused_(params, max_norm);
  return clip_grad_norm_host(params, max_norm);
}

// ---- schedules ----

double LRSchedule::lr_at(int64_t s) const {
  REMORA_CHECK(s >= 0, "LRSchedule::lr_at: step must be >= 0, got " << s);
  REMORA_CHECK(warmup_steps >= 0 && min_lr_ratio >= 0 && min_lr_ratio <= 1,
               "LRSchedule: need warmup_steps >= 0 and min_lr_ratio in [0, 1], got "
                   << warmup_steps << " and " << min_lr_ratio);
  if (s < warmup_steps) return double(s) / double(warmup_steps);
  if (kind == constant) return 1;
  const double span = double(std::max<int64_t>(1, total_steps - warmup_steps));
  const double prog = std::min(1.0, double(s - warmup_steps) / span);
  const double r = min_lr_ratio;
  if (kind == warmup_cosine) return r + (1 - r) * 0.5 * (1 + std::cos(3.14159265358979323846 * prog));
  return r + (1 - r) * (1 - prog);
}

LRSchedule::Kind LRSchedule::parse_kind(const std::string& name) {
  if (name == "constant") return constant;
  if (name == "warmup_cosine") return warmup_cosine;
  if (name == "warmup_linear") return warmup_linear;
  REMORA_FAIL("LRSchedule: unknown schedule '" << name
                                               << "'; use constant, warmup_cosine or warmup_linear");
}

}  // namespace optim
}  // namespace remora

// ---- RMSprop ----
namespace remora {
namespace optim {

RMSprop::RMSprop(std::vector<Tensor> params, double lr, double alpha_, double eps_, double wd,
                 double momentum_, bool centered_)
    : Optimizer(std::move(params), lr), alpha(alpha_), eps(eps_), weight_decay(wd),
      momentum(momentum_), centered(centered_) {
  REMORA_CHECK(alpha >= 0 && alpha <= 1, "RMSprop: alpha must be in [0, 1], got " << alpha);
  REMORA_CHECK(eps >= 0, "RMSprop: eps must be >= 0, got " << eps);
  REMORA_CHECK(wd >= 0, "RMSprop: weight_decay must be >= 0, got " << wd);
  REMORA_CHECK(momentum >= 0, "RMSprop: momentum must be >= 0, got " << momentum);
  set_defaults(RMSpropOptions(lr).alpha(alpha).eps(eps).weight_decay(wd).momentum(momentum).centered(centered));
}

void RMSprop::apply_options(const OptimizerOptions& opts) {
  const auto* o = dynamic_cast<const RMSpropOptions*>(&opts);
  REMORA_CHECK(o != nullptr, "RMSprop: a parameter group's options must be optim::RMSpropOptions");
  REMORA_CHECK(o->alpha() >= 0 && o->alpha() <= 1, "RMSprop: alpha must be in [0, 1], got " << o->alpha());
  REMORA_CHECK(o->eps() >= 0, "RMSprop: eps must be >= 0, got " << o->eps());
  REMORA_CHECK(o->weight_decay() >= 0, "RMSprop: weight_decay must be >= 0, got " << o->weight_decay());
  REMORA_CHECK(o->momentum() >= 0, "RMSprop: momentum must be >= 0, got " << o->momentum());
  REMORA_CHECK(groups_.empty() || !groups_[0].has_options() ||
                   ((o->momentum() > 0) == (momentum > 0) && o->centered() == centered),
               "RMSprop: every parameter group must agree on momentum > 0 and centered (they decide the state kept)");
  Optimizer::apply_options(opts);
  alpha = o->alpha();
  eps = o->eps();
  weight_decay = o->weight_decay();
  momentum = o->momentum();
  centered = o->centered();
}

std::vector<std::string> RMSprop::state_names() const {
  std::vector<std::string> n{"step", "square_avg"};
  if (momentum > 0) n.push_back("momentum_buffer");
  if (centered) n.push_back("grad_avg");
  return n;
}

void RMSprop::update(size_t i, const Tensor& g, std::map<std::string, Tensor>& st) {
  Tensor& p = params_[i];
  if (st.empty()) {
    st["step"] = Tensor::scalar(0, DType::f64);
    st["square_avg"] = Tensor::zeros(p.shape(), p.dtype(), p.device());
    if (momentum > 0) st["momentum_buffer"] = Tensor::zeros(p.shape(), p.dtype(), p.device());
    if (centered) st["grad_avg"] = Tensor::zeros(p.shape(), p.dtype(), p.device());
  }
  Tensor& t = st["step"];
  t.fill_(t.item() + 1);

  const Tensor grad = weight_decay != 0 ? add(g, affine(p, weight_decay, 0)) : g;
  Tensor& v = st["square_avg"];
  v.mul_(alpha).add_(mul(grad, grad), 1 - alpha);
  Tensor denom;
  if (centered) {
    Tensor& a = st["grad_avg"];
    a.mul_(alpha).add_(grad, 1 - alpha);
    denom = affine(sqrt(sub(v, mul(a, a))), 1, eps);
  } else {
    denom = affine(sqrt(v), 1, eps);
  }
  if (momentum > 0) {
    Tensor& b = st["momentum_buffer"];
    b.mul_(momentum).add_(div(grad, denom), 1);
    p.add_(b, -lr_);
  } else {
    p.add_(div(grad, denom), -lr_);
  }
}

}  // namespace optim
}  // namespace remora
