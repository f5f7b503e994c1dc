// SPDX-License-Identifier: BSD-3-Clause
// nn layers against PyTorch 1.13 (float64 goldens) and Module unit tests.
#include <cstdio>
#include <functional>

#include "nn_golden.h"

#include "helpers.h"

using namespace remora;
using remora_test::contains;
using remora_test::error_of;
using nn_test::check_close;
using nn_test::g;
using nn_test::leaf;

namespace {

constexpr double kRtol = 1e-10;

// Loads <prefix>'s torch weights into m, runs fwd on the inputs, compares the
// output and, for loss = sum(out * probe), every parameter and input gradient.
void check_module(const std::string& prefix, nn::Module& m, std::vector<std::string> input_names,
                  const std::function<Tensor(const std::vector<Tensor>&)>& fwd,
                  bool input_grads = true) {
  m.load_state_dict(nn_test::state_of(prefix));
  std::vector<Tensor> in;
  for (const auto& n : input_names) {
    // Inputs named input* get gradients; masks do not.
    const bool floating = is_floating(g(prefix + "." + n).dtype());
    in.push_back(leaf(prefix + "." + n, input_grads && floating && n.rfind("input", 0) == 0));
  }
  Tensor out = fwd(in);
  check_close(out, g(prefix + ".output"), kRtol, prefix + ".output");
  (out * g(prefix + ".probe")).sum().backward();
  for (const auto& kv : m.named_parameters())
    check_close(kv.second.grad(), g(prefix + ".grad." + kv.first), kRtol, prefix + ".grad." + kv.first);
  for (size_t i = 0; i < in.size(); ++i)
    if (in[i].requires_grad())
      check_close(in[i].grad(), g(prefix + ".grad." + input_names[i]), kRtol,
                  prefix + ".grad." + input_names[i]);
}


}  // namespace

TEST_CASE("nn goldens: Linear matches torch.nn.Linear", "[nn]") {
  nn::Linear m(5, 4, true, DType::f64);
  check_module("linear", m, {"input"}, [&](const std::vector<Tensor>& x) { return m.forward(x[0]); });
}

TEST_CASE("nn goldens: Embedding with padding_idx matches torch", "[nn]") {
  nn::Embedding m(7, 4, 2, DType::f64);
  check_module("embedding", m, {"input"}, [&](const std::vector<Tensor>& x) { return m.forward(x[0]); });
  // The padding row got no gradient although ids hit it.
  for (double v : m.weight.grad().select(0, 2).to_vector()) CHECK(v == 0);
}

TEST_CASE("nn goldens: LayerNorm matches torch", "[nn]") {
  nn::LayerNorm m(6, 1e-5, DType::f64);
  check_module("layernorm", m, {"input"}, [&](const std::vector<Tensor>& x) { return m.forward(x[0]); });
}

TEST_CASE("nn goldens: FeedForward (relu, gelu) in eval mode matches torch", "[nn]") {
  for (const char* act : {"relu", "gelu"}) {
    DYNAMIC_SECTION(act) {
      nn::FeedForward m(6, 10, 0.3, act, DType::f64);
      m.eval();
      check_module(std::string("ffn_") + act, m, {"input"},
                   [&](const std::vector<Tensor>& x) { return m.forward(x[0]); });
    }
  }
}

TEST_CASE("FeedForward draws its dropout masks from its generator", "[nn]") {
  for (const char* act : {"relu", "gelu"}) {
    DYNAMIC_SECTION(act) {
      Generator g1(5), g2(5);
      nn::FeedForward a(6, 10, 0.5, act, DType::f64, &g1), b(6, 10, 0.5, act, DType::f64, &g2);
      const uint64_t global = default_generator().offset();
      Tensor x = Tensor::ones({4, 6}, DType::f64);
      const uint64_t before = g1.offset();
      Tensor ya = a.forward(x), yb = b.forward(x);
      CHECK(ya.to_vector() == yb.to_vector());  // same weights, same masks
      CHECK(g1.offset() > before);
      CHECK(default_generator().offset() == global);
    }
  }
}

TEST_CASE("nn goldens: MultiHeadAttention self-attention, causal + key padding", "[nn]") {
  nn::MultiHeadAttention m(8, 2, 0.1, true, DType::f64);
  m.eval();
  SECTION("float causal attn_mask") {
    check_module("mha_self", m, {"input", "attn_mask", "key_padding_mask"},
                 [&](const std::vector<Tensor>& x) { return m.forward(x[0], x[0], x[0], x[1], x[2]); });
  }
  SECTION("causal flag instead of the mask") {
    check_module("mha_self", m, {"input", "key_padding_mask"}, [&](const std::vector<Tensor>& x) {
      return m.self_attention(x[0], Tensor(), x[1], /*causal=*/true);
    });
  }
  SECTION("the masks matter: dropping key_padding_mask changes the output") {
    m.load_state_dict(nn_test::state_of("mha_self"));
    Tensor x = leaf("mha_self.input");
    Tensor out = m.self_attention(x, leaf("mha_self.attn_mask"));
    const auto a = out.to_vector(), b = g("mha_self.output").to_vector();
    double diff = 0;
    for (size_t i = 0; i < a.size(); ++i) diff = std::max(diff, std::fabs(a[i] - b[i]));
    CHECK(diff > 1e-3);
  }
  SECTION("boolean (i64) causal mask") {
    Tensor block = triu(Tensor::ones({5, 5}, DType::i64), 1);
    check_module("mha_self", m, {"input", "key_padding_mask"}, [&](const std::vector<Tensor>& x) {
      return m.forward(x[0], x[0], x[0], block, x[1]);
    });
  }
}

TEST_CASE("nn goldens: MultiHeadAttention cross-attention with a boolean mask", "[nn]") {
  nn::MultiHeadAttention m(8, 4, 0, true, DType::f64);
  m.eval();
  check_module("mha_cross", m, {"input_q", "input_k", "input_v", "attn_mask", "key_padding_mask"},
               [&](const std::vector<Tensor>& x) { return m.forward(x[0], x[1], x[2], x[3], x[4]); });
}

TEST_CASE("nn goldens: MultiHeadAttention without biases", "[nn]") {
  nn::MultiHeadAttention m(8, 2, 0, false, DType::f64);
  m.eval();
  auto names = m.named_parameters();
  REQUIRE(names.size() == 2);
  CHECK(names[0].first == "in_proj_weight");
  CHECK(names[1].first == "out_proj.weight");
  check_module("mha_nobias", m, {"input"},
               [&](const std::vector<Tensor>& x) { return m.self_attention(x[0]); });
}

TEST_CASE("MultiHeadAttention is RSAAttention with no REM heads", "[nn]") {
  manual_seed(5);
  nn::MultiHeadAttention m(8, 2, 0, true, DType::f64);
  const nn::RSAAttention& base = m;  // one attention layer, one op
  CHECK(base.rem == nullptr);
  CHECK(m.named_parameters().size() == 4);  // torch's names only: no rem.*
  {
    NoGradGuard ng;  // a nonzero output bias, so the masked row below is seen
    m.out_proj->bias.copy_(Tensor::randn({8}, DType::f64));
  }
  // The same weights in an RSAAttention built with an empty spec: the same numbers.
  nn::RSAAttention r(8, 2, RemSpec{}, "head", 0, true, {}, DType::f64);
  r.load_state_dict(m.state_dict());
  Tensor x = Tensor::randn({2, 5, 8}, DType::f64);
  Tensor kpm = Tensor::from_vector(std::vector<int64_t>{0, 0, 0, 1, 1, 0, 0, 0, 0, 0}, {2, 5});
  CHECK(m.self_attention(x, Tensor(), kpm, true).to_vector() ==
        r.self_attention(x, Tensor(), kpm, true).to_vector());
  // More queries than keys (torch allows it for cross-attention without REM heads):
  // against the softmax written out by hand.
  Tensor q = Tensor::randn({2, 6, 8}, DType::f64), kv = Tensor::randn({2, 3, 8}, DType::f64);
  Tensor got = m.forward(q, kv, kv);
  nn::HeadProjections hp = nn::project_heads(q, kv, kv, m.in_proj_weight, m.in_proj_bias, 2);
  Tensor a = softmax(matmul(hp.q, hp.k.transpose(-2, -1)) / std::sqrt(4.0), -1);
  Tensor want = m.out_proj->forward(matmul(a, hp.v).permute({0, 2, 1, 3}).reshape({2, 6, 8}));
  check_close(got, want, 1e-12, "mha Lq > Lk");
  // A fully masked query row (batch 1, row 0: causal + its only key padded) gives
  // attention 0 there (FlashAttention-2's rule, as rsa_attention), not torch's NaN,
  // and finite gradients everywhere.
  Tensor xs = Tensor::randn({2, 4, 8}, DType::f64).requires_grad_();
  Tensor pad = Tensor::from_vector(std::vector<int64_t>{0, 0, 0, 0, 1, 0, 0, 0}, {2, 4});
  Tensor out = m.self_attention(xs, Tensor(), pad, true);
  for (double v : out.to_vector()) REQUIRE(std::isfinite(v));
  // Row 0 of batch 1 attends to nothing: its output is out_proj's bias.
  check_close(out.select(0, 1).select(0, 0), m.out_proj->bias, 1e-15, "masked row");
  out.sum().backward();
  for (double v : xs.grad().to_vector()) REQUIRE(std::isfinite(v));
}

// ---- Module mechanics ----

namespace {
struct Block : nn::Module {
  std::shared_ptr<nn::LayerNorm> ln;
  std::shared_ptr<nn::MultiHeadAttention> attn;
  std::shared_ptr<nn::FeedForward> ffn;
  Block(int64_t d, DType dt) {
    ln = register_module("ln", std::make_shared<nn::LayerNorm>(d, 1e-5, dt));
    attn = register_module("attn", std::make_shared<nn::MultiHeadAttention>(d, 2, 0.1, true, dt));
    ffn = register_module("ffn", std::make_shared<nn::FeedForward>(d, 2 * d, 0.1, "gelu", dt));
  }
  std::string type_name() const override { return "Block"; }
};
struct Model : nn::Module {
  std::shared_ptr<nn::Embedding> emb;
  std::shared_ptr<nn::ModuleList> layers;
  Tensor scale, counter;
  Model(int64_t V, int64_t d, int64_t n, DType dt = DType::f32) {
    emb = register_module("emb", std::make_shared<nn::Embedding>(V, d, 0, dt));
    layers = register_module("layers", std::make_shared<nn::ModuleList>());
    for (int64_t i = 0; i < n; ++i) layers->push_back(std::make_shared<Block>(d, dt));
    scale = register_parameter("scale", Tensor::ones({1}, dt));
    counter = register_buffer("counter", Tensor::zeros({2}, DType::i64));
  }
  std::string type_name() const override { return "Model"; }
};
}  // namespace

TEST_CASE("named_parameters: PyTorch dotted names in torch's order", "[nn]") {
  // torch's order: a module's own parameters first (registration order), then
  // each child's, depth first -- so "scale" leads although registered last.
  Model m(11, 4, 2);
  std::vector<std::string> want = {"scale", "emb.weight"};
  for (int l = 0; l < 2; ++l)
    for (const char* n : {"ln.weight", "ln.bias", "attn.in_proj_weight", "attn.in_proj_bias",
                          "attn.out_proj.weight", "attn.out_proj.bias", "ffn.fc1.weight",
                          "ffn.fc1.bias", "ffn.fc2.weight", "ffn.fc2.bias"})
      want.push_back("layers." + std::to_string(l) + "." + n);
  auto np = m.named_parameters();
  std::vector<std::string> got;
  for (auto& kv : np) got.push_back(kv.first);
  CHECK(got == want);
  // parameters() are the very handles the members hold.
  auto ps = m.parameters();
  REQUIRE(ps.size() == want.size());
  CHECK(ps[0].is_same(m.scale));
  CHECK(ps[1].is_same(m.emb->weight));
  CHECK(ps[4].is_same(m.layers->at<Block>(0)->attn->in_proj_weight));
  for (auto& p : ps) CHECK((p.requires_grad() && p.is_leaf()));
  // Buffers: in state_dict (after their module's own parameters), not in parameters().
  auto sd = m.state_dict();
  CHECK(sd.size() == want.size() + 1);
  CHECK(sd[1].first == "counter");
  CHECK(m.named_buffers().size() == 1);
  CHECK(m.num_parameters() == 11 * 4 + 2 * (4 + 4 + 48 + 12 + 16 + 4 + 32 + 8 + 32 + 4) + 1);
  CHECK_THROWS_WITH(m.register_parameter("scale", Tensor::ones({1})), Catch::Contains("already registered"));
}

TEST_CASE("train/eval propagate to every descendant", "[nn]") {
  Model m(11, 4, 2);
  CHECK(m.is_training());
  m.eval();
  CHECK_FALSE(m.is_training());
  CHECK_FALSE(m.layers->at<Block>(1)->ffn->drop->is_training());
  CHECK_FALSE(m.layers->at<Block>(0)->attn->is_training());
  m.layers->at<Block>(1)->train();
  CHECK(m.layers->at<Block>(1)->ffn->drop->is_training());
  CHECK_FALSE(m.layers->at<Block>(0)->ffn->drop->is_training());
  m.train();
  CHECK(m.layers->at<Block>(0)->ffn->drop->is_training());
}

TEST_CASE("Dropout: identity in eval, inverted dropout in train", "[nn]") {
  nn::Dropout d(0.25);
  Tensor x = Tensor::ones({4000}, DType::f64);
  Tensor y = d.forward(x);
  int zeros = 0;
  for (double v : y.to_vector()) {
    if (v == 0) ++zeros;
    else CHECK(v == Approx(1 / 0.75));
  }
  CHECK(zeros > 850);
  CHECK(zeros < 1150);
  d.eval();
  CHECK(d.forward(x).is_same(x));
  // Attention dropout acts in train mode only.
  nn::MultiHeadAttention mha(8, 2, 0.5, true, DType::f64);
  Tensor q = Tensor::randn({2, 5, 8}, DType::f64);
  Tensor a = mha.self_attention(q), b = mha.self_attention(q);
  CHECK(a.to_vector() != b.to_vector());
  mha.eval();
  CHECK(mha.self_attention(q).to_vector() == mha.self_attention(q).to_vector());
}

TEST_CASE("state_dict round trip through safetensors keeps handles", "[nn]") {
  manual_seed(1);
  Model a(11, 4, 2, DType::f64);
  manual_seed(2);
  Model b(11, 4, 2, DType::f64);
  {
    NoGradGuard ng;
    a.counter.copy_(Tensor::from_vector(std::vector<int64_t>{3, 7}, {2}));
  }
  const std::string path = "nn_roundtrip_test.safetensors";
  save_safetensors(path, a.state_dict(), {{"format", "test"}});
  Tensor held = b.layers->at<Block>(1)->attn->out_proj->weight;  // e.g. held by an optimizer
  CHECK(held.to_vector() != a.layers->at<Block>(1)->attn->out_proj->weight.to_vector());
  b.load_state_dict(load_safetensors(path));
  std::remove(path.c_str());
  auto sa = a.state_dict(), sb = b.state_dict();
  REQUIRE(sa.size() == sb.size());
  for (size_t i = 0; i < sa.size(); ++i) {
    INFO(sa[i].first);
    CHECK(sa[i].second.to_vector() == sb[i].second.to_vector());
  }
  CHECK(held.is_same(b.layers->at<Block>(1)->attn->out_proj->weight));
  CHECK(held.to_vector() == a.layers->at<Block>(1)->attn->out_proj->weight.to_vector());
  CHECK(b.emb->weight.requires_grad());
  CHECK(b.emb->weight.is_leaf());
}

TEST_CASE("load_state_dict reports missing, unexpected and mis-shaped keys", "[nn]") {
  nn::Linear m(3, 2, true, DType::f64);
  const auto before = m.weight.to_vector();
  nn::NamedTensors sd = {{"weight", Tensor::zeros({2, 3}, DType::f64)}};
  std::string e = error_of([&] { m.load_state_dict(sd); });
  CHECK(contains(e, "missing keys: 'bias'"));
  sd.emplace_back("bias", Tensor::zeros({2}, DType::f64));
  sd.emplace_back("extra", Tensor::zeros({2}, DType::f64));
  e = error_of([&] { m.load_state_dict(sd); });
  CHECK(contains(e, "unexpected keys: 'extra'"));
  CHECK(m.weight.to_vector() == before);  // a failed load changes nothing
  m.load_state_dict(sd, /*strict=*/false);
  CHECK(m.weight.to_vector() == std::vector<double>(6, 0.0));
  nn::NamedTensors bad = {{"weight", Tensor::zeros({3, 2}, DType::f64)},
                          {"bias", Tensor::zeros({2}, DType::f64)}};
  e = error_of([&] { m.load_state_dict(bad); });
  CHECK(contains(e, "size mismatch for 'weight'"));
  CHECK(contains(e, "[3, 2]"));
  CHECK(contains(e, "[2, 3]"));
  CHECK_THROWS_WITH(m.load_state_dict(bad, false), Catch::Contains("size mismatch for 'weight'"));
  // f32 checkpoints load into f64 modules (values converted).
  m.load_state_dict({{"weight", Tensor::ones({2, 3})}, {"bias", Tensor::ones({2})}});
  CHECK(m.weight.dtype() == DType::f64);
  CHECK(m.weight.to_vector() == std::vector<double>(6, 1.0));
}

TEST_CASE("bad inputs give errors that name the argument and shapes", "[nn]") {
  nn::Linear lin(5, 4);
  std::string e = error_of([&] { lin.forward(Tensor::zeros({2, 3})); });
  CHECK(contains(e, "Linear::forward"));
  CHECK(contains(e, "[2, 3]"));
  CHECK(contains(e, "[..., 5]"));
  e = error_of([] { nn::MultiHeadAttention(10, 3); });
  CHECK(contains(e, "d = 10 is not divisible by num_heads = 3"));
  nn::MultiHeadAttention mha(8, 2);
  Tensor x = Tensor::zeros({2, 5, 8});
  e = error_of([&] { mha.self_attention(x, Tensor::zeros({5, 4})); });
  CHECK(contains(e, "attn_mask must be [Lq, Lk] = [5, 5], got [5, 4]"));
  e = error_of([&] { mha.self_attention(x, Tensor(), Tensor::zeros({5, 2})); });
  CHECK(contains(e, "key_padding_mask must be [B, Lk] = [2, 5], got [5, 2]"));
  e = error_of([&] { mha.forward(x, Tensor::zeros({2, 4, 8}), Tensor::zeros({2, 5, 8})); });
  CHECK(contains(e, "value [2, 5, 8] must have key's shape [2, 4, 8]"));
  e = error_of([&] { mha.self_attention(Tensor::zeros({2, 5, 6})); });
  CHECK(contains(e, "query must be [B, Lq, 8], got [2, 5, 6]"));
  CHECK_THROWS_WITH(nn::FeedForward(4, 8, 0, "swish"), Catch::Contains("swish"));
  CHECK_THROWS_WITH(nn::Embedding(5, 3, 5), Catch::Contains("padding_idx 5"));
}

TEST_CASE("initialisers: ranges and moments", "[nn]") {
  manual_seed(7);
  nn::Linear lin(100, 300);
  for (const Tensor& t : {lin.weight, lin.bias}) {
    auto v = t.to_vector();
    double lo = 1, hi = -1;
    for (double x : v) lo = std::min(lo, x), hi = std::max(hi, x);
    CHECK(lo >= -0.1);
    CHECK(hi <= 0.1);
    CHECK(hi > 0.09);  // the whole range is used
    CHECK(lo < -0.09);
  }
  nn::Embedding emb(1000, 50, 3);
  auto v = emb.weight.to_vector();
  double s = 0, s2 = 0;
  for (double x : v) s += x, s2 += x * x;
  const double n = double(v.size());
  CHECK(std::fabs(s / n) < 0.02);
  CHECK(std::sqrt(s2 / n) == Approx(1).epsilon(0.02));
  for (double x : emb.weight.select(0, 3).to_vector()) CHECK(x == 0);

  nn::MultiHeadAttention mha(64, 4);
  const double bound = std::sqrt(6.0 / (64 + 192));
  double mx = 0;
  for (double x : mha.in_proj_weight.to_vector()) mx = std::max(mx, std::fabs(x));
  CHECK(mx <= bound);
  CHECK(mx > 0.95 * bound);
  for (double x : mha.in_proj_bias.to_vector()) CHECK(x == 0);
  for (double x : mha.out_proj->bias.to_vector()) CHECK(x == 0);

  Tensor t = Tensor::empty({20000}, DType::f64).requires_grad_();
  nn::init::normal_(t, 3, 0.5);
  v = t.to_vector();
  s = s2 = 0;
  for (double x : v) s += x, s2 += (x - 3) * (x - 3);
  CHECK(s / 20000 == Approx(3).epsilon(0.005));
  CHECK(std::sqrt(s2 / 20000) == Approx(0.5).epsilon(0.03));
  nn::init::uniform_(t, -2, 5);
  for (double x : t.to_vector()) CHECK((x >= -2 && x < 5));
  nn::init::constant_(t, 1.5);
  CHECK(t.to_vector() == std::vector<double>(20000, 1.5));
  CHECK(t.requires_grad());
  Generator g1(42), g2(42);
  Tensor a = Tensor::empty({10}), b = Tensor::empty({10});
  nn::init::xavier_uniform_(a = Tensor::empty({2, 5}), 1, &g1);
  nn::init::xavier_uniform_(b = Tensor::empty({2, 5}), 1, &g2);
  CHECK(a.to_vector() == b.to_vector());
  CHECK_THROWS_WITH(nn::init::xavier_uniform_(t), Catch::Contains("at least 2 dims"));
}

TEST_CASE("to_(dtype) converts parameters in place, keeping handles", "[nn]") {
  Model m(11, 4, 1);
  Tensor w = m.emb->weight;
  const auto before = w.to_vector();
  m.to_(DType::f64);
  CHECK(w.dtype() == DType::f64);
  CHECK(m.layers->at<Block>(0)->attn->in_proj_weight.dtype() == DType::f64);
  CHECK(m.counter.dtype() == DType::i64);  // integer buffers stay
  auto after = w.to_vector();
  REQUIRE(after.size() == before.size());
  for (size_t i = 0; i < after.size(); ++i) CHECK(after[i] == before[i]);
  // Still a trainable leaf: a backward reaches it in the new dtype.
  Tensor ids = Tensor::from_vector(std::vector<int64_t>{1, 2, 3}, {3});
  m.emb->forward(ids).sum().backward();
  REQUIRE(w.grad().defined());
  CHECK(w.grad().dtype() == DType::f64);
}

TEST_CASE("f32 modules agree with the f64 torch reference to f32 precision", "[nn]") {
  // f64 checkpoints load into f32 modules (converted); f64 masks work on f32 scores.
  nn::MultiHeadAttention m(8, 2, 0.1, true, DType::f32);
  m.eval();
  m.load_state_dict(nn_test::state_of("mha_self"));
  Tensor x = g("mha_self.input").to(DType::f32).detach().requires_grad_();
  Tensor out = m.forward(x, x, x, g("mha_self.attn_mask"), g("mha_self.key_padding_mask"));
  CHECK(out.dtype() == DType::f32);
  // f32 rounding (eps 6e-8) through a few matmuls and a softmax: 1e-5 of the scale.
  check_close(out.to(DType::f64), g("mha_self.output"), 1e-5, "f32 mha output");
  (out * g("mha_self.probe").to(DType::f32)).sum().backward();
  check_close(x.grad().to(DType::f64), g("mha_self.grad.input"), 1e-5, "f32 mha input grad");
  check_close(m.in_proj_weight.grad().to(DType::f64), g("mha_self.grad.in_proj_weight"), 1e-5,
              "f32 mha in_proj_weight grad");
}

TEST_CASE("layer option builders build the same layers as the positional forms", "[nn]") {
  // Same seed, same draws: identical parameters and hyper-parameters.
  auto same_params = [](const nn::Module& a, const nn::Module& b) {
    const auto pa = a.named_parameters(), pb = b.named_parameters();
    REQUIRE(pa.size() == pb.size());
    for (size_t i = 0; i < pa.size(); ++i) {
      INFO(pa[i].first);
      CHECK(pa[i].first == pb[i].first);
      CHECK(pa[i].second.dtype() == pb[i].second.dtype());
      CHECK(pa[i].second.to_vector() == pb[i].second.to_vector());
    }
  };
  {
    Generator g1(5), g2(5);
    nn::Linear a(6, 3, false, DType::f64, &g1);
    nn::Linear b(nn::LinearOptions(6, 3).bias(false), DType::f64, &g2);
    CHECK_FALSE(b.bias.defined());
    CHECK(b.in_features == 6);
    same_params(a, b);
  }
  {
    Generator g1(6), g2(6);
    nn::Embedding a(9, 4, 2, DType::f32, &g1);
    nn::Embedding b(nn::EmbeddingOptions(9, 4).padding_idx(2), DType::f32, &g2);
    CHECK(b.padding_idx == 2);
    same_params(a, b);
  }
  {
    nn::LayerNorm b(nn::LayerNormOptions(8).eps(1e-12), DType::f64);
    CHECK(b.d == 8);
    CHECK(b.eps == 1e-12);
    CHECK(nn::LayerNorm(nn::LayerNormOptions(8)).eps == 1e-5);
  }
  CHECK(nn::Dropout(nn::DropoutOptions(0.3)).p == 0.3);
  CHECK(nn::Dropout(nn::DropoutOptions()).p == 0.5);
  {
    Generator g1(7), g2(7);
    nn::FeedForward a(6, 10, 0.1, "gelu", DType::f64, &g1);
    nn::FeedForward b(nn::FeedForwardOptions(6, 10).dropout(0.1).activation("gelu"), DType::f64, &g2);
    CHECK(b.activation == "gelu");
    CHECK(b.drop->p == 0.1);
    same_params(a, b);
    CHECK_THROWS_WITH(nn::FeedForward(nn::FeedForwardOptions(4, 8).activation("swish")), Catch::Contains("swish"));
  }
  {
    Generator g1(8), g2(8);
    nn::RNN a(3, 5, 2, "relu", false, 0.2, DType::f64, &g1);
    nn::RNN b(nn::RNNOptions(3, 5).num_layers(2).nonlinearity("relu").bias(false).dropout(0.2), DType::f64, &g2);
    CHECK(b.num_layers == 2);
    CHECK(b.nonlinearity == "relu");
    CHECK(b.dropout == 0.2);
    same_params(a, b);
  }
  {
    Generator g1(9), g2(9);
    nn::LSTM a(3, 4, 2, true, 0, DType::f64, &g1);
    nn::LSTM b(nn::LSTMOptions(3, 4).num_layers(2), DType::f64, &g2);
    same_params(a, b);
  }
}

TEST_CASE("to_(device/dtype) keeps parameter handles through Tensor::set_data_", "[nn]") {
  Generator g(3);
  nn::Linear m(4, 2, true, DType::f32, &g);
  Tensor w = m.weight;  // a handle taken before the move
  const std::vector<double> before = w.to_vector();
  w.set_grad(Tensor::ones({2, 4}));
  m.to_(Device::cpu());  // same device: nothing changes, the grad stays
  CHECK(w.grad().defined());
  m.to_(DType::f64);
  CHECK(w.dtype() == DType::f64);
  CHECK(w.is_same(m.weight));
  CHECK(w.to_vector() == before);
  CHECK_FALSE(w.grad().defined());
  CHECK(w.requires_grad());
}
