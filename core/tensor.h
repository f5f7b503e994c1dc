// SPDX-License-Identifier: BSD-3-Clause
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
#include <functional>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <limits>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "dtype.h"
#include "error.h"
#include "tensor_options.h"

namespace remora {

using Shape = std::vector<int64_t>;
std::string shape_str(const Shape& s);  // "[2, 3]"
int64_t shape_numel(const Shape& s);
Shape contiguous_strides(const Shape& s);

struct TensorImpl;
class Node;
class Generator;
namespace indexing {
class TensorIndex;  // core/indexing.h
}

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
  // The same factories with libtorch's options (dtype, device, requires_grad):
  // Tensor::zeros({2, 3}, TensorOptions().dtype(kFloat64)). [ops] but empty.
  static Tensor empty(const Shape& shape, const TensorOptions& o);
  static Tensor zeros(const Shape& shape, const TensorOptions& o);
  static Tensor ones(const Shape& shape, const TensorOptions& o);
  static Tensor full(const Shape& shape, double value, const TensorOptions& o);
  static Tensor randn(const Shape& shape, const TensorOptions& o, Generator* gen = nullptr);
  static Tensor rand(const Shape& shape, const TensorOptions& o, Generator* gen = nullptr);

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
  // libtorch spellings: the dtype, device and requires_grad as options (for
  // zeros_like-style factories: zeros({2}, x.options())), scalar_type() ==
  // dtype(), is_cuda(), is_floating_point(), element_size() in bytes.
  TensorOptions options() const;
  DType scalar_type() const { return dtype(); }
  bool is_cuda() const { return device().is_cuda(); }
  bool is_cpu() const { return device().is_cpu(); }
  bool is_floating_point() const { return is_floating(dtype()); }
  int64_t element_size() const { return int64_t(dtype_size(dtype())); }
  int64_t ndimension() const { return dim(); }

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
  Tensor to(DeviceType type) const { return to(Device(type)); }
  // dtype, then device, from options (requires_grad is not applied: to() is not a factory).
  Tensor to(const TensorOptions& o) const { return to(o.dtype()).to(o.device()); }
  Tensor to(Device dev, DType dt) const { return to(dt).to(dev); }
  Tensor cpu() const { return to(Device::cpu()); }
  Tensor cuda(int index = 0) const { return to(Device::cuda(index)); }
  // Conversions by name, as libtorch: x.to(kFloat64) == x.to_double() == x.double_().
  Tensor to_float() const { return to(DType::f32); }
  Tensor to_double() const { return to(DType::f64); }
  Tensor to_long() const { return to(DType::i64); }

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
  // More in-place forms, libtorch's spellings (same rule: no autograd) [ops].
  Tensor& add_(double s);
  Tensor& sub_(const Tensor& other, double alpha = 1);
  Tensor& sub_(double s);
  Tensor& mul_(const Tensor& other);
  Tensor& div_(const Tensor& other);
  Tensor& div_(double s);
  Tensor& fill_(const Tensor& value);  // a one-element tensor
  Tensor& clamp_(std::optional<double> min, std::optional<double> max = std::nullopt);
  Tensor& clamp_min_(double min) { return clamp_(min, std::nullopt); }
  Tensor& clamp_max_(double max) { return clamp_(std::nullopt, max); }
  Tensor& neg_() { return mul_(-1.0); }
  Tensor& masked_fill_(const Tensor& mask, double value);
  // Writes v (a tensor broadcast to the indexed part, or a scalar) into
  // self.index(indices) (libtorch's x.index_put_({Slice(), 0}, v)). In place, so
  // without autograd history, as every in-place form: on a tensor that requires
  // grad it throws unless grad mode is off; index_put() is the differentiable form.
  Tensor& index_put_(std::initializer_list<indexing::TensorIndex> indices, const Tensor& v);
  Tensor& index_put_(std::initializer_list<indexing::TensorIndex> indices, double v);
  Tensor& index_put_(const std::vector<indexing::TensorIndex>& indices, const Tensor& v);
  Tensor& index_put_(const std::vector<indexing::TensorIndex>& indices, double v);
  // self with v written at self.index(indices), out of place and differentiable
  // (to self and v): ops/ops.h index_put.
  Tensor index_put(std::initializer_list<indexing::TensorIndex> indices, const Tensor& v) const;
  Tensor index_put(const std::vector<indexing::TensorIndex>& indices, const Tensor& v) const;
  Tensor index_put(std::initializer_list<indexing::TensorIndex> indices, double v) const;
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
  // [ops], libtorch's spellings: squeeze() drops every size-1 dim; expand_as,
  // view_as, reshape_as take the other tensor's shape; repeat tiles (a copy);
  // x[i] == x.select(0, i); index() takes libtorch's indices (core/indexing.h:
  // integers, Slice, None, Ellipsis, i64 index tensors, bool masks), differentiable.
  Tensor squeeze() const;
  Tensor expand_as(const Tensor& other) const { return expand(other.shape()); }
  Tensor view_as(const Tensor& other) const { return view(other.shape()); }
  Tensor reshape_as(const Tensor& other) const { return reshape(other.shape()); }
  Tensor type_as(const Tensor& other) const { return to(other.dtype()); }
  Tensor repeat(const Shape& repeats) const;
  Tensor operator[](int64_t i) const { return select(0, i); }
  Tensor index(std::initializer_list<indexing::TensorIndex> indices) const;
  Tensor index(const std::vector<indexing::TensorIndex>& indices) const;
  std::vector<Tensor> chunk(int64_t chunks, int64_t dim = 0) const;
  std::vector<Tensor> split(int64_t split_size, int64_t dim = 0) const;
  std::vector<Tensor> unbind(int64_t dim = 0) const;

  // ---- math [ops] (methods forward to the functions in ops/ops.h) ----
  Tensor sum(const Shape& dims = {}, bool keepdim = false) const;   // {} = all dims: 0-d
  Tensor mean(const Shape& dims = {}, bool keepdim = false) const;
  // One dim, or a braced list ({} is every dim): x.sum(1), x.mean(-1, true), x.sum({0, 2}).
  Tensor sum(int64_t dim, bool keepdim = false) const;
  Tensor sum(std::initializer_list<int64_t> dims, bool keepdim = false) const;
  Tensor mean(int64_t dim, bool keepdim = false) const;
  Tensor mean(std::initializer_list<int64_t> dims, bool keepdim = false) const;
  Tensor max() const;  // over every element: 0-d (gradient to the first maximal entry)
  Tensor min() const;
  // (values, indices) over one dim, as libtorch: auto [v, i] = x.max(1). The
  // values are differentiable (gradient to the first maximal entry), indices i64.
  std::tuple<Tensor, Tensor> max(int64_t dim, bool keepdim = false) const;
  std::tuple<Tensor, Tensor> min(int64_t dim, bool keepdim = false) const;
  Tensor maximum(const Tensor& o) const;
  Tensor minimum(const Tensor& o) const;
  Tensor argmax() const;  // of the flattened tensor: 0-d i64
  Tensor argmin() const;
  Tensor argmax(int64_t dim, bool keepdim = false) const;
  Tensor argmin(int64_t dim, bool keepdim = false) const;
  Tensor cumsum(int64_t dim) const;
  // p-norm of all elements, or over dims; var / std with Bessel's correction
  // when unbiased (libtorch's default).
  Tensor norm(double p = 2) const;
  Tensor norm(double p, const Shape& dims, bool keepdim = false) const;
  Tensor var(bool unbiased = true) const;
  Tensor var(const Shape& dims, bool unbiased = true, bool keepdim = false) const;
  Tensor var(int64_t dim, bool unbiased = true, bool keepdim = false) const { return var(Shape{dim}, unbiased, keepdim); }
  Tensor var(int dim, bool unbiased = true, bool keepdim = false) const { return var(Shape{dim}, unbiased, keepdim); }
  Tensor std(bool unbiased = true) const;
  Tensor std(const Shape& dims, bool unbiased = true, bool keepdim = false) const;
  Tensor std(int64_t dim, bool unbiased = true, bool keepdim = false) const { return std(Shape{dim}, unbiased, keepdim); }
  Tensor std(int dim, bool unbiased = true, bool keepdim = false) const { return std(Shape{dim}, unbiased, keepdim); }
  // (values, indices) of the k largest (smallest when !largest) along dim;
  // sort: the whole dim, ascending unless descending. Values differentiable.
  std::tuple<Tensor, Tensor> topk(int64_t k, int64_t dim = -1, bool largest = true,
                                  bool sorted = true) const;
  std::tuple<Tensor, Tensor> sort(int64_t dim = -1, bool descending = false) const;
  Tensor argsort(int64_t dim = -1, bool descending = false) const;
  // Whole-tensor tests (a plain bool, like libtorch): every |a - b| <= atol + rtol |b|
  // (same shape after broadcasting); equal: same shape and values.
  bool allclose(const Tensor& other, double rtol = 1e-5, double atol = 1e-8) const;
  bool equal(const Tensor& other) const;
  Tensor index_select(int64_t dim, const Tensor& index) const;
  Tensor masked_fill(const Tensor& mask, double value) const;
  Tensor masked_fill(const Tensor& mask, const Tensor& value) const;  // value: one element
  Tensor masked_select(const Tensor& mask) const;
  Tensor gather(int64_t dim, const Tensor& index) const;
  Tensor scatter_add(int64_t dim, const Tensor& index, const Tensor& src) const;
  // where(cond, self, other), libtorch's method form.
  Tensor where(const Tensor& cond, const Tensor& other) const;
  Tensor clamp(std::optional<double> min, std::optional<double> max = std::nullopt) const;
  Tensor clamp_min(double min) const { return clamp(min, std::nullopt); }
  Tensor clamp_max(double max) const { return clamp(std::nullopt, max); }
  Tensor neg() const;
  Tensor square() const;
  Tensor gelu() const;
  Tensor sin() const;
  Tensor cos() const;
  Tensor logical_not() const;
  Tensor logical_and(const Tensor& o) const;
  Tensor logical_or(const Tensor& o) const;
  Tensor logical_xor(const Tensor& o) const;
  bool any() const;  // some element is non-zero (libtorch returns a bool tensor; x.any().item<bool>())
  bool all() const;
  Tensor nonzero() const;  // [n, dim] i64 positions of the non-zero elements
  Tensor eq(const Tensor& o) const;
  Tensor ne(const Tensor& o) const;
  Tensor lt(const Tensor& o) const;
  Tensor le(const Tensor& o) const;
  Tensor gt(const Tensor& o) const;
  Tensor ge(const Tensor& o) const;
  Tensor add(const Tensor& o, double alpha = 1) const;
  Tensor sub(const Tensor& o, double alpha = 1) const;
  Tensor mul(const Tensor& o) const;
  Tensor div(const Tensor& o) const;
  Tensor mm(const Tensor& o) const { return matmul(o); }
  Tensor bmm(const Tensor& o) const { return matmul(o); }
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

// Comparisons (broadcasting; a scalar is converted to the tensor's dtype) give
// a bool (DType::b8) tensor without gradient [ops]. The functions eq .. ge of
// ops/ops.h keep their 1/0 in the inputs' dtype.
Tensor operator==(const Tensor& a, const Tensor& b);
Tensor operator!=(const Tensor& a, const Tensor& b);
Tensor operator<(const Tensor& a, const Tensor& b);
Tensor operator<=(const Tensor& a, const Tensor& b);
Tensor operator>(const Tensor& a, const Tensor& b);
Tensor operator>=(const Tensor& a, const Tensor& b);
Tensor operator==(const Tensor& a, double s);
Tensor operator!=(const Tensor& a, double s);
Tensor operator<(const Tensor& a, double s);
Tensor operator<=(const Tensor& a, double s);
Tensor operator>(const Tensor& a, double s);
Tensor operator>=(const Tensor& a, double s);
Tensor operator==(double s, const Tensor& a);
Tensor operator!=(double s, const Tensor& a);
Tensor operator<(double s, const Tensor& a);
Tensor operator<=(double s, const Tensor& a);
Tensor operator>(double s, const Tensor& a);
Tensor operator>=(double s, const Tensor& a);
// Logical operators on bool tensors (other dtypes: non-zero is true), bool results:
// & and, | or, ^ xor, ~ and ! not.
Tensor operator&(const Tensor& a, const Tensor& b);
Tensor operator|(const Tensor& a, const Tensor& b);
Tensor operator^(const Tensor& a, const Tensor& b);
Tensor operator~(const Tensor& a);
Tensor operator!(const Tensor& a);
// Compound assignment: in place, no autograd (Tensor::add_ ...).
Tensor& operator+=(Tensor& a, const Tensor& b);
Tensor& operator-=(Tensor& a, const Tensor& b);
Tensor& operator*=(Tensor& a, const Tensor& b);
Tensor& operator/=(Tensor& a, const Tensor& b);
Tensor& operator+=(Tensor& a, double s);
Tensor& operator-=(Tensor& a, double s);
Tensor& operator*=(Tensor& a, double s);
Tensor& operator/=(Tensor& a, double s);

// Prints as libtorch does: the values (a matrix per trailing 2-D slice,
// headed "(i,j,.,.) ="), then "[ CPUFloatType{2,3} ]", followed by Remora's
// dtype name and requires_grad: " (f32)", " (f64, requires_grad)". Dims longer
// than 6 show their first and last 3 entries around "...".
std::ostream& operator<<(std::ostream& os, const Tensor& t);
// "[2, 3]" (libtorch prints sizes the same way).
std::ostream& operator<<(std::ostream& os, const Shape& s);

// A tensor over memory the caller owns (libtorch's from_blob): no copy; Remora
// never frees it, but calls `deleter(data)` (if given) when the last tensor
// using it is destroyed. The memory must outlive the tensor and every view of
// it, and be on the options' device. strides in elements ({} = contiguous).
Tensor from_blob(void* data, const Shape& shape, const TensorOptions& o = {});
Tensor from_blob(void* data, const Shape& shape, std::function<void(void*)> deleter,
                 const TensorOptions& o = {});
Tensor from_blob(void* data, const Shape& shape, const Shape& strides,
                 std::function<void(void*)> deleter, const TensorOptions& o = {});

// Global settings.
void manual_seed(uint64_t seed);  // seeds the global generator
void set_num_threads(int n);      // the CPU thread pool (core/parallel.h); OpenBLAS stays at 1
int get_num_threads();

}  // namespace remora

#include "indexing.h"
