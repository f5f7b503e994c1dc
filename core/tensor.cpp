// Tensor storage, metadata, element access and printing; the factories that
// only allocate or copy (empty, from_vector). Those that fill or draw (full,
// zeros, arange, randn, ...) are in ops/factories.cpp.
#include "tensor.h"

#include <cblas.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <iomanip>
#include <ostream>
#include <sstream>

#include "../backends/backend.h"
#include "autograd.h"
#include "half.h"
#include "generator.h"
#include "parallel.h"
#include "tensor_impl.h"

namespace remora {

const char* dtype_name(DType t) { return dtype_info(t).name; }

std::string Device::str() const {
  return is_cpu() ? std::string("cpu") : "cuda:" + std::to_string(index);
}

Device Device::parse(const std::string& s) {
  if (s == "cpu") return cpu();
  if (s == "cuda") return cuda(0);
  if (s.rfind("cuda:", 0) == 0) {
    const std::string n = s.substr(5);
    // At most 9 digits, so std::stoi cannot throw std::out_of_range.
    REMORA_CHECK(!n.empty() && n.size() <= 9 &&
                     n.find_first_not_of("0123456789") == std::string::npos,
                 "device: bad device string '" << s << "'; use cpu, cuda or cuda:N");
    return cuda(std::stoi(n));
  }
  REMORA_FAIL("device: unknown device '" << s << "'; use cpu, cuda or cuda:N");
}

std::string shape_str(const Shape& s) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  os << "]";
  return os.str();
}

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

Shape contiguous_strides(const Shape& s) {
  Shape st(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc *= s[i];
  }
  return st;
}

Generator& default_generator() {
  static Generator g;
  return g;
}
void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }

void set_num_threads(int n) {
  REMORA_CHECK(n >= 1, "set_num_threads: expected n >= 1, got " << n);
  // OpenBLAS stays single-threaded: the CPU backend splits gemms over
  // Remora's thread pool itself (backends/cpu/cpu_backend.cpp), so one pool
  // runs everything. (Two pools, OpenBLAS's pthreads spinning between gemms
  // beside the kernels' workers, made 2 threads slower than 1 on attention;
  // docs/benchmarks.md.)
  openblas_set_num_threads(1);
  set_pool_threads(n);
}
int get_num_threads() { return pool_threads(); }

// ---- storage ----

Storage::Storage(size_t n, Device dev) : nbytes(n), device(dev) {
  // Look the backend up even for an empty buffer, so that a device this build
  // lacks is an error here, not a tensor that fails later.
  Backend& b = backend(dev);
  data = n ? b.alloc(n) : nullptr;
}
Storage::~Storage() {
  if (data) backend(device).free(data, nbytes);
}

Tensor make_tensor(const Shape& shape, DType dt, Device dev) {
  for (int64_t d : shape)
    REMORA_CHECK(d >= 0, "tensor: negative size in shape " << shape_str(shape));
  REMORA_CHECK(shape.size() <= size_t(kMaxDims),
               "tensor: at most " << kMaxDims << " dims are supported, got "
                                  << shape_str(shape));
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(size_t(shape_numel(shape)) * dtype_size(dt), dev);
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = dt;
  return Tensor(impl);
}

Tensor make_view(const Tensor& t, const Shape& shape, const Shape& strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = t.impl()->storage;
  impl->shape = shape;
  impl->strides = strides;
  impl->offset = offset;
  impl->dtype = t.dtype();
  return Tensor(impl);
}

// ---- factories ----

Tensor Tensor::empty(const Shape& shape, DType dt, Device dev) {
  return make_tensor(shape, dt, dev);
}

namespace {
template <typename S>
Tensor from_host(const std::vector<S>& v, const Shape& shape_in, DType dt, Device dev) {
  const Shape shape = shape_in.empty() ? Shape{int64_t(v.size())} : shape_in;
  REMORA_CHECK(shape_numel(shape) == int64_t(v.size()),
               "from_vector: " << v.size() << " values do not fill shape " << shape_str(shape));
  Tensor t = make_tensor(shape, dt, Device::cpu());
  for (size_t i = 0; i < v.size(); ++i) {
    switch (dt) {
      case DType::f32: t.data_ptr<float>()[i] = float(v[i]); break;
      case DType::f64: t.data_ptr<double>()[i] = double(v[i]); break;
      case DType::i64: t.data_ptr<int64_t>()[i] = int64_t(v[i]); break;
      case DType::bf16: static_cast<bf16_t*>(t.raw_data())[i] = bf16_t(v[i]); break;
      case DType::f16: static_cast<f16_t*>(t.raw_data())[i] = f16_t(v[i]); break;
    }
  }
  return dev.is_cpu() ? t : t.to(dev);
}
}  // namespace

Tensor Tensor::from_vector(const std::vector<double>& v, const Shape& s, DType dt, Device d) {
  return from_host(v, s, dt, d);
}
Tensor Tensor::from_vector(const std::vector<float>& v, const Shape& s, DType dt, Device d) {
  return from_host(v, s, dt, d);
}
Tensor Tensor::from_vector(const std::vector<int64_t>& v, const Shape& s, DType dt, Device d) {
  return from_host(v, s, dt, d);
}

// ---- metadata ----

#define REMORA_DEFINED(what) \
  REMORA_CHECK(impl_ != nullptr, "Tensor::" what ": the tensor is undefined (default-constructed)")

const Shape& Tensor::shape() const {
  REMORA_DEFINED("shape");
  return impl_->shape;
}
const Shape& Tensor::strides() const {
  REMORA_DEFINED("strides");
  return impl_->strides;
}
int64_t Tensor::offset() const {
  REMORA_DEFINED("offset");
  return impl_->offset;
}
int64_t Tensor::size(int64_t d) const {
  const int64_t n = dim();
  REMORA_CHECK(d >= -n && d < n, "size: dim " << d << " out of range for shape "
                                              << shape_str(shape()));
  return shape()[size_t(d < 0 ? d + n : d)];
}
int64_t Tensor::numel() const { return shape_numel(shape()); }
DType Tensor::dtype() const {
  REMORA_DEFINED("dtype");
  return impl_->dtype;
}
Device Tensor::device() const {
  REMORA_DEFINED("device");
  return impl_->storage->device;
}
bool Tensor::is_contiguous() const {
  const Shape& s = shape();
  int64_t expect = 1;
  for (size_t i = s.size(); i-- > 0;) {
    if (s[i] == 1) continue;
    if (impl_->strides[i] != expect) return false;
    expect *= s[i];
  }
  return true;
}
std::string Tensor::str() const {
  if (!impl_) return "undefined";
  return std::string(dtype_name(dtype())) + shape_str(shape()) + " " + device().str();
}
void* Tensor::raw_data() const {
  REMORA_DEFINED("raw_data");
  return impl_->byte_ptr();
}

// ---- element access ----

std::vector<double> Tensor::to_vector() const {
  Tensor c = to(Device::cpu()).contiguous();
  const int64_t n = c.numel();
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    switch (c.dtype()) {
      case DType::f32: out[size_t(i)] = c.data_ptr<float>()[i]; break;
      case DType::f64: out[size_t(i)] = c.data_ptr<double>()[i]; break;
      case DType::i64: out[size_t(i)] = double(c.data_ptr<int64_t>()[i]); break;
      case DType::bf16: out[size_t(i)] = float(static_cast<const bf16_t*>(c.raw_data())[i]); break;
      case DType::f16: out[size_t(i)] = float(static_cast<const f16_t*>(c.raw_data())[i]); break;
    }
  }
  return out;
}

std::vector<int64_t> Tensor::to_i64_vector() const {
  Tensor c = to(Device::cpu()).to(DType::i64).contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

double Tensor::item() const {
  REMORA_CHECK(numel() == 1, "item: expected a tensor with one element, got shape "
                                 << shape_str(shape()));
  return detach().reshape({1}).to_vector()[0];
}

int64_t Tensor::item_i64() const {
  REMORA_CHECK(numel() == 1, "item: expected a tensor with one element, got shape "
                                 << shape_str(shape()));
  return detach().reshape({1}).to_i64_vector()[0];
}

double Tensor::at(std::initializer_list<int64_t> idx) const {
  REMORA_CHECK(int64_t(idx.size()) == dim(), "at: " << idx.size() << " indices for shape "
                                                    << shape_str(shape()));
  int64_t off = impl_->offset;
  size_t d = 0;
  for (int64_t i : idx) {
    const int64_t n = impl_->shape[d];
    REMORA_CHECK(i >= -n && i < n, "at: index " << i << " out of range for dim " << d
                                                << " of shape " << shape_str(shape()));
    off += (i < 0 ? i + n : i) * impl_->strides[d];
    ++d;
  }
  const size_t es = dtype_size(dtype());
  char buf[8];
  backend(device()).copy_to_host(buf, static_cast<char*>(impl_->storage->data) + off * es, es);
  switch (dtype()) {
    case DType::f32: { float v; std::memcpy(&v, buf, 4); return v; }
    case DType::f64: { double v; std::memcpy(&v, buf, 8); return v; }
    case DType::i64: { int64_t v; std::memcpy(&v, buf, 8); return double(v); }
    case DType::bf16: { uint16_t v; std::memcpy(&v, buf, 2); return f32_from_bf16_bits(v); }
    case DType::f16: { uint16_t v; std::memcpy(&v, buf, 2); return f32_from_f16_bits(v); }
  }
  return 0;
}

// ---- autograd accessors ----

Tensor& Tensor::set_data_(const Tensor& src) {
  REMORA_DEFINED("set_data_");
  REMORA_CHECK(src.defined(), "set_data_: src is undefined");
  REMORA_CHECK(is_leaf(), "set_data_: only a leaf tensor (e.g. a parameter) can change its data; "
                          "this one has a grad_fn");
  REMORA_CHECK(!impl_->requires_grad || is_floating(src.dtype()),
               "set_data_: a tensor that requires grad needs floating data, got " << dtype_name(src.dtype()));
  if (src.impl() == impl_.get()) return *this;
  TensorImpl* s = src.impl();
  impl_->storage = s->storage;
  impl_->shape = s->shape;
  impl_->strides = s->strides;
  impl_->offset = s->offset;
  impl_->dtype = s->dtype;
  impl_->grad = Tensor();
  impl_->grad_accumulator.reset();  // its metadata named the old dtype, shape and device
  return *this;
}

Tensor& Tensor::requires_grad_(bool on) {
  REMORA_DEFINED("requires_grad_");
  REMORA_CHECK(is_leaf(), "requires_grad_: only leaf tensors can change requires_grad; "
                          "use detach() to make a new leaf");
  REMORA_CHECK(!on || is_floating(dtype()),
               "requires_grad_: only floating tensors can require grad, got "
                   << dtype_name(dtype()));
  impl_->requires_grad = on;
  return *this;
}
bool Tensor::requires_grad() const {
  return impl_ && (impl_->requires_grad || impl_->grad_fn != nullptr);
}
bool Tensor::is_leaf() const { return impl_ && impl_->grad_fn == nullptr; }
const Tensor& Tensor::grad() const {
  REMORA_DEFINED("grad");
  return impl_->grad;
}
void Tensor::set_grad(const Tensor& g) {
  REMORA_DEFINED("set_grad");
  REMORA_CHECK(!g.defined() || g.shape() == shape(),
               "set_grad: gradient shape " << shape_str(g.shape()) << " does not match tensor "
                                           << shape_str(shape()));
  impl_->grad = g;
}
void Tensor::zero_grad() {
  REMORA_DEFINED("zero_grad");
  impl_->grad = Tensor();
}
const std::shared_ptr<Node>& Tensor::grad_fn() const {
  REMORA_DEFINED("grad_fn");
  return impl_->grad_fn;
}
int Tensor::output_nr() const { return impl_ ? impl_->output_nr : 0; }

void Tensor::backward(const Tensor& gradient, bool retain_graph) const {
  ::remora::backward({*this}, {gradient}, retain_graph);
}

Tensor Tensor::detach() const {
  REMORA_DEFINED("detach");
  return make_view(*this, impl_->shape, impl_->strides, impl_->offset);
}

// ---- printing ----

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  if (!t.defined()) return os << "tensor(undefined)";
  const std::vector<double> v = t.to_vector();
  const Shape& s = t.shape();
  const int64_t n = int64_t(s.size());
  // Prints nested brackets, eliding the middle of dims longer than 6.
  std::function<void(int64_t, int64_t)> rec = [&](int64_t d, int64_t base) {
    if (d == n) {
      if (t.dtype() == DType::i64)
        os << int64_t(v[size_t(base)]);
      else
        os << std::setprecision(t.dtype() == DType::f64 ? 8 : is_half(t.dtype()) ? 4 : 5)
           << v[size_t(base)];
      return;
    }
    const int64_t stride = shape_numel(Shape(s.begin() + d + 1, s.end()));
    os << "[";
    for (int64_t i = 0; i < s[size_t(d)]; ++i) {
      if (s[size_t(d)] > 6 && i == 3) {
        os << "..., ";
        i = s[size_t(d)] - 3;
      }
      rec(d + 1, base + i * stride);
      if (i + 1 < s[size_t(d)]) os << (d + 1 == n ? ", " : ",\n" + std::string(size_t(d + 8), ' '));
    }
    os << "]";
  };
  os << "tensor(";
  rec(0, 0);
  os << ", dtype=" << dtype_name(t.dtype());
  if (!t.device().is_cpu()) os << ", device=" << t.device().str();
  if (t.requires_grad()) os << ", requires_grad";
  return os << ")";
}

}  // namespace remora
