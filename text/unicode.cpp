// SPDX-License-Identifier: BSD-3-Clause
#include "unicode.h"

#include <unicode/locid.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include "../core/error.h"

namespace remora {
namespace text {
namespace unicode {

std::vector<char32_t> decode_utf8(const std::string& s) {
  std::vector<char32_t> out;
  out.reserve(s.size());
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char b = p[i];
    int len = 0;
    char32_t c = 0, min = 0;
    if (b < 0x80) { out.push_back(b); ++i; continue; }
    if ((b & 0xE0) == 0xC0) { len = 2; c = b & 0x1F; min = 0x80; }
    else if ((b & 0xF0) == 0xE0) { len = 3; c = b & 0x0F; min = 0x800; }
    else if ((b & 0xF8) == 0xF0) { len = 4; c = b & 0x07; min = 0x10000; }
    bool ok = len > 0 && i + len <= n;
    for (int k = 1; ok && k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) ok = false;
      else c = (c << 6) | (p[i + k] & 0x3F);
    }
    // Overlong forms, surrogates and values past U+10FFFF are malformed too.
    if (ok && (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))) ok = false;
    if (ok) { out.push_back(c); i += len; }
    else { out.push_back(0xFFFD); ++i; }
  }
  return out;
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

std::string encode_utf8(const std::vector<char32_t>& cps) {
  std::string out;
  out.reserve(cps.size());
  for (char32_t c : cps) append_utf8(out, c);
  return out;
}

bool is_whitespace(char32_t c) { return u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_WHITE_SPACE); }

bool is_other(char32_t c) {
  return (U_GET_GC_MASK(static_cast<UChar32>(c)) & U_GC_C_MASK) != 0;
}

bool is_punctuation(char32_t c) {
  if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126))
    return true;
  return (U_GET_GC_MASK(static_cast<UChar32>(c)) & U_GC_P_MASK) != 0;
}

bool is_cjk_ideograph(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

void append_lower(std::vector<char32_t>& out, char32_t c) {
  // U+0130 is the one code point whose unconditional lower case is two.
  if (c == 0x0130) {
    out.push_back(U'i');
    out.push_back(0x0307);
    return;
  }
  out.push_back(static_cast<char32_t>(u_tolower(static_cast<UChar32>(c))));
}

namespace {
const icu::Normalizer2& nfd() {
  UErrorCode err = U_ZERO_ERROR;
  const icu::Normalizer2* n = icu::Normalizer2::getNFDInstance(err);
  REMORA_CHECK(U_SUCCESS(err) && n, "tokenizer: ICU's NFD normalizer is not available ("
                                        << u_errorName(err) << ")");
  return *n;
}
}  // namespace

std::vector<char32_t> nfd_without_marks(const std::vector<char32_t>& cps) {
  const icu::Normalizer2& n = nfd();
  std::vector<char32_t> out;
  out.reserve(cps.size());
  icu::UnicodeString buf;
  for (char32_t c : cps) {
    // Decomposition is per code point; NFD's reordering of marks does not
    // matter here since every nonspacing mark is dropped.
    buf.remove();
    if (!n.getDecomposition(static_cast<UChar32>(c), buf)) buf = icu::UnicodeString(static_cast<UChar32>(c));
    for (int32_t i = 0; i < buf.length();) {
      const UChar32 d = buf.char32At(i);
      i += U16_LENGTH(d);
      if (u_charType(d) != U_NON_SPACING_MARK) out.push_back(static_cast<char32_t>(d));
    }
  }
  return out;
}

std::vector<std::string> split_whitespace(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  for (char32_t c : decode_utf8(s)) {
    // Python's str.split() also splits on the separators U+001C..U+001F.
    if (is_whitespace(c) || (c >= 0x1C && c <= 0x1F)) {
      if (!cur.empty()) out.push_back(std::move(cur));
      cur.clear();
    } else {
      append_utf8(cur, c);
    }
  }
  if (!cur.empty()) out.push_back(std::move(cur));
  return out;
}

std::string lower(const std::string& s) {
  icu::UnicodeString u = icu::UnicodeString::fromUTF8(s);
  u.toLower(icu::Locale::getRoot());
  std::string out;
  u.toUTF8String(out);
  return out;
}

}  // namespace unicode
}  // namespace text
}  // namespace remora
