// SPDX-License-Identifier: BSD-3-Clause
// libtorch-style spellings of dtypes, devices and factory options:
//
//   auto opts = TensorOptions().dtype(kFloat64).device(kCPU).requires_grad(true);
//   Tensor x = zeros({2, 3}, opts);            // or Tensor::zeros({2, 3}, opts)
//   Tensor y = ones_like(x);                   // x.options(): f64, cpu (no requires_grad)
//
// The kXxx constants name Remora's DType values (kFloat32 == DType::f32, ...),
// so both spellings mix freely.
#pragma once
#include <iosfwd>

#include "dtype.h"

namespace remora {

constexpr DType kFloat32 = DType::f32, kFloat = DType::f32;
constexpr DType kFloat64 = DType::f64, kDouble = DType::f64;
constexpr DType kInt64 = DType::i64, kLong = DType::i64;
constexpr DType kInt32 = DType::i32, kInt = DType::i32;
constexpr DType kUInt8 = DType::u8, kByte = DType::u8;
constexpr DType kBool = DType::b8;
constexpr DType kBFloat16 = DType::bf16;
constexpr DType kFloat16 = DType::f16, kHalf = DType::f16;
constexpr DeviceType kCPU = DeviceType::cpu, kCUDA = DeviceType::cuda;

// What a factory makes: dtype (default f32), device (default cpu) and whether the
// result is a leaf that requires grad. Each setter returns a modified copy, so
// calls chain. A DType or a Device converts to the options that set only it
// (libtorch's `zeros({2}, kFloat64)`).
class TensorOptions {
 public:
  TensorOptions() = default;
  TensorOptions(DType dt) : dtype_(dt) {}           // NOLINT: implicit, as in libtorch
  TensorOptions(Device dev) : device_(dev) {}       // NOLINT
  TensorOptions(DeviceType type) : device_(type) {}  // NOLINT

  TensorOptions dtype(DType dt) const { TensorOptions o = *this; o.dtype_ = dt; return o; }
  TensorOptions device(Device dev) const { TensorOptions o = *this; o.device_ = dev; return o; }
  TensorOptions device(DeviceType type, int index = 0) const { return device(Device(type, index)); }
  TensorOptions requires_grad(bool on) const {
    TensorOptions o = *this;
    o.requires_grad_ = on;
    return o;
  }

  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  bool requires_grad() const { return requires_grad_; }

 private:
  DType dtype_ = DType::f32;
  Device device_ = Device::cpu();
  bool requires_grad_ = false;
};

// torch::dtype(kFloat64), torch::device(kCUDA), torch::requires_grad(): options
// with one field set.
inline TensorOptions dtype(DType dt) { return TensorOptions().dtype(dt); }
inline TensorOptions device(Device dev) { return TensorOptions().device(dev); }
inline TensorOptions requires_grad(bool on = true) { return TensorOptions().requires_grad(on); }

// libtorch's names: "Float", "Double", "Long", "Int", "Byte", "Bool".
const char* dtype_torch_name(DType t);
std::ostream& operator<<(std::ostream& os, DType t);     // libtorch's name ("Float")
std::ostream& operator<<(std::ostream& os, Device d);    // "cpu", "cuda:0"
std::ostream& operator<<(std::ostream& os, const TensorOptions& o);

}  // namespace remora
