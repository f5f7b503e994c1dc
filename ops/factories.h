// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// Factories as free functions with libtorch's spellings and options:
///
///     Tensor a = zeros({2, 3});                                   // f32, cpu
///     Tensor b = randn({4, 5}, TensorOptions().dtype(kFloat64).requires_grad(true));
///     Tensor c = full_like(b, 0.5);                               // b's dtype and device
///     Tensor d = tensor({{1.0, 2.0}, {3.0, 4.0}});                // [2, 2] f32
///     Tensor e = arange(10), f = linspace(0, 1, 5), g = eye(3);
///
/// Each is also Tensor::zeros(...) etc. (core/tensor.h). The options give the
/// dtype (f32 by default unless a factory says otherwise), the device (the
/// CPU by default; CUDA too) and requires_grad: set, it makes the result a
/// leaf that requires grad (floating dtypes only, else an Error). No factory
/// records history. Values given as double are converted to the dtype.
#pragma once
#include <type_traits>
#include <vector>
#include <initializer_list>

#include "../core/tensor.h"

namespace remora {

/// \name Filled and random tensors
/// @{

/// Uninitialised memory of the given shape (the values are whatever the
/// allocator returns).
Tensor empty(const Shape& shape, const TensorOptions& o = {});
/// All zeros.
Tensor zeros(const Shape& shape, const TensorOptions& o = {});
/// All ones.
Tensor ones(const Shape& shape, const TensorOptions& o = {});
/// Every element `value`.
Tensor full(const Shape& shape, double value, const TensorOptions& o = {});
/// Standard normal draws (mean 0, std 1) from the global generator's Philox
/// counters; a floating dtype (f32, f64; bf16 and f16 on the CPU), else an Error.
Tensor randn(const Shape& shape, const TensorOptions& o = {});
/// Uniform draws from [0, 1), as randn otherwise.
Tensor rand(const Shape& shape, const TensorOptions& o = {});
/// Integers drawn uniformly from [low, high) (high > low, else an Error);
/// default dtype i64, any other dtype converted from it.
Tensor randint(int64_t low, int64_t high, const Shape& shape, const TensorOptions& o = kInt64);
/// randint(0, high, shape, o).
Tensor randint(int64_t high, const Shape& shape, const TensorOptions& o = kInt64);
/// @}

/// \name Ranges
/// 1-D: start, start + step, ... below end (above end for a negative step;
/// step != 0, else an Error). Integer arguments give i64 (libtorch), others f32.
/// @{

/// [0, end) by 1.
Tensor arange(int64_t end, const TensorOptions& o = kInt64);
/// [start, end) by step, f32 by default.
Tensor arange(double start, double end, double step = 1, const TensorOptions& o = kFloat32);
/// [start, end) by step, i64 by default.
Tensor arange(int64_t start, int64_t end, int64_t step = 1, const TensorOptions& o = kInt64);
/// [start, end) by step for int arguments (so that arange(0, 10) is not
/// ambiguous), i64 by default.
Tensor arange(int start, int end, int step = 1, const TensorOptions& o = kInt64);
/// steps values from start to end inclusive, evenly spaced (both ends exact,
/// as torch); steps >= 0.
Tensor linspace(double start, double end, int64_t steps, const TensorOptions& o = {});
/// @}

/// \name Identity matrices
/// @{

/// n x n identity.
Tensor eye(int64_t n, const TensorOptions& o = {});
/// n x m with ones on the main diagonal (n, m >= 0).
Tensor eye(int64_t n, int64_t m, const TensorOptions& o = {});
/// @}

/// \name Factories shaped like a tensor
/// Same shape, dtype and device as x (options given replace x's); the result
/// never requires grad unless the options say so (x's requires_grad is not
/// copied). The random forms draw from the global generator.
/// @{

/// Uninitialised, as empty.
Tensor empty_like(const Tensor& x);
/// All zeros.
Tensor zeros_like(const Tensor& x);
/// All ones.
Tensor ones_like(const Tensor& x);
/// Standard normal draws (floating x).
Tensor randn_like(const Tensor& x);
/// Uniform draws from [0, 1) (floating x).
Tensor rand_like(const Tensor& x);
/// Every element `value`.
Tensor full_like(const Tensor& x, double value);
/// Uninitialised, x's shape, the options' dtype and device.
Tensor empty_like(const Tensor& x, const TensorOptions& o);
/// Zeros of x's shape with the options.
Tensor zeros_like(const Tensor& x, const TensorOptions& o);
/// Ones of x's shape with the options.
Tensor ones_like(const Tensor& x, const TensorOptions& o);
/// Standard normal draws of x's shape with the options.
Tensor randn_like(const Tensor& x, const TensorOptions& o);
/// `value` in x's shape with the options.
Tensor full_like(const Tensor& x, double value, const TensorOptions& o);
/// @}

/// \name Tensors from values
/// A tensor of the listed values (libtorch's torch::tensor): 1-D, or 2-D from
/// nested lists (rows of equal length, else an Error). Floating values default
/// to f32, integer ones to i64, bool ones to bool; the options may name any
/// dtype (the values are converted through double) and device. An empty list
/// gives shape [0] ([0, 0] for the 2-D form).
/// @{

/// 1-D from doubles (f32 by default).
Tensor tensor(std::initializer_list<double> values, const TensorOptions& o = kFloat32);
/// 1-D from floats (f32 by default).
Tensor tensor(std::initializer_list<float> values, const TensorOptions& o = kFloat32);
/// 1-D from 64-bit integers (i64 by default).
Tensor tensor(std::initializer_list<int64_t> values, const TensorOptions& o = kInt64);
/// 1-D from ints (i64 by default).
Tensor tensor(std::initializer_list<int> values, const TensorOptions& o = kInt64);
/// 1-D from bools (bool by default).
Tensor tensor(std::initializer_list<bool> values, const TensorOptions& o = kBool);
/// The 2-D form's values, row-major, as a [rows, cols] tensor (values.size()
/// must be rows * cols).
Tensor tensor_rows(const std::vector<double>& values, int64_t rows, int64_t cols, const TensorOptions& o);
/// 2-D from nested lists; the element type picks the default dtype (one template,
/// so that {{1.0, 2.0}} and {{true, false}} are never ambiguous).
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
/// 1-D from a vector of doubles (f32 by default).
Tensor tensor(const std::vector<double>& values, const TensorOptions& o = kFloat32);
/// 1-D from a vector of floats (f32 by default).
Tensor tensor(const std::vector<float>& values, const TensorOptions& o = kFloat32);
/// 1-D from a vector of 64-bit integers (i64 by default).
Tensor tensor(const std::vector<int64_t>& values, const TensorOptions& o = kInt64);
/// A 0-d tensor holding value (torch::scalar_tensor).
Tensor scalar_tensor(double value, const TensorOptions& o = {});
/// @}

}  // namespace remora
