// SPDX-License-Identifier: BSD-3-Clause
// Fuzz target: the safetensors reader (core/safetensors.cpp), header and data.
// Input: the bytes of a .safetensors file. Properties checked on what parses:
// it serialises and parses back to the same names, dtypes, shapes and bytes,
// and the checkpoint NaN/Inf check either passes or raises an InputError.
#include <cstring>

#include "../../core/safetensors.h"
#include "../../cli/experiment.h"
#include "../../cli/input_checks.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace remora;
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  Safetensors st;
  try {
    st = parse_safetensors(bytes, "fuzz");
  } catch (const Error&) {
    return 0;  // rejected with a message: fine
  }
  for (const auto& kv : st.tensors) FUZZ_ASSERT(kv.second.defined());
  const std::string again = serialize_safetensors(st.tensors, st.metadata);
  const Safetensors back = parse_safetensors(again, "round trip");
  FUZZ_ASSERT(back.tensors.size() == st.tensors.size());
  FUZZ_ASSERT(back.metadata == st.metadata);
  for (size_t i = 0; i < st.tensors.size(); ++i) {
    const Tensor &a = st.tensors[i].second, &b = back.tensors[i].second;
    FUZZ_ASSERT(back.tensors[i].first == st.tensors[i].first);
    FUZZ_ASSERT(a.dtype() == b.dtype() && a.shape() == b.shape());
    const size_t nb = size_t(a.numel()) * dtype_size(a.dtype());
    FUZZ_ASSERT(nb == 0 || std::memcmp(a.raw_data(), b.raw_data(), nb) == 0);
    FUZZ_ASSERT(st.contains(st.tensors[i].first));
  }
  try {
    remora::driver::check_finite(st.tensors, "fuzz");
  } catch (const remora::driver::InputError&) {
  }
  return 0;
}
