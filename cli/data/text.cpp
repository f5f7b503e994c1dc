// Text data: the shared sampling helpers, Vocab, character / byte corpora and
// Transformer-XL ordered LM batching (declared in cli/data.h).
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>

#include <unistd.h>

#include "../../core/file_io.h"
#include "../../ops/ops.h"
#include "../data.h"
#include "../input_checks.h"

namespace remora {
namespace data {

// ============================ helpers ============================

namespace {


void split_bounds(const char* fn, const std::string& what, size_t n, size_t* a, size_t* b);

// Opens a corpus file for streaming: a regular file only (a FIFO or /dev/zero
// would block or never end), non-empty, whose encoded ids (8 bytes per byte)
// fit the memory this process may use. Returns the descriptor; *size its bytes.
int open_corpus(const char* fn, const std::string& path, uint64_t* size) {
  const int fd = open_regular_file(path, fn, size);
  std::string source;
  const uint64_t room = available_memory(&source);
  const double need = double(*size) * 8;
  if (!(room == UINT64_MAX || need <= double(room))) {
    ::close(fd);
    REMORA_FAIL(fn << ": '" << path << "' is " << human_bytes(double(*size)) << "; its encoded ids need about "
                   << human_bytes(need) << " but only " << human_bytes(double(room))
                   << " of memory is available (" << source << ")");
  }
  if (*size == 0) {
    ::close(fd);
    REMORA_FAIL(fn << ": '" << path << "' is empty; fix: point it at a text file");
  }
  return fd;
}

// Reads [from, to) of fd in chunks of 1 MiB, calling f(bytes, n) on each.
template <typename F>
void for_each_chunk(const char* fn, const std::string& path, int fd, uint64_t from, uint64_t to, F&& f) {
  std::vector<unsigned char> buf(size_t(1) << 20);
  uint64_t at = from;
  while (at < to) {
    const size_t want = size_t(std::min<uint64_t>(buf.size(), to - at));
    const ssize_t got = ::pread(fd, buf.data(), want, off_t(at));
    if (got < 0 && errno == EINTR) continue;
    REMORA_CHECK(got > 0, fn << ": reading '" << path << "' failed at byte " << at << " of " << to
                             << (got < 0 ? std::string(": ") + std::strerror(errno) : std::string(": the file shrank")));
    f(buf.data(), size_t(got));
    at += uint64_t(got);
  }
}

// The 90/5/5 split of a file, streamed: the vocabulary from a pass over the
// training bytes, then each split encoded chunk by chunk straight into its
// ids, so the text is never held whole (enwik8's 100 MB: 800 MB of ids and a
// 1 MiB buffer, not the text and its copies beside them).
Corpus corpus_from_file(const char* fn, const std::string& path, bool bytes) {
  uint64_t n = 0;
  const int fd = open_corpus(fn, path, &n);
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  size_t a = 0, b = 0;
  split_bounds(fn, path, size_t(n), &a, &b);
  Corpus c;
  if (bytes) {
    c.vocab = Vocab::bytes_vocab();
  } else {
    std::string seen;  // one of each byte of the training split, in any order
    bool mark[256] = {false};
    for_each_chunk(fn, path, fd, 0, a, [&](const unsigned char* p, size_t k) {
      for (size_t i = 0; i < k; ++i)
        if (!mark[p[i]]) {
          mark[p[i]] = true;
          seen.push_back(char(p[i]));
        }
    });
    c.vocab = Vocab::from_text(seen);
  }
  int64_t table[256];
  for (int x = 0; x < 256; ++x) table[x] = c.vocab.id(static_cast<unsigned char>(x));
  auto encode = [&](uint64_t from, uint64_t to, std::vector<int64_t>& out) {
    out.resize(size_t(to - from));
    size_t at = 0;
    for_each_chunk(fn, path, fd, from, to, [&](const unsigned char* p, size_t k) {
      for (size_t i = 0; i < k; ++i) out[at + i] = table[p[i]];
      at += k;
    });
  };
  encode(0, a, c.train);
  encode(a, b, c.valid);
  encode(b, n, c.test);
  return c;
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


}  // namespace

int64_t uniform_int(Generator& gen, int64_t n) {
  REMORA_CHECK(n > 0, "uniform_int: n must be positive, got " << n);
  const int64_t k = int64_t(gen.next_uniform() * double(n));
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

Vocab Vocab::words_vocab(text::WordTokenizer tok) {
  Vocab v;
  v.kind = Kind::words;
  v.words = std::make_shared<const text::WordTokenizer>(std::move(tok));
  return v;
}

bool Vocab::operator==(const Vocab& o) const {
  if (kind != o.kind) return false;
  if (kind != Kind::words) return symbols == o.symbols;
  if (!words || !o.words) return words == o.words;
  const auto &a = words->options(), &b = o.words->options();
  return words->vocabulary().tokens() == o.words->vocabulary().tokens() && a.lower_case == b.lower_case &&
         a.add_eos == b.add_eos && a.eos_token == b.eos_token && a.unk_token == b.unk_token;
}

int64_t Vocab::size() const {
  if (kind == Kind::words) return words ? words->vocab_size() : 0;
  return kind == Kind::bytes ? 256 : int64_t(symbols.size()) + 1;
}

int64_t Vocab::id(unsigned char c) const {
  REMORA_CHECK(kind != Kind::words, "Vocab::id: a word vocabulary maps words, not bytes; use encode()");
  if (kind == Kind::bytes) return int64_t(c);
  // symbols is sorted by byte value (unsigned), so binary search on unsigned chars.
  auto it = std::lower_bound(symbols.begin(), symbols.end(), c, [](char s, unsigned char v) {
    return static_cast<unsigned char>(s) < v;
  });
  if (it == symbols.end() || static_cast<unsigned char>(*it) != c) return kUnk;
  return int64_t(it - symbols.begin()) + 1;
}

std::vector<int64_t> Vocab::encode(const std::string& text) const {
  if (kind == Kind::words) {
    REMORA_CHECK(words, "Vocab::encode: a word vocabulary without its tokenizer");
    std::vector<int64_t> out;
    const int64_t eos = words->options().add_eos ? words->token_to_id(words->options().eos_token) : -1;
    size_t start = 0;
    while (start < text.size()) {
      size_t nl = text.find('\n', start);
      const bool full = nl != std::string::npos;
      if (!full) nl = text.size();
      std::vector<int64_t> ids = words->encode(text.substr(start, nl - start));
      // encode() ends every line with <eos>: keep it only for a line that ends.
      if (!full && eos >= 0 && !ids.empty() && ids.back() == eos) ids.pop_back();
      out.insert(out.end(), ids.begin(), ids.end());
      start = nl + 1;
    }
    return out;
  }
  int64_t table[256];
  for (int c = 0; c < 256; ++c) table[c] = id(static_cast<unsigned char>(c));
  std::vector<int64_t> out(text.size());
  for (size_t i = 0; i < text.size(); ++i) out[i] = table[static_cast<unsigned char>(text[i])];
  return out;
}

std::string Vocab::continuation(const std::string& text, int64_t next, const std::string& unk_text) const {
  if (kind != Kind::words) return decode({next}, unk_text);
  const std::string piece = decode({next});
  if (piece == "\n" || piece.empty() || text.empty() || text.back() == '\n' || text.back() == ' ') return piece;
  return " " + piece;
}

std::string Vocab::decode(const std::vector<int64_t>& ids, const std::string& unk_text) const {
  if (kind == Kind::words) {
    REMORA_CHECK(words, "Vocab::decode: a word vocabulary without its tokenizer");
    return words->decode(ids);
  }
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
  if (kind == Kind::words) {
    REMORA_CHECK(words, "Vocab::to_json: a word vocabulary without its tokenizer");
    j["kind"] = "words";
    j["tokenizer"] = nlohmann::json::parse(words->to_json());
    return j.dump();
  }
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
               "Vocab::from_json: expected an object with \"kind\": \"chars\" | \"bytes\" | \"words\"");
  const std::string kind = j["kind"].get<std::string>();
  if (kind == "bytes") return bytes_vocab();
  if (kind == "words") {
    REMORA_CHECK(j.contains("tokenizer") && j["tokenizer"].is_object(),
                 "Vocab::from_json: a \"words\" vocabulary needs \"tokenizer\": the word tokenizer's JSON object");
    return words_vocab(text::WordTokenizer::from_json(j["tokenizer"].dump()));
  }
  REMORA_CHECK(kind == "chars", "Vocab::from_json: kind \"" << kind
                                                            << "\" is not \"chars\", \"bytes\" or \"words\"");
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
  return corpus_from_file("load_char_corpus", path, false);
}
Corpus load_byte_corpus(const std::string& path) {
  return corpus_from_file("load_byte_corpus", path, true);
}
Corpus char_corpus_from_text(const std::string& text, const std::string& what) {
  return corpus_from("char_corpus_from_text", text, what, false);
}
Corpus byte_corpus_from_text(const std::string& text, const std::string& what) {
  return corpus_from("byte_corpus_from_text", text, what, true);
}

std::string word_split_path(const std::string& dir, const std::string& split) {
  return dir + "/wiki." + split + ".tokens";
}

Corpus load_word_corpus(const std::string& dir, const text::WordTokenizerOptions& opts,
                        const std::string& vocab_json) {
  const char* fn = "load_word_corpus";
  for (const char* split : {"train", "valid", "test"}) {
    const std::string p = word_split_path(dir, split);
    const std::string problem = remora::regular_file_problem(p);
    REMORA_CHECK(problem.empty(), fn << ": '" << p << "' " << problem
                                     << "; fix: point data.path at a folder with wiki.train.tokens, "
                                        "wiki.valid.tokens and wiki.test.tokens (the WikiText layout)");
  }
  Corpus c;
  if (!vocab_json.empty()) {
    c.vocab = Vocab::from_json(vocab_json);
    REMORA_CHECK(c.vocab.kind == Vocab::Kind::words,
                 fn << ": the given vocabulary is not a word vocabulary; fix: use a checkpoint trained on words");
  } else {
    c.vocab = Vocab::words_vocab(text::WordTokenizer::build_from_file(word_split_path(dir, "train"), opts));
  }
  const text::WordTokenizer& tok = *c.vocab.words;
  for (const char* split : {"train", "valid", "test"}) {
    std::vector<int64_t>& out = split[0] == 't' ? (split[1] == 'r' ? c.train : c.test) : c.valid;
    std::ifstream f(word_split_path(dir, split), std::ios::binary);
    REMORA_CHECK(f, fn << ": cannot open '" << word_split_path(dir, split) << "'");
    tok.encode_lines(f, [&](const std::vector<int64_t>& ids) { out.insert(out.end(), ids.begin(), ids.end()); });
  }
  return c;
}

// ============================ LMStream ============================

LMStream::LMStream(const std::vector<int64_t>& tokens, int64_t batch, int64_t seq_len)
    : B_(batch), T_(seq_len) {
  int64_t hi = 0;
  for (const int64_t t : tokens) {
    REMORA_CHECK(t >= 0 && t <= INT32_MAX, "LMStream: token id " << t << " is outside [0, 2^31)");
    hi = std::max(hi, t);
  }
  // The narrowest unsigned width that holds every id: a character corpus
  // (vocabulary <= 256) keeps one byte per token, a quarter of int32.
  width_ = hi <= 0xFF ? 1 : hi <= 0xFFFF ? 2 : 4;
  tokens_.resize(tokens.size() * size_t(width_));
  for (size_t i = 0; i < tokens.size(); ++i) {
    const uint32_t v = uint32_t(tokens[i]);
    if (width_ == 1) tokens_[i] = uint8_t(v);
    else if (width_ == 2) { const uint16_t w = uint16_t(v); std::memcpy(&tokens_[2 * i], &w, 2); }
    else std::memcpy(&tokens_[4 * i], &v, 4);
  }
  REMORA_CHECK(B_ > 0, "LMStream: batch must be positive, got " << B_);
  REMORA_CHECK(T_ > 0, "LMStream: seq_len must be positive, got " << T_);
  const int64_t N = int64_t(tokens.size());
  S_ = N / B_;
  num_segments_ = S_ > 0 ? (S_ - 1) / T_ : 0;
  REMORA_CHECK(num_segments_ >= 1,
               "LMStream: " << N << " tokens in " << B_ << " streams give " << S_
                            << " tokens per stream, but one segment needs seq_len + 1 = "
                            << T_ + 1 << "; fix: lower batch or seq_len, or use more data");
}

namespace {
// out[i] = token (first + i), i < n, from storage of `width` bytes per token.
void widen(const uint8_t* data, int width, int64_t first, int64_t n, int64_t* out) {
  if (width == 1) {
    std::copy(data + first, data + first + n, out);
  } else if (width == 2) {
    for (int64_t i = 0; i < n; ++i) {
      uint16_t w;
      std::memcpy(&w, data + 2 * (first + i), 2);
      out[i] = w;
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      uint32_t w;
      std::memcpy(&w, data + 4 * (first + i), 4);
      out[i] = w;
    }
  }
}
}  // namespace

LMBatch LMStream::segment(int64_t s) const {
  REMORA_CHECK(s >= 0 && s < num_segments_,
               "LMStream::segment: " << s << " is outside [0, " << num_segments_ << ")");
  LMBatch b;
  b.x = Tensor::empty({B_, T_}, DType::i64);
  b.y = Tensor::empty({B_, T_}, DType::i64);
  int64_t* x = b.x.data_ptr<int64_t>();
  int64_t* y = b.y.data_ptr<int64_t>();
  for (int64_t r = 0; r < B_; ++r) {
    const int64_t first = r * S_ + s * T_;
    widen(tokens_.data(), width_, first, T_, x + r * T_);
    widen(tokens_.data(), width_, first + 1, T_, y + r * T_);
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

}  // namespace data
}  // namespace remora
