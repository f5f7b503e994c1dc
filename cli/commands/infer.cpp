// SPDX-License-Identifier: BSD-3-Clause
// `remora infer`: logits (and hidden states) of a checkpoint, or of a
// HuggingFace BERT directory, on given token ids, written as safetensors; for
// a labelled-data model, one prediction per row of a data file.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iterator>
#include <sstream>

#include "../../core/autograd.h"
#include "../../core/file_io.h"
#include "../../core/generator.h"
#include "../../core/safetensors.h"
#include "../../models/bert.h"
#include "../../ops/ops.h"
#include "../../text/wordpiece.h"
#include "../input_checks.h"
#include "common.h"

namespace remora {
namespace driver {
namespace {

// Token ids from --input: a JSON array (one sequence), an array of arrays (a
// batch), or a text file encoded with `encode` (when given): one sequence, or
// one per line with --lines.
std::vector<std::vector<int64_t>> read_ids(const Args& a, int64_t vocab,
                                           const std::function<std::vector<int64_t>(const std::string&)>& encode) {
  const std::string input = need(a, "input");
  // A regular file of plausible size (/dev/zero or a FIFO is refused, not read).
  const std::string text = read_input_file(input, kMaxIdsBytes, "--input");
  // input_checks.cpp (fuzzed: tests/fuzz)
  IdsFormat format;
  format.lines = a.flags.count("lines") > 0;
  format.text = a.flags.count("text") > 0;
  return parse_ids(text, input, vocab, encode, format);
}

int64_t longest(const std::vector<std::vector<int64_t>>& seqs) {
  size_t n = 0;
  for (const auto& s : seqs) n = std::max(n, s.size());
  return int64_t(n);
}

Tensor batch_of(const std::vector<std::vector<int64_t>>& seqs) {
  std::vector<int64_t> flat;
  for (auto& s : seqs) flat.insert(flat.end(), s.begin(), s.end());
  return Tensor::from_vector(flat, {int64_t(seqs.size()), int64_t(seqs[0].size())});
}

// What a forward pass gives: logits [B, L, V] and, where the model has them,
// hidden states [B, L, d].
struct InferOutput {
  Tensor logits;
  std::vector<Tensor> hidden;
};

// Runs `forward` on the sequences: once, as one batch, when they are equally
// long; else once per sequence (so no model sees padding), each result padded
// with zeros along the length to the longest sequence.
InferOutput run_batch(const std::vector<std::vector<int64_t>>& seqs,
                      const std::function<InferOutput(const Tensor& ids)>& forward) {
  const int64_t L = longest(seqs);
  bool equal = true;
  for (const auto& s : seqs) equal = equal && int64_t(s.size()) == L;
  if (equal) return forward(batch_of(seqs));
  auto pad = [L](const Tensor& t) {
    if (t.size(1) == L) return t;
    Shape rest = t.shape();
    rest[1] = L - t.size(1);
    return cat({t, Tensor::zeros(rest, t.dtype(), t.device())}, 1);
  };
  std::vector<Tensor> logits;
  std::vector<std::vector<Tensor>> hidden;
  for (const auto& s : seqs) {
    InferOutput one = forward(batch_of({s}));
    logits.push_back(pad(one.logits));
    hidden.resize(one.hidden.size());
    for (size_t l = 0; l < one.hidden.size(); ++l) hidden[l].push_back(pad(one.hidden[l]));
  }
  InferOutput out;
  out.logits = cat(logits, 0);
  for (auto& h : hidden) out.hidden.push_back(cat(h, 0));
  return out;
}

// --output must not be one of the command's inputs (compared by device and
// inode, so another spelling or a hard link is caught too), and an existing
// file is replaced only with --force. Checked once the inputs are read, before
// the model runs.
void check_output(const Args& a) {
  const std::string out = need(a, "output");
  if (out.empty()) throw UsageError("--output is empty");
  check_output_file("--output", out, command_inputs(a), a.flags.count("force") > 0);
}

void write_infer(const std::string& output, const std::vector<std::vector<int64_t>>& seqs, const InferOutput& out,
                 bool with_hidden) {
  const Tensor& logits = out.logits;
  const std::vector<Tensor>& hidden = out.hidden;
  std::vector<int64_t> lengths;
  for (const auto& s : seqs) lengths.push_back(int64_t(s.size()));
  std::vector<std::pair<std::string, Tensor>> t{
      {"logits", logits}, {"lengths", Tensor::from_vector(lengths, {int64_t(lengths.size())}, DType::i64)}};
  if (with_hidden)
    for (size_t l = 0; l < hidden.size(); ++l) t.emplace_back("hidden." + std::to_string(l), hidden[l]);
  try {
    save_safetensors(output, t, {{"format", "remora-infer"}});
  } catch (const Error& e) {
    throw InputError(std::string("--output: ") + e.what());
  }
  std::fprintf(stderr, "wrote %s: logits %s\n", output.c_str(), shape_str(logits.shape()).c_str());
}

// An encoder's position embeddings bound the length: a longer --input is an
// input error naming the limit's key, not a failure inside the forward pass.
void check_positions(const std::vector<std::vector<int64_t>>& seqs, int64_t max_positions, const std::string& key) {
  if (longest(seqs) > max_positions)
    throw InputError("--input: a sequence of " + std::to_string(longest(seqs)) + " ids is longer than " + key +
                     " = " + std::to_string(max_positions));
}

// One JSON line per [MASK] of the input: {"sequence": b, "position": t,
// "fills": [{"token": ..., "id": ..., "probability": ...}, ...]}, the k most
// likely tokens by the softmax of the MLM logits [B, L, V] there.
void print_fills(const text::WordPieceTokenizer& tok, const std::vector<std::vector<int64_t>>& seqs,
                 const Tensor& logits, int64_t k) {
  const int64_t mask = tok.token_to_id(tok.options().mask_token);
  const int64_t V = logits.size(2);
  k = std::min(k, V);
  int64_t found = 0;
  for (size_t b = 0; b < seqs.size(); ++b)
    for (size_t t = 0; t < seqs[b].size(); ++t) {
      if (seqs[b][t] != mask) continue;
      ++found;
      const std::vector<double> lg =
          logits.select(0, int64_t(b)).select(0, int64_t(t)).to(DType::f64).contiguous().to_vector();
      const double mx = *std::max_element(lg.begin(), lg.end());
      double z = 0;
      for (double x : lg) z += std::exp(x - mx);
      std::vector<int64_t> order(static_cast<size_t>(V));
      for (int64_t i = 0; i < V; ++i) order[size_t(i)] = i;
      std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int64_t x, int64_t y) {
        return lg[size_t(x)] > lg[size_t(y)] || (lg[size_t(x)] == lg[size_t(y)] && x < y);
      });
      json fills = json::array();
      for (int64_t i = 0; i < k; ++i) {
        const int64_t id = order[size_t(i)];
        fills.push_back({{"token", tok.id_to_token(id)}, {"id", id}, {"probability", std::exp(lg[size_t(id)] - mx) / z}});
      }
      std::printf("%s\n", json{{"sequence", b}, {"position", t}, {"fills", fills}}.dump().c_str());
    }
  if (found == 0)
    throw InputError("--fill: the input has no " + tok.options().mask_token + " token; put one where a word should be filled in");
}

// WordPiece encoding as BERT's inputs are: [CLS] pieces [SEP] (empty without a tokenizer).
std::function<std::vector<int64_t>(const std::string&)> wordpiece_encoder(const text::WordPieceTokenizer* tok) {
  if (!tok) return {};
  return [tok](const std::string& t) { return tok->encode_for_model(t).ids; };
}

// --fill K (0 when absent).
int64_t fill_count(const Args& a) { return a.opts.count("fill") ? to_int("fill", a.opts.at("fill"), 1, 1 << 20) : 0; }

// Whether the logits are written: always, except with --fill and no --output.
bool writes_logits(const Args& a) { return !a.opts.count("fill") || a.opts.count("output"); }

// A HuggingFace BertConfig (config.json of a HF directory) rather than a Remora config.
bool is_hf_config(const std::string& path) {
  std::string text;
  try {
    text = read_regular_file(path, kMaxConfigBytes, "config");
  } catch (const Error&) {
    return false;  // config_of reports it (a FIFO, a directory, a missing file)
  }
  if (json_depth(text) > kMaxJsonDepth) return false;  // config_of reports it
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception&) {
    return false;  // config_of reports malformed JSON
  }
  return j.is_object() && !j.contains("model") && (j.contains("model_type") || j.contains("hidden_size"));
}

// `remora infer DIR/config.json --checkpoint DIR/model.safetensors`: a HuggingFace BERT.
int infer_hf(const Args& a) {
  const std::string cpath = a.positional[0], ck = need(a, "checkpoint");
  if (!a.sets.empty()) throw UsageError("--set applies to Remora configs, not to a HuggingFace config.json");
  const std::string text = read_input_file(cpath, models::kMaxHfConfigBytes, "config");
  models::BertConfig bc = as_input(cpath, [&] { return models::BertConfig::from_hf_config(text, cpath); });
  // Before building: the config must fit the weights file and the memory (a
  // downloaded config.json with 10,000 layers stops here).
  uint64_t ck_bytes = 0;
  try {
    ::close(open_regular_file(ck, "--checkpoint", &ck_bytes));
    models::check_hf_size(bc, cpath, ck, ck_bytes, 4);
  } catch (const Error& e) {
    throw InputError(e.what());
  }
  // With a vocab.txt beside config.json, --input may be text: WordPiece with
  // [CLS] ... [SEP], as HF's BertTokenizer encodes it.
  const size_t slash = cpath.find_last_of('/');
  const std::string hf_dir = slash == std::string::npos ? "." : cpath.substr(0, slash);
  std::shared_ptr<text::WordPieceTokenizer> tok;
  if (file_exists(hf_dir + "/vocab.txt")) {
    tok = std::make_shared<text::WordPieceTokenizer>(
        as_input(hf_dir + "/vocab.txt", [&] { return text::WordPieceTokenizer::from_pretrained(hf_dir); }));
    if (tok->vocab_size() != bc.vocab_size)
      throw InputError(hf_dir + "/vocab.txt has " + std::to_string(tok->vocab_size()) + " tokens but " + cpath +
                       " says vocab_size " + std::to_string(bc.vocab_size) + "; use the vocabulary of this model");
  }
  const std::vector<std::vector<int64_t>> seqs = read_ids(a, bc.vocab_size, wordpiece_encoder(tok.get()));
  const int64_t fill_k = fill_count(a);
  if (fill_k > 0 && !tok)
    throw UsageError("--fill needs the model's vocab.txt beside " + cpath + " (to write the fills as text)");
  if (writes_logits(a)) check_output(a);
  check_positions(seqs, bc.max_position_embeddings, cpath + ": max_position_embeddings");
  {
    // The forward pass on this input: logits [B, L, V], scores [B, H, L, L], hidden states.
    const double B = double(seqs.size()), L = double(longest(seqs)), d = double(bc.hidden_size);
    MemoryEstimate e;
    e.add("parameters", cpath, 4 * bc.parameter_count() + double(ck_bytes));
    e.add("output logits [batch, length, vocab_size]", "--input and vocab_size", 4 * 2 * B * L * double(bc.vocab_size));
    e.add("attention scores [batch, heads, length, length]", "--input", 4 * 3 * B * double(bc.num_attention_heads) * L * L);
    e.add("layer activations", "--input and hidden_size", 4 * (12 + double(bc.num_hidden_layers)) * B * L * d);
    std::string source;
    const uint64_t room = available_memory(&source);
    if (room != UINT64_MAX) check_estimate(e, double(room), source, "infer on --input");
  }
  auto m = std::make_shared<models::BertForMaskedLM>(bc);
  Safetensors st = as_input(ck, [&] { return load_safetensors(ck); });
  check_finite(st.tensors, ck);
  as_input(ck, [&] {
    models::load_hf_state(*m, st.tensors, ck);
    return 0;
  });
  m->eval();
  NoGradGuard ng;
  const InferOutput out = run_batch(seqs, [&](const Tensor& ids) {
    models::BertForMaskedLM::Output o = m->forward(ids);
    return InferOutput{o.mlm_logits, o.hidden_states};
  });
  if (fill_k > 0) print_fills(*tok, seqs, out.logits, fill_k);
  if (writes_logits(a)) write_infer(need(a, "output"), seqs, out, a.flags.count("hidden") > 0);
  return 0;
}

// Where --fill applies, for the error of a model it does not.
std::string fill_scope(const std::string& data_type) {
  return "--fill applies to masked-LM models with a WordPiece tokenizer (data.type wordpiece, or a HuggingFace "
         "BERT directory with its vocab.txt), not to data.type " + data_type;
}

// A task that labels rows (labelled): --input is a file of rows in the data's
// format, --output gets one prediction per row, one per line (label names,
// or numbers for regression), written atomically.
int infer_rows(const Args& a, Experiment& ex) {
  for (const char* flag : {"hidden", "lines", "text"})
    if (a.flags.count(flag))
      throw UsageError(std::string("--") + flag + " does not apply to data.type " + ex.cfg.data.type +
                       ", whose --input is a file of rows in the data's format");
  if (a.opts.count("fill")) throw UsageError(fill_scope(ex.cfg.data.type));
  const std::string input = need(a, "input");
  check_output(a);
  NoGradGuard ng;
  const std::vector<std::string> predictions = ex.task->predict_rows(ex, input);
  std::string text;
  for (const std::string& p : predictions) text += p + "\n";
  const std::string output = need(a, "output");
  write_output_file_atomic(output, text, "--output");
  std::fprintf(stderr, "wrote %s: %zu lines\n", output.c_str(), predictions.size());
  return 0;
}

int run_infer(const Args& a) {
  if (a.positional.size() == 1 && is_hf_config(a.positional[0])) return infer_hf(a);
  Config cfg;
  Experiment ex = load_for_inference(a, "infer", &cfg, nullptr, /*generation=*/false, /*reads_data=*/false);
  if (ex.task->predicts_rows()) return infer_rows(a, ex);
  const text::WordPieceTokenizer* wordpiece = ex.task->wordpiece();
  std::function<std::vector<int64_t>(const std::string&)> encode = wordpiece_encoder(wordpiece);
  if (const data::Vocab* v = ex.task->vocab()) encode = [v](const std::string& t) { return v->encode(t); };
  std::vector<std::vector<int64_t>> seqs = read_ids(a, ex.vocab_size(), encode);
  const int64_t fill_k = fill_count(a);
  if (fill_k > 0 && !wordpiece) throw UsageError(fill_scope(cfg.data.type));
  if (writes_logits(a)) check_output(a);
  if (auto bert = std::dynamic_pointer_cast<models::BertForMaskedLM>(ex.model))
    check_positions(seqs, bert->cfg.max_position_embeddings, "the position embeddings (model.max_len / data.seq_len)");
  {
    // The forward pass on this input's batch and length, as the config's estimate.
    Config shaped = cfg;
    shaped.data.eval_batch_size = int64_t(seqs.size());
    shaped.data.seq_len = longest(seqs);
    std::string source;
    const double budget = memory_budget(cfg, &source);
    if (!std::isinf(budget))
      check_estimate(estimate_memory(shaped, MemoryUse::inference), budget, source,
                     "infer on --input (" + std::to_string(seqs.size()) + " x " + std::to_string(longest(seqs)) +
                         " ids)");
  }
  NoGradGuard ng;
  const bool hidden = a.flags.count("hidden") > 0;
  if (hidden && !ex.model_def().has_hidden_states())
    throw UsageError("infer: --hidden is available for " +
                     join_or(model_types_where([](const Model& m) { return m.has_hidden_states(); })) +
                     " models, not " + cfg.model.type);
  const Device dev = ex.model->parameters().front().device();  // the config's device
  const InferOutput out = run_batch(seqs, [&](const Tensor& host_ids) {
    const Tensor ids = host_ids.to(dev);
    InferOutput o;
    if (ex.model_def().forward_hidden(ex.net, ids, &o.logits, &o.hidden)) return o;
    o.logits = ex.net.enc ? ex.net.enc->token_logits(ids, Tensor()) : ex.net.seq->run(ids, {}).logits;
    return o;
  });
  if (fill_k > 0) print_fills(*wordpiece, seqs, out.logits, fill_k);
  if (writes_logits(a)) write_infer(need(a, "output"), seqs, out, hidden);
  return 0;
}

}  // namespace

Command infer_command() {
  Command c;
  c.name = "infer";
  c.summary = "write a model's logits (and hidden states) for given ids";
  c.positional = "CONFIG";
  c.positional_help = "the JSON config, or a HuggingFace BERT directory's config.json (default: the checkpoint's own config, or the config.json beside it)";
  c.config = true;
  c.options = {{"checkpoint", "FILE", "the checkpoint or weights (required)", true},
               {"input", "FILE",
                "a file holding a JSON array of ids, an array of arrays, a JSON array of texts, or text (required)",
                true},
               {"output", "OUT.safetensors",
                "where to write the logits, or a labelled-data model's predictions (required unless --fill)"},
               {"fill", "K",
                "a WordPiece masked LM (a HuggingFace BERT with its vocab.txt, or a checkpoint of data.type "
                "wordpiece): print the K most likely tokens for each [MASK] of the text input"},
               {"lines", "", "a text --input holds one sequence per line (blank lines skipped)"},
               {"text", "", "--input is text even where it starts with [ or { (else it must be valid JSON)"},
               {"hidden", "", "also write the hidden states per layer"},
               {"force", "", "replace OUT.safetensors if it exists (never an input of the command)"}};
  c.details = R"(FILE holds a JSON array of token ids (one sequence), an array of arrays
(a batch), a JSON array of texts (a batch; ["the cat sat", "a dog ran"] for a
word-level model), or text that the model's vocabulary encodes: the whole file
as one sequence, or with --lines each non-empty line as one. A file that starts with [ or { must be one of those JSON arrays (malformed
JSON is an error); --text reads it as text instead. Writes "logits" [B, L, V], "lengths" [B] (each sequence's number of
tokens) and, with --hidden, "hidden.N" [B, L, d] (the input of layer N;
hidden.<n_layer> is the last layer's output). Sequences of equal length run as
one batch; otherwise each runs alone (no model sees padding) and its rows are
padded with zeros to the longest, L. OUT.safetensors is written atomically (a
temporary beside it, then renamed); an existing file is replaced only with
--force, and never when it is the config, the checkpoint or the input.

For a HuggingFace BERT directory (CONFIG its config.json) with a vocab.txt
(and tokenizer_config.json) beside it, --input may be text (a file of one
sentence, one sentence per line with --lines, or a JSON array of sentences),
encoded as [CLS] ... [SEP] like HF's BertTokenizer. --fill K then prints, for
every [MASK], one JSON line with the K most likely tokens and their
probabilities (remora infer DIR/config.json --checkpoint DIR/model.safetensors
--input sentences.txt --lines --fill 5).

A masked LM trained on WordPiece text (data.type wordpiece) keeps its
tokenizer in its checkpoint: --input may be text there too, and --fill K
prints the fills as above (remora infer --checkpoint run/best.safetensors
--input sentences.txt --lines --fill 5).

A model of data.type labelled (sequence classification or regression on
labelled text, docs/tasks.md) predicts rows instead: --input is a file in the
data's format (TSV, CSV or JSON Lines, from its extension or data.format; the
label field may be missing) and OUT gets one line per row, the predicted
label's name or, for regression, the predicted number.)";
  c.run = run_infer;
  return c;
}

}  // namespace driver
}  // namespace remora
