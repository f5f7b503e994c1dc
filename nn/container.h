// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// Containers with torch::nn's spellings: Sequential (forward chaining),
/// ModuleDict (modules by name) and Functional (a function as a module).
/// ModuleList is in module.h.
///
///     nn::Sequential mlp(nn::Linear(2, 16), nn::ReLU(), nn::Linear(16, 1));
///     mlp->push_back(nn::Sigmoid());
///     Tensor y = mlp(x);                       // = mlp->forward(x): each module in turn
///     nn::Sequential net;                      // or built up: push_back(name, module)
///     net->push_back("fc", nn::Linear(4, 4));
///     net->push_back(nn::Functional([](const Tensor& t) { return t * 2.0; }));
///
/// A module enters a Sequential by shared_ptr, by REMORA_MODULE handle or by value
/// (a layer value shares its state with the copy the Sequential keeps); its
/// forward must take one Tensor and return a Tensor. Names follow
/// Module::register_parameter's rules: a name that is empty, holds a '.' or is
/// taken is an Error.
#pragma once
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "module.h"

namespace remora {
namespace nn {

/// A function as a module (torch::nn::Functional): Functional(f) or
/// Functional(f, extra args...) calls f(x, extra args...).
class Functional : public Module {
 public:
  /// The function type held: one Tensor in, one Tensor out.
  using Function = std::function<Tensor(const Tensor&)>;
  /// Wraps f (copies of the module share it).
  explicit Functional(Function f) : fn_(std::make_shared<Function>(std::move(f))) {}
  /// Binds trailing arguments: Functional(softmax, -1) computes softmax(x, -1).
  template <typename F, typename A, typename... As>
  Functional(F f, A a, As... as)
      : Functional(Function([f, a, as...](const Tensor& x) { return f(x, a, as...); })) {}
  std::string type_name() const override { return "Functional"; }
  /// f(x); an Error when the module holds no function. Shapes, dtypes and
  /// gradients are f's.
  Tensor forward(const Tensor& x) const;
  /// An empty module (torch's `Functional{nullptr}`), holding no state until one is
  /// assigned to it.
  REMORA_LAYER_HANDLE(Functional)
  /// \fn operator->()
  /// This module, for torch's holder spelling `m->forward(...)`.

  /// \fn operator->() const
  /// This module, for torch's holder spelling `m->forward(...)`.

  /// \fn ptr() const
  /// A new shared_ptr to a copy of this module, sharing its state.

  /// \fn operator()(Args&&... args) const
  /// forward(args...), torch's call spelling.

 private:
  std::shared_ptr<Function> fn_;
};

namespace detail {
/// A function calling M::forward(const Tensor&) on the module m points to (a
/// compile error when that forward does not return a Tensor). It keeps a raw
/// pointer: the module must outlive it (a Sequential's child list keeps it alive).
template <typename M>
std::function<Tensor(const Tensor&)> forward_of(const std::shared_ptr<M>& m) {
  static_assert(std::is_convertible<decltype(std::declval<M&>().forward(std::declval<const Tensor&>())), Tensor>::value,
                "Sequential: a module's forward must take one Tensor and return a Tensor");
  M* raw = m.get();  // the Sequential's child list keeps the module alive
  return [raw](const Tensor& x) -> Tensor { return raw->forward(x); };
}
}  // namespace detail

class Sequential;

/// A name and a module for Sequential's named form (torch's NamedAnyModule):
///   nn::Sequential seq({{"fc", nn::Linear(4, 8)}, {"act", nn::ReLU()}});
struct NamedModule {
  /// A name and a module: a shared_ptr, a REMORA_MODULE handle or a layer value
  /// (copied, sharing its state).
  template <typename M>
  NamedModule(std::string name, M&& module);
  /// The module's name in the Sequential.
  std::string name;
  std::function<void(Sequential&)> add;  ///< Adds the module to a Sequential: push_back(name, module).
};

/// Modules run in order, each on the previous one's output (torch::nn::Sequential,
/// with modules whose forward takes and returns one Tensor). Children are named
/// "0", "1", ... or by the names given. Copies share the modules.
class Sequential : public Module {
 public:
  Sequential() = default;
  /// Named modules, in order.
  Sequential(std::initializer_list<NamedModule> named) {
    for (const auto& nm : named) nm.add(*this);
  }
  /// Sequential(m1, m2, ...): each a shared_ptr, a REMORA_MODULE handle or a layer value.
  template <typename... Ms,
            std::enable_if_t<(sizeof...(Ms) > 0) &&
                                 !(sizeof...(Ms) == 1 &&
                                   (std::is_same<std::decay_t<Ms>, Sequential>::value || ...)) &&
                                 !(sizeof...(Ms) == 1 && (std::is_same<std::decay_t<Ms>, std::nullptr_t>::value || ...)),
                             int> = 0>
  explicit Sequential(Ms&&... ms) {
    (push_back(std::forward<Ms>(ms)), ...);
  }
  std::string type_name() const override { return "Sequential"; }

  /// Appends a module (a shared_ptr, a REMORA_MODULE handle or a layer value)
  /// under the name "<index>" (torch's numbering).
  template <typename M>
  void push_back(M&& m) {
    push_back(std::to_string(size()), std::forward<M>(m));
  }
  /// Appends a module held by shared_ptr under `name`.
  template <typename M>
  void push_back(const std::string& name, std::shared_ptr<M> m) {
    register_child(name, m);
    fns_->push_back(detail::forward_of(m));
  }
  /// Appends the module a REMORA_MODULE handle holds under `name`.
  template <typename H, std::enable_if_t<detail::holds_module<std::decay_t<H>>::value, int> = 0>
  void push_back(const std::string& name, H&& holder) {
    push_back(name, holder.ptr());
  }
  /// Appends a copy of a layer value (sharing its state) under `name`.
  template <typename M, std::enable_if_t<std::is_base_of<Module, std::decay_t<M>>::value, int> = 0>
  void push_back(const std::string& name, M&& m) {
    using T = std::decay_t<M>;
    push_back(name, std::make_shared<T>(static_cast<const T&>(m)));
  }
  /// Appends every module of another Sequential under the next numbers (its
  /// names are not kept); the modules are shared, not copied.
  void extend(const Sequential& other);

  /// Runs the modules in order, each on the previous one's output; an Error when
  /// the Sequential is empty. Gradients flow through every module.
  Tensor forward(const Tensor& x) const;
  /// Number of modules.
  size_t size() const { return fns_->size(); }
  /// Whether there are no modules.
  bool is_empty() const { return size() == 0; }
  /// The i-th module (an Error naming the size when i is out of range).
  const std::shared_ptr<Module>& ptr(size_t i) const;
  /// The i-th module, as ptr(i).
  const std::shared_ptr<Module>& operator[](size_t i) const { return ptr(i); }
  /// The i-th module as M (a clear error when it is another type).
  template <typename M>
  std::shared_ptr<M> at(size_t i) const {
    auto p = std::dynamic_pointer_cast<M>(ptr(i));
    REMORA_CHECK(p != nullptr, "Sequential::at: element " << i << " is a " << ptr(i)->type_name()
                                                          << ", not the requested type");
    return p;
  }
  /// An empty Sequential (torch's `Sequential{nullptr}`), holding no state until one is
  /// assigned to it.
  REMORA_LAYER_HANDLE(Sequential)
  /// \fn operator->()
  /// This Sequential, for torch's holder spelling `m->forward(...)`.

  /// \fn operator->() const
  /// This Sequential, for torch's holder spelling `m->forward(...)`.

  /// \fn ptr() const
  /// A new shared_ptr to a copy of this Sequential, sharing its state.

  /// \fn operator()(Args&&... args) const
  /// forward(args...), torch's call spelling.

 private:
  std::shared_ptr<std::vector<std::function<Tensor(const Tensor&)>>> fns_ =
      std::make_shared<std::vector<std::function<Tensor(const Tensor&)>>>();
};

/// Modules by name, in insertion order (torch::nn::ModuleDict).
class ModuleDict : public Module {
 public:
  ModuleDict() = default;
  /// The items inserted in order (as update).
  explicit ModuleDict(const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& items) { update(items); }
  std::string type_name() const override { return "ModuleDict"; }

  /// Adds name -> m (an Error when the name is taken).
  template <typename M>
  std::shared_ptr<M> insert(const std::string& name, std::shared_ptr<M> m) {
    register_child(name, m);
    return m;
  }
  /// Adds the module a REMORA_MODULE handle holds under `name`.
  template <typename H, std::enable_if_t<detail::holds_module<std::decay_t<H>>::value, int> = 0>
  void insert(const std::string& name, H&& holder) {
    insert(name, holder.ptr());
  }
  /// Adds a copy of a layer value (sharing its state) under `name`.
  template <typename M, std::enable_if_t<std::is_base_of<Module, std::decay_t<M>>::value, int> = 0>
  void insert(const std::string& name, M&& m) {
    using T = std::decay_t<M>;
    insert(name, std::make_shared<T>(static_cast<const T&>(m)));
  }
  /// insert() of each pair in order. A name already present is an Error (torch's
  /// update replaces it).
  void update(const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& items) {
    for (const auto& kv : items) insert(kv.first, kv.second);
  }
  /// The module under name (an Error naming the key when absent).
  const std::shared_ptr<Module>& operator[](const std::string& name) const;
  /// The module under name as M (an Error when absent or of another type).
  template <typename M>
  std::shared_ptr<M> at(const std::string& name) const {
    auto p = std::dynamic_pointer_cast<M>((*this)[name]);
    REMORA_CHECK(p != nullptr, "ModuleDict::at: '" << name << "' is a " << (*this)[name]->type_name()
                                                  << ", not the requested type");
    return p;
  }
  /// Whether a module is registered under name.
  bool contains(const std::string& name) const;
  /// Number of modules.
  size_t size() const { return child_list().size(); }
  /// Whether there are no modules.
  bool empty() const { return size() == 0; }
  /// The names, in insertion order.
  std::vector<std::string> keys() const;
  /// The modules, in insertion order.
  std::vector<std::shared_ptr<Module>> values() const { return children(); }
  /// The names and modules, in insertion order.
  OrderedDict<std::string, std::shared_ptr<Module>> items() const { return named_children(); }
  /// Iteration over (name, module) pairs, in insertion order.
  std::vector<std::pair<std::string, std::shared_ptr<Module>>>::const_iterator begin() const {
    return child_list().begin();
  }
  /// The end of the iteration.
  std::vector<std::pair<std::string, std::shared_ptr<Module>>>::const_iterator end() const {
    return child_list().end();
  }
  /// This dict, for torch's holder spelling `dict->size()`.
  ModuleDict* operator->() { return this; }
  /// This dict, for torch's holder spelling `dict->size()`.
  const ModuleDict* operator->() const { return this; }
};

template <typename M>
NamedModule::NamedModule(std::string n, M&& module) : name(std::move(n)) {
  using T = std::decay_t<M>;
  if constexpr (detail::holds_module<T>::value) {
    auto p = module.ptr();
    add = [p, nm = name](Sequential& s) { s.push_back(nm, p); };
  } else if constexpr (std::is_base_of<Module, T>::value) {
    auto p = std::make_shared<T>(static_cast<const T&>(module));
    add = [p, nm = name](Sequential& s) { s.push_back(nm, p); };
  } else {
    auto p = module;  // a shared_ptr
    add = [p, nm = name](Sequential& s) { s.push_back(nm, p); };
  }
}

}  // namespace nn
}  // namespace remora
