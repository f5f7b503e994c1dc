// SPDX-License-Identifier: BSD-3-Clause
// Fuzz target: the CSV time-series reader (cli/data/series_csv.cpp). Input:
// one mode byte, then the file's bytes.
//   mode % 2: missing cells interpolated or an error; mode / 2 % 2: the
//   columns named ("b", "a") or every column but "date"
// Properties: the table holds rows x columns finite values (interpolation
// leaves no NaN), its columns are those named when named, and the header-only
// read names the same columns. A bad file is an InputError (a remora::Error),
// never anything else.
#include <cmath>

#include "../../cli/series_csv.h"
#include "../../core/error.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace remora;
  if (size < 1) return 0;
  const uint8_t mode = data[0];
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  driver::SeriesCsvOptions o;
  o.interpolate_missing = mode % 2 == 1;
  if ((mode / 2) % 2) o.columns = {"b", "a"};
  const std::string path = fuzz::temp_dir() + "/series.csv";
  fuzz::write_file(path, text);
  try {
    const driver::SeriesTable t = driver::read_series_csv(path, o);
    FUZZ_ASSERT(int64_t(t.values.size()) == t.rows * int64_t(t.columns.size()));
    FUZZ_ASSERT(!t.columns.empty());
    if (!o.columns.empty()) FUZZ_ASSERT(t.columns == o.columns);
    for (double v : t.values) FUZZ_ASSERT(std::isfinite(v));
    FUZZ_ASSERT(driver::series_csv_columns(path, o) == t.columns);
  } catch (const Error&) {
    // a malformed row, a missing or non-numeric cell: named with its file and line
  }
  return 0;
}
