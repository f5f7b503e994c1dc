// SPDX-License-Identifier: BSD-3-Clause
// A first program, compiled against the installed headers and library.
#include <remora/remora.h>

#include <cmath>
#include <cstdio>

using namespace remora;

int main() {
  Tensor x = Tensor::randn({3, 4}, DType::f64).requires_grad_();
  Tensor y = (x * x).sum();
  y.backward();
  // x.grad() now equals 2 * x
  const std::vector<double> g = x.grad().to_vector(), v = x.to_vector();
  for (size_t i = 0; i < g.size(); ++i)
    if (std::fabs(g[i] - 2 * v[i]) > 1e-12) {
      std::printf("consumer: wrong gradient at %zu\n", i);
      return 1;
    }
  std::printf("consumer: ok, y = %.6f\n", y.item());
  return 0;
}
