// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// A hook that runs when a leaf's gradient is ready: the autograd engine calls it
/// right after it has accumulated one backward's gradient into leaf.grad()
/// (PyTorch's register_post_accumulate_grad_hook). Data-parallel training uses it
/// to start a bucket's all-reduce while the rest of backward still runs.
///
/// \code
///   Tensor w = Tensor::randn({4}).requires_grad_();
///   GradHookHandle h = on_grad_accumulated(w, [](const Tensor& leaf) {
///     use(leaf.grad());   // this backward's contribution is in
///   });
///   (w * w).sum().backward();   // the hook runs once, inside backward()
/// \endcode
///
/// The engine sums every gradient that meets at a leaf before accumulating it,
/// so a hook runs at most once per leaf per backward() (not at all when the
/// backward does not reach the leaf). Hooks of one leaf run in registration
/// order, on the thread that runs backward(); an exception thrown by a hook
/// propagates out of backward(). The hook may read and replace leaf.grad(); it
/// must not start another backward. Dropping (or reset()ting) the handle removes
/// the hook; the hook does not keep the leaf alive.
#pragma once
#include <cstdint>
#include <functional>

#include "tensor.h"

namespace remora {

/// A gradient-accumulated hook: called with the leaf whose grad() has just
/// received one backward's gradient.
using GradAccumulatedHook = std::function<void(const Tensor& leaf)>;

/// Owns one registered hook (on_grad_accumulated): the hook stays registered
/// until the handle is reset() or destroyed. Movable, not copyable; a
/// default-constructed handle holds no hook.
class GradHookHandle {
 public:
  GradHookHandle() = default;
  ~GradHookHandle() { reset(); }
  /// Takes over o's hook; o is left empty.
  GradHookHandle(GradHookHandle&& o) noexcept : id_(o.id_) { o.id_ = 0; }
  /// Removes this handle's hook, then takes over o's; o is left empty.
  GradHookHandle& operator=(GradHookHandle&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = o.id_;
      o.id_ = 0;
    }
    return *this;
  }
  GradHookHandle(const GradHookHandle&) = delete;
  GradHookHandle& operator=(const GradHookHandle&) = delete;
  /// Removes the hook (no-op when already removed).
  void reset();
  /// Whether the handle holds a hook (false after reset() or a move).
  bool active() const { return id_ != 0; }

 private:
  friend GradHookHandle on_grad_accumulated(const Tensor&, GradAccumulatedHook);
  explicit GradHookHandle(uint64_t id) : id_(id) {}
  uint64_t id_ = 0;
};

/// Registers fn to run after each backward's gradient is accumulated into
/// leaf.grad(). leaf must be a leaf tensor that requires grad (an Error otherwise).
GradHookHandle on_grad_accumulated(const Tensor& leaf, GradAccumulatedHook fn);

/// Number of hooks registered on leaf (for tests and diagnostics).
int num_grad_accumulated_hooks(const Tensor& leaf);

}  // namespace remora
