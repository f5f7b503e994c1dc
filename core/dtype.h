// Element types and devices.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace remora {

// f32 for training, f64 for gradient checks and references, i64 for indices,
// bf16 and f16 as 16-bit storage (computed in f32: core/half.h,
// docs/precision.md).
enum class DType : uint8_t { f32, f64, i64, bf16, f16 };

// One row per DType, in the enum's order.
struct DTypeInfo {
  const char* name;  // "f32", ...
  uint8_t size;      // bytes per element
  bool floating;
  bool half;         // a 16-bit floating type (stored in 16 bits, computed in f32)
};
inline const DTypeInfo& dtype_info(DType t) {
  static constexpr DTypeInfo kInfo[] = {
      {"f32", 4, true, false}, {"f64", 8, true, false}, {"i64", 8, false, false},
      {"bf16", 2, true, true}, {"f16", 2, true, true},
  };
  static constexpr DTypeInfo kUnknown = {"?", 0, false, false};
  return size_t(t) < sizeof kInfo / sizeof kInfo[0] ? kInfo[size_t(t)] : kUnknown;
}

inline size_t dtype_size(DType t) { return dtype_info(t).size; }
inline bool is_floating(DType t) { return dtype_info(t).floating; }
// bf16 or f16: stored in 16 bits, every kernel computes in f32.
inline bool is_half(DType t) { return dtype_info(t).half; }
const char* dtype_name(DType t);  // "f32", "f64", "i64", "bf16", "f16"

enum class DeviceType : uint8_t { cpu, cuda };

struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;
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
