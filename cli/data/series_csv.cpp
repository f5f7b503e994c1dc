// SPDX-License-Identifier: BSD-3-Clause
// Time series from CSV files (cli/series_csv.h).
#include "../series_csv.h"

#include <cmath>
#include <cstdlib>

#include "../input_checks.h"
#include "../labelled_data.h"
#include "../task.h"

namespace remora {
namespace driver {

namespace {

constexpr uint64_t kMaxSeriesLineBytes = 1 << 20;

// Calls f(fields, line) on every CSV record of the file: the header first.
template <class F>
void for_each_record(const std::string& path, F f) {
  CsvRecords csv;
  int64_t start = 0;
  bool any = false;
  for_each_input_line(path, kMaxSeriesLineBytes, "data file", [&](const std::string& raw, int64_t number) {
    std::string line = raw;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (number == 1 && line.compare(0, 3, "\xEF\xBB\xBF") == 0) line.erase(0, 3);  // a UTF-8 byte-order mark
    if (!csv.open()) {
      if (line.find_first_not_of(" \t") == std::string::npos) return;  // a blank line holds no row
      start = number;
    }
    bool done = false;
    try {
      done = csv.feed(line);
    } catch (const Error& e) {
      throw InputError(path + " line " + std::to_string(start) + ": " + e.what());
    }
    if (done) {
      any = true;
      f(csv.fields(), start);
    }
  });
  if (csv.open()) throw InputError(path + " line " + std::to_string(start) + ": a quoted field does not close");
  if (!any) throw InputError(path + ": the file is empty (no header row)");
}

// The positions of the value columns in the header.
std::vector<size_t> value_positions(const std::string& path, const std::vector<std::string>& header,
                                    const SeriesCsvOptions& o) {
  std::vector<size_t> out;
  if (o.columns.empty()) {
    for (size_t i = 0; i < header.size(); ++i)
      if (header[i] != o.time_column || o.time_column.empty()) out.push_back(i);
  } else {
    for (const std::string& c : o.columns) {
      size_t i = 0;
      while (i < header.size() && header[i] != c) ++i;
      if (i == header.size()) {
        std::string names;
        for (const std::string& h : header) names += (names.empty() ? "" : ", ") + h;
        throw InputError(path + ": no column '" + c + "' (the header names " + names + ")");
      }
      out.push_back(i);
    }
  }
  if (out.empty()) throw InputError(path + ": no value column (the header holds only the time column)");
  return out;
}

bool is_missing(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t");
  if (a == std::string::npos) return true;
  const std::string t = s.substr(a, b - a + 1);
  return t == "NA" || t == "NaN" || t == "nan" || t == "null" || t == "NULL";
}

// Fills the NaN cells of column c: the straight line between its neighbours,
// the nearest value at either end. Returns how many were filled.
int64_t interpolate_column(std::vector<double>& v, int64_t rows, int64_t cols, int64_t c) {
  auto at = [&](int64_t r) -> double& { return v[size_t(r * cols + c)]; };
  int64_t filled = 0, prev = -1;
  for (int64_t r = 0; r <= rows; ++r) {
    if (r < rows && std::isnan(at(r))) continue;
    // rows (prev, r) are missing; prev or r may lie outside the table
    for (int64_t m = prev + 1; m < r; ++m, ++filled) {
      if (prev < 0) at(m) = at(r);
      else if (r == rows) at(m) = at(prev);
      else at(m) = at(prev) + (at(r) - at(prev)) * double(m - prev) / double(r - prev);
    }
    prev = r;
  }
  return filled;
}

}  // namespace

std::vector<std::string> series_csv_columns(const std::string& path, const SeriesCsvOptions& o) {
  struct HeaderRead {};  // ends the reading after the header row
  std::vector<std::string> names;
  try {
    for_each_record(path, [&](const std::vector<std::string>& header, int64_t) {
      for (size_t i : value_positions(path, header, o)) names.push_back(header[i]);
      throw HeaderRead{};
    });
  } catch (const HeaderRead&) {
  }
  return names;
}

SeriesTable read_series_csv(const std::string& path, const SeriesCsvOptions& o) {
  SeriesTable t;
  std::vector<size_t> pos;
  size_t width = 0;
  for_each_record(path, [&](const std::vector<std::string>& fields, int64_t line) {
    if (pos.empty()) {
      pos = value_positions(path, fields, o);
      for (size_t i : pos) t.columns.push_back(fields[i]);
      width = fields.size();
      return;
    }
    if (fields.size() != width)
      throw InputError(path + " line " + std::to_string(line) + ": " + std::to_string(fields.size()) +
                       " fields where the header has " + std::to_string(width));
    for (size_t k = 0; k < pos.size(); ++k) {
      const std::string& s = fields[pos[k]];
      if (is_missing(s)) {
        if (!o.interpolate_missing)
          throw InputError(path + " line " + std::to_string(line) + ": column '" + t.columns[k] +
                           "' has no value; set data.missing to \"interpolate\" to fill such cells");
        t.values.push_back(NAN);
        continue;
      }
      char* end = nullptr;
      const double v = std::strtod(s.c_str(), &end);
      while (end && (*end == ' ' || *end == '\t')) ++end;
      if (end == s.c_str() || (end && *end != '\0') || !std::isfinite(v))
        throw InputError(path + " line " + std::to_string(line) + ": column '" + t.columns[k] + "': '" + s +
                         "' is not a finite number");
      t.values.push_back(v);
    }
    ++t.rows;
  });
  const int64_t cols = int64_t(t.columns.size());
  for (int64_t c = 0; c < cols && o.interpolate_missing; ++c) {
    bool any = false;
    for (int64_t r = 0; r < t.rows && !any; ++r) any = !std::isnan(t.values[size_t(r * cols + c)]);
    if (!any && t.rows > 0) throw InputError(path + ": column '" + t.columns[size_t(c)] + "' has no value at all");
    t.filled += interpolate_column(t.values, t.rows, cols, c);
  }
  return t;
}

}  // namespace driver
}  // namespace remora
