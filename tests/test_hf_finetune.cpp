// SPDX-License-Identifier: BSD-3-Clause
// Fine-tuning parity with HuggingFace transformers: a folder written by
// BertForSequenceClassification.save_pretrained (random weights) gives the
// same class logits at step 0 and, trained 20 steps with AdamW on the same
// batches (dropout off), the same losses; with REM heads added through a
// closed gate the step-0 logits do not change. Goldens:
// tools/goldens/make_hf_finetune_goldens.py.
#include <catch2/catch.hpp>
#include <remora/remora.h>

#include <fstream>
#include <sstream>

#include "models/bert.h"

using namespace remora;

namespace {

const std::string kDir = std::string(REMORA_TEST_DATA) + "/hf_bert_cls_tiny";

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// The folder's model as BertForMaskedLM with a two-class head, its weights by
// their HF names (no MLM head in a sequence-classification folder: left as built).
std::shared_ptr<models::BertForMaskedLM> load_classifier(models::BertConfig c) {
  c.num_classes = 2;
  auto m = std::make_shared<models::BertForMaskedLM>(c);
  nn::NamedTensors mapped;
  for (auto& kv : load_safetensors(kDir + "/model.safetensors").tensors) {
    const std::string name = models::canonical_hf_name(kv.first);
    if (!name.empty()) mapped.emplace_back(name, kv.second);
  }
  REQUIRE(mapped.size() == 41);  // embeddings 5, 2 layers of 16, pooler 2, classifier 2
  m->load_state_dict(mapped, /*strict=*/false);
  return m;
}

models::BertConfig folder_config() { return models::BertConfig::from_hf_config(read_text(kDir + "/config.json")); }

}  // namespace

TEST_CASE("hf fine-tuning: step-0 logits and 20 AdamW steps follow BertForSequenceClassification", "[hf][bert]") {
  const Safetensors g = load_safetensors(std::string(REMORA_TEST_DATA) + "/hf_bert_cls_tiny_golden.safetensors");
  auto m = load_classifier(folder_config());
  m->train();  // dropout 0 in the folder's config
  {
    NoGradGuard ng;
    const Tensor logits = m->forward(g.get("eval_ids"), g.get("eval_mask")).class_logits;
    const double err = max(abs(sub(logits.to(DType::f64), g.get("logits0")))).item();
    INFO("step-0 logits max |difference| " << err);
    CHECK(err < 1e-5);
  }
  optim::AdamW opt(m->parameters(), 1e-3, 0.9, 0.999, 1e-8, 0.01);
  const std::vector<double> want = g.get("losses").to_vector();
  const Tensor ids = g.get("ids"), mask = g.get("mask"), labels = g.get("labels");
  double worst = 0;
  for (int64_t s = 0; s < int64_t(want.size()); ++s) {
    opt.zero_grad();
    const Tensor logits = m->forward(ids.select(0, s), mask.select(0, s)).class_logits;
    const Tensor loss = cross_entropy(logits, labels.select(0, s));
    loss.backward();
    opt.step();
    worst = std::max(worst, std::abs(loss.item() - want[size_t(s)]));
  }
  INFO("20 steps: the losses' max |difference| " << worst);
  CHECK(worst < 1e-4);
}

TEST_CASE("hf fine-tuning: REM heads added through a closed gate leave the step-0 logits unchanged",
          "[hf][bert][init_from]") {
  const Safetensors g = load_safetensors(std::string(REMORA_TEST_DATA) + "/hf_bert_cls_tiny_golden.safetensors");
  auto softmax = load_classifier(folder_config());
  models::BertConfig c = folder_config();
  c.attention = "rsa";
  c.rem.regular = 1;
  c.rem.cyclic = 0;
  c.rem.masked = false;
  c.rem_init.closed_gate = true;
  auto rsa = load_classifier(c);
  NoGradGuard ng;
  const Tensor a = softmax->forward(g.get("eval_ids"), g.get("eval_mask")).class_logits;
  const Tensor b = rsa->forward(g.get("eval_ids"), g.get("eval_mask")).class_logits;
  const double err = max(abs(sub(a, b))).item();
  INFO("max |difference| " << err);
  CHECK(err <= 1e-6);
}
