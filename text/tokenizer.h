// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// Tokenizers: text to token ids and back, saved with the model (docs/tokenizers.md).
///
/// \code
///   auto tok = text::WordPieceTokenizer::from_pretrained("bert-base-uncased/");
///   text::Encoding e = tok.encode_for_model("Paris is the [MASK] of France.");
///   std::string s = tok.decode(e.ids, /*skip_special=*/true);
///
///   text::WordTokenizer w = text::WordTokenizer::build_from_file("wiki.train.tokens", {});
///   std::vector<int64_t> ids = w.encode("a line of words");   // ... + <eos>
///
///   std::string saved = tok.to_json();                   // into checkpoint metadata
///   std::unique_ptr<text::Tokenizer> back = text::tokenizer_from_json(saved);
/// \endcode
///
/// Every tokenizer kind is listed once in the registry (tokenizer.cpp); the
/// JSON form names its kind, so a checkpoint needs nothing else to decode.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace remora {
namespace text {

/// What a model takes for one sequence or a pair (BERT-style inputs); the three
/// vectors have the same length.
struct Encoding {
  std::vector<int64_t> ids;             ///< Token ids, specials and padding included.
  std::vector<int64_t> type_ids;        ///< 0: first sequence (and padding), 1: second.
  std::vector<int64_t> attention_mask;  ///< 1: a token, 0: padding.
};

/// Tokens and their ids: id i is tokens()[i]. A token listed twice keeps the
/// later id for lookups (as HF's vocab.txt loader does).
class Vocabulary {
 public:
  Vocabulary() = default;  ///< An empty vocabulary.
  /// Token i gets id i.
  explicit Vocabulary(std::vector<std::string> tokens);
  /// Appends a token not yet present and returns its id (the existing id otherwise).
  int64_t add(const std::string& token);
  int64_t size() const { return static_cast<int64_t>(tokens_.size()); }  ///< The number of ids.
  int64_t id(const std::string& token) const;  ///< The token's id; -1 when absent.
  const std::string& token(int64_t id) const;  ///< The token of an id; an Error out of range.
  const std::vector<std::string>& tokens() const { return tokens_; }  ///< Every token, by id.

 private:
  std::vector<std::string> tokens_;
  std::unordered_map<std::string, int64_t> ids_;
};

/// The interface every tokenizer kind implements (WordTokenizer, WordPieceTokenizer).
class Tokenizer {
 public:
  virtual ~Tokenizer() = default;  ///< Virtual: tokenizers are held through this base.
  /// The registry's name of this kind ("word", "wordpiece").
  virtual std::string kind() const = 0;
  /// The number of ids: valid ids are [0, vocab_size()).
  virtual int64_t vocab_size() const = 0;
  /// The text as tokens (strings of the vocabulary, or the unknown token).
  virtual std::vector<std::string> tokenize(const std::string& text) const = 0;
  /// The text as ids (a word tokenizer ends a line with `<eos>`; WordPiece adds
  /// no [CLS]/[SEP] here: see WordPieceTokenizer::encode_for_model).
  virtual std::vector<int64_t> encode(const std::string& text) const = 0;
  /// Ids back to text; an id outside [0, vocab_size()) is an Error.
  /// skip_special leaves the special tokens out.
  virtual std::string decode(const std::vector<int64_t>& ids, bool skip_special = false) const = 0;
  /// The id of a token, or -1 when the vocabulary has no such token.
  virtual int64_t token_to_id(const std::string& token) const = 0;
  /// The token of an id; an Error outside [0, vocab_size()).
  virtual const std::string& id_to_token(int64_t id) const = 0;
  /// Kind, settings and vocabulary as one JSON object ({"kind": ..., ...}).
  virtual std::string to_json() const = 0;
};

/// A tokenizer from its to_json() form; an Error names the kind or key that is wrong.
std::unique_ptr<Tokenizer> tokenizer_from_json(const std::string& json);
/// The registered kinds, in registry order ("word", "wordpiece").
std::vector<std::string> tokenizer_kinds();

}  // namespace text
}  // namespace remora
