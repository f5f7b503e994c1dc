// SPDX-License-Identifier: BSD-3-Clause
#include "activation.h"

#include <cmath>
#include <sstream>

namespace remora {
namespace nn {

std::string LeakyReLU::extra_repr() const {
  std::ostringstream os;
  os << "negative_slope=" << options.negative_slope();
  return os.str();
}

Tensor LeakyReLU::forward(const Tensor& x) const {
  // x where x > 0, else slope x: the gradient is 1 or slope, slope at 0 (torch's).
  return where(gt(x, Tensor::scalar(0.0, x.dtype(), x.device())), x, affine(x, options.negative_slope(), 0.0));
}

GELU::GELU(const GELUOptions& o) : options(o) {
  REMORA_CHECK(o.approximate() == "none" || o.approximate() == "tanh",
               "GELU: approximate must be \"none\" or \"tanh\", got \"" << o.approximate() << "\"");
}

std::string GELU::extra_repr() const { return options.approximate() == "none" ? "" : "approximate='tanh'"; }

Tensor GELU::forward(const Tensor& x) const {
  if (options.approximate() == "none") return gelu(x);
  const double k = std::sqrt(2.0 / M_PI);
  Tensor inner = affine(add(x, affine(mul(mul(x, x), x), 0.044715, 0)), k, 0);
  return mul(affine(x, 0.5, 0), affine(tanh(inner), 1, 1));
}

std::string Flatten::extra_repr() const {
  return "start_dim=" + std::to_string(options.start_dim()) + ", end_dim=" + std::to_string(options.end_dim());
}


}  // namespace nn
}  // namespace remora
