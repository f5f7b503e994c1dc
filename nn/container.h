// SPDX-License-Identifier: BSD-3-Clause
// Containers with torch::nn's spellings: Sequential (forward chaining),
// ModuleDict (modules by name) and Functional (a function as a module).
// ModuleList is in module.h.
//
//   nn::Sequential mlp(nn::Linear(2, 16), nn::ReLU(), nn::Linear(16, 1));
//   mlp->push_back(nn::Sigmoid());
//   Tensor y = mlp(x);                       // = mlp->forward(x): each module in turn
//   nn::Sequential net;                      // or built up: push_back(name, module)
//   net->push_back("fc", nn::Linear(4, 4));
//   net->push_back(nn::Functional([](const Tensor& t) { return t * 2.0; }));
//
// A module enters a Sequential by shared_ptr, by REMORA_MODULE handle or by value
// (a layer value shares its state with the copy the Sequential keeps); its
// forward must take one Tensor and return a Tensor.
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
  using Function = std::function<Tensor(const Tensor&)>;
  explicit Functional(Function f) : fn_(std::make_shared<Function>(std::move(f))) {}
  /// Binds trailing arguments: Functional(softmax, -1) computes softmax(x, -1).
  template <typename F, typename A, typename... As>
  Functional(F f, A a, As... as)
      : Functional(Function([f, a, as...](const Tensor& x) { return f(x, a, as...); })) {}
  std::string type_name() const override { return "Functional"; }
  Tensor forward(const Tensor& x) const;
  REMORA_LAYER_HANDLE(Functional)

 private:
  std::shared_ptr<Function> fn_;
};

namespace detail {
// Calls M::forward(const Tensor&) on a module held by shared_ptr.
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
  template <typename M>
  NamedModule(std::string name, M&& module);
  std::string name;
  std::function<void(Sequential&)> add;  // push_back(name, module) on the Sequential
};

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

  /// Appends a module under the name "<index>" (torch's numbering) or `name`.
  template <typename M>
  void push_back(M&& m) {
    push_back(std::to_string(size()), std::forward<M>(m));
  }
  template <typename M>
  void push_back(const std::string& name, std::shared_ptr<M> m) {
    register_child(name, m);
    fns_->push_back(detail::forward_of(m));
  }
  template <typename H, std::enable_if_t<detail::holds_module<std::decay_t<H>>::value, int> = 0>
  void push_back(const std::string& name, H&& holder) {
    push_back(name, holder.ptr());
  }
  template <typename M, std::enable_if_t<std::is_base_of<Module, std::decay_t<M>>::value, int> = 0>
  void push_back(const std::string& name, M&& m) {
    using T = std::decay_t<M>;
    push_back(name, std::make_shared<T>(static_cast<const T&>(m)));
  }
  /// Appends every module of another Sequential.
  void extend(const Sequential& other);

  /// Runs the modules in order, each on the previous one's output.
  Tensor forward(const Tensor& x) const;
  size_t size() const { return fns_->size(); }
  bool is_empty() const { return size() == 0; }
  /// The i-th module.
  const std::shared_ptr<Module>& ptr(size_t i) const;
  const std::shared_ptr<Module>& operator[](size_t i) const { return ptr(i); }
  /// The i-th module as M (a clear error when it is another type).
  template <typename M>
  std::shared_ptr<M> at(size_t i) const {
    auto p = std::dynamic_pointer_cast<M>(ptr(i));
    REMORA_CHECK(p != nullptr, "Sequential::at: element " << i << " is a " << ptr(i)->type_name()
                                                          << ", not the requested type");
    return p;
  }
  REMORA_LAYER_HANDLE(Sequential)

 private:
  std::shared_ptr<std::vector<std::function<Tensor(const Tensor&)>>> fns_ =
      std::make_shared<std::vector<std::function<Tensor(const Tensor&)>>>();
};

/// Modules by name, in insertion order (torch::nn::ModuleDict).
class ModuleDict : public Module {
 public:
  ModuleDict() = default;
  explicit ModuleDict(const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& items) { update(items); }
  std::string type_name() const override { return "ModuleDict"; }

  /// Adds name -> m (an Error when the name is taken).
  template <typename M>
  std::shared_ptr<M> insert(const std::string& name, std::shared_ptr<M> m) {
    register_child(name, m);
    return m;
  }
  template <typename H, std::enable_if_t<detail::holds_module<std::decay_t<H>>::value, int> = 0>
  void insert(const std::string& name, H&& holder) {
    insert(name, holder.ptr());
  }
  template <typename M, std::enable_if_t<std::is_base_of<Module, std::decay_t<M>>::value, int> = 0>
  void insert(const std::string& name, M&& m) {
    using T = std::decay_t<M>;
    insert(name, std::make_shared<T>(static_cast<const T&>(m)));
  }
  void update(const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& items) {
    for (const auto& kv : items) insert(kv.first, kv.second);
  }
  /// The module under name (an Error naming the key when absent).
  const std::shared_ptr<Module>& operator[](const std::string& name) const;
  template <typename M>
  std::shared_ptr<M> at(const std::string& name) const {
    auto p = std::dynamic_pointer_cast<M>((*this)[name]);
    REMORA_CHECK(p != nullptr, "ModuleDict::at: '" << name << "' is a " << (*this)[name]->type_name()
                                                  << ", not the requested type");
    return p;
  }
  bool contains(const std::string& name) const;
  size_t size() const { return child_list().size(); }
  bool empty() const { return size() == 0; }
  std::vector<std::string> keys() const;
  std::vector<std::shared_ptr<Module>> values() const { return children(); }
  OrderedDict<std::string, std::shared_ptr<Module>> items() const { return named_children(); }
  std::vector<std::pair<std::string, std::shared_ptr<Module>>>::const_iterator begin() const {
    return child_list().begin();
  }
  std::vector<std::pair<std::string, std::shared_ptr<Module>>>::const_iterator end() const {
    return child_list().end();
  }
  ModuleDict* operator->() { return this; }
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
