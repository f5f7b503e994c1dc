// SPDX-License-Identifier: BSD-3-Clause
// Labelled text files for sequence classification and regression (task
// "labelled", cli/tasks/labelled.cpp): one example per row, with one or two
// text fields and a label field, in one of three formats.
//
//   tsv    fields separated by tabs, no quoting (GLUE's files): a field holds
//          any character but a tab or a line break, quotes included
//   csv    RFC 4180: fields separated by commas; a field in double quotes may
//          hold commas, line breaks and quotes (written twice: "say ""hi""")
//   jsonl  one JSON object per line; a text field is a string, a label a
//          string, a number or a boolean
//
// TSV and CSV files start with a header row naming the fields, unless
// header is false: the fields are then named by their column numbers from 1
// ("1", "2", ...). Lines ending in CR LF are read as lines ending in LF;
// lines that are empty or blank (outside a quoted CSV field) hold no row and
// are skipped.
//
// The files are streamed row by row, never read whole. Every problem is an
// InputError naming the file and the line its row starts on: a row with a
// different number of fields than the header, a quote that does not close, a
// line that is not a JSON object, a missing field, an empty text or label.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace remora {
namespace driver {

enum class TableFormat { tsv, csv, jsonl };

// "tsv", "csv", "jsonl".
std::string table_format_name(TableFormat f);
// `format` "tsv", "csv" or "jsonl"; "auto": from the file's extension (.tsv,
// .csv, .jsonl or .json), an InputError naming the file otherwise.
TableFormat table_format_of(const std::string& path, const std::string& format);

// Which fields of a row make an example.
struct LabelledFields {
  std::string text_a = "sentence";  // the first text
  std::string text_b;               // the second text of a pair ("": none)
  std::string label = "label";      // the label
  bool header = true;               // TSV / CSV: the first row names the fields
  // The label must be there (training and evaluation); when false (inference)
  // a row without it is read, and has_label says which.
  bool label_required = true;
};

struct LabelledRow {
  std::string text_a, text_b, label;
  bool has_label = false;
  int64_t line = 0;  // where the row starts (1 = the first line)
};

// Calls f on every row of the file at `path`, in order. What f throws passes
// unchanged. Returns the number of rows.
int64_t read_labelled_file(const std::string& path, TableFormat format, const LabelledFields& fields,
                           const std::function<void(const LabelledRow& row)>& f);

// The records of CSV text fed to it one line at a time (a line without its
// line break): feed() returns true when the line completes a record, whose
// fields are then fields(). A record spans lines while a quoted field is
// open. A malformed record (text after a closing quote, a quote inside an
// unquoted field) is a remora::Error saying what is wrong.
class CsvRecords {
 public:
  explicit CsvRecords(char delimiter = ',') : delim_(delimiter) {}
  bool feed(const std::string& line);
  const std::vector<std::string>& fields() const { return fields_; }
  // Inside a quoted field that has not closed (at the end of the file: an error).
  bool open() const { return in_quotes_; }

 private:
  char delim_;
  std::vector<std::string> fields_;
  std::string field_;
  bool in_quotes_ = false, quoted_ = false, after_quote_ = false, fresh_ = true;
};

}  // namespace driver
}  // namespace remora
