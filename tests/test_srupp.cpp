// SPDX-License-Identifier: BSD-3-Clause
// SRU recurrence and SRU++ (docs/math.md#the-sru-elementwise-recurrence): the fused op against its composite
// reference and the PyTorch goldens (tools/goldens/make_srupp_goldens.py), its float64
// gradient checks and errors; the SRU++ language model against the PyTorch
// reference over 3 segments with memory (logits, loss, memories, cells, every
// parameter gradient) in float64 (1e-9) and float32 (1e-4).
#include <catch2/catch.hpp>
#include <remora/remora.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "../models/srupp.h"
#include "../ops/sru.h"
#include "model_golden.h"

using namespace remora;
using model_test::check_close;
using models::SRUppConfig;
using models::SRUppLM;
using models::SequenceOutput;
using models::SequenceState;

namespace {

const Safetensors& op_golden() {
  return model_test::golden_file("srupp_op.safetensors", "remora-golden-srupp-op",
                                 "tools/goldens/make_srupp_goldens.py");
}
const Safetensors& model_golden() {
  return model_test::golden_file("srupp_model.safetensors", "remora-golden-srupp",
                                 "tools/goldens/make_srupp_goldens.py");
}

Tensor opt_get(const Safetensors& st, const std::string& name, DType dt) {
  auto it = st.tensors.end();
  for (auto i = st.tensors.begin(); i != st.tensors.end(); ++i)
    if (i->first == name) it = i;
  return it == st.tensors.end() ? Tensor() : it->second.to(dt).detach().clone();
}

using SruFn = SruOutput (*)(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                            const Tensor&, const Tensor&, bool);

struct OpRun {
  SruOutput out;
  std::vector<Tensor> grads;  // U, x, v, b, c0 (undefined where not an input)
};

// Runs f on leaves copied from `in` and backpropagates sum(h ph) + sum(c pc) + sum(last pl).
OpRun run_op(SruFn f, const std::vector<Tensor>& in, const Tensor& mask, bool bidir,
             const Tensor& ph, const Tensor& pc, const Tensor& pl) {
  std::vector<Tensor> leaves;
  for (const Tensor& t : in)
    leaves.push_back(t.defined() ? t.detach().clone().requires_grad_() : Tensor());
  OpRun r;
  r.out = f(leaves[0], leaves[1], leaves[2], leaves[3], leaves[4], mask, bidir);
  Tensor loss = add(add(sum(mul(r.out.h, ph)), sum(mul(r.out.c, pc))), sum(mul(r.out.c_last, pl)));
  loss.backward();
  for (const Tensor& t : leaves) r.grads.push_back(t.defined() ? t.grad() : Tensor());
  return r;
}

const char* kInputNames[] = {"U", "x", "v", "b", "c0"};

// Random inputs for the fast path vs reference comparisons.
struct Case {
  int64_t L, B, D, k;
  bool bidir, c0, mask;
};

std::vector<Tensor> random_inputs(const Case& c, DType dt, Generator& g, Tensor* mask, Tensor* ph,
                                  Tensor* pc, Tensor* pl) {
  std::vector<Tensor> in{Tensor::randn({c.L, c.B, c.D, c.k}, dt, Device::cpu(), &g),
                         c.k == 3 ? Tensor::randn({c.L, c.B, c.D}, dt, Device::cpu(), &g) : Tensor(),
                         Tensor::rand({2, c.D}, dt, Device::cpu(), &g) * 2.0 - 1.0,
                         Tensor::rand({2, c.D}, dt, Device::cpu(), &g) * 2.0 - 1.0,
                         c.c0 ? Tensor::randn({c.B, c.D}, dt, Device::cpu(), &g) : Tensor()};
  *mask = c.mask ? dropout(Tensor::ones({c.B, c.D}, dt), 0.3, true, &g) : Tensor();
  *ph = Tensor::randn({c.L, c.B, c.D}, dt, Device::cpu(), &g);
  *pc = Tensor::randn({c.L, c.B, c.D}, dt, Device::cpu(), &g);
  *pl = Tensor::randn({c.B, c.D}, dt, Device::cpu(), &g);
  return in;
}

}  // namespace

// ---- the op ----

TEST_CASE("sru_recurrence matches the PyTorch reference (forward and every gradient)", "[sru][golden]") {
  for (const char* key : {"a", "b", "c"}) {
    const nlohmann::json cfg =
        nlohmann::json::parse(op_golden().metadata.at(std::string("op_") + key + ".config"));
    for (DType dt : {DType::f64, DType::f32}) {
      const double rtol = dt == DType::f64 ? 1e-10 : 1e-4, atol = dt == DType::f64 ? 1e-12 : 1e-5;
      const std::string p = std::string("op_") + key + ".";
      INFO(p << dtype_name(dt));
      std::vector<Tensor> in;
      for (const char* n : kInputNames) in.push_back(opt_get(op_golden(), p + n, dt));
      OpRun r = run_op(&sru_recurrence, in, opt_get(op_golden(), p + "mask", dt),
                       cfg["bidirectional"], opt_get(op_golden(), p + "probe_h", dt),
                       opt_get(op_golden(), p + "probe_c", dt),
                       opt_get(op_golden(), p + "probe_last", dt));
      check_close(r.out.h, op_golden().get(p + "h"), rtol, atol, p + "h");
      check_close(r.out.c, op_golden().get(p + "c"), rtol, atol, p + "c");
      check_close(r.out.c_last, op_golden().get(p + "c_last"), rtol, atol, p + "c_last");
      for (size_t i = 0; i < 5; ++i) {
        if (!in[i].defined()) continue;
        check_close(r.grads[i], op_golden().get(p + "grad." + kInputNames[i]), rtol, atol,
                    p + "grad." + kInputNames[i]);
      }
    }
  }
}

TEST_CASE("sru_recurrence fast path matches the composed reference", "[sru]") {
  // D = 150: one chunk (chunks are 256 units); bidirectional halves of 75.
  const std::vector<Case> cases = {
      {7, 3, 5, 3, false, false, false}, {6, 2, 8, 3, false, true, true},
      {5, 3, 6, 4, true, true, true},    {9, 2, 150, 3, true, true, true},
      {4, 3, 150, 4, false, true, false}, {1, 1, 2, 3, true, false, true},
      // More than one chunk of 256 units per direction (the last one ragged),
      // and enough tasks to split over the threads mid-row.
      {5, 3, 600, 3, true, true, true},   {4, 5, 530, 4, false, true, true},
  };
  for (DType dt : {DType::f64, DType::f32}) {
    const double rtol = dt == DType::f64 ? 1e-11 : 2e-4, atol = dt == DType::f64 ? 1e-12 : 1e-5;
    for (size_t ci = 0; ci < cases.size(); ++ci) {
      const Case& c = cases[ci];
      INFO("case " << ci << " " << dtype_name(dt) << " L=" << c.L << " B=" << c.B << " D=" << c.D
                   << " k=" << c.k << " bidir=" << c.bidir << " c0=" << c.c0 << " mask=" << c.mask);
      Generator g(40 + ci);
      Tensor mask, ph, pc, pl;
      std::vector<Tensor> in = random_inputs(c, dt, g, &mask, &ph, &pc, &pl);
      OpRun fast = run_op(&sru_recurrence, in, mask, c.bidir, ph, pc, pl);
      OpRun ref = run_op(&sru_recurrence_reference, in, mask, c.bidir, ph, pc, pl);
      check_close(fast.out.h, ref.out.h, rtol, atol, "h");
      check_close(fast.out.c, ref.out.c, rtol, atol, "c");
      check_close(fast.out.c_last, ref.out.c_last, rtol, atol, "c_last");
      for (size_t i = 0; i < 5; ++i) {
        if (!in[i].defined()) continue;
        check_close(fast.grads[i], ref.grads[i], rtol, atol, std::string("grad ") + kInputNames[i]);
      }
    }
  }
}

TEST_CASE("sru_recurrence: a dropped lane passes x' through; no grad without inputs needing it", "[sru]") {
  Generator g(5);
  Tensor U = Tensor::randn({3, 1, 2, 3}, DType::f64, Device::cpu(), &g);
  Tensor x = Tensor::randn({3, 1, 2}, DType::f64, Device::cpu(), &g);
  Tensor v = Tensor::zeros({2, 2}, DType::f64), b = Tensor::zeros({2, 2}, DType::f64);
  Tensor mask = Tensor::from_vector(std::vector<double>{0.0, 2.0}, {1, 2}, DType::f64);
  SruOutput o = sru_recurrence(U, x, v, b, Tensor(), mask);
  for (int64_t t = 0; t < 3; ++t) CHECK(o.h.at({t, 0, 0}) == x.at({t, 0, 0}));
  CHECK_FALSE(o.h.requires_grad());
  // Zero steps: c_last is c0.
  Tensor c0 = Tensor::randn({1, 2}, DType::f64, Device::cpu(), &g);
  SruOutput e = sru_recurrence(Tensor::zeros({0, 1, 2, 3}, DType::f64), Tensor::zeros({0, 1, 2}, DType::f64), v, b, c0);
  CHECK(e.c_last.to_vector() == c0.to_vector());
}

TEST_CASE("sru_recurrence passes its float64 gradient checks", "[sru][gradcheck]") {
  int n = 0;
  for (const GradcheckCase& c : gradcheck_cases()) {
    if (c.op != "sru_recurrence" || c.backend_only) continue;
    ++n;
    remora_test::check_gradcheck_case(c);
  }
  CHECK(n >= 6);
}

TEST_CASE("sru_recurrence bad arguments give errors naming the argument", "[sru][errors]") {
  const DType f = DType::f32;
  Tensor U = Tensor::zeros({4, 2, 6, 3}, f), x = Tensor::zeros({4, 2, 6}, f);
  Tensor v = Tensor::zeros({2, 6}, f), b = Tensor::zeros({2, 6}, f);
  CHECK_THROWS_WITH(sru_recurrence(Tensor::zeros({4, 2, 6}, f), x, v, b),
                    Catch::Contains("U must be [L, B, D, k]"));
  CHECK_THROWS_WITH(sru_recurrence(Tensor::zeros({4, 2, 6, 5}, f), x, v, b),
                    Catch::Contains("k = 3"));
  CHECK_THROWS_WITH(sru_recurrence(U, Tensor::zeros({4, 2, 5}, f), v, b),
                    Catch::Contains("x must be [L, B, D] = [4, 2, 6]"));
  CHECK_THROWS_WITH(sru_recurrence(U, Tensor(), v, b), Catch::Contains("x is undefined"));
  CHECK_THROWS_WITH(sru_recurrence(Tensor::zeros({4, 2, 6, 4}, f), x, v, b),
                    Catch::Contains("x must be undefined"));
  CHECK_THROWS_WITH(sru_recurrence(U, x, Tensor::zeros({6}, f), b), Catch::Contains("v must be [2, D]"));
  CHECK_THROWS_WITH(sru_recurrence(U, x, v, Tensor::zeros({2, 5}, f)), Catch::Contains("b must be [2, D]"));
  CHECK_THROWS_WITH(sru_recurrence(U, x, v, b, Tensor::zeros({6}, f)), Catch::Contains("c0 must be [B, D]"));
  CHECK_THROWS_WITH(sru_recurrence(U, x, v, b, Tensor(), Tensor::zeros({2, 5}, f)),
                    Catch::Contains("mask must be [B, D]"));
  CHECK_THROWS_WITH(sru_recurrence(U, x.to(DType::f64), v, b), Catch::Contains("x is f64 but U is f32"));
  CHECK_THROWS_WITH(sru_recurrence(U.to(DType::i64), x, v, b), Catch::Contains("U must be f32 or f64"));
  CHECK_THROWS_WITH(sru_recurrence(Tensor::zeros({4, 2, 5, 3}, f), Tensor::zeros({4, 2, 5}, f),
                                   Tensor::zeros({2, 5}, f), Tensor::zeros({2, 5}, f), Tensor(),
                                   Tensor(), true),
                    Catch::Contains("even number of units"));
}

// ---- the model ----

namespace {

SRUppConfig config_of(const std::string& key) {
  const nlohmann::json j = nlohmann::json::parse(model_golden().metadata.at("case_" + key + ".config"));
  SRUppConfig c;
  c.n_token = j["n_token"];
  c.d_model = j["d_model"];
  c.d_attn = j["d_attn"];
  c.n_layer = j["n_layer"];
  c.attn_every = j["attn_every"];
  c.mem_len = j["mem_len"];
  c.highway_bias = j["highway_bias"];
  c.dropout = 0;
  c.attn_dropout = 0;
  return c;
}

std::shared_ptr<SRUppLM> model_of(const std::string& key, DType dt) {
  auto m = std::make_shared<SRUppLM>(config_of(key), dt);
  nn::NamedTensors sd = model_test::case_params(model_golden(), key);
  m->load_state_dict(sd, /*strict=*/false);  // the goldens hold parameters, not the scale_x buffers
  REQUIRE(sd.size() == m->named_parameters().size());  // and every parameter came from the file
  m->eval();
  return m;
}

void run_case(const std::string& key, DType dt, double rtol, double atol) {
  auto m = model_of(key, dt);
  const SRUppConfig cfg = config_of(key);
  const std::string c = "case_" + key + ".";
  SequenceState state;
  for (int s = 0; s < 3; ++s) {
    const std::string sg = c + "seg" + std::to_string(s) + ".";
    m->zero_grad();
    SRUppLM::Output out = m->forward(model_golden().get(sg + "ids"), state);
    Tensor loss = SRUppLM::loss(out.logits, model_golden().get(sg + "targets"));
    check_close(out.logits, model_golden().get(sg + "logits"), rtol, atol, sg + "logits");
    check_close(out.hidden, model_golden().get(sg + "hidden"), rtol, atol, sg + "hidden");
    check_close(loss.reshape({1}), model_golden().get(sg + "loss"), rtol, atol, sg + "loss");
    REQUIRE(out.state.mems.size() == size_t(cfg.n_layer));
    REQUIRE(out.state.cells.size() == size_t(cfg.n_layer));
    for (int64_t l = 0; l < cfg.n_layer; ++l) {
      const std::string ls = std::to_string(l);
      check_close(out.state.mems[size_t(l)], model_golden().get(sg + "mems." + ls), rtol, atol,
                  sg + "mems." + ls);
      check_close(out.state.cells[size_t(l)], model_golden().get(sg + "cells." + ls), rtol, atol,
                  sg + "cells." + ls);
      CHECK_FALSE(out.state.mems[size_t(l)].requires_grad());
      CHECK_FALSE(out.state.cells[size_t(l)].requires_grad());
    }
    loss.backward();
    if (s == 2)
      for (const auto& kv : m->named_parameters())
        check_close(kv.second.grad(), model_golden().get(c + "grad." + kv.first), rtol, atol,
                    c + "grad." + kv.first);
    state = out.state;
  }
}

}  // namespace

TEST_CASE("SRU++ parameter names are the official state dict's", "[sru]") {
  SRUppConfig c = config_of("a");  // 3 layers, attention on layer 1
  SRUppLM m(c, DType::f64);
  std::set<std::string> names;
  for (const auto& kv : m.named_parameters()) names.insert(kv.first);
  for (const char* n :
       {"embedding_layer.weight", "output_layer.weight", "output_layer.bias",
        "rnn.rnn_lst.0.weight_c", "rnn.rnn_lst.0.bias", "rnn.rnn_lst.0.transform_module.linear1.weight",
        "rnn.rnn_lst.0.transform_module.linear2.weight",
        "rnn.rnn_lst.0.transform_module.layer_norm.weight",
        "rnn.rnn_lst.0.transform_module.layer_norm.bias", "rnn.rnn_lst.1.transform_module.alpha",
        "rnn.rnn_lst.1.transform_module.linear1.weight", "rnn.rnn_lst.1.transform_module.linear2.weight",
        "rnn.rnn_lst.1.transform_module.linear3.weight", "rnn.rnn_lst.2.weight_c"}) {
    INFO(n);
    CHECK(names.count(n) == 1);
  }
  CHECK(names.count("rnn.rnn_lst.0.transform_module.alpha") == 0);
  // Every golden parameter name exists in the model, and vice versa.
  std::set<std::string> golden;
  for (const auto& kv : model_golden().tensors)
    if (kv.first.rfind("case_a.param.", 0) == 0) golden.insert(kv.first.substr(13));
  CHECK(golden == names);
  // The buffer scale_x is in the state dict, as in torch.
  bool has_scale = false;
  for (const auto& kv : m.state_dict()) has_scale |= kv.first == "rnn.rnn_lst.2.scale_x";
  CHECK(has_scale);
  // Shapes: U has 3 d columns; K and V come from linear2 [2 d', d'].
  CHECK(m.rnn->rnn_lst->at<models::SRUppCell>(1)->attn->linear2->weight.shape() == Shape{16, 8});
  CHECK(m.rnn->rnn_lst->at<models::SRUppCell>(1)->attn->linear3->weight.shape() == Shape{48, 8});
}

TEST_CASE("SRU++ initialisation is the official one", "[sru]") {
  SRUppConfig c;
  c.n_token = 66;
  c.d_model = 32;
  c.d_attn = 8;
  c.n_layer = 2;
  c.dropout = 0.2;
  Generator g(1);
  SRUppLM m(c, DType::f64, &g);
  auto cell = m.rnn->rnn_lst->at<models::SRUppCell>(1);
  CHECK(cell->attn->alpha.item() == 0.0);
  const std::vector<double> bias = cell->bias.to_vector(), wc = cell->weight_c.to_vector();
  for (int64_t j = 0; j < 32; ++j) {
    CHECK(bias[size_t(j)] == 0.0);
    CHECK(bias[size_t(32 + j)] == -2.0);
  }
  for (double w : wc) CHECK(std::fabs(w) <= 1.0);
  const double emb_bound = std::sqrt(3.0 / 66);
  for (double w : m.embedding_layer->weight.to_vector()) CHECK(std::fabs(w) <= emb_bound);
  for (double w : m.output_layer->bias.to_vector()) CHECK(w == 0.0);
  // linear3 is xavier scaled by sqrt(1 - dropout).
  const double x3 = std::sqrt(6.0 / (8 + 96)) * std::sqrt(0.8);
  for (double w : cell->attn->linear3->weight.to_vector()) CHECK(std::fabs(w) <= x3 + 1e-15);
  CHECK(m.rnn->rnn_lst->at<models::SRUppCell>(0)->c_dropout == 0.2);
  CHECK(cell->c_dropout == 0.0);  // the last layer has no mask on c
}

TEST_CASE("SRU++ matches the PyTorch reference in float64", "[sru][golden]") {
  for (const char* key : {"a", "b"}) {
    INFO("case " << key);
    run_case(key, DType::f64, 1e-9, 1e-12);
  }
}

TEST_CASE("SRU++ matches the PyTorch reference in float32", "[sru][golden]") {
  for (const char* key : {"a", "b"}) {
    INFO("case " << key);
    run_case(key, DType::f32, 1e-4, 1e-5);
  }
}

TEST_CASE("SRU++ trains with dropout and carries its state", "[sru]") {
  SRUppConfig c;
  c.n_token = 11;
  c.d_model = 12;
  c.d_attn = 4;
  c.n_layer = 2;
  c.mem_len = 3;
  c.dropout = 0.2;
  c.attn_dropout = 0.1;
  Generator g(9);
  SRUppLM m(c, DType::f32, &g);
  m.train();
  Tensor ids = Tensor::from_vector(std::vector<int64_t>{1, 5, 7, 2, 9, 3, 3, 8, 0, 4}, {2, 5});
  SequenceOutput o1 = m.run(ids, SequenceState{});
  CHECK(o1.logits.shape() == Shape{2, 5, 11});
  CHECK(o1.state.mems[0].shape() == Shape{2, 3, 12});
  CHECK(o1.state.cells[1].shape() == Shape{2, 12});
  SequenceOutput o2 = m.run(ids, o1.state);
  Tensor loss = SRUppLM::loss(o2.logits, ids);
  loss.backward();
  CHECK(std::isfinite(loss.item()));
  for (const auto& kv : m.named_parameters()) {
    INFO(kv.first);
    REQUIRE(kv.second.grad().defined());
  }
}

TEST_CASE("SRU++ bad config or state gives errors naming the field", "[sru][errors]") {
  auto bad = [](void (*edit)(SRUppConfig&), const char* msg) {
    SRUppConfig c;
    edit(c);
    CHECK_THROWS_WITH(SRUppLM(c), Catch::Contains(msg));
  };
  bad([](SRUppConfig& c) { c.n_token = 0; }, "n_token");
  bad([](SRUppConfig& c) { c.d_model = 0; }, "d_model");
  bad([](SRUppConfig& c) { c.d_attn = -1; }, "d_attn");
  bad([](SRUppConfig& c) { c.n_layer = 0; }, "n_layer");
  bad([](SRUppConfig& c) { c.attn_every = 0; }, "attn_every");
  bad([](SRUppConfig& c) { c.dropout = 1.0; }, "dropout");
  bad([](SRUppConfig& c) { c.attn_dropout = -0.1; }, "attn_dropout");
  bad([](SRUppConfig& c) { c.mem_len = -1; }, "mem_len");
  bad([](SRUppConfig& c) { c.n_out = -2; }, "n_out");
  bad([](SRUppConfig& c) { c.n_in = 3; }, "n_in");
  SRUppConfig c;
  c.n_layer = 2;
  c.d_model = 8;
  c.d_attn = 4;
  SRUppLM m(c);
  CHECK_THROWS_WITH(m.forward(Tensor::zeros({2, 3})), Catch::Contains("ids must be i64 [B, L]"));
  SequenceState st;
  st.mems = {Tensor::zeros({2, 4, 8})};
  CHECK_THROWS_WITH(m.forward(Tensor::zeros({2, 3}, DType::i64), st),
                    Catch::Contains("expected 2 memories"));
  st.mems.clear();
  st.cells = {Tensor::zeros({2, 8}), Tensor::zeros({3, 8})};
  CHECK_THROWS_WITH(m.forward(Tensor::zeros({2, 3}, DType::i64), st),
                    Catch::Contains("cell state [3, 8] does not fit [B, d] = [2, 8]"));
}

TEST_CASE("SRU++ sequence labelling head and real-valued inputs", "[sru]") {
  SRUppConfig c;
  c.n_in = 3;
  c.n_out = 5;
  c.d_model = 8;
  c.d_attn = 4;
  c.n_layer = 2;
  SRUppLM m(c, DType::f64);
  m.eval();
  SequenceOutput o = m.run(Tensor::randn({2, 4, 3}, DType::f64), SequenceState{});
  CHECK(o.logits.shape() == Shape{2, 4, 5});
  CHECK(m.embedding_layer == nullptr);
}

TEST_CASE("SRU++ sizes near the default RSA-XL budget (651k parameters, 66 symbols)", "[sru]") {
  // Parameters: embedding and output layer 2 V d + V; per layer weight_c and
  // bias 4 d, LN 2 d', W_in/W_q d' d, W_o 3 d d'; attention adds W_kv 2 d'^2 and alpha.
  struct Size {
    int64_t n_layer, d_model, d_attn, attn_every, params;
  };
  for (const Size& s : {Size{7, 320, 64, 2, 650181}, Size{9, 256, 64, 4, 650436},
                        Size{10, 288, 48, 1, 649612}}) {
    SRUppConfig c;
    c.n_token = 66;
    c.n_layer = s.n_layer;
    c.d_model = s.d_model;
    c.d_attn = s.d_attn;
    c.attn_every = s.attn_every;
    SRUppLM m(c);
    CHECK(m.num_parameters() == s.params);
  }
}

TEST_CASE("SRU++ learns a periodic stream across segments", "[sru]") {
  // Period 7 > segment length 4: the state (cells, memory) must carry information.
  SRUppConfig c;
  c.n_token = 7;
  c.d_model = 16;
  c.d_attn = 8;
  c.n_layer = 2;
  c.mem_len = 4;
  c.dropout = 0;
  c.attn_dropout = 0;
  Generator g(3);
  SRUppLM m(c, DType::f32, &g);
  optim::AdamW opt(m.parameters(), 1e-2);
  std::vector<int64_t> stream;
  for (int i = 0; i < 2 * 40 + 2; ++i) stream.push_back(i % 7);
  auto seg = [&](int s, int off) {
    std::vector<int64_t> v;
    for (int b = 0; b < 2; ++b)
      for (int t = 0; t < 4; ++t) v.push_back((stream[size_t(s * 4 + t + off)] + b) % 7);
    return Tensor::from_vector(v, {2, 4});
  };
  double first = 0, last = 0;
  for (int epoch = 0; epoch < 12; ++epoch) {
    SequenceState st;
    double total = 0;
    for (int s = 0; s < 10; ++s) {
      SequenceOutput o = m.run(seg(s, 0), st);
      Tensor loss = SRUppLM::loss(o.logits, seg(s, 1));
      opt.zero_grad();
      loss.backward();
      opt.step();
      total += loss.item();
      st = o.state;
    }
    if (epoch == 0) first = total / 10;
    last = total / 10;
  }
  INFO("mean loss epoch 0: " << first << ", epoch 11: " << last);
  CHECK(last < 0.25 * first);
}

// ---- the adaptive input and softmax (the official WikiText-103 model) ----

namespace {

const Safetensors& adaptive_golden() {
  return model_test::golden_file("srupp_adaptive.safetensors", "remora-golden-srupp-adaptive",
                                 "tools/goldens/make_srupp_adaptive_goldens.py");
}

SRUppConfig adaptive_config_of(const std::string& key) {
  const nlohmann::json j = nlohmann::json::parse(adaptive_golden().metadata.at("case_" + key + ".config"));
  SRUppConfig c;
  c.n_token = j["n_token"];
  c.d_model = j["d_model"];
  c.d_attn = j["d_attn"];
  c.n_layer = j["n_layer"];
  c.attn_every = j["attn_every"];
  c.mem_len = j["mem_len"];
  c.layer_norm = j["layer_norm"];
  c.cutoffs = j["cutoffs"].get<std::vector<int64_t>>();
  c.d_embed = j["d_embed"];
  c.div_val = j["div_val"];
  c.dropout = 0;
  c.attn_dropout = 0;
  return c;
}

std::shared_ptr<SRUppLM> adaptive_model_of(const std::string& key, DType dt) {
  auto m = std::make_shared<SRUppLM>(adaptive_config_of(key), dt);
  nn::NamedTensors sd = model_test::case_params(adaptive_golden(), key);
  m->load_state_dict(sd, /*strict=*/false);  // parameters only, not the scale_x buffers
  REQUIRE(sd.size() == m->named_parameters().size());
  m->eval();
  return m;
}

void run_adaptive_case(const std::string& key, DType dt, double rtol, double atol) {
  auto m = adaptive_model_of(key, dt);
  const SRUppConfig cfg = adaptive_config_of(key);
  const Safetensors& g = adaptive_golden();
  const std::string c = "case_" + key + ".";
  SequenceState state;
  for (int s = 0; s < 3; ++s) {
    const std::string sg = c + "seg" + std::to_string(s) + ".";
    m->zero_grad();
    const Tensor ids = g.get(sg + "ids"), targets = g.get(sg + "targets");
    // Every log-probability (no targets) agrees with the scored targets.
    {
      NoGradGuard ng;
      SRUppLM::Output all = m->forward(ids, state);
      REQUIRE(all.logits.shape() == Shape{2, 5, cfg.n_token});
      CHECK_FALSE(all.nll.defined());
      Tensor picked = gather(all.logits, 2, targets.unsqueeze(2)).squeeze(2);
      check_close(neg(picked), g.get(sg + "nll"), rtol, atol, sg + "log_prob at the targets");
      check_close(sum(exp(all.logits), {2}), Tensor::ones({2, 5}, dt), rtol, atol, sg + "probabilities sum to 1");
    }
    SRUppLM::Output out = m->forward(ids, state, targets);
    CHECK_FALSE(out.logits.defined());
    Tensor loss = out.nll.mean();
    check_close(out.nll, g.get(sg + "nll"), rtol, atol, sg + "nll");
    check_close(loss.reshape({1}), g.get(sg + "loss"), rtol, atol, sg + "loss");
    check_close(out.hidden, g.get(sg + "hidden"), rtol, atol, sg + "hidden");
    for (int64_t l = 0; l < cfg.n_layer; ++l) {
      const std::string ls = std::to_string(l);
      check_close(out.state.mems[size_t(l)], g.get(sg + "mems." + ls), rtol, atol, sg + "mems." + ls);
      check_close(out.state.cells[size_t(l)], g.get(sg + "cells." + ls), rtol, atol, sg + "cells." + ls);
    }
    loss.backward();
    if (s == 2)
      for (const auto& kv : m->named_parameters())
        check_close(kv.second.grad(), g.get(c + "grad." + kv.first), rtol, atol, c + "grad." + kv.first);
    state = out.state;
  }
}

}  // namespace

TEST_CASE("SRU++ with the adaptive input and softmax matches the official modules in float64",
          "[sru][golden][adaptive]") {
  for (const char* key : {"a", "b"}) {
    INFO("case " << key);
    run_adaptive_case(key, DType::f64, 1e-9, 1e-12);
  }
}

TEST_CASE("SRU++ with the adaptive input and softmax matches the official modules in float32",
          "[sru][golden][adaptive]") {
  for (const char* key : {"a", "b"}) {
    INFO("case " << key);
    run_adaptive_case(key, DType::f32, 1e-4, 1e-5);
  }
}

TEST_CASE("SRU++ adaptive parameter names are the official ones, the embedding shares them", "[sru][adaptive]") {
  SRUppLM m(adaptive_config_of("a"), DType::f64);
  std::set<std::string> names, golden;
  for (const auto& kv : m.named_parameters()) names.insert(kv.first);
  for (const auto& kv : adaptive_golden().tensors)
    if (kv.first.rfind("case_a.param.", 0) == 0) golden.insert(kv.first.substr(13));
  CHECK(names == golden);
  CHECK(names.count("rnn.rnn_lst.0.layer_norm.weight") == 1);
  CHECK(names.count("output_layer.out_layers.0.weight") == 1);
  CHECK(names.count("output_layer.out_projs.2") == 1);
  // The head's table has the two clusters' rows after the shortlist; part i is
  // d_embed / div_val^i wide.
  CHECK(m.adaptive_output->out_layers->at<nn::AdaptiveOutLayer>(0)->weight.shape() == Shape{8 + 2, 8});
  CHECK(m.adaptive_output->out_layers->at<nn::AdaptiveOutLayer>(2)->weight.shape() == Shape{6, 2});
  CHECK((*m.adaptive_output->out_projs)[1].shape() == Shape{12, 4});
  // The official init: tables within sqrt(3 / d), biases 0.
  const double bound = std::sqrt(3.0 / 12);
  for (double w : m.adaptive_output->out_layers->at<nn::AdaptiveOutLayer>(1)->weight.to_vector())
    CHECK(std::fabs(w) <= bound);
  for (double b : m.adaptive_output->out_layers->at<nn::AdaptiveOutLayer>(0)->bias.to_vector()) CHECK(b == 0.0);
  // The parameter count the memory estimate uses is the model's.
  int64_t n = 0;
  for (const auto& kv : m.named_parameters()) n += kv.second.numel();
  CHECK(adaptive_config_of("a").parameter_count() == double(n));
  SRUppConfig plain = adaptive_config_of("a");
  plain.cutoffs.clear();
  plain.d_embed = 0;
  SRUppLM p(plain, DType::f64);
  n = 0;
  for (const auto& kv : p.named_parameters()) n += kv.second.numel();
  CHECK(plain.parameter_count() == double(n));
}

TEST_CASE("SRU++ adaptive trains with dropout; a bad adaptive config names the field", "[sru][adaptive][errors]") {
  SRUppConfig c = adaptive_config_of("a");
  c.dropout = 0.1;
  c.emb_dropout = 0.2;
  Generator g(3);
  SRUppLM m(c, DType::f32, &g);
  m.train();
  Tensor ids = Tensor::from_vector(std::vector<int64_t>{0, 3, 9, 13, 19, 7, 15, 2, 8, 14, 1, 18}, {2, 6}, DType::i64);
  SRUppLM::Output o = m.forward(ids, {}, ids);
  Tensor loss = o.nll.mean();
  loss.backward();
  CHECK(std::isfinite(loss.item()));
  for (const auto& kv : m.named_parameters()) {
    INFO(kv.first);
    CHECK(kv.second.grad().defined());
  }
  SRUppConfig bad = adaptive_config_of("a");
  bad.cutoffs = {14, 8};
  CHECK_THROWS_WITH(SRUppLM(bad), Catch::Contains("cutoffs must increase"));
  bad.cutoffs = {8, 20};
  CHECK_THROWS_WITH(SRUppLM(bad), Catch::Contains("below the vocabulary size 20"));
  bad = adaptive_config_of("a");
  bad.n_out = 3;
  CHECK_THROWS_WITH(SRUppLM(bad), Catch::Contains("language models over tokens"));
  bad = adaptive_config_of("a");
  bad.emb_dropout = 1.0;
  CHECK_THROWS_WITH(SRUppLM(bad), Catch::Contains("emb_dropout"));
  bad = adaptive_config_of("a");
  bad.div_val = 8;  // 8 / 8 / 8 = 0 wide
  CHECK_THROWS_WITH(SRUppLM(bad), Catch::Contains("no width"));
  SRUppLM ok(adaptive_config_of("a"));
  CHECK_THROWS_WITH(ok.forward(Tensor::full({1, 2}, 20, DType::i64)), Catch::Contains("outside [0, 20)"));
}

TEST_CASE("SRU++ same_length: each query sees itself and the mem_len keys before it", "[sru]") {
  // One attention transform, memory 4, segment 4: query i sits at position
  // 4 + i and, with the window, sees keys 4 + i - 4 .. 4 + i; so memory row 0
  // reaches query 0 only. Without the window every query sees it.
  Generator g(9);
  models::SRUppAttention att(6, 12, 4, 0.0, 0.0, DType::f64, &g);
  {
    NoGradGuard ng;
    att.alpha.fill_(1.0);
  }
  att.eval();
  Tensor x = Tensor::randn({4, 2, 6}, DType::f64, Device::cpu(), &g);
  Tensor mem = Tensor::randn({4, 2, 6}, DType::f64, Device::cpu(), &g);
  Tensor mem2 = mem.clone();
  {
    NoGradGuard ng;
    mem2.slice(0, 0, 1).fill_(5.0);
  }
  auto changed_rows = [&](int64_t window) {
    att.window = window;
    const Tensor a = att.forward(x, mem), b = att.forward(x, mem2);
    std::vector<bool> changed;
    for (int64_t i = 0; i < 4; ++i)
      changed.push_back(max(abs(sub(a.slice(0, i, i + 1), b.slice(0, i, i + 1)))).item() > 1e-12);
    return changed;
  };
  CHECK(changed_rows(4) == std::vector<bool>{true, false, false, false});
  CHECK(changed_rows(0) == std::vector<bool>{true, true, true, true});
  // The model sets the window from the config.
  SRUppConfig c = config_of("b");
  c.same_length = true;
  SRUppLM m(c, DType::f64);
  CHECK(m.rnn->rnn_lst->at<models::SRUppCell>(0)->attn->window == c.mem_len);
}
