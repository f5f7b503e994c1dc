// SPDX-License-Identifier: BSD-3-Clause
// An MLP regression, written as one writes it in libtorch: a module class with
// a handle (REMORA_MODULE is TORCH_MODULE), nn::Sequential, an optimizer with an
// options builder, a scheduler, train / eval.
//
// The task: y = sin(3 x1) + x2^2 / 2 on points of [-1, 1]^2. The program exits
// non-zero unless the validation MSE ends below 0.002 (it starts near 0.6).
#include <remora/remora.h>

#include <cmath>
#include <cstdio>
#include <iostream>

using namespace remora;
namespace F = remora::nn::functional;

struct RegressorImpl : nn::Module {
  explicit RegressorImpl(int64_t hidden) {
    body = register_module("body", nn::Sequential(nn::Linear(2, hidden), nn::SiLU(),  //
                                                  nn::Linear(hidden, hidden), nn::SiLU()));
    head = register_module("head", nn::Linear(hidden, 1));
    for (auto& p : named_parameters())  // torch: for (auto& p : named_parameters()) ...
      if (p.key().find("weight") != std::string::npos) nn::init::kaiming_uniform_(p.value(), std::sqrt(5.0));
  }
  Tensor forward(const Tensor& x) { return head(body(x)); }

  nn::Sequential body{nullptr};
  nn::Linear head{nullptr};
};
REMORA_MODULE(Regressor);

// A batch of n points and their targets.
static std::pair<Tensor, Tensor> make_data(int64_t n, Generator& g) {
  Tensor x = Tensor::rand({n, 2}, DType::f32, Device::cpu(), &g) * 2.0 - 1.0;
  Tensor x1 = x.narrow(1, 0, 1), x2 = x.narrow(1, 1, 1);
  Tensor y = sin(x1 * 3.0) + x2 * x2 * 0.5;
  return {x, y};
}

int main() {
  manual_seed(0);
  Generator data(1);
  // (named tensors, not a structured binding: a lambda below captures them)
  const std::pair<Tensor, Tensor> val = make_data(512, data);
  const Tensor x_val = val.first, y_val = val.second;

  Regressor model(64);
  std::cout << model << "\n";

  optim::Adam opt(model->parameters(), optim::AdamOptions(3e-3).betas({0.9, 0.99}));
  optim::StepLR sched(opt, /*step_size=*/400, /*gamma=*/0.3);

  auto val_loss = [&] {
    NoGradGuard no_grad;
    model->eval();
    const double l = F::mse_loss(model(x_val), y_val).item();
    model->train();
    return l;
  };
  const double before = val_loss();
  for (int step = 1; step <= 1200; ++step) {
    auto [x, y] = make_data(128, data);
    opt.zero_grad();
    Tensor loss = F::mse_loss(model(x), y);
    loss.backward();
    opt.step();
    sched.step();
    if (step % 300 == 0) std::printf("step %4d  train mse %.5f  lr %.2e\n", step, loss.item(), opt.lr());
  }
  const double after = val_loss();
  std::printf("validation mse: %.5f before training, %.5f after\n", before, after);
  if (!(after < 0.002)) {
    std::fprintf(stderr, "FAIL: validation mse %.5f is not below 0.002\n", after);
    return 1;
  }
  std::printf("OK\n");
  return 0;
}
