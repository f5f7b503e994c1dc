// SPDX-License-Identifier: BSD-3-Clause
// Datasets and batching for the `remora` driver (namespace remora::data).
//
//   data::Corpus c = data::load_char_corpus("data/tinyshakespeare.txt");
//   data::LMStream train(c.train, /*B=*/16, /*T=*/128);
//   data::LMBatch b = train.next();          // b.x, b.y: i64 [B, T]
//   int64_t saved = train.position();        // goes into the checkpoint
//
//   Generator g(1);
//   data::FormalSplits fs = data::make_formal_splits(data::Language::tomita3, g);
//   data::FormalBatch fb = data::formal_batch(fs.train, {0, 1, 2});
//   Tensor loss = binary_cross_entropy_with_logits(logits, fb.targets, fb.mask.unsqueeze(-1));
//   double acc = data::formal_accuracy(logits, fb);
//
// Letters in shape comments: B batch, T/L time, K targets per position
// (alphabet + end symbol), Lin/H forecast input length / horizon.
// All randomness comes from a remora::Generator (Philox counters), so a
// dataset is a pure function of (seed, offset) and the arguments.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <memory>

#include "../core/generator.h"
#include "../core/tensor.h"
#include "../text/word.h"

namespace remora {
namespace data {

// ============================ text corpora ============================

// Maps symbols to ids. Symbols are bytes (a UTF-8 character outside ASCII is
// several symbols) or words.
//   kind chars: id 0 = <unk>, ids 1.. = the sorted unique bytes of the training split.
//   kind bytes: 256 ids, id = byte value (nothing is unknown).
//   kind words: a text::WordTokenizer (Transformer-XL's WikiText vocabulary:
//     <eos> ends every line, <unk> for words outside it). encode() gives the
//     ids of the words of each line, with <eos> after every line that ends
//     in a line break (so a prompt without a final line break has none).
struct Vocab {
  enum class Kind { chars, bytes, words };
  Kind kind = Kind::chars;
  std::string symbols;  // chars: sorted unique bytes; id of symbols[i] is i + 1
  std::shared_ptr<const text::WordTokenizer> words;  // kind words

  static constexpr int64_t kUnk = 0;
  static Vocab from_text(const std::string& train_text);  // kind chars
  static Vocab bytes_vocab();                               // kind bytes
  static Vocab words_vocab(text::WordTokenizer tok);         // kind words

  int64_t size() const;                    // chars: symbols.size() + 1; bytes: 256
  int64_t id(unsigned char c) const;       // kUnk for a byte not in a chars vocab (not for words)
  std::vector<int64_t> encode(const std::string& text) const;
  // Ids back to bytes; <unk> (chars) becomes `unk_text`. An id out of range is an Error.
  // Words: joined by spaces, <eos> as a line break (unk_text is not used).
  std::string decode(const std::vector<int64_t>& ids, const std::string& unk_text = "<unk>") const;
  // The text that id `next` adds after `text` while generating: the byte(s),
  // or for words the word with a space before it unless `text` is empty or
  // ends a line, and a line break for <eos>.
  std::string continuation(const std::string& text, int64_t next, const std::string& unk_text = "<unk>") const;

  // {"kind":"chars","unk_id":0,"symbols":[10,32,...]} (byte values, so any
  // byte survives JSON); {"kind":"words","tokenizer":{...}} (the tokenizer's
  // to_json); for checkpoints. from_json validates and names the problem.
  std::string to_json() const;
  static Vocab from_json(const std::string& json_text);
  bool operator==(const Vocab& o) const;
};

// A corpus split by bytes: the first 90% train, the next 5% valid, the last 5%
// test (sizes n*90/100, n*5/100, and the remainder).
struct Corpus {
  std::vector<int64_t> train, valid, test;  // token ids, one per byte
  Vocab vocab;
};

// Character level: vocab from the training split only; unseen bytes in
// valid/test map to <unk> (id 0). Errors name the path: missing, unreadable,
// or too small to split (fewer than 20 bytes).
Corpus load_char_corpus(const std::string& path);
// Byte level (enwik8 style): 256 symbols, the same 90/5/5 split, any file.
Corpus load_byte_corpus(const std::string& path);
// Word level, the WikiText-2/103 layout: `dir` holds wiki.train.tokens,
// wiki.valid.tokens and wiki.test.tokens. The vocabulary comes from the
// training file (text::WordTokenizer with `opts`), each file is read line by
// line (never held as text). With `vocab_json` (a checkpoint's kind words
// vocabulary) that vocabulary is used instead of building one.
Corpus load_word_corpus(const std::string& dir, const text::WordTokenizerOptions& opts = {},
                        const std::string& vocab_json = "");
// The files load_word_corpus reads: dir + "/wiki." + split + ".tokens".
std::string word_split_path(const std::string& dir, const std::string& split);
// The same from text in memory (`what` names the source in errors).
Corpus char_corpus_from_text(const std::string& text, const std::string& what = "<text>");
Corpus byte_corpus_from_text(const std::string& text, const std::string& what = "<text>");

// ============================ LM batching ============================

struct LMBatch {
  Tensor x;             // i64 [B, T]: tokens
  Tensor y;             // i64 [B, T]: the next tokens (x shifted left by one)
  int64_t segment = 0;  // index within the epoch; 0 = streams restart (reset carried memory)
  int64_t epoch = 0;
};

// Transformer-XL ordered batching. The N tokens are cut into B contiguous
// streams of S = N / B tokens (the last N % B tokens are dropped); row b of
// every batch continues row b of the previous batch, so memory can be carried
// across steps. An epoch has num_segments() = (S - 1) / T batches (the tail
// shorter than T is dropped); after it the streams start over.
// The tokens are kept as int32 (half the memory of the splits' int64 ids; an
// id outside [0, 2^31) is an Error).
// The position is one int64 (batches served since the start): save it with
// position(), restore it with set_position() and next() continues exactly.
class LMStream {
 public:
  LMStream(const std::vector<int64_t>& tokens, int64_t batch, int64_t seq_len);
  LMBatch next();
  // The batch at segment s (0 <= s < num_segments()) without moving.
  LMBatch segment(int64_t s) const;
  int64_t num_segments() const { return num_segments_; }
  int64_t position() const { return position_; }
  void set_position(int64_t p);
  void reset() { position_ = 0; }
  int64_t batch() const { return B_; }
  int64_t seq_len() const { return T_; }

 private:
  std::vector<uint8_t> tokens_;  // width_ bytes per token (1, 2 or 4), native order
  int width_ = 4;
  int64_t B_, T_, S_, num_segments_;
  int64_t position_ = 0;
};

// ===================== formal languages (RSA / Bhattamishra et al. 2020) =====================
//
// Character prediction: a string w = w_1..w_n of the language is fed as
//   input ids  [L = n + 1] = <s> w_1 .. w_n
// and at position i (after the prefix w_1..w_i) the target is the k-hot set
//   target [L, K], K = |alphabet| + 1: column c < |alphabet| is 1 iff some
//   continuation of w_1..w_i c lies in the language; column |alphabet| (<end>)
//   is 1 iff w_1..w_i itself is in the language.
// A model is correct on w iff sigmoid(logit) > 0.5 (logit > 0) equals the
// target at every position. Ids: alphabet symbols 0..A-1, <s> = A, <pad> = A+1
// (input vocabulary A + 2).
//
// The languages (alphabet in brackets):
//   parity   [01]  an even number of 1s                      = (0*10*1)*0*
//   tomita1  [01]  1*
//   tomita2  [01]  (10)*
//   tomita3  [01]  no maximal run of an odd number of 1s immediately followed
//                  by a maximal run of an odd number of 0s (so "10", "1000"
//                  and "11101" are out; "100", "0110", "1" are in)
//   tomita4  [01]  no "000" substring
//   tomita5  [01]  an even number of 0s and an even number of 1s
//   tomita6  [01]  (#0 - #1) divisible by 3
//   tomita7  [01]  0*1*0*1*
//   aa_star  [a]   (aa)*
//   abab_star [ab] (abab)*
//   dyck2    [()[]] balanced brackets of two types (context free)
// All except dyck2 run on a DFA; dyck2 on a stack.
enum class Language {
  parity, tomita1, tomita2, tomita3, tomita4, tomita5, tomita6, tomita7,
  aa_star, abab_star, dyck2
};
std::vector<Language> all_languages();
std::string language_name(Language lang);           // "tomita3"
Language language_from_name(const std::string& s);  // also "(aa)*", "(abab)*"; Error lists the names
std::string language_alphabet(Language lang);       // "01", "a", "ab", "()[]"

bool in_language(Language lang, const std::string& w);  // false for symbols outside the alphabet
// The k-hot targets of w (which must be in the alphabet): [n + 1][K].
std::vector<std::vector<uint8_t>> follow_sets(Language lang, const std::string& w);
// Whether the language has a string of exactly length n.
bool has_length(Language lang, int64_t n);
// A string of length n drawn uniformly from the language's strings of that
// length (exact counting on the DFA / the Dyck stack depth, no rejection).
// Error when the language has no string of length n.
std::string sample_string(Language lang, int64_t n, Generator& gen);

struct FormalExample {
  std::string text;              // w, length n
  std::vector<int64_t> ids;      // [n + 1] = <s> w
  std::vector<uint8_t> targets;  // [n + 1, K] row-major k-hot
};

struct FormalDataset {
  Language lang = Language::parity;
  int64_t min_len = 0, max_len = 0;  // string lengths n (not counting <s>)
  std::vector<FormalExample> examples;
  int64_t num_targets() const;       // K = |alphabet| + 1
  int64_t vocab_size() const;        // |alphabet| + 2 (with <s>, <pad>)
  int64_t start_id() const;          // |alphabet|
  int64_t pad_id() const;            // |alphabet| + 1
  int64_t size() const { return int64_t(examples.size()); }
};

// `count` strings: a length uniform over the lengths in [min_len, max_len]
// that the language has, then a uniform string of that length. Duplicates are
// kept (tomita1 has one string per length).
FormalDataset make_formal_dataset(Language lang, int64_t count, int64_t min_len,
                                  int64_t max_len, Generator& gen);

// The benchmark splits: train lengths 2..50, test bins 51..100 and 101..150.
struct FormalSplits {
  FormalDataset train;
  std::vector<FormalDataset> test_bins;
};
FormalSplits make_formal_splits(Language lang, Generator& gen, int64_t n_train = 10000,
                                int64_t n_test_per_bin = 2000);

struct FormalBatch {
  Tensor ids;      // i64 [B, L]: <s> w, then <pad>; L = longest n + 1 in the batch
  Tensor targets;  // f32 [B, L, K]: k-hot, 0 at padding
  Tensor mask;     // f32 [B, L]: 1 at real positions, 0 at padding
  Tensor key_padding;  // i64 [B, L]: 1 at padding (for attention)
};
FormalBatch formal_batch(const FormalDataset& ds, const std::vector<int64_t>& indices);
// Sequences whose thresholded logits (> 0) match the targets at every real
// position; logits [B, L, K] (any float dtype).
int64_t formal_num_correct(const Tensor& logits, const FormalBatch& batch);
double formal_accuracy(const Tensor& logits, const FormalBatch& batch);  // fraction of B

// ============================ time series ============================

// sum_k amplitudes[k] * sin(2 pi t / periods[k] + phase_k) + trend * t + N(0, noise_std^2),
// phases uniform in [0, 2 pi); t = 0 .. length-1.
struct SeriesConfig {
  int64_t length = 4000;
  std::vector<double> periods{24, 168, 7.5};
  std::vector<double> amplitudes{1.0, 0.5, 0.25};
  double noise_std = 0.1;
  double trend = 0.0;
};
std::vector<double> make_multi_periodic_series(const SeriesConfig& cfg, Generator& gen);

// Chronological split (train first) of a series of `channels` values a step
// (row-major [steps, channels]). valid and test start `context` steps before
// their boundary so their first windows can see input_len of history.
struct SeriesSplits {
  std::vector<double> train, valid, test;
};
SeriesSplits split_series(const std::vector<double>& s, double train_frac = 0.7,
                          double valid_frac = 0.1, int64_t context = 0, int64_t channels = 1);
// The same at explicit borders: train [0, train_end), valid [train_end,
// valid_end), test [valid_end, test_end) in steps (the ETT benchmarks' months).
SeriesSplits split_series_at(const std::vector<double>& s, int64_t channels, int64_t train_end,
                             int64_t valid_end, int64_t test_end, int64_t context);
// Standardises every split with each channel's mean and standard deviation
// over the training split (a constant channel keeps its scale of 1), and
// returns them: a value v became (v - mean[c]) / sd[c].
struct SeriesScaler {
  std::vector<double> mean, sd;
};
SeriesScaler standardize(SeriesSplits& s, int64_t channels);

struct ForecastBatch {
  Tensor x;  // f32 [B, Lin, channels]
  Tensor y;  // f32 [B, H, channels]
};
// Window i: x = steps [i*stride, +Lin), y = the next H steps.
class WindowDataset {
 public:
  WindowDataset(std::vector<double> series, int64_t input_len, int64_t horizon,
                int64_t stride = 1, int64_t channels = 1);
  int64_t size() const { return n_; }
  ForecastBatch batch(const std::vector<int64_t>& indices) const;
  int64_t input_len() const { return Lin_; }
  int64_t horizon() const { return H_; }

 private:
  std::vector<double> s_;
  int64_t Lin_, H_, stride_, C_, n_;
};
// Mean squared / absolute error over all elements (same shapes required).
double mse(const Tensor& pred, const Tensor& target);
double mae(const Tensor& pred, const Tensor& target);

// ======================= padded classification =======================

struct ClassBatch {
  Tensor ids;          // i64 [B, Lmax]: the sequences, then pad_id
  Tensor key_padding;  // i64 [B, Lmax]: 1 = pad
  Tensor labels;       // i64 [B]
  Tensor lengths;      // i64 [B]
};
// Lmax = the longest sequence (or max_len when > 0: longer ones are truncated).
ClassBatch pad_batch(const std::vector<std::vector<int64_t>>& seqs,
                     const std::vector<int64_t>& labels, int64_t pad_id, int64_t max_len = 0);

// ======================= memory tasks: copy and denoise =======================
//
// Ids: 0 = blank (noise, for denoise), 1..symbols = data, symbols + 1 =
// delimiter; vocabulary symbols + 2. `length` data symbols, each uniform.
//   copy (Arjovsky et al. 2016; Kerg et al. 2020): input [delay + 2 * length]
//     = the symbols, delay - 1 blanks, the delimiter, length blanks; target
//     = blanks everywhere, then the symbols at the last `length` positions.
//   denoise (Jing et al. 2019): input [delay + length] = delay - 1 positions of
//     noise with the symbols at distinct uniformly drawn positions (in order),
//     the delimiter, length blanks; target = the symbols in order at the last
//     `length` positions, nothing elsewhere (-100, ignored by the loss).
// Either way the answer sits at the last `length` positions.
struct MemoryTask {
  std::string task = "copy";  // copy | denoise
  int64_t delay = 100, symbols = 8, length = 10;
  int64_t vocab_size() const { return symbols + 2; }
  int64_t seq_len() const { return task == "copy" ? delay + 2 * length : delay + length; }
};
struct MemoryBatch {
  Tensor x;  // i64 [B, L]
  Tensor y;  // i64 [B, L], -100 = no target
};
MemoryBatch make_memory_batch(const MemoryTask& t, int64_t batch, Generator& gen);
// (correct answer symbols, answer symbols) at the last `length` positions;
// logits [B, L, V].
std::pair<int64_t, int64_t> memory_num_correct(const MemoryTask& t, const Tensor& logits,
                                               const MemoryBatch& b);

// ======================= sequence classification: language membership =======================
//
// A string is a member of the language or not; ids <s> w (as formal_batch),
// label 1 = member. Half the examples are uniform members (sample_string),
// half uniform non-members (rejection from uniform strings). Lengths are
// uniform in [min_len, max_len], redrawn for a member until the language has
// that length; a length with no non-member gives a member instead.
struct MembershipDataset {
  Language lang = Language::parity;
  std::vector<std::vector<int64_t>> ids;  // [n + 1] each: <s> w
  std::vector<int64_t> labels;
  int64_t size() const { return int64_t(ids.size()); }
  int64_t vocab_size() const;  // |alphabet| + 2 (<s>, <pad>)
  int64_t pad_id() const;      // |alphabet| + 1
};
MembershipDataset make_membership_dataset(Language lang, int64_t count, int64_t min_len,
                                          int64_t max_len, Generator& gen);

// ============================ helpers ============================

// Uniform integer in [0, n) from one Philox counter of gen.
int64_t uniform_int(Generator& gen, int64_t n);
// A permutation of 0..n-1 (Fisher-Yates on gen), for shuffling examples.
std::vector<int64_t> permutation(int64_t n, Generator& gen);

}  // namespace data
}  // namespace remora
