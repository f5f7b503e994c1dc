// SPDX-License-Identifier: BSD-3-Clause
// Forecasting from CSV files (data.type csv, task "forecast"): the reader
// (cli/series_csv.h), the splits and the scaler (cli/data.h), the ETT borders,
// and a training run on the shipped weekly CO2 series.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli/data.h"
#include "cli/series_csv.h"
#include "cli/task.h"
#include "cli_run.h"
#include "temp_dir.h"

using namespace remora;
using json = nlohmann::json;
using remora_test::TempDir;

namespace {

std::string write(const TempDir& dir, const std::string& name, const std::string& text) {
  const std::string path = dir / name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

std::string read_error(const std::string& path, const driver::SeriesCsvOptions& o) {
  try {
    driver::read_series_csv(path, o);
  } catch (const driver::InputError& e) {
    return e.what();
  }
  return "";
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// An hourly table of `rows` steps: date, a daily sine, a slow ramp.
std::string hourly_csv(int64_t rows) {
  std::string s = "date,load,temp\n";
  for (int64_t t = 0; t < rows; ++t)
    s += "2016-07-01 " + std::to_string(t) + "," + std::to_string(std::sin(6.283185307179586 * double(t) / 24)) +
         "," + std::to_string(0.001 * double(t)) + "\n";
  return s;
}

}  // namespace

TEST_CASE("series csv: columns by name, the time column skipped, quotes, CRLF and a byte-order mark", "[forecast]") {
  TempDir dir;
  const std::string p = write(dir, "s.csv", "\xEF\xBB\xBF" "date,a,\"b, quoted\"\r\n2020-01-01,1,2\r\n\r\n2020-01-02,3,4.5e1\r\n");
  driver::SeriesCsvOptions o;
  driver::SeriesTable t = driver::read_series_csv(p, o);
  CHECK(t.columns == std::vector<std::string>{"a", "b, quoted"});
  CHECK(t.rows == 2);
  CHECK(t.values == std::vector<double>{1, 2, 3, 45});
  CHECK(driver::series_csv_columns(p, o) == t.columns);
  o.columns = {"b, quoted"};
  t = driver::read_series_csv(p, o);
  CHECK(t.values == std::vector<double>{2, 45});
  o.columns = {"c"};
  CHECK(has(read_error(p, o), "no column 'c' (the header names date, a, b, quoted)"));
}

TEST_CASE("series csv: missing cells are an error naming the line, or interpolated", "[forecast]") {
  TempDir dir;
  const std::string p = write(dir, "m.csv", "date,x,y\nd1,,1\nd2,2,NA\nd3,,3\nd4,,NaN\nd5,8,5\nd6,9,\n");
  driver::SeriesCsvOptions o;
  CHECK(has(read_error(p, o), "m.csv line 2: column 'x' has no value; set data.missing to \"interpolate\""));
  o.interpolate_missing = true;
  const driver::SeriesTable t = driver::read_series_csv(p, o);
  // x: the first value repeats backwards, then the straight line from 2 to 8;
  // y: the line from 1 to 3 and from 3 to 5, the last value forwards.
  CHECK(t.values == std::vector<double>{2, 1, 2, 2, 4, 3, 6, 4, 8, 5, 9, 5});
  CHECK(t.filled == 6);
  const std::string q = write(dir, "empty_col.csv", "x,y\n1,\n2,\n");
  CHECK(has(read_error(q, o), "column 'y' has no value at all"));
}

TEST_CASE("series csv: malformed rows are errors naming the file and the line", "[forecast]") {
  TempDir dir;
  driver::SeriesCsvOptions o;
  CHECK(has(read_error(write(dir, "a.csv", "x,y\n1,2\n3\n"), o), "a.csv line 3: 1 fields where the header has 2"));
  CHECK(has(read_error(write(dir, "b.csv", "x\n1\nabc\n"), o), "b.csv line 3: column 'x': 'abc' is not a finite number"));
  CHECK(has(read_error(write(dir, "c.csv", "x\n1e999\n"), o), "is not a finite number"));
  CHECK(has(read_error(write(dir, "d.csv", "x\n\"1\n"), o), "d.csv line 2: a quoted field does not close"));
  CHECK(has(read_error(write(dir, "e.csv", ""), o), "the file is empty"));
  CHECK(has(read_error(write(dir, "f.csv", "date\n2020\n"), o), "no value column"));
  CHECK(has(read_error(dir / "none.csv", o), "does not exist"));
}

TEST_CASE("series splits: borders in steps of every channel, the scaler from the training split", "[forecast]") {
  // 10 steps of 2 channels: channel 0 is t, channel 1 is 100 + 2 t.
  std::vector<double> s;
  for (int t = 0; t < 10; ++t) s.insert(s.end(), {double(t), 100.0 + 2 * t});
  data::SeriesSplits sp = data::split_series_at(s, 2, 6, 8, 10, 2);
  CHECK(sp.train.size() == 12);
  CHECK(sp.valid == std::vector<double>{4, 108, 5, 110, 6, 112, 7, 114});  // 2 steps of context before step 6
  CHECK(sp.test.size() == 8);
  data::standardize(sp, 2);
  // Training mean 2.5 and deviation sqrt(35/12) for channel 0; 105 and twice that for channel 1.
  const double sd = std::sqrt(35.0 / 12);
  CHECK(sp.train[0] == Approx(-2.5 / sd));
  CHECK(sp.train[1] == Approx(-2.5 / sd));
  CHECK(sp.valid[6] == Approx((7 - 2.5) / sd));
  CHECK(sp.valid[7] == Approx((7 - 2.5) / sd));
  data::WindowDataset w(sp.train, 3, 1, 1, 2);
  CHECK(w.size() == 3);
  data::ForecastBatch b = w.batch({1});
  CHECK(b.x.shape() == Shape{1, 3, 2});
  CHECK(b.y.shape() == Shape{1, 1, 2});
  CHECK(b.y.to_vector()[0] == Approx(sp.train[8]).epsilon(1e-6));
  CHECK_THROWS_WITH(data::split_series_at(s, 2, 6, 8, 11, 2), Catch::Contains("do not fit a series of 10 steps"));
}

TEST_CASE("forecast: ETT borders take 12, 4 and 4 months of hourly rows; a shorter file is refused", "[forecast][driver]") {
  TempDir dir;
  const std::string good = write(dir, "hourly.csv", hourly_csv(20 * 30 * 24));
  auto args = [&](const std::string& path, const std::string& out) {
    return std::vector<std::string>{
        "train", REMORA_SOURCE_DIR "/configs/forecast_co2.json", "--out", out, "--set", "data.path=" + path,
        "--set", "data.columns=", "--set", "data.split=ett_hour", "--set", "data.context=24", "--set",
        "data.horizon=4", "--set", "train.steps=2", "--set", "train.eval_every=2", "--set", "train.eval_batches=1",
        "--set", "train.threads=1"};
  };
  remora_test::CliRun r = remora_test::run_remora(args(good, dir / "run"));
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  const json cfg = json::parse(remora_test::read_whole_file(dir / "run/config.json"));
  CHECK(cfg["data"]["split"] == "ett_hour");
  const std::string short_file = write(dir, "short.csv", hourly_csv(20 * 30 * 24 - 1));
  r = remora_test::run_remora(args(short_file, dir / "run2"));
  CHECK(r.code == 2);
  CHECK(has(r.err, "14399 rows; data.split ett_hour needs 14400 (12 months of training, 4 of validation, 4 of test)"));
}

TEST_CASE("forecast: the weekly CO2 series trains, evaluates and forecasts below the persistence error", "[forecast][driver]") {
  TempDir dir;
  const std::string cfg = REMORA_SOURCE_DIR "/configs/forecast_co2.json";
  remora_test::CliRun r = remora_test::run_remora(
      {"train", cfg, "--out", dir / "run", "--set", "train.steps=100", "--set", "train.eval_every=100",
       "--set", "train.threads=1"});
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  r = remora_test::run_remora({"eval", cfg, "--checkpoint", dir / "run/best.safetensors", "--split", "test"});
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  const json m = json::parse(r.out.substr(r.out.find('{')));
  // The naive forecast that repeats the last value of the context, on the same
  // standardised test windows: the model must beat it.
  driver::SeriesCsvOptions o;
  o.columns = {"co2"};
  o.interpolate_missing = true;
  const driver::SeriesTable t = driver::read_series_csv(REMORA_SOURCE_DIR "/data/series/co2_weekly.csv", o);
  const int64_t a = int64_t(double(t.rows) * 0.7), b = a + int64_t(double(t.rows) * 0.1);
  data::SeriesSplits sp = data::split_series_at(t.values, 1, a, b, t.rows, 104);
  data::standardize(sp, 1);
  data::WindowDataset w(sp.test, 104, 13, 13);
  double se = 0;
  int64_t n = 0;
  for (int64_t i = 0; i < w.size(); ++i) {
    data::ForecastBatch fb = w.batch({i});
    const float last = fb.x.to_vector().back();
    for (double y : fb.y.to_vector()) se += (y - last) * (y - last), ++n;
  }
  const double persistence = se / double(n);
  INFO("test mse " << m["mse"] << ", persistence " << persistence);
  CHECK(m["mse"].get<double>() < persistence);

  // infer: the 13 weeks after the input's last row, in ppm, one CSV row a week.
  const std::string out = dir / "forecast.csv";
  r = remora_test::run_remora({"infer", cfg, "--checkpoint", dir / "run/best.safetensors", "--input",
                               REMORA_SOURCE_DIR "/data/series/co2_weekly.csv", "--output", out});
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  const std::string text = remora_test::read_whole_file(out);
  std::istringstream lines(text);
  std::string line;
  std::getline(lines, line);
  CHECK(line == "co2");
  int rows = 0;
  for (; std::getline(lines, line); ++rows) {
    const double v = std::stod(line);
    CHECK(v > 360);  // December 2001 stood near 370 ppm
    CHECK(v < 385);
  }
  CHECK(rows == 13);
  // The checkpoint carries the scaler: the same forecast without the training file.
  const std::string out2 = dir / "forecast2.csv";
  r = remora_test::run_remora({"infer", cfg, "--checkpoint", dir / "run/best.safetensors", "--set",
                               "data.path=" + (dir / "moved.csv"), "--input",
                               REMORA_SOURCE_DIR "/data/series/co2_weekly.csv", "--output", out2});
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  CHECK(remora_test::read_whole_file(out2) == text);
  // Too few rows for the context: an error naming the file.
  const std::string few = write(dir, "few.csv", "date,co2\n20010101,370\n");
  r = remora_test::run_remora({"infer", cfg, "--checkpoint", dir / "run/best.safetensors", "--input", few,
                               "--output", dir / "f3.csv"});
  CHECK(r.code == 2);
  CHECK(has(r.err, "few.csv: 1 rows; a forecast reads the last data.context = 104 of them"));
}
