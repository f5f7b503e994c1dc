// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// libtorch-style spellings of dtypes, devices and factory options:
///
/// \code
///   auto opts = TensorOptions().dtype(kFloat64).device(kCPU).requires_grad(true);
///   Tensor x = zeros({2, 3}, opts);            // or Tensor::zeros({2, 3}, opts)
///   Tensor y = ones_like(x);                   // x.options(): f64, cpu (no requires_grad)
/// \endcode
///
/// The kXxx constants name Remora's DType values (kFloat32 == DType::f32, ...),
/// so both spellings mix freely.
#pragma once
#include <iosfwd>

#include "dtype.h"

namespace remora {

/// \name libtorch's dtype and device constants
/// bf16 and f16 have no kXxx name here: use DType::bf16 and DType::f16.
/// @{
//
/// \var kFloat32
/// DType::f32 (32-bit float).
/// \var kFloat
/// DType::f32 (32-bit float).
/// \var kFloat64
/// DType::f64 (64-bit float).
/// \var kDouble
/// DType::f64 (64-bit float).
/// \var kInt64
/// DType::i64 (64-bit signed integer).
/// \var kLong
/// DType::i64 (64-bit signed integer).
/// \var kInt32
/// DType::i32 (32-bit signed integer).
/// \var kInt
/// DType::i32 (32-bit signed integer).
/// \var kUInt8
/// DType::u8 (8-bit unsigned integer).
/// \var kByte
/// DType::u8 (8-bit unsigned integer).
/// \var kBool
/// DType::b8 (bool, one byte of 0 or 1).
/// \var kBFloat16
/// DType::bf16 (bfloat16 storage, computed in f32).
/// \var kFloat16
/// DType::f16 (IEEE half storage, computed in f32).
/// \var kHalf
/// DType::f16 (IEEE half storage, computed in f32).
/// \var kCPU
/// DeviceType::cpu.
/// \var kCUDA
/// DeviceType::cuda.
//
constexpr DType kFloat32 = DType::f32, kFloat = DType::f32;
constexpr DType kFloat64 = DType::f64, kDouble = DType::f64;
constexpr DType kInt64 = DType::i64, kLong = DType::i64;
constexpr DType kInt32 = DType::i32, kInt = DType::i32;
constexpr DType kUInt8 = DType::u8, kByte = DType::u8;
constexpr DType kBool = DType::b8;
constexpr DType kBFloat16 = DType::bf16;
constexpr DType kFloat16 = DType::f16, kHalf = DType::f16;
constexpr DeviceType kCPU = DeviceType::cpu, kCUDA = DeviceType::cuda;
/// @}

/// What a factory makes: dtype (default f32), device (default cpu) and whether the
/// result is a leaf that requires grad. Each setter returns a modified copy, so
/// calls chain. A DType or a Device converts to the options that set only it
/// (libtorch's `zeros({2}, kFloat64)`).
class TensorOptions {
 public:
  /// f32 on the CPU, no requires_grad.
  TensorOptions() = default;
  /// The defaults with dtype dt (implicit, as in libtorch).
  TensorOptions(DType dt) : dtype_(dt) {}           // NOLINT: implicit, as in libtorch
  /// The defaults with device dev (implicit).
  TensorOptions(Device dev) : device_(dev) {}       // NOLINT
  /// The defaults on device type (index 0; implicit).
  TensorOptions(DeviceType type) : device_(type) {}  // NOLINT

  /// A copy with dtype dt.
  TensorOptions dtype(DType dt) const { TensorOptions o = *this; o.dtype_ = dt; return o; }
  /// A copy with device dev.
  TensorOptions device(Device dev) const { TensorOptions o = *this; o.device_ = dev; return o; }
  /// A copy with device Device(type, index).
  TensorOptions device(DeviceType type, int index = 0) const { return device(Device(type, index)); }
  /// A copy that makes leaves requiring grad when on (the dtype must then be
  /// floating: the factory throws an Error otherwise).
  TensorOptions requires_grad(bool on) const {
    TensorOptions o = *this;
    o.requires_grad_ = on;
    return o;
  }

  /// The dtype (default f32).
  DType dtype() const { return dtype_; }
  /// The device (default cpu).
  Device device() const { return device_; }
  /// Whether the factory's result requires grad (default false).
  bool requires_grad() const { return requires_grad_; }

 private:
  DType dtype_ = DType::f32;
  Device device_ = Device::cpu();
  bool requires_grad_ = false;
};

/// \name Options with one field set
/// torch::dtype(kFloat64), torch::device(kCUDA), torch::requires_grad(): the
/// default options with one field changed.
/// @{
//
/// TensorOptions().dtype(dt).
inline TensorOptions dtype(DType dt) { return TensorOptions().dtype(dt); }
/// TensorOptions().device(dev).
inline TensorOptions device(Device dev) { return TensorOptions().device(dev); }
/// TensorOptions().requires_grad(on).
inline TensorOptions requires_grad(bool on = true) { return TensorOptions().requires_grad(on); }
/// @}

/// libtorch's names: "Float", "Double", "Long", "Int", "Byte", "Bool",
/// "BFloat16", "Half".
const char* dtype_torch_name(DType t);
/// Writes libtorch's name of t ("Float"; dtype_torch_name).
std::ostream& operator<<(std::ostream& os, DType t);     // libtorch's name ("Float")
/// Writes "cpu" or "cuda:N".
std::ostream& operator<<(std::ostream& os, Device d);    // "cpu", "cuda:0"
/// Writes "TensorOptions(dtype=Float, device=cpu, requires_grad=false)".
std::ostream& operator<<(std::ostream& os, const TensorOptions& o);

}  // namespace remora
