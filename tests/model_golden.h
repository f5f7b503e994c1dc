// SPDX-License-Identifier: BSD-3-Clause
// Shared by the model golden tests (Transformer-XL, BERT, SRU++, StarSaber, RelRNN):
// the golden loader and check_close of helpers.h with the (rtol, atol) spelling
// these tests use.
#pragma once
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <string>

#include "nn_golden.h"

namespace model_test {

// The golden file REMORA_TEST_DATA/<file> (version 1), loaded once: helpers.h's loader.
inline const remora::Safetensors& golden_file(const std::string& file, const std::string& format,
                                              const std::string& script) {
  return remora_test::golden_file(file, format, script, "1");
}

// The tensors of a golden file under "case_<key>.param.", with that prefix cut:
// the parameters a golden case was computed with, under the model's names.
inline remora::nn::NamedTensors case_params(const remora::Safetensors& g, const std::string& key) {
  remora::nn::NamedTensors sd;
  const std::string pre = "case_" + key + ".param.";
  for (const auto& kv : g.tensors)
    if (kv.first.rfind(pre, 0) == 0) sd.emplace_back(kv.first.substr(pre.size()), kv.second);
  return sd;
}

// |got - want| <= atol + rtol * |want| for every element (NOTE the order: rtol
// first); the same check as remora_test::check_close(got, want, Tol::elementwise(atol, rtol)).
inline void check_close(const remora::Tensor& got, const remora::Tensor& want, double rtol,
                        double atol, const std::string& what) {
  remora_test::check_close(got, want, remora_test::Tol::elementwise(atol, rtol), what);
}

// Every parameter's gradient against the golden's "<c>grad.<name>", and as many
// parameters as the golden has gradients.
inline void check_param_grads(const remora::nn::Module& m, const remora::Safetensors& g, const std::string& c,
                              double rtol, double atol) {
  size_t n = 0;
  for (const auto& kv : m.named_parameters()) {
    check_close(kv.second.grad(), g.get(c + "grad." + kv.first), rtol, atol, c + "grad." + kv.first);
    ++n;
  }
  size_t want = 0;
  for (const auto& kv : g.tensors) want += kv.first.rfind(c + "grad.", 0) == 0;
  CHECK(n == want);
}

}  // namespace model_test
