// Tensor: a strided view over shared storage, with reverse-mode autograd.
//
//   Tensor x = Tensor::randn({3, 4}, DType::f64).requires_grad_();
//   Tensor y = (x * x).sum();
//   y.backward();             // x.grad() == 2 * x
//
// A Tensor is a cheap handle (shared_ptr to TensorImpl); copying it aliases.
// Views (reshape, transpose, permute, slice, expand) share storage; kernels see
// contiguous memory, so ops call contiguous() where they need it.
//
// Where the members are defined (docs/architecture.md, "The layers"): core/
// defines storage, metadata, element access, autograd, reshape / view /
// flatten / (un)squeeze, clone, contiguous, to(), detach, empty and
// from_vector. The members marked "[ops]" below, and the operators after the
// class, are defined in ops/ (part of libremora, like core): they compute, so
// they need ops' kernels and backward formulas. C++ has no way to declare a
// member outside its class, and user code keeps the method syntax (x.sum(1),
// Tensor::randn(...)), so they are declared here; a program that links core
// alone (the remora_core library, tests/core/) must not call them.
#pragma once
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "dtype.h"
#include "error.h"

namespace remora {

using Shape = std::vector<int64_t>;
std::string shape_str(const Shape& s);  // "[2, 3]"
int64_t shape_numel(const Shape& s);
Shape contiguous_strides(const Shape& s);

struct TensorImpl;
class Node;
class Generator;

class Tensor {
 public:
  Tensor() = default;  // undefined tensor
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // ---- factories (default f32 on cpu; [ops]: full, zeros, ones, scalar, arange, randn, rand) ----
  static Tensor empty(const Shape& shape, DType dt = DType::f32, Device dev = Device::cpu());
  static Tensor zeros(const Shape& shape, DType dt = DType::f32, Device dev = Device::cpu());
  static Tensor ones(const Shape& shape, DType dt = DType::f32, Device dev = Device::cpu());
  static Tensor full(const Shape& shape, double value, DType dt = DType::f32,
                     Device dev = Device::cpu());
  static Tensor scalar(double value, DType dt = DType::f32, Device dev = Device::cpu());
  // [start, start+step, ...) up to end (exclusive), 1-D
  static Tensor arange(double start, double end, double step = 1, DType dt = DType::i64,
                       Device dev = Device::cpu());
  static Tensor arange(int64_t n, DType dt = DType::i64, Device dev = Device::cpu()) {
    return arange(0, double(n), 1, dt, dev);
  }
  // N(0, 1) / U[0, 1) from the given generator (default: the global one).
  static Tensor randn(const Shape& shape, DType dt = DType::f32, Device dev = Device::cpu(),
                      Generator* gen = nullptr);
  static Tensor rand(const Shape& shape, DType dt = DType::f32, Device dev = Device::cpu(),
                     Generator* gen = nullptr);
  // Copies values (converted to dt) into a new tensor of the given shape
  // (empty shape = 1-D of v.size()).
  static Tensor from_vector(const std::vector<double>& v, const Shape& shape = {},
                            DType dt = DType::f32, Device dev = Device::cpu());
  static Tensor from_vector(const std::vector<float>& v, const Shape& shape = {},
                            DType dt = DType::f32, Device dev = Device::cpu());
  static Tensor from_vector(const std::vector<int64_t>& v, const Shape& shape = {},
                            DType dt = DType::i64, Device dev = Device::cpu());

  // ---- metadata ----
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const;
  const Shape& sizes() const { return shape(); }
  const Shape& strides() const;
  int64_t offset() const;  // in elements, into the storage
  int64_t dim() const { return int64_t(shape().size()); }
  int64_t size(int64_t d) const;  // negative d counts from the end
  int64_t numel() const;
  DType dtype() const;
  Device device() const;
  bool is_contiguous() const;
  std::string str() const;  // "f32[2, 3] cpu"

  // Raw pointer to element 0 of this view (CPU or device memory).
  void* raw_data() const;
  template <typename T>
  T* data_ptr() const { return static_cast<T*>(raw_data()); }

  // ---- element access (copies to the host when needed; for tests and printing) ----
  double item() const;                               // numel must be 1
  // The one element as T (libtorch's item<T>()): i64 values convert exactly (no trip
  // through double); a value outside T's range is an Error; floats to integers truncate.
  template <typename T>
  T item() const;
  double at(std::initializer_list<int64_t> idx) const;
  std::vector<double> to_vector() const;             // row-major values
  std::vector<int64_t> to_i64_vector() const;

  // ---- conversions ----
  Tensor to(DType dt) const;        // differentiable for float <-> float
  Tensor to(Device dev) const;      // differentiable
  Tensor contiguous() const;        // self when already contiguous
  Tensor clone() const;             // always a fresh contiguous copy (differentiable)
  Tensor detach() const;            // shares storage, no history

  // ---- autograd ----
  Tensor& requires_grad_(bool on = true);
  bool requires_grad() const;
  bool is_leaf() const;
  const Tensor& grad() const;       // undefined until a backward reaches this leaf
  void set_grad(const Tensor& g);
  void zero_grad();                 // drops the gradient (like set_to_none=True)
  const std::shared_ptr<Node>& grad_fn() const;
  int output_nr() const;
  // Backpropagates from this tensor. A non-scalar needs an explicit gradient of
  // its own shape. Saved tensors are freed unless retain_graph.
  void backward(const Tensor& gradient = Tensor(), bool retain_graph = false) const;

  // ---- in-place (no autograd: use under NoGradGuard or on tensors without history) ----
  // [ops]: copy_, fill_, zero_, add_, mul_ (set_data_ is core's).
  Tensor& copy_(const Tensor& src);  // broadcasts src into self, converts dtype
  Tensor& fill_(double value);
  Tensor& zero_() { return fill_(0); }
  Tensor& add_(const Tensor& other, double alpha = 1);  // self += alpha * other
  Tensor& mul_(double s);
  // Points this tensor (and every handle sharing it) at src's data: src's storage,
  // shape, strides, dtype and device, like torch's `t.data = src`. For leaves only
  // (parameters); requires_grad stays, the old grad is dropped (it described the old
  // data). Module::to_ moves parameters with it.
  Tensor& set_data_(const Tensor& src);

  // ---- views and shape ops (all differentiable) ----
  // [ops]: transpose, t, permute, slice, narrow, select, expand (their backward
  // scatters or reduces); reshape, view, flatten, unsqueeze and squeeze are core's.
  Tensor reshape(const Shape& s) const;    // a view when strides allow, else a copy
  Tensor view(const Shape& s) const;       // must be a view; errors otherwise
  Tensor flatten(int64_t start = 0, int64_t end = -1) const;
  Tensor transpose(int64_t a, int64_t b) const;
  Tensor t() const { return transpose(-2, -1); }
  Tensor permute(const Shape& dims) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor select(int64_t dim, int64_t index) const;  // drops dim
  Tensor expand(const Shape& s) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor squeeze(int64_t dim) const;

  // ---- math [ops] (methods forward to the functions in ops/ops.h) ----
  Tensor sum(const Shape& dims = {}, bool keepdim = false) const;   // {} = all dims: 0-d
  Tensor mean(const Shape& dims = {}, bool keepdim = false) const;
  Tensor max() const;  // over every element: 0-d (gradient to the first maximal entry)
  Tensor min() const;
  Tensor max(int64_t dim, bool keepdim = false) const;
  Tensor min(int64_t dim, bool keepdim = false) const;
  Tensor abs() const;
  Tensor matmul(const Tensor& o) const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor tanh() const;
  Tensor sigmoid() const;
  Tensor relu() const;
  Tensor pow(double p) const;
  Tensor softmax(int64_t dim) const;
  Tensor log_softmax(int64_t dim) const;

  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool is_same(const Tensor& o) const { return impl_ == o.impl_; }

 private:
  int64_t item_i64() const;  // the one element of an i64 tensor, exactly
  std::shared_ptr<TensorImpl> impl_;
};

template <typename T>
T Tensor::item() const {
  static_assert(std::is_arithmetic<T>::value, "item<T>: T must be a number type");
  if constexpr (std::is_same<T, bool>::value) {
    return item() != 0;
  } else if constexpr (std::is_floating_point<T>::value) {
    return dtype() == DType::i64 ? static_cast<T>(item_i64()) : static_cast<T>(item());
  } else if (dtype() == DType::i64) {
    const int64_t v = item_i64();
    const T t = static_cast<T>(v);
    REMORA_CHECK(static_cast<int64_t>(t) == v && (t < T(0)) == (v < 0),
                 "item<T>: " << v << " does not fit the requested integer type");
    return t;
  } else {
    const double v = item();
    const double top = std::ldexp(1.0, std::numeric_limits<T>::digits);  // 2^bits
    const bool fits = std::is_signed<T>::value ? v >= -top && v < top : v > -1 && v < top;
    REMORA_CHECK(std::isfinite(v) && fits, "item<T>: " << v << " does not fit the requested integer type");
    return static_cast<T>(v);
  }
}

// Arithmetic with broadcasting (same dtype and device required) [ops].
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a);
Tensor operator+(const Tensor& a, double s);
Tensor operator-(const Tensor& a, double s);
Tensor operator*(const Tensor& a, double s);
Tensor operator/(const Tensor& a, double s);
Tensor operator+(double s, const Tensor& a);
Tensor operator-(double s, const Tensor& a);
Tensor operator*(double s, const Tensor& a);
Tensor operator/(double s, const Tensor& a);

std::ostream& operator<<(std::ostream& os, const Tensor& t);

// Global settings.
void manual_seed(uint64_t seed);  // seeds the global generator
void set_num_threads(int n);      // the CPU thread pool (core/parallel.h); OpenBLAS stays at 1
int get_num_threads();

}  // namespace remora
