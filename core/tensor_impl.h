// SPDX-License-Identifier: BSD-3-Clause
// The storage and impl behind a Tensor handle. Ops and backends include this;
// user code rarely needs it.
#pragma once
#include <functional>
#include <memory>

#include "tensor.h"

namespace remora {

// A flat buffer on one device, freed through that device's backend.
struct Storage {
  void* data = nullptr;
  size_t nbytes = 0;
  Device device;
  Storage(size_t nbytes, Device dev);  // allocates through backend(dev)
  // Wraps memory the caller owns (from_blob): never freed by Remora; `deleter`,
  // if given, is called with `data` when the last tensor using it goes.
  Storage(void* data, size_t nbytes, Device dev, std::function<void(void*)> deleter);
  ~Storage();
  bool external = false;
  std::function<void(void*)> deleter;
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
};

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  Shape shape;
  Shape strides;       // in elements
  int64_t offset = 0;  // in elements
  DType dtype = DType::f32;

  // Autograd. A leaf has no grad_fn; requires_grad is set by the user.
  // A non-leaf requires grad exactly when it has a grad_fn.
  bool requires_grad = false;
  Tensor grad;
  std::shared_ptr<Node> grad_fn;
  int output_nr = 0;
  std::weak_ptr<Node> grad_accumulator;  // leaves: shared by every use

  char* byte_ptr() const {
    return static_cast<char*>(storage->data) + offset * int64_t(dtype_size(dtype));
  }
};

// A new contiguous tensor with uninitialised memory.
Tensor make_tensor(const Shape& shape, DType dt, Device dev);
// A view of t's storage with another shape/strides/offset (no autograd).
Tensor make_view(const Tensor& t, const Shape& shape, const Shape& strides, int64_t offset);

}  // namespace remora
