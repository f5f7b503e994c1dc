// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// Element types (DType) and devices (Device).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace remora {

/// A tensor's element type.
/// f32 for training, f64 for gradient checks and references, i64 for indices;
/// b8 (bool: masks and comparison results, one byte of 0 or 1), i32 and u8 for
/// storage and interchange (masks, images, token ids of other tools); bf16 and
/// f16 as 16-bit floating storage (computed in f32: core/half.h, docs/precision.md).
enum class DType : uint8_t { f32, f64, i64, b8, i32, u8, bf16, f16 };

/// The static facts of a DType (dtype_info()).
struct DTypeInfo {
  const char* name;  ///< "f32", "f64", "i64", "bool", "i32", "u8", "bf16", "f16" (dtype_name)
  uint8_t size;      ///< bytes per element
  /// f32, f64, bf16, f16: the dtypes that can carry a gradient.
  bool floating;
  bool half;         ///< a 16-bit floating type (stored in 16 bits, computed in f32)
  bool integral;     ///< i64, i32, u8 (b8 is not)
};
/// The facts of t; an out-of-range value gets name "?" and size 0.
inline const DTypeInfo& dtype_info(DType t) {
  static constexpr DTypeInfo kInfo[] = {
      {"f32", 4, true, false, false},  {"f64", 8, true, false, false}, {"i64", 8, false, false, true},
      {"bool", 1, false, false, false}, {"i32", 4, false, false, true}, {"u8", 1, false, false, true},
      {"bf16", 2, true, true, false},  {"f16", 2, true, true, false},
  };
  static constexpr DTypeInfo kUnknown = {"?", 0, false, false, false};
  return size_t(t) < sizeof kInfo / sizeof kInfo[0] ? kInfo[size_t(t)] : kUnknown;
}

/// Bytes per element of t (2 for bf16 and f16, 1 for b8 and u8).
inline size_t dtype_size(DType t) { return dtype_info(t).size; }
/// f32, f64, bf16 or f16: the floating dtypes (the ones that carry gradients).
inline bool is_floating(DType t) { return dtype_info(t).floating; }
/// bf16 or f16: stored in 16 bits, every kernel computes in f32.
inline bool is_half(DType t) { return dtype_info(t).half; }
/// Integer dtypes: i64, i32, u8 (b8 excluded).
inline bool is_integral(DType t) { return dtype_info(t).integral; }
/// Remora's name of t: "f32", "f64", "i64", "bool", "i32", "u8", "bf16", "f16".
const char* dtype_name(DType t);  // "f32", "f64", "i64", "bool", "i32", "u8", "bf16", "f16"

/// The kind of a device: the host CPU or a CUDA GPU.
enum class DeviceType : uint8_t { cpu, cuda };

/// Where a tensor's memory lives: a DeviceType and, for CUDA, the GPU's index.
struct Device {
  /// cpu or cuda.
  DeviceType type = DeviceType::cpu;
  /// The GPU ordinal for cuda (0 first); 0 for the CPU.
  int index = 0;
  /// The CPU.
  Device() = default;
  /// Device t with index i; implicit, so a DeviceType works where a Device is taken (x.to(kCUDA)).
  Device(DeviceType t, int i = 0) : type(t), index(i) {}  // NOLINT: implicit (x.to(kCUDA))
  /// Parses s as parse() does: "cpu", "cuda", "cuda:1".
  explicit Device(const std::string& s) : Device(parse(s)) {}  // "cpu", "cuda:1"
  /// The CPU.
  static Device cpu() { return {DeviceType::cpu, 0}; }
  /// CUDA GPU i.
  static Device cuda(int i = 0) { return {DeviceType::cuda, i}; }
  /// Whether this is the CPU.
  bool is_cpu() const { return type == DeviceType::cpu; }
  /// Whether this is a CUDA GPU.
  bool is_cuda() const { return type == DeviceType::cuda; }
  /// Same type and index.
  bool operator==(const Device& o) const { return type == o.type && index == o.index; }
  /// Different type or index.
  bool operator!=(const Device& o) const { return !(*this == o); }
  /// "cpu" or "cuda:N".
  std::string str() const;  // "cpu", "cuda:0"
  /// Parses "cpu", "cuda" (GPU 0) or "cuda:N" (N up to 9 digits); anything
  /// else is an Error.
  static Device parse(const std::string& s);  // "cpu", "cuda", "cuda:1"
};

}  // namespace remora
