// SPDX-License-Identifier: BSD-3-Clause
// [wordpiece_mlm]: masked-LM pretraining on WordPiece text (data.type
// wordpiece, cli/tasks/wordpiece_mlm.cpp) and whole-word masking
// (models::mlm_mask_whole_words): a chosen word is labelled whole and never in
// part, special tokens are never chosen, the rate of chosen words is the
// probability, the draws are those of mlm_mask; the driver trains the shipped
// sample (the loss falls), evaluates the checkpoint, resumes exactly, keeps
// the tokenizer in the checkpoint, and refuses bad data naming the file.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli/experiment.h"
#include "cli_run.h"
#include "core/safetensors.h"
#include "models/bert.h"
#include "temp_dir.h"
#include "text/wordpiece.h"

using namespace remora;
using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

using remora_test::TempDir;
using Run = remora_test::CliRun;

Run remora_cli(std::vector<std::string> args) { return remora_test::run_remora(std::move(args)); }

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << bytes;
}

std::string read_file(const std::string& path) { return remora_test::read_whole_file(path); }

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::vector<json> lines_of_split(const std::string& metrics, const std::string& split) {
  std::vector<json> out;
  std::istringstream in(read_file(metrics));
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) {
      json j = json::parse(line);
      if (j.value("split", "") == split) out.push_back(j);
    }
  return out;
}

// Rows of `row` tokens: [CLS] at 0, [SEP] at the end, and words of one to
// three pieces between (word_start 1 on a word's first piece); ids 5.. are
// ordinary pieces, 2 and 3 the specials.
struct Rows {
  std::vector<int64_t> ids, special, start;
  int64_t rows = 0, row = 0;
};

Rows make_rows(int64_t rows, int64_t row, uint64_t seed) {
  Rows r;
  r.rows = rows;
  r.row = row;
  Generator g(seed);
  for (int64_t b = 0; b < rows; ++b) {
    int64_t left = 0;  // pieces left in the current word
    for (int64_t i = 0; i < row; ++i) {
      const bool sp = i == 0 || i == row - 1;
      r.ids.push_back(sp ? (i == 0 ? 2 : 3) : 5 + int64_t(g.next_uniform() * 40));
      r.special.push_back(sp);
      bool starts = false;
      if (!sp && left == 0) {
        left = 1 + int64_t(g.next_uniform() * 3);
        starts = true;
      }
      if (!sp) --left;
      r.start.push_back(starts);
    }
  }
  return r;
}

Tensor t(const std::vector<int64_t>& v, const Rows& r) { return Tensor::from_vector(v, {r.rows, r.row}); }

// The shipped config, run from the repository's root (its relative paths, as a user runs it).
const char* kConfig = "configs/mlm_wordpiece_tiny.json";

struct AtRoot {
  fs::path was = fs::current_path();
  AtRoot() { fs::current_path(REMORA_SOURCE_DIR); }
  ~AtRoot() { fs::current_path(was); }
};

}  // namespace

TEST_CASE("wordpiece mlm: whole-word masking labels every piece of a chosen word and never a part",
          "[wordpiece_mlm]") {
  const Rows r = make_rows(400, 48, 17);
  const int64_t V = 60, mask_id = 4;
  Generator g(5);
  auto out = models::mlm_mask_whole_words(t(r.ids, r), t(r.special, r), t(r.start, r), V, mask_id, g, 0.15);
  const std::vector<int64_t> x = out.first.to_i64_vector(), lab = out.second.to_i64_vector();
  int64_t words = 0, chosen = 0, labelled = 0, masked = 0, kept = 0;
  for (size_t i = 0; i < r.ids.size();) {
    if (r.special[i]) {
      CHECK(lab[i] == -100);  // a special token is never chosen
      CHECK(x[i] == r.ids[i]);
      ++i;
      continue;
    }
    size_t end = i + 1;  // the word: its first piece and the continuations after it
    while (end < r.ids.size() && !r.special[end] && !r.start[end]) ++end;
    int64_t with_label = 0;
    for (size_t j = i; j < end; ++j) with_label += lab[j] != -100;
    INFO("word at " << i << " of " << (end - i) << " pieces: " << with_label << " labelled");
    CHECK((with_label == 0 || with_label == int64_t(end - i)));  // all or nothing
    ++words;
    chosen += with_label > 0;
    for (size_t j = i; j < end; ++j) {
      if (lab[j] == -100) {
        CHECK(x[j] == r.ids[j]);  // not chosen: unchanged
        continue;
      }
      CHECK(lab[j] == r.ids[j]);  // the label is the original piece
      ++labelled;
      masked += x[j] == mask_id;
      kept += x[j] == r.ids[j];
    }
    i = end;
  }
  REQUIRE(words > 5000);
  // 15% of the words (binomial: sd about 0.5 percentage points here).
  CHECK(double(chosen) / double(words) == Approx(0.15).margin(0.02));
  // 80% [MASK], 10% random (a random id equals the original now and then), 10% kept.
  CHECK(double(masked) / double(labelled) == Approx(0.8).margin(0.04));
  CHECK(double(kept) / double(labelled) == Approx(0.1 + 0.1 / double(V)).margin(0.03));
}

TEST_CASE("wordpiece mlm: the masking rate follows the probability, by words and by pieces", "[wordpiece_mlm]") {
  const Rows r = make_rows(300, 64, 23);
  for (double p : {0.05, 0.3, 0.6}) {
    Generator g(9);
    const auto words = models::mlm_mask_whole_words(t(r.ids, r), t(r.special, r), t(r.start, r), 60, 4, g, p);
    Generator h(9);
    const auto pieces = models::mlm_mask_whole_words(t(r.ids, r), t(r.special, r), Tensor(), 60, 4, h, p);
    int64_t n = 0, chosen_words = 0, n_words = 0, chosen_pieces = 0;
    const std::vector<int64_t> lw = words.second.to_i64_vector(), lp = pieces.second.to_i64_vector();
    for (size_t i = 0; i < lw.size(); ++i) {
      if (r.special[i]) continue;
      ++n;
      chosen_pieces += lp[i] != -100;
      if (r.start[i]) {
        ++n_words;
        chosen_words += lw[i] != -100;
      }
    }
    INFO("probability " << p);
    CHECK(double(chosen_words) / double(n_words) == Approx(p).margin(0.025));
    CHECK(double(chosen_pieces) / double(n) == Approx(p).margin(0.02));
  }
  // 0 chooses nothing, 1 everything but the specials.
  Generator g(1);
  const auto none = models::mlm_mask_whole_words(t(r.ids, r), t(r.special, r), t(r.start, r), 60, 4, g, 0.0);
  for (int64_t v : none.second.to_i64_vector()) CHECK(v == -100);
  const auto all = models::mlm_mask_whole_words(t(r.ids, r), t(r.special, r), t(r.start, r), 60, 4, g, 1.0);
  const std::vector<int64_t> la = all.second.to_i64_vector();
  for (size_t i = 0; i < la.size(); ++i) CHECK((la[i] == -100) == bool(r.special[i]));
  CHECK_THROWS(models::mlm_mask_whole_words(t(r.ids, r), t(r.special, r), t(r.start, r), 60, 4, g, 1.5));
  CHECK_THROWS(models::mlm_mask_whole_words(t(r.ids, r), Tensor(), Tensor::from_vector(std::vector<int64_t>{1}, {1}),
                                            60, 4, g, 0.15));
}

TEST_CASE("wordpiece mlm: whole-word masking is deterministic given the generator and draws as mlm_mask",
          "[wordpiece_mlm]") {
  const Rows r = make_rows(50, 32, 3);
  Generator a(42), b(42), c(43);
  const auto x = models::mlm_mask_whole_words(t(r.ids, r), t(r.special, r), t(r.start, r), 60, 4, a, 0.2);
  const auto y = models::mlm_mask_whole_words(t(r.ids, r), t(r.special, r), t(r.start, r), 60, 4, b, 0.2);
  const auto z = models::mlm_mask_whole_words(t(r.ids, r), t(r.special, r), t(r.start, r), 60, 4, c, 0.2);
  CHECK(x.first.to_i64_vector() == y.first.to_i64_vector());
  CHECK(x.second.to_i64_vector() == y.second.to_i64_vector());
  CHECK(a.offset() == b.offset());
  CHECK(x.second.to_i64_vector() != z.second.to_i64_vector());
  // Every piece its own word at 0.15: exactly mlm_mask, which advances the generator as much.
  Generator d(7), e(7);
  const auto m = models::mlm_mask(t(r.ids, r), t(r.special, r), 60, 4, d);
  const auto w = models::mlm_mask_whole_words(t(r.ids, r), t(r.special, r), Tensor(), 60, 4, e, 0.15);
  CHECK(m.first.to_i64_vector() == w.first.to_i64_vector());
  CHECK(m.second.to_i64_vector() == w.second.to_i64_vector());
  CHECK(d.offset() == e.offset());
}

TEST_CASE("wordpiece mlm: the shipped vocabulary splits words into pieces, and the task keeps its tokenizer",
          "[wordpiece_mlm]") {
  AtRoot root;
  const text::WordPieceTokenizer tok = text::WordPieceTokenizer::from_vocab_file("data/mlm/vocab.txt");
  const std::vector<std::string> pieces = tok.tokenize("The farmers walked home.");
  CHECK(pieces == std::vector<std::string>{"the", "farmer", "##s", "walk", "##ed", "home", "."});
  for (const char* s : {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}) CHECK(tok.token_to_id(s) >= 0);
  driver::Config cfg = driver::load_config(kConfig);
  CHECK(cfg.task == "wordpiece_mlm");
  driver::Experiment ex(cfg);
  CHECK(ex.ctx.n_token == tok.vocab_size());
  CHECK(ex.ctx.max_len == 32);
  const json saved = json::parse(ex.vocab_json());
  CHECK(saved["kind"] == "wordpiece_mlm");
  CHECK(saved["tokenizer"] == json::parse(tok.to_json()));
  // One pass: the training split's windows of 30 pieces in batches of 16.
  int64_t n = 0;
  std::ifstream f("data/mlm/train.txt");
  for (std::string line; std::getline(f, line);) n += int64_t(tok.encode(line).size());
  CHECK(ex.task->epoch_batches(cfg) == (n / 30 + 15) / 16);
  // The data position is the number of batches drawn.
  driver::State st;
  int64_t tokens = 0;
  CHECK(ex.data_position() == 0);
  ex.train_loss(st, &tokens);
  ex.train_loss(st, &tokens);
  CHECK(ex.data_position() == 2);
  CHECK(tokens == 16 * 32);
}

TEST_CASE("wordpiece mlm driver: the shipped config trains (the loss falls), evaluates and infers from its checkpoint",
          "[wordpiece_mlm][driver]") {
  TempDir dir;
  AtRoot root;
  const std::string out = dir / "run";
  Run tr = remora_cli({"train", kConfig, "--out", out, "--set", "train.log_every=1", "--set", "train.threads=2"});
  INFO(tr.err);
  REQUIRE(tr.code == 0);
  const std::vector<json> train = lines_of_split(out + "/metrics.jsonl", "train");
  const std::vector<json> valid = lines_of_split(out + "/metrics.jsonl", "valid");
  REQUIRE(train.size() == 200);
  REQUIRE(valid.size() == 4);
  double first = 0, last = 0;
  for (size_t i = 0; i < 5; ++i) first += train[i]["loss"].get<double>() / 5;
  for (size_t i = train.size() - 20; i < train.size(); ++i) last += train[i]["loss"].get<double>() / 20;
  INFO("training loss: first steps " << first << ", last steps " << last);
  CHECK(first > std::log(284.0) - 0.5);  // about uniform over the vocabulary at the start
  CHECK(last < first - 0.8);
  CHECK(valid.back()["loss"].get<double>() < std::log(284.0) - 1.0);
  CHECK(valid.back().contains("mlm_accuracy"));
  for (const char* split : {"valid", "test"}) {
    Run ev = remora_cli({"eval", kConfig, "--checkpoint", out + "/best.safetensors", "--split", split});
    INFO(ev.err);
    REQUIRE(ev.code == 0);
    const json m = json::parse(ev.out);
    CHECK(std::isfinite(m["loss"].get<double>()));
    CHECK(m["tokens"].get<int64_t>() > 0);
  }
  // The same evaluation twice gives the same numbers (the masks are seeded alike).
  Run a = remora_cli({"eval", kConfig, "--checkpoint", out + "/best.safetensors"});
  Run b = remora_cli({"eval", kConfig, "--checkpoint", out + "/best.safetensors"});
  REQUIRE(a.code == 0);
  CHECK(json::parse(a.out)["loss"] == json::parse(b.out)["loss"]);
  // The checkpoint holds the tokenizer: infer needs neither the data nor the vocabulary file.
  write_file(dir / "ids.json", "[[2, 60, 4, 3]]");
  Run in = remora_cli({"infer", "--checkpoint", out + "/best.safetensors", "--input", dir / "ids.json", "--output",
                       dir / "logits.safetensors", "--set", "data.path=" + (dir / "gone"), "--set",
                       "data.vocab=" + (dir / "gone/vocab.txt")});
  INFO(in.err);
  CHECK(in.code == 0);

  // Text in: encoded by the checkpoint's tokenizer as [CLS] ... [SEP], the same logits as its ids.
  const auto tok = text::WordPieceTokenizer::from_vocab_file("data/mlm/vocab.txt", [] {
    text::WordPieceOptions o;
    o.do_lower_case = true;
    return o;
  }());
  const std::string sentence = "The king [MASK] in the castle.";
  const std::vector<int64_t> ids = tok.encode_for_model(sentence).ids;
  REQUIRE(ids.front() == tok.cls_id());
  REQUIRE(ids.back() == tok.sep_id());
  json ids_json = json::array({ids});
  write_file(dir / "sentence_ids.json", ids_json.dump());
  write_file(dir / "sentence.txt", sentence + "\n");
  const std::string gone_data = "data.path=" + (dir / "gone"), gone_vocab = "data.vocab=" + (dir / "gone/vocab.txt");
  Run by_ids = remora_cli({"infer", "--checkpoint", out + "/best.safetensors", "--input", dir / "sentence_ids.json",
                           "--output", dir / "by_ids.safetensors", "--set", gone_data, "--set", gone_vocab});
  Run by_text = remora_cli({"infer", "--checkpoint", out + "/best.safetensors", "--input", dir / "sentence.txt",
                            "--lines", "--output", dir / "by_text.safetensors", "--set", gone_data, "--set", gone_vocab});
  INFO(by_ids.err << by_text.err);
  REQUIRE(by_ids.code == 0);
  REQUIRE(by_text.code == 0);
  const Safetensors li = load_safetensors(dir / "by_ids.safetensors"), lt = load_safetensors(dir / "by_text.safetensors");
  CHECK(lt.get("logits").shape() == Shape{1, int64_t(ids.size()), 284});
  CHECK(lt.get("logits").to_vector() == li.get("logits").to_vector());  // the same ids, one process each

  // --fill: one JSON line for the [MASK], the 3 likeliest pieces in order, named by the tokenizer.
  Run fill = remora_cli({"infer", "--checkpoint", out + "/best.safetensors", "--input", dir / "sentence.txt",
                         "--lines", "--fill", "3", "--set", gone_data, "--set", gone_vocab});
  INFO(fill.err);
  REQUIRE(fill.code == 0);
  const json f = json::parse(fill.out);
  const int64_t mask_at = int64_t(std::find(ids.begin(), ids.end(), tok.token_to_id("[MASK]")) - ids.begin());
  CHECK(f["sequence"] == 0);
  CHECK(f["position"] == mask_at);
  REQUIRE(f["fills"].size() == 3);
  const std::vector<double> row = lt.get("logits").select(0, 0).select(0, mask_at).to(DType::f64).to_vector();
  const int64_t best = int64_t(std::max_element(row.begin(), row.end()) - row.begin());
  CHECK(f["fills"][0]["id"] == best);
  CHECK(f["fills"][0]["token"] == tok.id_to_token(best));
  for (size_t i = 1; i < 3; ++i)
    CHECK(f["fills"][i]["probability"].get<double>() <= f["fills"][i - 1]["probability"].get<double>());
}

TEST_CASE("wordpiece mlm driver: a resumed run reproduces the uninterrupted one exactly", "[wordpiece_mlm][driver]") {
  TempDir dir;
  AtRoot root;
  for (const char* wwm : {"true", "false"}) {
    const std::vector<std::string> sets = {"--set", "train.steps=12", "--set", "train.eval_every=5", "--set",
                                           "train.log_every=1", "--set", "train.threads=1", "--set",
                                           std::string("data.whole_word_masking=") + wwm};
    auto train = [&](std::vector<std::string> extra) {
      std::vector<std::string> args = {"train", kConfig};
      args.insert(args.end(), sets.begin(), sets.end());
      args.insert(args.end(), extra.begin(), extra.end());
      return remora_cli(args);
    };
    const std::string full = dir / (std::string("full_") + wwm), part = dir / (std::string("part_") + wwm);
    const Run f = train({"--out", full});
    const Run p = train({"--out", part, "--until", "7"});
    const Run r = train({"--out", part, "--resume"});
    INFO("whole_word_masking " << wwm << ": " << f.err << p.err << r.err);
    REQUIRE(f.code == 0);
    REQUIRE(p.code == 0);
    REQUIRE(r.code == 0);
    const std::vector<json> a = lines_of_split(full + "/metrics.jsonl", "train");
    const std::vector<json> b = lines_of_split(part + "/metrics.jsonl", "train");
    REQUIRE(a.size() == 12);
    REQUIRE(b.size() == a.size());
    for (size_t i = 0; i < a.size(); ++i) CHECK(a[i]["loss"].get<double>() == b[i]["loss"].get<double>());
    CHECK(read_file(full + "/last.safetensors") == read_file(part + "/last.safetensors"));
  }
}

TEST_CASE("wordpiece mlm driver: a missing vocabulary, an empty file or a split too short is exit 2 naming the file",
          "[wordpiece_mlm][driver]") {
  TempDir dir;
  const std::string src = std::string(REMORA_SOURCE_DIR) + "/data/mlm";
  const std::string data = dir / "data";
  fs::create_directory(data);
  for (const char* f : {"train.txt", "valid.txt", "test.txt", "vocab.txt"})
    fs::copy_file(src + "/" + f, data + "/" + f);
  const std::string cfg = std::string(REMORA_SOURCE_DIR) + "/" + kConfig;
  int runs = 0;
  auto train = [&](std::vector<std::string> sets) {
    std::vector<std::string> args = {"train", cfg, "--out", dir / ("out" + std::to_string(runs++)), "--set",
                                     "data.path=" + data, "--set",
                                     "train.steps=2", "--set", "train.threads=1"};
    for (const std::string& s : sets) {
      args.push_back("--set");
      args.push_back(s);
    }
    return remora_cli(args);
  };
  auto refused = [](const Run& r, const std::vector<std::string>& parts) {
    INFO(r.err);
    CHECK(r.code == 2);
    for (const std::string& p : parts) CHECK(has(r.err, p));
  };
  {
    // The vocabulary inside data.path, named relative to it: fine.
    Run ok = train({"data.vocab=vocab.txt"});
    INFO(ok.err);
    REQUIRE(ok.code == 0);
  }
  refused(train({"data.vocab=" + (dir / "nowhere/vocab.txt")}), {dir / "nowhere/vocab.txt", "does not exist"});
  refused(train({"data.vocab="}), {"data.vocab"});
  // A vocabulary without [MASK].
  write_file(dir / "small.txt", "[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\n");
  refused(train({"data.vocab=" + (dir / "small.txt")}), {dir / "small.txt", "[MASK]"});
  // An empty validation file, then one of blank lines only.
  write_file(data + "/valid.txt", "");
  refused(train({"data.vocab=vocab.txt"}), {data + "/valid.txt", "has no text"});
  write_file(data + "/valid.txt", "\n  \n\n");
  refused(train({"data.vocab=vocab.txt"}), {data + "/valid.txt", "has no text"});
  fs::copy_file(src + "/valid.txt", data + "/valid.txt", fs::copy_options::overwrite_existing);
  // A test split shorter than one window of data.seq_len - 2 pieces.
  write_file(data + "/test.txt", "The birds were singing.\n");
  refused(train({"data.vocab=vocab.txt"}), {data + "/test.txt", "too short"});
  // A missing split file, named by its key.
  fs::remove(data + "/test.txt");
  refused(train({"data.vocab=vocab.txt"}), {"data.test", data + "/test.txt"});
}
