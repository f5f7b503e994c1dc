// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// nn::Module: the base of every layer (libtorch's habits).
///
///     struct Block : nn::Module {
///       std::shared_ptr<nn::Linear> fc;
///       Tensor scale;
///       Block() {
///         fc = register_module("fc", std::make_shared<nn::Linear>(4, 4));
///         scale = register_parameter("scale", Tensor::ones({4}));
///       }
///       Tensor forward(const Tensor& x) { return fc->forward(x) * scale; }
///     };
///     auto b = std::make_shared<Block>();
///     b->named_parameters();   // {"scale", "fc.weight", "fc.bias"}: torch's order, own first
///
/// Modules are held by std::shared_ptr, or by value the libtorch way:
///
///     struct NetImpl : nn::Module {
///       NetImpl() { fc = register_module("fc", nn::Linear(nn::LinearOptions(4, 8).bias(false))); }
///       Tensor forward(const Tensor& x) { return fc(x); }
///       nn::Linear fc{nullptr};
///     };
///     REMORA_MODULE(Net);          // Net: a shared handle to a NetImpl (torch's TORCH_MODULE)
///     Net net;  net(x);  net->forward(x);  std::cout << net;
///
/// A module's registered parameters, buffers, children and training mode live in
/// state that copies of the module share (torch's module handles behave the same
/// way), so the member `fc` above and the child registered as "fc" are one layer.
/// A parameter is a leaf Tensor with requires_grad; the module keeps a handle to
/// the same TensorImpl as the member, so load_state_dict / init / to() change
/// values in place and every handle (the member, an optimizer's list) sees the
/// change. docs/libtorch_nn.md lists where Remora differs from torch::nn.
#pragma once
#include <cstddef>
#include <iosfwd>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../core/safetensors.h"
#include "../core/tensor.h"
#include "ordered_dict.h"

namespace remora {
namespace nn {

/// Tensors by name, in order: a state dict (Module::state_dict), a checkpoint's
/// contents.
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

template <typename Contained>
class ModuleHolder;

namespace detail {
template <typename T>
struct is_module_holder : std::false_type {};
template <typename T>
struct is_module_holder<ModuleHolder<T>> : std::true_type {};
// True for ModuleHolder<M> and the classes REMORA_MODULE derives from it.
template <typename T, typename = void>
struct holds_module : std::false_type {};
template <typename T>
struct holds_module<T, std::void_t<typename T::ContainedType>>
    : std::is_base_of<ModuleHolder<typename T::ContainedType>, T> {};
}  // namespace detail

/// The base of every layer (torch::nn::Module): registered parameters, buffers
/// and children, a training mode, state dicts, dtype and device moves, printing.
/// A module that was built empty (a layer's `nullptr` form) has no state: the
/// functions that read it throw an Error until a module is assigned to it.
class Module {
 public:
  virtual ~Module() = default;
  /// A module with empty state; a subclass's constructor registers its
  /// parameters, buffers and children.
  Module();
  /// Copies share the registered parameters, buffers, children and mode
  /// (torch's module handles do the same); the subclass's own plain members are
  /// copied. clone-like deep copies: build a new module and load_state_dict.
  Module(const Module&) = default;
  /// Shares the other module's registered state, as the copy constructor does.
  Module& operator=(const Module&) = default;

  /// The class name, for error messages and printing ("Linear", ...).
  virtual std::string type_name() const { return "Module"; }
  /// torch's name() (the class name).
  std::string name() const { return type_name(); }
  /// The arguments printed inside the parentheses of a leaf module:
  /// "in_features=4, out_features=8, bias=true".
  virtual std::string extra_repr() const { return ""; }
  /// Writes the module tree (children by name, each parameter with its dtype
  /// and shape); what operator<< prints.
  void pretty_print(std::ostream& os, int indent = 0) const;

  // ---- registration ----
  /// Makes t a leaf that requires grad (detaching it if it has history) and
  /// registers it under `name`; returns the handle to keep as a member.
  /// requires_grad = false registers a frozen parameter. t must be a defined
  /// floating tensor, and `name` non-empty, without '.', and not taken by a
  /// parameter, buffer or child of this module (an Error otherwise).
  Tensor register_parameter(const std::string& name, Tensor t, bool requires_grad = true);
  /// Registers state that is saved and loaded but not trained (detached if it
  /// requires grad); any dtype. Names as register_parameter. Returns the handle.
  Tensor register_buffer(const std::string& name, Tensor t);
  /// Registers a child held by shared_ptr (not null; names as
  /// register_parameter) and returns it; its parameters appear as "name.<param>".
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    register_child(name, m);
    return m;
  }
  /// A handle (REMORA_MODULE): registers the module it holds and returns it, so
  /// `net = register_module("net", Net(...))` and `member{nullptr}` work.
  template <typename H, std::enable_if_t<detail::holds_module<H>::value, int> = 0>
  H register_module(const std::string& name, H holder) {
    register_child(name, holder.ptr());
    return holder;
  }
  /// A layer held by value (`nn::Linear fc{nullptr}; fc = register_module("fc",
  /// nn::Linear(4, 8));`): registers a copy, which shares the layer's state with
  /// the returned value and with `m`.
  template <typename M, std::enable_if_t<std::is_base_of<Module, std::decay_t<M>>::value, int> = 0>
  std::decay_t<M> register_module(const std::string& name, M&& m) {
    using T = std::decay_t<M>;
    auto p = std::make_shared<T>(static_cast<const T&>(m));
    register_child(name, p);
    return *p;
  }

  // ---- traversal: torch's order. A module's own tensors first (in registration
  // order), then each child's, depth first, children in registration order. ----
  // named_* return an OrderedDict (torch's): items with key() / value(), keys(),
  // values(), lookup by name; it converts to NamedTensors (pairs).
  /// The parameters: own ones, then (with recurse) every descendant's, in the
  /// order above.
  std::vector<Tensor> parameters(bool recurse = true) const;
  /// parameters() by dotted name ("fc.weight").
  OrderedDict<std::string, Tensor> named_parameters(bool recurse = true) const;
  /// The buffers, in the same order as parameters().
  std::vector<Tensor> buffers(bool recurse = true) const;
  /// buffers() by dotted name.
  OrderedDict<std::string, Tensor> named_buffers(bool recurse = true) const;
  /// The direct children by name, in registration order.
  OrderedDict<std::string, std::shared_ptr<Module>> named_children() const;
  /// The direct children, in registration order.
  std::vector<std::shared_ptr<Module>> children() const;
  /// Every descendant, depth first, with dotted names ("encoder.layers.0"). Unlike
  /// torch, the module itself is not included (it may not be held by a shared_ptr).
  OrderedDict<std::string, std::shared_ptr<Module>> named_modules() const;
  /// named_modules()'s modules: every descendant, not the module itself.
  std::vector<std::shared_ptr<Module>> modules() const;
  int64_t num_parameters() const;  ///< Total element count of parameters() (recursive).

  // ---- checkpoints (PyTorch dotted names: "layers.0.attn.out_proj.weight") ----
  /// Own parameters, own buffers, then each child's (torch's state_dict order).
  NamedTensors state_dict() const;
  /// Copies values INTO the existing tensors (under NoGradGuard; dtype converted),
  /// so handles held elsewhere stay valid. strict: every key must match both ways.
  /// Always an error: duplicate keys, undefined tensors, shape mismatches, a
  /// floating tensor for an integer one or the reverse. Every problem is collected
  /// and thrown in one Error (naming the keys and shapes) before anything is
  /// copied, so a failed load leaves the module untouched. Values are moved to
  /// each tensor's device.
  void load_state_dict(const NamedTensors& state, bool strict = true);
  /// The tensors of a safetensors file (load_safetensors), as
  /// load_state_dict(st.tensors, strict).
  void load_state_dict(const Safetensors& st, bool strict = true) {
    load_state_dict(st.tensors, strict);
  }

  // ---- modes and gradients ----
  /// Sets training mode on this module and every descendant.
  virtual void train(bool on = true);
  /// train(false): evaluation mode (dropout off).
  void eval() { train(false); }
  /// Whether this module is in training mode (a new module is).
  bool is_training() const;
  /// Drops every parameter's gradient (set_to_none semantics).
  void zero_grad();

  /// Converts every floating parameter and buffer to dt in place: the TensorImpl
  /// is re-pointed at new storage, so handles held elsewhere stay valid.
  /// Gradients are dropped. Do this before building an optimizer.
  void to_(DType dt);
  /// Moves every parameter and buffer to dev in place, the same way (handles
  /// stay valid, gradients are dropped). Do this before building an optimizer.
  void to_(Device dev);
  /// to_(dev). torch's spellings of to_ (in place, like torch::nn::Module::to;
  /// no non_blocking, nothing returned).
  void to(Device dev) { to_(dev); }
  /// to_(dt).
  void to(DType dt) { to_(dt); }
  /// to_(dev), then to_(dt).
  void to(Device dev, DType dt) {
    to_(dev);
    to_(dt);
  }

 protected:
  /// An empty module (no state): what a layer's `nullptr` constructor builds
  /// before a value is assigned to it.
  explicit Module(std::nullptr_t) {}
  /// Registers m as the child `name` (names as register_parameter; m not null),
  /// what every register_module form calls.
  void register_child(const std::string& name, std::shared_ptr<Module> m);
  /// The children in registration order (ModuleList, Sequential, ModuleDict).
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& child_list() const;

 private:
  struct State {
    NamedTensors params;
    NamedTensors buffers;
    std::vector<std::pair<std::string, std::shared_ptr<Module>>> children;
    bool training = true;
  };
  State& st() const;
  void check_new_name(const std::string& name, const char* what) const;
  void collect(const std::string& prefix, bool params, bool buffers, bool recurse,
               NamedTensors& out) const;

  std::shared_ptr<State> state_;
};

/// Prints the module tree: children by name, parameters with dtype and shape.
std::ostream& operator<<(std::ostream& os, const Module& m);
/// Prints *m as above, or "nullptr".
template <typename M, std::enable_if_t<std::is_base_of<Module, M>::value, int> = 0>
std::ostream& operator<<(std::ostream& os, const std::shared_ptr<M>& m) {
  if (!m) return os << "nullptr";
  return os << static_cast<const Module&>(*m);
}

/// A shared handle to a module (torch::nn::ModuleHolder), what REMORA_MODULE(Name)
/// derives Name from for a class NameImpl: `Name net(args...)` makes a NameImpl
/// from args, `net->member`, `net(x)` = net->forward(x), copies share the module,
/// `Name net{nullptr}` is empty until assigned.
template <typename Contained>
class ModuleHolder {
 public:
  /// The module class held.
  using ContainedType = Contained;

  /// Default-constructs the module (when it has a default constructor).
  template <typename C = Contained, std::enable_if_t<std::is_default_constructible<C>::value, int> = 0>
  ModuleHolder() : impl_(std::make_shared<C>()) {}
  /// Empty: assign a module before use.
  ModuleHolder(std::nullptr_t) {}  // NOLINT: implicit, as torch's
  /// Holds `module` (shared, not copied).
  ModuleHolder(std::shared_ptr<Contained> module) : impl_(std::move(module)) {}  // NOLINT
  /// Constructs the module from args.
  template <typename Head, typename... Tail,
            std::enable_if_t<!(sizeof...(Tail) == 0 &&
                               (std::is_same<std::decay_t<Head>, std::nullptr_t>::value ||
                                std::is_base_of<ModuleHolder, std::decay_t<Head>>::value ||
                                std::is_same<std::decay_t<Head>, std::shared_ptr<Contained>>::value)),
                             int> = 0>
  explicit ModuleHolder(Head&& head, Tail&&... tail)
      : impl_(std::make_shared<Contained>(std::forward<Head>(head), std::forward<Tail>(tail)...)) {}

  /// The module (an Error when the handle is empty).
  Contained* operator->() { return get(); }
  /// The module (an Error when the handle is empty).
  const Contained* operator->() const { return get(); }
  /// The module (an Error when the handle is empty).
  Contained& operator*() { return *get(); }
  /// The module (an Error when the handle is empty).
  const Contained& operator*() const { return *get(); }
  /// The module (an Error when the handle is empty).
  Contained* get() const {
    REMORA_CHECK(impl_ != nullptr, "ModuleHolder: accessing an empty module handle (built with nullptr "
                                   "and never assigned): assign a module to it first");
    return impl_.get();
  }
  /// The shared_ptr held (an Error when the handle is empty).
  const std::shared_ptr<Contained>& ptr() const {
    get();
    return impl_;
  }
  /// Whether no module is held (built with nullptr and not assigned).
  bool is_empty() const { return impl_ == nullptr; }
  /// The module as a shared_ptr<Module> (for register_module, containers).
  operator std::shared_ptr<Module>() const { return ptr(); }  // NOLINT
  /// The shared_ptr held.
  operator std::shared_ptr<Contained>() const { return ptr(); }  // NOLINT

  /// Calls the module's forward.
  template <typename... Args>
  auto operator()(Args&&... args) -> decltype(std::declval<Contained&>().forward(std::forward<Args>(args)...)) {
    return get()->forward(std::forward<Args>(args)...);
  }

 protected:
  /// The module held; null when empty.
  std::shared_ptr<Contained> impl_;
};

/// Prints the held module, or "nullptr" for an empty handle.
template <typename C>
std::ostream& operator<<(std::ostream& os, const ModuleHolder<C>& m) {
  if (m.is_empty()) return os << "nullptr";
  return os << static_cast<const Module&>(*m);
}

/// A layer held by value: a layer class that is its own handle (its state is
/// shared by copies) gets torch's holder spellings, `fc(x)` and `fc->forward(x)`,
/// and an empty `Name{nullptr}` form. Used inside the class body.
#define REMORA_LAYER_HANDLE(Name)                                                     \
 public:                                                                            \
  template <typename NullT, std::enable_if_t<std::is_same<NullT, std::nullptr_t>::value, int> = 0> \
  explicit Name(NullT) : ::remora::nn::Module(nullptr) {}                          \
  Name* operator->() { return this; }                                               \
  const Name* operator->() const { return this; }                                   \
  std::shared_ptr<Name> ptr() const { return std::make_shared<Name>(*this); }       \
  template <typename... Args>                                                       \
  auto operator()(Args&&... args) const->decltype(this->forward(std::forward<Args>(args)...)) { \
    return this->forward(std::forward<Args>(args)...);                              \
  }

}  // namespace nn
}  // namespace remora

/// torch's TORCH_MODULE: for a module class NameImpl, defines Name, a shared
/// handle to one (nn::ModuleHolder<NameImpl>).
#define REMORA_MODULE(Name)                                         \
  class Name : public ::remora::nn::ModuleHolder<Name##Impl> {      \
   public:                                                          \
    using ::remora::nn::ModuleHolder<Name##Impl>::ModuleHolder;     \
  }

namespace remora {
namespace nn {

/// Numbered children: ModuleList::push_back(m) registers m as "0", "1", ...
class ModuleList : public Module {
 public:
  ModuleList() = default;
  /// ModuleList(nn::Linear(2, 3), std::make_shared<Net>(), ...)
  template <typename... Ms, std::enable_if_t<(sizeof...(Ms) > 0) &&
                                                 !(sizeof...(Ms) == 1 &&
                                                   (std::is_same<std::decay_t<Ms>, ModuleList>::value && ...)),
                                             int> = 0>
  explicit ModuleList(Ms&&... ms) {
    (push_back(std::forward<Ms>(ms)), ...);
  }
  std::string type_name() const override { return "ModuleList"; }
  /// Registers m as the next number ("0", "1", ...) and returns it.
  template <typename M>
  std::shared_ptr<M> push_back(std::shared_ptr<M> m) {
    register_child(std::to_string(size()), m);
    return m;
  }
  /// Registers the module a REMORA_MODULE handle holds.
  template <typename H, std::enable_if_t<detail::holds_module<H>::value, int> = 0>
  void push_back(const H& holder) {
    push_back(holder.ptr());
  }
  /// Registers a copy of a layer value, which shares the layer's state.
  template <typename M, std::enable_if_t<std::is_base_of<Module, std::decay_t<M>>::value, int> = 0>
  void push_back(M&& m) {
    push_back(std::make_shared<std::decay_t<M>>(static_cast<const std::decay_t<M>&>(m)));
  }
  /// Number of modules.
  size_t size() const { return child_list().size(); }
  /// Whether there are no modules.
  bool is_empty() const { return size() == 0; }
  /// The i-th module (an Error naming the size when i is out of range).
  const std::shared_ptr<Module>& operator[](size_t i) const;
  /// The i-th module, as operator[].
  const std::shared_ptr<Module>& ptr(size_t i) const { return (*this)[i]; }
  /// This list, for torch's holder spelling `list->size()`.
  ModuleList* operator->() { return this; }
  /// This list, for torch's holder spelling `list->size()`.
  const ModuleList* operator->() const { return this; }
  /// The i-th child as M (a clear error when it is another type).
  template <typename M>
  std::shared_ptr<M> at(size_t i) const {
    auto p = std::dynamic_pointer_cast<M>((*this)[i]);
    REMORA_CHECK(p != nullptr, "ModuleList::at: element " << i << " is a " << (*this)[i]->type_name()
                                                          << ", not the requested type");
    return p;
  }
  /// Iteration over the modules (shared_ptr<Module>), in order.
  std::vector<std::shared_ptr<Module>>::const_iterator begin() const { return items().begin(); }
  /// The end of the iteration.
  std::vector<std::shared_ptr<Module>>::const_iterator end() const { return items().end(); }

 private:
  const std::vector<std::shared_ptr<Module>>& items() const;
  // The children as a list, rebuilt when a child was added (shared by copies).
  std::shared_ptr<std::vector<std::shared_ptr<Module>>> items_ =
      std::make_shared<std::vector<std::shared_ptr<Module>>>();
};

/// Numbered parameters: ParameterList::push_back(t) registers t as "0", "1", ...
/// (torch.nn.ParameterList's names, e.g. "out_projs.0" in a state dict). An
/// undefined tensor keeps its number but registers nothing (an absent entry).
class ParameterList : public Module {
 public:
  std::string type_name() const override { return "ParameterList"; }
  /// Registers t as the parameter "<index>" (a leaf requiring grad, as
  /// register_parameter) and returns the registered handle; an undefined t takes
  /// its index but registers nothing.
  Tensor push_back(Tensor t) {
    if (t.defined()) t = register_parameter(std::to_string(items_->size()), t);
    items_->push_back(t);
    return t;
  }
  /// Number of entries, absent ones included.
  size_t size() const { return items_->size(); }
  /// The i-th entry (undefined for an absent one); past the end,
  /// std::out_of_range.
  const Tensor& operator[](size_t i) const { return items_->at(i); }

 private:
  std::shared_ptr<std::vector<Tensor>> items_ = std::make_shared<std::vector<Tensor>>();
};

/// Sets a module's training mode for a scope and restores the previous mode on
/// exit, also when an exception leaves the scope:
///   { nn::ModeGuard eval(*model, false); ...evaluate... }
class ModeGuard {
 public:
  /// Sets m (and its descendants) to `training`; m must outlive the guard.
  ModeGuard(Module& m, bool training) : m_(m), prev_(m.is_training()) { m_.train(training); }
  ~ModeGuard() { m_.train(prev_); }
  ModeGuard(const ModeGuard&) = delete;
  ModeGuard& operator=(const ModeGuard&) = delete;

 private:
  Module& m_;
  bool prev_;
};

}  // namespace nn
}  // namespace remora
