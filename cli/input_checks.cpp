// SPDX-License-Identifier: BSD-3-Clause
// See input_checks.h.
#include "input_checks.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <nlohmann/json.hpp>

#include "../core/autograd.h"
#include "../core/file_io.h"
#include "../train/checkpoint.h"

#include "experiment.h"

namespace remora {
namespace driver {

using json = nlohmann::json;

namespace {
// Runs f, turning a remora::Error (a ConfigError too) into an InputError (exit 2) with its message.
template <typename F>
auto input_errors(F&& f) -> decltype(f()) {
  return as_input_error("", std::forward<F>(f), /*keep_config_errors=*/false);
}
}  // namespace

std::string read_input_file(const std::string& path, uint64_t max_bytes, const std::string& what) {
  return input_errors([&] { return read_regular_file(path, max_bytes, what); });
}

void for_each_input_line(const std::string& path, uint64_t max_line_bytes, const std::string& what,
                         const std::function<void(const std::string& line, int64_t number)>& f) {
  // Only the reading's errors become InputErrors; what f throws passes as is.
  struct Stop {};
  std::exception_ptr from_f;
  try {
    input_errors([&] {
      for_each_line(path, max_line_bytes, what, [&](const std::string& line, int64_t number) {
        try {
          f(line, number);
        } catch (...) {
          from_f = std::current_exception();
          throw Stop{};
        }
      });
      return 0;
    });
  } catch (const Stop&) {
    std::rethrow_exception(from_f);
  }
}

void write_output_file_atomic(const std::string& path, const std::string& bytes, const std::string& what) {
  input_errors([&] {
    write_file_atomic(path, bytes, what);
    return 0;
  });
}

int open_append_output(const std::string& path, const std::string& what) {
  return input_errors([&] { return open_append_regular(path, what); });
}

int json_depth(const std::string& text) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char ch : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (ch == '\\') escaped = true;
      else if (ch == '"') in_string = false;
      continue;
    }
    if (ch == '"') {
      in_string = true;
    } else if (ch == '[' || ch == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > kMaxJsonDepth) return deepest;
    } else if ((ch == ']' || ch == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

std::vector<std::vector<int64_t>> parse_ids(const std::string& text, const std::string& what, int64_t vocab,
                                            const std::function<std::vector<int64_t>(const std::string&)>& encode,
                                            const IdsFormat& format) {
  const std::string ctx = "--input " + what + ": ";
  const bool lines = format.lines;
  std::vector<std::vector<int64_t>> seqs;
  json j;
  bool is_json = false;
  const size_t first = text.find_first_not_of(" \t\r\n");
  const bool looks_json = !format.text && first != std::string::npos && (text[first] == '[' || text[first] == '{');
  if (looks_json) {
    if (json_depth(text) > kMaxJsonDepth)
      throw InputError(ctx + "JSON nested more than " + std::to_string(kMaxJsonDepth) + " levels deep");
    try {
      j = json::parse(text);
    } catch (const json::exception& e) {
      throw InputError(ctx + "starts like JSON but is not valid JSON (" + e.what() +
                       "); for a text that starts with [ or {, pass --text");
    }
    if (!j.is_array())
      throw InputError(ctx + "is a JSON " + std::string(j.type_name()) +
                       ", expected an array of ids, an array of arrays or an array of texts (for text, pass --text)");
    is_json = true;
  }
  if (is_json) {
    auto row = [&](const json& r, size_t i) {
      std::vector<int64_t> s;
      if (!r.is_array()) throw InputError(ctx + "entry " + std::to_string(i) + " is not an array of ids");
      for (const json& x : r) {
        if (!x.is_number_integer()) {
          // The value itself, cut short: an entry can be a large nested value.
          std::string v = x.dump();
          if (v.size() > 40) v = v.substr(0, 40) + "...";
          throw InputError(ctx + "ids must be integers, got " + v);
        }
        // An unsigned value above INT64_MAX is out of range too (not wrapped).
        const bool too_big = x.is_number_unsigned() && x.get<uint64_t>() > uint64_t(INT64_MAX);
        const int64_t id = too_big ? -1 : x.get<int64_t>();
        if (too_big || id < 0 || id >= vocab)
          throw InputError(ctx + "id " + x.dump() + " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
        s.push_back(id);
      }
      return s;
    };
    if (!j.empty() && j[0].is_string()) {
      // A batch of texts: ["first sequence", "second sequence"].
      if (!encode) throw InputError(ctx + "a JSON array of texts needs a language-model config (a vocabulary)");
      for (size_t i = 0; i < j.size(); ++i) {
        if (!j[i].is_string())
          throw InputError(ctx + "entry " + std::to_string(i) + " is not a string (an array of texts has only texts)");
        seqs.push_back(encode(j[i].get<std::string>()));
      }
    } else if (!j.empty() && j[0].is_array()) {
      for (size_t i = 0; i < j.size(); ++i) seqs.push_back(row(j[i], i));
    } else {
      seqs.push_back(row(j, 0));
    }
  } else {
    if (!encode) throw InputError(ctx + "not a JSON array of ids (a text file needs a language-model config)");
    if (lines) {
      size_t start = 0, line_no = 0;
      while (start < text.size()) {
        size_t end = text.find('\n', start);
        if (end == std::string::npos) end = text.size();
        std::string line = text.substr(start, end - start);
        if (!line.empty() && line.back() == '\r') line.pop_back();
        ++line_no;
        if (line.find_first_not_of(" \t") != std::string::npos) {
          seqs.push_back(encode(line));
          if (seqs.back().empty())
            throw InputError(ctx + "line " + std::to_string(line_no) + " encodes to no tokens");
        }
        start = end + 1;
      }
    } else {
      seqs.push_back(encode(text));
    }
  }
  if (seqs.empty()) throw InputError(ctx + "no tokens");
  for (size_t i = 0; i < seqs.size(); ++i)
    if (seqs[i].empty())
      throw InputError(ctx + (seqs.size() == 1 ? std::string("no tokens") : "sequence " + std::to_string(i) + " has no tokens"));
  return seqs;
}

void check_finite(const std::vector<std::pair<std::string, Tensor>>& tensors, const std::string& path) {
  try {
    train::check_finite(tensors, path);
  } catch (const Error& e) {
    throw InputError(e.what());
  }
}

void check_stored_dtypes(const Safetensors& st, const nn::Module& model, const std::string& path) {
  std::map<std::string, DType> params;
  for (const auto& kv : model.named_parameters()) params[kv.first] = kv.second.dtype();
  for (const auto& kv : st.stored_dtypes) {
    auto p = params.find(kv.first);
    if (p == params.end() || !is_floating(p->second)) continue;
    const std::string& d = kv.second;
    if (d == "I64" || d == "I32" || d == "I16" || d == "I8" || d == "U8" || d == "BOOL")
      throw InputError(path + ": tensor '" + kv.first + "' is stored as " + d + " (integers); the model's parameter is " +
                       dtype_name(p->second) + " (floating point)");
  }
}

void check_carried_state(Experiment& ex, const std::vector<std::pair<std::string, Tensor>>& carried,
                         const std::string& path) {
  if (carried.empty() || !ex.net.seq || !ex.ctx.stream || ex.is_encoder()) return;
  Experiment::State state;
  for (const auto& kv : carried) {
    if (kv.first.rfind("state.mems.", 0) == 0) state.mems.push_back(kv.second);
    else if (kv.first.rfind("state.rem.", 0) == 0) state.rem_states.push_back(kv.second);
    else if (kv.first.rfind("state.cells.", 0) == 0) state.cells.push_back(kv.second);
  }
  const Tensor ids = Tensor::zeros({ex.cfg.data.batch_size, ex.cfg.data.seq_len}, DType::i64).to(ex.device());
  const bool was_training = ex.model->is_training();
  std::string problem;
  {
    NoGradGuard ng;
    ex.model->eval();
    try {
      (void)ex.net.seq->run(ids, state);
    } catch (const Error& e) {
      problem = e.what();
    }
    ex.model->train(was_training);
  }
  if (problem.empty()) return;
  std::string names;
  for (const auto& kv : carried) names += (names.empty() ? "" : ", ") + kv.first + " " + shape_str(kv.second.shape());
  throw InputError(path + ": the carried state (" + names + ") does not fit the model: " + problem);
}

}  // namespace driver
}  // namespace remora
