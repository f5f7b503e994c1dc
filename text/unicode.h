// SPDX-License-Identifier: BSD-3-Clause
// UTF-8 and the Unicode character classes the tokenizers use (on ICU).
// Not installed: an implementation detail of libremora_text.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace remora {
namespace text {
namespace unicode {

// The code points of UTF-8 text; a malformed byte sequence becomes one
// U+FFFD (the replacement character) per bad byte, so any input decodes.
std::vector<char32_t> decode_utf8(const std::string& s);
void append_utf8(std::string& out, char32_t c);
std::string encode_utf8(const std::vector<char32_t>& cps);

// Unicode White_Space (as Rust's char::is_whitespace and Python's str.split()).
bool is_whitespace(char32_t c);
// General category C* (control, format, surrogate, private use, unassigned).
bool is_other(char32_t c);
// ASCII punctuation (!"#$%&'()*+,-./:;<=>?@[\]^_`{|}~) or a category P* character.
bool is_punctuation(char32_t c);
// A CJK ideograph (the blocks BERT's tokenizer surrounds with spaces).
bool is_cjk_ideograph(char32_t c);
// Full lower-case mapping of one code point, without context (so U+03A3 is
// always U+03C3, and U+0130 becomes "i" + U+0307).
void append_lower(std::vector<char32_t>& out, char32_t c);
// Canonical decomposition (NFD) with the nonspacing marks (category Mn) removed.
std::vector<char32_t> nfd_without_marks(const std::vector<char32_t>& cps);

// Splits on whitespace runs, dropping empty pieces, exactly as Python's str.split().
std::vector<std::string> split_whitespace(const std::string& s);
// Unicode lower case of UTF-8 text, in context (Python's str.lower()).
std::string lower(const std::string& s);

}  // namespace unicode
}  // namespace text
}  // namespace remora
