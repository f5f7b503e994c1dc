// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// Tensor: a strided view over shared storage, with reverse-mode autograd.
///
/// \code
///   Tensor x = Tensor::randn({3, 4}, DType::f64).requires_grad_();
///   Tensor y = (x * x).sum();
///   y.backward();             // x.grad() == 2 * x
/// \endcode
///
/// A Tensor is a cheap handle (shared_ptr to TensorImpl); copying it aliases.
/// Views (reshape, transpose, permute, slice, expand) share storage; kernels see
/// contiguous memory, so ops call contiguous() where they need it.
///
/// Where the members are defined (docs/architecture.md, "The layers"): core/
/// defines storage, metadata, element access, autograd, reshape / view /
/// flatten / (un)squeeze, clone, contiguous, to(), detach, empty and
/// from_vector. The members marked "[ops]" below, and the operators after the
/// class, are defined in ops/ (part of libremora, like core): they compute, so
/// they need ops' kernels and backward formulas. C++ has no way to declare a
/// member outside its class, and user code keeps the method syntax (x.sum(1),
/// Tensor::randn(...)), so they are declared here; a program that links core
/// alone (the remora_core library, tests/core/) must not call them.
///
/// What holds for every op below unless its own line says otherwise:
/// - Devices: CPU and CUDA; the operands of one op must be on one device (an
///   Error names them otherwise). Bool, i32 and u8 tensors on CUDA are created,
///   filled, converted, compared and used as masks; arithmetic on them runs on
///   the CPU only (docs/libtorch.md).
/// - Dtypes: the math takes floating tensors (f32, f64; bf16 and f16 on the
///   CPU, computed in f32: docs/precision.md); shape ops and copies take every
///   dtype. Binary ops need one dtype (no promotion: convert with to()).
/// - Dims: a negative dim counts from the end; reductions take dims {} as
///   every dim, and keepdim keeps each reduced dim with size 1.
/// - Gradients: out-of-place ops record history when grad mode is on
///   (core/autograd.h) and a floating input requires grad; the gradient flows
///   to every floating tensor input. Integer and bool results carry none.
///   In-place forms (trailing underscore) record nothing.
/// - An undefined tensor as an operand is an Error.
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

#include "adam_step.h"
#include "dtype.h"
#include "error.h"
#include "tensor_options.h"

namespace remora {

/// Sizes (or strides) of a tensor, one entry per dim, outermost first.
using Shape = std::vector<int64_t>;
/// The shape as text: "[2, 3]" ("[]" for a 0-d shape).
std::string shape_str(const Shape& s);  // "[2, 3]"
/// The number of elements of a shape: the product of its sizes (1 for []).
int64_t shape_numel(const Shape& s);
/// Row-major strides of a contiguous tensor of shape s, in elements (the last dim's is 1).
Shape contiguous_strides(const Shape& s);

struct TensorImpl;
class Node;
class Generator;
namespace indexing {
class TensorIndex;  // core/indexing.h
}

class Tensor;
/// A (values, indices) pair: what topk, sort, max_with_indices and
/// min_with_indices return (libtorch's std::tuple<Tensor, Tensor>).
using TensorPair = std::tuple<Tensor, Tensor>;
/// How a loss is reduced over its elements: mean (over the counted elements),
/// sum, or none (the per-element loss). libtorch's spellings kMean, kSum,
/// kNone are in ops/losses.h.
enum class Reduction { mean, sum, none };

// The ops (ops/ops.def, the op table) are declared here, in core, because
// Tensor's methods forward to them; they are defined in ops/. The functions of
// the REMORA_METHOD rows come first, as the methods' bodies call them; the
// other rows follow the class (their defaults may construct a Tensor).
/// \cond
#define REMORA_FUNCTION(Ret, name, params, check)
#define REMORA_METHOD(Ret, name, params, method_params, call, check) Ret name params;
#define REMORA_DECLARED_IN(name, header, check)
#include "../ops/ops.def"
#undef REMORA_FUNCTION
#undef REMORA_METHOD
/// \endcond

/// A tensor handle: shape, strides, dtype and device over shared storage, plus
/// autograd state. Copying a Tensor aliases (both handles name one tensor);
/// clone() copies the data. A default-constructed Tensor is undefined
/// (defined() is false), and most members throw an Error on it.
class Tensor {
 public:
  Tensor() = default;  ///< An undefined tensor.
  /// Wraps an impl (for ops and backends; core/tensor_impl.h).
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  /// \name Factories
  /// New tensors without history, default f32 on the CPU (arange: i64). A
  /// negative size, more than 8 dims or a device this build lacks is an Error.
  /// [ops]: full, zeros, ones, scalar, arange, randn, rand and the
  /// TensorOptions forms; empty and from_vector are core's.
  /// @{
  //
  /// Uninitialised memory of the given shape.
  static Tensor empty(const Shape& shape, DType dt = DType::f32, Device dev = Device::cpu());
  /// Filled with 0.
  static Tensor zeros(const Shape& shape, DType dt = DType::f32, Device dev = Device::cpu());
  /// Filled with 1.
  static Tensor ones(const Shape& shape, DType dt = DType::f32, Device dev = Device::cpu());
  /// Filled with value (converted to dt).
  static Tensor full(const Shape& shape, double value, DType dt = DType::f32,
                     Device dev = Device::cpu());
  /// A 0-d tensor holding value.
  static Tensor scalar(double value, DType dt = DType::f32, Device dev = Device::cpu());
  /// [start, start+step, ...) up to end (exclusive), 1-D: ceil((end - start) /
  /// step) elements, none when that is not positive; step 0 is an Error.
  static Tensor arange(double start, double end, double step = 1, DType dt = DType::i64,
                       Device dev = Device::cpu());
  /// 0, 1, ..., n - 1 (1-D, i64 by default).
  static Tensor arange(int64_t n, DType dt = DType::i64, Device dev = Device::cpu()) {
    return arange(0, double(n), 1, dt, dev);
  }
  /// N(0, 1) draws from the given generator (default: the global one,
  /// default_generator()); a floating dt only. Takes numel() counters of the
  /// generator, so the values depend on its (seed, offset) alone, on every device.
  static Tensor randn(const Shape& shape, DType dt = DType::f32, Device dev = Device::cpu(),
                      Generator* gen = nullptr);
  /// U[0, 1) draws from the given generator (default: the global one); as randn.
  static Tensor rand(const Shape& shape, DType dt = DType::f32, Device dev = Device::cpu(),
                     Generator* gen = nullptr);
  /// Copies values (converted to dt) into a new tensor of the given shape
  /// (empty shape = 1-D of v.size()); the shape must hold exactly v.size()
  /// elements. Built on the host, then moved to dev.
  static Tensor from_vector(const std::vector<double>& v, const Shape& shape = {},
                            DType dt = DType::f32, Device dev = Device::cpu());
  /// from_vector of floats (converted to dt).
  static Tensor from_vector(const std::vector<float>& v, const Shape& shape = {},
                            DType dt = DType::f32, Device dev = Device::cpu());
  /// from_vector of integers, i64 by default (exact for i64).
  static Tensor from_vector(const std::vector<int64_t>& v, const Shape& shape = {},
                            DType dt = DType::i64, Device dev = Device::cpu());
  /// The same factories with libtorch's options (dtype, device, requires_grad):
  /// Tensor::zeros({2, 3}, TensorOptions().dtype(kFloat64)). [ops], empty too.
  /// requires_grad makes the result a leaf that requires grad (a floating
  /// dtype only).
  static Tensor empty(const Shape& shape, const TensorOptions& o);
  /// zeros with options.
  static Tensor zeros(const Shape& shape, const TensorOptions& o);
  /// ones with options.
  static Tensor ones(const Shape& shape, const TensorOptions& o);
  /// full with options.
  static Tensor full(const Shape& shape, double value, const TensorOptions& o);
  /// randn with options.
  static Tensor randn(const Shape& shape, const TensorOptions& o, Generator* gen = nullptr);
  /// rand with options.
  static Tensor rand(const Shape& shape, const TensorOptions& o, Generator* gen = nullptr);
  /// @}

  /// \name Metadata
  /// @{
  //
  /// Whether this handle holds a tensor (false for Tensor()).
  bool defined() const { return impl_ != nullptr; }
  /// The sizes, one per dim.
  const Shape& shape() const;
  /// shape() (libtorch's name).
  const Shape& sizes() const { return shape(); }
  /// The strides in elements, one per dim (0 for an expanded dim).
  const Shape& strides() const;
  int64_t offset() const;  ///< in elements, into the storage: where element 0 of this view is
  /// The number of dims (0 for a scalar).
  int64_t dim() const { return int64_t(shape().size()); }
  /// The size of dim d; negative d counts from the end, out of range is an Error.
  int64_t size(int64_t d) const;  // negative d counts from the end
  /// The number of elements (1 for a 0-d tensor).
  int64_t numel() const;
  /// The element type.
  DType dtype() const;
  /// Where the storage lives.
  Device device() const;
  /// Whether the elements lie row-major without gaps (the strides of size-1 dims do not matter).
  bool is_contiguous() const;
  /// A short description: "f32[2, 3] cpu" ("undefined" for an undefined tensor).
  std::string str() const;  // "f32[2, 3] cpu"
  /// libtorch spellings: the dtype, device and requires_grad as options (for
  /// zeros_like-style factories: zeros({2}, x.options())), scalar_type() ==
  /// dtype(), is_cuda(), is_floating_point(), element_size() in bytes.
  /// options() carries the dtype and the device; requires_grad is false.
  TensorOptions options() const;
  /// dtype() (libtorch's name).
  DType scalar_type() const { return dtype(); }
  /// Whether the tensor is on a CUDA GPU.
  bool is_cuda() const { return device().is_cuda(); }
  /// Whether the tensor is on the CPU.
  bool is_cpu() const { return device().is_cpu(); }
  /// Whether the dtype is f32, f64, bf16 or f16.
  bool is_floating_point() const { return is_floating(dtype()); }
  /// Bytes per element.
  int64_t element_size() const { return int64_t(dtype_size(dtype())); }
  /// dim() (libtorch's name).
  int64_t ndimension() const { return dim(); }

  /// Raw pointer to element 0 of this view (CPU or device memory).
  void* raw_data() const;
  /// raw_data() as T*. T is not checked against dtype(): float for f32, double
  /// for f64, int64_t for i64, bool for b8, int32_t, uint8_t, bf16_t, f16_t.
  template <typename T>
  T* data_ptr() const { return static_cast<T*>(raw_data()); }
  /// @}

  /// \name Element access
  /// Copies to the host when needed; for tests and printing, not for loops
  /// over a tensor's elements.
  /// @{
  //
  /// The one element as a double (numel must be 1, else an Error).
  double item() const;                               // numel must be 1
  /// The one element as T (libtorch's item<T>()): i64 values convert exactly (no trip
  /// through double); a value outside T's range is an Error; floats to integers truncate.
  template <typename T>
  T item() const;
  /// The element at one index per dim (negative indices count from the end), as a double.
  double at(std::initializer_list<int64_t> idx) const;
  /// Every element as a double, in row-major order.
  std::vector<double> to_vector() const;             // row-major values
  /// Every element converted to i64 (floats truncated toward zero), in row-major order.
  std::vector<int64_t> to_i64_vector() const;
  /// @}

  /// \name Conversions
  /// @{
  //
  /// A copy converted to dt (self when dt is the dtype already); differentiable
  /// between floating dtypes (no history when dt is an integer or bool dtype).
  Tensor to(DType dt) const;        // differentiable for float <-> float
  /// A copy on dev (self when it is there already), differentiable (the
  /// gradient moves back). Between two GPUs the copy goes through the host.
  Tensor to(Device dev) const;      // differentiable
  /// self when already contiguous, else clone().
  Tensor contiguous() const;        // self when already contiguous
  /// A fresh contiguous copy, differentiable (the gradient passes through).
  Tensor clone() const;             // always a fresh contiguous copy (differentiable)
  /// A new leaf that shares self's storage (in-place changes show in both)
  /// without history; requires_grad is false.
  Tensor detach() const;            // shares storage, no history
  /// to(Device(type)): GPU 0 for kCUDA.
  Tensor to(DeviceType type) const { return to(Device(type)); }
  /// dtype, then device, from options (requires_grad is not applied: to() is not a factory).
  Tensor to(const TensorOptions& o) const { return to(o.dtype()).to(o.device()); }
  /// to(dt), then to(dev).
  Tensor to(Device dev, DType dt) const { return to(dt).to(dev); }
  /// to(Device::cpu()).
  Tensor cpu() const { return to(Device::cpu()); }
  /// to(Device::cuda(index)).
  Tensor cuda(int index = 0) const { return to(Device::cuda(index)); }
  /// to(DType::f32).
  Tensor to_float() const { return to(DType::f32); }
  /// to(DType::f64).
  Tensor to_double() const { return to(DType::f64); }
  /// to(DType::i64) (floats truncated toward zero).
  Tensor to_long() const { return to(DType::i64); }
  /// @}

  /// \name Autograd
  /// @{
  //
  /// Marks this leaf as requiring grad (or not) and returns it. Only leaves
  /// (a tensor with a grad_fn is an Error: detach() makes a new leaf) and only
  /// floating dtypes can require grad.
  Tensor& requires_grad_(bool on = true);
  /// True for a leaf marked with requires_grad_() and for every tensor with history.
  bool requires_grad() const;
  /// True when the tensor has no grad_fn (no recorded op made it).
  bool is_leaf() const;
  /// The gradient accumulated by backward (leaves only).
  const Tensor& grad() const;       // undefined until a backward reaches this leaf
  /// Replaces the gradient: g has this tensor's shape, or is undefined to drop it.
  void set_grad(const Tensor& g);
  /// Drops the gradient (grad() becomes undefined, like set_to_none=True).
  void zero_grad();                 // drops the gradient (like set_to_none=True)
  /// The node that made this tensor (null for a leaf).
  const std::shared_ptr<Node>& grad_fn() const;
  /// Which output of grad_fn() this tensor is (0 for a leaf).
  int output_nr() const;
  /// Backpropagates from this tensor. A non-scalar needs an explicit gradient of
  /// its own shape (a one-element tensor gets 1). Saved tensors are freed unless
  /// retain_graph. Gradients accumulate into the grad() of every leaf that
  /// requires grad (remora::backward takes several roots at once).
  void backward(const Tensor& gradient = Tensor(), bool retain_graph = false) const;
  /// @}

  /// \name In-place updates
  /// No autograd: use under NoGradGuard or on tensors without history (a
  /// tensor that requires grad is an Error while grad mode is on). Each returns
  /// self. [ops]: copy_, fill_, zero_, add_, mul_ and the forms below them
  /// (set_data_ is core's).
  /// @{
  //
  /// Copies src into self: src broadcasts to self's shape and is converted to
  /// self's dtype; one device.
  Tensor& copy_(const Tensor& src);  // broadcasts src into self, converts dtype
  /// Sets every element to value (converted to the dtype).
  Tensor& fill_(double value);
  /// fill_(0).
  Tensor& zero_() { return fill_(0); }
  /// self += alpha * other: other has self's dtype and broadcasts to self's shape.
  Tensor& add_(const Tensor& other, double alpha = 1);  // self += alpha * other
  /// self *= s.
  Tensor& mul_(double s);
  /// self += s.
  Tensor& add_(double s);
  /// self -= alpha * other (add_ with -alpha).
  Tensor& sub_(const Tensor& other, double alpha = 1);
  /// self -= s.
  Tensor& sub_(double s);
  /// self *= other: other is converted to self's dtype and broadcasts to self's shape.
  Tensor& mul_(const Tensor& other);
  /// self /= other: other is converted to self's dtype and broadcasts to self's shape.
  Tensor& div_(const Tensor& other);
  /// self /= s; a floating tensor only (an Error otherwise).
  Tensor& div_(double s);
  /// fill_(value.item()): value has one element.
  Tensor& fill_(const Tensor& value);  // a one-element tensor
  /// Limits self to [min, max] (either may be absent, not both); not for bool tensors.
  Tensor& clamp_(std::optional<double> min, std::optional<double> max = std::nullopt);
  /// clamp_(min, none).
  Tensor& clamp_min_(double min) { return clamp_(min, std::nullopt); }
  /// clamp_(none, max).
  Tensor& clamp_max_(double max) { return clamp_(std::nullopt, max); }
  /// self = -self.
  Tensor& neg_() { return mul_(-1.0); }
  /// Sets value where mask (broadcast to self's shape; bool or any dtype) is non-zero.
  Tensor& masked_fill_(const Tensor& mask, double value);
  /// Writes v (a tensor broadcast to the indexed part, or a scalar) into
  /// self.index(indices) (libtorch's x.index_put_({Slice(), 0}, v)). In place, so
  /// without autograd history, as every in-place form: on a tensor that requires
  /// grad it throws while grad mode is on; index_put() is the differentiable form.
  /// v is converted to self's dtype and device; after a tensor index only
  /// Slice() and Ellipsis may follow.
  Tensor& index_put_(std::initializer_list<indexing::TensorIndex> indices, const Tensor& v);
  /// index_put_ of the scalar v.
  Tensor& index_put_(std::initializer_list<indexing::TensorIndex> indices, double v);
  /// index_put_ with the indices in a vector.
  Tensor& index_put_(const std::vector<indexing::TensorIndex>& indices, const Tensor& v);
  /// index_put_ of the scalar v, with the indices in a vector.
  Tensor& index_put_(const std::vector<indexing::TensorIndex>& indices, double v);
  /// self with v written at self.index(indices), out of place and
  /// differentiable to self and v (ops/ops.h index_put).
  Tensor index_put(std::initializer_list<indexing::TensorIndex> indices, const Tensor& v) const;
  /// \copydoc index_put(std::initializer_list<indexing::TensorIndex>, const Tensor&) const
  Tensor index_put(const std::vector<indexing::TensorIndex>& indices, const Tensor& v) const;
  /// As index_put with a scalar value (in self's dtype).
  Tensor index_put(std::initializer_list<indexing::TensorIndex> indices, double v) const;
  /// Points this tensor (and every handle sharing it) at src's data: src's storage,
  /// shape, strides, dtype and device, like torch's `t.data = src`. For leaves only
  /// (parameters); requires_grad stays, the old grad is dropped (it described the old
  /// data). Module::to_ moves parameters with it. src must be floating when
  /// this tensor requires grad.
  Tensor& set_data_(const Tensor& src);
  /// @}

  /// \name Views and shape ops
  /// All differentiable, every dtype. Views share storage with self (writes to
  /// one show in the other). [ops]: transpose, t, permute, slice, narrow,
  /// select, expand (their backward scatters or reduces) and the libtorch
  /// spellings after squeeze; reshape, view, flatten, unsqueeze and squeeze are core's.
  /// @{
  //
  /// The same elements in shape s (one -1 is inferred): a view when the
  /// strides allow, else a copy.
  Tensor reshape(const Shape& s) const;    // a view when strides allow, else a copy
  /// As reshape, but always a view: an Error (suggesting reshape() or
  /// contiguous()) when the strides do not allow one.
  Tensor view(const Shape& s) const;       // must be a view; errors otherwise
  /// Dims start..end (both included) merged into one; a 0-d tensor becomes [1].
  Tensor flatten(int64_t start = 0, int64_t end = -1) const;
  /// transpose(-2, -1): the last two dims swapped; a 0-d or 1-D tensor is returned
  /// as is, as in libtorch.
  Tensor t() const { return dim() < 2 ? *this : transpose(-2, -1); }
  /// slice(dim, start, start + length); the range must lie inside the dim
  /// (start >= 0, else an Error).
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  /// The view at position index of dim (negative counts from the end), that dim dropped.
  Tensor select(int64_t dim, int64_t index) const;  // drops dim
  /// A new dim of size 1 at position dim (in [-dim() - 1, dim()]).
  Tensor unsqueeze(int64_t dim) const;
  /// dim dropped when its size is 1; self otherwise.
  Tensor squeeze(int64_t dim) const;
  /// Every size-1 dim dropped (self when there is none).
  Tensor squeeze() const;
  /// expand(other.shape()).
  Tensor expand_as(const Tensor& other) const { return expand(other.shape()); }
  /// view(other.shape()).
  Tensor view_as(const Tensor& other) const { return view(other.shape()); }
  /// reshape(other.shape()).
  Tensor reshape_as(const Tensor& other) const { return reshape(other.shape()); }
  /// to(other.dtype()).
  Tensor type_as(const Tensor& other) const { return to(other.dtype()); }
  /// select(0, i).
  Tensor operator[](int64_t i) const { return select(0, i); }
  /// libtorch's x.index({...}) with the indices of core/indexing.h: integers,
  /// Slice, None, Ellipsis, and at most one integer or bool tensor index.
  /// Views for the plain indices, a copy after a tensor index; differentiable.
  Tensor index(std::initializer_list<indexing::TensorIndex> indices) const;
  /// index() with the indices in a vector.
  Tensor index(const std::vector<indexing::TensorIndex>& indices) const;
  /// @}

  // The op table's methods: every REMORA_METHOD row of ops/ops.def is also a
  // method that forwards to its function with self first, with the row's
  // parameters and defaults: x.exp() is exp(x), x.softmax(1) is softmax(x, 1),
  // x.sum({0}, true) is sum(x, {0}, true), x.transpose(0, 1) is
  // transpose(x, 0, 1). The function's comment there documents both.
  /// \cond
#define REMORA_FUNCTION(Ret, name, params, check)
#define REMORA_METHOD(Ret, name, params, method_params, call, check) \
  Ret name method_params const {                                    \
    const Tensor& self = *this;                                     \
    return ::remora::name call;                                     \
  }
#include "../ops/ops.def"
#undef REMORA_FUNCTION
#undef REMORA_METHOD
  /// \endcond

  /// \name Math
  /// [ops]: the methods forward to the functions of the op table
  /// (ops/ops.def), beside the table's own method rows. Floating dtypes and
  /// differentiable unless a line says otherwise (see the file's description
  /// for devices, dims and gradients).
  /// @{
  //
  /// Sum over one dim: x.sum(1). (A braced list, {} is every dim: x.sum({0, 2}).)
  Tensor sum(int64_t dim, bool keepdim = false) const;
  /// sum over a braced list of dims.
  Tensor sum(std::initializer_list<int64_t> dims, bool keepdim = false) const;
  /// mean over one dim.
  Tensor mean(int64_t dim, bool keepdim = false) const;
  /// mean over a braced list of dims.
  Tensor mean(std::initializer_list<int64_t> dims, bool keepdim = false) const;
  /// (values, indices) over one dim, as libtorch: auto [v, i] = x.max(1). The
  /// values are differentiable (gradient to the first maximal entry), indices i64.
  std::tuple<Tensor, Tensor> max(int64_t dim, bool keepdim = false) const;
  /// (values, indices) of the minimum over one dim, as max(dim).
  std::tuple<Tensor, Tensor> min(int64_t dim, bool keepdim = false) const;
  /// The position of the first maximum of the flattened tensor: 0-d i64, no gradient.
  Tensor argmax() const;  // of the flattened tensor: 0-d i64
  /// The position of the first minimum of the flattened tensor: 0-d i64, no gradient.
  Tensor argmin() const;
  /// The variance of every element, with Bessel's correction when unbiased
  /// (libtorch's default: divided by N - 1, so one element gives NaN), else
  /// divided by N. A 0-d result.
  Tensor var(bool unbiased = true) const;
  /// The variance over dims ({} = every dim), divided by N - 1 when unbiased, else N.
  Tensor var(const Shape& dims, bool unbiased = true, bool keepdim = false) const;
  /// The variance over one dim (x.var(1) reduces dim 1, where libtorch reads
  /// the 1 as unbiased).
  Tensor var(int64_t dim, bool unbiased = true, bool keepdim = false) const { return var(Shape{dim}, unbiased, keepdim); }
  /// The variance over one dim.
  Tensor var(int dim, bool unbiased = true, bool keepdim = false) const { return var(Shape{dim}, unbiased, keepdim); }
  /// sqrt(var(unbiased)): the standard deviation of every element.
  Tensor std(bool unbiased = true) const;
  /// The standard deviation over dims ({} = every dim).
  Tensor std(const Shape& dims, bool unbiased = true, bool keepdim = false) const;
  /// The standard deviation over one dim.
  Tensor std(int64_t dim, bool unbiased = true, bool keepdim = false) const { return std(Shape{dim}, unbiased, keepdim); }
  /// The standard deviation over one dim.
  Tensor std(int dim, bool unbiased = true, bool keepdim = false) const { return std(Shape{dim}, unbiased, keepdim); }
  /// The i64 indices of sort(dim, descending).
  Tensor argsort(int64_t dim = -1, bool descending = false) const;
  /// A whole-tensor test (a plain bool, like libtorch): every |a - b| <= atol + rtol |b|
  /// (same shape after broadcasting). NaN is never close, equal infinities
  /// are; the values are compared as doubles on the host, any dtypes.
  bool allclose(const Tensor& other, double rtol = 1e-5, double atol = 1e-8) const;
  /// Same shape and the same values (compared as doubles, so dtypes may differ;
  /// NaN is never equal).
  bool equal(const Tensor& other) const;
  /// As masked_fill with a one-element tensor value (converted to self's
  /// dtype), which also gets a gradient.
  Tensor masked_fill(const Tensor& mask, const Tensor& value) const;  // value: one element
  /// where(cond, self, other), libtorch's method form: cond != 0 ? self :
  /// other, all three broadcast (cond bool or any dtype); gradients to self and other.
  Tensor where(const Tensor& cond, const Tensor& other) const;
  /// clamp(min, none).
  Tensor clamp_min(double min) const { return clamp(min, std::nullopt); }
  /// clamp(none, max).
  Tensor clamp_max(double max) const { return clamp(std::nullopt, max); }
  /// self * self.
  Tensor square() const;
  /// Whether some element is non-zero (computed on the host).
  bool any() const;  // some element is non-zero (libtorch returns a bool tensor; x.any().item<bool>())
  /// Whether every element is non-zero (true for an empty tensor; computed on the host).
  bool all() const;
  /// The positions of the non-zero elements: [n, dim()] i64, computed on the host.
  Tensor nonzero() const;  // [n, dim] i64 positions of the non-zero elements
  /// self == o elementwise (broadcast; different dtypes compare in the wider
  /// one): a bool tensor, no gradient. (The free eq .. ge of ops/ops.h give
  /// 1/0 in the inputs' dtype.)
  Tensor eq(const Tensor& o) const;
  /// self != o, as eq.
  Tensor ne(const Tensor& o) const;
  /// self < o, as eq.
  Tensor lt(const Tensor& o) const;
  /// self <= o, as eq.
  Tensor le(const Tensor& o) const;
  /// self > o, as eq.
  Tensor gt(const Tensor& o) const;
  /// self >= o, as eq.
  Tensor ge(const Tensor& o) const;
  /// self + alpha * o (broadcast, one dtype).
  Tensor add(const Tensor& o, double alpha = 1) const;
  /// self - alpha * o (broadcast, one dtype).
  Tensor sub(const Tensor& o, double alpha = 1) const;
  /// matmul(o) (libtorch's 2-D name; the dims are not checked).
  Tensor mm(const Tensor& o) const { return matmul(o); }
  /// matmul(o) (libtorch's batched name; the dims are not checked).
  Tensor bmm(const Tensor& o) const { return matmul(o); }
  /// @}

  /// The impl this handle points at (for ops and backends; core/tensor_impl.h).
  TensorImpl* impl() const { return impl_.get(); }
  /// The shared pointer to the impl.
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  /// Whether both handles name the same tensor (the same impl).
  bool is_same(const Tensor& o) const { return impl_ == o.impl_; }

 private:
  int64_t item_i64() const;  // the one element of an i64 tensor, exactly
  std::shared_ptr<TensorImpl> impl_;
};

// The op table's function rows (the method rows' functions are declared above).
/// \cond
#define REMORA_FUNCTION(Ret, name, params, check) Ret name params;
#define REMORA_METHOD(Ret, name, params, method_params, call, check)
#include "../ops/ops.def"
#undef REMORA_FUNCTION
#undef REMORA_METHOD
#undef REMORA_DECLARED_IN
/// \endcond

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

/// \name Arithmetic operators
/// Arithmetic with broadcasting (same dtype and device required) [ops],
/// differentiable. A scalar is applied in the tensor's dtype (alpha * x +
/// beta; on an i64 tensor the result is truncated toward zero).
/// @{
//
/// a + b elementwise.
Tensor operator+(const Tensor& a, const Tensor& b);
/// a - b elementwise.
Tensor operator-(const Tensor& a, const Tensor& b);
/// a * b elementwise.
Tensor operator*(const Tensor& a, const Tensor& b);
/// a / b elementwise.
Tensor operator/(const Tensor& a, const Tensor& b);
/// -a.
Tensor operator-(const Tensor& a);
/// a + s.
Tensor operator+(const Tensor& a, double s);
/// a - s.
Tensor operator-(const Tensor& a, double s);
/// a * s.
Tensor operator*(const Tensor& a, double s);
/// a / s (a times 1 / s).
Tensor operator/(const Tensor& a, double s);
/// s + a.
Tensor operator+(double s, const Tensor& a);
/// s - a.
Tensor operator-(double s, const Tensor& a);
/// s * a.
Tensor operator*(double s, const Tensor& a);
/// s / a elementwise (a 0-d tensor of s in a's dtype, divided by a).
Tensor operator/(double s, const Tensor& a);
/// @}

/// \name Comparison operators
/// Comparisons (broadcasting; a scalar is converted to the tensor's dtype) give
/// a bool (DType::b8) tensor without gradient [ops]. The functions eq .. ge of
/// ops/ops.h keep their 1/0 in the inputs' dtype. Tensors of different dtypes
/// compare in the wider one; an integer tensor against a fractional scalar
/// compares in f64.
/// @{
//
/// a == b.
Tensor operator==(const Tensor& a, const Tensor& b);
/// a != b.
Tensor operator!=(const Tensor& a, const Tensor& b);
/// a < b.
Tensor operator<(const Tensor& a, const Tensor& b);
/// a <= b.
Tensor operator<=(const Tensor& a, const Tensor& b);
/// a > b.
Tensor operator>(const Tensor& a, const Tensor& b);
/// a >= b.
Tensor operator>=(const Tensor& a, const Tensor& b);
/// a == s.
Tensor operator==(const Tensor& a, double s);
/// a != s.
Tensor operator!=(const Tensor& a, double s);
/// a < s.
Tensor operator<(const Tensor& a, double s);
/// a <= s.
Tensor operator<=(const Tensor& a, double s);
/// a > s.
Tensor operator>(const Tensor& a, double s);
/// a >= s.
Tensor operator>=(const Tensor& a, double s);
/// s == a.
Tensor operator==(double s, const Tensor& a);
/// s != a.
Tensor operator!=(double s, const Tensor& a);
/// s < a.
Tensor operator<(double s, const Tensor& a);
/// s <= a.
Tensor operator<=(double s, const Tensor& a);
/// s > a.
Tensor operator>(double s, const Tensor& a);
/// s >= a.
Tensor operator>=(double s, const Tensor& a);
/// @}
//
/// \name Logical operators
/// Logical operators on bool tensors (other dtypes: non-zero is true), bool results:
/// & and, | or, ^ xor, ~ and ! not. Broadcasting, no gradient [ops].
/// @{
//
/// a and b.
Tensor operator&(const Tensor& a, const Tensor& b);
/// a or b.
Tensor operator|(const Tensor& a, const Tensor& b);
/// a xor b.
Tensor operator^(const Tensor& a, const Tensor& b);
/// Not a; a bool tensor only (an Error otherwise: use ! or logical_not).
Tensor operator~(const Tensor& a);
/// Not a (any dtype).
Tensor operator!(const Tensor& a);
/// @}
//
/// \name Compound assignment
/// Compound assignment: in place, no autograd (Tensor::add_ ...) [ops]. The
/// tensor forms broadcast b to a's shape; += and -= need b in a's dtype, *=
/// and /= convert it; a /= s needs a floating a.
/// @{
//
/// a.add_(b).
Tensor& operator+=(Tensor& a, const Tensor& b);
/// a.sub_(b).
Tensor& operator-=(Tensor& a, const Tensor& b);
/// a.mul_(b).
Tensor& operator*=(Tensor& a, const Tensor& b);
/// a.div_(b).
Tensor& operator/=(Tensor& a, const Tensor& b);
/// a.add_(s).
Tensor& operator+=(Tensor& a, double s);
/// a.sub_(s).
Tensor& operator-=(Tensor& a, double s);
/// a.mul_(s).
Tensor& operator*=(Tensor& a, double s);
/// a.div_(s).
Tensor& operator/=(Tensor& a, double s);
/// @}

/// Prints as libtorch does: the values (a matrix per trailing 2-D slice,
/// headed "(i,j,.,.) ="), then "[ CPUFloatType{2,3} ]", followed by Remora's
/// dtype name and requires_grad: " (f32)", " (f64, requires_grad)". Dims longer
/// than 6 show their first and last 3 entries around "...".
std::ostream& operator<<(std::ostream& os, const Tensor& t);
/// "[2, 3]" (libtorch prints sizes the same way).
std::ostream& operator<<(std::ostream& os, const Shape& s);

/// \name from_blob
/// A tensor over memory the caller owns (libtorch's from_blob): no copy; Remora
/// never frees it, but calls `deleter(data)` (if given) when the last tensor
/// using it is destroyed. The memory must outlive the tensor and every view of
/// it, and be on the options' device. strides in elements ({} = contiguous).
/// data may be null only for an empty shape; negative sizes or strides are an
/// Error; requires_grad in the options makes a leaf that requires grad.
/// @{
//
/// A contiguous tensor over data, without a deleter.
Tensor from_blob(void* data, const Shape& shape, const TensorOptions& o = {});
/// A contiguous tensor over data; deleter(data) runs when the last user goes.
Tensor from_blob(void* data, const Shape& shape, std::function<void(void*)> deleter,
                 const TensorOptions& o = {});
/// A tensor over data with the given strides ({} = contiguous).
Tensor from_blob(void* data, const Shape& shape, const Shape& strides,
                 std::function<void(void*)> deleter, const TensorOptions& o = {});
/// @}

/// \name Global settings
/// @{
//
/// Seeds the global generator (default_generator()) and resets its offset to 0.
void manual_seed(uint64_t seed);  // seeds the global generator
/// Sets the CPU thread pool's size (core/parallel.h); n must be in [1,
/// kMaxThreads]. OpenBLAS stays single-threaded (the pool splits the products).
void set_num_threads(int n);      // the CPU thread pool (core/parallel.h); OpenBLAS stays at 1
/// The CPU thread pool's size.
int get_num_threads();
/// @}

}  // namespace remora

#include "indexing.h"
