// Shared helpers for the nn / optim tests: the PyTorch goldens written by
// tools/make_nn_goldens.py and a tolerance check.
#pragma once
#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <string>
#include <remora/remora.h>

namespace nn_test {

// Opens a golden file, checking its metadata (format, version); a missing or
// stale file fails with a hint to run the generator script.
inline remora::Safetensors open_golden(const std::string& path, const std::string& format,
                                       const std::string& version, const std::string& script) {
  const std::string hint = "; regenerate with /usr/bin/python3 " + script;
  REMORA_CHECK(std::ifstream(path).good(), format << " goldens: " << path << " is missing" << hint);
  remora::Safetensors s = remora::load_safetensors(path);
  auto get = [&](const char* k) {
    auto it = s.metadata.find(k);
    return it == s.metadata.end() ? std::string("(none)") : it->second;
  };
  REMORA_CHECK(get("format") == format && get("version") == version,
               format << " goldens: " << path << " is stale (format " << get("format")
                      << ", version " << get("version") << "; this test expects " << format
                      << " v" << version << ")" << hint);
  return s;
}

inline const remora::Safetensors& golden() {
  static const remora::Safetensors st =
      open_golden(std::string(REMORA_TEST_DATA) + "/golden_nn.safetensors", "remora-golden-nn",
                  "1", "tools/make_nn_goldens.py");
  return st;
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

// max |got - want| <= rtol * max |want|: relative to the tensor's scale, so
// entries that cancel to ~0 do not demand impossible digits.
inline void check_close(const remora::Tensor& got, const remora::Tensor& want, double rtol,
                        const std::string& what) {
  INFO(what);
  REQUIRE(got.defined());
  REQUIRE(remora::shape_str(got.shape()) == remora::shape_str(want.shape()));
  const std::vector<double> a = got.to_vector(), b = want.to_vector();
  double err = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    err = std::max(err, std::fabs(a[i] - b[i]));
    scale = std::max(scale, std::fabs(b[i]));
  }
  INFO("max abs error " << err << ", max |want| " << scale << ", rtol " << rtol);
  CHECK(err <= rtol * scale);
}

}  // namespace nn_test
