// SPDX-License-Identifier: BSD-3-Clause
// An RSA attention layer (nn::RSAAttention: softmax heads mixed with recurrent
// REM heads, nn/rsa.h) inside a model of your own, trained on a task that needs
// to know where the previous token is: at every position, output the token
// before it. There are no positional encodings, so plain softmax heads cannot
// tell the previous token from any other past token; the REM heads' decaying
// recurrence can. The same model with plain heads only (nn::MultiHeadAttention)
// is the control.
//
// Exits non-zero unless the RSA model reaches 95% accuracy and the control
// stays below 60%.
#include <remora/remora.h>

#include <cstdio>
#include <iostream>

using namespace remora;
namespace F = remora::nn::functional;

struct DelayNetImpl : nn::Module {
  DelayNetImpl(int64_t vocab, int64_t d, bool use_rem) {
    emb = register_module("emb", nn::Embedding(vocab, d));
    RemSpec spec;
    spec.regular = use_rem ? 2 : 0;  // 2 of the 4 heads are REM heads (causal: masked)
    attn = register_module("attn", std::make_shared<nn::RSAAttention>(d, /*num_heads=*/4, spec));
    norm = register_module("norm", nn::LayerNorm(d));
    ff = register_module("ff", nn::Sequential(nn::Linear(d, 2 * d), nn::GELU(), nn::Linear(2 * d, d)));
    head = register_module("head", nn::Linear(d, vocab));
  }
  // ids i64 [B, L] -> logits [B, L, vocab].
  Tensor forward(const Tensor& ids) {
    Tensor h = emb(ids);
    h = norm(h + attn->self_attention(h, Tensor(), Tensor(), /*causal=*/true));
    return head(h + ff(h));
  }
  nn::Embedding emb{nullptr};
  std::shared_ptr<nn::RSAAttention> attn;
  nn::LayerNorm norm{nullptr};
  nn::Sequential ff{nullptr};
  nn::Linear head{nullptr};
};
REMORA_MODULE(DelayNet);

// A batch of random tokens and the targets "the previous token" (-100 at t = 0).
static std::pair<Tensor, Tensor> batch(int64_t B, int64_t L, int64_t V, Generator& g) {
  Tensor x = (Tensor::rand({B, L}, DType::f64, Device::cpu(), &g) * double(V)).to(DType::i64);
  std::vector<int64_t> xs = x.to_i64_vector(), ys(xs.size(), -100);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 1; t < L; ++t) ys[size_t(b * L + t)] = xs[size_t(b * L + t - 1)];
  return {x, Tensor::from_vector(ys, {B, L})};
}

static double train_and_score(bool use_rem) {
  const int64_t V = 10, d = 32, B = 16, L = 24;
  manual_seed(5);
  DelayNet net(V, d, use_rem);
  optim::AdamW opt(net->parameters(), optim::AdamWOptions(3e-3).weight_decay(0));
  Generator g(11);
  for (int step = 0; step < 400; ++step) {
    auto [x, y] = batch(B, L, V, g);
    opt.zero_grad();
    Tensor loss = F::cross_entropy(net(x), y);  // classes on the last dim, -100 ignored
    loss.backward();
    opt.step();
  }
  NoGradGuard no_grad;
  net->eval();
  auto [x, y] = batch(64, L, V, g);
  std::vector<int64_t> pred = argmax(net(x), -1).to_i64_vector(), want = y.to_i64_vector();
  int64_t right = 0, counted = 0;
  for (size_t i = 0; i < want.size(); ++i)
    if (want[i] != -100) right += pred[i] == want[i], ++counted;
  const double acc = double(right) / double(counted);
  std::printf("%s: accuracy %.3f\n", use_rem ? "RSA (2 REM + 2 softmax heads)" : "control (4 softmax heads)", acc);
  if (use_rem) std::cout << net << "\n";
  return acc;
}

int main() {
  const double rsa = train_and_score(true), control = train_and_score(false);
  int failures = 0;
  if (!(rsa >= 0.95)) std::fprintf(stderr, "FAIL: the RSA model's accuracy %.3f is below 0.95\n", rsa), ++failures;
  if (!(control < 0.6)) std::fprintf(stderr, "FAIL: the control's accuracy %.3f is not below 0.6\n", control), ++failures;
  if (failures) return 1;
  std::printf("OK\n");
  return 0;
}
