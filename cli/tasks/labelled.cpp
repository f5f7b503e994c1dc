// SPDX-License-Identifier: BSD-3-Clause
// Task "labelled": sequence classification or regression of a user's
// labelled text (or code read as text) with an encoder, on the files of a
// folder (cli/labelled_data.h: TSV, CSV or JSON Lines): one or two text
// fields and a label per row. The texts are encoded as [CLS] a [SEP] (b
// [SEP]) by a WordPiece tokenizer (a vocab.txt or HF tokenizer folder, or a
// whole-word vocabulary built from the training split), cut longest first to
// data.seq_len, and padded per batch to the longest row. Classes are the
// labels of the training file in order of first appearance; the tokenizer and
// the classes are stored with every checkpoint, so eval and infer map labels
// the same way. Metrics (cli/glue_metrics.h): accuracy, F1 and Matthews
// correlation for classes, MSE, Pearson and Spearman for regression.
#include <sys/stat.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "../../core/file_io.h"
#include "../../models/bert.h"
#include "../../ops/losses.h"
#include "../../ops/ops.h"
#include "../../text/wordpiece.h"
#include "../glue_metrics.h"
#include "../labelled_data.h"
#include "common.h"

namespace remora {
namespace driver {

struct LabelledKeys {
  std::string path;                 // the folder of the split files (joined to the config's folder)
  std::string train, valid, test;   // file names in it
  std::string format;               // auto | tsv | csv | jsonl
  bool header = true;
  std::string text_a, text_b, label;
  bool regression = false;
  std::string positive;
  int64_t seq_len = 128;
  std::string tokenizer;            // words | wordpiece
  std::string vocab;                // wordpiece: vocab.txt or a tokenizer folder
  bool lower_case = true;
  int64_t min_freq = 1, max_size = 0;
  // Resolved from the keys above (not keys themselves): the split files.
  std::string train_file, valid_file, test_file;
};

namespace {

constexpr const char* kSpecials[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};

bool is_dir(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// The file of one split: `name` in `dir`; a name without an extension is
// completed with .tsv, .csv or .jsonl (the one that exists, or the extension
// of data.format). "" with *why set when there is no such file.
std::string split_file(const std::string& dir, const std::string& name, const std::string& format, std::string* why) {
  const std::string base = dir + "/" + name;
  if (name.find('.') != std::string::npos) {
    const std::string problem = regular_file_problem(base);
    if (problem.empty()) return base;
    *why = base + " " + problem;
    return "";
  }
  std::vector<std::string> exts = {"tsv", "csv", "jsonl"};
  if (format != "auto") exts = {format};
  std::vector<std::string> found;
  for (const std::string& e : exts)
    if (regular_file_problem(base + "." + e).empty()) found.push_back(base + "." + e);
  if (found.size() == 1) return found[0];
  std::string tried;
  for (const std::string& e : exts) tried += (tried.empty() ? "" : ", ") + name + "." + e;
  *why = found.empty() ? dir + " has no readable " + tried
                       : dir + " has several of " + tried + "; name the file with its extension";
  return "";
}

struct Example {
  std::vector<int64_t> ids, types;
  int64_t label = 0;   // classification: the class id
  double target = 0;   // regression: the value
};

struct Split {
  std::string file;
  std::vector<Example> rows;
};

struct Batch {
  Tensor ids, mask, types, labels, targets;
  int64_t tokens = 0;
};

Batch make_batch(const std::vector<const Example*>& rows, int64_t pad_id) {
  size_t L = 1;
  for (const Example* e : rows) L = std::max(L, e->ids.size());
  const int64_t B = int64_t(rows.size());
  std::vector<int64_t> ids(size_t(B) * L, pad_id), types(size_t(B) * L, 0), key_padding(size_t(B) * L, 1),
      labels;
  std::vector<double> targets;
  Batch b;
  for (size_t r = 0; r < rows.size(); ++r) {
    const Example& e = *rows[r];
    for (size_t t = 0; t < e.ids.size(); ++t) {
      ids[r * L + t] = e.ids[t];
      types[r * L + t] = e.types[t];
      key_padding[r * L + t] = 0;
    }
    b.tokens += int64_t(e.ids.size());
    labels.push_back(e.label);
    targets.push_back(e.target);
  }
  b.ids = Tensor::from_vector(ids, {B, int64_t(L)});
  b.types = Tensor::from_vector(types, {B, int64_t(L)});
  // 1 = a token, 0 = padding (as the classify task gives it).
  b.mask = eq(Tensor::from_vector(key_padding, {B, int64_t(L)}), Tensor::scalar(0.0, DType::i64));
  b.labels = Tensor::from_vector(labels, {B});
  b.targets = Tensor::from_vector(targets, {B}, DType::f64);
  return b;
}

class LabelledTask : public Task {
 public:
  void build_data(const Config& cfg, const DataShard& shard, const std::string& vocab_json) override {
    data_seed_ = cfg.seed + kDataSeedOffset;
    const LabelledKeys& k = cfg.data.keys<LabelledKeys>();
    regression_ = k.regression;
    seq_len_ = k.seq_len;
    if (!vocab_json.empty()) load_saved(vocab_json);
    if (cfg.data.corpus_missing) {
      if (!tok_)
        throw InputError("data.path " + k.path + " is not there and nothing else holds the tokenizer and the labels; "
                         "pass the data the model was trained on");
      set_positive(k);
      return;
    }
    const bool fixed_labels = tok_ != nullptr;  // a checkpoint's: the training file must fit them
    if (!tok_) {
      tok_ = std::make_shared<text::WordPieceTokenizer>(make_tokenizer(k));
    }
    train_ = read_split(k, k.train_file, /*training=*/!fixed_labels);
    valid_ = read_split(k, k.valid_file, false);
    test_ = read_split(k, k.test_file, false);
    if (!regression_ && labels_.size() < 2)
      throw InputError(k.train_file + ": every row has the label '" + (labels_.empty() ? "" : labels_[0]) +
                       "'; classification needs at least two labels (for numbers set data.regression)");
    set_positive(k);
  }

  ModelContext model_context(const Config& cfg) const override {
    ModelContext c;
    c.n_token = tok_->vocab_size();
    c.num_classes = regression_ ? 1 : int64_t(labels_.size());
    c.pad_id = tok_->pad_id();
    c.max_len = seq_len_;
    c.seq_len = seq_len_;
    return c;
  }

  Tensor train_loss(Experiment& ex, State& state, int64_t* tokens) override {
    std::vector<const Example*> rows;
    for (int64_t i = 0; i < ex.cfg.data.batch_size; ++i) rows.push_back(&next_example());
    const Batch b = make_batch(rows, tok_->pad_id());  // the global batch (every rank draws it)
    Batch mine;
    mine.ids = my_rows(b.ids);
    mine.mask = my_rows(b.mask);
    mine.types = my_rows(b.types);
    const Tensor labels = my_rows(b.labels), targets = my_rows(b.targets);
    *tokens = int64_t(sum(mine.mask.to(DType::f64)).item());
    loss_terms_ = labels.numel();
    const Tensor logits = logits_of(ex, mine);
    return loss_of(logits, labels, targets);
  }

  Metrics evaluate(Experiment& ex, const std::string& split, int64_t max_batches) override {
    const Split& s = split == "test" ? test_ : valid_;
    const int64_t B = ex.cfg.data.eval_batch_size;
    int64_t n = int64_t(s.rows.size());
    if (max_batches > 0) n = std::min(n, max_batches * B);
    std::vector<int64_t> pred, gold;
    std::vector<double> pred_v, gold_v;
    double loss = 0;
    for (int64_t i0 = 0; i0 < n; i0 += B) {
      std::vector<const Example*> rows;
      for (int64_t i = i0; i < std::min(n, i0 + B); ++i) rows.push_back(&s.rows[size_t(i)]);
      const Batch b = make_batch(rows, tok_->pad_id());
      const Tensor logits = logits_of(ex, b);
      loss += loss_of(logits, b.labels, b.targets).item() * double(rows.size());
      if (regression_) {
        const std::vector<double> v = logits.reshape({-1}).to(DType::f64).to(Device::cpu()).to_vector();
        for (size_t i = 0; i < rows.size(); ++i) {
          pred_v.push_back(v[i]);
          gold_v.push_back(rows[i]->target);
        }
      } else {
        const std::vector<int64_t> p = argmax(logits, -1).to(Device::cpu()).to_i64_vector();
        for (size_t i = 0; i < rows.size(); ++i) {
          pred.push_back(p[i]);
          gold.push_back(rows[i]->label);
        }
      }
    }
    Metrics m;
    m.loss = loss / double(std::max<int64_t>(1, n));
    m.tokens = n;
    if (regression_) {
      m.mse = m.loss;
      m.pearson = glue::pearson(pred_v, gold_v);
      m.spearman = glue::spearman(pred_v, gold_v);
    } else {
      m.accuracy = glue::accuracy(pred, gold);
      m.f1 = labels_.size() == 2 ? glue::f1_of(pred, gold, positive_) : glue::f1_macro(pred, gold);
      m.matthews = glue::matthews(pred, gold);
    }
    return m;
  }

  json metrics_json(const Metrics& m) const override {
    if (regression_) return {{"loss", m.loss}, {"mse", m.mse}, {"pearson", m.pearson}, {"spearman", m.spearman}};
    return {{"loss", m.loss}, {"accuracy", m.accuracy}, {"f1", m.f1}, {"matthews", m.matthews}};
  }

  // Classes: 1 - accuracy; regression: 1 - the mean of Pearson and Spearman.
  double score(const Metrics& m) const override {
    return regression_ ? 1 - (m.pearson + m.spearman) / 2 : 1 - m.accuracy;
  }

  std::string vocab_json() const override {
    if (!tok_) return "";
    return json{{"kind", "labelled"},
                {"tokenizer", json::parse(tok_->to_json())},
                {"labels", labels_},
                {"regression", regression_}}
        .dump();
  }

  // One pass: every row of the training file, in batches of data.batch_size.
  int64_t epoch_batches(const Config& cfg) const override {
    return (int64_t(train_.rows.size()) + cfg.data.batch_size - 1) / cfg.data.batch_size;
  }

  // The examples drawn so far: passes over the training file, each in its own order.
  int64_t data_position() const override { return drawn_; }
  void set_data_position(int64_t p) override { drawn_ = p; }

  bool predicts_rows() const override { return true; }

  std::vector<std::string> predict_rows(Experiment& ex, const std::string& input) override {
    const LabelledKeys& k = ex.cfg.data.keys<LabelledKeys>();
    LabelledFields f = fields_of(k);
    f.label_required = false;
    const TableFormat format = table_format_of(input, k.format);
    const int64_t B = ex.cfg.data.eval_batch_size;
    std::vector<std::string> out;
    std::vector<Example> pending;
    auto flush = [&] {
      if (pending.empty()) return;
      std::vector<const Example*> rows;
      for (const Example& e : pending) rows.push_back(&e);
      const Tensor logits = logits_of(ex, make_batch(rows, tok_->pad_id()));
      if (regression_) {
        for (double v : logits.reshape({-1}).to(DType::f64).to(Device::cpu()).to_vector()) out.push_back(number_text(v));
      } else {
        for (int64_t p : argmax(logits, -1).to(Device::cpu()).to_i64_vector()) out.push_back(labels_[size_t(p)]);
      }
      pending.clear();
    };
    const int64_t n = read_labelled_file(input, format, f, [&](const LabelledRow& r) {
      pending.push_back(encode(r, input));
      if (int64_t(pending.size()) == B) flush();
    });
    flush();
    if (n == 0) throw InputError(input + ": has no rows to predict");
    return out;
  }

 private:
  static LabelledFields fields_of(const LabelledKeys& k) {
    LabelledFields f;
    f.text_a = k.text_a;
    f.text_b = k.text_b;
    f.label = k.label;
    f.header = k.header;
    return f;
  }

  void load_saved(const std::string& vocab_json) {
    as_input_error("checkpoint metadata \"vocab\"", [&] {
      json j;
      try {
        j = json::parse(vocab_json);
      } catch (const json::exception& e) {
        throw Error(std::string("not valid JSON (") + e.what() + ")");
      }
      if (!j.is_object() || j.value("kind", "") != "labelled" || !j.contains("tokenizer") || !j.contains("labels") ||
          !j["labels"].is_array() || !j.contains("regression") || !j["regression"].is_boolean())
        throw Error("not the tokenizer and labels of a labelled-data checkpoint; use a checkpoint of this task");
      if (j["regression"].get<bool>() != regression_)
        throw Error(std::string("the checkpoint was trained for ") +
                    (j["regression"].get<bool>() ? "regression" : "classification") + " but data.regression is " +
                    (regression_ ? "true" : "false"));
      tok_ = std::make_shared<text::WordPieceTokenizer>(text::WordPieceTokenizer::from_json(j["tokenizer"].dump()));
      labels_.clear();
      label_ids_.clear();
      for (const json& l : j["labels"]) {
        if (!l.is_string()) throw Error("a label is not a string");
        label_ids_.emplace(l.get<std::string>(), int64_t(labels_.size()));
        labels_.push_back(l.get<std::string>());
      }
      return 0;
    });
  }

  // The tokenizer of data.tokenizer: a vocab.txt / HF tokenizer folder, or the
  // words of the training split's texts (WordPiece's normalisation and split).
  static text::WordPieceTokenizer make_tokenizer(const LabelledKeys& k) {
    text::WordPieceTokenizer tok = as_input_error("data.vocab " + k.vocab, [&] {
      if (k.tokenizer != "wordpiece") {
        text::WordPieceOptions o;
        o.do_lower_case = k.lower_case;
        std::vector<std::string> sp(std::begin(kSpecials), std::end(kSpecials));
        return text::WordPieceTokenizer(text::Vocabulary(sp), o);
      }
      if (is_dir(k.vocab)) return text::WordPieceTokenizer::from_pretrained(k.vocab);
      text::WordPieceOptions o;
      o.do_lower_case = k.lower_case;
      return text::WordPieceTokenizer::from_vocab_file(k.vocab, o);
    });
    for (const char* what : {"cls", "sep", "pad"}) {
      const int64_t id = what[0] == 'c' ? tok.cls_id() : what[0] == 's' ? tok.sep_id() : tok.pad_id();
      if (id < 0)
        throw InputError("data.vocab " + k.vocab + ": the vocabulary has no " +
                         (what[0] == 'c' ? tok.options().cls_token : what[0] == 's' ? tok.options().sep_token
                                                                                   : tok.options().pad_token) +
                         " token, which the encoding needs");
    }
    if (k.tokenizer == "wordpiece") return tok;
    // Words by decreasing count in the training texts, ties in order of first
    // appearance; fewer than min_freq left out, at most max_size kept.
    std::unordered_map<std::string, size_t> index;
    std::vector<std::pair<std::string, int64_t>> words;
    LabelledFields f = fields_of(k);
    f.label_required = false;
    auto count = [&](const std::string& text) {
      for (std::string& w : tok.words(text)) {
        auto it = index.emplace(w, words.size());
        if (it.second) words.emplace_back(std::move(w), 0);
        ++words[it.first->second].second;
      }
    };
    read_labelled_file(k.train_file, table_format_of(k.train_file, k.format), f, [&](const LabelledRow& r) {
      count(r.text_a);
      if (!k.text_b.empty()) count(r.text_b);
    });
    std::stable_sort(words.begin(), words.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    text::Vocabulary v{std::vector<std::string>(std::begin(kSpecials), std::end(kSpecials))};
    int64_t kept = 0;
    for (const auto& w : words) {
      if (w.second < k.min_freq || (k.max_size > 0 && kept >= k.max_size)) break;
      if (v.id(w.first) < 0) {
        v.add(w.first);
        ++kept;
      }
    }
    return text::WordPieceTokenizer(std::move(v), tok.options());
  }

  Example encode(const LabelledRow& r, const std::string& file) const {
    const text::Encoding e = as_input_error(file + " line " + std::to_string(r.line), [&] {
      return tok_->encode_for_model(r.text_a, r.text_b.empty() ? nullptr : &r.text_b, seq_len_);
    });
    Example x;
    x.ids = e.ids;
    x.types = e.type_ids;
    return x;
  }

  // Reads and encodes one split; `training`: a label not yet seen is added as a class.
  Split read_split(const LabelledKeys& k, const std::string& file, bool training) {
    Split s;
    s.file = file;
    const LabelledFields f = fields_of(k);
    const TableFormat format = table_format_of(file, k.format);
    read_labelled_file(file, format, f, [&](const LabelledRow& r) {
      Example x = encode(r, file);
      const std::string at = file + " line " + std::to_string(r.line);
      if (regression_) {
        const char* p = r.label.c_str();
        char* end = nullptr;
        const double v = std::strtod(p, &end);
        while (end && (*end == ' ' || *end == '\t')) ++end;
        if (r.label.empty() || end == p || *end != '\0' || !std::isfinite(v))
          throw InputError(at + ": the label '" + r.label + "' is not a number (data.regression is true)");
        x.target = v;
      } else {
        auto it = label_ids_.find(r.label);
        if (it == label_ids_.end()) {
          if (!training) {
            std::string known;
            for (size_t i = 0; i < labels_.size() && i < 20; ++i) known += (i ? ", '" : "'") + labels_[i] + "'";
            throw InputError(at + ": the label '" + r.label + "' is not one of the training file's labels (" + known +
                             ")");
          }
          it = label_ids_.emplace(r.label, int64_t(labels_.size())).first;
          labels_.push_back(r.label);
        }
        x.label = it->second;
      }
      s.rows.push_back(std::move(x));
    });
    if (s.rows.empty()) throw InputError(file + ": has no rows (only a header or blank lines)");
    return s;
  }

  // The class whose F1 a two-class task reports: data.positive, else the label
  // "1", else "true", else the second label.
  void set_positive(const LabelledKeys& k) {
    positive_ = 1;
    if (regression_) return;
    if (!k.positive.empty()) {
      auto it = label_ids_.find(k.positive);
      if (it == label_ids_.end())
        throw InputError("data.positive: '" + k.positive + "' is not a label of the training file");
      positive_ = it->second;
      return;
    }
    for (const char* name : {"1", "true"}) {
      auto it = label_ids_.find(name);
      if (it != label_ids_.end()) {
        positive_ = it->second;
        return;
      }
    }
  }

  // The next training example: pass e = drawn_ / n over the n rows goes in the
  // order of a permutation drawn for that pass alone (from its own stretch of
  // the data generator's counters), so a position restores the stream exactly.
  const Example& next_example() {
    const int64_t n = int64_t(train_.rows.size());
    const int64_t pass = drawn_ / n;
    if (pass != order_pass_) {
      Generator g(data_seed_);
      g.set_state(data_seed_, uint64_t(pass) << 40);
      order_ = data::permutation(n, g);
      order_pass_ = pass;
    }
    return train_.rows[size_t(order_[size_t(drawn_++ % n)])];
  }

  Tensor logits_of(Experiment& ex, const Batch& b) const {
    const Device dev = ex.device();
    // BERT takes the segment ids of a pair (0: a, 1: b); other encoders the ids and mask.
    if (auto bert = std::dynamic_pointer_cast<models::BertForMaskedLM>(ex.model))
      return bert->class_logits(b.ids.to(dev), b.mask.to(dev), b.types.to(dev));
    return ex.net.enc->class_logits(b.ids.to(dev), b.mask.to(dev));
  }

  Tensor loss_of(const Tensor& logits, const Tensor& labels, const Tensor& targets) const {
    if (regression_) return mse_loss(logits.reshape({-1}), targets.to(logits.dtype()).to(logits.device()));
    return cross_entropy(logits, labels.to(logits.device()));
  }

  std::shared_ptr<text::WordPieceTokenizer> tok_;
  std::vector<std::string> labels_;
  std::unordered_map<std::string, int64_t> label_ids_;
  bool regression_ = false;
  int64_t seq_len_ = 128, positive_ = 1;
  Split train_, valid_, test_;
  uint64_t data_seed_ = 0;
  int64_t drawn_ = 0, order_pass_ = -1;
  std::vector<int64_t> order_;
};

void estimate_labelled(const Config& cfg, ModelContext& ctx, MemoryEstimate& e) {
  const LabelledKeys& k = cfg.data.keys<LabelledKeys>();
  const double train = file_bytes(k.train_file);
  const double all = train + file_bytes(k.valid_file) + file_bytes(k.test_file);
  // Ids and segment ids (8 bytes each) of about one token per 4 bytes of text.
  e.add("labelled examples, encoded", "data.path (" + human_bytes(all) + ")", 4 * all);
  double words = 0;
  if (k.tokenizer == "wordpiece") {
    // One token per line of vocab.txt; about 8 bytes a line.
    words = file_bytes(is_dir(k.vocab) ? k.vocab + "/vocab.txt" : k.vocab) / 8;
  } else {
    // Distinct words grow about as the square root of the text (Heaps' law): a low bound.
    words = std::min(train / 2, 64 * std::sqrt(train));
    if (k.max_size > 0) words = std::min(words, double(k.max_size));
  }
  ctx.n_token = std::max<int64_t>(int64_t(words) + 5, 6);
  ctx.num_classes = k.regression ? 1 : 2;
  ctx.pad_id = 0;
  ctx.max_len = k.seq_len;
  ctx.seq_len = k.seq_len;
}

}  // namespace

TaskEntry labelled_task() {
  TaskEntry e;
  e.name = "labelled";
  e.data_types = {"labelled"};
  e.encoder = true;
  FieldTable<LabelledKeys> f;
  f.choice("path", &LabelledKeys::path, "data/labelled/sst_tiny", {},
           "the folder of the split files (relative: to the working folder, else to the config's folder's parent)")
      .choice("train", &LabelledKeys::train, "train", {},
              "the training file in data.path (without an extension: .tsv, .csv or .jsonl, whichever is there)")
      .choice("valid", &LabelledKeys::valid, "valid", {}, "the validation file in data.path (GLUE: dev.tsv)")
      .choice("test", &LabelledKeys::test, "test", {}, "the test file in data.path")
      .choice("format", &LabelledKeys::format, "auto", {"auto", "tsv", "csv", "jsonl"},
              "the files' format (auto: from each file's extension)")
      .boolean("header", &LabelledKeys::header, true,
               "tsv, csv: the first row names the fields (false: fields are named by column number, \"1\", \"2\", ...)")
      .choice("text_a", &LabelledKeys::text_a, "sentence", {}, "the field of the (first) text")
      .choice("text_b", &LabelledKeys::text_b, "", {}, "the field of the second text of a pair (\"\": single texts)")
      .choice("label", &LabelledKeys::label, "label", {}, "the field of the label (a class name, or a number)")
      .boolean("regression", &LabelledKeys::regression, false,
               "the label is a number to predict (MSE loss) rather than a class")
      .choice("positive", &LabelledKeys::positive, "", {},
              "two classes: the label whose F1 is reported (\"\": \"1\", else \"true\", else the second label)")
      .integer("seq_len", &LabelledKeys::seq_len, 128, 3, 1 << 20,
               "the longest encoded input, [CLS] and [SEP] included (longer pairs are cut longest first)")
      .choice("tokenizer", &LabelledKeys::tokenizer, "words", {"words", "wordpiece"},
              "words: a whole-word vocabulary of the training texts; wordpiece: data.vocab's")
      .choice("vocab", &LabelledKeys::vocab, "", {},
              "tokenizer wordpiece: a vocab.txt, or a HuggingFace tokenizer folder (vocab.txt, tokenizer_config.json)")
      .boolean("lower_case", &LabelledKeys::lower_case, true,
               "lower-case the texts (tokenizer words, and a wordpiece vocab.txt given as a file)")
      .integer("min_freq", &LabelledKeys::min_freq, 1, 1, INT64_MAX,
               "tokenizer words: leave out words counted fewer times in the training texts")
      .integer("max_size", &LabelledKeys::max_size, 0, 0, INT64_MAX,
               "tokenizer words: keep at most this many words besides the special tokens (0: all)");
  set_task_keys<LabelledKeys>(e, f, [](Node& d, LabelledKeys& k, DataConfig& dc, const std::string& base_dir) {
    auto full = [&](const std::string& p) {
      return !p.empty() && p[0] != '/' && !base_dir.empty() ? base_dir + "/" + p : p;
    };
    if (k.text_a.empty()) d.fail("text_a", "must name a field");
    if (k.label.empty()) d.fail("label", "must name a field");
    if (k.text_b == k.text_a) d.fail("text_b", "names the same field as data.text_a");
    if (k.regression && !k.positive.empty()) d.fail("positive", "is for classes; data.regression is true");
    if (k.tokenizer == "words" && !k.vocab.empty()) d.fail("vocab", "is for data.tokenizer wordpiece");
    k.path = full(k.path);
    k.vocab = full(k.vocab);
    if (k.tokenizer == "wordpiece") {
      // (A checkpoint holds its tokenizer: `remora info` and inference may run without the file.)
      if (k.vocab.empty()) d.fail("vocab", "data.tokenizer wordpiece needs a vocab.txt or a tokenizer folder");
      const bool there = is_dir(k.vocab) ? regular_file_problem(k.vocab + "/vocab.txt").empty()
                                         : regular_file_problem(k.vocab).empty();
      if (!there && !dc.corpus_optional)
        d.fail("vocab", k.vocab + (is_dir(k.vocab) ? " has no readable vocab.txt" : " " + regular_file_problem(k.vocab)));
    }
    dc.seq_len = k.seq_len;
    const std::string problem = directory_problem(k.path);
    if (problem == "does not exist" && dc.corpus_optional) {
      dc.corpus_missing = true;
    } else if (!problem.empty()) {
      d.fail("path", k.path + " " + problem + " (a folder with the train, valid and test files)");
    } else {
      const std::vector<std::pair<const char*, std::pair<std::string*, std::string*>>> splits = {
          {"train", {&k.train, &k.train_file}}, {"valid", {&k.valid, &k.valid_file}}, {"test", {&k.test, &k.test_file}}};
      for (const auto& s : splits) {
        if (s.second.first->empty()) d.fail(s.first, "must name a file in data.path");
        std::string why;
        *s.second.second = split_file(k.path, *s.second.first, k.format, &why);
        if (s.second.second->empty()) d.fail(s.first, why);
      }
    }
  });
  e.make = [] { return std::make_unique<LabelledTask>(); };
  e.estimate = estimate_labelled;
  e.tiny_configs = [] {
    json model = tiny_encoder_model();
    return std::vector<TinyConfig>{
        {"sst", tiny_config_with(model, {{"type", "labelled"}, {"path", "data/labelled/sst_tiny"}, {"seq_len", 16}})},
        {"similarity", tiny_config_with(model, {{"type", "labelled"},
                                                {"path", "data/labelled/pairs_tiny"},
                                                {"text_a", "sentence1"},
                                                {"text_b", "sentence2"},
                                                {"label", "score"},
                                                {"regression", true},
                                                {"seq_len", 32}})}};
  };
  return e;
}

}  // namespace driver
}  // namespace remora
