// Tensor's factories that fill or draw: full, zeros, ones, scalar, arange,
// randn, rand (declared in core/tensor.h; Tensor::empty and from_vector, which
// only allocate and copy, are core's).
#include <cmath>

#include "../core/generator.h"
#include "internal.h"

namespace remora {

Tensor Tensor::full(const Shape& shape, double value, DType dt, Device dev) {
  Tensor t = make_tensor(shape, dt, dev);
  backend(dev).fill(dt, t.raw_data(), t.numel(), value);
  return t;
}
Tensor Tensor::zeros(const Shape& shape, DType dt, Device dev) { return full(shape, 0, dt, dev); }
Tensor Tensor::ones(const Shape& shape, DType dt, Device dev) { return full(shape, 1, dt, dev); }
Tensor Tensor::scalar(double value, DType dt, Device dev) { return full({}, value, dt, dev); }

Tensor Tensor::arange(double start, double end, double step, DType dt, Device dev) {
  REMORA_CHECK(step != 0, "arange: step must be nonzero");
  const double span = (end - start) / step;
  const int64_t n = span > 0 ? int64_t(std::ceil(span)) : 0;
  Tensor t = make_tensor({n}, dt, dev);
  backend(dev).arange(dt, t.raw_data(), n, start, step);
  return t;
}

namespace {
// Fills a new tensor with the next numel() draws of gen (default: the global one).
template <class Args>
Tensor draw(const char* op, const Shape& shape, DType dt, Device dev, Generator* gen,
            void (Backend::*fill)(const Args&)) {
  REMORA_CHECK(is_floating(dt), op << ": expected a floating dtype, got " << dtype_name(dt));
  Generator& g = gen ? *gen : default_generator();
  Tensor t = make_tensor(shape, dt, dev);
  Args a;
  a.dt = dt;
  a.out = t.raw_data();
  a.n = t.numel();
  a.seed = g.seed();
  a.offset = g.advance(t.numel());
  (backend(dev).*fill)(a);
  return t;
}
}  // namespace

Tensor Tensor::randn(const Shape& shape, DType dt, Device dev, Generator* gen) {
  return draw<NormalArgs>("randn", shape, dt, dev, gen, &Backend::normal);
}

Tensor Tensor::rand(const Shape& shape, DType dt, Device dev, Generator* gen) {
  return draw<UniformArgs>("rand", shape, dt, dev, gen, &Backend::uniform);
}

}  // namespace remora
