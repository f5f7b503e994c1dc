// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// Optimizers with torch.optim 1.13's exact update rules, gradient clipping and
/// learning-rate schedules.
///
///     optim::AdamW opt(model->parameters(), 3e-4);   // or optim::AdamWOptions(3e-4).weight_decay(0.1)
///     optim::LRSchedule sched{optim::LRSchedule::warmup_cosine, 100, 10000, 0.1};
///     for (int64_t s = 0; s < steps; ++s) {
///       opt.zero_grad();
///       loss(model).backward();
///       optim::clip_grad_norm_(model->parameters(), 1.0);
///       opt.set_lr(3e-4 * sched.lr_at(s));
///       opt.step();
///     }
///
/// Parameters whose grad is undefined are skipped by step() (their state and
/// per-parameter step count do not advance, as in torch). State tensors are
/// created lazily on a parameter's first update, like torch's, with the
/// parameter's shape, dtype and device; the updates run the parameter's device's
/// ops (the CPU and CUDA). docs/libtorch_nn.md lists where Remora differs from
/// torch::optim.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../core/tensor.h"
#include "options.h"

namespace remora {
namespace optim {

/// Tensors by name, in order: an optimizer's checkpoint state (Optimizer::state).
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

/// Parameters with their own options (torch::optim::OptimizerParamGroup):
///   optim::AdamW opt({optim::OptimizerParamGroup(decayed), optim::OptimizerParamGroup(
///                         no_decay, optim::AdamWOptions(1e-3).weight_decay(0))},
///                    optim::AdamWOptions(1e-3));
/// A group built without options takes the optimizer's defaults.
class OptimizerParamGroup {
 public:
  /// A group without options: it takes the optimizer's defaults when it joins one.
  /// Implicit, so a std::vector<Tensor> converts.
  OptimizerParamGroup(std::vector<Tensor> params) : params_(std::move(params)) {}  // NOLINT: implicit
  /// A group with its own options (taken over).
  OptimizerParamGroup(std::vector<Tensor> params, std::unique_ptr<OptimizerOptions> options)
      : params_(std::move(params)), options_(std::move(options)) {}
  /// A group with a copy of `options` (an options class such as AdamWOptions).
  template <typename O, std::enable_if_t<std::is_base_of<OptimizerOptions, O>::value, int> = 0>
  OptimizerParamGroup(std::vector<Tensor> params, const O& options)
      : params_(std::move(params)), options_(options.clone()) {}
  /// Copies the parameter handles and clones the options.
  OptimizerParamGroup(const OptimizerParamGroup& o)
      : params_(o.params_), options_(o.options_ ? o.options_->clone() : nullptr) {}
  /// Copies the parameter handles and clones the options.
  OptimizerParamGroup& operator=(const OptimizerParamGroup& o) {
    params_ = o.params_;
    options_ = o.options_ ? o.options_->clone() : nullptr;
    return *this;
  }
  /// Moves the parameters and the options.
  OptimizerParamGroup(OptimizerParamGroup&&) = default;
  /// Moves the parameters and the options.
  OptimizerParamGroup& operator=(OptimizerParamGroup&&) = default;

  /// Whether the group has options (every group of an optimizer has).
  bool has_options() const { return options_ != nullptr; }
  /// The group's options (cast to the optimizer's type to read or set the rest:
  /// static_cast<optim::AdamOptions&>(group.options()).weight_decay(0)). An Error
  /// for a group without options.
  OptimizerOptions& options();
  /// The group's options (read-only); an Error for a group without options.
  const OptimizerOptions& options() const;
  /// Replaces the group's options; the optimizer checks them when it applies them.
  void set_options(std::unique_ptr<OptimizerOptions> options) { options_ = std::move(options); }
  /// The group's parameters (add parameters with Optimizer::add_param_group).
  const std::vector<Tensor>& params() const { return params_; }

 private:
  std::vector<Tensor> params_;
  std::unique_ptr<OptimizerOptions> options_;
};

/// The base of the optimizers (torch::optim::Optimizer): parameter groups with
/// their options, step(), zero_grad(), learning-rate access and checkpoint state.
/// A subclass supplies the update rule. Every parameter must be a defined,
/// floating leaf tensor (module->parameters()) and appear once across the groups
/// (an Error otherwise).
class Optimizer {
 public:
  /// One group holding params; lr >= 0 (an Error otherwise).
  Optimizer(std::vector<Tensor> params, double lr);
  /// Several groups: a group without options gets the defaults (set by the
  /// subclass's constructor).
  Optimizer(std::vector<OptimizerParamGroup> groups, double lr);
  virtual ~Optimizer() = default;
  /// The optimizer's name for messages: "SGD", "Adam", "AdamW", "RAdam", "RMSprop".
  virtual std::string type_name() const = 0;

  /// One update of every parameter that has a gradient (under NoGradGuard),
  /// each with its group's options. A gradient whose shape or dtype differs from
  /// its parameter's is an Error.
  void step();
  /// Drops every parameter's gradient (set_to_none semantics).
  void zero_grad();
  /// The first group's learning rate.
  double lr() const {
    return groups_.empty() || !groups_[0].has_options() ? lr_ : groups_[0].options().get_lr();
  }
  /// Sets every group's learning rate (lr >= 0, else an Error).
  void set_lr(double lr);
  /// Every parameter, group after group.
  const std::vector<Tensor>& params() const { return params_; }
  /// The number of step() calls (restored by load_state).
  int64_t steps_taken() const { return step_count_; }

  /// The parameter groups with their options (torch's param_groups()). Change a
  /// group's options through options(); add parameters with add_param_group.
  std::vector<OptimizerParamGroup>& param_groups() { return groups_; }
  /// The parameter groups with their options (read-only).
  const std::vector<OptimizerParamGroup>& param_groups() const { return groups_; }
  /// Appends a group (its parameters must not be in another group); without
  /// options it takes the defaults.
  void add_param_group(const OptimizerParamGroup& group);
  /// The options a group without its own gets (the constructor's).
  const OptimizerOptions& defaults() const;

  /// Named state for checkpoints: "step" (i64 scalar: calls to step()), "lr"
  /// (f64 scalar: the first group's rate), "group.<k>.lr" for every group k >= 1,
  /// and per parameter index i the tensors the rule keeps, e.g. "0.exp_avg",
  /// "0.exp_avg_sq", "0.step" (Adam) or "0.momentum_buffer" (SGD), for the
  /// parameters updated so far. The tensors are the optimizer's own, as in
  /// torch's state_dict() (no copy: a checkpoint costs no second set of
  /// moments); step() updates them in place, so clone them to keep a snapshot.
  /// load_state() copies what it is given.
  NamedTensors state() const;
  /// Restores state() output (copies; dtype converted to the parameter's, moved to
  /// its device); "lr" and the group rates are optional.
  /// Errors name the key and the problem: a missing "step", an unknown name or
  /// index, a shape that differs from the parameter's, an incomplete set.
  void load_state(const NamedTensors& state);

 protected:
  /// Updates params_[i] with gradient g; st holds that parameter's state.
  virtual void update(size_t i, const Tensor& g, std::map<std::string, Tensor>& st) = 0;
  /// The per-parameter state names this rule keeps (complete set when present).
  virtual std::vector<std::string> state_names() const = 0;
  /// Loads a group's options into the rule's hyperparameter members (lr_,
  /// beta1, ...) after checking them; step() calls it per group, then restores
  /// the first group's.
  virtual void apply_options(const OptimizerOptions& o);
  /// The subclass constructor's last call: records the defaults, gives them to
  /// the groups without options, and checks every group's options.
  void set_defaults(const OptimizerOptions& defaults);

  /// Every parameter, group after group.
  std::vector<Tensor> params_;
  std::vector<size_t> group_of_;  ///< params_[i] belongs to groups_[group_of_[i]].
  /// The parameter groups, each with options once set_defaults ran.
  std::vector<OptimizerParamGroup> groups_;
  /// The constructor's options (set_defaults).
  std::unique_ptr<OptimizerOptions> defaults_;
  std::vector<std::map<std::string, Tensor>> state_;  ///< The rule's state, one map per parameter (empty until its first update).
  /// The rate the rule applies: the options' rate of the group being updated,
  /// the first group's between steps.
  double lr_;
  /// Calls to step().
  int64_t step_count_ = 0;
};

/// torch.optim.SGD, per parameter with gradient g (wd = weight_decay):
///
///     d = g + wd * p
///     buf = d (first step), else momentum * buf + (1 - dampening) * d   (when momentum != 0)
///     d = nesterov ? d + momentum * buf : buf                           (when momentum != 0)
///     p -= lr * d
///
/// State: "momentum_buffer" when a group has momentum != 0.
class SGD : public Optimizer {
 public:
  /// One group; lr, momentum and weight_decay >= 0, and nesterov needs momentum
  /// > 0 and dampening = 0 (an Error otherwise).
  SGD(std::vector<Tensor> params, double lr, double momentum = 0, double dampening = 0,
      double weight_decay = 0, bool nesterov = false);
  /// One group with the options o.
  SGD(std::vector<Tensor> params, const SGDOptions& o)
      : SGD(std::move(params), o.lr(), o.momentum(), o.dampening(), o.weight_decay(), o.nesterov()) {}
  /// Several groups; a group without options takes `defaults`, and a group's
  /// options must be SGDOptions (checked as above).
  SGD(std::vector<OptimizerParamGroup> groups, const SGDOptions& defaults);
  /// "SGD".
  std::string type_name() const override { return "SGD"; }
  /// Momentum factor. Like each hyperparameter member, the value of the group being
  /// updated (the first group's between steps): step() reloads these from the
  /// groups' options, so change the options instead.
  double momentum, dampening, weight_decay;  ///< L2 penalty factor.
  /// \var dampening
  /// Dampening of the momentum.

  /// Nesterov momentum.
  bool nesterov;

 protected:
  void apply_options(const OptimizerOptions& o) override;
  void update(size_t i, const Tensor& g, std::map<std::string, Tensor>& st) override;
  std::vector<std::string> state_names() const override;
};

/// torch.optim.Adam (weight_decay is L2: g += wd * p):
///
///     m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2;  t += 1
///     p -= (lr / (1 - beta1^t)) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
///
/// State: "step" (f64 scalar t), "exp_avg" (m), "exp_avg_sq" (v).
class Adam : public Optimizer {
 public:
  /// One group; lr, eps and weight_decay >= 0, beta1 and beta2 in [0, 1) (an Error
  /// otherwise).
  Adam(std::vector<Tensor> params, double lr = 1e-3, double beta1 = 0.9, double beta2 = 0.999,
       double eps = 1e-8, double weight_decay = 0);
  /// One group with the options o.
  Adam(std::vector<Tensor> params, const AdamOptions& o)
      : Adam(std::move(params), o.lr(), o.beta1(), o.beta2(), o.eps(), o.weight_decay()) {}
  /// Several groups; a group without options takes `defaults`. A group's options
  /// may be AdamOptions or AdamWOptions (checked as above); the class decides the
  /// rule, so weight_decay is L2 here either way.
  Adam(std::vector<OptimizerParamGroup> groups, const AdamOptions& defaults);
  /// "Adam", or "AdamW" for an AdamW.
  std::string type_name() const override { return decoupled_ ? "AdamW" : "Adam"; }
  /// Decay of the first-moment average. Like each hyperparameter member, the value of the group being
  /// updated (the first group's between steps): step() reloads these from the
  /// groups' options, so change the options instead.
  double beta1, beta2, eps, weight_decay;  ///< L2 penalty (Adam) or decoupled decay (AdamW).
  /// \var beta2
  /// Decay of the second-moment average.

  /// \var eps
  /// Added to the bias-corrected sqrt(v).

  /// One fused pass per parameter where the device has the kernel (default);
  /// false runs the composed ops, the reference (tests compare the two).
  bool fused = true;

 protected:
  /// AdamW's one-group constructor: decoupled = true applies the weight decay as
  /// AdamW does.
  Adam(std::vector<Tensor> params, double lr, double beta1, double beta2, double eps,
       double weight_decay, bool decoupled);
  /// AdamW's group constructor (decoupled weight decay).
  Adam(std::vector<OptimizerParamGroup> groups, const AdamWOptions& defaults);
  void apply_options(const OptimizerOptions& o) override;
  void update(size_t i, const Tensor& g, std::map<std::string, Tensor>& st) override;
  std::vector<std::string> state_names() const override;
  /// True for AdamW: decoupled weight decay.
  bool decoupled_ = false;
};

/// torch.optim.AdamW: decoupled weight decay p *= 1 - lr * wd before the Adam
/// update (which then uses the raw gradient).
class AdamW : public Adam {
 public:
  /// One group; lr, eps and weight_decay >= 0, beta1 and beta2 in [0, 1) (an Error
  /// otherwise). weight_decay defaults to 0.01.
  AdamW(std::vector<Tensor> params, double lr = 1e-3, double beta1 = 0.9, double beta2 = 0.999,
        double eps = 1e-8, double weight_decay = 0.01)
      : Adam(std::move(params), lr, beta1, beta2, eps, weight_decay, true) {}
  /// One group with the options o.
  AdamW(std::vector<Tensor> params, const AdamWOptions& o)
      : Adam(std::move(params), o.lr(), o.beta1(), o.beta2(), o.eps(), o.weight_decay(), true) {}
  /// Several groups; a group without options takes `defaults`. A group's options
  /// may be AdamWOptions or AdamOptions; weight_decay is decoupled either way.
  AdamW(std::vector<OptimizerParamGroup> groups, const AdamWOptions& defaults)
      : Adam(std::move(groups), defaults) {}
};

/// torch.optim.RAdam, the rectified Adam of Liu et al. (2020), per parameter with
/// gradient g (wd = weight_decay; decoupled_weight_decay is torch 2.x's argument):
///
///     decoupled_weight_decay: p *= 1 - lr * wd,  else g += wd * p   (when wd != 0)
///     m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2;  t += 1
///     rho_inf = 2 / (1 - beta2) - 1;  rho_t = rho_inf - 2 t beta2^t / (1 - beta2^t)
///     rho_t > 5:  r = sqrt((rho_t - 4) (rho_t - 2) rho_inf / ((rho_inf - 4) (rho_inf - 2) rho_t))
///                 p -= lr * r * (m / (1 - beta1^t)) * sqrt(1 - beta2^t) / (sqrt(v) + eps)
///     otherwise:  p -= lr * m / (1 - beta1^t)
///
/// The first steps are momentum SGD while the variance estimate is unreliable
/// (t <= 5 with beta2 = 0.999; every step when beta2 <= 2/3). Unlike Adam, eps is
/// added to sqrt(v) before the bias correction, as torch does.
///
/// State: "step" (f64 scalar t), "exp_avg" (m), "exp_avg_sq" (v).
class RAdam : public Optimizer {
 public:
  /// One group; lr, eps and weight_decay >= 0, beta1 and beta2 in [0, 1) (an Error
  /// otherwise).
  RAdam(std::vector<Tensor> params, double lr = 1e-3, double beta1 = 0.9, double beta2 = 0.999,
        double eps = 1e-8, double weight_decay = 0, bool decoupled_weight_decay = false);
  /// One group with the options o.
  RAdam(std::vector<Tensor> params, const RAdamOptions& o)
      : RAdam(std::move(params), o.lr(), o.beta1(), o.beta2(), o.eps(), o.weight_decay(),
              o.decoupled_weight_decay()) {}
  /// Several groups; a group without options takes `defaults`, and a group's
  /// options must be RAdamOptions (checked as above). Each group may choose its
  /// own decoupled_weight_decay.
  RAdam(std::vector<OptimizerParamGroup> groups, const RAdamOptions& defaults);
  /// "RAdam".
  std::string type_name() const override { return "RAdam"; }
  /// Decay of the first-moment average. Like each hyperparameter member, the value of the group being
  /// updated (the first group's between steps): step() reloads these from the
  /// groups' options, so change the options instead.
  double beta1, beta2, eps, weight_decay;  ///< L2 penalty or, with decoupled_weight_decay, decoupled decay.
  /// \var beta2
  /// Decay of the second-moment average.

  /// \var eps
  /// Added to sqrt(v) in the rectified step's denominator.

  /// Weight decay as AdamW applies it (p *= 1 - lr * weight_decay) instead of L2.
  bool decoupled_weight_decay;

 protected:
  void apply_options(const OptimizerOptions& o) override;
  void update(size_t i, const Tensor& g, std::map<std::string, Tensor>& st) override;
  std::vector<std::string> state_names() const override;
};

/// torch.nn.utils.clip_grad_norm_ (L2): total = ||(||g_0||, ||g_1||, ...)||; when
/// coef = max_norm / (total + 1e-6) < 1 every gradient is scaled by coef (each
/// gradient tensor is replaced by g * min(1, coef), never written in place; with
/// coef >= 1, or NaN, the values stay as they were). Parameters without a grad
/// are ignored. Returns total (before clipping). Computed on the gradients'
/// device: one host sync per call (the returned double).
double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm);
/// What clip_grad_norm_ runs when the gradients are not on the CPU: the norms,
/// the total and the clip coefficient stay on the device and every gradient is
/// scaled by min(coef, 1), so the returned total is the one host sync (the CPU
/// path reads each norm as it comes). Same result up to one rounding.
double clip_grad_norm_fused_(const std::vector<Tensor>& params, double max_norm);

/// A learning-rate multiplier by step (0-based index of the update about to run):
///
///     warmup (s < W):  m = s / W                         (from 0 up to the base lr)
///     after warmup, p = min(1, (s - W) / max(1, T - W)), r = min_lr_ratio:
///       constant:      m = 1
///       warmup_cosine: m = r + (1 - r) * 0.5 (1 + cos(pi p))
///       warmup_linear: m = r + (1 - r) * (1 - p)
///
/// so m reaches r at s = T and stays there. W = warmup_steps, T = total_steps.
struct LRSchedule {
  /// The multiplier after warmup: constant (1), warmup_cosine or warmup_linear
  /// (down to min_lr_ratio at total_steps).
  enum Kind { constant, warmup_cosine, warmup_linear };
  /// Default constant.
  Kind kind = constant;
  /// W, the warmup length in steps (>= 0; 0 = no warmup).
  int64_t warmup_steps = 0;
  /// T, the step at which the decay reaches min_lr_ratio.
  int64_t total_steps = 0;
  /// r, the final multiplier, in [0, 1].
  double min_lr_ratio = 0;

  /// The multiplier m at step (>= 0). An Error for a negative step, warmup_steps
  /// < 0 or min_lr_ratio outside [0, 1].
  double lr_at(int64_t step) const;
  /// "constant" | "warmup_cosine" | "warmup_linear" (an Error otherwise).
  static Kind parse_kind(const std::string& name);
};

}  // namespace optim
}  // namespace remora

// ---- RMSprop (the official MemoryNets recipe) ----
namespace remora {
namespace optim {

/// torch.optim.RMSprop 1.13 (foreach = False), per parameter:
///
///     g += wd * p (when weight_decay != 0);  v = alpha v + (1 - alpha) g^2
///     centered: a = alpha a + (1 - alpha) g;  d = sqrt(v - a^2) + eps,  else d = sqrt(v) + eps
///     momentum > 0: b = momentum * b + g / d;  p -= lr * b,  else p -= lr * g / d
///
/// State: "step", "square_avg" (+ "momentum_buffer" when momentum > 0, "grad_avg"
/// when centered), all starting at 0.
class RMSprop : public Optimizer {
 public:
  /// One group; alpha in [0, 1], lr, eps, weight_decay and momentum >= 0 (an Error
  /// otherwise). There is no constructor from parameter groups: add more groups
  /// with add_param_group.
  RMSprop(std::vector<Tensor> params, double lr = 1e-2, double alpha = 0.99, double eps = 1e-8,
          double weight_decay = 0, double momentum = 0, bool centered = false);
  /// One group with the options o.
  RMSprop(std::vector<Tensor> params, const RMSpropOptions& o)
      : RMSprop(std::move(params), o.lr(), o.alpha(), o.eps(), o.weight_decay(), o.momentum(), o.centered()) {}
  /// "RMSprop".
  std::string type_name() const override { return "RMSprop"; }
  /// Decay of the squared-gradient average. Like each hyperparameter member, the value of the group being
  /// updated (the first group's between steps): step() reloads these from the
  /// groups' options, so change the options instead.
  double alpha, eps, weight_decay, momentum;  ///< Momentum factor (0: none).
  /// \var eps
  /// Added to the denominator.

  /// \var weight_decay
  /// L2 penalty factor.

  /// Normalise by the centered second moment.
  bool centered;

 protected:
  void apply_options(const OptimizerOptions& o) override;
  void update(size_t i, const Tensor& g, std::map<std::string, Tensor>& st) override;
  std::vector<std::string> state_names() const override;
};

}  // namespace optim
}  // namespace remora
