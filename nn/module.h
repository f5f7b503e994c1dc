// nn::Module: the base of every layer (libtorch's habits).
//
//   struct Block : nn::Module {
//     std::shared_ptr<nn::Linear> fc;
//     Tensor scale;
//     Block() {
//       fc = register_module("fc", std::make_shared<nn::Linear>(4, 4));
//       scale = register_parameter("scale", Tensor::ones({4}));
//     }
//     Tensor forward(const Tensor& x) { return fc->forward(x) * scale; }
//   };
//   auto b = std::make_shared<Block>();
//   b->named_parameters();   // {"scale", "fc.weight", "fc.bias"}: torch's order, own first
//
// Modules are held by std::shared_ptr. A parameter is a leaf Tensor with
// requires_grad; the module keeps a handle to the same TensorImpl as the member,
// so load_state_dict / init / to_() change values in place and every handle
// (the member, an optimizer's list) sees the change.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "../core/safetensors.h"
#include "../core/tensor.h"

namespace remora {
namespace nn {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

class Module {
 public:
  virtual ~Module() = default;
  Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  /// The class name, for error messages and printing ("Linear", ...).
  virtual std::string type_name() const { return "Module"; }

  // ---- registration ----
  /// Makes t a leaf that requires grad (detaching it if it has history) and
  /// registers it under `name`; returns the handle to keep as a member.
  Tensor register_parameter(const std::string& name, Tensor t, bool requires_grad = true);
  /// Registers state that is saved and loaded but not trained (no grad).
  Tensor register_buffer(const std::string& name, Tensor t);
  /// Registers a child; its parameters appear as "name.<param>".
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    register_child(name, m);
    return m;
  }

  // ---- traversal: torch's order. A module's own tensors first (in registration
  // order), then each child's, depth first, children in registration order. ----
  std::vector<Tensor> parameters(bool recurse = true) const;
  NamedTensors named_parameters(bool recurse = true) const;
  NamedTensors named_buffers(bool recurse = true) const;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const;
  std::vector<std::shared_ptr<Module>> children() const;
  int64_t num_parameters() const;  // total element count

  // ---- checkpoints (PyTorch dotted names: "layers.0.attn.out_proj.weight") ----
  /// Own parameters, own buffers, then each child's (torch's state_dict order).
  NamedTensors state_dict() const;
  /// Copies values INTO the existing tensors (under NoGradGuard; dtype converted),
  /// so handles held elsewhere stay valid. strict: every key must match both ways.
  /// Shape mismatches are always an error. Errors name the key and both shapes.
  void load_state_dict(const NamedTensors& state, bool strict = true);
  void load_state_dict(const Safetensors& st, bool strict = true) {
    load_state_dict(st.tensors, strict);
  }

  // ---- modes and gradients ----
  /// Sets training mode on this module and every descendant.
  virtual void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  /// Drops every parameter's gradient (set_to_none semantics).
  void zero_grad();

  /// Converts every floating parameter and buffer to dt in place: the TensorImpl
  /// is re-pointed at new storage, so handles held elsewhere stay valid.
  /// Gradients are dropped. Do this before building an optimizer.
  void to_(DType dt);
  /// Moves every parameter and buffer to dev in place, the same way (handles
  /// stay valid, gradients are dropped). Do this before building an optimizer.
  void to_(Device dev);

 protected:
  void register_child(const std::string& name, std::shared_ptr<Module> m);

 private:
  void check_new_name(const std::string& name, const char* what) const;
  void collect(const std::string& prefix, bool params, bool buffers, bool recurse,
               NamedTensors& out) const;

  NamedTensors params_;
  NamedTensors buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

/// Numbered children: ModuleList::push_back(m) registers m as "0", "1", ...
class ModuleList : public Module {
 public:
  std::string type_name() const override { return "ModuleList"; }
  template <typename M>
  std::shared_ptr<M> push_back(std::shared_ptr<M> m) {
    register_child(std::to_string(items_.size()), m);
    items_.push_back(m);
    return m;
  }
  size_t size() const { return items_.size(); }
  const std::shared_ptr<Module>& operator[](size_t i) const;
  /// The i-th child as M (a clear error when it is another type).
  template <typename M>
  std::shared_ptr<M> at(size_t i) const {
    auto p = std::dynamic_pointer_cast<M>((*this)[i]);
    REMORA_CHECK(p != nullptr, "ModuleList::at: element " << i << " is a " << (*this)[i]->type_name()
                                                          << ", not the requested type");
    return p;
  }
  std::vector<std::shared_ptr<Module>>::const_iterator begin() const { return items_.begin(); }
  std::vector<std::shared_ptr<Module>>::const_iterator end() const { return items_.end(); }

 private:
  std::vector<std::shared_ptr<Module>> items_;
};

/// Numbered parameters: ParameterList::push_back(t) registers t as "0", "1", ...
/// (torch.nn.ParameterList's names, e.g. "out_projs.0" in a state dict). An
/// undefined tensor keeps its number but registers nothing (an absent entry).
class ParameterList : public Module {
 public:
  std::string type_name() const override { return "ParameterList"; }
  Tensor push_back(Tensor t) {
    if (t.defined()) t = register_parameter(std::to_string(items_.size()), t);
    items_.push_back(t);
    return t;
  }
  size_t size() const { return items_.size(); }
  const Tensor& operator[](size_t i) const { return items_.at(i); }

 private:
  std::vector<Tensor> items_;
};

/// Sets a module's training mode for a scope and restores the previous mode on
/// exit, also when an exception leaves the scope:
///   { nn::ModeGuard eval(*model, false); ...evaluate... }
class ModeGuard {
 public:
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
