// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// BERT's WordPiece tokenizer, as HF transformers' BertTokenizer: the same
/// tokens and ids from the same vocab.txt / tokenizer_config.json.
///
/// Normalisation (BERT's "basic tokenizer"): control and format characters,
/// NUL and U+FFFD are removed and every whitespace character becomes a space;
/// CJK ideographs are surrounded by spaces; with strip_accents (by default:
/// when lower-casing) the text is decomposed (NFD) and its nonspacing marks
/// dropped; with do_lower_case each character is lower-cased on its own (so a
/// final capital sigma becomes σ, as BertTokenizer does; Python's str.lower()
/// would give ς). The text is split on whitespace and around every
/// punctuation character, and each word becomes the longest vocabulary
/// pieces from its start ("##" marks a continuation), or [UNK] when no split
/// exists or the word has over max_input_chars_per_word characters.
/// The special tokens ([CLS], [SEP], [PAD], [UNK], [MASK]) are recognised
/// verbatim in the input, before normalisation. Malformed UTF-8 bytes are
/// replaced by U+FFFD, hence removed.
#pragma once
#include <optional>

#include "tokenizer.h"

namespace remora {
namespace text {

/// The settings of a WordPieceTokenizer (HF BertTokenizer's, same names).
struct WordPieceOptions {
  bool do_lower_case = true;          ///< Lower-case each character on its own.
  /// Decompose (NFD) and drop nonspacing marks; unset: the same as do_lower_case.
  std::optional<bool> strip_accents;
  bool tokenize_chinese_chars = true;  ///< Surround CJK ideographs by spaces.
  /// A longer word (in characters) becomes [UNK] (> 0).
  int64_t max_input_chars_per_word = 100;
  /// The model's longest input (> 0); kept and saved for HF, not applied by
  /// encode_for_model (pass max_length there).
  int64_t model_max_length = 512;
  /// \var unk_token
  /// The unknown token (must be in the vocabulary).
  /// \var sep_token
  /// Ends each sequence of encode_for_model.
  /// \var pad_token
  /// Padding of encode_for_model.
  /// \var cls_token
  /// Starts encode_for_model's output.
  /// \var mask_token
  /// The masked-LM token.
  std::string unk_token = "[UNK]", sep_token = "[SEP]", pad_token = "[PAD]", cls_token = "[CLS]",
              mask_token = "[MASK]";
};

/// BERT's WordPiece tokenizer (kind "wordpiece"): this file's description gives
/// the rules.
class WordPieceTokenizer : public Tokenizer {
 public:
  /// A tokenizer over \p vocab. An Error when unk_token is not in the
  /// vocabulary or max_input_chars_per_word or model_max_length is not > 0.
  WordPieceTokenizer(Vocabulary vocab, WordPieceOptions opts);
  /// A vocab.txt (one token per line, id = line number) and its options.
  static WordPieceTokenizer from_vocab_file(const std::string& vocab_txt, const WordPieceOptions& opts = {});
  /// An HF tokenizer directory: vocab.txt, and tokenizer_config.json when
  /// present (do_lower_case, strip_accents, tokenize_chinese_chars,
  /// model_max_length and the special tokens are read from it).
  static WordPieceTokenizer from_pretrained(const std::string& dir);
  /// A tokenizer from its to_json() form (an Error when malformed).
  static WordPieceTokenizer from_json(const std::string& json);
  /// Writes vocab.txt and tokenizer_config.json to `dir` (which must exist):
  /// a directory HF's BertTokenizer.from_pretrained loads.
  void save_pretrained(const std::string& dir) const;

  /// [CLS] a [SEP] (b [SEP]), with type ids and attention mask. max_length
  /// > 0 truncates the longer sequence first (HF's "longest_first") so the
  /// whole, specials included, fits; pad_to_max_length then pads with [PAD].
  /// An Error when [CLS] or [SEP] is not in the vocabulary, max_length leaves no
  /// room for the specials, or padding is asked without max_length > 0 or [PAD].
  Encoding encode_for_model(const std::string& a, const std::string* b = nullptr, int64_t max_length = 0,
                            bool pad_to_max_length = false) const;

  std::string kind() const override { return "wordpiece"; }  ///< "wordpiece".
  int64_t vocab_size() const override { return vocab_.size(); }  ///< The vocabulary's size.
  /// The text's pieces: special tokens found verbatim, the rest normalised,
  /// split and cut into the longest vocabulary pieces (or [UNK]).
  std::vector<std::string> tokenize(const std::string& text) const override;
  /// The text's words before the WordPiece split: special tokens found
  /// verbatim, the rest normalised and split on white space and around
  /// punctuation (tokenize() cuts each word into pieces). For building a
  /// vocabulary of whole words.
  std::vector<std::string> words(const std::string& text) const;
  /// The ids of tokenize(text), without [CLS] / [SEP].
  std::vector<int64_t> encode(const std::string& text) const override;
  /// Pieces joined by spaces, "##" continuations glued on, and no space
  /// before . , ! ? nor in the English contractions ('s, n't, ...) (HF's
  /// WordPiece decoder with its clean-up). skip_special leaves out [CLS],
  /// [SEP], [PAD], [UNK] and [MASK].
  std::string decode(const std::vector<int64_t>& ids, bool skip_special = false) const override;
  /// The id of a token, or -1 when absent.
  int64_t token_to_id(const std::string& token) const override { return vocab_.id(token); }
  /// The token of an id; an Error out of range.
  const std::string& id_to_token(int64_t id) const override { return vocab_.token(id); }
  /// {"kind": "wordpiece", the options, "tokens": [...]}.
  std::string to_json() const override;

  const Vocabulary& vocabulary() const { return vocab_; }  ///< The vocabulary.
  const WordPieceOptions& options() const { return opts_; }  ///< The options, as given.
  /// \name Special token ids
  /// The id of each special token, or -1 when the vocabulary lacks it (never
  /// for [UNK], which must be present).
  /// @{
  int64_t cls_id() const { return cls_id_; }    ///< [CLS]
  int64_t sep_id() const { return sep_id_; }    ///< [SEP]
  int64_t pad_id() const { return pad_id_; }    ///< [PAD]
  int64_t mask_id() const { return mask_id_; }  ///< [MASK]
  int64_t unk_id() const { return unk_id_; }    ///< [UNK]
  /// @}
  /// Whether \p id is one of the special tokens above.
  bool is_special(int64_t id) const;

 private:
  // The words of one stretch of text without special tokens, normalised and split.
  void basic_tokens(const std::string& text, std::vector<std::string>& out) const;
  void wordpieces(const std::string& word, std::vector<std::string>& out) const;
  std::vector<std::string> specials() const;
  // tokenize() (pieces true) and words() (pieces false).
  std::vector<std::string> split(const std::string& text, bool pieces) const;
  Vocabulary vocab_;
  WordPieceOptions opts_;
  int64_t cls_id_ = -1, sep_id_ = -1, pad_id_ = -1, mask_id_ = -1, unk_id_ = -1;
};

}  // namespace text
}  // namespace remora
