// Element types and devices.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace remora {

// f32 for training, f64 for gradient checks and references, i64 for indices.
enum class DType : uint8_t { f32, f64, i64 };

inline size_t dtype_size(DType t) { return t == DType::f32 ? 4 : 8; }
inline bool is_floating(DType t) { return t != DType::i64; }
const char* dtype_name(DType t);  // "f32", "f64", "i64"

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
