// SPDX-License-Identifier: BSD-3-Clause
// `remora eval` and `remora generate`: a checkpoint's metrics on a split,
// and sampling text from a causal language model.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>

#include "../../core/autograd.h"
#include "../../core/generator.h"
#include "../../core/safetensors.h"
#include "../../models/bert.h"
#include "../../ops/ops.h"
#include "common.h"

namespace remora {
namespace driver {
namespace {

int run_eval(const Args& a) {
  Config cfg;
  Experiment ex = load_for_inference(a, "eval", &cfg);
  const std::string split = a.opts.count("split") ? a.opts.at("split") : "valid";
  if (split != "valid" && split != "test") throw UsageError("--split must be valid or test, got " + split);
  const auto t0 = std::chrono::steady_clock::now();
  Metrics m = ex.evaluate(split, 0);
  json j = ex.metrics_json(m);
  j["split"] = split;
  j["tokens"] = m.tokens;
  j["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%s\n", j.dump().c_str());
  return 0;
}

int run_generate(const Args& a) {
  Config cfg;
  Experiment ex = load_for_inference(
      a, "generate", &cfg,
      [](Config& cfg) {
        if (cfg.task != "lm")
          throw UsageError("generate: needs a causal language-model config (data.type char, bytes or words; model.type "
                           "transformer_xl, srupp, rnn, lstm, relrnn or rellstm), got " + cfg.model.type);
      },
      /*generation=*/true,  // the model keeps at least one segment of memory
      /*reads_data=*/false);
  const std::string prompt = need(a, "prompt");
  const int64_t n = to_int("tokens", need(a, "tokens"), 0, 1 << 24);
  const double temp = a.opts.count("temperature") ? to_double("temperature", a.opts.at("temperature"), 0, 100) : 1.0;
  const int64_t top_k = a.opts.count("top-k") ? to_int("top-k", a.opts.at("top-k"), 0, 1 << 24) : 0;
  const double top_p = a.opts.count("top-p") ? to_double("top-p", a.opts.at("top-p"), 0, 1) : 1.0;
  const double penalty =
      a.opts.count("repetition-penalty") ? to_double("repetition-penalty", a.opts.at("repetition-penalty"), 1, 100) : 1.0;
  const int64_t seed = a.opts.count("seed") ? to_int("seed", a.opts.at("seed"), 0, INT64_MAX) : 0;
  if (prompt.empty()) throw UsageError("--prompt must not be empty");
  if (top_p <= 0) throw UsageError("--top-p must be in (0, 1], got " + a.opts.at("top-p"));
  NoGradGuard ng;
  Generator g{uint64_t(seed)};
  const data::Vocab& v = *ex.task->vocab();
  std::vector<int64_t> ids = v.encode(prompt);
  if (ids.empty())
    throw UsageError("--prompt has no token of the vocabulary (a word-level prompt needs at least one word)");
  // Token by token with the carried state, except for the models whose
  // attention memory restarts every segment (the relevancy-screening cells,
  // causal StarSaber): they re-read the last seq_len tokens at every step.
  const bool rerun = ex.model_def().generation_rereads_window();
  Experiment::State st;
  const Device dv = ex.model->parameters().front().device();  // the config's device
  models::SequenceOutput out = ex.net.seq->run(Tensor::from_vector(ids, {1, int64_t(ids.size())}).to(dv), st);
  std::string text = prompt;
  std::vector<char> seen;  // the tokens so far, for the repetition penalty
  if (penalty != 1) {
    seen.assign(size_t(v.size()), 0);
    for (int64_t t : ids) seen[size_t(t)] = 1;
  }
  for (int64_t i = 0; i < n; ++i) {
    Tensor last = out.logits.select(1, -1).reshape({-1}).to(DType::f64);  // [V]
    std::vector<double> lg = last.to_vector();
    // Repetition penalty (Keskar et al. 2019, as HF transformers): the logit of
    // a token already in the text is divided by the penalty when positive and
    // multiplied by it when negative.
    if (penalty != 1)
      for (size_t k = 0; k < lg.size() && k < seen.size(); ++k)
        if (seen[k]) lg[k] = lg[k] > 0 ? lg[k] / penalty : lg[k] * penalty;
    int64_t next = 0;
    if (temp == 0) {
      next = int64_t(std::max_element(lg.begin(), lg.end()) - lg.begin());
    } else {
      std::vector<double> sorted = lg;
      double cut = -INFINITY;
      if (top_k > 0 && top_k < int64_t(lg.size())) {
        std::nth_element(sorted.begin(), sorted.begin() + (top_k - 1), sorted.end(), std::greater<double>());
        cut = sorted[size_t(top_k - 1)];
      }
      const double mx = *std::max_element(lg.begin(), lg.end());
      std::vector<double> p(lg.size());
      double z = 0;
      for (size_t k = 0; k < lg.size(); ++k) {
        p[k] = lg[k] >= cut ? std::exp((lg[k] - mx) / temp) : 0;
        z += p[k];
      }
      if (top_p < 1) {
        // Nucleus sampling: the most likely tokens whose probabilities (after
        // temperature and top-k) first reach top_p; the rest get zero.
        std::vector<size_t> order(lg.size());
        for (size_t k = 0; k < order.size(); ++k) order[k] = k;
        std::sort(order.begin(), order.end(), [&](size_t x, size_t y) { return p[x] > p[y] || (p[x] == p[y] && x < y); });
        double acc = 0, kept = 0;
        size_t k = 0;
        for (; k < order.size(); ++k) {
          if (acc >= top_p * z) break;
          acc += p[order[k]];
          kept += p[order[k]];
        }
        for (; k < order.size(); ++k) p[order[k]] = 0;
        z = kept;
      }
      double u = Tensor::rand({1}, DType::f64, Device::cpu(), &g).item() * z;
      next = int64_t(lg.size()) - 1;
      for (size_t k = 0; k < lg.size(); ++k) {
        u -= p[k];
        if (u < 0) {
          next = int64_t(k);
          break;
        }
      }
      // Rounding can leave u >= 0 after the last kept token: take the last token with mass.
      if (u >= 0)
        for (size_t k = lg.size(); k-- > 0;)
          if (p[k] > 0) {
            next = int64_t(k);
            break;
          }
    }
    if (penalty != 1) seen[size_t(next)] = 1;
    text += v.continuation(text, next, "?");
    ids.push_back(next);
    if (rerun) {
      const size_t w = std::min(ids.size(), size_t(cfg.data.seq_len));
      std::vector<int64_t> window(ids.end() - std::ptrdiff_t(w), ids.end());
      out = ex.net.seq->run(Tensor::from_vector(window, {1, int64_t(w)}).to(dv), {});
    } else {
      st = out.state;
      out = ex.net.seq->run(Tensor::from_vector(std::vector<int64_t>{next}, {1, 1}).to(dv), st);
    }
  }
  std::printf("%s\n", text.c_str());
  return 0;
}

}  // namespace

Command eval_command() {
  Command c;
  c.name = "eval";
  c.summary = "evaluate a checkpoint on the whole valid or test split";
  c.positional = "CONFIG";
  c.positional_help = "the JSON config the checkpoint was trained with (default: the checkpoint's own, or the config.json beside it)";
  c.config = true;
  c.options = {{"checkpoint", "FILE", "the checkpoint (or bare weights) to evaluate (required)", true},
               {"split", "valid|test", "the split (default valid)"}};
  c.details = R"(Evaluates a checkpoint on the whole split: loss and bits per character for
language models, accuracy (in-distribution and per length bin) for the regular
languages. Prints one JSON line.

FILE (here and for generate / infer) is a checkpoint that `remora train`
wrote, or bare weights: a safetensors file of the model's tensors under the
official names without Remora checkpoint metadata (e.g. a PyTorch state dict,
see tools/goldens/checkpoint_interop.py); its vocabulary is the config's data's.)";
  c.run = run_eval;
  return c;
}

Command generate_command() {
  Command c;
  c.name = "generate";
  c.summary = "sample text from a causal language model";
  c.positional = "CONFIG";
  c.positional_help = "the JSON config the checkpoint was trained with (default: the checkpoint's own, or the config.json beside it)";
  c.config = true;
  c.options = {{"checkpoint", "FILE", "the checkpoint (required)", true},
               {"prompt", "TEXT", "the text to continue (required)", true},
               {"tokens", "N", "how many tokens to sample (required)", true},
               {"temperature", "T", "sampling temperature, 0 = greedy (default 1)"},
               {"top-k", "K", "sample among the K most likely tokens, 0 = all (default 0)"},
               {"top-p", "P", "sample among the most likely tokens whose probabilities first reach P (default 1)"},
               {"repetition-penalty", "R",
                "divide a positive logit (multiply a negative one) of a token already in the text by R >= 1 "
                "(default 1)"},
               {"seed", "S", "the sampling seed (default 0)"}};
  c.details = R"(Samples N tokens after the prompt (temperature 1, no top-k, no top-p, no
repetition penalty, seed 0 by default) and prints the prompt followed by the
sample. The prompt is text of the checkpoint's vocabulary: characters or bytes,
or words (data.type words: split on whitespace, a line break is <eos>; the
words are printed separated by spaces). The model reads the prompt once and
then one token per step, carrying its memory (Transformer-XL, SRU++,
recurrent cells) instead of re-reading the prefix.)";
  c.run = run_generate;
  return c;
}

}  // namespace driver
}  // namespace remora
