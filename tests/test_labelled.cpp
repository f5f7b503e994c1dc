// SPDX-License-Identifier: BSD-3-Clause
// [labelled]: sequence classification and regression on labelled text files
// (task "labelled", cli/tasks/labelled.cpp): the GLUE metrics against
// hand-computed and scikit-learn / SciPy documented values, the TSV / CSV /
// JSON Lines readers (RFC 4180 quoting; every error names the file and the
// line), the label map stored with the checkpoint, and the driver end to end
// on the shipped tiny sample: training beats chance, eval reports the
// metrics, infer writes one prediction per row.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "cli_run.h"
#include "cli/experiment.h"
#include "cli/glue_metrics.h"
#include "cli/labelled_data.h"
#include "core/autograd.h"
#include "models/bert.h"
#include "temp_dir.h"
#include "text/wordpiece.h"
#include "train/checkpoint.h"
#include "train/run_dir.h"

using namespace remora;
using json = nlohmann::json;
namespace fs = std::filesystem;
namespace glue = remora::driver::glue;

namespace {

using remora_test::TempDir;

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << bytes;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

std::vector<driver::LabelledRow> read_rows(const std::string& path, driver::TableFormat format,
                                           const driver::LabelledFields& fields) {
  std::vector<driver::LabelledRow> rows;
  driver::read_labelled_file(path, format, fields, [&](const driver::LabelledRow& r) { rows.push_back(r); });
  return rows;
}

// The InputError message of reading `path`, or "" when it reads.
std::string read_error(const std::string& path, driver::TableFormat format, const driver::LabelledFields& fields) {
  try {
    read_rows(path, format, fields);
  } catch (const driver::InputError& e) {
    return e.what();
  }
  return "";
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

using Run = remora_test::CliRun;

// `remora ARGS...` in-process (tests/cli_run.h).
Run remora_cli(std::vector<std::string> args) { return remora_test::run_remora(std::move(args)); }

std::vector<json> read_jsonl(const std::string& path) {
  std::vector<json> out;
  std::istringstream in(read_file(path));
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(json::parse(line));
  return out;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// A labelled config over the folder `dir` (tiny BERT, a few steps).
json tiny_config(const std::string& dir, const json& data_extra = json::object()) {
  json data = {{"type", "labelled"}, {"path", dir}, {"seq_len", 16}, {"batch_size", 4}};
  data.update(data_extra);
  return {{"seed", 1},
          {"model", {{"type", "bert"}, {"n_layer", 1}, {"d_model", 16}, {"n_head", 2}, {"d_inner", 32}}},
          {"data", data},
          {"train", {{"steps", 2}, {"threads", 1}}}};
}

}  // namespace

// ------------------------------------------------------------------ metrics

TEST_CASE("labelled metrics: accuracy, F1 and Matthews correlation", "[labelled]") {
  CHECK(glue::accuracy({0, 1, 1, 0}, {0, 1, 0, 0}) == Approx(0.75));
  // tp 2, fp 1, fn 1: F1 = 2 tp / (2 tp + fp + fn) = 4 / 6.
  CHECK(glue::f1_of({1, 1, 0, 1, 0}, {1, 0, 0, 1, 1}, 1) == Approx(4.0 / 6.0));
  // Of class 0 instead: tp 1, fp 1, fn 1.
  CHECK(glue::f1_of({1, 1, 0, 1, 0}, {1, 0, 0, 1, 1}, 0) == Approx(0.5));
  // Never predicted and never present: 0, not 0 / 0.
  CHECK(glue::f1_of({0, 0}, {0, 0}, 1) == 0.0);
  // scikit-learn's f1_score documentation: macro F1 of this example is 0.2666...
  CHECK(glue::f1_macro({0, 2, 1, 0, 0, 1}, {0, 1, 2, 0, 1, 2}) == Approx(0.26666666666666666));
  // scikit-learn's matthews_corrcoef documentation: [+1,+1,+1,-1] vs [+1,-1,+1,+1] gives -1/3.
  CHECK(glue::matthews({1, 0, 1, 1}, {1, 1, 1, 0}) == Approx(-1.0 / 3.0));
  // Perfect and inverted predictions.
  CHECK(glue::matthews({0, 1, 0, 1}, {0, 1, 0, 1}) == Approx(1.0));
  CHECK(glue::matthews({1, 0, 1, 0}, {0, 1, 0, 1}) == Approx(-1.0));
  // Multi-class, by hand: s = 6, c = 5, t = (2, 2, 2), p = (2, 1, 3):
  // (c s - p.t) / sqrt((s^2 - p.p)(s^2 - t.t)) = 18 / sqrt(22 * 24).
  CHECK(glue::matthews({0, 0, 1, 2, 2, 2}, {0, 0, 1, 1, 2, 2}) == Approx(18.0 / std::sqrt(22.0 * 24.0)));
  // A constant prediction: undefined, reported as 0 (as scikit-learn does).
  CHECK(glue::matthews({1, 1, 1}, {0, 1, 0}) == 0.0);
  CHECK_THROWS(glue::accuracy({0, 1}, {0}));
}

TEST_CASE("labelled metrics: Pearson and Spearman (ties share their average rank)", "[labelled]") {
  // SciPy's pearsonr documentation example.
  CHECK(glue::pearson({1, 2, 3, 4, 5, 6, 7}, {10, 9, 2.5, 6, 4, 3, 2}) == Approx(-0.828503883588428).epsilon(1e-12));
  // SciPy's spearmanr documentation example (a tie in the second list).
  CHECK(glue::spearman({1, 2, 3, 4, 5}, {5, 6, 7, 8, 7}) == Approx(0.8207826816681233).epsilon(1e-12));
  CHECK(glue::average_ranks({10, 20, 20, 30}) == std::vector<double>{1, 2.5, 2.5, 4});
  CHECK(glue::average_ranks({3, 1, 3, 3}) == std::vector<double>{3, 1, 3, 3});
  // By hand: x = (1, 2, 3), y = (1, 3, 2): r = 0.5; ranks equal the values, so rho = 0.5 too.
  CHECK(glue::pearson({1, 2, 3}, {1, 3, 2}) == Approx(0.5));
  CHECK(glue::spearman({1, 2, 3}, {1, 3, 2}) == Approx(0.5));
  // Monotone but not linear: Spearman 1, Pearson below 1.
  CHECK(glue::spearman({1, 2, 3, 4}, {1, 4, 9, 100}) == Approx(1.0));
  CHECK(glue::pearson({1, 2, 3, 4}, {1, 4, 9, 100}) < 0.9);
  // A constant: undefined, reported as 0.
  CHECK(glue::pearson({1, 1, 1}, {1, 2, 3}) == 0.0);
}

// ------------------------------------------------------------------ readers

TEST_CASE("labelled readers: CSV fields with commas, line breaks and doubled quotes (RFC 4180)", "[labelled]") {
  driver::CsvRecords csv;
  REQUIRE(csv.feed("a,\"b, c\",\"say \"\"hi\"\"\",,\"\""));
  CHECK(csv.fields() == std::vector<std::string>{"a", "b, c", "say \"hi\"", "", ""});
  // A quoted field across lines; CR LF line ends.
  CHECK_FALSE(csv.feed("\"line one\r"));
  CHECK(csv.open());
  REQUIRE(csv.feed("line two\",x\r"));
  CHECK(csv.fields() == std::vector<std::string>{"line one\r\nline two", "x"});
  REQUIRE(csv.feed("plain\r"));
  CHECK(csv.fields() == std::vector<std::string>{"plain"});
  CHECK_THROWS_WITH(csv.feed("\"abc\"d,e"), Catch::Contains("text after its closing quote"));
  CHECK_THROWS_WITH(csv.feed("ab\"c,d"), Catch::Contains("a quote inside an unquoted field"));

  TempDir dir;
  const std::string path = dir / "pairs.csv";
  write_file(path,
             "id,a,b,label\r\n"
             "1,\"first, with a comma\",\"two\nlines\",yes\r\n"
             "\r\n"
             "2,\"\"\"quoted\"\"\",plain,no\r\n");
  driver::LabelledFields f;
  f.text_a = "a";
  f.text_b = "b";
  const auto rows = read_rows(path, driver::TableFormat::csv, f);
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].text_a == "first, with a comma");
  CHECK(rows[0].text_b == "two\nlines");
  CHECK(rows[0].label == "yes");
  CHECK(rows[0].line == 2);
  CHECK(rows[1].text_a == "\"quoted\"");
  CHECK(rows[1].line == 5);  // after the record of lines 2-3 and the blank line 4
}

TEST_CASE("labelled readers: TSV without quoting, JSON Lines labels, formats from the extension", "[labelled]") {
  TempDir dir;
  const std::string tsv = dir / "t.tsv";
  write_file(tsv, "sentence\tlabel\n\"a quote\" stays\t1\nit 's fine\t0\n");
  const auto rows = read_rows(tsv, driver::TableFormat::tsv, {});
  REQUIRE(rows.size() == 2);
  // A UTF-8 byte order mark before the header is not part of the first field's name.
  const std::string bom = dir / "bom.csv";
  write_file(bom, "\xEF\xBB\xBFsentence,label\r\nok,1\r\n");
  CHECK(read_rows(bom, driver::TableFormat::csv, {}).size() == 1);
  CHECK(rows[0].text_a == "\"a quote\" stays");
  CHECK(rows[1].label == "0");
  // Without a header: columns by number (GLUE's CoLA layout).
  const std::string cola = dir / "cola.tsv";
  write_file(cola, "gj04\t1\t\tThe sailors rode the breeze clear of the rocks.\ngj04\t0\t*\tThe more books.\n");
  driver::LabelledFields byc;
  byc.header = false;
  byc.text_a = "4";
  byc.label = "2";
  const auto c = read_rows(cola, driver::TableFormat::tsv, byc);
  REQUIRE(c.size() == 2);
  CHECK(c[1].text_a == "The more books.");
  CHECK(c[1].label == "0");
  // JSON Lines: integer, boolean and string labels become their text.
  const std::string jl = dir / "d.jsonl";
  write_file(jl, "{\"func\": \"int f() {\\n  return 0;\\n}\", \"target\": 1}\n{\"func\": \"g()\", \"target\": true}\n"
                 "{\"func\": \"h()\", \"target\": \"bug\"}\n");
  driver::LabelledFields jf;
  jf.text_a = "func";
  jf.label = "target";
  const auto j = read_rows(jl, driver::TableFormat::jsonl, jf);
  REQUIRE(j.size() == 3);
  CHECK(j[0].text_a == "int f() {\n  return 0;\n}");
  CHECK(j[0].label == "1");
  CHECK(j[1].label == "true");
  CHECK(j[2].label == "bug");
  CHECK(driver::table_format_of("x/train.jsonl", "auto") == driver::TableFormat::jsonl);
  CHECK(driver::table_format_of("x/dev.tsv", "auto") == driver::TableFormat::tsv);
  CHECK(driver::table_format_of("x/dev.txt", "csv") == driver::TableFormat::csv);
  CHECK_THROWS_WITH(driver::table_format_of("x/dev.txt", "auto"), Catch::Contains("x/dev.txt"));
}

TEST_CASE("labelled readers: a malformed row is an error naming the file and the line", "[labelled]") {
  TempDir dir;
  driver::LabelledFields f;
  // A file's content, and where and what its error must say.
  struct Bad {
    const char* name;
    driver::TableFormat format;
    std::string content;
    const char* line;  // "line N"
    const char* what;
  };
  const std::vector<Bad> cases = {
      {"bad.tsv", driver::TableFormat::tsv, "sentence\tlabel\ngood\t1\ntoo\tmany\tfields\n", "line 3",
       "3 fields, but the header has 2"},
      {"bad.tsv", driver::TableFormat::tsv, "sentence\tlabel\ngood\t1\n \t0\n", "line 3", "'sentence' is empty"},
      {"bad.tsv", driver::TableFormat::tsv, "sentence\tlabel\ngood\t1\nno label\t\n", "line 3",
       "the label field 'label' is empty"},
      {"bad.tsv", driver::TableFormat::tsv, "text\tlabel\ngood\t1\n", "line 1", "no field 'sentence'"},
      {"bad.csv", driver::TableFormat::csv, "sentence,label\nfine,1\n\"never closed,0\nmore,1\n", "line 3",
       "never closes"},
      {"bad.csv", driver::TableFormat::csv, "sentence,label\nfine,1\n\"closed\" late,0\n", "line 3", "closing quote"},
      {"bad.jsonl", driver::TableFormat::jsonl, "{\"sentence\": \"ok\", \"label\": 1}\n{\"sentence\": \"cut\", \n",
       "line 2", "not valid JSON"},
      {"bad.jsonl", driver::TableFormat::jsonl, "{\"sentence\": \"ok\", \"label\": 1}\n\n{\"sentence\": \"no label\"}\n",
       "line 3", "no field 'label'"},
      {"bad.jsonl", driver::TableFormat::jsonl, "[1, 2]\n", "line 1", "expected a JSON object"},
      {"bad.jsonl", driver::TableFormat::jsonl, "{\"sentence\": 5, \"label\": 1}\n", "line 1",
       "the text field 'sentence' is number"},
  };
  for (const Bad& b : cases) {
    const std::string path = dir / b.name;
    write_file(path, b.content);
    const std::string e = read_error(path, b.format, f);
    INFO(b.content);
    CHECK(has(e, path + " " + b.line));
    CHECK(has(e, b.what));
  }
  const std::string jl = dir / "bad.jsonl";
  // Without the label (inference), a row without it is read.
  f.label_required = false;
  write_file(jl, "{\"sentence\": \"no label\"}\n");
  const auto rows = read_rows(jl, driver::TableFormat::jsonl, f);
  REQUIRE(rows.size() == 1);
  CHECK_FALSE(rows[0].has_label);
}

// ------------------------------------------------------------------ the task

TEST_CASE("labelled task: labels map to classes in order of first appearance and travel with the checkpoint",
          "[labelled]") {
  TempDir dir;
  write_file(dir / "train.tsv", "sentence\tlabel\nbad film\tneg\ngood film\tpos\nawful\tneg\nfine\tneutral\n");
  write_file(dir / "valid.tsv", "sentence\tlabel\ngood\tpos\n");
  write_file(dir / "test.tsv", "sentence\tlabel\nbad\tneg\n");
  driver::Config cfg = driver::parse_config(tiny_config(dir.path), ".");
  CHECK(cfg.task == "labelled");
  driver::Experiment ex(cfg);
  CHECK(ex.ctx.num_classes == 3);
  const json saved = json::parse(ex.vocab_json());
  CHECK(saved["labels"] == json({"neg", "pos", "neutral"}));
  CHECK(saved["regression"] == false);
  // The words tokenizer: the specials, then the training texts' words by count
  // (ties in order of first appearance).
  CHECK(saved["tokenizer"]["kind"] == "wordpiece");
  CHECK(saved["tokenizer"]["tokens"] ==
        json({"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "film", "bad", "good", "awful", "fine"}));
  // The checkpoint's map is used as it is: a valid split with a label the
  // training file does not have is an error naming the file and the line.
  write_file(dir / "valid.tsv", "sentence\tlabel\ngood\tpos\nmeh\tmixed\n");
  try {
    driver::Experiment bad(cfg);
    FAIL("an unknown label was accepted");
  } catch (const driver::InputError& e) {
    CHECK(has(e.what(), dir / "valid.tsv" + " line 3"));
    CHECK(has(e.what(), "'mixed' is not one of the training file's labels"));
  }
  // Regression: every label a number.
  write_file(dir / "valid.tsv", "sentence\tlabel\ngood\t1.5\n");
  write_file(dir / "test.tsv", "sentence\tlabel\nbad\tlots\n");
  write_file(dir / "train.tsv", "sentence\tlabel\nbad film\t0\ngood film\t4.5\n");
  driver::Config reg = driver::parse_config(tiny_config(dir.path, {{"regression", true}}), ".");
  try {
    driver::Experiment bad(reg);
    FAIL("a label that is not a number was accepted");
  } catch (const driver::InputError& e) {
    CHECK(has(e.what(), dir / "test.tsv" + " line 2"));
    CHECK(has(e.what(), "not a number"));
  }
}

TEST_CASE("labelled task: config keys name what is wrong", "[labelled]") {
  TempDir dir;
  auto error_of = [](const json& j) -> std::string {
    try {
      driver::parse_config(j, ".");
    } catch (const driver::ConfigError& e) {
      return e.what();
    }
    return "";
  };
  CHECK(has(error_of(tiny_config(dir / "none")), "data.path"));
  CHECK(has(error_of(tiny_config(dir.path)), "data.train"));  // an empty folder
  write_file(dir / "train.tsv", "sentence\tlabel\na\t0\n");
  write_file(dir / "train.csv", "sentence,label\na,0\n");
  CHECK(has(error_of(tiny_config(dir.path)), "several of"));
  CHECK(has(error_of(tiny_config(dir.path, {{"tokenizer", "wordpiece"}})), "data.vocab"));
  CHECK(has(error_of(tiny_config(dir.path, {{"regression", true}, {"positive", "1"}})), "data.positive"));
}

// ------------------------------------------------------------------ the driver

TEST_CASE("labelled driver: the shipped sentiment sample trains above chance, evaluates and infers", "[labelled][driver]") {
  TempDir dir;
  const std::string cfg = std::string(REMORA_SOURCE_DIR) + "/configs/labelled_sst_tiny.json";
  const std::string data = std::string(REMORA_SOURCE_DIR) + "/data/labelled/sst_tiny";
  const std::vector<std::string> sets = {"--set", "data.path=" + data, "--set", "train.threads=2"};
  auto with_sets = [&](std::vector<std::string> args) {
    args.insert(args.begin() + 2, sets.begin(), sets.end());
    return args;
  };
  const std::string out = dir / "run";
  Run t = remora_cli(with_sets({"train", cfg, "--out", out}));
  INFO(t.err);
  REQUIRE(t.code == 0);
  // Every evaluation logs the classification metrics; the last beats chance (0.5) clearly.
  std::vector<json> valid;
  for (const json& j : read_jsonl(out + "/metrics.jsonl"))
    if (j.value("split", "") == "valid") valid.push_back(j);
  REQUIRE(!valid.empty());
  for (const char* key : {"loss", "accuracy", "f1", "matthews"}) CHECK(valid.back().contains(key));
  INFO(valid.back().dump());
  CHECK(valid.back()["accuracy"].get<double>() >= 0.8);
  CHECK(valid.back()["matthews"].get<double>() > 0.5);

  Run ev = remora_cli(with_sets({"eval", cfg, "--checkpoint", out + "/best.safetensors", "--split", "test"}));
  INFO(ev.err);
  REQUIRE(ev.code == 0);
  const json m = json::parse(ev.out);
  CHECK(m["accuracy"].get<double>() > 0.5);
  CHECK(m.contains("f1"));
  CHECK(m.contains("matthews"));
  CHECK(m["tokens"] == 10);

  // infer: one prediction per row, label names of the training file.
  const std::string preds = dir / "preds.txt";
  Run in = remora_cli(with_sets({"infer", cfg, "--checkpoint", out + "/best.safetensors", "--input",
                                 data + "/test.tsv", "--output", preds}));
  INFO(in.err);
  REQUIRE(in.code == 0);
  const std::vector<std::string> p = lines_of(read_file(preds));
  REQUIRE(p.size() == 10);
  int right = 0;
  const std::vector<std::string> gold = {"1", "0", "1", "0", "1", "0", "1", "0", "1", "0"};
  for (size_t i = 0; i < p.size(); ++i) {
    CHECK((p[i] == "0" || p[i] == "1"));
    right += p[i] == gold[i];
  }
  CHECK(right > 5);
  // Rows without labels (a JSON Lines file of texts) are predicted too.
  const std::string texts = dir / "texts.jsonl";
  write_file(texts, "{\"sentence\": \"a wonderful film\"}\n{\"sentence\": \"a boring film\"}\n{\"sentence\": \"great\"}\n");
  const std::string preds2 = dir / "preds2.txt";
  Run in2 = remora_cli(with_sets({"infer", cfg, "--checkpoint", out + "/best.safetensors", "--input", texts,
                                  "--output", preds2}));
  INFO(in2.err);
  REQUIRE(in2.code == 0);
  CHECK(lines_of(read_file(preds2)).size() == 3);
  // The output file's checks: an existing file needs --force; an input is never replaced.
  Run again = remora_cli(with_sets({"infer", cfg, "--checkpoint", out + "/best.safetensors", "--input", texts,
                                    "--output", preds2}));
  CHECK(again.code == 2);
  CHECK(has(again.err, "already exists"));
  Run onto = remora_cli(with_sets({"infer", cfg, "--checkpoint", out + "/best.safetensors", "--input", texts,
                                   "--output", texts, "--force"}));
  CHECK(onto.code == 2);
  CHECK(has(onto.err, "refusing to overwrite an input"));
  // A malformed input row: exit 2 naming the file and the line.
  write_file(texts, "{\"sentence\": \"fine\"}\n{\"sentence\": \"\"}\n");
  Run bad = remora_cli(with_sets({"infer", cfg, "--checkpoint", out + "/best.safetensors", "--input", texts,
                                  "--output", dir / "preds3.txt"}));
  CHECK(bad.code == 2);
  CHECK(has(bad.err, texts + " line 2"));
  // --fill is for masked LMs: a usage error that says which.
  Run fill = remora_cli(with_sets({"infer", cfg, "--checkpoint", out + "/best.safetensors", "--input", texts,
                                   "--fill", "2"}));
  CHECK(fill.code == 2);
  CHECK(has(fill.err, "--fill applies to masked-LM models with a WordPiece tokenizer"));
}

TEST_CASE("labelled driver: regression on sentence pairs reports Pearson and Spearman and infers numbers",
          "[labelled][driver]") {
  TempDir dir;
  const std::string cfg = std::string(REMORA_SOURCE_DIR) + "/configs/labelled_similarity_tiny.json";
  const std::string data = std::string(REMORA_SOURCE_DIR) + "/data/labelled/pairs_tiny";
  const std::string out = dir / "run";
  const std::vector<std::string> common = {"--set", "data.path=" + data, "--set", "train.steps=20", "--set",
                                           "train.eval_every=10", "--set", "train.threads=2"};
  std::vector<std::string> args = {"train", cfg, "--out", out};
  args.insert(args.end(), common.begin(), common.end());
  Run t = remora_cli(args);
  INFO(t.err);
  REQUIRE(t.code == 0);
  std::vector<json> valid;
  for (const json& j : read_jsonl(out + "/metrics.jsonl"))
    if (j.value("split", "") == "valid") valid.push_back(j);
  REQUIRE(!valid.empty());
  for (const char* key : {"loss", "mse", "pearson", "spearman"}) CHECK(valid.back().contains(key));
  const std::string preds = dir / "scores.txt";
  args = {"infer", cfg, "--checkpoint", out + "/last.safetensors", "--input", data + "/test.csv", "--output", preds};
  args.insert(args.end(), common.begin(), common.end());
  Run in = remora_cli(args);
  INFO(in.err);
  REQUIRE(in.code == 0);
  const std::vector<std::string> p = lines_of(read_file(preds));
  REQUIRE(p.size() == 10);
  for (const std::string& s : p) CHECK(std::isfinite(std::stod(s)));
}

TEST_CASE("labelled driver: a run of a shipped config resumes exactly from the repository's root", "[labelled][driver]") {
  TempDir dir;
  const fs::path cwd = fs::current_path();
  fs::current_path(REMORA_SOURCE_DIR);  // the config's relative data.path, as a user runs it
  const std::string cfg = "configs/labelled_pairs_tiny.json";
  const std::vector<std::string> sets = {"--set", "train.steps=12", "--set", "train.eval_every=5", "--set",
                                         "train.threads=1"};
  auto train = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {"train", cfg};
    args.insert(args.end(), sets.begin(), sets.end());
    args.insert(args.end(), extra.begin(), extra.end());
    return remora_cli(args);
  };
  const Run full = train({"--out", dir / "full"});
  const Run part = train({"--out", dir / "part", "--until", "7"});
  const Run rest = train({"--out", dir / "part", "--resume"});
  fs::current_path(cwd);
  INFO(full.err << part.err << rest.err);
  REQUIRE(full.code == 0);
  REQUIRE(part.code == 0);
  REQUIRE(rest.code == 0);
  CHECK(read_file(dir / "full/last.safetensors") == read_file(dir / "part/last.safetensors"));
}

TEST_CASE("labelled task: a HuggingFace tokenizer folder encodes pairs as [CLS] a [SEP] b [SEP], cut longest first",
          "[labelled]") {
  TempDir dir;
  write_file(dir / "train.csv", "q,a,label\n\"the cat, the dog\",\"a dog\",1\nthe cat,\"the cat sat on the mat today\",0\n");
  write_file(dir / "valid.csv", "q,a,label\nthe dog,a cat,1\n");
  write_file(dir / "test.csv", "q,a,label\nthe dog,a cat,0\n");
  const std::string vocab = std::string(REMORA_TEST_DATA) + "/wordpiece/uncased";
  driver::Config cfg = driver::parse_config(
      tiny_config(dir.path, {{"tokenizer", "wordpiece"}, {"vocab", vocab}, {"text_a", "q"},
                                      {"text_b", "a"}, {"seq_len", 8}}),
      ".");
  driver::Experiment ex(cfg);
  const text::WordPieceTokenizer tok = text::WordPieceTokenizer::from_pretrained(vocab);
  // words(): the text before the WordPiece split (what the words tokenizer counts).
  CHECK(tok.words("Hello, WORLD! [CLS] naïve") ==
        std::vector<std::string>{"hello", ",", "world", "!", "[CLS]", "naive"});
  CHECK(ex.ctx.n_token == tok.vocab_size());
  CHECK(ex.ctx.pad_id == tok.pad_id());
  CHECK(ex.ctx.num_classes == 2);
  // The tokenizer travels with the checkpoint: the same vocabulary and settings.
  const json saved = json::parse(ex.vocab_json());
  CHECK(saved["tokenizer"] == json::parse(tok.to_json()));
  CHECK(saved["labels"] == json({"1", "0"}));
  // What the task asks of that tokenizer for a pair of rows at data.seq_len 8:
  // the longer text cut first, the specials around both, segment 1 for b.
  const std::string a = "the cat", b = "the cat sat on the mat today";
  const text::Encoding want = tok.encode_for_model(a, &b, 8);
  CHECK(want.ids.size() == 8);
  CHECK(want.ids.front() == tok.cls_id());
  CHECK(want.ids.back() == tok.sep_id());
  CHECK(want.type_ids.back() == 1);
}

namespace {
// A BERT classifier small enough to compare paths on (vocabulary 20, d 16, 2 layers, 3 classes).
models::BertConfig tiny_classifier() {
  models::BertConfig c;
  c.vocab_size = 20;
  c.hidden_size = 16;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 2;
  c.intermediate_size = 32;
  c.max_position_embeddings = 8;
  c.num_classes = 3;
  c.pad_token_id = 0;
  return c;
}
}  // namespace

TEST_CASE("labelled task: BERT's class logits without the pretraining heads equal forward()'s", "[labelled][bert]") {
  const models::BertConfig c = tiny_classifier();
  models::BertForMaskedLM m(c);
  m.eval();
  NoGradGuard ng;
  const Tensor ids = Tensor::from_vector(std::vector<int64_t>{2, 5, 6, 3, 7, 3, 2, 9, 3, 0, 0, 0}, {2, 6});
  const Tensor mask = Tensor::from_vector(std::vector<int64_t>{1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0}, {2, 6});
  const Tensor types = Tensor::from_vector(std::vector<int64_t>{0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0}, {2, 6});
  const std::vector<double> want = m.forward(ids, mask, types).class_logits.to_vector();
  const std::vector<double> got = m.class_logits(ids, mask, types).to_vector();
  REQUIRE(got.size() == 6);
  // class_logits runs the layers on the real tokens' rows alone (the second
  // row is padded), forward() on the padded batch: the same arithmetic per
  // row, in products of other shapes, whose f32 sums may round apart in the
  // last bits on some CPUs and thread counts. Exact in f64 below.
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(want[i]).epsilon(1e-5).margin(1e-7));
  // The segment ids matter: all zeros give other logits.
  CHECK(m.class_logits(ids, mask).to_vector() != want);
}

TEST_CASE("labelled task: BERT's classifier on the real tokens' rows gives the padded batch's logits and gradients",
          "[labelled][bert]") {
  // Right-padded rows of several lengths, RSA-BERT and BERT, dropout off,
  // in f64: the rows path (class_logits) against the padded one (forward()).
  for (const char* attention : {"softmax", "rsa"}) {
    INFO(attention);
    models::BertConfig c = tiny_classifier();
    c.hidden_dropout_prob = 0;
    c.attention_probs_dropout_prob = 0;
    c.attention = attention;
    if (c.attention == "rsa") {
      c.rem.regular = 1;
      c.rem.cyclic = 0;
      c.rem.masked = false;  // an encoder's REM is bidirectional
    }
    Generator g(5);
    models::BertForMaskedLM m(c, DType::f64, &g);
    m.train();
    const Tensor ids = Tensor::from_vector(
        std::vector<int64_t>{2, 5, 6, 3, 7, 3, 2, 9, 3, 0, 0, 0, 2, 4, 3, 0, 0, 0, 2, 8, 8, 8, 3, 0}, {4, 6});
    const Tensor mask = ne(ids, Tensor::zeros({}, DType::i64)).to(DType::i64);
    const Tensor probe = Tensor::randn({4, 3}, DType::f64, Device::cpu(), &g);
    auto grads = [&](const Tensor& logits) {
      for (Tensor& p : m.parameters()) p.zero_grad();
      sum(mul(logits, probe)).backward();
      std::vector<double> all;
      for (const Tensor& p : m.parameters())
        if (p.grad().defined())
          for (double v : p.grad().to_vector()) all.push_back(v);
      return all;
    };
    const Tensor want = m.forward(ids, mask).class_logits, got = m.class_logits(ids, mask);
    const std::vector<double> wv = want.to_vector(), gv = got.to_vector();
    REQUIRE(wv.size() == gv.size());
    for (size_t i = 0; i < wv.size(); ++i) CHECK(gv[i] == Approx(wv[i]).epsilon(1e-12).margin(1e-14));
    const std::vector<double> gw = grads(want), gg = grads(got);
    REQUIRE(gw.size() == gg.size());
    size_t bad = 0;
    for (size_t i = 0; i < gw.size(); ++i) bad += std::fabs(gw[i] - gg[i]) > 1e-12 * (1 + std::fabs(gw[i]));
    CHECK(bad == 0);
  }
}

TEST_CASE("labelled driver: train.epochs, best_metric, keep_best and early stopping from the config",
          "[labelled][driver][best]") {
  TempDir dir;
  const std::string cfg = std::string(REMORA_SOURCE_DIR) + "/configs/labelled_sst_tiny.json";
  const std::string data = std::string(REMORA_SOURCE_DIR) + "/data/labelled/sst_tiny";
  auto train = [&](const std::string& out, std::vector<std::string> sets) {
    std::vector<std::string> args = {"train", cfg, "--out", out, "--set", "data.path=" + data, "--set",
                                     "train.threads=2"};
    for (const std::string& s : sets) {
      args.push_back("--set");
      args.push_back(s);
    }
    return remora_cli(args);
  };
  // 40 training rows in batches of 8: 5 steps an epoch, 4 epochs = 20 steps.
  const std::string out = dir / "epochs";
  Run t = train(out, {"train.epochs=4", "train.eval_every=5", "train.best_metric=matthews", "train.keep_best=2"});
  INFO(t.err);
  REQUIRE(t.code == 0);
  std::vector<json> valid;
  for (const json& j : read_jsonl(out + "/metrics.jsonl"))
    if (j.value("split", "") == "valid") valid.push_back(j);
  REQUIRE(valid.size() == 4);
  CHECK(valid.back()["step"] == 20);
  CHECK(valid.back()["epoch"].get<double>() == Approx(4.0));
  // best.safetensors is the first evaluation with the highest Matthews correlation.
  size_t best = 0;
  for (size_t i = 1; i < valid.size(); ++i)
    if (valid[i]["matthews"].get<double>() > valid[best]["matthews"].get<double>()) best = i;
  CHECK(train::read_checkpoint_info(out + "/best.safetensors").step == valid[best]["step"].get<int64_t>());
  const std::vector<std::string> kept = train::RunDirectory::kept_best_files(out);
  CHECK(kept.size() == 2);
  CHECK(std::find(kept.begin(), kept.end(),
                  out + "/best-step" + std::to_string(valid[best]["step"].get<int64_t>()) + ".safetensors") !=
        kept.end());

  // With no learning (lr 0) the metric never improves: patience 1 stops at the second evaluation.
  const std::string still = dir / "still";
  Run e = train(still, {"train.steps=100", "train.eval_every=5", "train.optimizer.lr=0", "train.best_metric=accuracy",
                        "train.early_stopping_patience=1"});
  INFO(e.err);
  REQUIRE(e.code == 0);
  CHECK(has(e.err, "stopped early after step 10"));
  CHECK(train::read_checkpoint_info(still + "/last.safetensors").step == 10);

  // A metric the task does not report, and epochs for data drawn without end, are refused before training.
  Run bad = train(dir / "bad", {"train.best_metric=bpc"});
  CHECK(bad.code == 2);
  CHECK(has(bad.err, "train.best_metric 'bpc' is not a metric of task labelled (it reports accuracy, f1, loss, matthews)"));
  Run endless = remora_cli({"train", std::string(REMORA_SOURCE_DIR) + "/configs/regular_rsa.json", "--out",
                            dir / "endless", "--set", "train.epochs=1"});
  CHECK(endless.code == 2);
  CHECK(has(endless.err, "draws its training batches without end"));
}
