// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// What the binding sources of Remora's Python module (remora._C) share.
#pragma once
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/functional.h>

#include <remora/remora.h>

namespace py = pybind11;

namespace remora {
namespace python {

/// The Python exception class remora.Error (a RuntimeError).
extern PyObject* error_class;

/// Tensor: the class, its operators, indexing, NumPy and DLPack (tensor.cpp).
void bind_tensor(py::module_& m);
/// The op table (ops/ops.def) and the ops declared in their own headers (ops.cpp).
void bind_ops(py::module_& m);
/// nn modules, optimizers, safetensors (nn.cpp).
void bind_nn(py::module_& m);
/// The reference models beside Transformer-XL: BERT, SRU++, StarSaber, the
/// recurrent models and the RNN / LSTM layers (models.cpp; after bind_nn).
void bind_models(py::module_& m);
/// The Trainer and the tokenizers (train.cpp).
void bind_train(py::module_& m);

/// An undefined Tensor for None, else the Tensor the object holds.
Tensor optional_tensor(const py::handle& h);
/// A Tensor (undefined -> None) as a Python object.
py::object tensor_or_none(const Tensor& t);
/// (name, tensor) pairs from a mapping (its items()) or an iterable of pairs.
nn::NamedTensors named_from_mapping(const py::handle& h);
/// An OrderedDict of name -> tensor, in order.
py::object ordered_dict(const nn::NamedTensors& nt);

/// A config struct built from keyword arguments: each sets the field of its
/// name (an unknown name is an AttributeError).
template <typename C>
std::unique_ptr<C> config_from_kwargs(const py::kwargs& kw) {
  auto c = std::make_unique<C>();
  py::object self = py::cast(c.get(), py::return_value_policy::reference);
  for (auto kv : kw) py::setattr(self, kv.first, kv.second);
  return c;
}

}  // namespace python
}  // namespace remora
