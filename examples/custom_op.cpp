// SPDX-License-Identifier: BSD-3-Clause
// A custom differentiable op with a hand-written backward, checked in float64
// against central differences (remora::gradcheck), then used inside a model.
//
// libtorch writes such an op as a torch::autograd::Function with forward() and
// backward(); in Remora the forward is plain ops run without history, and
// record() attaches the backward (a closure over what it saved) to the output.
//
// The program exits non-zero when the gradient check of the op fails, when it
// PASSES for a deliberately wrong backward (the check must catch that), when the
// hand-written gradient differs from autograd's of the same formula, or when the
// model using the op does not learn.
#include <remora/remora.h>

#include <cmath>
#include <cstdio>

using namespace remora;

// swish(x) = x * sigmoid(beta x);  d/dx = s + beta x s (1 - s), s = sigmoid(beta x).
Tensor swish(const Tensor& x, double beta) {
  Tensor xd = x.detach(), s, y;
  {
    NoGradGuard no_grad;  // the forward itself records nothing
    s = sigmoid(xd * beta);
    y = xd * s;
  }
  // One gradient per input, from the gradient of the output (g[0]). The closure
  // keeps s and x alive until backward; capture detached tensors, never y itself.
  return record("swish", {x}, y, [xd, s, beta](std::vector<Tensor>& g) {
    Tensor dydx = s + xd * s * (1.0 - s) * beta;
    return std::vector<Tensor>{g[0] * dydx};
  });
}

// The same op with a backward that forgets the second term: gradcheck must fail.
Tensor swish_wrong(const Tensor& x, double beta) {
  Tensor xd = x.detach(), s, y;
  {
    NoGradGuard no_grad;
    s = sigmoid(xd * beta);
    y = xd * s;
  }
  return record("swish_wrong", {x}, y, [s](std::vector<Tensor>& g) { return std::vector<Tensor>{g[0] * s}; });
}

int main() {
  int failures = 0;
  auto fail = [&](const char* what) {
    std::fprintf(stderr, "FAIL: %s\n", what);
    ++failures;
  };

  // 1. The float64 gradient check: the full Jacobian against central differences.
  Generator g(7);
  Tensor x = Tensor::randn({4, 5}, DType::f64, Device::cpu(), &g).requires_grad_();
  GradcheckResult ok = gradcheck([](const std::vector<Tensor>& in) { return swish(in[0], 1.7); }, {x});
  std::printf("gradcheck swish: %s (max |error| %.2e over %lld entries)\n", ok.ok ? "passed" : "FAILED",
              ok.max_abs_err, static_cast<long long>(ok.entries));
  if (!ok.ok) fail(ok.message.c_str());

  GradcheckResult bad = gradcheck([](const std::vector<Tensor>& in) { return swish_wrong(in[0], 1.7); }, {x});
  std::printf("gradcheck of a wrong backward: %s\n", bad.ok ? "passed (wrong!)" : "caught, as it should be");
  if (bad.ok) fail("gradcheck did not catch a wrong backward");

  // 2. The hand-written gradient equals autograd's through the composed formula.
  swish(x, 1.7).sum().backward();
  Tensor mine = x.grad().clone();
  x.zero_grad();
  (x * sigmoid(x * 1.7)).sum().backward();
  const double diff = (mine - x.grad()).abs().max().item();
  std::printf("max |hand-written - autograd| = %.2e\n", diff);
  if (!(diff < 1e-12)) fail("the hand-written gradient differs from autograd's");

  // 3. The op inside a model: nn::Functional binds beta; the model learns y = |x|.
  manual_seed(3);
  nn::Sequential model(nn::Linear(1, 16), nn::Functional(swish, 1.0), nn::Linear(16, 1));
  optim::Adam opt(model->parameters(), optim::AdamOptions(1e-2));
  Tensor xs = Tensor::arange(-1.0, 1.0, 1.0 / 32, DType::f32).unsqueeze(1), ys = xs.abs();
  double first = 0, last = 0;
  for (int step = 0; step < 600; ++step) {
    opt.zero_grad();
    Tensor loss = mse_loss(model(xs), ys);
    loss.backward();
    opt.step();
    (step == 0 ? first : last) = loss.item();
  }
  std::printf("model with the custom op: mse %.4f -> %.5f\n", first, last);
  if (!(last < 0.01 && last < first / 5)) fail("the model using the custom op did not learn");

  if (failures) return 1;
  std::printf("OK\n");
  return 0;
}
