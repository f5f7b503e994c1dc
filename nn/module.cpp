// SPDX-License-Identifier: BSD-3-Clause
#include "module.h"

#include <cxxabi.h>

#include <cstdlib>
#include <map>
#include <ostream>
#include <typeinfo>
#include <set>
#include <sstream>

#include "../core/autograd.h"
#include "../core/tensor_impl.h"

namespace remora {
namespace nn {

Module::Module() : state_(std::make_shared<State>()) {}

Module::State& Module::st() const {
  REMORA_CHECK(state_ != nullptr, type_name() << ": this module is empty (built with nullptr and never "
                                              "assigned): assign a module to it before use");
  return *state_;
}

bool Module::is_training() const { return st().training; }

const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& Module::child_list() const {
  return st().children;
}

void Module::check_new_name(const std::string& name, const char* what) const {
  REMORA_CHECK(!name.empty() && name.find('.') == std::string::npos,
               type_name() << "::" << what << ": name '" << name
                           << "' must be non-empty and contain no '.'");
  auto taken = [&](const auto& v) {
    for (const auto& kv : v)
      if (kv.first == name) return true;
    return false;
  };
  REMORA_CHECK(!taken(st().params) && !taken(st().buffers) && !taken(st().children),
               type_name() << "::" << what << ": the name '" << name
                           << "' is already registered in this module");
}

Tensor Module::register_parameter(const std::string& name, Tensor t, bool requires_grad) {
  check_new_name(name, "register_parameter");
  REMORA_CHECK(t.defined(), type_name() << "::register_parameter: '" << name << "' is undefined");
  REMORA_CHECK(is_floating(t.dtype()), type_name() << "::register_parameter: '" << name
                                                   << "' must be floating, got " << t.str());
  if (!t.is_leaf()) t = t.detach();
  t.requires_grad_(requires_grad);
  st().params.emplace_back(name, t);
  return t;
}

Tensor Module::register_buffer(const std::string& name, Tensor t) {
  check_new_name(name, "register_buffer");
  REMORA_CHECK(t.defined(), type_name() << "::register_buffer: '" << name << "' is undefined");
  if (t.requires_grad()) t = t.detach();
  st().buffers.emplace_back(name, t);
  return t;
}

void Module::register_child(const std::string& name, std::shared_ptr<Module> m) {
  check_new_name(name, "register_module");
  REMORA_CHECK(m != nullptr, type_name() << "::register_module: '" << name << "' is null");
  st().children.emplace_back(name, std::move(m));
}

void Module::collect(const std::string& prefix, bool params, bool buffers, bool recurse,
                     NamedTensors& out) const {
  const State& s = st();
  if (params)
    for (const auto& kv : s.params) out.emplace_back(prefix + kv.first, kv.second);
  if (buffers)
    for (const auto& kv : s.buffers) out.emplace_back(prefix + kv.first, kv.second);
  if (recurse)
    for (const auto& kv : s.children)
      kv.second->collect(prefix + kv.first + ".", params, buffers, true, out);
}

OrderedDict<std::string, Tensor> Module::named_parameters(bool recurse) const {
  NamedTensors out;
  collect("", true, false, recurse, out);
  return out;
}

OrderedDict<std::string, Tensor> Module::named_buffers(bool recurse) const {
  NamedTensors out;
  collect("", false, true, recurse, out);
  return out;
}

std::vector<Tensor> Module::buffers(bool recurse) const {
  NamedTensors out;
  collect("", false, true, recurse, out);
  std::vector<Tensor> ts;
  for (auto& kv : out) ts.push_back(kv.second);
  return ts;
}

NamedTensors Module::state_dict() const {
  NamedTensors out;
  collect("", true, true, true, out);
  return out;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
  NamedTensors named;
  collect("", true, false, recurse, named);
  std::vector<Tensor> out;
  for (auto& kv : named) out.push_back(kv.second);
  return out;
}

OrderedDict<std::string, std::shared_ptr<Module>> Module::named_children() const {
  OrderedDict<std::string, std::shared_ptr<Module>> out;
  for (const auto& kv : st().children) out.insert(kv.first, kv.second);
  return out;
}

std::vector<std::shared_ptr<Module>> Module::children() const {
  std::vector<std::shared_ptr<Module>> out;
  for (const auto& kv : st().children) out.push_back(kv.second);
  return out;
}

OrderedDict<std::string, std::shared_ptr<Module>> Module::named_modules() const {
  OrderedDict<std::string, std::shared_ptr<Module>> out;
  for (const auto& kv : st().children) {
    out.insert(kv.first, kv.second);
    for (const auto& sub : kv.second->named_modules()) out.insert(kv.first + "." + sub.first, sub.second);
  }
  return out;
}

std::vector<std::shared_ptr<Module>> Module::modules() const { return named_modules().values(); }

namespace {
// The name printed for a module: its type_name(), or for a class that keeps the
// default ("Module") its C++ class name without namespaces, as torch prints it.
std::string display_name(const Module& m) {
  std::string n = m.type_name();
  if (n != "Module") return n;
  int status = 0;
  char* d = abi::__cxa_demangle(typeid(m).name(), nullptr, nullptr, &status);
  if (status != 0 || d == nullptr) return n;
  std::string full(d);
  std::free(d);
  if (full.find('<') == std::string::npos) {
    const size_t colon = full.rfind("::");
    if (colon != std::string::npos) full = full.substr(colon + 2);
  }
  return full;
}
}  // namespace

void Module::pretty_print(std::ostream& os, int indent) const {
  const State& s = st();
  const std::string pad(size_t(indent) + 2, ' ');
  os << display_name(*this);
  if (s.children.empty()) {
    os << "(" << extra_repr() << ")";
    if (!s.params.empty()) {
      os << " {";
      for (size_t i = 0; i < s.params.size(); ++i)
        os << (i ? ", " : "") << s.params[i].first << ": " << dtype_name(s.params[i].second.dtype())
           << shape_str(s.params[i].second.shape());
      os << "}";
    }
    return;
  }
  os << "(";
  const std::string extra = extra_repr();
  if (!extra.empty()) os << "\n" << pad << extra;
  for (const auto& kv : s.params)
    os << "\n" << pad << "(" << kv.first << "): Parameter " << dtype_name(kv.second.dtype())
       << shape_str(kv.second.shape());
  for (const auto& kv : s.children) {
    os << "\n" << pad << "(" << kv.first << "): ";
    kv.second->pretty_print(os, indent + 2);
  }
  os << "\n" << std::string(size_t(indent), ' ') << ")";
}

std::ostream& operator<<(std::ostream& os, const Module& m) {
  m.pretty_print(os);
  return os;
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (const Tensor& p : parameters()) n += p.numel();
  return n;
}

void Module::load_state_dict(const NamedTensors& state, bool strict) {
  const NamedTensors own = state_dict();
  std::map<std::string, Tensor> own_map(own.begin(), own.end());
  std::vector<std::string> problems, unexpected, missing;
  std::set<std::string> seen;
  // Validate everything first, so a failed load leaves the module untouched.
  for (const auto& kv : state) {
    if (!seen.insert(kv.first).second) {
      problems.push_back("duplicate key '" + kv.first + "'");
      continue;
    }
    auto it = own_map.find(kv.first);
    if (it == own_map.end()) {
      unexpected.push_back(kv.first);
      continue;
    }
    if (!kv.second.defined()) {
      problems.push_back("key '" + kv.first + "' holds an undefined tensor");
      continue;
    }
    if (kv.second.shape() != it->second.shape())
      problems.push_back("size mismatch for '" + kv.first + "': checkpoint has " +
                         shape_str(kv.second.shape()) + ", the model has " +
                         shape_str(it->second.shape()));
    else if (is_floating(it->second.dtype()) != is_floating(kv.second.dtype()))
      problems.push_back("dtype mismatch for '" + kv.first + "': checkpoint has " +
                         dtype_name(kv.second.dtype()) + ", the model has " +
                         dtype_name(it->second.dtype()));
  }
  for (const auto& kv : own)
    if (!seen.count(kv.first)) missing.push_back(kv.first);

  auto join = [](const std::vector<std::string>& v) {
    std::ostringstream os;
    for (size_t i = 0; i < v.size() && i < 20; ++i) os << (i ? ", " : "") << "'" << v[i] << "'";
    if (v.size() > 20) os << ", ... (" << v.size() << " in all)";
    return os.str();
  };
  if (strict && !missing.empty()) problems.push_back("missing keys: " + join(missing));
  if (strict && !unexpected.empty()) problems.push_back("unexpected keys: " + join(unexpected));
  if (!problems.empty()) {
    std::ostringstream os;
    os << type_name() << "::load_state_dict: " << problems.size() << " problem(s):";
    for (const auto& p : problems) os << "\n  " << p;
    if (strict && (!missing.empty() || !unexpected.empty()))
      os << "\n(fix: check the checkpoint's names against named_parameters(), or pass "
            "strict=false to load a subset)";
    throw Error(os.str());
  }

  NoGradGuard no_grad;
  for (const auto& kv : state) {
    auto it = own_map.find(kv.first);
    if (it != own_map.end()) {
      Tensor dst = it->second;  // handle to the module's own impl
      dst.copy_(kv.second.to(dst.device()));
    }
  }
}

void Module::train(bool on) {
  st().training = on;
  for (auto& kv : st().children) kv.second->train(on);
}

void Module::zero_grad() {
  for (Tensor& p : parameters()) p.zero_grad();
}

void Module::to_(DType dt) {
  REMORA_CHECK(is_floating(dt), type_name() << "::to_: parameters must stay floating, got "
                                            << dtype_name(dt));
  NoGradGuard no_grad;
  for (auto& kv : state_dict()) {
    Tensor t = kv.second;
    if (!is_floating(t.dtype()) || t.dtype() == dt) continue;
    t.set_data_(t.detach().to(dt).contiguous());  // every handle sees it; grad dropped
  }
}

void Module::to_(Device dev) {
  NoGradGuard no_grad;
  for (auto& kv : state_dict()) {
    Tensor t = kv.second;
    if (t.device() == dev) continue;
    t.set_data_(t.detach().to(dev));  // contiguous on the new device; grad dropped
  }
}

const std::vector<std::shared_ptr<Module>>& ModuleList::items() const {
  const auto& ch = child_list();
  if (items_->size() != ch.size()) {
    items_->clear();
    for (const auto& kv : ch) items_->push_back(kv.second);
  }
  return *items_;
}

const std::shared_ptr<Module>& ModuleList::operator[](size_t i) const {
  REMORA_CHECK(i < size(), "ModuleList: index " << i << " out of range (size " << size() << ")");
  return items()[i];
}

}  // namespace nn
}  // namespace remora
