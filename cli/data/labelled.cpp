// SPDX-License-Identifier: BSD-3-Clause
// See labelled_data.h.
#include "../labelled_data.h"

#include <nlohmann/json.hpp>

#include "../input_checks.h"
#include "../task.h"

namespace remora {
namespace driver {
namespace {

using json = nlohmann::json;

// The longest physical line a labelled file may have (a row of JSON Lines
// holding a long function, a CSV line); longer is an error naming the line.
constexpr uint64_t kMaxRowLineBytes = 16 << 20;

bool blank(const std::string& s) {
  for (char c : s)
    if (c != ' ' && c != '\t' && c != '\r' && c != '\n' && c != '\f' && c != '\v') return false;
  return true;
}

std::string without_cr(const std::string& line) {
  return !line.empty() && line.back() == '\r' ? line.substr(0, line.size() - 1) : line;
}

std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> out(1);
  for (char c : line) {
    if (c == '\t') out.emplace_back();
    else out.back() += c;
  }
  return out;
}

std::string quoted(const std::string& s) { return "'" + s + "'"; }

// The first line without a UTF-8 byte order mark (spreadsheet programs write one).
std::string without_bom(const std::string& line, int64_t number) {
  return number == 1 && line.compare(0, 3, "\xEF\xBB\xBF") == 0 ? line.substr(3) : line;
}

std::string join_names(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size() && i < 20; ++i) s += (i ? ", " : "") + quoted(v[i]);
  if (v.size() > 20) s += ", ...";
  return s;
}

// The columns of the fields in a TSV / CSV file, from its header (or the
// column numbers when it has none).
struct Columns {
  std::vector<std::string> names;
  int64_t a = -1, b = -1, label = -1;
};

}  // namespace

std::string table_format_name(TableFormat f) {
  return f == TableFormat::tsv ? "tsv" : f == TableFormat::csv ? "csv" : "jsonl";
}

TableFormat table_format_of(const std::string& path, const std::string& format) {
  if (format == "tsv") return TableFormat::tsv;
  if (format == "csv") return TableFormat::csv;
  if (format == "jsonl") return TableFormat::jsonl;
  const size_t dot = path.find_last_of('.'), slash = path.find_last_of('/');
  std::string ext = dot == std::string::npos || (slash != std::string::npos && dot < slash) ? "" : path.substr(dot + 1);
  for (char& c : ext) c = char(std::tolower(static_cast<unsigned char>(c)));
  if (ext == "tsv") return TableFormat::tsv;
  if (ext == "csv") return TableFormat::csv;
  if (ext == "jsonl" || ext == "json") return TableFormat::jsonl;
  throw InputError(path + ": cannot tell the format from the extension" + (ext.empty() ? "" : " ." + ext) +
                   "; name the file .tsv, .csv or .jsonl, or set data.format");
}

bool CsvRecords::feed(const std::string& raw) {
  if (fresh_) {
    fields_.clear();
    field_.clear();
    quoted_ = after_quote_ = false;
    fresh_ = false;
  } else {
    field_ += '\n';  // a line break inside a quoted field
  }
  // A CR before the line's end ends the line (CR LF), unless a quoted field stays open.
  const bool cr = !raw.empty() && raw.back() == '\r';
  const size_t n = cr ? raw.size() - 1 : raw.size();
  for (size_t i = 0; i < n; ++i) {
    const char c = raw[i];
    if (in_quotes_) {
      if (c != '"') {
        field_ += c;
      } else if (i + 1 < n && raw[i + 1] == '"') {
        field_ += '"';
        ++i;
      } else {
        in_quotes_ = false;
        after_quote_ = true;
      }
      continue;
    }
    if (c == delim_) {
      fields_.push_back(field_);
      field_.clear();
      quoted_ = after_quote_ = false;
    } else if (after_quote_) {
      fresh_ = true;
      REMORA_FAIL("field " << fields_.size() + 1 << ": text after its closing quote; a quoted field ends at a '"
                           << delim_ << "' or the end of the line (write a quote inside it twice: \"\")");
    } else if (c == '"') {
      if (!field_.empty() || quoted_) {
        fresh_ = true;
        REMORA_FAIL("field " << fields_.size() + 1
                             << ": a quote inside an unquoted field; put the field in quotes and write the quote "
                                "twice (\"say \"\"hi\"\"\")");
      }
      in_quotes_ = quoted_ = true;
    } else {
      field_ += c;
    }
  }
  if (in_quotes_) {
    if (cr) field_ += '\r';
    return false;
  }
  fields_.push_back(field_);
  field_.clear();
  fresh_ = true;
  return true;
}

int64_t read_labelled_file(const std::string& path, TableFormat format, const LabelledFields& k,
                           const std::function<void(const LabelledRow& row)>& f) {
  int64_t rows = 0;
  auto fail = [&](int64_t line, const std::string& msg) -> void {
    throw InputError(path + " line " + std::to_string(line) + ": " + msg);
  };
  auto text_of = [&](int64_t line, const std::string& name, std::string value) {
    if (blank(value)) fail(line, "the text field " + quoted(name) + " is empty");
    return value;
  };

  if (format == TableFormat::jsonl) {
    for_each_input_line(path, kMaxRowLineBytes, "data file", [&](const std::string& raw, int64_t number) {
      const std::string line = without_bom(raw, number);
      if (blank(line)) return;
      if (json_depth(line) > kMaxJsonDepth)
        fail(number, "JSON nested more than " + std::to_string(kMaxJsonDepth) + " levels deep");
      json j;
      try {
        j = json::parse(line);
      } catch (const json::exception& e) {
        fail(number, "not valid JSON (" + std::string(e.what()) + ")");
      }
      if (!j.is_object()) fail(number, "expected a JSON object, got " + std::string(j.type_name()));
      LabelledRow r;
      r.line = number;
      auto text = [&](const std::string& name) {
        auto it = j.find(name);
        if (it == j.end() || it->is_null()) fail(number, "no field " + quoted(name));
        if (!it->is_string()) fail(number, "the text field " + quoted(name) + " is " + it->type_name() + ", not a string");
        return text_of(number, name, it->get<std::string>());
      };
      r.text_a = text(k.text_a);
      if (!k.text_b.empty()) r.text_b = text(k.text_b);
      auto it = j.find(k.label);
      if (it != j.end() && !it->is_null()) {
        if (it->is_string()) r.label = it->get<std::string>();
        else if (it->is_boolean()) r.label = it->get<bool>() ? "true" : "false";
        else if (it->is_number()) r.label = it->dump();
        else fail(number, "the label field " + quoted(k.label) + " is " + it->type_name() +
                              "; expected a string, a number or a boolean");
        r.has_label = !blank(r.label);
        if (!r.has_label && k.label_required) fail(number, "the label field " + quoted(k.label) + " is empty");
      } else if (k.label_required) {
        fail(number, "no field " + quoted(k.label) + " (the label)");
      }
      ++rows;
      f(r);
    });
    return rows;
  }

  // TSV and CSV: records of fields, the first the header (unless k.header is false).
  Columns cols;
  bool have_cols = false;
  auto find_columns = [&](const std::vector<std::string>& first, int64_t line) {
    if (k.header) {
      cols.names = first;
    } else {
      for (size_t i = 0; i < first.size(); ++i) cols.names.push_back(std::to_string(i + 1));
    }
    auto index = [&](const std::string& name, bool required, const char* role) -> int64_t {
      for (size_t i = 0; i < cols.names.size(); ++i)
        if (cols.names[i] == name) return int64_t(i);
      if (required)
        fail(line, std::string(k.header ? "the header has no field " : "the rows have no column ") + quoted(name) +
                       " (" + role + ")" + "; " + (k.header ? "its fields: " : "columns: ") + join_names(cols.names));
      return -1;
    };
    cols.a = index(k.text_a, true, "data.text_a");
    if (!k.text_b.empty()) cols.b = index(k.text_b, true, "data.text_b");
    cols.label = index(k.label, k.label_required, "data.label");
    have_cols = true;
  };
  auto record = [&](const std::vector<std::string>& fields, int64_t line) {
    if (!have_cols) {
      find_columns(fields, line);
      if (k.header) return;
    }
    if (fields.size() != cols.names.size())
      fail(line, std::to_string(fields.size()) + " fields, but " + (k.header ? "the header has " : "the first row has ") +
                     std::to_string(cols.names.size()) +
                     (format == TableFormat::tsv ? " (fields are separated by tabs)" : " (fields are separated by commas)"));
    LabelledRow r;
    r.line = line;
    r.text_a = text_of(line, k.text_a, fields[size_t(cols.a)]);
    if (cols.b >= 0) r.text_b = text_of(line, k.text_b, fields[size_t(cols.b)]);
    if (cols.label >= 0) {
      r.label = fields[size_t(cols.label)];
      r.has_label = !blank(r.label);
      if (!r.has_label && k.label_required) fail(line, "the label field " + quoted(k.label) + " is empty");
    }
    ++rows;
    f(r);
  };
  CsvRecords csv(',');
  int64_t start = 0;  // the line the open CSV record starts on
  for_each_input_line(path, kMaxRowLineBytes, "data file", [&](const std::string& raw, int64_t number) {
    const std::string line = without_bom(raw, number);
    if (format == TableFormat::tsv) {
      if (blank(line)) return;
      record(split_tabs(without_cr(line)), number);
      return;
    }
    if (!csv.open()) {
      if (blank(line)) return;
      start = number;
    }
    bool done = false;
    try {
      done = csv.feed(line);
    } catch (const InputError&) {
      throw;
    } catch (const Error& e) {
      fail(start, e.what());
    }
    if (done) record(csv.fields(), start);
  });
  if (csv.open()) fail(start, "a quoted field opens here and never closes");
  if (!have_cols && k.header) throw InputError(path + ": the file is empty (no header row)");
  return rows;
}

}  // namespace driver
}  // namespace remora
