// SPDX-License-Identifier: BSD-3-Clause
// Factories as free functions with libtorch's spellings and options:
//
//   Tensor a = zeros({2, 3});                                   // f32, cpu
//   Tensor b = randn({4, 5}, TensorOptions().dtype(kFloat64).requires_grad(true));
//   Tensor c = full_like(b, 0.5);                               // b's dtype and device
//   Tensor d = tensor({{1.0, 2.0}, {3.0, 4.0}});                // [2, 2] f32
//   Tensor e = arange(10), f = linspace(0, 1, 5), g = eye(3);
//
// Each is also Tensor::zeros(...) etc. (core/tensor.h). A requires_grad option
// makes the result a leaf that requires grad (floating dtypes only).
#pragma once
#include <type_traits>
#include <vector>
#include <initializer_list>

#include "../core/tensor.h"

namespace remora {

Tensor empty(const Shape& shape, const TensorOptions& o = {});
Tensor zeros(const Shape& shape, const TensorOptions& o = {});
Tensor ones(const Shape& shape, const TensorOptions& o = {});
Tensor full(const Shape& shape, double value, const TensorOptions& o = {});
Tensor randn(const Shape& shape, const TensorOptions& o = {});
Tensor rand(const Shape& shape, const TensorOptions& o = {});
// Integers drawn uniformly from [low, high) (default dtype i64).
Tensor randint(int64_t low, int64_t high, const Shape& shape, const TensorOptions& o = kInt64);
Tensor randint(int64_t high, const Shape& shape, const TensorOptions& o = kInt64);
// [0, end), [start, end) by step; integer arguments give i64 (libtorch), others f32.
Tensor arange(int64_t end, const TensorOptions& o = kInt64);
Tensor arange(double start, double end, double step = 1, const TensorOptions& o = kFloat32);
Tensor arange(int64_t start, int64_t end, int64_t step = 1, const TensorOptions& o = kInt64);
Tensor arange(int start, int end, int step = 1, const TensorOptions& o = kInt64);
// steps values from start to end inclusive.
Tensor linspace(double start, double end, int64_t steps, const TensorOptions& o = {});
// n x m identity (m = n by default).
Tensor eye(int64_t n, const TensorOptions& o = {});
Tensor eye(int64_t n, int64_t m, const TensorOptions& o = {});
// Same shape, dtype and device as x (options given replace x's).
Tensor empty_like(const Tensor& x);
Tensor zeros_like(const Tensor& x);
Tensor ones_like(const Tensor& x);
Tensor randn_like(const Tensor& x);
Tensor rand_like(const Tensor& x);
Tensor full_like(const Tensor& x, double value);
Tensor empty_like(const Tensor& x, const TensorOptions& o);
Tensor zeros_like(const Tensor& x, const TensorOptions& o);
Tensor ones_like(const Tensor& x, const TensorOptions& o);
Tensor randn_like(const Tensor& x, const TensorOptions& o);
Tensor full_like(const Tensor& x, double value, const TensorOptions& o);
// A tensor of the listed values (libtorch's torch::tensor): 1-D, or 2-D from
// nested lists (rows of equal length). Floating values default to f32,
// integer ones to i64, bool ones to bool.
Tensor tensor(std::initializer_list<double> values, const TensorOptions& o = kFloat32);
Tensor tensor(std::initializer_list<float> values, const TensorOptions& o = kFloat32);
Tensor tensor(std::initializer_list<int64_t> values, const TensorOptions& o = kInt64);
Tensor tensor(std::initializer_list<int> values, const TensorOptions& o = kInt64);
Tensor tensor(std::initializer_list<bool> values, const TensorOptions& o = kBool);
// The 2-D form's values, row-major, as a [rows, cols] tensor.
Tensor tensor_rows(const std::vector<double>& values, int64_t rows, int64_t cols, const TensorOptions& o);
// 2-D from nested lists; the element type picks the default dtype (one template,
// so that {{1.0, 2.0}} and {{true, false}} are never ambiguous).
template <typename T, typename = std::enable_if_t<std::is_arithmetic<T>::value>>
Tensor tensor(std::initializer_list<std::initializer_list<T>> rows,
              const TensorOptions& o = std::is_same<T, bool>::value           ? kBool
                                       : std::is_floating_point<T>::value ? kFloat32
                                                                          : kInt64) {
  std::vector<double> v;
  const int64_t m = rows.size() ? int64_t(rows.begin()->size()) : 0;
  for (const auto& r : rows) {
    REMORA_CHECK(int64_t(r.size()) == m, "tensor: rows of a nested list must have one length (got "
                                             << m << " and " << r.size() << ")");
    for (T x : r) v.push_back(double(x));
  }
  return tensor_rows(v, int64_t(rows.size()), m, o);
}
Tensor tensor(const std::vector<double>& values, const TensorOptions& o = kFloat32);
Tensor tensor(const std::vector<float>& values, const TensorOptions& o = kFloat32);
Tensor tensor(const std::vector<int64_t>& values, const TensorOptions& o = kInt64);
// A 0-d tensor (torch::scalar_tensor).
Tensor scalar_tensor(double value, const TensorOptions& o = {});

}  // namespace remora
