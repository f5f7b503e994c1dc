// SPDX-License-Identifier: BSD-3-Clause
// Time series from CSV files for forecasting (data.type "csv", the
// "forecast" task in cli/tasks/timeseries.cpp).
//
// The file is RFC 4180 CSV (cli/labelled_data.h: CsvRecords) whose first row
// names the columns, one row per time step in time order, as the ETT, Weather
// and Electricity tables of the forecasting literature are distributed. A time
// column (by default "date", when there is one) is skipped; the value columns
// are every other column, or those named. A cell is a number; an empty cell,
// "NA", "NaN" or "null" is missing: an error naming the file, line and column,
// or, with interpolation, the straight line between the column's neighbouring
// values (the nearest value before the first or after the last one).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace remora {
namespace driver {

struct SeriesCsvOptions {
  std::vector<std::string> columns;  // the value columns, in this order ([]: every column but the time column)
  std::string time_column = "date";  // skipped when present ("": none)
  bool interpolate_missing = false;  // fill missing cells (else they are an InputError)
};

struct SeriesTable {
  std::vector<std::string> columns;  // the value columns read
  std::vector<double> values;        // [rows, columns], row-major
  int64_t rows = 0;
  int64_t filled = 0;  // missing cells filled by interpolation
};

// The value columns the file at `path` holds for `o` (its header row only).
std::vector<std::string> series_csv_columns(const std::string& path, const SeriesCsvOptions& o);
// The whole table. InputError (naming the file and line) for a row with
// another number of fields than the header, a cell that is not a number, a
// missing cell without interpolation, a column named in `o` that the header
// lacks, or a column with no value at all.
SeriesTable read_series_csv(const std::string& path, const SeriesCsvOptions& o);

}  // namespace driver
}  // namespace remora
