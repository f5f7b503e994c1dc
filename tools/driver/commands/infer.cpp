// `remora infer`: logits (and hidden states) of a checkpoint, or of a
// HuggingFace BERT directory, on given token ids, written as safetensors.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iterator>
#include <sstream>

#include "../../../core/autograd.h"
#include "../../../core/generator.h"
#include "../../../core/safetensors.h"
#include "../../../models/bert.h"
#include "../../../ops/ops.h"
#include "../input_checks.h"
#include "common.h"

namespace remora {
namespace driver {
namespace {

// Token ids from --input: a JSON array (one sequence), an array of equally
// long arrays (a batch), or a text file encoded with `encode` (when given).
std::vector<std::vector<int64_t>> read_ids(const std::string& input, int64_t vocab,
                                           const std::function<std::vector<int64_t>(const std::string&)>& encode) {
  std::ifstream f(input);
  if (!f.good()) throw InputError("--input " + input + ": cannot open file");
  std::stringstream ss;
  ss << f.rdbuf();
  return parse_ids(ss.str(), input, vocab, encode);  // input_checks.cpp (fuzzed: tests/fuzz)
}

Tensor batch_of(const std::vector<std::vector<int64_t>>& seqs) {
  std::vector<int64_t> flat;
  for (auto& s : seqs) flat.insert(flat.end(), s.begin(), s.end());
  return Tensor::from_vector(flat, {int64_t(seqs.size()), int64_t(seqs[0].size())});
}

void write_infer(const std::string& output, const Tensor& logits, const std::vector<Tensor>& hidden, bool with_hidden) {
  std::vector<std::pair<std::string, Tensor>> t{{"logits", logits}};
  if (with_hidden)
    for (size_t l = 0; l < hidden.size(); ++l) t.emplace_back("hidden." + std::to_string(l), hidden[l]);
  try {
    save_safetensors(output, t, {{"format", "remora-infer"}});
  } catch (const Error& e) {
    throw InputError(std::string("--output: ") + e.what());
  }
  std::fprintf(stderr, "wrote %s: logits %s\n", output.c_str(), shape_str(logits.shape()).c_str());
}

// A HuggingFace BertConfig (config.json of a HF directory) rather than a Remora config.
bool is_hf_config(const std::string& path) {
  std::ifstream f(path);
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
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
  std::ifstream f(cpath);
  json j = json::parse(f);
  models::BertConfig bc = as_input(cpath, [&] { return models::BertConfig::from_hf_json(j, cpath); });
  auto m = std::make_shared<models::BertForMaskedLM>(bc);
  Safetensors st = as_input(ck, [&] { return load_safetensors(ck); });
  check_finite(st.tensors, ck);
  as_input(ck, [&] {
    models::load_hf_state(*m, st.tensors, ck);
    return 0;
  });
  m->eval();
  std::vector<std::vector<int64_t>> seqs = read_ids(need(a, "input"), bc.vocab_size, nullptr);
  NoGradGuard ng;
  models::BertForMaskedLM::Output out = m->forward(batch_of(seqs));
  write_infer(need(a, "output"), out.mlm_logits, out.hidden_states, a.flags.count("hidden") > 0);
  return 0;
}

int run_infer(const Args& a) {
  if (a.positional.size() == 1 && is_hf_config(a.positional[0])) return infer_hf(a);
  Config cfg;
  Experiment ex = load_for_inference(a, "infer", &cfg);
  std::function<std::vector<int64_t>(const std::string&)> encode;
  if (const data::Vocab* v = ex.task->vocab()) encode = [v](const std::string& t) { return v->encode(t); };
  std::vector<std::vector<int64_t>> seqs = read_ids(need(a, "input"), ex.vocab_size(), encode);
  NoGradGuard ng;
  const bool hidden = a.flags.count("hidden") > 0;
  const Tensor ids = batch_of(seqs).to(ex.model->parameters().front().device());  // the config's device
  Tensor logits;
  std::vector<Tensor> states;
  if (ex.model_def().forward_hidden(ex.net, ids, &logits, &states)) {
    write_infer(need(a, "output"), logits, states, hidden);
  } else if (hidden) {
    throw UsageError("infer: --hidden is available for " +
                     join_or(model_types_where([](const Model& m) { return m.has_hidden_states(); })) +
                     " models, not " + cfg.model.type);
  } else if (ex.net.enc) {
    write_infer(need(a, "output"), ex.net.enc->token_logits(ids, Tensor()), {}, false);
  } else {
    write_infer(need(a, "output"), ex.net.seq->run(ids, {}).logits, {}, false);
  }
  return 0;
}

}  // namespace

Command infer_command() {
  Command c;
  c.name = "infer";
  c.summary = "write a model's logits (and hidden states) for given ids";
  c.positional = "CONFIG";
  c.positional_help = "the JSON config, or a HuggingFace BERT directory's config.json";
  c.config = true;
  c.options = {{"checkpoint", "FILE", "the checkpoint or weights (required)", true},
               {"input", "IDS", "a JSON array of ids, an array of arrays, or a text file (required)", true},
               {"output", "OUT.safetensors", "where to write the logits (required)", true},
               {"hidden", "", "also write the hidden states per layer"}};
  c.details = R"(IDS is a JSON array of token ids (one sequence), an array of equally long
arrays (a batch), or a path to a text file that the config's vocabulary
encodes. Writes "logits" [B, L, V] and, with --hidden, "hidden.N" [B, L, d]
(the input of layer N; hidden.<n_layer> is the last layer's output).)";
  c.run = run_infer;
  return c;
}

}  // namespace driver
}  // namespace remora
