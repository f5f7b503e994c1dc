// SPDX-License-Identifier: BSD-3-Clause
// Fuzz target: a HuggingFace BERT directory (models/bert.cpp load_hf_directory:
// config.json + model.safetensors). Input: config.json's bytes, the separator
// "\n--model.safetensors--\n", then model.safetensors's bytes. Both are
// written into a directory that load_hf_directory reads.
//
// Configs whose model would be large (over kMaxParams = 20000 parameters, e.g. the
// defaults: BERT-base) are only parsed, not built: allocating 110M parameters
// per input would make the run useless, and it is not a parser question.
#include <nlohmann/json.hpp>

#include "../../models/bert.h"
#include "fuzz_util.h"

namespace {
constexpr double kMaxParams = 2e4;

double approx_params(const remora::models::BertConfig& c) {
  const double h = double(c.hidden_size), I = double(c.intermediate_size), L = double(c.num_hidden_layers);
  const double emb = (double(c.vocab_size) + double(c.max_position_embeddings) + double(c.type_vocab_size) + 2) * h;
  const double layer = 4 * h * h + 2 * h * I + 9 * h + I;
  return emb + L * layer + 2 * h * h + double(c.vocab_size) + (double(c.num_classes) + 2) * (h + 1) + 8 * h;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace remora;
  const std::string in(reinterpret_cast<const char*>(data), size);
  const std::string sep = "\n--model.safetensors--\n";
  const size_t at = in.find(sep);
  const std::string cfg = in.substr(0, at), weights = at == std::string::npos ? "" : in.substr(at + sep.size());
  try {
    const nlohmann::json j = nlohmann::json::parse(cfg);
    const models::BertConfig c = models::BertConfig::from_hf_json(j, "fuzz");
    if (!(approx_params(c) <= kMaxParams)) return 0;
  } catch (const nlohmann::json::exception&) {
    // load_hf_directory reports malformed JSON itself (below)
  } catch (const Error&) {
    // and so an invalid config
  }
  const std::string& dir = fuzz::temp_dir();
  fuzz::write_file(dir + "/config.json", cfg);
  fuzz::write_file(dir + "/model.safetensors", weights);
  try {
    auto m = models::load_hf_directory(dir, DType::f32);
    FUZZ_ASSERT(m != nullptr);
  } catch (const Error&) {
  }
  return 0;
}
