#include "common.h"

#include <sys/stat.h>

#include "../../../core/file_io.h"

#include "../../../ops/losses.h"
#include "../../../ops/ops.h"

namespace remora {
namespace driver {

int64_t count_targets(const Tensor& targets) {
  int64_t n = 0;
  for (int64_t v : targets.to_i64_vector()) n += v != -100;
  return n;
}

Tensor token_loss(const Tensor& logits, const Tensor& targets) {
  return cross_entropy(logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}));
}

data::Corpus load_text_corpus(const Config& cfg, const std::string& vocab_json) {
  data::Corpus corpus = as_input_error("data.path", [&] {
    return cfg.data.type == "bytes" ? data::load_byte_corpus(cfg.data.path) : data::load_char_corpus(cfg.data.path);
  });
  if (!vocab_json.empty()) {
    // A checkpoint must have been trained on the same vocabulary.
    data::Vocab v = as_input_error("checkpoint vocabulary", [&] { return data::Vocab::from_json(vocab_json); });
    if (!(v == corpus.vocab)) {
      throw InputError("checkpoint vocabulary (" + std::to_string(v.size()) +
                       " symbols) differs from the one built from " + cfg.data.path + " (" +
                       std::to_string(corpus.vocab.size()) +
                       " symbols); use the data the checkpoint was trained on");
    }
  }
  return corpus;
}

std::unique_ptr<data::LMStream> make_train_stream(const Config& cfg, const data::Corpus& corpus) {
  const int64_t B = cfg.data.batch_size, T = cfg.data.seq_len;
  // Too little text for one segment is the data's fault: an input error (exit 2).
  auto s = as_input_error("data.path " + cfg.data.path + " (training split)",
                          [&] { return std::make_unique<data::LMStream>(corpus.train, B, T); });
  if (s->num_segments() < 1)
    throw InputError("data: the training split of " + cfg.data.path + " (" + std::to_string(corpus.train.size()) +
                     " tokens) is too short for batch_size " + std::to_string(B) + " x seq_len " + std::to_string(T));
  return s;
}

void read_text_keys(Node& d, DataConfig& dc, const std::string& base_dir) {
  dc.path = d.string("path", "data/tinyshakespeare.txt");
  dc.seq_len = d.integer("seq_len", dc.seq_len, 1, 1 << 20);
  std::string full = dc.path;
  if (!full.empty() && full[0] != '/' && !base_dir.empty()) full = base_dir + "/" + full;
  // Not just "file not found": a directory, a FIFO or a device (which would
  // block or never end) and an unreadable file each say what they are.
  const std::string problem = regular_file_problem(full);
  if (problem == "does not exist") d.fail("path", "file not found: " + full);
  if (!problem.empty()) d.fail("path", full + " " + problem);
  dc.path = full;
}

void estimate_text_task(const Config& cfg, ModelContext& ctx, MemoryEstimate& e) {
  struct stat st;
  const double bytes = ::stat(cfg.data.path.c_str(), &st) == 0 ? double(st.st_size) : 0;
  e.add("text corpus, split and encoded", "data.path (" + human_bytes(bytes) + ")", 10 * bytes);
  ctx.n_token = cfg.data.type == "bytes" ? 257 : 258;  // with [MASK] for an encoder
  ctx.stream = !cfg.model.is_encoder();
  ctx.seq_len = cfg.data.seq_len;
  ctx.max_len = cfg.data.seq_len;
}

json tiny_causal_model() {
  return {{"type", "transformer_xl"}, {"n_layer", 1}, {"d_model", 16}, {"n_head", 2}, {"d_inner", 32}};
}

json tiny_encoder_model() { return {{"type", "bert"}, {"n_layer", 1}, {"d_model", 16}, {"n_head", 2}, {"d_inner", 32}}; }

void estimate_language_task(const Config& cfg, double bytes_per_string, double test_sets, MemoryEstimate& e) {
  e.add("formal-language strings", "data.n_train, data.n_test",
        bytes_per_string * (double(cfg.data.n_train) + test_sets * double(cfg.data.n_test)));
}

void text_keys_json(const DataConfig& dc, json& out) {
  out["path"] = dc.path;
  out["seq_len"] = dc.seq_len;
}

void read_language_keys(Node& d, DataConfig& dc, const std::string&) {
  dc.language = d.string("language", std::vector<std::string>{"parity", "tomita1", "tomita2", "tomita3", "tomita4",
                                                              "tomita5", "tomita6", "tomita7", "aa_star",
                                                              "abab_star", "dyck2"});
  dc.n_train = d.integer("n_train", dc.n_train, 1, 1 << 24);
  dc.n_test = d.integer("n_test", dc.n_test, 1, 1 << 24);
}

void language_keys_json(const DataConfig& dc, json& out) {
  out["language"] = dc.language;
  out["n_train"] = dc.n_train;
  out["n_test"] = dc.n_test;
}

// Every rank seeds the same generator: it draws the global batch (task.h).
void SampledTask::seed_data(const Config& cfg, const DataShard& shard) {
  data_gen_ = Generator(cfg.seed + kDataSeedOffset);
}

}  // namespace driver
}  // namespace remora
