// SPDX-License-Identifier: BSD-3-Clause
#include "container.h"

namespace remora {
namespace nn {

Tensor Functional::forward(const Tensor& x) const {
  REMORA_CHECK(fn_ && *fn_, "Functional: no function (built with nullptr?)");
  return (*fn_)(x);
}

void Sequential::extend(const Sequential& other) {
  const auto& ch = other.child_list();
  for (size_t i = 0; i < ch.size(); ++i) {
    register_child(std::to_string(size()), ch[i].second);
    fns_->push_back((*other.fns_)[i]);
  }
}

Tensor Sequential::forward(const Tensor& x) const {
  REMORA_CHECK(!fns_->empty(), "Sequential::forward: the Sequential is empty; push_back modules first");
  Tensor y = x;
  for (const auto& f : *fns_) y = f(y);
  return y;
}

const std::shared_ptr<Module>& Sequential::ptr(size_t i) const {
  REMORA_CHECK(i < size(), "Sequential: index " << i << " out of range (size " << size() << ")");
  return child_list()[i].second;
}

const std::shared_ptr<Module>& ModuleDict::operator[](const std::string& name) const {
  for (const auto& kv : child_list())
    if (kv.first == name) return kv.second;
  std::string keys;
  for (const auto& kv : child_list()) keys += (keys.empty() ? "" : ", ") + kv.first;
  REMORA_CHECK(false, "ModuleDict: no module named '" << name << "' (it has: " << keys << ")");
  return child_list().front().second;  // not reached
}

bool ModuleDict::contains(const std::string& name) const {
  for (const auto& kv : child_list())
    if (kv.first == name) return true;
  return false;
}

std::vector<std::string> ModuleDict::keys() const {
  std::vector<std::string> out;
  for (const auto& kv : child_list()) out.push_back(kv.first);
  return out;
}

}  // namespace nn
}  // namespace remora
