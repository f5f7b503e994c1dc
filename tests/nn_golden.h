// SPDX-License-Identifier: BSD-3-Clause
// Shared by the nn / optim tests: the PyTorch goldens written by
// tools/goldens/make_nn_goldens.py (through helpers.h's golden loader and check_close).
#pragma once
#include <catch2/catch.hpp>
#include <string>
#include <remora/remora.h>

#include "helpers.h"

namespace nn_test {

using remora_test::open_golden;

inline const remora::Safetensors& golden() {
  return remora_test::golden_file("golden_nn.safetensors", "remora-golden-nn", "tools/goldens/make_nn_goldens.py");
}

inline const remora::Tensor& g(const std::string& name) { return golden().get(name); }

// A fresh leaf copy of a golden tensor (optionally requiring grad).
inline remora::Tensor leaf(const std::string& name, bool requires_grad = false) {
  remora::Tensor t = g(name).detach().clone();
  if (requires_grad) t.requires_grad_();
  return t;
}

// The module state stored under "<prefix>.state.", names stripped of the prefix.
inline remora::nn::NamedTensors state_of(const std::string& prefix) {
  remora::nn::NamedTensors out;
  const std::string p = prefix + ".state.";
  for (const auto& kv : golden().tensors)
    if (kv.first.compare(0, p.size(), p) == 0) out.emplace_back(kv.first.substr(p.size()), kv.second);
  REQUIRE(!out.empty());
  return out;
}

// max |got - want| <= rtol * max |want| (remora_test::Tol::scaled): relative to the
// tensor's scale, so entries that cancel to ~0 do not demand impossible digits.
inline void check_close(const remora::Tensor& got, const remora::Tensor& want, double rtol,
                        const std::string& what) {
  remora_test::check_close(got, want, remora_test::Tol::scaled(rtol), what);
}

}  // namespace nn_test
