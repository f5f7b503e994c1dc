// A tiny autograd demo: fits a 2-layer MLP to y = sin(3x) with Adam-free SGD
// and prints the loss falling.
#include <cstdio>
#include <remora/remora.h>

using namespace remora;

int main() {
  manual_seed(0);
  const int64_t N = 256, H = 32;
  Tensor x = Tensor::rand({N, 1}) * 2.0 - 1.0;
  Tensor y = sin(x * 3.0);
  Tensor w1 = (Tensor::randn({H, 1}) * 1.0).requires_grad_();
  Tensor b1 = Tensor::zeros({H}).requires_grad_();
  Tensor w2 = (Tensor::randn({1, H}) * 0.2).requires_grad_();
  Tensor b2 = Tensor::zeros({1}).requires_grad_();
  std::vector<Tensor> params{w1, b1, w2, b2};
  for (int step = 0; step <= 2000; ++step) {
    Tensor pred = linear(tanh(linear(x, w1, b1)), w2, b2);
    Tensor loss = mean(pow(pred - y, 2));
    for (Tensor& p : params) p.zero_grad();
    loss.backward();
    {
      NoGradGuard ng;
      for (Tensor& p : params) p.add_(p.grad(), -0.1);
    }
    if (step % 200 == 0) std::printf("step %4d  loss %.6f\n", step, loss.item());
  }
  return 0;
}
