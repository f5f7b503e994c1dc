// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// remora.Tensor: metadata, autograd, conversions, operators, indexing,
/// factories, and the zero-copy exchanges (buffer protocol / NumPy,
/// __array_interface__, DLPack).
///
/// Lifetime rules of the zero-copy paths:
/// - from_buffer (remora.from_numpy): the tensor's storage holds a reference to
///   the Python object and its buffer view; both are released, under the GIL,
///   when the last tensor (or view) over that storage goes.
/// - __array_interface__ (Tensor.numpy()): NumPy keeps the Tensor object as the
///   array's base, so the storage lives as long as the array.
/// - __dlpack__: the capsule ("dltensor") holds a Tensor handle; a consumer
///   renames it "used_dltensor" and calls the deleter exactly once; an unused
///   capsule frees it when collected.
/// - from_dlpack: the capsule is renamed "used_dltensor" and the producer's
///   deleter runs exactly once, when the last tensor over the memory goes.
#include <cstring>
#include <sstream>

#include <remora/core/tensor_impl.h>
#include <remora/backends/backend.h>

#include "common.h"
#include "dlpack.h"

namespace remora {
namespace python {
namespace {

// ---- shapes from Python: f(2, 3), f((2, 3)), f([2, 3]) ----
Shape shape_from_args(const py::args& args) {
  if (args.size() == 1 && !py::isinstance<py::int_>(args[0])) return args[0].cast<Shape>();
  Shape s;
  for (auto a : args) s.push_back(a.cast<int64_t>());
  return s;
}

TensorOptions make_options(const std::optional<DType>& dt, const std::optional<Device>& dev, bool requires_grad,
                           DType default_dt = DType::f32) {
  return TensorOptions().dtype(dt.value_or(default_dt)).device(dev.value_or(Device::cpu())).requires_grad(requires_grad);
}

// ---- nested lists -> tensor ----
void walk_list(const py::handle& h, size_t depth, Shape& shape, std::vector<double>& vals, bool& any_float,
               bool& all_bool) {
  if (py::isinstance<py::list>(h) || py::isinstance<py::tuple>(h)) {
    py::sequence seq = py::reinterpret_borrow<py::sequence>(h);
    const int64_t n = int64_t(seq.size());
    if (shape.size() == depth) {
      shape.push_back(n);
    } else if (shape.size() < depth || shape[depth] != n) {
      throw Error("remora.tensor: the nested lists are ragged (dim " + std::to_string(depth) + " has sizes " +
                  std::to_string(depth < shape.size() ? shape[depth] : -1) + " and " + std::to_string(n) + ")");
    }
    for (auto item : seq) walk_list(item, depth + 1, shape, vals, any_float, all_bool);
    return;
  }
  if (depth != shape.size())
    throw Error("remora.tensor: the nested lists are ragged (a number where a list was expected)");
  if (py::isinstance<py::bool_>(h)) {
    vals.push_back(h.cast<bool>() ? 1 : 0);
    return;
  }
  all_bool = false;
  if (py::isinstance<py::int_>(h)) {
    vals.push_back(double(h.cast<int64_t>()));
    return;
  }
  if (py::isinstance<Tensor>(h)) {
    vals.push_back(h.cast<Tensor>().item());
    any_float = true;
    return;
  }
  any_float = true;
  vals.push_back(h.cast<double>());
}

// ---- buffer protocol (NumPy and any exporter) -> tensor, sharing memory ----
DType dtype_from_format(const std::string& fmt, ssize_t itemsize) {
  std::string f = fmt;
  if (!f.empty() && (f[0] == '<' || f[0] == '=' || f[0] == '@' || f[0] == '|')) f = f.substr(1);
  if (f == "f" && itemsize == 4) return DType::f32;
  if (f == "d" && itemsize == 8) return DType::f64;
  if (f == "e" && itemsize == 2) return DType::f16;
  if ((f == "q" || f == "l") && itemsize == 8) return DType::i64;
  if ((f == "i" || f == "l") && itemsize == 4) return DType::i32;
  if (f == "B" && itemsize == 1) return DType::u8;
  if (f == "?" && itemsize == 1) return DType::b8;
  throw Error("remora.from_numpy: element format '" + fmt + "' (" + std::to_string(itemsize) +
              " bytes) has no Remora dtype (float32, float64, float16, int64, int32, uint8, bool)");
}

struct BufferOwner {
  py::object obj;
  Py_buffer view;
};

void release_buffer_owner(BufferOwner* o) {
  if (!Py_IsInitialized()) return;  // the interpreter is gone: nothing left to release
  py::gil_scoped_acquire gil;
  PyBuffer_Release(&o->view);
  delete o;
}

Tensor from_buffer(const py::object& obj) {
  auto owner = std::make_unique<BufferOwner>();
  owner->obj = obj;
  int rc = PyObject_GetBuffer(obj.ptr(), &owner->view, PyBUF_RECORDS);  // writable, strided, with format
  if (rc != 0) {
    PyErr_Clear();
    rc = PyObject_GetBuffer(obj.ptr(), &owner->view, PyBUF_RECORDS_RO);
  }
  if (rc != 0) throw py::error_already_set();
  const Py_buffer& v = owner->view;
  DType dt;
  try {
    dt = dtype_from_format(v.format ? v.format : "B", v.itemsize);
  } catch (...) {
    PyBuffer_Release(&owner->view);
    throw;
  }
  Shape shape(v.shape, v.shape + v.ndim), strides(v.ndim);
  for (int i = 0; i < v.ndim; ++i) {
    if (v.strides[i] % v.itemsize != 0 || v.strides[i] < 0) {
      PyBuffer_Release(&owner->view);
      throw Error("remora.from_numpy: stride " + std::to_string(v.strides[i]) + " bytes of dim " +
                  std::to_string(i) +
                  " is negative or not a multiple of the element size: pass a copy (numpy.ascontiguousarray)");
    }
    strides[i] = v.strides[i] / v.itemsize;
  }
  void* data = v.buf;
  BufferOwner* raw = owner.release();
  try {
    return from_blob(data, shape, strides, [raw](void*) { release_buffer_owner(raw); },
                     TensorOptions().dtype(dt));
  } catch (...) {
    PyBuffer_Release(&raw->view);
    delete raw;
    throw;
  }
}

// ---- __array_interface__ ----
const char* typestr(DType t) {
  switch (t) {
    case DType::f32: return "<f4";
    case DType::f64: return "<f8";
    case DType::i64: return "<i8";
    case DType::b8: return "|b1";
    case DType::i32: return "<i4";
    case DType::u8: return "|u1";
    case DType::f16: return "<f2";
    case DType::bf16: break;
  }
  throw Error("Tensor.numpy(): NumPy has no bfloat16; convert first (t.to(remora.float32))");
}

void check_host_export(const Tensor& t, const char* what) {
  REMORA_CHECK(t.defined(), what << ": the tensor is undefined");
  REMORA_CHECK(t.device().is_cpu(), what << ": the tensor is on " << t.device().str()
                                         << "; NumPy reads host memory: call t.cpu() first");
  REMORA_CHECK(!t.requires_grad(), what << ": the tensor requires grad; call t.detach() first "
                                           "(the array would share its memory without its history)");
}

py::dict array_interface(const Tensor& t) {
  check_host_export(t, "Tensor.__array_interface__");
  py::dict d;
  py::tuple shape(t.dim()), strides(t.dim());
  const int64_t es = t.element_size();
  for (int64_t i = 0; i < t.dim(); ++i) {
    shape[i] = t.shape()[i];
    strides[i] = t.strides()[i] * es;
  }
  d["shape"] = shape;
  d["typestr"] = typestr(t.dtype());
  d["data"] = py::make_tuple(reinterpret_cast<uintptr_t>(t.numel() ? t.raw_data() : nullptr), false);
  d["strides"] = strides;
  d["version"] = 3;
  return d;
}

// ---- DLPack ----
struct DLPackContext {
  Tensor t;
  Shape shape, strides;
  DLManagedTensor managed;
};

void dlpack_deleter(DLManagedTensor* m) { delete static_cast<DLPackContext*>(m->manager_ctx); }

DLDataType dl_dtype(DType t) {
  switch (t) {
    case DType::f32: return {kDLFloat, 32, 1};
    case DType::f64: return {kDLFloat, 64, 1};
    case DType::f16: return {kDLFloat, 16, 1};
    case DType::bf16: return {kDLBfloat, 16, 1};
    case DType::i64: return {kDLInt, 64, 1};
    case DType::i32: return {kDLInt, 32, 1};
    case DType::u8: return {kDLUInt, 8, 1};
    case DType::b8: return {kDLBool, 8, 1};
  }
  throw Error("DLPack: unknown dtype");
}

DType from_dl_dtype(DLDataType d) {
  REMORA_CHECK(d.lanes == 1, "from_dlpack: vector types (lanes = " << d.lanes << ") have no Remora dtype");
  if (d.code == kDLFloat && d.bits == 32) return DType::f32;
  if (d.code == kDLFloat && d.bits == 64) return DType::f64;
  if (d.code == kDLFloat && d.bits == 16) return DType::f16;
  if (d.code == kDLBfloat && d.bits == 16) return DType::bf16;
  if (d.code == kDLInt && d.bits == 64) return DType::i64;
  if (d.code == kDLInt && d.bits == 32) return DType::i32;
  if (d.code == kDLUInt && d.bits == 8) return DType::u8;
  if (d.code == kDLBool && d.bits == 8) return DType::b8;
  throw Error("from_dlpack: DLPack type (code " + std::to_string(int(d.code)) + ", " + std::to_string(int(d.bits)) +
              " bits) has no Remora dtype (float32/64/16, bfloat16, int64, int32, uint8, bool)");
}

// Waits until the tensor's pending kernels are done: a one-element host read
// is ordered after them in the device's queue.
void sync_device(const Tensor& t) {
  if (!t.device().is_cpu() && t.numel() > 0) (void)t.reshape({-1}).slice(0, 0, 1).to(Device::cpu());
}

void capsule_destructor(PyObject* cap) {
  // An unconsumed capsule still owns its tensor; a consumed one ("used_dltensor") does not.
  if (PyCapsule_IsValid(cap, "dltensor")) {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap, "dltensor"));
    if (m && m->deleter) m->deleter(m);
    PyErr_Restore(type, value, tb);
  }
}

py::capsule to_dlpack(const Tensor& t, const py::object& stream) {
  REMORA_CHECK(t.defined(), "Tensor.__dlpack__: the tensor is undefined");
  REMORA_CHECK(!t.requires_grad(), "Tensor.__dlpack__: the tensor requires grad; export t.detach() "
                                   "(DLPack carries the memory, not the history)");
  if (!t.device().is_cpu()) {
    // The consumer's stream (an int, or None) must see the data complete: Remora
    // finishes its queue before handing the memory over.
    sync_device(t);
  } else if (!stream.is_none()) {
    REMORA_CHECK(false, "Tensor.__dlpack__: stream must be None for a CPU tensor");
  }
  auto* ctx = new DLPackContext{t, t.shape(), t.strides(), {}};
  DLTensor& dl = ctx->managed.dl_tensor;
  dl.data = t.numel() ? t.raw_data() : nullptr;
  dl.device = {t.device().is_cpu() ? kDLCPU : kDLCUDA, t.device().is_cpu() ? 0 : t.device().index};
  dl.ndim = int32_t(t.dim());
  dl.dtype = dl_dtype(t.dtype());
  dl.shape = ctx->shape.data();
  dl.strides = ctx->strides.data();
  dl.byte_offset = 0;
  ctx->managed.manager_ctx = ctx;
  ctx->managed.deleter = dlpack_deleter;
  PyObject* cap = PyCapsule_New(&ctx->managed, "dltensor", capsule_destructor);
  if (!cap) {
    delete ctx;
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::capsule>(cap);
}

// __dlpack__ with the array API's keywords (stream, max_version, dl_device,
// copy). The capsule is always the unversioned "dltensor", which the
// standard allows whatever max_version asks for (consumers check the name).
// Accepting the keywords matters for speed as well as for conformance:
// consumers such as torch >= 2.3 and NumPy >= 2.1 call
// __dlpack__(max_version=...) first and retry without it on TypeError, and
// pybind11's TypeError prints the repr of every argument, the whole tensor.
py::capsule dlpack_export(const Tensor& t, const py::object& stream, const py::object& max_version,
                          const py::object& dl_device, const py::object& copy) {
  (void)max_version;
  Tensor out = t;
  const bool may_copy = copy.is_none() || copy.cast<bool>();
  bool copied = false;
  if (!dl_device.is_none()) {
    py::tuple dev = dl_device.cast<py::tuple>();
    if (dev.size() != 2) throw py::value_error("Tensor.__dlpack__: dl_device must be a pair (device type, id)");
    const int type = dev[0].cast<int>(), id = dev[1].cast<int>();
    Device want;
    if (type == kDLCPU) want = Device::cpu();
    else if (type == kDLCUDA) want = Device::cuda(id);
    else throw py::buffer_error("Tensor.__dlpack__: dl_device type " + std::to_string(type) +
                                " is neither the CPU nor CUDA");
    if (want != t.device()) {
      if (!may_copy) throw py::buffer_error("Tensor.__dlpack__: dl_device differs from the tensor's device and "
                                            "copy=False");
      out = t.to(want);
      copied = true;
    }
  }
  if (!copy.is_none() && copy.cast<bool>() && !copied) out = t.clone();
  // A copy lives on the target device: a stream given for it is the consumer's.
  return to_dlpack(out, copied && out.device().is_cpu() ? py::none() : stream);
}

Tensor from_dlpack_capsule(const py::capsule& cap) {
  PyObject* c = cap.ptr();
  REMORA_CHECK(PyCapsule_IsValid(c, "dltensor"),
               "from_dlpack: the capsule is not an unused DLPack tensor (named 'dltensor'); "
               "a capsule can be consumed once");
  auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(c, "dltensor"));
  const DLTensor& dl = m->dl_tensor;
  Device dev;
  if (dl.device.device_type == kDLCPU) {
    dev = Device::cpu();
  } else if (dl.device.device_type == kDLCUDA || dl.device.device_type == kDLCUDAManaged) {
    dev = Device::cuda(dl.device.device_id);
  } else {
    throw Error("from_dlpack: DLPack device type " + std::to_string(int(dl.device.device_type)) +
                " is neither the CPU nor CUDA");
  }
  const DType dt = from_dl_dtype(dl.dtype);
  Shape shape(dl.shape, dl.shape + dl.ndim);
  Shape strides;
  if (dl.strides) strides.assign(dl.strides, dl.strides + dl.ndim);
  const int64_t numel = shape_numel(shape);
  for (int i = 0; i < dl.ndim && numel > 0; ++i)
    REMORA_CHECK(strides.empty() || strides[i] >= 0 || shape[i] == 1,
                 "from_dlpack: negative stride " << strides[i] << " in dim " << i << " (Remora views have none)");
  for (int i = 0; i < int(strides.size()); ++i)
    if (shape[i] == 1 && strides[i] < 0) strides[i] = 0;
  void* data = dl.data ? static_cast<char*>(dl.data) + dl.byte_offset : nullptr;
  Tensor t = from_blob(data, shape, strides,
                       [m](void*) {
                         if (!m->deleter) return;
                         if (Py_IsInitialized()) {
                           py::gil_scoped_acquire gil;
                           m->deleter(m);
                         } else {
                           m->deleter(m);
                         }
                       },
                       TensorOptions().dtype(dt).device(dev));
  // Taken: the tensor's storage now calls the deleter, once.
  PyCapsule_SetName(c, "used_dltensor");
  return t;
}

Tensor from_dlpack(const py::object& obj) {
  if (py::isinstance<py::capsule>(obj)) return from_dlpack_capsule(obj.cast<py::capsule>());
  REMORA_CHECK(py::hasattr(obj, "__dlpack__"),
               "from_dlpack: the object has no __dlpack__ method and is not a DLPack capsule");
  py::object cap;
  if (py::hasattr(obj, "__dlpack_device__")) {
    py::tuple dev = obj.attr("__dlpack_device__")();
    const int type = dev[0].cast<int>();
    if (type == kDLCUDA || type == kDLCUDAManaged) {
      // The producer makes its data visible to our queue's stream (1: CUDA's legacy default stream).
      void* s = backend(Device::cuda(dev[1].cast<int>())).native_stream();
      cap = obj.attr("__dlpack__")(py::arg("stream") = s ? reinterpret_cast<uintptr_t>(s) : uintptr_t(1));
    }
  }
  if (!cap) cap = obj.attr("__dlpack__")();
  return from_dlpack_capsule(cap.cast<py::capsule>());
}

// ---- indexing ----
indexing::TensorIndex to_index(const py::handle& h) {
  using indexing::TensorIndex;
  if (h.is_none()) return TensorIndex(indexing::None);
  if (h.ptr() == Py_Ellipsis) return TensorIndex(indexing::Ellipsis);
  if (py::isinstance<py::bool_>(h)) throw Error("Tensor index: a Python bool is not an index (use a bool tensor)");
  if (py::isinstance<py::int_>(h)) return TensorIndex(h.cast<int64_t>());
  if (py::isinstance<py::slice>(h)) {
    auto opt = [](PyObject* o) -> std::optional<int64_t> {
      if (o == Py_None) return std::nullopt;
      return py::cast<int64_t>(py::handle(o));
    };
    auto* s = reinterpret_cast<PySliceObject*>(h.ptr());
    return TensorIndex(indexing::Slice(opt(s->start), opt(s->stop), opt(s->step)));
  }
  if (py::isinstance<Tensor>(h)) return TensorIndex(h.cast<Tensor>());
  if (py::isinstance<py::list>(h)) {
    // A list of integers (positions) or bools (a mask).
    py::list l = py::reinterpret_borrow<py::list>(h);
    bool all_bool = l.size() > 0;
    std::vector<int64_t> v;
    for (auto x : l) {
      all_bool = all_bool && py::isinstance<py::bool_>(x);
      v.push_back(x.cast<int64_t>());
    }
    Tensor t = Tensor::from_vector(v, {int64_t(v.size())});
    return TensorIndex(all_bool ? t.to(DType::b8) : t);
  }
  if (PyObject_CheckBuffer(h.ptr()))
    return TensorIndex(from_buffer(py::reinterpret_borrow<py::object>(h)).clone());
  throw Error(std::string("Tensor index: cannot index with a ") + Py_TYPE(h.ptr())->tp_name +
              " (integers, slices, None, ..., bool or integer tensors and lists)");
}

std::vector<indexing::TensorIndex> to_indices(const py::handle& key) {
  std::vector<indexing::TensorIndex> out;
  if (py::isinstance<py::tuple>(key)) {
    for (auto k : py::reinterpret_borrow<py::tuple>(key)) out.push_back(to_index(k));
  } else {
    out.push_back(to_index(key));
  }
  return out;
}

py::object tolist_rec(const std::vector<double>& v, const std::vector<int64_t>& iv, bool integral, bool boolean,
                      const Shape& shape, size_t dim, int64_t& pos) {
  if (dim == shape.size()) {
    const int64_t p = pos++;
    if (boolean) return py::bool_(v[p] != 0);
    if (integral) return py::int_(iv[p]);
    return py::float_(v[p]);
  }
  py::list l;
  for (int64_t i = 0; i < shape[dim]; ++i) l.append(tolist_rec(v, iv, integral, boolean, shape, dim + 1, pos));
  return std::move(l);
}

py::object item(const Tensor& t) {
  if (t.dtype() == DType::b8) return py::bool_(t.item() != 0);
  if (is_integral(t.dtype())) return py::int_(t.item<int64_t>());
  return py::float_(t.item());
}

std::string repr(const Tensor& t) {
  if (!t.defined()) return "remora.Tensor(undefined)";
  std::ostringstream os;
  os << t;
  return os.str();
}

}  // namespace

void bind_tensor(py::module_& m) {
  py::class_<Tensor> T(m, "Tensor",
                       "A strided view over shared storage with reverse-mode autograd. Copying the handle "
                       "aliases; clone() copies the data. Make one with remora.tensor, zeros, ones, randn, "
                       "arange, from_numpy or from_dlpack.");
  T.def(py::init<>(), "An undefined tensor (what an absent optional tensor argument means).")
      .def_property_readonly("shape", [](const Tensor& t) { return py::tuple(py::cast(t.shape())); },
                             "The sizes, one per dim (a tuple).")
      .def("size", [](const Tensor& t, std::optional<int64_t> d) -> py::object {
             if (d) return py::int_(t.size(*d));
             return py::tuple(py::cast(t.shape()));
           }, py::arg("dim") = py::none(), "The shape, or the size of one dim.")
      .def("stride", [](const Tensor& t) { return py::tuple(py::cast(t.strides())); },
           "The strides in elements, one per dim.")
      .def_property_readonly("ndim", &Tensor::dim, "The number of dims.")
      .def("dim", &Tensor::dim, "The number of dims.")
      .def("numel", &Tensor::numel, "The number of elements.")
      .def("__len__", [](const Tensor& t) {
             REMORA_CHECK(t.dim() > 0, "len() of a 0-d tensor");
             return t.size(0);
           })
      .def_property_readonly("dtype", &Tensor::dtype, "The element type.")
      .def_property_readonly("device", &Tensor::device, "Where the storage lives.")
      .def_property_readonly("is_cuda", &Tensor::is_cuda, "Whether the tensor is on a CUDA GPU.")
      .def("is_contiguous", &Tensor::is_contiguous, "Whether the elements lie row-major without gaps.")
      .def("is_floating_point", &Tensor::is_floating_point, "Whether the dtype is floating.")
      .def_property_readonly("defined", &Tensor::defined, "Whether this handle holds a tensor.")
      .def("data_ptr", [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.raw_data()); },
           "The address of element 0 (CPU or device memory).")
      .def("element_size", &Tensor::element_size, "Bytes per element.")
      // autograd
      .def_property("requires_grad", &Tensor::requires_grad,
                    [](Tensor& t, bool on) { t.requires_grad_(on); },
                    "Whether backward computes a gradient for this tensor (settable on leaves).")
      .def("requires_grad_", [](Tensor& t, bool on) { t.requires_grad_(on); return t; }, py::arg("on") = true,
           "Marks this leaf as requiring grad and returns it.")
      .def_property("grad", [](const Tensor& t) { return tensor_or_none(t.grad()); },
                    [](Tensor& t, const py::object& g) { t.set_grad(optional_tensor(g)); },
                    "The gradient accumulated by backward (None until one reaches this leaf).")
      .def_property_readonly("is_leaf", &Tensor::is_leaf, "True when no recorded op made this tensor.")
      .def_property_readonly("grad_fn", [](const Tensor& t) -> py::object {
             if (!t.grad_fn()) return py::none();
             return py::str("<remora backward node>");
           }, "None for a leaf, else a marker that history exists.")
      .def("backward", [](const Tensor& t, const py::object& g, bool retain_graph) {
             t.backward(optional_tensor(g), retain_graph);
           }, py::arg("gradient") = py::none(), py::arg("retain_graph") = false,
           "Backpropagates from this tensor (a non-scalar needs gradient of its shape).")
      .def("detach", &Tensor::detach, "A new leaf sharing this storage, without history.")
      .def("zero_grad", &Tensor::zero_grad, "Drops the gradient.")
      // values
      .def("item", &item, "The one element as a Python number.")
      .def("tolist", [](const Tensor& t) -> py::object {
             const bool integral = is_integral(t.dtype());
             std::vector<double> v;
             std::vector<int64_t> iv;
             if (integral) iv = t.to_i64_vector(); else v = t.to_vector();
             int64_t pos = 0;
             return tolist_rec(v, iv, integral, t.dtype() == DType::b8, t.shape(), 0, pos);
           }, "The values as nested Python lists (a number for a 0-d tensor).")
      .def("__float__", [](const Tensor& t) { return t.item(); })
      .def("__int__", [](const Tensor& t) { return t.item<int64_t>(); })
      .def("__index__", [](const Tensor& t) {
             REMORA_CHECK(is_integral(t.dtype()), "only integer tensors of one element are indices");
             return t.item<int64_t>();
           })
      .def("__bool__", [](const Tensor& t) {
             REMORA_CHECK(t.numel() == 1, "the truth value of a tensor of " << t.numel()
                                             << " elements is ambiguous (use .any() or .all())");
             return t.item() != 0;
           })
      .def("__repr__", &repr)
      .def("__str__", &repr)
      .def("__hash__", [](const Tensor& t) { return reinterpret_cast<uintptr_t>(t.impl()); })
      .def("is_same", &Tensor::is_same, py::arg("other"), "Whether both handles name the same tensor.")
      // conversions and copies
      .def("to", [](const Tensor& t, DType dt) { return t.to(dt); }, py::arg("dtype"), "A copy in dtype (self when equal).")
      .def("to", [](const Tensor& t, const Device& d) { return t.to(d); }, py::arg("device"),
           "A copy on device (self when there).")
      .def("to", [](const Tensor& t, const Device& d, DType dt) { return t.to(d, dt); }, py::arg("device"),
           py::arg("dtype"), "to(dtype), then to(device).")
      .def("cpu", &Tensor::cpu, "to('cpu').")
      .def("cuda", &Tensor::cuda, py::arg("index") = 0, "to('cuda:index').")
      .def("float", &Tensor::to_float, "to(remora.float32).")
      .def("double", &Tensor::to_double, "to(remora.float64).")
      .def("long", &Tensor::to_long, "to(remora.int64).")
      .def("clone", &Tensor::clone, "A fresh contiguous copy (differentiable).")
      .def("contiguous", [](const Tensor& t) { return t.contiguous(); }, "self when contiguous, else a copy.")
      // views
      .def("reshape", [](const Tensor& t, const py::args& a) { return t.reshape(shape_from_args(a)); },
           "The same elements in a new shape (one -1 inferred): t.reshape(2, 3) or t.reshape((2, 3)).")
      .def("view", [](const Tensor& t, const py::args& a) { return t.view(shape_from_args(a)); },
           "As reshape, but always a view (an Error otherwise).")
      .def("flatten", &Tensor::flatten, py::arg("start") = 0, py::arg("end") = -1, "Dims start..end merged.")
      .def("unsqueeze", &Tensor::unsqueeze, py::arg("dim"), "A new dim of size 1.")
      .def("squeeze", [](const Tensor& t, std::optional<int64_t> d) { return d ? t.squeeze(*d) : t.squeeze(); },
           py::arg("dim") = py::none(), "Drops size-1 dims (or dim, when it has size 1).")
      .def_property_readonly("T", [](const Tensor& t) { return t.t(); }, "The last two dims swapped.")
      .def("t", &Tensor::t, "The last two dims swapped.")
      .def("narrow", &Tensor::narrow, py::arg("dim"), py::arg("start"), py::arg("length"),
           "slice(dim, start, start + length).")
      .def("select", &Tensor::select, py::arg("dim"), py::arg("index"), "The view at index of dim, dim dropped.")
      // in-place updates (no autograd)
      .def("copy_", [](Tensor& t, const Tensor& s) { t.copy_(s); return t; }, py::arg("src"),
           "Copies src into self (broadcast, converted).")
      .def("fill_", [](Tensor& t, double v) { t.fill_(v); return t; }, py::arg("value"), "Sets every element.")
      .def("zero_", [](Tensor& t) { t.zero_(); return t; }, "fill_(0).")
      .def("add_", [](Tensor& t, const Tensor& o, double alpha) { t.add_(o, alpha); return t; }, py::arg("other"),
           py::arg("alpha") = 1.0, "self += alpha * other.")
      .def("mul_", [](Tensor& t, double s) { t.mul_(s); return t; }, py::arg("scalar"), "self *= scalar.")
      // whole-tensor tests
      .def("allclose", &Tensor::allclose, py::arg("other"), py::arg("rtol") = 1e-5, py::arg("atol") = 1e-8,
           "Every |a - b| <= atol + rtol |b|.")
      .def("equal", &Tensor::equal, py::arg("other"), "Same shape and values.")
      .def("any", &Tensor::any, "Whether some element is non-zero.")
      .def("all", &Tensor::all, "Whether every element is non-zero.")
      .def("nonzero", &Tensor::nonzero, "The positions of the non-zero elements, [n, dim] int64.")
      .def("square", &Tensor::square, "self * self.")
      // indexing
      .def("__getitem__", [](const Tensor& t, const py::object& key) { return t.index(to_indices(key)); })
      .def("__setitem__", [](Tensor& t, const py::object& key, const py::object& v) {
             if (py::isinstance<Tensor>(v)) t.index_put_(to_indices(key), v.cast<Tensor>());
             else t.index_put_(to_indices(key), v.cast<double>());
           })
      .def("index_put", [](const Tensor& t, const py::object& key, const Tensor& v) {
             return t.index_put(to_indices(key), v);
           }, py::arg("key"), py::arg("value"), "self with value written at self[key], differentiable.")
      // zero-copy exchanges
      .def_property_readonly("__array_interface__", &array_interface,
                             "NumPy's array interface (CPU tensors without grad): np.asarray(t) shares memory.")
      .def("__dlpack__", &dlpack_export, py::arg("stream") = py::none(), py::kw_only(),
           py::arg("max_version") = py::none(), py::arg("dl_device") = py::none(), py::arg("copy") = py::none(),
           "A DLPack capsule sharing this tensor's memory (the consumer frees it once), the array API's "
           "signature: dl_device (type, id) other than the tensor's copies there (BufferError with "
           "copy=False), copy=True exports a copy; the capsule is the unversioned 'dltensor' whatever "
           "max_version asks for.")
      .def("__dlpack_device__", [](const Tensor& t) {
             return py::make_tuple(int(t.device().is_cpu() ? kDLCPU : kDLCUDA),
                                   t.device().is_cpu() ? 0 : t.device().index);
           }, "(DLPack device type, ordinal).");

  // Operators: tensors and Python numbers (applied in the tensor's dtype).
  T.def("__add__", [](const Tensor& a, const Tensor& b) { return a + b; }, py::is_operator())
      .def("__add__", [](const Tensor& a, double s) { return a + s; }, py::is_operator())
      .def("__radd__", [](const Tensor& a, double s) { return s + a; }, py::is_operator())
      .def("__sub__", [](const Tensor& a, const Tensor& b) { return a - b; }, py::is_operator())
      .def("__sub__", [](const Tensor& a, double s) { return a - s; }, py::is_operator())
      .def("__rsub__", [](const Tensor& a, double s) { return s - a; }, py::is_operator())
      .def("__mul__", [](const Tensor& a, const Tensor& b) { return a * b; }, py::is_operator())
      .def("__mul__", [](const Tensor& a, double s) { return a * s; }, py::is_operator())
      .def("__rmul__", [](const Tensor& a, double s) { return s * a; }, py::is_operator())
      .def("__truediv__", [](const Tensor& a, const Tensor& b) { return a / b; }, py::is_operator())
      .def("__truediv__", [](const Tensor& a, double s) { return a / s; }, py::is_operator())
      .def("__rtruediv__", [](const Tensor& a, double s) { return s / a; }, py::is_operator())
      .def("__matmul__", [](const Tensor& a, const Tensor& b) { return a.matmul(b); }, py::is_operator())
      .def("__pow__", [](const Tensor& a, double p) { return a.pow(p); }, py::is_operator())
      .def("__neg__", [](const Tensor& a) { return -a; })
      .def("__pos__", [](const Tensor& a) { return a; })
      .def("__abs__", [](const Tensor& a) { return a.abs(); })
      .def("__invert__", [](const Tensor& a) { return ~a; })
      .def("__and__", [](const Tensor& a, const Tensor& b) { return a & b; }, py::is_operator())
      .def("__or__", [](const Tensor& a, const Tensor& b) { return a | b; }, py::is_operator())
      .def("__xor__", [](const Tensor& a, const Tensor& b) { return a ^ b; }, py::is_operator())
      .def("__iadd__", [](Tensor& a, const Tensor& b) { return a += b; }, py::is_operator())
      .def("__iadd__", [](Tensor& a, double s) { return a += s; }, py::is_operator())
      .def("__isub__", [](Tensor& a, const Tensor& b) { return a -= b; }, py::is_operator())
      .def("__isub__", [](Tensor& a, double s) { return a -= s; }, py::is_operator())
      .def("__imul__", [](Tensor& a, const Tensor& b) { return a *= b; }, py::is_operator())
      .def("__imul__", [](Tensor& a, double s) { return a *= s; }, py::is_operator())
      .def("__itruediv__", [](Tensor& a, const Tensor& b) { return a /= b; }, py::is_operator())
      .def("__itruediv__", [](Tensor& a, double s) { return a /= s; }, py::is_operator());
#define REMORA_PY_COMPARE(pyname, op)                                                                  \
  T.def(pyname, [](const Tensor& a, const Tensor& b) { return a op b; }, py::is_operator())            \
      .def(pyname, [](const Tensor& a, double s) { return a op s; }, py::is_operator());
  REMORA_PY_COMPARE("__eq__", ==)
  REMORA_PY_COMPARE("__ne__", !=)
  REMORA_PY_COMPARE("__lt__", <)
  REMORA_PY_COMPARE("__le__", <=)
  REMORA_PY_COMPARE("__gt__", >)
  REMORA_PY_COMPARE("__ge__", >=)
#undef REMORA_PY_COMPARE
  // Anything else compared with a tensor: NotImplemented, so `t == None` is False.
  T.def("__eq__", [](const Tensor&, const py::object&) { return py::reinterpret_borrow<py::object>(Py_NotImplemented); })
      .def("__ne__", [](const Tensor&, const py::object&) { return py::reinterpret_borrow<py::object>(Py_NotImplemented); });

  // ---- factories ----
  m.def("_tensor_from_list", [](const py::object& data, std::optional<DType> dt, std::optional<Device> dev,
                                bool requires_grad) {
          Shape shape;
          std::vector<double> vals;
          bool any_float = false, all_bool = true;
          walk_list(data, 0, shape, vals, any_float, all_bool);
          if (vals.empty()) all_bool = false;
          const DType d = dt.value_or(any_float ? DType::f32 : all_bool ? DType::b8 : DType::i64);
          Tensor t;
          if (!any_float) {
            std::vector<int64_t> iv(vals.size());
            for (size_t i = 0; i < vals.size(); ++i) {
              iv[i] = int64_t(vals[i]);
            }
            t = Tensor::from_vector(iv, Shape{int64_t(iv.size())}, d == DType::b8 ? DType::i64 : d).reshape(shape);
            if (d == DType::b8) t = t.to(DType::b8);
          } else {
            t = Tensor::from_vector(vals, Shape{int64_t(vals.size())}, d).reshape(shape);
          }
          t = t.contiguous().detach();
          if (dev) t = t.to(*dev);
          if (requires_grad) t.requires_grad_(true);
          return t;
        }, py::arg("data"), py::arg("dtype") = py::none(), py::arg("device") = py::none(),
        py::arg("requires_grad") = false);
  m.def("_zeros", [](const Shape& s, std::optional<DType> dt, std::optional<Device> dev, bool rg) {
    return Tensor::zeros(s, make_options(dt, dev, rg));
  });
  m.def("_ones", [](const Shape& s, std::optional<DType> dt, std::optional<Device> dev, bool rg) {
    return Tensor::ones(s, make_options(dt, dev, rg));
  });
  m.def("_empty", [](const Shape& s, std::optional<DType> dt, std::optional<Device> dev, bool rg) {
    return Tensor::empty(s, make_options(dt, dev, rg));
  });
  m.def("_full", [](const Shape& s, double v, std::optional<DType> dt, std::optional<Device> dev, bool rg) {
    return Tensor::full(s, v, make_options(dt, dev, rg));
  });
  m.def("_randn", [](const Shape& s, std::optional<DType> dt, std::optional<Device> dev, bool rg, Generator* g) {
    return Tensor::randn(s, make_options(dt, dev, rg), g);
  });
  m.def("_rand", [](const Shape& s, std::optional<DType> dt, std::optional<Device> dev, bool rg, Generator* g) {
    return Tensor::rand(s, make_options(dt, dev, rg), g);
  });
  m.def("_arange", [](double start, double end, double step, DType dt, std::optional<Device> dev, bool rg) {
    Tensor t = Tensor::arange(start, end, step, dt, dev.value_or(Device::cpu()));
    if (rg) t.requires_grad_(true);
    return t;
  });
  m.def("from_numpy", &from_buffer, py::arg("array"),
        "A tensor sharing the memory of a NumPy array (or any buffer-protocol object): writes through "
        "either show in the other. The array stays alive while the tensor (or a view of it) does.");
  m.def("from_dlpack", &from_dlpack, py::arg("obj"),
        "A tensor sharing the memory of an object with __dlpack__ (a torch tensor, a NumPy array, ...) "
        "or of a DLPack capsule; the producer's deleter runs once, when the last user goes.");
  m.def("to_dlpack", [](const Tensor& t) { return to_dlpack(t, py::none()); }, py::arg("tensor"),
        "A DLPack capsule sharing the tensor's memory (legacy form of Tensor.__dlpack__).");
}

}  // namespace python
}  // namespace remora
