// Shared by the model golden tests (Transformer-XL, BERT): a cached golden
// file and an elementwise closeness check that names the tensor and the first
// mismatching element.
#pragma once
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <string>

#include "nn_golden.h"

namespace model_test {

// The golden file REMORA_TEST_DATA/<file>, loaded once; missing or stale files
// fail with a hint to run the generator script.
inline const remora::Safetensors& golden_file(const std::string& file, const std::string& format,
                                              const std::string& script) {
  static std::map<std::string, remora::Safetensors> cache;
  auto it = cache.find(file);
  if (it == cache.end())
    it = cache.emplace(file, nn_test::open_golden(std::string(REMORA_TEST_DATA) + "/" + file, format,
                                                  "1", script)).first;
  return it->second;
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

// |got - want| <= atol + rtol * |want| for every element.
inline void check_close(const remora::Tensor& got, const remora::Tensor& want, double rtol,
                        double atol, const std::string& what) {
  INFO(what);
  REQUIRE(got.defined());
  REQUIRE(got.shape() == want.shape());
  const std::vector<double> a = got.to_vector(), b = want.to_vector();
  for (size_t i = 0; i < a.size(); ++i)
    if (!(std::fabs(a[i] - b[i]) <= atol + rtol * std::fabs(b[i]))) {
      FAIL(what << ": element " << i << " is " << a[i] << ", expected " << b[i]);
    }
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
