// SPDX-License-Identifier: BSD-3-Clause
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

// ---- libtorch-style factories (ops/factories.h) ----
namespace remora {

namespace {
Tensor finish(Tensor t, const TensorOptions& o) {
  if (o.requires_grad()) t.requires_grad_();
  return t;
}
template <typename T>
Tensor from_list(const std::vector<T>& values, const TensorOptions& o) {
  std::vector<double> v(values.begin(), values.end());
  if (v.empty()) return finish(Tensor::empty({0}, o.dtype(), o.device()), o);
  return finish(Tensor::from_vector(v, {}, o.dtype(), o.device()), o);
}
}  // namespace

Tensor Tensor::empty(const Shape& s, const TensorOptions& o) { return finish(empty(s, o.dtype(), o.device()), o); }
Tensor Tensor::zeros(const Shape& s, const TensorOptions& o) { return finish(zeros(s, o.dtype(), o.device()), o); }
Tensor Tensor::ones(const Shape& s, const TensorOptions& o) { return finish(ones(s, o.dtype(), o.device()), o); }
Tensor Tensor::full(const Shape& s, double v, const TensorOptions& o) {
  return finish(full(s, v, o.dtype(), o.device()), o);
}
Tensor Tensor::randn(const Shape& s, const TensorOptions& o, Generator* gen) {
  return finish(randn(s, o.dtype(), o.device(), gen), o);
}
Tensor Tensor::rand(const Shape& s, const TensorOptions& o, Generator* gen) {
  return finish(rand(s, o.dtype(), o.device(), gen), o);
}

Tensor empty(const Shape& s, const TensorOptions& o) { return Tensor::empty(s, o); }
Tensor zeros(const Shape& s, const TensorOptions& o) { return Tensor::zeros(s, o); }
Tensor ones(const Shape& s, const TensorOptions& o) { return Tensor::ones(s, o); }
Tensor full(const Shape& s, double value, const TensorOptions& o) { return Tensor::full(s, value, o); }
Tensor randn(const Shape& s, const TensorOptions& o) { return Tensor::randn(s, o); }
Tensor rand(const Shape& s, const TensorOptions& o) { return Tensor::rand(s, o); }

Tensor randint(int64_t low, int64_t high, const Shape& shape, const TensorOptions& o) {
  REMORA_CHECK(high > low, "randint: high (" << high << ") must be greater than low (" << low << ")");
  Tensor u = Tensor::rand(shape, DType::f64, o.device());
  NoGradGuard ng;
  // low + floor(u * (high - low)) with u in [0, 1): in [low, high) (the
  // conversion truncates, which is floor on the non-negative product).
  Tensor v = affine(u, double(high - low), 0).to(DType::i64);
  v = add(v, Tensor::scalar(double(low), DType::i64, o.device()));
  return finish(v.to(o.dtype()), o);
}
Tensor randint(int64_t high, const Shape& shape, const TensorOptions& o) { return randint(0, high, shape, o); }

Tensor arange(int64_t end, const TensorOptions& o) {
  return finish(Tensor::arange(0, double(end), 1, o.dtype(), o.device()), o);
}
Tensor arange(double start, double end, double step, const TensorOptions& o) {
  return finish(Tensor::arange(start, end, step, o.dtype(), o.device()), o);
}
Tensor arange(int64_t start, int64_t end, int64_t step, const TensorOptions& o) {
  return finish(Tensor::arange(double(start), double(end), double(step), o.dtype(), o.device()), o);
}
Tensor arange(int start, int end, int step, const TensorOptions& o) {
  return arange(int64_t(start), int64_t(end), int64_t(step), o);
}

Tensor linspace(double start, double end, int64_t steps, const TensorOptions& o) {
  REMORA_CHECK(steps >= 0, "linspace: steps must be non-negative, got " << steps);
  std::vector<double> v(static_cast<size_t>(steps));
  const double step = steps > 1 ? (end - start) / double(steps - 1) : 0;
  // As torch: the second half counts back from end, so both ends are exact.
  for (int64_t i = 0; i < steps; ++i)
    v[size_t(i)] = i < steps / 2 ? start + step * double(i) : end - step * double(steps - 1 - i);
  if (steps == 0) return finish(Tensor::empty({0}, o.dtype(), o.device()), o);
  return finish(Tensor::from_vector(v, {}, o.dtype(), o.device()), o);
}

Tensor eye(int64_t n, int64_t m, const TensorOptions& o) {
  REMORA_CHECK(n >= 0 && m >= 0, "eye: sizes must be non-negative, got " << n << " x " << m);
  std::vector<double> v(size_t(n * m), 0.0);
  for (int64_t i = 0; i < std::min(n, m); ++i) v[size_t(i * m + i)] = 1;
  if (n * m == 0) return finish(Tensor::zeros({n, m}, o.dtype(), o.device()), o);
  return finish(Tensor::from_vector(v, {n, m}, o.dtype(), o.device()), o);
}
Tensor eye(int64_t n, const TensorOptions& o) { return eye(n, n, o); }

Tensor empty_like(const Tensor& x) { return empty_like(x, x.options()); }
Tensor zeros_like(const Tensor& x) { return zeros_like(x, x.options()); }
Tensor ones_like(const Tensor& x) { return ones_like(x, x.options()); }
Tensor randn_like(const Tensor& x) { return randn_like(x, x.options()); }
Tensor rand_like(const Tensor& x) { return Tensor::rand(x.shape(), x.options()); }
Tensor full_like(const Tensor& x, double value) { return full_like(x, value, x.options()); }
Tensor empty_like(const Tensor& x, const TensorOptions& o) { return Tensor::empty(x.shape(), o); }
Tensor zeros_like(const Tensor& x, const TensorOptions& o) { return Tensor::zeros(x.shape(), o); }
Tensor ones_like(const Tensor& x, const TensorOptions& o) { return Tensor::ones(x.shape(), o); }
Tensor randn_like(const Tensor& x, const TensorOptions& o) { return Tensor::randn(x.shape(), o); }
Tensor full_like(const Tensor& x, double value, const TensorOptions& o) {
  return Tensor::full(x.shape(), value, o);
}

Tensor tensor(std::initializer_list<double> v, const TensorOptions& o) { return from_list(std::vector<double>(v), o); }
Tensor tensor(std::initializer_list<float> v, const TensorOptions& o) { return from_list(std::vector<float>(v), o); }
Tensor tensor(std::initializer_list<int64_t> v, const TensorOptions& o) { return from_list(std::vector<int64_t>(v), o); }
Tensor tensor(std::initializer_list<int> v, const TensorOptions& o) { return from_list(std::vector<int>(v), o); }
Tensor tensor(std::initializer_list<bool> v, const TensorOptions& o) { return from_list(std::vector<bool>(v), o); }
Tensor tensor_rows(const std::vector<double>& v, int64_t rows, int64_t cols, const TensorOptions& o) {
  return finish(Tensor::from_vector(v, rows ? Shape{rows, cols} : Shape{0, 0}, o.dtype(), o.device()), o);
}
Tensor tensor(const std::vector<double>& v, const TensorOptions& o) { return from_list(v, o); }
Tensor tensor(const std::vector<float>& v, const TensorOptions& o) { return from_list(v, o); }
Tensor tensor(const std::vector<int64_t>& v, const TensorOptions& o) { return from_list(v, o); }
Tensor scalar_tensor(double value, const TensorOptions& o) { return finish(Tensor::full({}, value, o.dtype(), o.device()), o); }

}  // namespace remora
