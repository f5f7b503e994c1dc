// SPDX-License-Identifier: BSD-3-Clause
#include "common.h"

#include <sys/stat.h>

#include <sstream>

#include "../../core/file_io.h"

#include "../../ops/losses.h"
#include "../../ops/ops.h"

namespace remora {
namespace driver {

int64_t count_targets(const Tensor& targets) {
  int64_t n = 0;
  for (int64_t v : targets.to_i64_vector()) n += v != -100;
  return n;
}

Tensor masked_token_loss(const Tensor& logits, const Tensor& labels, int64_t terms) {
  if (terms == 0)
    return cross_entropy(logits.reshape({-1, logits.size(-1)}), labels.reshape({-1}), -100, Reduction::sum);
  return token_loss(logits, labels);
}

void MaskedTally::add(const Tensor& logits, const Tensor& labels) {
  const std::vector<int64_t> lab = labels.to_i64_vector();
  const std::vector<int64_t> pred = argmax(logits, -1).to(Device::cpu()).to_i64_vector();
  int64_t k = 0;
  for (size_t i = 0; i < lab.size(); ++i)
    if (lab[i] != -100) {
      ++k;
      correct += pred[i] == lab[i];
    }
  if (k > 0) loss += token_loss(logits, labels.to(logits.device())).item() * double(k);
  predicted += k;
}

Metrics MaskedTally::metrics() const {
  Metrics m;
  m.loss = loss / double(std::max<int64_t>(1, predicted));
  m.accuracy = double(correct) / double(std::max<int64_t>(1, predicted));
  m.tokens = predicted;
  return m;
}

Tensor token_loss(const Tensor& logits, const Tensor& targets) {
  return cross_entropy(logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}));
}

data::Corpus load_text_corpus(const Config& cfg, const std::string& vocab_json) {
  const std::string& path = cfg.data.keys<TextKeys>().path;
  if (cfg.data.corpus_missing) {
    // generate / infer / export of a checkpoint: its vocabulary is all they
    // need of the data (no split is read).
    if (vocab_json.empty())
      throw InputError("data.path " + path + " is not there and nothing else holds the vocabulary; pass the "
                       "corpus the model was trained on");
    data::Corpus c;
    c.vocab = as_input_error("checkpoint vocabulary", [&] { return data::Vocab::from_json(vocab_json); });
    return c;
  }
  if (cfg.data.type == "words") {
    const TextKeys& k = cfg.data.keys<TextKeys>();
    text::WordTokenizerOptions o;
    o.lower_case = k.lower_case;
    o.min_freq = k.min_freq;
    o.max_size = k.max_size;
    if (!vocab_json.empty()) {
      // The checkpoint's vocabulary must be a word vocabulary; it encodes the files.
      data::Vocab v = as_input_error("checkpoint vocabulary", [&] { return data::Vocab::from_json(vocab_json); });
      if (v.kind != data::Vocab::Kind::words)
        throw InputError("checkpoint vocabulary is not a word vocabulary but data.type is words; use the data "
                         "type the checkpoint was trained on");
    }
    return as_input_error("data.path", [&] { return data::load_word_corpus(path, o, vocab_json); });
  }
  data::Corpus corpus = as_input_error("data.path", [&] {
    return cfg.data.type == "bytes" ? data::load_byte_corpus(path) : data::load_char_corpus(path);
  });
  if (!vocab_json.empty()) {
    // A checkpoint must have been trained on the same vocabulary.
    data::Vocab v = as_input_error("checkpoint vocabulary", [&] { return data::Vocab::from_json(vocab_json); });
    if (!(v == corpus.vocab)) {
      throw InputError("checkpoint vocabulary (" + std::to_string(v.size()) +
                       " symbols) differs from the one built from " + path + " (" +
                       std::to_string(corpus.vocab.size()) +
                       " symbols); use the data the checkpoint was trained on");
    }
  }
  return corpus;
}

std::unique_ptr<data::LMStream> make_train_stream(const Config& cfg, const data::Corpus& corpus) {
  const int64_t B = cfg.data.batch_size, T = cfg.data.seq_len;
  const std::string& path = cfg.data.keys<TextKeys>().path;
  // Too little text for one segment is the data's fault: an input error (exit 2).
  auto s = as_input_error("data.path " + path + " (training split)",
                          [&] { return std::make_unique<data::LMStream>(corpus.train, B, T); });
  if (s->num_segments() < 1)
    throw InputError("data: the training split of " + path + " (" + std::to_string(corpus.train.size()) +
                     " tokens) is too short for batch_size " + std::to_string(B) + " x seq_len " + std::to_string(T));
  return s;
}

void set_text_keys(TaskEntry& e, bool words) {
  FieldTable<TextKeys> f;
  f.choice("path", &TextKeys::path, "data/tinyshakespeare.txt", {},
           words ? "the corpus file (data.type words: the folder of wiki.train.tokens, wiki.valid.tokens and "
                   "wiki.test.tokens); relative: to the working folder, else to the config's folder's parent"
                 : "the corpus (relative: to the working folder, else to the config's folder's parent)")
      .integer("seq_len", &TextKeys::seq_len, DataConfig().seq_len, 1, 1 << 20,
               "training and evaluation sequence length");
  if (words)
    f.boolean("lower_case", &TextKeys::lower_case, false, "data.type words: lower-case the words (PTB: true)")
        .integer("min_freq", &TextKeys::min_freq, 0, 0, INT64_MAX,
                 "data.type words: leave out words counted fewer times in wiki.train.tokens")
        .integer("max_size", &TextKeys::max_size, 0, 0, INT64_MAX,
                 "data.type words: keep at most this many words besides <eos> (0: all)");
  set_task_keys<TextKeys>(e, f, [](Node& d, TextKeys& k, DataConfig& dc, const std::string& base_dir) {
    std::string full = k.path;
    if (!full.empty() && full[0] != '/' && !base_dir.empty()) full = base_dir + "/" + full;
    if (dc.type == "words") {
      // A folder in the WikiText layout: each split's file must be readable.
      for (const char* split : {"train", "valid", "test"}) {
        const std::string p = data::word_split_path(full, split);
        const std::string problem = regular_file_problem(p);
        if (problem == "does not exist" && dc.corpus_optional) {
          dc.corpus_missing = true;
          continue;
        }
        if (!problem.empty())
          d.fail("path", "data.type words reads a folder with wiki.train.tokens, wiki.valid.tokens and "
                         "wiki.test.tokens; " + p + " " + problem);
      }
      k.path = full;
      dc.seq_len = k.seq_len;
      return;
    }
    // Not just "file not found": a directory, a FIFO or a device (which would
    // block or never end) and an unreadable file each say what they are.
    const std::string problem = regular_file_problem(full);
    if (problem == "does not exist" && dc.corpus_optional) dc.corpus_missing = true;
    else if (problem == "does not exist") d.fail("path", "file not found: " + full);
    else if (!problem.empty()) d.fail("path", full + " " + problem);
    k.path = full;
    dc.seq_len = k.seq_len;
  });
}

void estimate_text_task(const Config& cfg, ModelContext& ctx, MemoryEstimate& e) {
  struct stat st;
  const double bytes = ::stat(cfg.data.keys<TextKeys>().path.c_str(), &st) == 0 ? double(st.st_size) : 0;
  if (cfg.data.type == "words") {
    // The three files encoded as int64 ids (a word is at least two bytes with
    // its space) and the vocabulary; the vocabulary size is known only once
    // wiki.train.tokens is read: at most one word per two bytes of it.
    double all = 0, train = 0;
    for (const char* split : {"train", "valid", "test"}) {
      const double b = ::stat(data::word_split_path(cfg.data.keys<TextKeys>().path, split).c_str(), &st) == 0
                           ? double(st.st_size) : 0;
      all += b;
      if (split[1] == 'r') train = b;
    }
    e.add("word corpus, encoded", "data.path (" + human_bytes(all) + ")", 8 * all / 2 + 4 * train / 2);
    const int64_t max_size = cfg.data.keys<TextKeys>().max_size;
    int64_t words = int64_t(train / 2) + 2;
    if (max_size > 0) words = std::min(words, max_size + 2);
    ctx.n_token = std::max<int64_t>(words, 2);
    ctx.stream = !cfg.model.is_encoder();
    ctx.seq_len = cfg.data.seq_len;
    ctx.max_len = cfg.data.seq_len;
    return;
  }
  e.add("text corpus, split and encoded", "data.path (" + human_bytes(bytes) + ")", 10 * bytes);
  ctx.n_token = cfg.data.type == "bytes" ? 257 : 258;  // with [MASK] for an encoder
  ctx.stream = !cfg.model.is_encoder();
  ctx.seq_len = cfg.data.seq_len;
  ctx.max_len = cfg.data.seq_len;
}

std::string number_text(double x) {
  std::ostringstream os;
  os.precision(9);
  os << x;
  return os.str();
}

double file_bytes(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 ? double(st.st_size) : 0;
}

json tiny_causal_model() {
  return {{"type", "transformer_xl"}, {"n_layer", 1}, {"d_model", 16}, {"n_head", 2}, {"d_inner", 32}};
}

json tiny_encoder_model() { return {{"type", "bert"}, {"n_layer", 1}, {"d_model", 16}, {"n_head", 2}, {"d_inner", 32}}; }

void estimate_language_task(const Config& cfg, double bytes_per_string, double test_sets, MemoryEstimate& e) {
  e.add("formal-language strings", "data.n_train, data.n_test",
        bytes_per_string * (double(cfg.data.keys<LanguageKeys>().n_train) +
                           test_sets * double(cfg.data.keys<LanguageKeys>().n_test)));
}

void set_language_keys(TaskEntry& e) {
  FieldTable<LanguageKeys> f;
  f.required("language", &LanguageKeys::language,
             {"parity", "tomita1", "tomita2", "tomita3", "tomita4", "tomita5", "tomita6", "tomita7", "aa_star",
              "abab_star", "dyck2"},
             "the formal language")
      .integer("n_train", &LanguageKeys::n_train, 10000, 1, 1 << 24, "training strings")
      .integer("n_test", &LanguageKeys::n_test, 2000, 1, 1 << 24, "test strings per length bin");
  set_task_keys(e, f);
}

// Every rank seeds the same generator: it draws the global batch (task.h).
void SampledTask::seed_data(const Config& cfg, const DataShard& shard) {
  data_gen_ = Generator(cfg.seed + kDataSeedOffset);
}

}  // namespace driver
}  // namespace remora
