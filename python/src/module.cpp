// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// remora._C: the extension module. Errors, dtypes, devices, generators and
/// grad mode here; the rest in the other sources of this folder.
#include <remora/backends/backend.h>
#include <remora/core/version.h>

#include "common.h"

namespace remora {
namespace python {

PyObject* error_class = nullptr;

Tensor optional_tensor(const py::handle& h) {
  if (h.is_none()) return Tensor();
  return h.cast<Tensor>();
}

py::object tensor_or_none(const Tensor& t) {
  if (!t.defined()) return py::none();
  return py::cast(t);
}

}  // namespace python
}  // namespace remora

using namespace remora;
using namespace remora::python;

PYBIND11_MODULE(_C, m) {
  m.doc() = "Remora's C++ library: tensors, autograd, ops, nn, models, the Trainer and tokenizers.";

  // remora::Error and its subclasses become remora.Error (a RuntimeError) with
  // the C++ message; std::bad_alloc stays MemoryError (pybind11's own rule).
  static py::exception<Error> error(m, "Error", PyExc_RuntimeError);
  error_class = error.ptr();
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      PyErr_SetString(error_class, e.what());
    }
  });

  py::enum_<DType>(m, "dtype", "A tensor's element type (remora.float32, remora.float64, ...).")
      .value("float32", DType::f32)
      .value("float64", DType::f64)
      .value("int64", DType::i64)
      .value("bool", DType::b8)
      .value("int32", DType::i32)
      .value("uint8", DType::u8)
      .value("bfloat16", DType::bf16)
      .value("float16", DType::f16)
      .def_property_readonly("is_floating_point", [](DType t) { return is_floating(t); },
                             "Whether the type is f32, f64, bf16 or f16.")
      .def_property_readonly("itemsize", [](DType t) { return dtype_size(t); }, "Bytes per element.")
      .def("__repr__", [](DType t) { return std::string("remora.") + py::str(py::cast(t).attr("name")).cast<std::string>(); });

  py::enum_<DeviceType>(m, "DeviceType", "cpu or cuda.")
      .value("cpu", DeviceType::cpu)
      .value("cuda", DeviceType::cuda);
  py::class_<Device>(m, "device", "Where a tensor lives: remora.device('cpu'), remora.device('cuda:0').")
      .def(py::init([](const std::string& s) { return Device(s); }), py::arg("spec"))
      .def(py::init([](DeviceType t, int i) { return Device(t, i); }), py::arg("type"), py::arg("index") = 0)
      .def_property_readonly("type", [](const Device& d) { return d.is_cpu() ? "cpu" : "cuda"; },
                             "'cpu' or 'cuda'.")
      .def_property_readonly("index", [](const Device& d) { return d.index; }, "The device ordinal.")
      .def("__eq__", [](const Device& a, const Device& b) { return a == b; })
      .def("__eq__", [](const Device& a, const std::string& b) { return a == Device(b); })
      .def("__hash__", [](const Device& d) { return py::hash(py::make_tuple(int(d.type), d.index)); })
      .def("__str__", &Device::str)
      .def("__repr__", [](const Device& d) { return "remora.device('" + d.str() + "')"; });
  py::implicitly_convertible<std::string, Device>();

  py::class_<Generator>(m, "Generator",
                        "A counter-based (Philox) random stream: (seed, offset). Pass one as generator= "
                        "to randn/rand, dropout and the modules' initialisers.")
      .def(py::init<uint64_t>(), py::arg("seed") = 0x5eed)
      .def("manual_seed", [](Generator& g, uint64_t s) -> Generator& { g.manual_seed(s); return g; },
           py::arg("seed"), py::return_value_policy::reference_internal, "Seeds it and resets its offset to 0.")
      .def_property_readonly("seed", &Generator::seed, "The seed.")
      .def_property_readonly("offset", &Generator::offset, "How many counters were taken.")
      .def("get_state", [](const Generator& g) { return py::make_tuple(g.seed(), g.offset()); },
           "(seed, offset).")
      .def("set_state", [](Generator& g, py::tuple s) { g.set_state(s[0].cast<uint64_t>(), s[1].cast<uint64_t>()); },
           py::arg("state"), "Restores (seed, offset).");
  m.def("default_generator", &default_generator, py::return_value_policy::reference,
        "The global generator (the default of every random draw).");
  m.def("manual_seed", &manual_seed, py::arg("seed"), "Seeds the global generator and resets its offset.");
  m.def("set_num_threads", &set_num_threads, py::arg("n"), "Sets the CPU thread pool's size.");
  m.def("get_num_threads", &get_num_threads, "The CPU thread pool's size.");
  m.def("is_grad_enabled", &GradMode::is_enabled, "Whether ops record history on this thread.");
  m.def("set_grad_enabled", &GradMode::set_enabled, py::arg("on"),
        "Turns history recording on or off for this thread (prefer remora.no_grad()).");
  m.def("cuda_is_available", [](int index) { return cuda_is_available(index); }, py::arg("index") = 0,
        "Whether device cuda:index can be used.");
  m.def("build_info", [] {
    const BuildInfo& b = build_info();
    py::dict d;
    d["version"] = b.version;
    d["commit"] = b.commit;
    d["build_type"] = b.build_type;
    d["cuda"] = b.cuda;
    d["mpi"] = b.mpi;
    d["nccl"] = b.nccl;
    d["sanitizers"] = b.sanitizers;
    return d;
  }, "Version, commit, build type and the parts built, as a dict.");
  m.attr("__version__") = build_info().version;

  bind_tensor(m);
  bind_ops(m);
  bind_nn(m);
  bind_models(m);
  bind_train(m);
}
