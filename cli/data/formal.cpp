// Formal languages (DFAs, the Dyck stack, uniform sampling, k-hot targets),
// their datasets and batches, and language-membership classification
// (declared in cli/data.h).
#include <algorithm>
#include <cmath>
#include <sstream>

#include "../../ops/ops.h"
#include "../data.h"

namespace remora {
namespace data {

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
  double u = gen.next_uniform() * total;
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
