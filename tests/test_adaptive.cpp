// SPDX-License-Identifier: BSD-3-Clause
// Adaptive input and adaptive softmax (nn/adaptive.h, ops/adaptive_softmax.h)
// against the official Transformer-XL modules (tools/goldens/make_adaptive_goldens.py),
// in float64: outputs, log-probabilities and the gradients of every parameter.
#include <catch2/catch.hpp>

#include <set>

#include <remora/remora.h>

#include "helpers.h"
#include "nn_golden.h"

using namespace remora;

namespace {
const Safetensors& golden() {
  return remora_test::golden_file("adaptive_golden.safetensors", "remora-golden-adaptive",
                                  "tools/goldens/make_adaptive_goldens.py");
}
const Tensor& g(const std::string& name) { return golden().get(name); }

struct Case {
  const char* name;
  nn::AdaptiveOptions o;
  bool tie_weight;
  std::vector<bool> tie_projs;
};
const Case kCases[] = {
    {"div4_tied", {50, 16, 12, {10, 20, 35}, 2}, true, {false, true, true, true}},
    {"div1_proj", {30, 8, 12, {10, 20}, 1}, false, {false, false, false}},
    {"div1_tied", {30, 8, 12, {10, 20}, 1}, true, {false, true, true}},
};

// word_emb + crit, named as in MemTransformerLM.
struct Model : nn::Module {
  std::string type_name() const override { return "AdaptiveModel"; }
  std::shared_ptr<nn::AdaptiveEmbedding> word_emb;
  std::shared_ptr<nn::ProjectedAdaptiveLogSoftmax> crit;
  explicit Model(const Case& c) {
    word_emb = register_module("word_emb", std::make_shared<nn::AdaptiveEmbedding>(c.o, DType::f64));
    crit = register_module("crit", std::make_shared<nn::ProjectedAdaptiveLogSoftmax>(
                                       c.o, DType::f64, nullptr, word_emb.get(), c.tie_weight, c.tie_projs));
  }
};
}  // namespace

TEST_CASE("adaptive softmax and embedding match the official Transformer-XL modules", "[adaptive]") {
  for (const Case& c : kCases) {
    INFO(c.name);
    const std::string p = std::string(c.name) + ".";
    Model m(c);
    nn::NamedTensors state;
    for (const auto& kv : golden().tensors)
      if (kv.first.compare(0, p.size(), p) == 0 && (kv.first.find(".word_emb.") != std::string::npos ||
                                                    kv.first.find(".crit.") != std::string::npos) &&
          kv.first.compare(p.size(), 5, "grad.") != 0)
        state.emplace_back(kv.first.substr(p.size()), kv.second);
    // The official state dict names a tied tensor twice (crit.out_layers.i.weight,
    // crit.out_projs.i beside word_emb's); Remora registers it once, in word_emb.
    std::set<std::string> ours;
    for (const auto& kv : m.named_parameters()) ours.insert(kv.first);
    nn::NamedTensors kept;
    for (const auto& kv : state) {
      if (ours.count(kv.first)) kept.push_back(kv);
      else CHECK((kv.first.rfind("crit.out_layers.", 0) == 0 ? c.tie_weight : kv.first.rfind("crit.out_projs.", 0) == 0));
    }
    m.load_state_dict(kept);  // strict: every Remora parameter has its official name
    const Tensor hidden = g(p + "hidden").detach().clone().requires_grad_();
    const Tensor nll = m.crit->nll(hidden, g(p + "target"));
    nn_test::check_close(nll, g(p + "nll"), 1e-12, p + "nll");
    const Tensor e = m.word_emb->forward(g(p + "ids"));
    nn_test::check_close(e, g(p + "embed"), 1e-12, p + "embed");
    {
      NoGradGuard ng;
      nn_test::check_close(m.crit->log_prob(hidden), g(p + "log_prob"), 1e-12, p + "log_prob");
    }
    const Tensor w = Tensor::arange(-1, 1 + 1e-9, 2.0 / double(e.numel() - 1), DType::f64).reshape(e.shape());
    add(nll.sum(), (e * w).sum()).backward();
    nn_test::check_close(hidden.grad(), g(p + "grad.hidden"), 1e-12, p + "grad.hidden");
    for (const auto& kv : m.named_parameters()) nn_test::check_close(kv.second.grad(), g(p + "grad." + kv.first), 1e-12, p + "grad." + kv.first);
  }
}

TEST_CASE("adaptive softmax: log_prob rows are distributions, nll picks from them; bad input", "[adaptive]") {
  nn::AdaptiveOptions o{40, 8, 8, {5, 15}, 1};
  Generator gen(3);
  nn::ProjectedAdaptiveLogSoftmax crit(o, DType::f64, &gen);
  const Tensor h = Tensor::randn({6, 8}, DType::f64, Device::cpu(), &gen);
  const Tensor lp = crit.log_prob(h);
  const std::vector<double> sums = lp.exp().sum({1}).to_vector();
  for (double s : sums) CHECK(s == Approx(1).epsilon(1e-12));
  const Tensor t = Tensor::from_vector(std::vector<int64_t>{0, 4, 5, 14, 15, 39});
  const std::vector<double> nll = crit.nll(h, t).to_vector(), all = lp.to_vector();
  for (int r = 0; r < 6; ++r) CHECK(-nll[r] == Approx(all[r * 40 + t.to_vector()[r]]).epsilon(1e-12));
  CHECK_THROWS_WITH(crit.nll(h, Tensor::from_vector(std::vector<int64_t>{0, 1, 2, 3, 4, 40})),
                    Catch::Contains("target 40 is outside [0, 40)"));
  CHECK_THROWS_WITH(nn::AdaptiveEmbedding(nn::AdaptiveOptions{10, 8, 8, {5, 4}, 1}), Catch::Contains("increase"));
  CHECK_THROWS_WITH(nn::AdaptiveEmbedding(nn::AdaptiveOptions{10, 2, 8, {3, 6}, 4}), Catch::Contains("no width"));
}
