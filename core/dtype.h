// SPDX-License-Identifier: BSD-3-Clause
// Element types and devices.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace remora {

// f32 for training, f64 for gradient checks and references, i64 for indices;
// b8 (bool: masks and comparison results, one byte of 0 or 1), i32 and u8 for
// storage and interchange (masks, images, token ids of other tools); bf16 and
// f16 as 16-bit floating storage (computed in f32: core/half.h, docs/precision.md).
enum class DType : uint8_t { f32, f64, i64, b8, i32, u8, bf16, f16 };

// One row per DType, in the enum's order.
struct DTypeInfo {
  const char* name;  // "f32", ...
  uint8_t size;      // bytes per element
  bool floating;
  bool half;         // a 16-bit floating type (stored in 16 bits, computed in f32)
  bool integral;     // i64, i32, u8 (b8 is not)
};
inline const DTypeInfo& dtype_info(DType t) {
  static constexpr DTypeInfo kInfo[] = {
      {"f32", 4, true, false, false},  {"f64", 8, true, false, false}, {"i64", 8, false, false, true},
      {"bool", 1, false, false, false}, {"i32", 4, false, false, true}, {"u8", 1, false, false, true},
      {"bf16", 2, true, true, false},  {"f16", 2, true, true, false},
  };
  static constexpr DTypeInfo kUnknown = {"?", 0, false, false, false};
  return size_t(t) < sizeof kInfo / sizeof kInfo[0] ? kInfo[size_t(t)] : kUnknown;
}

inline size_t dtype_size(DType t) { return dtype_info(t).size; }
inline bool is_floating(DType t) { return dtype_info(t).floating; }
// bf16 or f16: stored in 16 bits, every kernel computes in f32.
inline bool is_half(DType t) { return dtype_info(t).half; }
// Integer dtypes (b8 excluded).
inline bool is_integral(DType t) { return dtype_info(t).integral; }
const char* dtype_name(DType t);  // "f32", "f64", "i64", "bool", "i32", "u8", "bf16", "f16"

enum class DeviceType : uint8_t { cpu, cuda };

struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;
  Device() = default;
  Device(DeviceType t, int i = 0) : type(t), index(i) {}  // NOLINT: implicit (x.to(kCUDA))
  explicit Device(const std::string& s) : Device(parse(s)) {}  // "cpu", "cuda:1"
  static Device cpu() { return {DeviceType::cpu, 0}; }
  static Device cuda(int i = 0) { return {DeviceType::cuda, i}; }
  bool is_cpu() const { return type == DeviceType::cpu; }
  bool is_cuda() const { return type == DeviceType::cuda; }
  bool operator==(const Device& o) const { return type == o.type && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
  std::string str() const;  // "cpu", "cuda:0"
  static Device parse(const std::string& s);  // "cpu", "cuda", "cuda:1"
};

}  // namespace remora
