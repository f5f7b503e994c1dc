// SPDX-License-Identifier: BSD-3-Clause
#include "word.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "../core/error.h"
#include "unicode.h"

namespace remora {
namespace text {

WordTokenizer::WordTokenizer(Vocabulary vocab, WordTokenizerOptions opts)
    : vocab_(std::move(vocab)), opts_(std::move(opts)) {
  REMORA_CHECK(!opts_.add_eos || vocab_.id(opts_.eos_token) >= 0,
               "word tokenizer: add_eos needs the end-of-line token \"" << opts_.eos_token
                   << "\" in the vocabulary (list it in special)");
  REMORA_CHECK(opts_.min_freq >= 0 && opts_.max_size >= 0,
               "word tokenizer: min_freq and max_size must be >= 0, got " << opts_.min_freq << " and "
                                                                          << opts_.max_size);
  unk_id_ = vocab_.id(opts_.unk_token);
}

WordTokenizer WordTokenizer::build(std::istream& train, const WordTokenizerOptions& opts) {
  std::unordered_map<std::string, int64_t> index;  // word -> position in `words`
  std::vector<std::pair<std::string, int64_t>> words;  // (word, count) by first occurrence
  std::string line;
  // The end-of-line token is a special, not counted.
  while (std::getline(train, line)) {
    for (std::string& w : unicode::split_whitespace(opts.lower_case ? unicode::lower(line) : line)) {
      auto [it, fresh] = index.emplace(w, static_cast<int64_t>(words.size()));
      if (fresh) words.emplace_back(std::move(w), 0);
      ++words[it->second].second;
    }
  }
  REMORA_CHECK(!train.bad(), "word tokenizer: reading the training text failed");
  std::stable_sort(words.begin(), words.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  Vocabulary v;
  for (const std::string& s : opts.special) v.add(s);
  const size_t keep = opts.max_size > 0 ? std::min<size_t>(words.size(), opts.max_size) : words.size();
  for (size_t i = 0; i < keep; ++i) {
    if (words[i].second < opts.min_freq) break;
    v.add(words[i].first);
  }
  return WordTokenizer(std::move(v), opts);
}

WordTokenizer WordTokenizer::build_from_file(const std::string& path, const WordTokenizerOptions& opts) {
  std::ifstream f(path, std::ios::binary);
  REMORA_CHECK(f, "word tokenizer: cannot open " << path);
  return build(f, opts);
}

std::vector<std::string> WordTokenizer::tokenize(const std::string& line) const {
  std::vector<std::string> words = unicode::split_whitespace(opts_.lower_case ? unicode::lower(line) : line);
  if (opts_.add_eos) words.push_back(opts_.eos_token);
  return words;
}

int64_t WordTokenizer::id_of(const std::string& word) const {
  const int64_t id = vocab_.id(word);
  if (id >= 0) return id;
  REMORA_CHECK(unk_id_ >= 0, "word tokenizer: \"" << word << "\" is not in the vocabulary, which has no \""
                                                  << opts_.unk_token << "\" token to map it to");
  return unk_id_;
}

std::vector<int64_t> WordTokenizer::encode(const std::string& line) const {
  std::vector<int64_t> ids;
  for (const std::string& w : tokenize(line)) ids.push_back(id_of(w));
  return ids;
}

int64_t WordTokenizer::encode_lines(std::istream& in,
                                    const std::function<void(const std::vector<int64_t>&)>& sink) const {
  int64_t n = 0;
  std::string line;
  while (std::getline(in, line)) {
    const std::vector<int64_t> ids = encode(line);
    n += static_cast<int64_t>(ids.size());
    sink(ids);
  }
  REMORA_CHECK(!in.bad(), "word tokenizer: reading the text failed");
  return n;
}

std::string WordTokenizer::decode(const std::vector<int64_t>& ids, bool skip_special) const {
  std::string out;
  bool line_start = true;
  for (int64_t id : ids) {
    const std::string& t = vocab_.token(id);
    if (opts_.add_eos && t == opts_.eos_token) {
      if (!skip_special) {
        out += '\n';
        line_start = true;
      }
      continue;
    }
    if (skip_special && std::find(opts_.special.begin(), opts_.special.end(), t) != opts_.special.end()) continue;
    if (!line_start) out += ' ';
    out += t;
    line_start = false;
  }
  return out;
}

std::string WordTokenizer::to_json() const {
  nlohmann::json j = {{"kind", kind()},
                      {"special", opts_.special},
                      {"lower_case", opts_.lower_case},
                      {"min_freq", opts_.min_freq},
                      {"max_size", opts_.max_size},
                      {"add_eos", opts_.add_eos},
                      {"eos_token", opts_.eos_token},
                      {"unk_token", opts_.unk_token},
                      {"tokens", vocab_.tokens()}};
  return j.dump();
}

WordTokenizer WordTokenizer::from_json(const std::string& text) {
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    REMORA_CHECK(j.at("kind").get<std::string>() == "word", "not a word tokenizer");
    WordTokenizerOptions o;
    o.special = j.at("special").get<std::vector<std::string>>();
    o.lower_case = j.at("lower_case").get<bool>();
    o.min_freq = j.at("min_freq").get<int64_t>();
    o.max_size = j.at("max_size").get<int64_t>();
    o.add_eos = j.at("add_eos").get<bool>();
    o.eos_token = j.at("eos_token").get<std::string>();
    o.unk_token = j.at("unk_token").get<std::string>();
    return WordTokenizer(Vocabulary(j.at("tokens").get<std::vector<std::string>>()), o);
  } catch (const nlohmann::json::exception& e) {
    REMORA_FAIL("word tokenizer: the saved tokenizer is malformed: " << e.what());
  }
}

}  // namespace text
}  // namespace remora
