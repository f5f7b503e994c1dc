// The CUDA backend against the CPU backend (the reference), op by op, forward
// and backward, in float32: |cuda - cpu| <= 1e-5 + 1e-4 |cpu| elementwise,
// printing the first mismatches. Then the models' losses and gradients.
//
// Every case is compiled and registered in every build. Without a usable GPU
// (no CUDA build, no device, no driver) each case says why in a WARN and
// returns, so `ctest` shows the skip; "[cuda]" runs only these.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <remora/remora.h>

#include "helpers.h"

#include "../backends/backend.h"
#include "../models/bert.h"
#include "../models/transformer_xl.h"

using namespace remora;
using remora_test::spec_of;

namespace {

const Device kCuda = Device::cuda(0);

// The reason CUDA cannot be used here, or "" when it can.
std::string no_cuda_reason() {
  std::string why;
  return cuda_is_available(0, &why) ? std::string() : why;
}

#define REMORA_REQUIRE_GPU()                                        \
  do {                                                              \
    const std::string why_ = no_cuda_reason();                      \
    if (!why_.empty()) {                                            \
      WARN("skipped: no CUDA device: " << why_);                    \
      return;                                                       \
    }                                                               \
  } while (0)

// |got - want| <= atol + rtol |want| elementwise (NaN matches NaN, inf matches
// the same inf); on failure the first mismatches are printed.
void expect_close(const Tensor& got, const Tensor& want, const std::string& what,
                  double atol = 1e-5, double rtol = 1e-4) {
  INFO(what);
  REQUIRE(got.defined() == want.defined());
  if (!got.defined()) return;
  REQUIRE(got.shape() == want.shape());
  CHECK(got.device().is_cuda());
  const std::vector<double> g = got.to_vector(), w = want.to_vector();
  int64_t bad = 0;
  std::ostringstream first;
  for (size_t i = 0; i < g.size(); ++i) {
    const bool same_special = (std::isnan(g[i]) && std::isnan(w[i])) ||
                              (std::isinf(g[i]) && g[i] == w[i]);
    if (same_special) continue;
    if (!(std::fabs(g[i] - w[i]) <= atol + rtol * std::fabs(w[i]))) {
      if (bad < 5)
        first << "\n  [" << i << "] cuda " << g[i] << " cpu " << w[i] << " (|diff| "
              << std::fabs(g[i] - w[i]) << ")";
      ++bad;
    }
  }
  if (bad) FAIL_CHECK(what << ": " << bad << " of " << g.size() << " elements differ" << first.str());
}

Tensor on_cuda_leaf(const Tensor& cpu) {
  Tensor t = cpu.detach().to(kCuda);
  if (cpu.requires_grad()) t.requires_grad_();
  return t;
}

Tensor randn(const Shape& s, uint64_t seed, bool grad = true, DType dt = DType::f32) {
  Generator g(seed);
  Tensor t = Tensor::randn(s, dt, Device::cpu(), &g);
  if (grad) t.requires_grad_();
  return t;
}
Tensor uniform(const Shape& s, uint64_t seed, double lo, double hi, bool grad = true) {
  Generator g(seed);
  Tensor t = (Tensor::rand(s, DType::f32, Device::cpu(), &g) * (hi - lo) + lo).detach();
  if (grad) t.requires_grad_();
  return t;
}

// Runs f on the CPU inputs and on CUDA copies of them; compares the outputs,
// then backpropagates the same random output gradient through both and
// compares the gradient of every input that requires grad.
void compare_op(const std::string& what, const std::vector<Tensor>& cpu_in,
                const std::function<Tensor(const std::vector<Tensor>&)>& f, double atol = 1e-5,
                double rtol = 1e-4) {
  std::vector<Tensor> gpu_in;
  for (const Tensor& t : cpu_in) gpu_in.push_back(t.defined() ? on_cuda_leaf(t) : Tensor());
  Tensor want = f(cpu_in), got = f(gpu_in);
  expect_close(got, want, what + " (forward)", atol, rtol);
  if (!want.requires_grad()) return;
  Tensor w = randn(want.shape(), 777, false);
  want.backward(w);
  got.backward(w.to(kCuda));
  for (size_t i = 0; i < cpu_in.size(); ++i)
    if (cpu_in[i].defined() && cpu_in[i].requires_grad())
      expect_close(gpu_in[i].grad(), cpu_in[i].grad(),
                   what + " (gradient of input " + std::to_string(i) + ")", atol, rtol);
}

}  // namespace

// ---------------------------------------------------------------------------

TEST_CASE("cuda: asking for a device that cannot be had is a clear Error", "[cuda]") {
  const std::string why = no_cuda_reason();
  if (why.empty()) {
    // With a GPU: an index past the last device is the error to check.
    CHECK_THROWS_AS(Tensor::zeros({2}, DType::f32, Device::cuda(999)), Error);
    CHECK_THROWS_WITH(Tensor::zeros({2}, DType::f32, Device::cuda(999)),
                      Catch::Contains("cuda:999 does not exist"));
    return;
  }
  // Without one (this build, or this machine): an Error naming the problem, never a crash.
  CHECK_THROWS_AS(Tensor::zeros({2, 3}, DType::f32, Device::cuda()), Error);
  CHECK_THROWS_WITH(Tensor::zeros({2, 3}, DType::f32, Device::cuda()),
                    Catch::Contains("cuda:0") && Catch::Contains("use device cpu"));
  CHECK_THROWS_AS(Tensor::ones({3}).to(Device::cuda()), Error);
  CHECK_FALSE(cuda_is_available());
  WARN("cuda: no GPU here (" << why << "); the error path is all that ran");
}

TEST_CASE("cuda: operands on different devices are a clear Error", "[cuda]") {
  REMORA_REQUIRE_GPU();
  Tensor a = Tensor::ones({2, 3}), b = Tensor::ones({2, 3}, DType::f32, kCuda);
  CHECK_THROWS_WITH(add(a, b), Catch::Contains("different devices"));
  CHECK_THROWS_WITH(matmul(a, b.t()), Catch::Contains("different devices"));
  CHECK_THROWS_WITH(linear(b, a), Catch::Contains("different devices"));
  CHECK_THROWS_WITH(gate(a, b, Tensor::zeros({1})), Catch::Contains("different devices"));
  RemSpec s = spec_of(1, 0, 0, 0, {}, true);
  Tensor q = Tensor::ones({1, 1, 4, 8}, DType::f32, kCuda);
  CHECK_THROWS_WITH(rsa_attention(q, q, q, s, Tensor::zeros({1}), Tensor(), Tensor(),
                                  Tensor::zeros({1}, DType::f32, kCuda)),
                    Catch::Contains("rem.eta on cpu"));
}

TEST_CASE("cuda: host <-> device copies, dtypes, the caching allocator", "[cuda]") {
  REMORA_REQUIRE_GPU();
  for (DType dt : {DType::f32, DType::f64, DType::i64}) {
    Tensor h = Tensor::arange(0, 1000, 1, dt);
    Tensor d = h.to(kCuda);
    CHECK(d.device() == kCuda);
    CHECK(d.to(Device::cpu()).to_vector() == h.to_vector());
    CHECK(d.at({17}) == 17);
  }
  // A freed block of the same size comes back without a cudaMalloc.
  void* p1;
  {
    Tensor t = Tensor::empty({1 << 20}, DType::f32, kCuda);
    p1 = t.raw_data();
  }
  Tensor t2 = Tensor::empty({1 << 20}, DType::f32, kCuda);
  CHECK(t2.raw_data() == p1);
  // Strided views and dtype conversion on the device.
  Tensor x = randn({5, 7}, 1, false);
  expect_close(x.to(kCuda).t().contiguous(), x.t().contiguous(), "transpose copy");
  expect_close(x.to(kCuda).to(DType::f64), x.to(DType::f64), "f32 -> f64");
  expect_close(x.to(kCuda).slice(1, 1, 6, 2).to(DType::i64), x.slice(1, 1, 6, 2).to(DType::i64),
               "strided f32 -> i64");
}

TEST_CASE("cuda: fills and Philox streams are the CPU's", "[cuda]") {
  REMORA_REQUIRE_GPU();
  for (DType dt : {DType::f32, DType::f64}) {
    Generator g1(1234), g2(1234);
    g1.advance(5);
    g2.advance(5);
    Tensor a = Tensor::rand({1001}, dt, Device::cpu(), &g1);
    Tensor b = Tensor::rand({1001}, dt, kCuda, &g2);
    CHECK(b.to_vector() == a.to_vector());  // bit-identical
    Tensor c = Tensor::randn({1001}, dt, Device::cpu(), &g1);
    Tensor d = Tensor::randn({1001}, dt, kCuda, &g2);
    // Box-Muller's log/cos come from different libms: f32 is identical after
    // rounding, f64 agrees to a few ulp.
    expect_close(d, c, "randn", 0, dt == DType::f32 ? 0 : 1e-14);
    Tensor x = Tensor::ones({999}, dt);
    expect_close(dropout(x.to(kCuda), 0.3, true, &g2), dropout(x, 0.3, true, &g1),
                 "dropout mask", 0, 0);
  }
  expect_close(Tensor::full({3, 4}, 2.5, DType::f32, kCuda), Tensor::full({3, 4}, 2.5), "full");
  expect_close(Tensor::arange(-3, 7, 0.5, DType::f64, kCuda), Tensor::arange(-3, 7, 0.5, DType::f64),
               "arange f64", 0, 0);
  expect_close(Tensor::arange(100, DType::i64, kCuda), Tensor::arange(100), "arange i64", 0, 0);
}

TEST_CASE("cuda: elementwise ops with broadcasting and strided operands", "[cuda]") {
  REMORA_REQUIRE_GPU();
  Tensor a = randn({4, 1, 6}, 1), b = randn({3, 6}, 2), c = randn({6, 4}, 3);
  compare_op("add", {a, b}, [](const std::vector<Tensor>& x) { return add(x[0], x[1]); });
  compare_op("sub", {a, b}, [](const std::vector<Tensor>& x) { return sub(x[0], x[1]); });
  compare_op("mul", {a, b}, [](const std::vector<Tensor>& x) { return mul(x[0], x[1]); });
  compare_op("div", {a, uniform({3, 6}, 4, 0.5, 2)},
             [](const std::vector<Tensor>& x) { return div(x[0], x[1]); });
  compare_op("maximum", {a, b}, [](const std::vector<Tensor>& x) { return maximum(x[0], x[1]); });
  compare_op("minimum", {a, b}, [](const std::vector<Tensor>& x) { return minimum(x[0], x[1]); });
  compare_op("mul of a transposed view", {b, c},
             [](const std::vector<Tensor>& x) { return mul(x[0], x[1].t().slice(0, 0, 3)); });
  for (auto cmp : {eq, ne, lt, le, gt, ge})
    compare_op("comparison", {a, b},
               [cmp](const std::vector<Tensor>& x) { return cmp(x[0], x[1].detach()); });
  compare_op("where", {a, b}, [](const std::vector<Tensor>& x) {
    return where(gt(x[0], Tensor::zeros({}, DType::f32, x[0].device())), x[0], x[1]);
  });
  compare_op("masked_fill", {a}, [](const std::vector<Tensor>& x) {
    return masked_fill(x[0], lt(x[0], Tensor::zeros({}, DType::f32, x[0].device())), -7);
  });
  Tensor i = Tensor::arange(12).reshape({3, 4});
  compare_op("i64 arithmetic", {i}, [](const std::vector<Tensor>& x) {
    return add(mul(x[0], x[0]), sub(x[0], Tensor::scalar(5, DType::i64, x[0].device())));
  });
}

TEST_CASE("cuda: unary ops and their gradients", "[cuda]") {
  REMORA_REQUIRE_GPU();
  Tensor x = randn({7, 33}, 5), pos = uniform({7, 33}, 6, 0.1, 3);
  const std::vector<std::pair<std::string, std::function<Tensor(const Tensor&)>>> any = {
      {"exp", [](const Tensor& t) { return exp(t); }},
      {"tanh", [](const Tensor& t) { return tanh(t); }},
      {"sigmoid", [](const Tensor& t) { return sigmoid(t); }},
      {"relu", [](const Tensor& t) { return relu(t); }},
      {"gelu", [](const Tensor& t) { return gelu(t); }},
      {"abs", [](const Tensor& t) { return abs(t); }},
      {"sin", [](const Tensor& t) { return sin(t); }},
      {"cos", [](const Tensor& t) { return cos(t); }},
      {"neg", [](const Tensor& t) { return neg(t); }},
      {"affine", [](const Tensor& t) { return affine(t, -1.5, 0.25); }},
      {"square", [](const Tensor& t) { return t.pow(2); }},
  };
  for (const auto& op : any)
    compare_op(op.first, {x}, [&](const std::vector<Tensor>& v) { return op.second(v[0]); });
  const std::vector<std::pair<std::string, std::function<Tensor(const Tensor&)>>> positive = {
      {"log", [](const Tensor& t) { return log(t); }},
      {"sqrt", [](const Tensor& t) { return sqrt(t); }},
      {"pow 1.7", [](const Tensor& t) { return t.pow(1.7); }},
  };
  for (const auto& op : positive)
    compare_op(op.first, {pos}, [&](const std::vector<Tensor>& v) { return op.second(v[0]); });
}

TEST_CASE("cuda: reductions", "[cuda]") {
  REMORA_REQUIRE_GPU();
  Tensor x = randn({6, 5, 700}, 7), small = randn({3, 4, 5}, 8);
  for (const Shape& dims : std::vector<Shape>{{}, {0}, {1}, {2}, {0, 2}, {1, 2}}) {
    compare_op("sum", {x}, [&](const std::vector<Tensor>& v) { return sum(v[0], dims); });
    compare_op("mean", {small}, [&](const std::vector<Tensor>& v) { return mean(v[0], dims); });
  }
  for (int64_t d : {0, 1, 2}) {
    compare_op("max", {x}, [&](const std::vector<Tensor>& v) { return v[0].max(d); });
    compare_op("max keepdim", {small}, [&](const std::vector<Tensor>& v) { return v[0].max(d, true); });
  }
  Tensor i = Tensor::arange(60).reshape({3, 20});
  compare_op("i64 sum", {i}, [](const std::vector<Tensor>& v) { return sum(v[0], {1}); });
}

TEST_CASE("cuda: matmul (cuBLAS, batched, transposed, broadcast)", "[cuda]") {
  REMORA_REQUIRE_GPU();
  CHECK_FALSE(cuda_tf32());  // off unless asked for: the tolerances below assume full f32
  compare_op("2-D", {randn({17, 33}, 1), randn({33, 9}, 2)},
             [](const std::vector<Tensor>& v) { return matmul(v[0], v[1]); });
  compare_op("batched", {randn({3, 17, 33}, 3), randn({3, 33, 9}, 4)},
             [](const std::vector<Tensor>& v) { return matmul(v[0], v[1]); });
  compare_op("broadcast batch", {randn({2, 3, 5, 8}, 5), randn({8, 6}, 6)},
             [](const std::vector<Tensor>& v) { return matmul(v[0], v[1]); });
  compare_op("transposed operands", {randn({4, 33, 17}, 7), randn({4, 9, 33}, 8)},
             [](const std::vector<Tensor>& v) {
               return matmul(v[0].transpose(-2, -1), v[1].transpose(-2, -1));
             });
  compare_op("vector", {randn({33}, 9), randn({33, 9}, 10)},
             [](const std::vector<Tensor>& v) { return matmul(v[0], v[1]); });
  compare_op("linear", {randn({2, 5, 16}, 11), randn({24, 16}, 12), randn({24}, 13)},
             [](const std::vector<Tensor>& v) { return linear(v[0], v[1], v[2]); });
  compare_op("f64", {randn({7, 5}, 14, true, DType::f64), randn({5, 3}, 15, true, DType::f64)},
             [](const std::vector<Tensor>& v) { return matmul(v[0], v[1]); }, 1e-12, 1e-12);
}

TEST_CASE("cuda: softmax, layer_norm, cross_entropy, embedding", "[cuda]") {
  REMORA_REQUIRE_GPU();
  Tensor x = randn({4, 3, 77}, 1), wide = randn({3, 5000}, 2);
  compare_op("softmax", {x}, [](const std::vector<Tensor>& v) { return softmax(v[0], -1); });
  compare_op("softmax over dim 1", {x}, [](const std::vector<Tensor>& v) { return softmax(v[0], 1); });
  compare_op("log_softmax", {wide}, [](const std::vector<Tensor>& v) { return log_softmax(v[0], -1); });
  compare_op("layer_norm", {x, randn({77}, 3), randn({77}, 4)},
             [](const std::vector<Tensor>& v) { return layer_norm(v[0], v[1], v[2], 1e-5); });
  compare_op("layer_norm without affine", {x},
             [](const std::vector<Tensor>& v) { return layer_norm(v[0], Tensor(), Tensor(), 1e-5); });
  compare_op("layer_norm many rows", {randn({3000, 64}, 5), randn({64}, 6), randn({64}, 7)},
             [](const std::vector<Tensor>& v) { return layer_norm(v[0], v[1], v[2], 1e-12); });
  Tensor target = Tensor::from_vector(std::vector<int64_t>{3, -100, 4999, 0, 17, -100},
                                      {6}, DType::i64);
  Tensor logits = randn({6, 5000}, 8);
  for (Reduction r : {Reduction::mean, Reduction::sum, Reduction::none})
    compare_op("cross_entropy", {logits}, [&](const std::vector<Tensor>& v) {
      return cross_entropy(v[0], target.to(v[0].device()), -100, r);
    });
  Tensor ids = Tensor::from_vector(std::vector<int64_t>{1, 5, 1, 0, 7, 5, 5}, {7}, DType::i64);
  compare_op("embedding (duplicate ids meet in atomicAdd)", {randn({9, 12}, 9)},
             [&](const std::vector<Tensor>& v) { return embedding(v[0], ids.to(v[0].device())); });
  compare_op("index_select dim 1", {randn({3, 9, 4}, 10)}, [&](const std::vector<Tensor>& v) {
    return index_select(v[0], 1, ids.to(v[0].device()));
  });
  compare_op("cat, stack, slices", {randn({2, 3}, 11), randn({2, 5}, 12)},
             [](const std::vector<Tensor>& v) {
               return stack({cat({v[0], v[1]}, 1).slice(1, 1, 7), v[1].slice(1, 0, 6)}, 0);
             });
}

TEST_CASE("cuda: REM matrix and the chunked scan", "[cuda][rem]") {
  REMORA_REQUIRE_GPU();
  // Long enough for many chunks (32 steps per residue per chunk), with memory,
  // dilations, cyclic pairs, truncation, bidirectional, padding and carried state.
  struct Case {
    std::string name;
    RemSpec spec;
    int64_t Lq, Lk;
    bool padding;
  };
  const std::vector<Case> cases = {
      {"masked regular + cyclic", spec_of(1, 1, 0, 0, {}, true), 150, 150, false},
      {"masked dilated, memory", spec_of(1, 1, 1, 1, {3, 2}, true), 100, 230, false},
      {"max_distance", spec_of(1, 1, 1, 1, {2, 3}, true, 40), 120, 140, false},
      {"unmasked", spec_of(1, 1, 1, 0, {2}, false), 130, 130, true},
      {"unmasked max_distance, memory", spec_of(0, 1, 0, 1, {4}, false, 33), 70, 90, true},
  };
  for (const Case& c : cases) {
    const int64_t B = 2, Hr = c.spec.num_heads(), D = 19;
    Tensor eta = uniform({c.spec.num_eta()}, 1, -2, 2);
    Tensor nu = uniform({c.spec.num_cyclic()}, 2, 0, 3), th = uniform({c.spec.num_cyclic()}, 3, -3, 3);
    Tensor v = randn({B, Hr, c.Lk, D}, 4);
    Tensor kp;
    if (c.padding) {
      kp = Tensor::zeros({B, c.Lk}, DType::i64);
      kp.select(0, 1).slice(0, c.Lk - 9, c.Lk).fill_(1);
    }
    compare_op(c.name + ": rem_matrix", {eta, nu, th}, [&](const std::vector<Tensor>& x) {
      return rem_matrix(c.spec, x[0], x[1], x[2], c.Lq, c.Lk,
                        kp.defined() ? kp.to(x[0].device()) : Tensor());
    });
    compare_op(c.name + ": rem_apply", {eta, nu, th, v}, [&](const std::vector<Tensor>& x) {
      return rem_apply(c.spec, x[0], x[1], x[2], x[3], c.Lq,
                       kp.defined() ? kp.to(x[0].device()) : Tensor());
    });
  }
  // Carried state in and out (masked, no max_distance), with dilation 3 (dmax 3).
  RemSpec s = spec_of(1, 1, 1, 0, {3}, true);
  const int64_t B = 2, Hr = s.num_heads(), D = 8, L = 97;
  Tensor eta = uniform({2}, 5, -2, 2), nu = uniform({1}, 6, 0, 3), th = uniform({1}, 7, -3, 3);
  Tensor st = randn({B, Hr, 3, 2, D}, 8);
  compare_op("carried state", {eta, nu, th, randn({B, Hr, L, D}, 9), st},
             [&](const std::vector<Tensor>& x) {
               Tensor so;
               Tensor y = rem_apply(s, x[0], x[1], x[2], x[3], L, Tensor(), x[4], &so);
               return cat({y.reshape({-1}), so.reshape({-1})}, 0);
             });
}

TEST_CASE("cuda: RSA attention, fused kernel against the CPU", "[cuda][rsa]") {
  REMORA_REQUIRE_GPU();
  struct Case {
    std::string name;
    RemSpec spec;
    int64_t H, Lq, Lk, D;
    bool causal, padding, learned_bias, dropout, carry;
  };
  const std::vector<Case> cases = {
      {"causal, D 64", spec_of(1, 1, 0, 0, {}, true), 4, 130, 130, 64, true, false, false, false, false},
      {"memory, D 32", spec_of(2, 0, 0, 0, {}, true), 3, 70, 110, 32, true, false, false, false, false},
      {"no mask, D 96 (the 128-wide kernel)", spec_of(1, 0, 1, 0, {2}, true), 2, 45, 45, 96, false, false, false, false, false},
      {"bidirectional, padding", spec_of(1, 1, 0, 0, {}, false), 3, 66, 66, 16, false, true, false, false, false},
      {"learned bias (dS)", spec_of(1, 0, 0, 0, {}, true), 2, 50, 80, 24, true, false, true, false, false},
      {"dropout", spec_of(1, 1, 0, 0, {}, true), 3, 40, 40, 16, true, false, false, true, false},
      {"carry mode", spec_of(1, 0, 1, 0, {2}, true), 3, 33, 66, 16, true, false, false, false, true},
      {"plain heads only", spec_of(0, 0, 0, 0, {}, true), 2, 37, 37, 8, true, false, false, false, false},
  };
  for (const Case& c : cases) {
    const int64_t B = 2, Hr = c.spec.num_heads();
    Tensor q = randn({B, c.H, c.Lq, c.D}, 1), k = randn({B, c.H, c.Lk, c.D}, 2),
           v = randn({B, c.H, c.Lk, c.D}, 3);
    Tensor eta = c.spec.num_eta() ? uniform({c.spec.num_eta()}, 4, -2, 2) : Tensor();
    Tensor nu = c.spec.num_cyclic() ? uniform({c.spec.num_cyclic()}, 5, 0, 3) : Tensor();
    Tensor th = c.spec.num_cyclic() ? uniform({c.spec.num_cyclic()}, 6, -3, 3) : Tensor();
    Tensor mu = Hr ? uniform({Hr}, 7, -2, 2) : Tensor();
    Tensor mask;
    const int64_t M = c.Lk - c.Lq;
    if (c.causal) {
      Tensor blocked = triu(Tensor::ones({c.Lq, c.Lk}, DType::i64), 1 + M);
      mask = masked_fill(Tensor::zeros({c.Lq, c.Lk}), blocked, -INFINITY);
    }
    if (c.learned_bias) mask = add(mask, randn({c.H, c.Lq, c.Lk}, 8, false)).detach().requires_grad_();
    Tensor kp;
    if (c.padding) {
      kp = Tensor::zeros({B, c.Lk}, DType::f32);
      kp.select(0, 0).slice(0, c.Lk - 5, c.Lk).fill_(1);
    }
    Tensor state = c.carry ? randn({B, Hr, 2, 2, c.D}, 9, false) : Tensor();
    for (bool reference : {false, true}) {
      if (reference && (c.dropout || c.carry)) continue;
      compare_op(c.name + (reference ? " (CUDA reference path)" : ""),
                 {q, k, v, eta, nu, th, mu, mask},
                 [&](const std::vector<Tensor>& x) {
                   RsaOptions o;
                   Generator gen(42);
                   o.train = c.dropout;
                   o.dropout = c.dropout ? 0.25 : 0;
                   o.gen = &gen;
                   Tensor so;
                   if (c.carry) {
                     o.carry = true;
                     o.rem_state_in = state.to(x[0].device());
                     o.rem_state_out = &so;
                   }
                   const Tensor kpd = kp.defined() ? kp.to(x[0].device()) : Tensor();
                   // The CPU always runs the composed path; on CUDA the fused kernel,
                   // or (reference) the composed ops on the CUDA backend.
                   Tensor out = reference && x[0].device().is_cuda()
                                    ? rsa_attention_reference(x[0], x[1], x[2], c.spec, x[3], x[4],
                                                              x[5], x[6], x[7], kpd, o)
                                    : rsa_attention(x[0], x[1], x[2], c.spec, x[3], x[4], x[5],
                                                    x[6], x[7], kpd, o);
                   if (c.carry) out = add(out, sum(so));  // the carried state must match too
                   return out;
                 });
    }
  }
}

// ---- the fused RSA kernel: it must actually run (no silent fallback) ----

namespace {

// Plain softmax attention in f64 on the CPU (the mathematics of the fused
// entry with Hr = 0, no bias, no dropout): O [B, H, Lq, D], lse [B, H, Lq].
void attention_f64(const Tensor& q, const Tensor& k, const Tensor& v, double scale, Tensor* O, Tensor* lse) {
  Tensor s = matmul(q.to(DType::f64), k.to(DType::f64).transpose(-2, -1)) * scale;
  Tensor m = max(s, -1, true);
  Tensor e = exp(s - m);
  Tensor z = sum(e, {-1}, true);
  *O = matmul(e / z, v.to(DType::f64));
  *lse = (log(z) + m).squeeze(-1);
}

}  // namespace

TEST_CASE("cuda: the fused RSA kernel runs on the device (its entry returns true)", "[cuda][rsa][backends]") {
  // Here too: the CPU backend has no fused kernel, so its entry declines and
  // ops/ runs the composed path (the assertion below is what catches a device
  // backend that silently does the same).
  {
    RsaFusedProblem p;
    p.B = p.H = p.Lq = p.Lk = p.D = 1;
    float q = 1, o = 0, l = 0;
    CHECK_FALSE(backend(Device::cpu()).rsa_attention_fused(DType::f32, p, &q, &q, &q, nullptr, nullptr, &o,
                                                          nullptr, &l));
  }
  REMORA_REQUIRE_GPU();
  struct Shape4 {
    DType dt;
    int64_t B, H, Lq, Lk, D;
  };
  for (const Shape4& c : {Shape4{DType::f32, 2, 3, 37, 53, 64}, Shape4{DType::f32, 1, 2, 1, 1100, 128},
                          Shape4{DType::f32, 2, 2, 19, 19, 33}, Shape4{DType::f64, 2, 3, 29, 41, 64},
                          Shape4{DType::f64, 1, 1, 5, 3, 7}}) {
    INFO(dtype_name(c.dt) << " B " << c.B << " H " << c.H << " Lq " << c.Lq << " Lk " << c.Lk << " D " << c.D);
    Tensor q = randn({c.B, c.H, c.Lq, c.D}, 1, false, c.dt), k = randn({c.B, c.H, c.Lk, c.D}, 2, false, c.dt),
           v = randn({c.B, c.H, c.Lk, c.D}, 3, false, c.dt);
    RsaFusedProblem p;
    p.B = c.B;
    p.H = c.H;
    p.Hr = 0;
    p.Lq = c.Lq;
    p.Lk = c.Lk;
    p.D = c.D;
    p.scale = 1.0 / std::sqrt(double(c.D));
    Tensor qd = q.to(kCuda), kd = k.to(kCuda), vd = v.to(kCuda);
    // Poisoned outputs: every element must be written.
    Tensor O = Tensor::full({c.B, c.H, c.Lq, c.D}, NAN, c.dt, kCuda);
    Tensor lse = Tensor::full({c.B, c.H, c.Lq}, NAN, c.dt, kCuda);
    const bool ran = backend(kCuda).rsa_attention_fused(c.dt, p, qd.raw_data(), kd.raw_data(), vd.raw_data(),
                                                        nullptr, nullptr, O.raw_data(), nullptr, lse.raw_data());
    REQUIRE(ran);
    Tensor Ow, lw;
    attention_f64(q, k, v, p.scale, &Ow, &lw);
    const double tol = c.dt == DType::f32 ? 1e-4 : 1e-10;
    expect_close(O, Ow.to(c.dt), "fused O", tol, tol);
    expect_close(lse, lw.to(c.dt), "fused lse", tol, tol);
    // The backward entry runs too (dS requested: the learned-bias path).
    Tensor dO = randn({c.B, c.H, c.Lq, c.D}, 4, false, c.dt).to(kCuda);
    Tensor dq = Tensor::full(q.shape(), NAN, c.dt, kCuda), dk = Tensor::full(k.shape(), NAN, c.dt, kCuda),
           dv = Tensor::full(v.shape(), NAN, c.dt, kCuda), dS = Tensor::full({c.B, c.H, c.Lq, c.Lk}, NAN, c.dt, kCuda);
    REQUIRE(backend(kCuda).rsa_attention_fused_backward(c.dt, p, qd.raw_data(), kd.raw_data(), vd.raw_data(),
                                                        nullptr, O.raw_data(), nullptr, lse.raw_data(),
                                                        dO.raw_data(), dq.raw_data(), dk.raw_data(), dv.raw_data(),
                                                        dS.raw_data()));
    // Against autograd through the f64 composition.
    Tensor q6 = q.to(DType::f64).requires_grad_(), k6 = k.to(DType::f64).requires_grad_(),
           v6 = v.to(DType::f64).requires_grad_();
    Tensor O6, l6;
    attention_f64(q6, k6, v6, p.scale, &O6, &l6);
    O6.backward(dO.to(Device::cpu()).to(DType::f64));
    expect_close(dq, q6.grad().to(c.dt), "fused dq", tol, tol);
    expect_close(dk, k6.grad().to(c.dt), "fused dk", tol, tol);
    expect_close(dv, v6.grad().to(c.dt), "fused dv", tol, tol);
    int64_t bad = 0;
    for (double x : dS.to_vector()) bad += !std::isfinite(x);
    CHECK(bad == 0);  // every dS element written
  }
}

// ---- SRU: the backend entries against a naive host loop ----

TEST_CASE("cuda: SRU recurrence, forward and backward", "[cuda][sru]") {
  REMORA_REQUIRE_GPU();
  // The CUDA kernels against the CPU backend's (which tests/test_srupp.cpp checks
  // against the composed-op reference and PyTorch), same inputs, f32.
  for (int64_t k : {3, 4})
    for (bool bidir : {false, true}) {
      SruProblem p;
      p.L = 37;
      p.B = 3;
      p.D = 10;
      p.k = k;
      p.bidirectional = bidir;
      Tensor U = randn({p.L, p.B, p.D, k}, 1, false), x = randn({p.L, p.B, p.D}, 2, false);
      Tensor v = uniform({2, p.D}, 3, -1, 1, false), b = randn({2, p.D}, 4, false);
      Tensor c0 = randn({p.B, p.D}, 5, false), mask = uniform({p.B, p.D}, 6, 0, 2, false);
      Tensor dh = randn({p.L, p.B, p.D}, 7, false), dc = randn({p.L, p.B, p.D}, 8, false);
      Tensor dcl = randn({p.B, p.D}, 9, false);
      struct Out {
        Tensor h, c, cl, dU, dx, dv, db, dc0;
      };
      auto run_on = [&](Device d) {
        auto g = [&](const Tensor& t) { return t.to(d); };
        Tensor Ug = g(U), xg = g(x), vg = g(v), bg = g(b), c0g = g(c0), mg = g(mask);
        Out o;
        o.h = Tensor::empty({p.L, p.B, p.D}, DType::f32, d);
        o.c = Tensor::empty({p.L, p.B, p.D}, DType::f32, d);
        o.cl = Tensor::empty({p.B, p.D}, DType::f32, d);
        Backend& be = backend(d);
        be.sru_forward(DType::f32, p, Ug.raw_data(), k == 3 ? xg.raw_data() : nullptr, vg.raw_data(),
                       bg.raw_data(), c0g.raw_data(), mg.raw_data(), o.h.raw_data(), o.c.raw_data(),
                       o.cl.raw_data());
        o.dU = Tensor::empty({p.L, p.B, p.D, k}, DType::f32, d);
        o.dx = Tensor::zeros({p.L, p.B, p.D}, DType::f32, d);
        o.dv = Tensor::empty({2, p.D}, DType::f32, d);
        o.db = Tensor::empty({2, p.D}, DType::f32, d);
        o.dc0 = Tensor::empty({p.B, p.D}, DType::f32, d);
        Tensor dhg = g(dh), dcg = g(dc), dclg = g(dcl);
        be.sru_backward(DType::f32, p, Ug.raw_data(), k == 3 ? xg.raw_data() : nullptr, vg.raw_data(),
                        bg.raw_data(), c0g.raw_data(), mg.raw_data(), o.c.raw_data(), dhg.raw_data(),
                        dcg.raw_data(), dclg.raw_data(), o.dU.raw_data(), k == 3 ? o.dx.raw_data() : nullptr,
                        o.dv.raw_data(), o.db.raw_data(), o.dc0.raw_data());
        return o;
      };
      const Out want = run_on(Device::cpu()), got = run_on(kCuda);
      const std::string what = "sru k=" + std::to_string(k) + (bidir ? " bidirectional" : "");
      expect_close(got.h, want.h, what + " h");
      expect_close(got.c, want.c, what + " c");
      expect_close(got.cl, want.cl, what + " c_last");
      expect_close(got.dU, want.dU, what + " dU");
      if (k == 3) expect_close(got.dx, want.dx, what + " dx");
      expect_close(got.dv, want.dv, what + " dv");
      expect_close(got.db, want.db, what + " db");
      expect_close(got.dc0, want.dc0, what + " dc0");
    }
}

// ---- the models: loss and every parameter gradient, CUDA against CPU ----

namespace {

template <typename Model>
void compare_model_grads(Model& cpu, Model& gpu, const Tensor& loss_cpu, const Tensor& loss_gpu,
                         const std::string& what) {
  expect_close(loss_gpu, loss_cpu, what + " loss");
  const nn::NamedTensors pc = cpu.named_parameters(), pg = gpu.named_parameters();
  REQUIRE(pc.size() == pg.size());
  for (size_t i = 0; i < pc.size(); ++i) {
    REQUIRE(pc[i].first == pg[i].first);
    const Tensor& gc = pc[i].second.grad();
    const Tensor& gg = pg[i].second.grad();
    REQUIRE(gc.defined() == gg.defined());
    if (gc.defined()) expect_close(gg, gc, what + " grad of " + pc[i].first, 1e-4, 1e-3);
  }
}

}  // namespace

TEST_CASE("cuda: Transformer-XL and RSA-XL loss and gradients match the CPU", "[cuda][xl]") {
  REMORA_REQUIRE_GPU();
  for (const std::string attention : {"softmax", "rsa"}) {
    models::XLConfig c;
    c.n_token = 50;
    c.n_layer = 2;
    c.n_head = 4;
    c.d_model = 64;
    c.d_inner = 128;
    c.mem_len = 12;
    c.dropout = 0.1;  // Philox masks are the same on both devices
    c.dropatt = 0.1;
    c.attention = attention;
    if (attention == "rsa") {
      c.rem = spec_of(1, 1, 0, 0, {}, true);
    }
    Generator g1(7), g2(7);
    models::TransformerXL cpu(c, DType::f32, &g1), gpu(c, DType::f32, &g2);
    gpu.to_(kCuda);
    Generator gi(3);
    Tensor ids = (Tensor::rand({2, 41}, DType::f64, Device::cpu(), &gi) * 49.0).to(DType::i64);
    Tensor in = ids.slice(1, 0, 40), tgt = ids.slice(1, 1, 41);
    // Two segments, so that memory (and, for RSA, the scan over memory) is used.
    models::XLState sc, sg;
    for (int seg = 0; seg < 2; ++seg) {
      Tensor x = in.slice(1, seg * 20, seg * 20 + 20), y = tgt.slice(1, seg * 20, seg * 20 + 20);
      cpu.zero_grad();
      gpu.zero_grad();
      auto oc = cpu.forward(x, sc);
      auto og = gpu.forward(x.to(kCuda), sg);
      Tensor lc = models::TransformerXL::loss(oc.logits, y);
      Tensor lg = models::TransformerXL::loss(og.logits, y.to(kCuda));
      lc.backward();
      lg.backward();
      compare_model_grads(cpu, gpu, lc, lg, attention + " XL segment " + std::to_string(seg));
      sc = oc.state;
      sg = og.state;
    }
  }
}

TEST_CASE("cuda: BERT and RSA-BERT loss and gradients match the CPU", "[cuda][bert]") {
  REMORA_REQUIRE_GPU();
  for (const std::string attention : {"softmax", "rsa"}) {
    models::BertConfig c;
    c.vocab_size = 60;
    c.hidden_size = 64;
    c.num_hidden_layers = 2;
    c.num_attention_heads = 4;
    c.intermediate_size = 128;
    c.max_position_embeddings = 64;
    c.hidden_dropout_prob = 0.1;
    c.attention_probs_dropout_prob = 0.1;
    c.attention = attention;
    if (attention == "rsa") c.rem = spec_of(1, 1, 0, 0, {}, false);
    Generator g1(11), g2(11);
    models::BertForMaskedLM cpu(c, DType::f32, &g1), gpu(c, DType::f32, &g2);
    gpu.to_(kCuda);
    Generator gi(5);
    Tensor ids = (Tensor::rand({3, 30}, DType::f64, Device::cpu(), &gi) * 59.0).to(DType::i64);
    Tensor am = Tensor::ones({3, 30}, DType::i64);
    am.select(0, 2).slice(0, 24, 30).fill_(0);  // padding in one sequence
    Tensor labels = where(lt(Tensor::rand({3, 30}, DType::f64, Device::cpu(), &gi),
                             Tensor::scalar(0.3, DType::f64)),
                          ids, Tensor::full({3, 30}, -100, DType::i64));
    auto oc = cpu.forward(ids, am);
    auto og = gpu.forward(ids.to(kCuda), am.to(kCuda));
    Tensor lc = models::BertForMaskedLM::mlm_loss(oc.mlm_logits, labels);
    Tensor lg = models::BertForMaskedLM::mlm_loss(og.mlm_logits, labels.to(kCuda));
    lc.backward();
    lg.backward();
    compare_model_grads(cpu, gpu, lc, lg, attention + " BERT");
  }
}
