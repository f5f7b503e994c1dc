// SPDX-License-Identifier: BSD-3-Clause
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
Storage::Storage(void* d, size_t n, Device dev, std::function<void(void*)> del)
    : data(d), nbytes(n), device(dev), external(true), deleter(std::move(del)) {
  backend(dev);  // a device this build lacks is an error here
}
Storage::~Storage() {
  if (external) {
    if (deleter) deleter(data);
    return;
  }
  if (data) backend(device).free(data, nbytes);
}

Tensor from_blob(void* data, const Shape& shape, const Shape& strides,
                 std::function<void(void*)> deleter, const TensorOptions& o) {
  REMORA_CHECK(data != nullptr || shape_numel(shape) == 0, "from_blob: data is null");
  for (int64_t d : shape) REMORA_CHECK(d >= 0, "from_blob: negative size in shape " << shape_str(shape));
  const Shape st = strides.empty() ? contiguous_strides(shape) : strides;
  REMORA_CHECK(st.size() == shape.size(), "from_blob: " << st.size() << " strides for shape "
                                                         << shape_str(shape) << "; give one per dim");
  int64_t extent = 1;  // elements from the first to one past the last reachable element
  for (size_t i = 0; i < shape.size(); ++i) {
    REMORA_CHECK(st[i] >= 0, "from_blob: negative strides are not supported");
    if (shape[i] == 0) extent = 0;
  }
  if (extent != 0)
    for (size_t i = 0; i < shape.size(); ++i) extent += (shape[i] - 1) * st[i];
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(data, size_t(extent) * dtype_size(o.dtype()), o.device(),
                                            std::move(deleter));
  impl->shape = shape;
  impl->strides = st;
  impl->offset = 0;
  impl->dtype = o.dtype();
  Tensor t(impl);
  if (o.requires_grad()) t.requires_grad_();
  return t;
}
Tensor from_blob(void* data, const Shape& shape, const TensorOptions& o) {
  return from_blob(data, shape, {}, nullptr, o);
}
Tensor from_blob(void* data, const Shape& shape, std::function<void(void*)> deleter,
                 const TensorOptions& o) {
  return from_blob(data, shape, {}, std::move(deleter), o);
}

TensorOptions Tensor::options() const {
  return TensorOptions().dtype(dtype()).device(device());
}

const char* dtype_torch_name(DType t) {
  switch (t) {
    case DType::f32: return "Float";
    case DType::f64: return "Double";
    case DType::i64: return "Long";
    case DType::b8: return "Bool";
    case DType::i32: return "Int";
    case DType::u8: return "Byte";
    case DType::bf16: return "BFloat16";
    case DType::f16: return "Half";
  }
  return "?";
}
std::ostream& operator<<(std::ostream& os, DType t) { return os << dtype_torch_name(t); }
std::ostream& operator<<(std::ostream& os, Device d) { return os << d.str(); }
std::ostream& operator<<(std::ostream& os, const TensorOptions& o) {
  return os << "TensorOptions(dtype=" << dtype_torch_name(o.dtype()) << ", device=" << o.device().str()
            << ", requires_grad=" << (o.requires_grad() ? "true" : "false") << ")";
}
std::ostream& operator<<(std::ostream& os, const Shape& s) { return os << shape_str(s); }

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
      case DType::b8: t.data_ptr<bool>()[i] = v[i] != S(0); break;
      case DType::i32: t.data_ptr<int32_t>()[i] = int32_t(v[i]); break;
      case DType::u8: t.data_ptr<uint8_t>()[i] = uint8_t(v[i]); break;
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
      case DType::b8: out[size_t(i)] = c.data_ptr<bool>()[i] ? 1.0 : 0.0; break;
      case DType::i32: out[size_t(i)] = c.data_ptr<int32_t>()[i]; break;
      case DType::u8: out[size_t(i)] = c.data_ptr<uint8_t>()[i]; break;
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
    case DType::b8: return buf[0] != 0 ? 1.0 : 0.0;
    case DType::i32: { int32_t v; std::memcpy(&v, buf, 4); return v; }
    case DType::u8: return double(static_cast<unsigned char>(buf[0]));
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

namespace {
// One element as libtorch writes it: integers and bools plainly, floats with
// 4 decimals (scientific past 1e5 or below 1e-4).
std::string format_value(double v, DType dt) {
  std::ostringstream o;
  if (!is_floating(dt)) {
    o << int64_t(v);
  } else if (std::isfinite(v) && v != 0 && (std::fabs(v) >= 1e5 || std::fabs(v) < 1e-4)) {
    o << std::scientific << std::setprecision(4) << v;
  } else {
    o << std::fixed << std::setprecision(4) << v;
  }
  return o.str();
}
// The positions shown along a dim of size n: all, or the first and last 3
// around -1 (printed as "...").
std::vector<int64_t> shown(int64_t n) {
  std::vector<int64_t> r;
  if (n <= 6) {
    for (int64_t i = 0; i < n; ++i) r.push_back(i);
  } else {
    for (int64_t i : {int64_t(0), int64_t(1), int64_t(2), int64_t(-1), n - 3, n - 2, n - 1}) r.push_back(i);
  }
  return r;
}
}  // namespace

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  if (!t.defined()) return os << "[ Tensor (undefined) ]";
  const std::vector<double> v = t.to_vector();
  const Shape& s = t.shape();
  const DType dt = t.dtype();
  const int64_t n = int64_t(s.size());
  const Shape cs = contiguous_strides(s);
  if (n == 0) {
    os << format_value(v[0], dt) << "\n";
  } else if (t.numel() > 0) {
    size_t width = 0;
    for (double x : v) width = std::max(width, format_value(x, dt).size());
    // Prints the matrix of the last two dims (a column for 1-D) at `base`.
    auto matrix = [&](int64_t base) {
      const int64_t rows = n == 1 ? s[0] : s[size_t(n - 2)], cols = n == 1 ? 1 : s[size_t(n - 1)];
      const int64_t rs = n == 1 ? cs[0] : cs[size_t(n - 2)], colstride = n == 1 ? 0 : cs[size_t(n - 1)];
      for (int64_t r : shown(rows)) {
        if (r < 0) {
          os << " ...\n";
          continue;
        }
        for (int64_t c : shown(cols)) {
          if (c < 0)
            os << " ...";
          else
            os << " " << std::setw(int(width)) << format_value(v[size_t(base + r * rs + c * colstride)], dt);
        }
        os << "\n";
      }
    };
    if (n <= 2) {
      matrix(0);
    } else {
      // Every leading index (the first and last 3 of long dims), headed "(i,j,.,.) =".
      std::vector<int64_t> idx(size_t(n - 2), 0);
      std::function<void(int64_t, int64_t, std::vector<int64_t>&)> lead = [&](int64_t d, int64_t base,
                                                                                std::vector<int64_t>& at) {
        if (d == n - 2) {
          os << "(";
          for (int64_t k : at) os << k + 1 << ",";
          os << ".,.) = \n";
          matrix(base);
          os << "\n";
          return;
        }
        for (int64_t i : shown(s[size_t(d)])) {
          if (i < 0) {
            os << "...\n\n";
            continue;
          }
          at.push_back(i);
          lead(d + 1, base + i * cs[size_t(d)], at);
          at.pop_back();
        }
      };
      std::vector<int64_t> at;
      lead(0, 0, at);
    }
  }
  os << "[ " << (t.device().is_cpu() ? "CPU" : "CUDA") << dtype_torch_name(dt) << "Type{";
  for (int64_t i = 0; i < n; ++i) os << (i ? "," : "") << s[size_t(i)];
  // Remora's dtype name, and whether it requires grad, after libtorch's footer.
  return os << "} ] (" << dtype_name(dt) << (t.requires_grad() ? ", requires_grad)" : ")");
}

}  // namespace remora
