#include "data.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>

#include "../../backends/philox.h"
#include "../../ops/ops.h"
#include "input_checks.h"

namespace remora {
namespace data {

// ============================ helpers ============================

namespace {

double uniform01(Generator& gen) {
  const uint64_t ctr = gen.advance(1);
  return philox::uniform(philox::philox(gen.seed(), ctr));
}

std::string read_file(const char* fn, const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  REMORA_CHECK(f.good(), fn << ": cannot open '" << path
                            << "' (missing or unreadable); fix: check the path (relative paths "
                               "resolve against the working directory)");
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  REMORA_CHECK(!f.bad(), fn << ": error while reading '" << path << "'");
  REMORA_CHECK(!text.empty(), fn << ": '" << path << "' is empty; fix: point it at a text file");
  return text;
}

// 90/5/5 by bytes: [0, a) train, [a, b) valid, [b, n) test.
void split_bounds(const char* fn, const std::string& what, size_t n, size_t* a, size_t* b) {
  REMORA_CHECK(n >= 20, fn << ": '" << what << "' has " << n
                           << " bytes; the 90/5/5 split needs at least 20 so that no split is "
                              "empty; fix: use a larger file");
  *a = n * 90 / 100;
  *b = *a + n * 5 / 100;
}

Corpus corpus_from(const char* fn, const std::string& text, const std::string& what, bool bytes) {
  size_t a = 0, b = 0;
  REMORA_CHECK(!text.empty(), fn << ": '" << what << "' is empty; fix: point it at a text file");
  split_bounds(fn, what, text.size(), &a, &b);
  Corpus c;
  c.vocab = bytes ? Vocab::bytes_vocab() : Vocab::from_text(text.substr(0, a));
  c.train = c.vocab.encode(text.substr(0, a));
  c.valid = c.vocab.encode(text.substr(a, b - a));
  c.test = c.vocab.encode(text.substr(b));
  return c;
}

std::vector<double> host_values(const char* fn, const Tensor& t, const char* name) {
  REMORA_CHECK(t.defined(), fn << ": " << name << " is undefined");
  return t.to_vector();
}

}  // namespace

int64_t uniform_int(Generator& gen, int64_t n) {
  REMORA_CHECK(n > 0, "uniform_int: n must be positive, got " << n);
  const int64_t k = int64_t(uniform01(gen) * double(n));
  return std::min(k, n - 1);
}

std::vector<int64_t> permutation(int64_t n, Generator& gen) {
  REMORA_CHECK(n >= 0, "permutation: n must be >= 0, got " << n);
  std::vector<int64_t> p(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) p[size_t(i)] = i;
  for (int64_t i = n - 1; i > 0; --i) std::swap(p[size_t(i)], p[size_t(uniform_int(gen, i + 1))]);
  return p;
}

// ============================ Vocab ============================

Vocab Vocab::from_text(const std::string& train_text) {
  bool seen[256] = {false};
  for (unsigned char c : train_text) seen[c] = true;
  Vocab v;
  v.kind = Kind::chars;
  for (int c = 0; c < 256; ++c)
    if (seen[c]) v.symbols.push_back(char(c));
  return v;
}

Vocab Vocab::bytes_vocab() {
  Vocab v;
  v.kind = Kind::bytes;
  return v;
}

int64_t Vocab::size() const {
  return kind == Kind::bytes ? 256 : int64_t(symbols.size()) + 1;
}

int64_t Vocab::id(unsigned char c) const {
  if (kind == Kind::bytes) return int64_t(c);
  // symbols is sorted by byte value (unsigned), so binary search on unsigned chars.
  auto it = std::lower_bound(symbols.begin(), symbols.end(), c, [](char s, unsigned char v) {
    return static_cast<unsigned char>(s) < v;
  });
  if (it == symbols.end() || static_cast<unsigned char>(*it) != c) return kUnk;
  return int64_t(it - symbols.begin()) + 1;
}

std::vector<int64_t> Vocab::encode(const std::string& text) const {
  int64_t table[256];
  for (int c = 0; c < 256; ++c) table[c] = id(static_cast<unsigned char>(c));
  std::vector<int64_t> out(text.size());
  for (size_t i = 0; i < text.size(); ++i) out[i] = table[static_cast<unsigned char>(text[i])];
  return out;
}

std::string Vocab::decode(const std::vector<int64_t>& ids, const std::string& unk_text) const {
  std::string out;
  out.reserve(ids.size());
  const int64_t V = size();
  for (size_t i = 0; i < ids.size(); ++i) {
    const int64_t t = ids[i];
    REMORA_CHECK(t >= 0 && t < V, "Vocab::decode: id " << t << " at position " << i
                                                       << " is outside the vocabulary [0, " << V
                                                       << "); fix: decode ids of this vocab");
    if (kind == Kind::bytes)
      out.push_back(char(t));
    else if (t == kUnk)
      out += unk_text;
    else
      out.push_back(symbols[size_t(t - 1)]);
  }
  return out;
}

std::string Vocab::to_json() const {
  nlohmann::json j;
  j["kind"] = kind == Kind::bytes ? "bytes" : "chars";
  if (kind == Kind::chars) {
    j["unk_id"] = kUnk;
    std::vector<int> bytes;
    for (char c : symbols) bytes.push_back(int(static_cast<unsigned char>(c)));
    j["symbols"] = bytes;
  }
  return j.dump();
}

Vocab Vocab::from_json(const std::string& json_text) {
  REMORA_CHECK(remora::driver::json_depth(json_text) <= remora::driver::kMaxJsonDepth,
               "Vocab::from_json: JSON nested more than " << remora::driver::kMaxJsonDepth << " levels deep");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json_text);
  } catch (const std::exception& e) {
    REMORA_FAIL("Vocab::from_json: not valid JSON (" << e.what()
                                                     << "); fix: pass the string from to_json()");
  }
  REMORA_CHECK(j.is_object() && j.contains("kind") && j["kind"].is_string(),
               "Vocab::from_json: expected an object with \"kind\": \"chars\" | \"bytes\"");
  const std::string kind = j["kind"].get<std::string>();
  if (kind == "bytes") return bytes_vocab();
  REMORA_CHECK(kind == "chars", "Vocab::from_json: kind \"" << kind
                                                            << "\" is not \"chars\" or \"bytes\"");
  REMORA_CHECK(!j.contains("unk_id") || (j["unk_id"].is_number_integer() && j["unk_id"] == kUnk),
               "Vocab::from_json: unk_id must be " << kUnk);
  REMORA_CHECK(j.contains("symbols") && j["symbols"].is_array(),
               "Vocab::from_json: \"symbols\" must be an array of byte values");
  Vocab v;
  int prev = -1;
  for (const auto& e : j["symbols"]) {
    REMORA_CHECK(e.is_number_integer() && e.get<int>() >= 0 && e.get<int>() < 256,
                 "Vocab::from_json: symbols must be integers in [0, 256), got " << e.dump());
    const int b = e.get<int>();
    REMORA_CHECK(b > prev, "Vocab::from_json: symbols must be strictly increasing (got "
                               << b << " after " << prev << ")");
    prev = b;
    v.symbols.push_back(char(b));
  }
  return v;
}

// ============================ corpora ============================

Corpus load_char_corpus(const std::string& path) {
  return corpus_from("load_char_corpus", read_file("load_char_corpus", path), path, false);
}
Corpus load_byte_corpus(const std::string& path) {
  return corpus_from("load_byte_corpus", read_file("load_byte_corpus", path), path, true);
}
Corpus char_corpus_from_text(const std::string& text, const std::string& what) {
  return corpus_from("char_corpus_from_text", text, what, false);
}
Corpus byte_corpus_from_text(const std::string& text, const std::string& what) {
  return corpus_from("byte_corpus_from_text", text, what, true);
}

// ============================ LMStream ============================

LMStream::LMStream(std::vector<int64_t> tokens, int64_t batch, int64_t seq_len)
    : tokens_(std::move(tokens)), B_(batch), T_(seq_len) {
  REMORA_CHECK(B_ > 0, "LMStream: batch must be positive, got " << B_);
  REMORA_CHECK(T_ > 0, "LMStream: seq_len must be positive, got " << T_);
  const int64_t N = int64_t(tokens_.size());
  S_ = N / B_;
  num_segments_ = S_ > 0 ? (S_ - 1) / T_ : 0;
  REMORA_CHECK(num_segments_ >= 1,
               "LMStream: " << N << " tokens in " << B_ << " streams give " << S_
                            << " tokens per stream, but one segment needs seq_len + 1 = "
                            << T_ + 1 << "; fix: lower batch or seq_len, or use more data");
}

LMBatch LMStream::segment(int64_t s) const {
  REMORA_CHECK(s >= 0 && s < num_segments_,
               "LMStream::segment: " << s << " is outside [0, " << num_segments_ << ")");
  LMBatch b;
  b.x = Tensor::empty({B_, T_}, DType::i64);
  b.y = Tensor::empty({B_, T_}, DType::i64);
  int64_t* x = b.x.data_ptr<int64_t>();
  int64_t* y = b.y.data_ptr<int64_t>();
  for (int64_t r = 0; r < B_; ++r) {
    const int64_t* src = tokens_.data() + r * S_ + s * T_;
    std::copy(src, src + T_, x + r * T_);
    std::copy(src + 1, src + 1 + T_, y + r * T_);
  }
  b.segment = s;
  return b;
}

LMBatch LMStream::next() {
  LMBatch b = segment(position_ % num_segments_);
  b.epoch = position_ / num_segments_;
  ++position_;
  return b;
}

void LMStream::set_position(int64_t p) {
  REMORA_CHECK(p >= 0, "LMStream::set_position: position must be >= 0, got "
                           << p << "; fix: restore the value saved from position()");
  position_ = p;
}

// ============================ formal languages ============================

namespace {

constexpr int kMaxSyms = 4;

// A DFA over alphabet symbols 0..A-1; state 0 is the start. `live` (can still
// reach an accepting state) is derived, so sinks need no special marking.
struct Dfa {
  int A = 0;
  std::vector<std::vector<int>> delta;  // [Q][A]
  std::vector<bool> accept;             // [Q]
  std::vector<bool> live;               // [Q]

  Dfa(int a, std::vector<std::vector<int>> d, std::vector<bool> acc)
      : A(a), delta(std::move(d)), accept(std::move(acc)) {
    const size_t Q = delta.size();
    live = accept;
    for (bool changed = true; changed;) {  // backwards reachability to F
      changed = false;
      for (size_t q = 0; q < Q; ++q)
        for (int c = 0; c < A && !live[q]; ++c)
          if (live[size_t(delta[q][size_t(c)])]) live[q] = changed = true;
    }
  }

  // cnt[r][q]: the number of strings of length r that lead q to an accepting state.
  std::vector<std::vector<double>> counts(int64_t n) const {
    const size_t Q = delta.size();
    std::vector<std::vector<double>> cnt(size_t(n + 1), std::vector<double>(Q, 0.0));
    for (size_t q = 0; q < Q; ++q) cnt[0][q] = accept[q] ? 1.0 : 0.0;
    for (int64_t r = 1; r <= n; ++r)
      for (size_t q = 0; q < Q; ++q) {
        double s = 0;
        for (int c = 0; c < A; ++c) s += cnt[size_t(r - 1)][size_t(delta[q][size_t(c)])];
        cnt[size_t(r)][q] = s;
      }
    return cnt;
  }
};

const Dfa& dfa_of(Language lang) {
  using V = std::vector<std::vector<int>>;
  static const Dfa parity(2, V{{0, 1}, {1, 0}}, {true, false});
  // 1*: state 1 is the sink after a 0.
  static const Dfa t1(2, V{{1, 0}, {1, 1}}, {true, false});
  // (10)*: 0 = between pairs, 1 = after a 1, 2 = sink.
  static const Dfa t2(2, V{{2, 1}, {0, 2}, {2, 2}}, {true, false, false});
  // 0 = free (in 0s, or in an even run of 1s), 1 = in an odd run of 1s,
  // 2 = odd run of 0s right after an odd run of 1s (reject unless more 0s come),
  // 3 = even run of 0s right after an odd run of 1s, 4 = sink.
  static const Dfa t3(2, V{{0, 1}, {2, 0}, {3, 4}, {2, 1}, {4, 4}},
                      {true, true, false, true, false});
  // no 000: state = trailing 0s (0..2), 3 = sink.
  static const Dfa t4(2, V{{1, 0}, {2, 0}, {3, 0}, {3, 3}}, {true, true, true, false});
  // state = (#0 mod 2) + 2 (#1 mod 2).
  static const Dfa t5(2, V{{1, 2}, {0, 3}, {3, 0}, {2, 1}}, {true, false, false, false});
  // state = (#0 - #1) mod 3.
  static const Dfa t6(2, V{{1, 2}, {2, 0}, {0, 1}}, {true, false, false});
  // 0*1*0*1*: state = which block we are in (0..3), 4 = sink.
  static const Dfa t7(2, V{{0, 1}, {2, 1}, {2, 3}, {4, 3}, {4, 4}},
                      {true, true, true, true, false});
  static const Dfa aa(1, V{{1}, {0}}, {true, false});
  // (abab)*: 0 -a-> 1 -b-> 2 -a-> 3 -b-> 0, anything else to the sink 4.
  static const Dfa abab(2, V{{1, 4}, {4, 2}, {3, 4}, {4, 0}, {4, 4}},
                        {true, false, false, false, false});
  switch (lang) {
    case Language::parity: return parity;
    case Language::tomita1: return t1;
    case Language::tomita2: return t2;
    case Language::tomita3: return t3;
    case Language::tomita4: return t4;
    case Language::tomita5: return t5;
    case Language::tomita6: return t6;
    case Language::tomita7: return t7;
    case Language::aa_star: return aa;
    case Language::abab_star: return abab;
    default: REMORA_FAIL("formal languages: " << language_name(lang) << " has no DFA");
  }
}

// Symbol index of c in the alphabet, or -1.
int symbol_of(const std::string& alphabet, char c) {
  const size_t p = alphabet.find(c);
  return p == std::string::npos ? -1 : int(p);
}

std::vector<int> to_symbols(const char* fn, Language lang, const std::string& w) {
  const std::string alpha = language_alphabet(lang);
  std::vector<int> s(w.size());
  for (size_t i = 0; i < w.size(); ++i) {
    s[i] = symbol_of(alpha, w[i]);
    REMORA_CHECK(s[i] >= 0, fn << ": character '" << w[i] << "' at position " << i << " of \""
                               << w << "\" is not in the alphabet \"" << alpha << "\" of "
                               << language_name(lang));
  }
  return s;
}

// Dyck-2 symbols: 0 '(' 1 ')' 2 '[' 3 ']'.
bool is_open(int s) { return s == 0 || s == 2; }

// N[r][d]: Dyck-2 completions of length r from stack depth d (each open has 2 types).
std::vector<std::vector<double>> dyck_counts(int64_t n) {
  std::vector<std::vector<double>> N(size_t(n + 1), std::vector<double>(size_t(n + 2), 0.0));
  N[0][0] = 1;
  for (int64_t r = 1; r <= n; ++r)
    for (int64_t d = 0; d <= n; ++d)
      N[size_t(r)][size_t(d)] = 2 * N[size_t(r - 1)][size_t(d + 1)] +
                                (d > 0 ? N[size_t(r - 1)][size_t(d - 1)] : 0.0);
  return N;
}

// Picks index i with probability w[i] / sum(w).
int pick(const double* w, int n, Generator& gen) {
  double total = 0;
  for (int i = 0; i < n; ++i) total += w[i];
  double u = uniform01(gen) * total;
  int last = -1;
  for (int i = 0; i < n; ++i) {
    if (w[i] <= 0) continue;
    last = i;
    if (u < w[i]) return i;
    u -= w[i];
  }
  return last;  // rounding at the top end
}

// String of length n, uniform over the language's strings of length n, given
// the count tables (precomputed up to at least n).
std::string sample_with(Language lang, int64_t n, Generator& gen,
                        const std::vector<std::vector<double>>& cnt) {
  const std::string alpha = language_alphabet(lang);
  std::string w;
  w.reserve(size_t(n));
  if (lang == Language::dyck2) {
    std::vector<int> stack;
    for (int64_t r = n; r > 0; --r) {
      const int64_t d = int64_t(stack.size());
      const double open = cnt[size_t(r - 1)][size_t(d + 1)];
      double wts[3] = {open, open, d > 0 ? cnt[size_t(r - 1)][size_t(d - 1)] : 0.0};
      const int k = pick(wts, 3, gen);
      if (k < 2) {
        const int s = k == 0 ? 0 : 2;
        stack.push_back(s);
        w.push_back(alpha[size_t(s)]);
      } else {
        w.push_back(alpha[size_t(stack.back() + 1)]);
        stack.pop_back();
      }
    }
    return w;
  }
  const Dfa& dfa = dfa_of(lang);
  int q = 0;
  for (int64_t r = n; r > 0; --r) {
    double wts[kMaxSyms];
    for (int c = 0; c < dfa.A; ++c) wts[c] = cnt[size_t(r - 1)][size_t(dfa.delta[size_t(q)][size_t(c)])];
    const int c = pick(wts, dfa.A, gen);
    w.push_back(alpha[size_t(c)]);
    q = dfa.delta[size_t(q)][size_t(c)];
  }
  return w;
}

std::vector<std::vector<double>> count_table(Language lang, int64_t n) {
  return lang == Language::dyck2 ? dyck_counts(n) : dfa_of(lang).counts(n);
}

double count_at(Language lang, const std::vector<std::vector<double>>& cnt, int64_t n) {
  return cnt[size_t(n)][0];  // start state 0 / depth 0
}

}  // namespace

std::vector<Language> all_languages() {
  return {Language::parity,  Language::tomita1, Language::tomita2,   Language::tomita3,
          Language::tomita4, Language::tomita5, Language::tomita6,   Language::tomita7,
          Language::aa_star, Language::abab_star, Language::dyck2};
}

std::string language_name(Language lang) {
  switch (lang) {
    case Language::parity: return "parity";
    case Language::tomita1: return "tomita1";
    case Language::tomita2: return "tomita2";
    case Language::tomita3: return "tomita3";
    case Language::tomita4: return "tomita4";
    case Language::tomita5: return "tomita5";
    case Language::tomita6: return "tomita6";
    case Language::tomita7: return "tomita7";
    case Language::aa_star: return "aa_star";
    case Language::abab_star: return "abab_star";
    case Language::dyck2: return "dyck2";
  }
  return "?";
}

Language language_from_name(const std::string& s) {
  for (Language l : all_languages())
    if (language_name(l) == s) return l;
  if (s == "(aa)*") return Language::aa_star;
  if (s == "(abab)*") return Language::abab_star;
  std::string names;
  for (Language l : all_languages()) names += (names.empty() ? "" : ", ") + language_name(l);
  REMORA_FAIL("language_from_name: unknown language \"" << s << "\"; fix: use one of " << names);
}

std::string language_alphabet(Language lang) {
  switch (lang) {
    case Language::aa_star: return "a";
    case Language::abab_star: return "ab";
    case Language::dyck2: return "()[]";
    default: return "01";
  }
}

bool in_language(Language lang, const std::string& w) {
  const std::string alpha = language_alphabet(lang);
  if (lang == Language::dyck2) {
    std::vector<int> stack;
    for (char ch : w) {
      const int s = symbol_of(alpha, ch);
      if (s < 0) return false;
      if (is_open(s)) {
        stack.push_back(s);
      } else {
        if (stack.empty() || stack.back() + 1 != s) return false;
        stack.pop_back();
      }
    }
    return stack.empty();
  }
  const Dfa& dfa = dfa_of(lang);
  int q = 0;
  for (char ch : w) {
    const int s = symbol_of(alpha, ch);
    if (s < 0) return false;
    q = dfa.delta[size_t(q)][size_t(s)];
  }
  return dfa.accept[size_t(q)];
}

std::vector<std::vector<uint8_t>> follow_sets(Language lang, const std::string& w) {
  const std::vector<int> sym = to_symbols("follow_sets", lang, w);
  const int A = int(language_alphabet(lang).size());
  const size_t n = sym.size();
  std::vector<std::vector<uint8_t>> out(n + 1, std::vector<uint8_t>(size_t(A + 1), 0));
  if (lang == Language::dyck2) {
    std::vector<int> stack;
    bool dead = false;  // a wrong closing bracket: nothing can follow
    for (size_t i = 0; i <= n; ++i) {
      if (!dead) {
        out[i][0] = out[i][2] = 1;  // an opening bracket can always be closed later
        if (!stack.empty()) out[i][size_t(stack.back() + 1)] = 1;
        out[i][size_t(A)] = stack.empty();
      }
      if (i == n) break;
      const int s = sym[i];
      if (dead) continue;
      if (is_open(s)) {
        stack.push_back(s);
      } else if (!stack.empty() && stack.back() + 1 == s) {
        stack.pop_back();
      } else {
        dead = true;
      }
    }
    return out;
  }
  const Dfa& dfa = dfa_of(lang);
  int q = 0;
  for (size_t i = 0; i <= n; ++i) {
    for (int c = 0; c < A; ++c) out[i][size_t(c)] = dfa.live[size_t(dfa.delta[size_t(q)][size_t(c)])];
    out[i][size_t(A)] = dfa.accept[size_t(q)];
    if (i < n) q = dfa.delta[size_t(q)][size_t(sym[i])];
  }
  return out;
}

bool has_length(Language lang, int64_t n) {
  REMORA_CHECK(n >= 0, "has_length: length must be >= 0, got " << n);
  return count_at(lang, count_table(lang, n), n) > 0;
}

std::string sample_string(Language lang, int64_t n, Generator& gen) {
  REMORA_CHECK(n >= 0, "sample_string: length must be >= 0, got " << n);
  const auto cnt = count_table(lang, n);
  REMORA_CHECK(count_at(lang, cnt, n) > 0, "sample_string: " << language_name(lang)
                                                             << " has no string of length " << n
                                                             << "; fix: check has_length() first");
  return sample_with(lang, n, gen, cnt);
}

int64_t FormalDataset::num_targets() const { return int64_t(language_alphabet(lang).size()) + 1; }
int64_t FormalDataset::vocab_size() const { return int64_t(language_alphabet(lang).size()) + 2; }
int64_t FormalDataset::start_id() const { return int64_t(language_alphabet(lang).size()); }
int64_t FormalDataset::pad_id() const { return int64_t(language_alphabet(lang).size()) + 1; }

FormalDataset make_formal_dataset(Language lang, int64_t count, int64_t min_len, int64_t max_len,
                                  Generator& gen) {
  REMORA_CHECK(count >= 0, "make_formal_dataset: count must be >= 0, got " << count);
  REMORA_CHECK(min_len >= 0 && min_len <= max_len,
               "make_formal_dataset: need 0 <= min_len <= max_len, got min_len "
                   << min_len << ", max_len " << max_len);
  const auto cnt = count_table(lang, max_len);
  std::vector<int64_t> lengths;
  for (int64_t n = min_len; n <= max_len; ++n)
    if (count_at(lang, cnt, n) > 0) lengths.push_back(n);
  REMORA_CHECK(!lengths.empty(), "make_formal_dataset: " << language_name(lang)
                                                         << " has no string with length in ["
                                                         << min_len << ", " << max_len
                                                         << "]; fix: widen the range");
  FormalDataset ds;
  ds.lang = lang;
  ds.min_len = min_len;
  ds.max_len = max_len;
  ds.examples.reserve(size_t(count));
  const int64_t A = int64_t(language_alphabet(lang).size());
  const std::string alpha = language_alphabet(lang);
  for (int64_t i = 0; i < count; ++i) {
    const int64_t n = lengths[size_t(uniform_int(gen, int64_t(lengths.size())))];
    FormalExample ex;
    ex.text = sample_with(lang, n, gen, cnt);
    ex.ids.reserve(size_t(n + 1));
    ex.ids.push_back(A);  // <s>
    for (char c : ex.text) ex.ids.push_back(symbol_of(alpha, c));
    const auto f = follow_sets(lang, ex.text);
    ex.targets.reserve(size_t((n + 1) * (A + 1)));
    for (const auto& row : f) ex.targets.insert(ex.targets.end(), row.begin(), row.end());
    ds.examples.push_back(std::move(ex));
  }
  return ds;
}

FormalSplits make_formal_splits(Language lang, Generator& gen, int64_t n_train,
                                int64_t n_test_per_bin) {
  FormalSplits s;
  s.train = make_formal_dataset(lang, n_train, 2, 50, gen);
  s.test_bins.push_back(make_formal_dataset(lang, n_test_per_bin, 51, 100, gen));
  s.test_bins.push_back(make_formal_dataset(lang, n_test_per_bin, 101, 150, gen));
  return s;
}

FormalBatch formal_batch(const FormalDataset& ds, const std::vector<int64_t>& indices) {
  REMORA_CHECK(!indices.empty(), "formal_batch: no indices; fix: pass at least one example index");
  const int64_t B = int64_t(indices.size()), K = ds.num_targets();
  int64_t L = 0;
  for (int64_t i : indices) {
    REMORA_CHECK(i >= 0 && i < ds.size(), "formal_batch: index " << i << " is outside [0, "
                                                                 << ds.size() << ") of the "
                                                                 << language_name(ds.lang)
                                                                 << " dataset");
    L = std::max(L, int64_t(ds.examples[size_t(i)].ids.size()));
  }
  FormalBatch b;
  b.ids = Tensor::full({B, L}, double(ds.pad_id()), DType::i64);
  b.targets = Tensor::zeros({B, L, K}, DType::f32);
  b.mask = Tensor::zeros({B, L}, DType::f32);
  b.key_padding = Tensor::ones({B, L}, DType::i64);
  int64_t* ids = b.ids.data_ptr<int64_t>();
  float* tg = b.targets.data_ptr<float>();
  float* m = b.mask.data_ptr<float>();
  int64_t* kp = b.key_padding.data_ptr<int64_t>();
  for (int64_t r = 0; r < B; ++r) {
    const FormalExample& ex = ds.examples[size_t(indices[size_t(r)])];
    const int64_t n1 = int64_t(ex.ids.size());
    for (int64_t l = 0; l < n1; ++l) {
      ids[r * L + l] = ex.ids[size_t(l)];
      m[r * L + l] = 1;
      kp[r * L + l] = 0;
      for (int64_t k = 0; k < K; ++k) tg[(r * L + l) * K + k] = ex.targets[size_t(l * K + k)];
    }
  }
  return b;
}

int64_t formal_num_correct(const Tensor& logits, const FormalBatch& batch) {
  const Shape& ts = batch.targets.shape();
  REMORA_CHECK(logits.defined() && logits.shape() == ts,
               "formal_accuracy: logits must be [B, L, K] = "
                   << shape_str(ts) << " like the batch targets, got "
                   << (logits.defined() ? shape_str(logits.shape()) : std::string("undefined")));
  const std::vector<double> x = logits.to_vector();
  const std::vector<double> t = batch.targets.to_vector();
  const std::vector<double> m = batch.mask.to_vector();
  const int64_t B = ts[0], L = ts[1], K = ts[2];
  int64_t correct = 0;
  for (int64_t b = 0; b < B; ++b) {
    bool ok = true;
    for (int64_t l = 0; l < L && ok; ++l) {
      if (m[size_t(b * L + l)] == 0) continue;
      for (int64_t k = 0; k < K; ++k) {
        const size_t i = size_t((b * L + l) * K + k);
        if ((x[i] > 0) != (t[i] > 0.5)) { ok = false; break; }
      }
    }
    correct += ok;
  }
  return correct;
}

double formal_accuracy(const Tensor& logits, const FormalBatch& batch) {
  return double(formal_num_correct(logits, batch)) / double(batch.targets.size(0));
}

// ============================ time series ============================

std::vector<double> make_multi_periodic_series(const SeriesConfig& cfg, Generator& gen) {
  REMORA_CHECK(cfg.length > 0, "make_multi_periodic_series: length must be positive, got "
                                   << cfg.length);
  REMORA_CHECK(cfg.periods.size() == cfg.amplitudes.size(),
               "make_multi_periodic_series: " << cfg.periods.size() << " periods but "
                                              << cfg.amplitudes.size()
                                              << " amplitudes; fix: give one amplitude per period");
  for (double p : cfg.periods)
    REMORA_CHECK(p > 0, "make_multi_periodic_series: periods must be positive, got " << p);
  REMORA_CHECK(cfg.noise_std >= 0,
               "make_multi_periodic_series: noise_std must be >= 0, got " << cfg.noise_std);
  const double two_pi = 6.283185307179586;
  std::vector<double> phase;
  for (size_t k = 0; k < cfg.periods.size(); ++k) phase.push_back(two_pi * uniform01(gen));
  const uint64_t base = gen.advance(uint64_t(cfg.length));  // one counter per noise sample
  std::vector<double> s(size_t(cfg.length));
  for (int64_t t = 0; t < cfg.length; ++t) {
    double v = cfg.trend * double(t);
    for (size_t k = 0; k < cfg.periods.size(); ++k)
      v += cfg.amplitudes[k] * std::sin(two_pi * double(t) / cfg.periods[k] + phase[k]);
    if (cfg.noise_std > 0)
      v += cfg.noise_std * philox::normal(philox::philox(gen.seed(), base + uint64_t(t)));
    s[size_t(t)] = v;
  }
  return s;
}

SeriesSplits split_series(const std::vector<double>& s, double train_frac, double valid_frac,
                          int64_t context) {
  REMORA_CHECK(train_frac > 0 && valid_frac >= 0 && train_frac + valid_frac < 1,
               "split_series: need train_frac > 0, valid_frac >= 0 and their sum < 1, got "
                   << train_frac << " and " << valid_frac);
  const int64_t n = int64_t(s.size());
  const int64_t a = int64_t(double(n) * train_frac);
  const int64_t b = a + int64_t(double(n) * valid_frac);
  REMORA_CHECK(context >= 0 && context <= a,
               "split_series: context " << context << " must be in [0, train length " << a
                                        << "]; fix: a longer series or a shorter context");
  SeriesSplits out;
  out.train.assign(s.begin(), s.begin() + a);
  out.valid.assign(s.begin() + (a - context), s.begin() + b);
  out.test.assign(s.begin() + (b - context), s.end());
  return out;
}

WindowDataset::WindowDataset(std::vector<double> series, int64_t input_len, int64_t horizon,
                             int64_t stride)
    : s_(std::move(series)), Lin_(input_len), H_(horizon), stride_(stride) {
  REMORA_CHECK(Lin_ > 0 && H_ > 0 && stride_ > 0,
               "WindowDataset: input_len, horizon and stride must be positive, got "
                   << Lin_ << ", " << H_ << ", " << stride_);
  const int64_t n = int64_t(s_.size());
  REMORA_CHECK(n >= Lin_ + H_, "WindowDataset: a series of " << n
                                                             << " steps is shorter than input_len + "
                                                                "horizon = "
                                                             << Lin_ + H_
                                                             << "; fix: shorter windows or more data");
  n_ = (n - Lin_ - H_) / stride_ + 1;
}

ForecastBatch WindowDataset::batch(const std::vector<int64_t>& indices) const {
  REMORA_CHECK(!indices.empty(), "WindowDataset::batch: no indices");
  const int64_t B = int64_t(indices.size());
  ForecastBatch fb;
  fb.x = Tensor::empty({B, Lin_, 1}, DType::f32);
  fb.y = Tensor::empty({B, H_, 1}, DType::f32);
  float* x = fb.x.data_ptr<float>();
  float* y = fb.y.data_ptr<float>();
  for (int64_t r = 0; r < B; ++r) {
    const int64_t i = indices[size_t(r)];
    REMORA_CHECK(i >= 0 && i < n_, "WindowDataset::batch: window " << i << " is outside [0, "
                                                                   << n_ << ")");
    const double* src = s_.data() + i * stride_;
    for (int64_t t = 0; t < Lin_; ++t) x[r * Lin_ + t] = float(src[t]);
    for (int64_t t = 0; t < H_; ++t) y[r * H_ + t] = float(src[Lin_ + t]);
  }
  return fb;
}

namespace {
double mean_error(const char* fn, const Tensor& pred, const Tensor& target, bool squared) {
  REMORA_CHECK(pred.defined() && target.defined() && pred.shape() == target.shape(),
               fn << ": pred and target must have the same shape, got "
                  << (pred.defined() ? shape_str(pred.shape()) : "undefined") << " and "
                  << (target.defined() ? shape_str(target.shape()) : "undefined"));
  const std::vector<double> p = host_values(fn, pred, "pred"), t = host_values(fn, target, "target");
  REMORA_CHECK(!p.empty(), fn << ": empty tensors");
  double s = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const double d = p[i] - t[i];
    s += squared ? d * d : std::fabs(d);
  }
  return s / double(p.size());
}
}  // namespace

double mse(const Tensor& pred, const Tensor& target) { return mean_error("mse", pred, target, true); }
double mae(const Tensor& pred, const Tensor& target) { return mean_error("mae", pred, target, false); }

// ======================= padded classification =======================

ClassBatch pad_batch(const std::vector<std::vector<int64_t>>& seqs,
                     const std::vector<int64_t>& labels, int64_t pad_id, int64_t max_len) {
  REMORA_CHECK(!seqs.empty(), "pad_batch: no sequences");
  REMORA_CHECK(seqs.size() == labels.size(), "pad_batch: " << seqs.size() << " sequences but "
                                                           << labels.size()
                                                           << " labels; fix: one label each");
  REMORA_CHECK(max_len >= 0, "pad_batch: max_len must be >= 0 (0 = no limit), got " << max_len);
  const int64_t B = int64_t(seqs.size());
  int64_t L = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    REMORA_CHECK(!seqs[i].empty(), "pad_batch: sequence " << i
                                                          << " is empty (attention over only "
                                                             "padding is undefined); fix: drop it");
    L = std::max(L, int64_t(seqs[i].size()));
  }
  if (max_len > 0) L = std::min(L, max_len);
  ClassBatch cb;
  cb.ids = Tensor::full({B, L}, double(pad_id), DType::i64);
  cb.key_padding = Tensor::ones({B, L}, DType::i64);
  cb.labels = Tensor::from_vector(labels, {B}, DType::i64);
  cb.lengths = Tensor::empty({B}, DType::i64);
  int64_t* ids = cb.ids.data_ptr<int64_t>();
  int64_t* kp = cb.key_padding.data_ptr<int64_t>();
  int64_t* len = cb.lengths.data_ptr<int64_t>();
  for (int64_t r = 0; r < B; ++r) {
    const auto& s = seqs[size_t(r)];
    const int64_t n = std::min(L, int64_t(s.size()));
    len[r] = n;
    for (int64_t l = 0; l < n; ++l) {
      ids[r * L + l] = s[size_t(l)];
      kp[r * L + l] = 0;
    }
  }
  return cb;
}

// ======================= memory tasks =======================

MemoryBatch make_memory_batch(const MemoryTask& t, int64_t B, Generator& gen) {
  REMORA_CHECK(t.task == "copy" || t.task == "denoise",
               "memory task: unknown task \"" << t.task << "\"; expected copy or denoise");
  REMORA_CHECK(t.delay >= 1 && t.symbols >= 1 && t.length >= 1,
               "memory task: delay, symbols and length must be >= 1");
  REMORA_CHECK(t.task == "copy" || t.delay - 1 >= t.length,
               "denoise: delay - 1 = " << t.delay - 1 << " noise positions cannot hold " << t.length
                                       << " symbols; fix: delay >= length + 1");
  const int64_t L = t.seq_len(), delim = t.symbols + 1;
  std::vector<int64_t> x(size_t(B * L), 0), y(size_t(B * L), t.task == "copy" ? 0 : -100);
  for (int64_t b = 0; b < B; ++b) {
    int64_t* xr = x.data() + b * L;
    int64_t* yr = y.data() + b * L;
    std::vector<int64_t> sym(size_t(t.length));
    for (auto& v : sym) v = 1 + uniform_int(gen, t.symbols);
    if (t.task == "copy") {
      for (int64_t i = 0; i < t.length; ++i) xr[i] = sym[size_t(i)];
      xr[t.length + t.delay - 1] = delim;
    } else {
      // `length` distinct positions among the delay - 1 noise positions, in order.
      std::vector<int64_t> perm = permutation(t.delay - 1, gen);
      std::vector<int64_t> pos(perm.begin(), perm.begin() + t.length);
      std::sort(pos.begin(), pos.end());
      for (int64_t i = 0; i < t.length; ++i) xr[pos[size_t(i)]] = sym[size_t(i)];
      xr[t.delay - 1] = delim;
    }
    for (int64_t i = 0; i < t.length; ++i) yr[L - t.length + i] = sym[size_t(i)];
  }
  return {Tensor::from_vector(x, {B, L}), Tensor::from_vector(y, {B, L})};
}

std::pair<int64_t, int64_t> memory_num_correct(const MemoryTask& t, const Tensor& logits,
                                               const MemoryBatch& b) {
  const int64_t B = b.x.size(0), L = b.x.size(1);
  REMORA_CHECK(logits.dim() == 3 && logits.size(0) == B && logits.size(1) == L,
               "memory_num_correct: logits must be [" << B << ", " << L << ", V], got " << logits.str());
  const std::vector<int64_t> pred = argmax(logits.slice(1, L - t.length, L), -1).to_i64_vector();
  const std::vector<int64_t> y = b.y.slice(1, L - t.length, L).contiguous().to_i64_vector();
  int64_t correct = 0;
  for (size_t i = 0; i < y.size(); ++i) correct += pred[i] == y[i];
  return {correct, int64_t(y.size())};
}

// ======================= membership classification =======================

int64_t MembershipDataset::vocab_size() const { return int64_t(language_alphabet(lang).size()) + 2; }
int64_t MembershipDataset::pad_id() const { return int64_t(language_alphabet(lang).size()) + 1; }

MembershipDataset make_membership_dataset(Language lang, int64_t count, int64_t min_len,
                                          int64_t max_len, Generator& gen) {
  REMORA_CHECK(count >= 1 && min_len >= 1 && max_len >= min_len,
               "make_membership_dataset: need count >= 1 and 1 <= min_len <= max_len");
  MembershipDataset ds;
  ds.lang = lang;
  const std::string alpha = language_alphabet(lang);
  const int64_t A = int64_t(alpha.size());
  for (int64_t e = 0; e < count; ++e) {
    // Members: a length the language has (dyck2 has even lengths only).
    bool want_member = e % 2 == 0;
    int64_t n = min_len + uniform_int(gen, max_len - min_len + 1);
    for (int tries = 0; want_member && !has_length(lang, n) && tries < 100; ++tries)
      n = min_len + uniform_int(gen, max_len - min_len + 1);
    if (want_member && !has_length(lang, n)) want_member = false;
    std::string w;
    bool found = false;
    if (want_member) {
      w = sample_string(lang, n, gen);
      found = true;
    } else {
      for (int tries = 0; tries < 200 && !found; ++tries) {
        w.assign(size_t(n), alpha[0]);
        for (auto& ch : w) ch = alpha[size_t(uniform_int(gen, A))];
        found = !in_language(lang, w);
      }
      if (!found) {  // (almost) every string of length n is a member
        if (!has_length(lang, n)) continue;
        w = sample_string(lang, n, gen);
      }
    }
    std::vector<int64_t> ids{A};  // <s>
    for (char ch : w) ids.push_back(int64_t(alpha.find(ch)));
    ds.ids.push_back(std::move(ids));
    ds.labels.push_back(in_language(lang, w) ? 1 : 0);
  }
  REMORA_CHECK(!ds.ids.empty(), "make_membership_dataset: no strings of lengths " << min_len << ".." << max_len);
  return ds;
}

}  // namespace data
}  // namespace remora
