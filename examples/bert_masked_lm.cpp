// SPDX-License-Identifier: BSD-3-Clause
// A HuggingFace BERT directory (config.json + model.safetensors, as
// save_pretrained writes it) loaded and used for masked-token prediction.
//
//   bert_masked_lm HF_DIR [EXPECTED.safetensors] [SAVE_DIR]
//
// The fixture in tests/data/hf_bert_tiny is a tiny randomly initialised
// BertForPreTraining saved by HF transformers (vocabulary of 30 ids, no
// tokenizer), with its logits on two sequences in hf_bert_tiny_expected.safetensors.
// The program masks one token per sequence, predicts it, and exits non-zero
// unless: the logits equal those HF computed (when EXPECTED is given); the
// predicted token is the argmax of the softmax over the vocabulary; and the model
// saved to SAVE_DIR with Remora's HF writer loads back with identical weights and
// the same predictions.
#include <remora/remora.h>

#include <cstdio>
#include <string>

using namespace remora;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s HF_DIR [EXPECTED.safetensors] [SAVE_DIR]\n", argv[0]);
    return 2;
  }
  int failures = 0;
  auto fail = [&](const std::string& what) {
    std::fprintf(stderr, "FAIL: %s\n", what.c_str());
    ++failures;
  };

  auto bert = models::load_hf_directory(argv[1]);
  bert->eval();  // no dropout
  std::printf("loaded %s: %lld layers, hidden %lld, vocabulary %lld\n", argv[1],
              static_cast<long long>(bert->cfg.num_hidden_layers), static_cast<long long>(bert->cfg.hidden_size),
              static_cast<long long>(bert->cfg.vocab_size));

  Tensor ids = Tensor::from_vector(std::vector<int64_t>{3, 22, 2, 7, 16, 10, 13, 9, 27,  //
                                                        12, 22, 5, 8, 29, 5, 25, 3, 16},
                                   {2, 9});
  NoGradGuard no_grad;

  // 1. The same numbers as HF transformers on the unmasked input.
  if (argc >= 3) {
    const Safetensors expected = load_safetensors(argv[2]);
    ids = expected.get("input_ids");
    Tensor logits = bert->forward(ids).mlm_logits;
    const double err = (logits - expected.get("mlm_logits")).abs().max().item();
    std::printf("max |remora - HF| over the logits: %.2e\n", err);
    if (!(err < 1e-4)) fail("the logits differ from HF's");
  }

  // 2. Mask position 4 of each sequence and predict it. Without a tokenizer the
  //    "[MASK]" id is a stand-in: id 1.
  const int64_t mask_id = 1, pos = 4;
  Tensor masked = ids.clone();
  for (int64_t b = 0; b < masked.size(0); ++b) masked.select(0, b).narrow(0, pos, 1).fill_(double(mask_id));
  Tensor attention_mask = Tensor::ones(masked.shape(), DType::i64);
  auto predict = [&](const models::BertForMaskedLM& m) {
    Tensor logits = m.forward(masked, attention_mask).mlm_logits.select(1, pos);  // [B, V]
    return std::make_pair(argmax(logits, -1), softmax(logits, -1));
  };
  auto [pred, probs] = predict(*bert);
  for (int64_t b = 0; b < masked.size(0); ++b) {
    const int64_t p = pred.to_i64_vector()[size_t(b)];
    const std::vector<double> pr = probs.select(0, b).to_vector();
    size_t best = 0;
    for (size_t v = 1; v < pr.size(); ++v)
      if (pr[v] > pr[best]) best = v;
    std::printf("sequence %lld: predicted id %lld (p = %.3f) for the masked id %lld\n", static_cast<long long>(b),
                static_cast<long long>(p), pr[size_t(p)], static_cast<long long>(ids.at({b, pos})));
    if (size_t(p) != best) fail("the prediction is not the argmax of the probabilities");
  }

  // 3. Save with Remora's HF writer, load back: identical weights and predictions.
  if (argc >= 4) {
    models::save_hf_directory(*bert, argv[3]);
    auto back = models::load_hf_directory(argv[3]);
    back->eval();
    auto a = bert->named_parameters(), c = back->named_parameters();
    if (a.keys() != c.keys()) fail("the reloaded model has other parameter names");
    for (const auto& item : a) {
      const Tensor* other = c.find(item.key());
      if (!other || (item.value() - *other).abs().max().item() != 0.0)
        fail("parameter " + item.key() + " changed in the save / load round trip");
    }
    auto [pred2, probs2] = predict(*back);
    if (pred2.to_i64_vector() != pred.to_i64_vector()) fail("the reloaded model predicts other tokens");
    std::printf("saved to %s and reloaded: identical weights and predictions\n", argv[3]);
  }
  if (failures) return 1;
  std::printf("OK\n");
  return 0;
}
