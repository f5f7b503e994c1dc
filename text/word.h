// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// Word-level tokenization as Transformer-XL prepares WikiText-2/103 and PTB:
/// each line is split on whitespace (optionally lower-cased) and ends with
/// `<eos>`; the vocabulary is the special tokens first, then the words of the
/// training split by decreasing count (ties: first occurrence first), cut by
/// min_freq and max_size. A word outside the vocabulary maps to the unknown
/// token when the vocabulary has it (WikiText's files already contain `<unk>`),
/// and is an Error otherwise.
#pragma once
#include <functional>
#include <istream>

#include "tokenizer.h"

namespace remora {
namespace text {

/// How a WordTokenizer builds its vocabulary and splits lines (the driver's
/// data.lower_case, data.min_freq and data.max_size; docs/config_keys.md).
struct WordTokenizerOptions {
  std::vector<std::string> special = {"<eos>"};  ///< Ids 0.. in this order.
  bool lower_case = false;                       ///< WikiText: false; PTB: true.
  int64_t min_freq = 0;                          ///< Words counted fewer times are left out (>= 0).
  int64_t max_size = 0;                          ///< Most words kept besides the specials; 0: all (>= 0).
  bool add_eos = true;                           ///< Append eos_token to every line (it must be in the vocabulary).
  std::string eos_token = "<eos>";               ///< The end-of-line token.
  std::string unk_token = "<unk>";               ///< Where unknown words go, if in the vocabulary.
};

/// Word-level tokenizer (kind "word"): this file's description gives the rules.
class WordTokenizer : public Tokenizer {
 public:
  /// A tokenizer over \p vocab. An Error when add_eos is set and eos_token is
  /// not in the vocabulary, or min_freq or max_size is negative.
  WordTokenizer(Vocabulary vocab, WordTokenizerOptions opts);
  /// Counts the words of the lines of `train` (read line by line, never whole).
  static WordTokenizer build(std::istream& train, const WordTokenizerOptions& opts);
  /// build() on the file at \p path (an Error when it cannot be opened).
  static WordTokenizer build_from_file(const std::string& path, const WordTokenizerOptions& opts);
  /// A tokenizer from its to_json() form (an Error when malformed).
  static WordTokenizer from_json(const std::string& json);

  /// Encodes every line of `in`, handing the ids of each line to `sink` (a
  /// corpus is never held as text). Returns the number of ids.
  int64_t encode_lines(std::istream& in, const std::function<void(const std::vector<int64_t>&)>& sink) const;

  std::string kind() const override { return "word"; }  ///< "word".
  int64_t vocab_size() const override { return vocab_.size(); }  ///< The vocabulary's size.
  /// One line: its words (+ eos_token when add_eos).
  std::vector<std::string> tokenize(const std::string& line) const override;
  /// The ids of tokenize(line); a word outside the vocabulary maps to unk_token,
  /// or is an Error naming it when the vocabulary has no unk_token.
  std::vector<int64_t> encode(const std::string& line) const override;
  /// Words joined by spaces; eos_token becomes a line break ("\n") and the
  /// special tokens are left out when skip_special.
  std::string decode(const std::vector<int64_t>& ids, bool skip_special = false) const override;
  /// The id of a token, or -1 when absent.
  int64_t token_to_id(const std::string& token) const override { return vocab_.id(token); }
  /// The token of an id; an Error out of range.
  const std::string& id_to_token(int64_t id) const override { return vocab_.token(id); }
  /// {"kind": "word", the options, "tokens": [...]}.
  std::string to_json() const override;

  const Vocabulary& vocabulary() const { return vocab_; }  ///< The vocabulary.
  const WordTokenizerOptions& options() const { return opts_; }  ///< The options, as given.

 private:
  int64_t id_of(const std::string& word) const;
  Vocabulary vocab_;
  WordTokenizerOptions opts_;
  int64_t unk_id_ = -1;
};

}  // namespace text
}  // namespace remora
