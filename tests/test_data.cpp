// SPDX-License-Identifier: BSD-3-Clause
// Datasets and batching of the driver (cli/data.h).
#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <remora/remora.h>

#include "cli/data.h"

#include "helpers.h"

using namespace remora;
using remora_test::contains;
using remora_test::error_of;
using namespace remora::data;

namespace {

const std::string kShakespeare = std::string(REMORA_SOURCE_DIR) + "/data/tinyshakespeare.txt";

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

std::vector<int64_t> i64(const Tensor& t) { return t.to_i64_vector(); }


// Independent membership predicates (not DFAs) for the brute-force checks.
bool repeats(const std::string& w, const std::string& unit) {
  if (w.size() % unit.size()) return false;
  for (size_t i = 0; i < w.size(); ++i)
    if (w[i] != unit[i % unit.size()]) return false;
  return true;
}
int64_t count(const std::string& w, char c) { return int64_t(std::count(w.begin(), w.end(), c)); }
bool tomita3_by_runs(const std::string& w) {
  std::vector<std::pair<char, size_t>> runs;
  for (char c : w) {
    if (runs.empty() || runs.back().first != c) runs.push_back({c, 0});
    ++runs.back().second;
  }
  for (size_t i = 0; i + 1 < runs.size(); ++i)
    if (runs[i].first == '1' && runs[i].second % 2 == 1 && runs[i + 1].second % 2 == 1) return false;
  return true;
}
bool dyck_by_erasing(std::string w) {
  for (bool changed = true; changed;) {
    changed = false;
    for (const char* p : {"()", "[]"}) {
      size_t k;
      while ((k = w.find(p)) != std::string::npos) { w.erase(k, 2); changed = true; }
    }
  }
  return w.empty();
}
bool brute_member(Language l, const std::string& w) {
  switch (l) {
    case Language::parity: return count(w, '1') % 2 == 0;
    case Language::tomita1: return count(w, '0') == 0;
    case Language::tomita2: return repeats(w, "10");
    case Language::tomita3: return tomita3_by_runs(w);
    case Language::tomita4: return w.find("000") == std::string::npos;
    case Language::tomita5: return count(w, '0') % 2 == 0 && count(w, '1') % 2 == 0;
    case Language::tomita6: return (count(w, '0') - count(w, '1')) % 3 == 0;
    // 0*1*0*1*: at most one "10" boundary
    case Language::tomita7: {
      int drops = 0;
      for (size_t i = 0; i + 1 < w.size(); ++i) drops += w[i] == '1' && w[i + 1] == '0';
      return drops <= 1;
    }
    case Language::aa_star: return repeats(w, "aa");
    case Language::abab_star: return repeats(w, "abab");
    case Language::dyck2: return dyck_by_erasing(w);
  }
  return false;
}

// All strings over alpha of length <= n.
std::vector<std::string> all_strings(const std::string& alpha, int n) {
  std::vector<std::string> out{""};
  for (size_t i = 0; i < out.size(); ++i)
    if (int(out[i].size()) < n)
      for (char c : alpha) out.push_back(out[i] + c);
  return out;
}

}  // namespace

// ============================ corpora ============================

TEST_CASE("char corpus: 90/5/5 split by bytes, vocab from train, round trip", "[data]") {
  const std::string text = read_all(kShakespeare);
  REQUIRE(text.size() == 1115394);
  Corpus c = load_char_corpus(kShakespeare);
  const size_t a = text.size() * 90 / 100, b = text.size() * 5 / 100;
  CHECK(c.train.size() == a);
  CHECK(c.valid.size() == b);
  CHECK(c.test.size() == text.size() - a - b);
  // sorted unique bytes of the training split, id 0 = <unk>
  std::string uniq = text.substr(0, a);
  std::sort(uniq.begin(), uniq.end());
  uniq.erase(std::unique(uniq.begin(), uniq.end()), uniq.end());
  CHECK(c.vocab.symbols == uniq);
  CHECK(c.vocab.size() == int64_t(uniq.size()) + 1);
  CHECK(c.vocab.id('\n') == 1);  // the smallest byte in the corpus
  CHECK(std::count(c.train.begin(), c.train.end(), Vocab::kUnk) == 0);
  CHECK(c.vocab.decode(c.train) == text.substr(0, a));
  CHECK(c.vocab.decode(c.valid) == text.substr(a, b));
  CHECK(c.vocab.encode("First Citizen") == std::vector<int64_t>(c.train.begin(), c.train.begin() + 13));
}

TEST_CASE("char corpus: a file is streamed in chunks and split as the text in memory would be", "[data]") {
  // 3.5 MiB: the training split spans several 1 MiB chunks, and a byte that
  // appears only past the first chunk must still enter the vocabulary.
  std::string text;
  text.reserve(size_t(3.5 * (1 << 20)));
  uint64_t x = 12345;
  while (text.size() < size_t(3.5 * (1 << 20))) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    text.push_back(char('a' + (x >> 59)));  // 32 letters from 'a'
  }
  text[(1 << 20) + 17] = '#';     // only in the second chunk of the training split
  text[text.size() - 3] = '%';    // only in the test split: <unk> there
  const std::string path = "remora_test_streamed_corpus.tmp";
  {
    std::ofstream f(path, std::ios::binary);
    f << text;
  }
  for (bool bytes : {false, true}) {
    INFO((bytes ? "bytes" : "chars"));
    const Corpus streamed = bytes ? load_byte_corpus(path) : load_char_corpus(path);
    const Corpus held = bytes ? byte_corpus_from_text(text, path) : char_corpus_from_text(text, path);
    CHECK(streamed.vocab == held.vocab);
    CHECK(streamed.train == held.train);
    CHECK(streamed.valid == held.valid);
    CHECK(streamed.test == held.test);
    if (!bytes) {
      CHECK(streamed.vocab.id('#') != Vocab::kUnk);
      CHECK(streamed.vocab.id('%') == Vocab::kUnk);
    }
  }
  std::remove(path.c_str());
}

TEST_CASE("char corpus: bytes unseen in train become <unk> in valid/test", "[data]") {
  // 100 bytes: train = the first 90 (only a and b), valid 5, test 5.
  std::string text;
  for (int i = 0; i < 90; ++i) text += (i % 3 ? 'a' : 'b');
  text += "abcab";  // valid: 'c' is unknown
  text += "zzaab";  // test: 'z' is unknown
  Corpus c = char_corpus_from_text(text);
  CHECK(c.vocab.symbols == "ab");
  CHECK(c.vocab.size() == 3);
  CHECK(c.valid == std::vector<int64_t>{1, 2, 0, 1, 2});
  CHECK(c.test == std::vector<int64_t>{0, 0, 1, 1, 2});
  CHECK(c.vocab.decode(c.valid) == "ab<unk>ab");
  CHECK(c.vocab.decode(c.test, "?") == "??aab");
  CHECK(c.vocab.encode("azb") == std::vector<int64_t>{1, 0, 2});
  CHECK(contains(error_of([&] { c.vocab.decode({3}); }), "outside the vocabulary [0, 3)"));
}

TEST_CASE("vocab JSON round trip for checkpoints", "[data]") {
  Vocab v = Vocab::from_text(std::string("\"\\\x01 zA\xff\x00", 8));
  REQUIRE(v.size() == 9);
  Vocab w = Vocab::from_json(v.to_json());
  CHECK(w == v);
  CHECK(w.encode("zA\xff") == v.encode("zA\xff"));
  Vocab b = Vocab::from_json(Vocab::bytes_vocab().to_json());
  CHECK(b.kind == Vocab::Kind::bytes);
  CHECK(b.size() == 256);
  CHECK(contains(error_of([] { Vocab::from_json("{nope"); }), "not valid JSON"));
  CHECK(contains(error_of([] { Vocab::from_json(R"({"kind":"words"})"); }), "\"words\""));
  CHECK(contains(error_of([] { Vocab::from_json(R"({"kind":"chars","symbols":[5,3]})"); }),
                 "strictly increasing"));
  CHECK(contains(error_of([] { Vocab::from_json(R"({"kind":"chars","symbols":[300]})"); }),
                 "[0, 256)"));
}

TEST_CASE("byte corpus: 256 symbols, id = byte, same split", "[data]") {
  std::string text;
  for (int i = 0; i < 1000; ++i) text.push_back(char((i * 37) % 256));
  Corpus c = byte_corpus_from_text(text);
  CHECK(c.vocab.size() == 256);
  CHECK(c.train.size() == 900);
  CHECK(c.valid.size() == 50);
  CHECK(c.test.size() == 50);
  for (size_t i = 0; i < 900; ++i) REQUIRE(c.train[i] == (int64_t(i) * 37) % 256);
  CHECK(c.test.front() == (950 * 37) % 256);
  CHECK(c.vocab.decode(c.valid) == text.substr(900, 50));
  Corpus s = load_byte_corpus(kShakespeare);
  CHECK(s.train.size() == 1003854);
  CHECK(s.train[0] == 'F');
}

TEST_CASE("corpus errors name the file and the fix", "[data]") {
  const std::string missing = std::string(REMORA_SOURCE_DIR) + "/data/no_such_file.txt";
  std::string e = error_of([&] { load_char_corpus(missing); });
  CHECK(contains(e, missing));
  CHECK(contains(e, "cannot open"));
  CHECK(contains(error_of([&] { load_byte_corpus(missing); }), missing));
  const std::string empty = "remora_test_empty_corpus.tmp";
  { std::ofstream f(empty); }
  e = error_of([&] { load_char_corpus(empty); });
  CHECK(contains(e, empty));
  CHECK(contains(e, "is empty"));
  std::remove(empty.c_str());
  CHECK(contains(error_of([] { char_corpus_from_text("tiny", "tiny.txt"); }), "at least 20"));
}

// ============================ LMStream ============================

TEST_CASE("LMStream: B parallel contiguous streams, y = x shifted, epoch wrap", "[data]") {
  std::vector<int64_t> tok(50);
  for (int64_t i = 0; i < 50; ++i) tok[size_t(i)] = i;
  // S = 50 / 3 = 16 tokens per stream, (16 - 1) / 4 = 3 segments.
  LMStream s(tok, 3, 4);
  REQUIRE(s.num_segments() == 3);
  for (int64_t step = 0; step < 7; ++step) {
    LMBatch b = s.next();
    REQUIRE(b.x.shape() == Shape{3, 4});
    REQUIRE(b.y.shape() == Shape{3, 4});
    CHECK(b.x.dtype() == DType::i64);
    CHECK(b.segment == step % 3);
    CHECK(b.epoch == step / 3);
    const auto x = i64(b.x), y = i64(b.y);
    for (int64_t r = 0; r < 3; ++r)
      for (int64_t t = 0; t < 4; ++t) {
        REQUIRE(x[size_t(r * 4 + t)] == r * 16 + (step % 3) * 4 + t);
        REQUIRE(y[size_t(r * 4 + t)] == x[size_t(r * 4 + t)] + 1);
      }
  }
  CHECK(s.position() == 7);
}

TEST_CASE("LMStream: ids of every storage width (1, 2, 4 bytes) come back exactly", "[data]") {
  // The stream keeps the narrowest width that holds the largest id.
  for (int64_t hi : {int64_t(255), int64_t(256), int64_t(65535), int64_t(65536), int64_t(INT32_MAX)}) {
    INFO("largest id " << hi);
    std::vector<int64_t> tok(61);
    for (size_t i = 0; i < tok.size(); ++i) tok[i] = int64_t((i * 7919) % size_t(hi + 1));
    tok[30] = hi;
    tok[31] = 0;
    LMStream s(tok, 2, 5);  // S = 30, 5 segments
    for (int64_t seg = 0; seg < s.num_segments(); ++seg) {
      LMBatch b = s.segment(seg);
      const auto x = i64(b.x), y = i64(b.y);
      for (int64_t r = 0; r < 2; ++r)
        for (int64_t t = 0; t < 5; ++t) {
          REQUIRE(x[size_t(r * 5 + t)] == tok[size_t(r * 30 + seg * 5 + t)]);
          REQUIRE(y[size_t(r * 5 + t)] == tok[size_t(r * 30 + seg * 5 + t + 1)]);
        }
    }
  }
}

TEST_CASE("LMStream over the corpus: rows continue in order; resume from saved state", "[data]") {
  Corpus c = load_char_corpus(kShakespeare);
  const int64_t B = 4, T = 64;
  LMStream a(c.valid, B, T);
  const int64_t S = int64_t(c.valid.size()) / B;
  CHECK(a.num_segments() == (S - 1) / T);
  std::vector<std::vector<int64_t>> rows(static_cast<size_t>(B));
  for (int64_t k = 0; k < a.num_segments(); ++k) {
    const auto x = i64(a.next().x);
    for (int64_t r = 0; r < B; ++r)
      rows[size_t(r)].insert(rows[size_t(r)].end(), x.begin() + r * T, x.begin() + (r + 1) * T);
  }
  for (int64_t r = 0; r < B; ++r)
    CHECK(rows[size_t(r)] == std::vector<int64_t>(c.valid.begin() + r * S,
                                                  c.valid.begin() + r * S + a.num_segments() * T));
  // Resume: a fresh stream restored to the saved position continues identically,
  // across the epoch boundary too.
  a.reset();
  for (int i = 0; i < 5; ++i) a.next();
  const int64_t saved = a.position();
  LMStream b(c.valid, B, T);
  b.set_position(saved);
  for (int i = 0; i < a.num_segments() + 3; ++i) {
    LMBatch p = a.next(), q = b.next();
    REQUIRE(i64(p.x) == i64(q.x));
    REQUIRE(i64(p.y) == i64(q.y));
    REQUIRE(p.epoch == q.epoch);
  }
}

TEST_CASE("LMStream rejects bad arguments", "[data]") {
  std::vector<int64_t> tok(20, 1);
  CHECK(contains(error_of([&] { LMStream(tok, 0, 4); }), "batch must be positive"));
  CHECK(contains(error_of([&] { LMStream(tok, 2, 0); }), "seq_len must be positive"));
  // 20 tokens / 4 streams = 5 per stream: a segment of 5 needs 6.
  std::string e = error_of([&] { LMStream(tok, 4, 5); });
  CHECK(contains(e, "5 tokens per stream"));
  CHECK(contains(e, "lower batch or seq_len"));
  LMStream ok(tok, 4, 4);
  CHECK(contains(error_of([&] { ok.set_position(-1); }), ">= 0"));
}

// ============================ formal languages ============================

TEST_CASE("formal languages: hand-checked members and non-members", "[data]") {
  struct Case { Language l; std::vector<std::string> in, out; };
  const std::vector<Case> cases = {
      {Language::parity, {"", "0", "11", "0101", "1001"}, {"1", "010", "111"}},
      {Language::tomita1, {"", "1", "111"}, {"0", "10", "1101"}},
      {Language::tomita2, {"", "10", "1010"}, {"1", "01", "100", "1001"}},
      // Tomita's own examples: an odd run of 1s directly followed by an odd run of 0s is out.
      {Language::tomita3,
       {"", "1", "0", "11", "100", "0110", "100100", "110000011100001", "111101100010011100"},
       {"10", "101", "010", "1010", "1110", "1011", "10001", "111010", "1001000", "11111000"}},
      {Language::tomita4, {"", "00", "1001", "0100100"}, {"000", "10001", "1000"}},
      {Language::tomita5, {"", "00", "11", "0101", "1001"}, {"0", "01", "011"}},
      {Language::tomita6, {"", "01", "10", "000", "111", "0011"}, {"0", "1", "00", "0111"}},
      {Language::tomita7, {"", "0", "1", "0101", "0011001", "1100111"}, {"1010", "01010", "10101"}},
      {Language::aa_star, {"", "aa", "aaaa"}, {"a", "aaa", "ab"}},
      {Language::abab_star, {"", "abab", "abababab"}, {"ab", "aba", "ba", "ababa"}},
      {Language::dyck2, {"", "()", "[]", "([])", "()[]", "[()()]"}, {"(", ")(", "(]", "([)]", "[[]"}},
  };
  for (const Case& c : cases) {
    for (const auto& w : c.in) {
      INFO(language_name(c.l) << " should accept \"" << w << "\"");
      CHECK(in_language(c.l, w));
    }
    for (const auto& w : c.out) {
      INFO(language_name(c.l) << " should reject \"" << w << "\"");
      CHECK_FALSE(in_language(c.l, w));
    }
  }
  CHECK_FALSE(in_language(Language::parity, "012"));  // outside the alphabet
}

TEST_CASE("formal languages: DFAs agree with independent predicates on all short strings",
          "[data]") {
  for (Language l : all_languages()) {
    const int n = l == Language::dyck2 ? 6 : 10;
    for (const auto& w : all_strings(language_alphabet(l), n)) {
      INFO(language_name(l) << " \"" << w << "\"");
      REQUIRE(in_language(l, w) == brute_member(l, w));
    }
  }
}

TEST_CASE("formal languages: k-hot targets by hand", "[data]") {
  using R = std::vector<std::vector<uint8_t>>;
  // columns: alphabet symbols, then <end>
  CHECK(follow_sets(Language::tomita2, "10") == R{{0, 1, 1}, {1, 0, 0}, {0, 1, 1}});
  CHECK(follow_sets(Language::tomita3, "100") == R{{1, 1, 1}, {1, 1, 1}, {1, 0, 0}, {1, 1, 1}});
  CHECK(follow_sets(Language::tomita4, "00") == R{{1, 1, 1}, {1, 1, 1}, {0, 1, 1}});
  CHECK(follow_sets(Language::tomita7, "01101") ==
        R{{1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {0, 1, 1}});
  CHECK(follow_sets(Language::parity, "1") == R{{1, 1, 1}, {1, 1, 0}});
  CHECK(follow_sets(Language::tomita1, "11") == R{{0, 1, 1}, {0, 1, 1}, {0, 1, 1}});
  CHECK(follow_sets(Language::aa_star, "aa") == R{{1, 1}, {1, 0}, {1, 1}});
  CHECK(follow_sets(Language::abab_star, "ab") == R{{1, 0, 1}, {0, 1, 0}, {1, 0, 0}});
  // ( ) [ ] <end>
  CHECK(follow_sets(Language::dyck2, "([])") == R{{1, 0, 1, 0, 1},
                                                   {1, 1, 1, 0, 0},
                                                   {1, 0, 1, 1, 0},
                                                   {1, 1, 1, 0, 0},
                                                   {1, 0, 1, 0, 1}});
  CHECK(contains(error_of([] { follow_sets(Language::dyck2, "(x)"); }), "not in the alphabet"));
}

TEST_CASE("formal languages: k-hot targets agree with brute-force continuation search", "[data]") {
  for (Language l : all_languages()) {
    const std::string alpha = language_alphabet(l);
    const bool dyck = l == Language::dyck2;
    const auto exts = all_strings(alpha, dyck ? 5 : 6);
    for (const auto& p : all_strings(alpha, dyck ? 4 : 7)) {
      const auto f = follow_sets(l, p);
      REQUIRE(f.size() == p.size() + 1);
      if (!p.empty()) REQUIRE(f[p.size() - 1] == follow_sets(l, p.substr(0, p.size() - 1)).back());
      const auto& row = f.back();  // after the whole prefix p
      for (size_t c = 0; c < alpha.size(); ++c) {
        bool legal = false;
        for (const auto& e : exts)
          if (brute_member(l, p + alpha[c] + e)) { legal = true; break; }
        INFO(language_name(l) << " prefix \"" << p << "\" then '" << alpha[c] << "'");
        REQUIRE(row[c] == legal);
      }
      REQUIRE(row[alpha.size()] == brute_member(l, p));
    }
  }
}

TEST_CASE("formal datasets: members, exact targets, length bins, determinism", "[data]") {
  for (Language l : all_languages()) {
    INFO(language_name(l));
    Generator g(7);
    FormalSplits s = make_formal_splits(l, g, 300, 30);
    REQUIRE(s.train.size() == 300);
    REQUIRE(s.test_bins.size() == 2);
    const int64_t A = int64_t(language_alphabet(l).size()), K = A + 1;
    CHECK(s.train.num_targets() == K);
    CHECK(s.train.vocab_size() == A + 2);
    const std::vector<std::pair<const FormalDataset*, std::pair<int, int>>> sets = {
        {&s.train, {2, 50}}, {&s.test_bins[0], {51, 100}}, {&s.test_bins[1], {101, 150}}};
    for (const auto& sb : sets) {
      for (const FormalExample& ex : sb.first->examples) {
        const int64_t n = int64_t(ex.text.size());
        REQUIRE(n >= sb.second.first);
        REQUIRE(n <= sb.second.second);
        REQUIRE(in_language(l, ex.text));
        REQUIRE(ex.ids.size() == size_t(n + 1));
        REQUIRE(ex.ids[0] == A);
        for (int64_t i = 0; i < n; ++i)
          REQUIRE(ex.ids[size_t(i + 1)] == int64_t(language_alphabet(l).find(ex.text[size_t(i)])));
        std::vector<uint8_t> flat;
        for (const auto& row : follow_sets(l, ex.text)) flat.insert(flat.end(), row.begin(), row.end());
        REQUIRE(ex.targets == flat);
        REQUIRE(ex.targets.back() == 1);  // the whole string may end
      }
    }
    // Determinism: the same seed gives the same strings.
    Generator g2(7);
    FormalSplits s2 = make_formal_splits(l, g2, 300, 30);
    for (int64_t i = 0; i < 300; ++i) REQUIRE(s2.train.examples[size_t(i)].text == s.train.examples[size_t(i)].text);
    REQUIRE(s2.test_bins[1].examples[29].text == s.test_bins[1].examples[29].text);
  }
  // A different seed gives different strings.
  Generator a(1), b(2);
  FormalDataset da = make_formal_dataset(Language::parity, 20, 10, 20, a);
  FormalDataset db = make_formal_dataset(Language::parity, 20, 10, 20, b);
  int same = 0;
  for (int i = 0; i < 20; ++i) same += da.examples[size_t(i)].text == db.examples[size_t(i)].text;
  CHECK(same < 3);
}

TEST_CASE("formal datasets: lengths uniform over those the language has", "[data]") {
  Generator g(3);
  // (abab)* has lengths 4, 8, ..., 48 in [2, 50]: 12 of them.
  FormalDataset d = make_formal_dataset(Language::abab_star, 1200, 2, 50, g);
  std::map<size_t, int> hist;
  for (const auto& ex : d.examples) ++hist[ex.text.size()];
  CHECK(hist.size() == 12);
  for (const auto& kv : hist) {
    CHECK(kv.first % 4 == 0);
    CHECK(kv.second > 60);  // expected 100 each
    CHECK(kv.second < 140);
  }
  // Strings of one length are uniform: parity length 2 is "00" or "11".
  std::map<std::string, int> words;
  for (int i = 0; i < 400; ++i) ++words[sample_string(Language::parity, 2, g)];
  CHECK(words.size() == 2);
  CHECK(words["00"] > 150);
  CHECK(words["11"] > 150);
  // Dyck-2 of length 4: all 8 strings appear.
  std::map<std::string, int> dy;
  for (int i = 0; i < 800; ++i) ++dy[sample_string(Language::dyck2, 4, g)];
  CHECK(dy.size() == 8);
  CHECK(has_length(Language::aa_star, 4));
  CHECK_FALSE(has_length(Language::aa_star, 5));
  CHECK(contains(error_of([&] { sample_string(Language::aa_star, 5, g); }), "no string of length 5"));
  CHECK(contains(error_of([&] { make_formal_dataset(Language::abab_star, 5, 5, 7, g); }),
                 "no string with length in [5, 7]"));
  CHECK(contains(error_of([&] { make_formal_dataset(Language::parity, 5, 9, 3, g); }),
                 "min_len <= max_len"));
  CHECK(language_from_name("(abab)*") == Language::abab_star);
  CHECK(language_from_name("tomita5") == Language::tomita5);
  CHECK(contains(error_of([] { language_from_name("tomita8"); }), "dyck2"));
}

TEST_CASE("formal batches: padding, masks, accuracy and the BCE loss", "[data]") {
  Generator g(11);
  FormalDataset d = make_formal_dataset(Language::dyck2, 4, 2, 12, g);
  FormalBatch b = formal_batch(d, {0, 1, 2, 3});
  int64_t L = 0;
  for (const auto& ex : d.examples) L = std::max(L, int64_t(ex.ids.size()));
  REQUIRE(b.ids.shape() == Shape{4, L});
  REQUIRE(b.targets.shape() == Shape{4, L, 5});
  REQUIRE(b.mask.shape() == Shape{4, L});
  const auto ids = i64(b.ids), kp = i64(b.key_padding);
  const auto m = b.mask.to_vector();
  for (int64_t r = 0; r < 4; ++r) {
    const int64_t n1 = int64_t(d.examples[size_t(r)].ids.size());
    for (int64_t l = 0; l < L; ++l) {
      REQUIRE(m[size_t(r * L + l)] == (l < n1 ? 1.0 : 0.0));
      REQUIRE(kp[size_t(r * L + l)] == (l < n1 ? 0 : 1));
      REQUIRE(ids[size_t(r * L + l)] == (l < n1 ? d.examples[size_t(r)].ids[size_t(l)] : d.pad_id()));
    }
  }
  // Perfect logits: +3 where the target is 1, -3 elsewhere (padding included).
  Tensor logits = b.targets * 6.0 - 3.0;
  CHECK(formal_accuracy(logits, b) == 1.0);
  // One wrong bit in sequence 2 costs exactly that sequence.
  std::vector<double> v = logits.to_vector();
  v[size_t((2 * L + 1) * 5 + 4)] *= -1;
  CHECK(formal_accuracy(Tensor::from_vector(v, {4, L, 5}), b) == 0.75);
  // A wrong bit at a padded position does not count.
  int64_t shortest = 0;
  for (int64_t r = 1; r < 4; ++r)
    if (d.examples[size_t(r)].ids.size() < d.examples[size_t(shortest)].ids.size()) shortest = r;
  if (int64_t(d.examples[size_t(shortest)].ids.size()) < L) {
    std::vector<double> w = logits.to_vector();
    w[size_t((shortest * L + L - 1) * 5)] *= -1;
    CHECK(formal_num_correct(Tensor::from_vector(w, {4, L, 5}), b) == 4);
  }
  CHECK(contains(error_of([&] { formal_accuracy(Tensor::zeros({4, L}), b); }), "[B, L, K]"));
  CHECK(contains(error_of([&] { formal_batch(d, {4}); }), "outside [0, 4)"));
  // The masked loss ignores padding: garbage logits there change nothing.
  Tensor mask = b.mask.unsqueeze(-1);
  Tensor l1 = binary_cross_entropy_with_logits(logits * 0.1, b.targets, mask);
  Tensor noisy = where(mask, logits * 0.1, Tensor::full({}, 50.0));
  Tensor l2 = binary_cross_entropy_with_logits(noisy, b.targets, mask);
  CHECK(l1.item() == Approx(l2.item()));
}

// ============================ time series ============================

TEST_CASE("time series: windows, shapes, determinism, metrics", "[data]") {
  SeriesConfig cfg;
  cfg.length = 600;
  Generator g1(5), g2(5), g3(6);
  const auto s1 = make_multi_periodic_series(cfg, g1);
  const auto s2 = make_multi_periodic_series(cfg, g2);
  const auto s3 = make_multi_periodic_series(cfg, g3);
  REQUIRE(s1.size() == 600);
  CHECK(s1 == s2);
  CHECK(s1 != s3);
  // Without noise a single period repeats exactly.
  SeriesConfig clean;
  clean.length = 200;
  clean.periods = {24};
  clean.amplitudes = {2.0};
  clean.noise_std = 0;
  Generator g4(1);
  const auto c = make_multi_periodic_series(clean, g4);
  for (int t = 0; t + 24 < 200; ++t) REQUIRE(c[size_t(t)] == Approx(c[size_t(t + 24)]).margin(1e-9));
  double peak = 0;
  for (double v : c) peak = std::max(peak, std::fabs(v));
  CHECK(peak == Approx(2.0).epsilon(0.02));

  SeriesSplits sp = split_series(s1, 0.7, 0.1, 48);
  CHECK(sp.train.size() == 420);
  CHECK(sp.valid.size() == 60 + 48);
  CHECK(sp.test.size() == 120 + 48);
  CHECK(sp.valid.front() == s1[420 - 48]);

  WindowDataset w(s1, 48, 12, 2);
  CHECK(w.size() == (600 - 48 - 12) / 2 + 1);
  ForecastBatch b = w.batch({0, 5, w.size() - 1});
  REQUIRE(b.x.shape() == Shape{3, 48, 1});
  REQUIRE(b.y.shape() == Shape{3, 12, 1});
  CHECK(b.x.at({1, 0, 0}) == Approx(s1[10]));
  CHECK(b.y.at({1, 0, 0}) == Approx(s1[10 + 48]));
  CHECK(b.y.at({2, 11, 0}) == Approx(s1[size_t((w.size() - 1) * 2 + 59)]));

  Tensor p = Tensor::from_vector(std::vector<double>{1, 2, 3, 4}, {2, 2, 1});
  Tensor t = Tensor::from_vector(std::vector<double>{1, 0, 3, 8}, {2, 2, 1});
  CHECK(mse(p, t) == Approx((0 + 4 + 0 + 16) / 4.0));
  CHECK(mae(p, t) == Approx((0 + 2 + 0 + 4) / 4.0));
  CHECK(contains(error_of([&] { mse(p, Tensor::zeros({4})); }), "same shape"));
  CHECK(contains(error_of([&] { WindowDataset(std::vector<double>(10), 8, 4); }), "shorter"));
  SeriesConfig bad = cfg;
  bad.amplitudes = {1};
  CHECK(contains(error_of([&] { make_multi_periodic_series(bad, g1); }), "one amplitude per period"));
}

// ======================= padded classification =======================

TEST_CASE("padded classification batches", "[data]") {
  ClassBatch b = pad_batch({{1, 2, 3}, {4}, {5, 6}}, {0, 1, 1}, 9);
  REQUIRE(b.ids.shape() == Shape{3, 3});
  CHECK(i64(b.ids) == std::vector<int64_t>{1, 2, 3, 4, 9, 9, 5, 6, 9});
  CHECK(i64(b.key_padding) == std::vector<int64_t>{0, 0, 0, 0, 1, 1, 0, 0, 1});
  CHECK(i64(b.labels) == std::vector<int64_t>{0, 1, 1});
  CHECK(i64(b.lengths) == std::vector<int64_t>{3, 1, 2});
  ClassBatch t = pad_batch({{1, 2, 3}, {4}}, {0, 1}, 0, 2);  // truncated to 2
  CHECK(i64(t.ids) == std::vector<int64_t>{1, 2, 4, 0});
  CHECK(contains(error_of([] { pad_batch({{1}, {2}}, {0}, 0); }), "2 sequences but 1 labels"));
  CHECK(contains(error_of([] { pad_batch({{1}, {}}, {0, 1}, 0); }), "sequence 1 is empty"));
}

TEST_CASE("permutation and uniform_int are deterministic per seed", "[data]") {
  Generator a(4), b(4);
  const auto p = permutation(50, a);
  CHECK(p == permutation(50, b));
  std::vector<int64_t> sorted = p;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 50; ++i) REQUIRE(sorted[size_t(i)] == i);
  CHECK(a.offset() == b.offset());
  CHECK(contains(error_of([&] { uniform_int(a, 0); }), "positive"));
}

TEST_CASE("memory tasks: copy and denoise sequences have the documented layout", "[data]") {
  data::MemoryTask t;
  t.delay = 7;
  t.symbols = 5;
  t.length = 4;
  Generator g(11);
  SECTION("copy") {
    t.task = "copy";
    data::MemoryBatch b = data::make_memory_batch(t, 3, g);
    REQUIRE(b.x.shape() == Shape{3, t.seq_len()});
    REQUIRE(t.seq_len() == 7 + 2 * 4);
    const int64_t L = t.seq_len();
    const auto x = b.x.to_i64_vector(), y = b.y.to_i64_vector();
    for (int64_t r = 0; r < 3; ++r) {
      for (int64_t i = 0; i < L; ++i) {
        const int64_t xi = x[size_t(r * L + i)], yi = y[size_t(r * L + i)];
        if (i < 4) CHECK((xi >= 1 && xi <= 5));
        else if (i == 4 + 7 - 1) CHECK(xi == 6);  // the delimiter
        else CHECK(xi == 0);
        if (i < L - 4) CHECK(yi == 0);
        else CHECK(yi == x[size_t(r * L + i - (L - 4))]);  // the symbols, in order
      }
    }
  }
  SECTION("denoise") {
    t.task = "denoise";
    data::MemoryBatch b = data::make_memory_batch(t, 4, g);
    const int64_t L = t.seq_len();
    REQUIRE(L == 7 + 4);
    const auto x = b.x.to_i64_vector(), y = b.y.to_i64_vector();
    for (int64_t r = 0; r < 4; ++r) {
      std::vector<int64_t> seen;
      for (int64_t i = 0; i < 6; ++i)
        if (x[size_t(r * L + i)] != 0) seen.push_back(x[size_t(r * L + i)]);
      REQUIRE(seen.size() == 4);  // distinct positions among the 6 noise slots
      CHECK(x[size_t(r * L + 6)] == 6);
      for (int64_t i = 0; i < L; ++i) {
        if (i > 6) CHECK(x[size_t(r * L + i)] == 0);
        if (i < L - 4) CHECK(y[size_t(r * L + i)] == -100);
        else CHECK(y[size_t(r * L + i)] == seen[size_t(i - (L - 4))]);
      }
    }
  }
  SECTION("answer accuracy counts the last `length` positions only") {
    t.task = "copy";
    data::MemoryBatch b = data::make_memory_batch(t, 2, g);
    const int64_t L = t.seq_len(), V = t.vocab_size();
    // One-hot logits of the targets: every answer right.
    Tensor logits = Tensor::zeros({2, L, V});
    const auto y = b.y.to_i64_vector();
    float* p = logits.data_ptr<float>();
    for (int64_t i = 0; i < 2 * L; ++i) p[i * V + y[size_t(i)]] = 1;
    auto c = data::memory_num_correct(t, logits, b);
    CHECK(c.first == 8);
    CHECK(c.second == 8);
    p[(L - 1) * V + y[size_t(L - 1)]] = 0;  // row 0's last answer now wrong (argmax 0)
    p[0 * V + y[0]] = 0;                    // not an answer position: does not count
    c = data::memory_num_correct(t, logits, b);
    CHECK(c.first == 7);
  }
  SECTION("bad tasks are clear errors") {
    t.task = "recall";
    CHECK_THROWS_WITH(data::make_memory_batch(t, 1, g), Catch::Contains("copy or denoise"));
    t.task = "denoise";
    t.delay = 4;
    CHECK_THROWS_WITH(data::make_memory_batch(t, 1, g), Catch::Contains("delay >= length + 1"));
  }
}

TEST_CASE("membership classification: balanced, labelled by the language", "[data]") {
  Generator g(5);
  for (data::Language lang : {data::Language::parity, data::Language::tomita3, data::Language::dyck2}) {
    data::MembershipDataset ds = data::make_membership_dataset(lang, 400, 2, 30, g);
    const std::string alpha = data::language_alphabet(lang);
    int64_t pos = 0;
    for (int64_t i = 0; i < ds.size(); ++i) {
      const auto& ids = ds.ids[size_t(i)];
      REQUIRE(ids.front() == int64_t(alpha.size()));  // <s>
      std::string w;
      for (size_t k = 1; k < ids.size(); ++k) w += alpha[size_t(ids[k])];
      CHECK(int64_t(w.size()) >= 2);
      CHECK(int64_t(w.size()) <= 30);
      CHECK(ds.labels[size_t(i)] == (data::in_language(lang, w) ? 1 : 0));
      pos += ds.labels[size_t(i)];
    }
    INFO(data::language_name(lang) << ": " << pos << " members of " << ds.size());
    CHECK(pos >= 160);
    CHECK(pos <= 240);
  }
}

TEST_CASE("Generator's host draws are the backends' Philox numbers", "[data]") {
  // next_uniform: one counter, the value Tensor::rand gives for it.
  Generator a(42), b(42);
  for (int i = 0; i < 5; ++i) CHECK(a.next_uniform() == Tensor::rand({1}, DType::f64, Device::cpu(), &b).item());
  CHECK(a.offset() == 5);
  CHECK(b.offset() == 5);
  // normal_at: the normal at a reserved counter, without moving the generator.
  Generator g(7), h(7);
  const uint64_t base = g.advance(4);
  const std::vector<double> want = Tensor::randn({4}, DType::f64, Device::cpu(), &h).to_vector();
  for (uint64_t i = 0; i < 4; ++i) CHECK(g.normal_at(base + i) == want[size_t(i)]);
  CHECK(g.offset() == 4);
  double u = 0;
  for (int i = 0; i < 1000; ++i) {
    u = a.next_uniform();
    REQUIRE(u >= 0.0);
    REQUIRE(u < 1.0);
  }
}
