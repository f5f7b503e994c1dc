#include "init.h"

#include <cmath>

#include "../core/autograd.h"
#include "../ops/ops.h"

namespace remora {
namespace nn {
namespace init {

namespace {
void check_float(const Tensor& t, const char* op) {
  REMORA_CHECK(t.defined(), op << ": the tensor is undefined");
  REMORA_CHECK(is_floating(t.dtype()), op << ": expected a floating tensor, got " << t.str());
}
}  // namespace

Tensor& normal_(Tensor& t, double mean, double std, Generator* gen) {
  check_float(t, "init::normal_");
  REMORA_CHECK(std >= 0, "init::normal_: std must be >= 0, got " << std);
  NoGradGuard ng;
  t.copy_(affine(Tensor::randn(t.shape(), t.dtype(), t.device(), gen), std, mean));
  return t;
}

Tensor& uniform_(Tensor& t, double a, double b, Generator* gen) {
  check_float(t, "init::uniform_");
  REMORA_CHECK(a <= b, "init::uniform_: need a <= b, got [" << a << ", " << b << ")");
  NoGradGuard ng;
  t.copy_(affine(Tensor::rand(t.shape(), t.dtype(), t.device(), gen), b - a, a));
  return t;
}

std::pair<int64_t, int64_t> fan_in_and_fan_out(const Tensor& t) {
  REMORA_CHECK(t.dim() >= 2, "init: fan in and fan out need at least 2 dims, got "
                                 << shape_str(t.shape()));
  int64_t receptive = 1;
  for (int64_t d = 2; d < t.dim(); ++d) receptive *= t.size(d);
  return {t.size(1) * receptive, t.size(0) * receptive};
}

Tensor& xavier_uniform_(Tensor& t, double gain, Generator* gen) {
  check_float(t, "init::xavier_uniform_");
  auto f = fan_in_and_fan_out(t);
  const double bound = gain * std::sqrt(6.0 / double(f.first + f.second));
  return uniform_(t, -bound, bound, gen);
}

Tensor& constant_(Tensor& t, double value) {
  check_float(t, "init::constant_");
  NoGradGuard ng;
  t.fill_(value);
  return t;
}
Tensor& zeros_(Tensor& t) { return constant_(t, 0); }
Tensor& ones_(Tensor& t) { return constant_(t, 1); }

}  // namespace init
}  // namespace nn
}  // namespace remora
