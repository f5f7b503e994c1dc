// SPDX-License-Identifier: BSD-3-Clause
// Task "wordpiece_mlm" (data.type wordpiece): masked-LM pretraining of an
// encoder on text files encoded by a WordPiece tokenizer (a vocab.txt or a
// HuggingFace tokenizer folder). The lines of each split file are read one at
// a time and their pieces joined into one stream of ids; a training batch is
// data.batch_size windows of data.seq_len - 2 ids at random positions, each as
// [CLS] window [SEP], masked as BERT (models::mlm_mask's 80/10/10 recipe at
// data.mlm_probability) or by whole words (models::mlm_mask_whole_words: a
// word is a piece without the "##" of a continuation and the continuations
// after it). Evaluation: consecutive windows of the split, masked the same way
// at every evaluation; loss and accuracy on the masked tokens. The tokenizer
// is stored with every checkpoint.
#include <sys/stat.h>

#include <cmath>
#include <fstream>

#include "../../core/file_io.h"
#include "../../models/bert.h"
#include "../../ops/losses.h"
#include "../../ops/ops.h"
#include "../../text/wordpiece.h"
#include "common.h"

namespace remora {
namespace driver {
namespace {

struct WordPieceMlmKeys {
  std::string path;                // the folder of the split files (joined to the config's folder)
  std::string train, valid, test;  // file names in it
  std::string vocab;               // a vocab.txt or a tokenizer folder
  bool lower_case = true;
  int64_t seq_len = 128;
  bool whole_word_masking = false;
  double mlm_probability = 0.15;
  // Resolved from the keys above (not keys themselves): the split files.
  std::string train_file, valid_file, test_file;
};

// The longest line read from a split file (a line is a text: a paragraph of
// WikiText is a few KiB).
constexpr uint64_t kMaxLineBytes = uint64_t(64) << 20;

bool is_dir(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool exists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0;
}

// The vocab.txt that data.vocab names (itself, or the one in its folder).
std::string vocab_txt(const std::string& vocab) { return is_dir(vocab) ? vocab + "/vocab.txt" : vocab; }

// One split: its file and its ids (int32: half the memory of int64 for a
// corpus of hundreds of millions of pieces).
struct Split {
  std::string file;
  std::vector<int32_t> ids;
};

class WordPieceMlmTask : public Task {
 public:
  void build_data(const Config& cfg, const DataShard& shard, const std::string& vocab_json) override {
    const WordPieceMlmKeys& k = cfg.data.keys<WordPieceMlmKeys>();
    data_seed_ = cfg.seed + kDataSeedOffset;
    seq_len_ = k.seq_len;
    whole_words_ = k.whole_word_masking;
    probability_ = k.mlm_probability;
    if (!vocab_json.empty()) load_saved(vocab_json);
    if (!tok_ && !(cfg.data.corpus_missing && regular_file_problem(vocab_txt(k.vocab)) != "")) {
      tok_ = std::make_shared<text::WordPieceTokenizer>(make_tokenizer(k));
    }
    if (!tok_)
      throw InputError("data.path " + k.path + " is not there and nothing else holds the tokenizer; pass the data "
                       "and data.vocab the model was trained on");
    index_vocabulary(k);
    if (cfg.data.corpus_missing) return;  // inference from a checkpoint: the tokenizer only
    const int64_t window = seq_len_ - 2;
    train_ = read_split(k.train_file, window);
    valid_ = read_split(k.valid_file, window);
    test_ = read_split(k.test_file, window);
  }

  ModelContext model_context(const Config& cfg) const override {
    ModelContext c;
    c.n_token = tok_->vocab_size();
    c.pad_id = tok_->pad_id();
    c.max_len = seq_len_;
    c.seq_len = seq_len_;
    return c;
  }

  Tensor train_loss(Experiment& ex, State& state, int64_t* tokens) override {
    const int64_t B = ex.cfg.data.batch_size, W = seq_len_ - 2;
    // Batch i draws from its own stretch of the data generator's counters, so
    // the number of batches drawn restores the stream exactly.
    Generator g(data_seed_);
    g.set_state(data_seed_, uint64_t(drawn_++) << 32);
    const int64_t starts = int64_t(train_.ids.size()) - W + 1;
    std::vector<int64_t> first;
    for (int64_t b = 0; b < B; ++b) first.push_back(data::uniform_int(g, starts));
    auto masked = mask(windows(train_, first), g, ex.vocab_size());
    // Masked for the global batch, then this rank's rows (task.h).
    const Tensor in = my_rows(masked.first), labels = my_rows(masked.second);
    *tokens = in.numel();
    loss_terms_ = count_targets(labels);  // differs between ranks: the loss is re-weighted
    return masked_token_loss(ex.net.enc->token_logits(in.to(ex.device()), Tensor()), labels.to(ex.device()),
                             loss_terms_);
  }

  void check_splits(const Config& cfg) const override {
    for (const Split* s : {&valid_, &test_})
      if (int64_t(s->ids.size()) < seq_len_ - 2) throw InputError(too_short(*s, seq_len_ - 2));
  }

  // Consecutive windows of the split, masked by a generator seeded the same
  // way at every evaluation so that the numbers are comparable.
  Metrics evaluate(Experiment& ex, const std::string& split, int64_t max_batches) override {
    const Split& s = split == "test" ? test_ : valid_;
    const int64_t B = ex.cfg.data.eval_batch_size, W = seq_len_ - 2;
    const int64_t all = int64_t(s.ids.size()) / W;
    const int64_t n = max_batches > 0 ? std::min(all, max_batches * B) : all;
    if (n < 1) throw InputError(too_short(s, W));
    Generator g(ex.cfg.seed + kMlmEvalSeedOffset);
    MaskedTally tally;
    for (int64_t w0 = 0; w0 < n; w0 += B) {
      std::vector<int64_t> first;
      for (int64_t w = w0; w < std::min(n, w0 + B); ++w) first.push_back(w * W);
      auto masked = mask(windows(s, first), g, ex.vocab_size());
      tally.add(ex.net.enc->token_logits(masked.first.to(ex.device()), Tensor()), masked.second);
    }
    return tally.metrics();
  }

  double score(const Metrics& m) const override { return m.loss; }
  json metrics_json(const Metrics& m) const override { return {{"loss", m.loss}, {"mlm_accuracy", m.accuracy}}; }

  // One pass: the training split's windows of data.seq_len - 2 pieces, in
  // batches of data.batch_size.
  int64_t epoch_batches(const Config& cfg) const override {
    const int64_t windows = int64_t(train_.ids.size()) / std::max<int64_t>(1, seq_len_ - 2);
    return std::max<int64_t>(1, (windows + cfg.data.batch_size - 1) / cfg.data.batch_size);
  }

  // The training batches drawn so far.
  int64_t data_position() const override { return drawn_; }
  void set_data_position(int64_t p) override { drawn_ = p; }

  const text::WordPieceTokenizer* wordpiece() const override { return tok_.get(); }

  std::string vocab_json() const override {
    if (!tok_) return "";
    return json{{"kind", "wordpiece_mlm"}, {"tokenizer", json::parse(tok_->to_json())}}.dump();
  }

 private:
  void load_saved(const std::string& vocab_json) {
    as_input_error("checkpoint metadata \"vocab\"", [&] {
      json j;
      try {
        j = json::parse(vocab_json);
      } catch (const json::exception& e) {
        throw Error(std::string("not valid JSON (") + e.what() + ")");
      }
      if (!j.is_object() || j.value("kind", "") != "wordpiece_mlm" || !j.contains("tokenizer"))
        throw Error("not the tokenizer of a WordPiece masked-LM checkpoint (data.type wordpiece); use a checkpoint "
                    "of this task");
      tok_ = std::make_shared<text::WordPieceTokenizer>(text::WordPieceTokenizer::from_json(j["tokenizer"].dump()));
      return 0;
    });
  }

  static text::WordPieceTokenizer make_tokenizer(const WordPieceMlmKeys& k) {
    return as_input_error("data.vocab " + k.vocab, [&] {
      if (is_dir(k.vocab)) return text::WordPieceTokenizer::from_pretrained(k.vocab);
      text::WordPieceOptions o;
      o.do_lower_case = k.lower_case;
      return text::WordPieceTokenizer::from_vocab_file(k.vocab, o);
    });
  }

  // The special tokens the windows and the masking need, and for every id
  // whether it is special and whether it starts a word (no "##").
  void index_vocabulary(const WordPieceMlmKeys& k) {
    const text::WordPieceOptions& o = tok_->options();
    const std::pair<int64_t, std::string> needed[] = {
        {tok_->cls_id(), o.cls_token}, {tok_->sep_id(), o.sep_token}, {tok_->mask_id(), o.mask_token}};
    for (const auto& t : needed)
      if (t.first < 0)
        throw InputError("data.vocab " + k.vocab + ": the vocabulary has no " + t.second +
                         " token, which masked-LM pretraining needs");
    const int64_t V = tok_->vocab_size();
    special_.assign(size_t(V), 0);
    word_start_.assign(size_t(V), 1);
    for (int64_t id = 0; id < V; ++id) {
      special_[size_t(id)] = tok_->is_special(id);
      const std::string& t = tok_->id_to_token(id);
      word_start_[size_t(id)] = !(t.size() > 2 && t[0] == '#' && t[1] == '#');
    }
  }

  std::string too_short(const Split& s, int64_t window) const {
    return s.file + ": " + std::to_string(s.ids.size()) + " WordPiece tokens, too short for one window of " +
           std::to_string(window) + " (data.seq_len " + std::to_string(seq_len_) +
           " less [CLS] and [SEP]); lower data.seq_len or add text";
  }

  // Reads and encodes one split file, line by line.
  Split read_split(const std::string& file, int64_t window) const {
    Split s;
    s.file = file;
    s.ids.reserve(size_t(file_bytes(file) / 4) + 16);  // about 4 bytes of English text a piece
    as_input_error("", [&] {
      for_each_line(file, kMaxLineBytes, "data file", [&](const std::string& line, int64_t number) {
        if (line.find_first_not_of(" \t\r\f\v") == std::string::npos) return;
        const std::vector<int64_t> ids =
            as_input_error(file + " line " + std::to_string(number), [&] { return tok_->encode(line); });
        for (int64_t id : ids) s.ids.push_back(int32_t(id));
      });
      return 0;
    });
    if (s.ids.empty()) throw InputError(file + ": has no text (the file is empty or has only blank lines)");
    if (int64_t(s.ids.size()) < window) throw InputError(too_short(s, window));
    return s;
  }

  // [CLS] ids[f, f + W) [SEP] for each start f: i64 [b, seq_len].
  std::vector<int64_t> windows(const Split& s, const std::vector<int64_t>& first) const {
    const int64_t W = seq_len_ - 2;
    std::vector<int64_t> ids;
    ids.reserve(first.size() * size_t(seq_len_));
    for (int64_t f : first) {
      ids.push_back(tok_->cls_id());
      ids.insert(ids.end(), s.ids.begin() + f, s.ids.begin() + f + W);
      ids.push_back(tok_->sep_id());
    }
    return ids;
  }

  // (masked ids, labels) [b, seq_len] of the windows' ids: by tokens or by whole words.
  std::pair<Tensor, Tensor> mask(const std::vector<int64_t>& ids, Generator& g, int64_t vocab_size) const {
    const Shape shape = {int64_t(ids.size()) / seq_len_, seq_len_};
    std::vector<int64_t> sp(ids.size()), ws;
    for (size_t i = 0; i < ids.size(); ++i) sp[i] = special_[size_t(ids[i])];
    if (whole_words_) {
      ws.resize(ids.size());
      for (size_t i = 0; i < ids.size(); ++i) ws[i] = word_start_[size_t(ids[i])];
    }
    return models::mlm_mask_whole_words(Tensor::from_vector(ids, shape), Tensor::from_vector(sp, shape),
                                        whole_words_ ? Tensor::from_vector(ws, shape) : Tensor(), vocab_size,
                                        tok_->mask_id(), g, probability_);
  }

  std::shared_ptr<text::WordPieceTokenizer> tok_;
  std::vector<uint8_t> special_, word_start_;  // by id
  int64_t seq_len_ = 128;
  bool whole_words_ = false;
  double probability_ = 0.15;
  Split train_, valid_, test_;
  uint64_t data_seed_ = 0;
  int64_t drawn_ = 0;
};

// The vocabulary's size (one token a line of vocab.txt), the ids of the
// splits (int32, about one per 4 bytes of text) and the tokenizer's tables.
void estimate_wordpiece_mlm(const Config& cfg, ModelContext& ctx, MemoryEstimate& e) {
  const WordPieceMlmKeys& k = cfg.data.keys<WordPieceMlmKeys>();
  int64_t lines = 0;
  {
    std::ifstream f(vocab_txt(k.vocab), std::ios::binary);
    std::string line;
    while (std::getline(f, line)) ++lines;
  }
  const double all = file_bytes(k.train_file) + file_bytes(k.valid_file) + file_bytes(k.test_file);
  e.add("WordPiece ids of the splits", "data.path (" + human_bytes(all) + ")", all);
  e.add("WordPiece vocabulary", "data.vocab", 128 * double(lines));
  ctx.n_token = std::max<int64_t>(lines, 6);
  ctx.pad_id = 0;
  ctx.max_len = k.seq_len;
  ctx.seq_len = k.seq_len;
}

}  // namespace

TaskEntry wordpiece_mlm_task() {
  TaskEntry e;
  e.name = "wordpiece_mlm";
  e.data_types = {"wordpiece"};
  e.encoder = true;
  FieldTable<WordPieceMlmKeys> f;
  f.choice("path", &WordPieceMlmKeys::path, "data/mlm", {},
           "the folder of the split files, one text a line (relative: to the working folder, else to the config's "
           "folder's parent)")
      .choice("train", &WordPieceMlmKeys::train, "train.txt", {}, "the training file in data.path")
      .choice("valid", &WordPieceMlmKeys::valid, "valid.txt", {}, "the validation file in data.path")
      .choice("test", &WordPieceMlmKeys::test, "test.txt", {}, "the test file in data.path")
      .choice("vocab", &WordPieceMlmKeys::vocab,
              {"required", [](const WordPieceMlmKeys&) { return std::string(); }}, {},
              "a vocab.txt, or a HuggingFace tokenizer folder (vocab.txt, tokenizer_config.json); relative: as "
              "data.path, else inside data.path (inference from a checkpoint, which holds the tokenizer, may omit it)")
      .boolean("lower_case", &WordPieceMlmKeys::lower_case, true,
               "lower-case the texts (a vocab.txt given as a file; a folder's tokenizer_config.json decides)")
      .integer("seq_len", &WordPieceMlmKeys::seq_len, 128, 3, 1 << 20,
               "the window length, [CLS] and [SEP] included")
      .boolean("whole_word_masking", &WordPieceMlmKeys::whole_word_masking, false,
               "choose whole words (a piece and its ## continuations) to mask, rather than single pieces")
      .number("mlm_probability", &WordPieceMlmKeys::mlm_probability, 0.15, 0, 1,
              "the probability (above 0) that a piece, or a word, is chosen for prediction");
  set_task_keys<WordPieceMlmKeys>(e, f, [](Node& d, WordPieceMlmKeys& k, DataConfig& dc, const std::string& base_dir) {
    auto full = [&](const std::string& p) {
      return !p.empty() && p[0] != '/' && !base_dir.empty() ? base_dir + "/" + p : p;
    };
    if (!(k.mlm_probability > 0)) d.fail("mlm_probability", "must be above 0");
    k.path = full(k.path);
    if (!k.vocab.empty() && k.vocab[0] != '/') {
      // As data.path, else a file or folder inside data.path.
      const std::string as_path = full(k.vocab), inside = k.path + "/" + k.vocab;
      k.vocab = !exists(as_path) && exists(inside) ? inside : as_path;
    }
    dc.seq_len = k.seq_len;
    // (A checkpoint holds its tokenizer: inference may run without the file.)
    if (k.vocab.empty() && !dc.corpus_optional)
      d.fail("vocab", "data.type wordpiece needs a vocab.txt or a HuggingFace tokenizer folder");
    if (!k.vocab.empty() && !dc.corpus_optional) {
      const std::string problem = regular_file_problem(vocab_txt(k.vocab));
      if (!problem.empty())
        d.fail("vocab", is_dir(k.vocab) ? k.vocab + " has no readable vocab.txt" : k.vocab + " " + problem);
    }
    const std::string problem = directory_problem(k.path);
    if (problem == "does not exist" && dc.corpus_optional) {
      dc.corpus_missing = true;
      return;
    }
    if (!problem.empty()) d.fail("path", k.path + " " + problem + " (a folder with the train, valid and test files)");
    const std::vector<std::pair<const char*, std::pair<std::string*, std::string*>>> splits = {
        {"train", {&k.train, &k.train_file}}, {"valid", {&k.valid, &k.valid_file}}, {"test", {&k.test, &k.test_file}}};
    for (const auto& s : splits) {
      if (s.second.first->empty()) d.fail(s.first, "must name a file in data.path");
      *s.second.second = k.path + "/" + *s.second.first;
      const std::string why = regular_file_problem(*s.second.second);
      if (!why.empty()) d.fail(s.first, *s.second.second + " " + why);
    }
  });
  e.make = [] { return std::make_unique<WordPieceMlmTask>(); };
  e.estimate = estimate_wordpiece_mlm;
  e.tiny_configs = [] {
    return std::vector<TinyConfig>{
        {"whole_words", tiny_config_with(tiny_encoder_model(), {{"type", "wordpiece"},
                                                                {"path", "data/mlm"},
                                                                {"vocab", "vocab.txt"},
                                                                {"seq_len", 16},
                                                                {"whole_word_masking", true}})}};
  };
  return e;
}

}  // namespace driver
}  // namespace remora
