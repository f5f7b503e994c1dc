// SPDX-License-Identifier: BSD-3-Clause
// Fuzz target: `remora infer --input FILE` id files (cli/input_checks.cpp
// parse_ids, which the driver's read_ids calls with the file's bytes).
// Input: one byte choosing the vocabulary size (1 + b % 64) and, with its top
// bit, whether the config is a language model (plain text is then encoded
// with a character vocabulary); the rest is the file.
#include "../../cli/data.h"
#include "../../cli/experiment.h"
#include "../../cli/input_checks.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace remora;
  if (size < 1) return 0;
  static const data::Vocab vocab = data::Vocab::from_text("the quick brown fox jumps over the lazy dog\n");
  const int64_t V = data[0] & 0x80 ? vocab.size() : 1 + int64_t(data[0] % 64);
  std::function<std::vector<int64_t>(const std::string&)> encode;
  if (data[0] & 0x80) encode = [](const std::string& t) { return vocab.encode(t); };
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    // Both readings of a text file: whole, and one sequence per line.
    driver::IdsFormat format;
    format.lines = data[0] & 0x40;
    format.text = data[0] & 0x20;
    const auto seqs = driver::parse_ids(text, "fuzz", V, encode, format);
    FUZZ_ASSERT(!seqs.empty());
    for (const auto& s : seqs) {
      FUZZ_ASSERT(!s.empty());  // sequences may differ in length, none is empty
      for (int64_t id : s) FUZZ_ASSERT(id >= 0 && id < V);
    }
  } catch (const driver::InputError&) {
  }
  return 0;
}
