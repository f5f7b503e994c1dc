// SPDX-License-Identifier: BSD-3-Clause
// Fuzz target: the labelled-text readers (cli/data/labelled.cpp): TSV, CSV
// (RFC 4180 quoting) and JSON Lines rows from a file. Input: one mode byte,
// then the file's bytes.
//   mode % 3: the format (tsv, csv, jsonl); mode / 3 % 2: a header row or
//   column numbers; mode / 6 % 2: a second text field; mode / 12 % 2: the
//   label required (training) or optional (inference)
// Properties: every row handed out has a non-empty first text and, where the
// label is required, a label; row lines start at 1 and never go back; the
// row count returned is the number of rows handed out. A bad row is an
// InputError (a remora::Error), never anything else.
#include "../../cli/labelled_data.h"
#include "../../core/error.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace remora;
  if (size < 1) return 0;
  const uint8_t mode = data[0];
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  const driver::TableFormat format = mode % 3 == 0   ? driver::TableFormat::tsv
                                     : mode % 3 == 1 ? driver::TableFormat::csv
                                                     : driver::TableFormat::jsonl;
  driver::LabelledFields fields;
  fields.header = (mode / 3) % 2 == 0;
  if (!fields.header) {
    fields.text_a = "1";
    fields.label = "2";
  }
  if ((mode / 6) % 2) fields.text_b = fields.header ? "sentence2" : "3";
  fields.label_required = (mode / 12) % 2 == 0;
  const std::string path = fuzz::temp_dir() + "/rows";
  fuzz::write_file(path, text);
  try {
    int64_t seen = 0, last_line = 0;
    const int64_t n = driver::read_labelled_file(path, format, fields, [&](const driver::LabelledRow& r) {
      FUZZ_ASSERT(!r.text_a.empty());
      FUZZ_ASSERT(r.has_label || !fields.label_required);
      FUZZ_ASSERT(!r.has_label || !r.label.empty());
      FUZZ_ASSERT(r.line >= 1 && r.line > last_line);
      last_line = r.line;
      ++seen;
    });
    FUZZ_ASSERT(n == seen);
  } catch (const Error&) {
    // a malformed row, an empty text or label: named with its file and line
  }
  return 0;
}
