// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// The storage and impl behind a Tensor handle. Ops and backends include this;
/// user code rarely needs it.
#pragma once
#include <functional>
#include <memory>

#include "tensor.h"

namespace remora {

/// A flat buffer on one device, freed through that device's backend. Shared by
/// a tensor and all its views; not copyable.
struct Storage {
  /// The buffer (null when nbytes is 0).
  void* data = nullptr;
  /// Its size in bytes.
  size_t nbytes = 0;
  /// The device that holds it.
  Device device;
  /// Allocates nbytes through backend(dev); a device this build lacks is an Error.
  Storage(size_t nbytes, Device dev);  // allocates through backend(dev)
  /// Wraps memory the caller owns (from_blob): never freed by Remora; `deleter`,
  /// if given, is called with `data` when the last tensor using it goes.
  Storage(void* data, size_t nbytes, Device dev, std::function<void(void*)> deleter);
  /// Frees the buffer through the backend, or calls the deleter of wrapped memory.
  ~Storage();
  /// Wrapped caller memory (from_blob): Remora does not free it.
  bool external = false;
  /// Called with data when wrapped memory is released (may be empty).
  std::function<void(void*)> deleter;
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
};

/// What a Tensor handle points at: a strided view of a Storage plus its
/// autograd state. Tensors that share a TensorImpl are the same tensor.
struct TensorImpl {
  /// The buffer, shared with every view of it.
  std::shared_ptr<Storage> storage;
  /// Sizes, one per dim.
  Shape shape;
  Shape strides;       ///< in elements
  int64_t offset = 0;  ///< in elements
  /// The element type.
  DType dtype = DType::f32;

  /// \name Autograd
  /// A leaf has no grad_fn; requires_grad is set by the user.
  /// A non-leaf requires grad exactly when it has a grad_fn.
  /// @{
  //
  /// Set on leaves by requires_grad_() (floating dtypes only).
  bool requires_grad = false;
  /// A leaf's accumulated gradient (undefined until a backward reaches it).
  Tensor grad;
  /// The node that produced this tensor (null for a leaf).
  std::shared_ptr<Node> grad_fn;
  /// Which output of grad_fn this tensor is.
  int output_nr = 0;
  std::weak_ptr<Node> grad_accumulator;  ///< leaves: the node that sums gradients into grad, shared by every use (the graph owns it)
  /// @}

  /// The address of the first element: storage->data plus offset elements.
  char* byte_ptr() const {
    return static_cast<char*>(storage->data) + offset * int64_t(dtype_size(dtype));
  }
};

/// A new contiguous tensor with uninitialised memory. A negative size, more
/// than kMaxDims dims or a device this build lacks is an Error.
Tensor make_tensor(const Shape& shape, DType dt, Device dev);
/// A view of t's storage with another shape/strides/offset (in elements) and
/// t's dtype; nothing is checked and no history is recorded.
Tensor make_view(const Tensor& t, const Shape& shape, const Shape& strides, int64_t offset);

}  // namespace remora
