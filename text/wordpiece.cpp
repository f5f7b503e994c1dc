// SPDX-License-Identifier: BSD-3-Clause
#include "wordpiece.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "../core/error.h"
#include "unicode.h"

namespace remora {
namespace text {

WordPieceTokenizer::WordPieceTokenizer(Vocabulary vocab, WordPieceOptions opts)
    : vocab_(std::move(vocab)), opts_(std::move(opts)) {
  REMORA_CHECK(opts_.max_input_chars_per_word > 0 && opts_.model_max_length > 0,
               "wordpiece tokenizer: max_input_chars_per_word and model_max_length must be > 0");
  unk_id_ = vocab_.id(opts_.unk_token);
  REMORA_CHECK(unk_id_ >= 0, "wordpiece tokenizer: the vocabulary has no unknown token \"" << opts_.unk_token
                                                                                          << "\"");
  cls_id_ = vocab_.id(opts_.cls_token);
  sep_id_ = vocab_.id(opts_.sep_token);
  pad_id_ = vocab_.id(opts_.pad_token);
  mask_id_ = vocab_.id(opts_.mask_token);
}

WordPieceTokenizer WordPieceTokenizer::from_vocab_file(const std::string& path, const WordPieceOptions& opts) {
  std::ifstream f(path, std::ios::binary);
  REMORA_CHECK(f, "wordpiece tokenizer: cannot open " << path);
  std::vector<std::string> tokens;
  std::string line;
  while (std::getline(f, line)) tokens.push_back(line);  // only "\n" ends a token, as HF reads it
  REMORA_CHECK(!f.bad(), "wordpiece tokenizer: reading " << path << " failed");
  REMORA_CHECK(!tokens.empty(), "wordpiece tokenizer: " << path << " is empty");
  return WordPieceTokenizer(Vocabulary(std::move(tokens)), opts);
}

namespace {
// A special token in tokenizer_config.json: "[UNK]" or {"content": "[UNK]", ...}.
void read_token(const nlohmann::json& cfg, const char* key, std::string& out) {
  if (!cfg.contains(key) || cfg[key].is_null()) return;
  const nlohmann::json& v = cfg[key];
  out = v.is_object() ? v.at("content").get<std::string>() : v.get<std::string>();
}
}  // namespace

WordPieceTokenizer WordPieceTokenizer::from_pretrained(const std::string& dir) {
  const std::string base = dir.empty() || dir.back() == '/' ? dir : dir + "/";
  WordPieceOptions o;
  std::ifstream cf(base + "tokenizer_config.json", std::ios::binary);
  if (cf) {
    try {
      const nlohmann::json cfg = nlohmann::json::parse(cf);
      if (cfg.contains("do_lower_case")) o.do_lower_case = cfg["do_lower_case"].get<bool>();
      if (cfg.contains("strip_accents") && !cfg["strip_accents"].is_null())
        o.strip_accents = cfg["strip_accents"].get<bool>();
      if (cfg.contains("tokenize_chinese_chars")) o.tokenize_chinese_chars = cfg["tokenize_chinese_chars"].get<bool>();
      // HF writes a huge number for "no limit".
      if (cfg.contains("model_max_length") && cfg["model_max_length"].is_number_integer())
        o.model_max_length = std::min<int64_t>(cfg["model_max_length"].get<int64_t>(), int64_t(1) << 40);
      read_token(cfg, "unk_token", o.unk_token);
      read_token(cfg, "sep_token", o.sep_token);
      read_token(cfg, "pad_token", o.pad_token);
      read_token(cfg, "cls_token", o.cls_token);
      read_token(cfg, "mask_token", o.mask_token);
    } catch (const nlohmann::json::exception& e) {
      REMORA_FAIL("wordpiece tokenizer: " << base << "tokenizer_config.json: " << e.what());
    }
  }
  return from_vocab_file(base + "vocab.txt", o);
}

bool WordPieceTokenizer::is_special(int64_t id) const {
  return id >= 0 && (id == unk_id_ || id == cls_id_ || id == sep_id_ || id == pad_id_ || id == mask_id_);
}

std::vector<std::string> WordPieceTokenizer::specials() const {
  std::vector<std::string> s;
  for (const std::string* t : {&opts_.unk_token, &opts_.sep_token, &opts_.pad_token, &opts_.cls_token, &opts_.mask_token})
    if (!t->empty() && vocab_.id(*t) >= 0) s.push_back(*t);
  return s;
}

void WordPieceTokenizer::basic_tokens(const std::string& text, std::vector<std::string>& out) const {
  std::vector<char32_t> cps;
  for (char32_t c : unicode::decode_utf8(text)) {
    if (c == 0 || c == 0xFFFD || (unicode::is_other(c) && c != U'\t' && c != U'\n' && c != U'\r')) continue;
    if (unicode::is_whitespace(c)) {
      cps.push_back(U' ');
    } else if (opts_.tokenize_chinese_chars && unicode::is_cjk_ideograph(c)) {
      cps.push_back(U' ');
      cps.push_back(c);
      cps.push_back(U' ');
    } else {
      cps.push_back(c);
    }
  }
  if (opts_.strip_accents.value_or(opts_.do_lower_case)) cps = unicode::nfd_without_marks(cps);
  if (opts_.do_lower_case) {
    std::vector<char32_t> low;
    low.reserve(cps.size());
    for (char32_t c : cps) unicode::append_lower(low, c);
    cps.swap(low);
  }
  std::string cur;
  auto flush = [&] {
    if (!cur.empty()) out.push_back(std::move(cur));
    cur.clear();
  };
  for (char32_t c : cps) {
    if (unicode::is_whitespace(c)) {
      flush();
    } else if (unicode::is_punctuation(c)) {
      flush();
      unicode::append_utf8(cur, c);
      flush();
    } else {
      unicode::append_utf8(cur, c);
    }
  }
  flush();
}

void WordPieceTokenizer::wordpieces(const std::string& word, std::vector<std::string>& out) const {
  // Byte offsets of the code points (and the end).
  std::vector<size_t> at;
  for (size_t i = 0; i < word.size(); ++i)
    if ((static_cast<unsigned char>(word[i]) & 0xC0) != 0x80) at.push_back(i);
  const size_t n = at.size();
  at.push_back(word.size());
  if (static_cast<int64_t>(n) > opts_.max_input_chars_per_word) {
    out.push_back(opts_.unk_token);
    return;
  }
  std::vector<std::string> pieces;
  size_t start = 0;
  while (start < n) {
    size_t end = n;
    std::string found;
    for (; end > start; --end) {
      std::string sub = word.substr(at[start], at[end] - at[start]);
      if (start > 0) sub = "##" + sub;
      if (vocab_.id(sub) >= 0) {
        found = std::move(sub);
        break;
      }
    }
    if (end == start) {  // no piece starts here: the whole word is unknown
      out.push_back(opts_.unk_token);
      return;
    }
    pieces.push_back(std::move(found));
    start = end;
  }
  for (std::string& p : pieces) out.push_back(std::move(p));
}

std::vector<std::string> WordPieceTokenizer::tokenize(const std::string& text) const { return split(text, true); }

std::vector<std::string> WordPieceTokenizer::words(const std::string& text) const { return split(text, false); }

std::vector<std::string> WordPieceTokenizer::split(const std::string& text, bool pieces) const {
  // Special tokens are found first, verbatim: leftmost match, longest at one place.
  const std::vector<std::string> sp = specials();
  std::vector<std::string> out, words;
  size_t pos = 0, plain = 0;
  auto plain_text = [&](size_t end) {
    words.clear();
    basic_tokens(text.substr(plain, end - plain), words);
    for (const std::string& w : words) {
      if (pieces) wordpieces(w, out);
      else out.push_back(w);
    }
  };
  while (pos < text.size()) {
    const std::string* hit = nullptr;
    for (const std::string& s : sp)
      if (text.compare(pos, s.size(), s) == 0 && (!hit || s.size() > hit->size())) hit = &s;
    if (!hit) {
      ++pos;
      continue;
    }
    plain_text(pos);
    out.push_back(*hit);
    pos += hit->size();
    plain = pos;
  }
  plain_text(text.size());
  return out;
}

std::vector<int64_t> WordPieceTokenizer::encode(const std::string& text) const {
  std::vector<int64_t> ids;
  for (const std::string& t : tokenize(text)) ids.push_back(vocab_.id(t));
  return ids;
}

Encoding WordPieceTokenizer::encode_for_model(const std::string& a, const std::string* b, int64_t max_length,
                                              bool pad_to_max_length) const {
  REMORA_CHECK(cls_id_ >= 0 && sep_id_ >= 0, "wordpiece tokenizer: the vocabulary lacks \""
                                                 << opts_.cls_token << "\" or \"" << opts_.sep_token << "\"");
  REMORA_CHECK(!pad_to_max_length || (max_length > 0 && pad_id_ >= 0),
               "wordpiece tokenizer: padding needs max_length > 0 and \"" << opts_.pad_token << "\" in the vocabulary");
  std::vector<int64_t> x = encode(a), y;
  if (b) y = encode(*b);
  const int64_t added = b ? 3 : 2;
  if (max_length > 0) {
    REMORA_CHECK(max_length >= added, "wordpiece tokenizer: max_length " << max_length << " leaves no room for "
                                                                         << added << " special tokens");
    const int64_t room = max_length - added;
    int64_t n1 = static_cast<int64_t>(x.size()), n2 = static_cast<int64_t>(y.size());
    if (n1 + n2 > room) {
      if (!b) {
        n1 = room;
      } else {
        // Longest first: cut the longer down towards the shorter, then both by turns.
        const bool swap = n1 > n2;
        if (swap) std::swap(n1, n2);
        n2 = n1 > room ? n1 : std::max(n1, room - n1);
        if (n1 + n2 > room) {
          n1 = room / 2;
          n2 = n1 + room % 2;
        }
        if (swap) std::swap(n1, n2);
      }
      x.resize(std::min<size_t>(x.size(), n1));
      y.resize(std::min<size_t>(y.size(), n2));
    }
  }
  Encoding e;
  auto put = [&](int64_t id, int64_t type) {
    e.ids.push_back(id);
    e.type_ids.push_back(type);
    e.attention_mask.push_back(1);
  };
  put(cls_id_, 0);
  for (int64_t id : x) put(id, 0);
  put(sep_id_, 0);
  if (b) {
    for (int64_t id : y) put(id, 1);
    put(sep_id_, 1);
  }
  while (pad_to_max_length && static_cast<int64_t>(e.ids.size()) < max_length) {
    e.ids.push_back(pad_id_);
    e.type_ids.push_back(0);
    e.attention_mask.push_back(0);
  }
  return e;
}

std::string WordPieceTokenizer::decode(const std::vector<int64_t>& ids, bool skip_special) const {
  std::string out;
  bool first = true;
  for (int64_t id : ids) {
    const std::string& t = vocab_.token(id);
    if (skip_special && is_special(id)) continue;
    std::string piece;
    if (first) piece = t;
    else if (t.compare(0, 2, "##") == 0) piece = t.substr(2);
    else piece = " " + t;
    first = false;
    // HF's clean-up, applied to each piece: no space before . ? ! , and the
    // English contractions.
    static const char* const kGlue[][2] = {{" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","},
                                           {" ' ", "'"}, {" n't", "n't"}, {" 'm", "'m"}, {" do not", " don't"},
                                           {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
    for (const auto& g : kGlue) {
      const std::string from = g[0], to = g[1];
      for (size_t p = piece.find(from); p != std::string::npos; p = piece.find(from, p + to.size()))
        piece.replace(p, from.size(), to);
    }
    out += piece;
  }
  return out;
}

namespace {
// The settings as tokenizer_config.json and to_json() write them.
nlohmann::json options_json(const WordPieceOptions& o) {
  return {{"do_lower_case", o.do_lower_case},
          {"strip_accents", o.strip_accents ? nlohmann::json(*o.strip_accents) : nlohmann::json()},
          {"tokenize_chinese_chars", o.tokenize_chinese_chars},
          {"model_max_length", o.model_max_length},
          {"unk_token", o.unk_token},
          {"sep_token", o.sep_token},
          {"pad_token", o.pad_token},
          {"cls_token", o.cls_token},
          {"mask_token", o.mask_token}};
}
}  // namespace

std::string WordPieceTokenizer::to_json() const {
  nlohmann::json j = options_json(opts_);
  j["kind"] = kind();
  j["max_input_chars_per_word"] = opts_.max_input_chars_per_word;
  j["tokens"] = vocab_.tokens();
  return j.dump();
}

WordPieceTokenizer WordPieceTokenizer::from_json(const std::string& text) {
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    REMORA_CHECK(j.at("kind").get<std::string>() == "wordpiece", "not a wordpiece tokenizer");
    WordPieceOptions o;
    o.do_lower_case = j.at("do_lower_case").get<bool>();
    if (!j.at("strip_accents").is_null()) o.strip_accents = j.at("strip_accents").get<bool>();
    o.tokenize_chinese_chars = j.at("tokenize_chinese_chars").get<bool>();
    o.max_input_chars_per_word = j.at("max_input_chars_per_word").get<int64_t>();
    o.model_max_length = j.at("model_max_length").get<int64_t>();
    o.unk_token = j.at("unk_token").get<std::string>();
    o.sep_token = j.at("sep_token").get<std::string>();
    o.pad_token = j.at("pad_token").get<std::string>();
    o.cls_token = j.at("cls_token").get<std::string>();
    o.mask_token = j.at("mask_token").get<std::string>();
    return WordPieceTokenizer(Vocabulary(j.at("tokens").get<std::vector<std::string>>()), o);
  } catch (const nlohmann::json::exception& e) {
    REMORA_FAIL("wordpiece tokenizer: the saved tokenizer is malformed: " << e.what());
  }
}

void WordPieceTokenizer::save_pretrained(const std::string& dir) const {
  const std::string base = dir.empty() || dir.back() == '/' ? dir : dir + "/";
  {
    std::ofstream f(base + "vocab.txt", std::ios::binary);
    REMORA_CHECK(f, "wordpiece tokenizer: cannot write " << base << "vocab.txt");
    for (const std::string& t : vocab_.tokens()) f << t << '\n';
    REMORA_CHECK(f.flush(), "wordpiece tokenizer: writing " << base << "vocab.txt failed");
  }
  nlohmann::json cfg = options_json(opts_);
  cfg["tokenizer_class"] = "BertTokenizer";
  std::ofstream f(base + "tokenizer_config.json", std::ios::binary);
  REMORA_CHECK(f, "wordpiece tokenizer: cannot write " << base << "tokenizer_config.json");
  f << cfg.dump(2) << '\n';
  REMORA_CHECK(f.flush(), "wordpiece tokenizer: writing " << base << "tokenizer_config.json failed");
}

}  // namespace text
}  // namespace remora
