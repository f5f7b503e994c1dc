// Element types and devices.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace remora {

// f32 for training, f64 for gradient checks and references, i64 for indices;
// b8 (bool: masks and comparison results, one byte of 0 or 1), i32 and u8 for
// storage and interchange (masks, images, token ids of other tools).
enum class DType : uint8_t { f32, f64, i64, b8, i32, u8 };

inline size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: case DType::i32: return 4;
    case DType::b8: case DType::u8: return 1;
    default: return 8;
  }
}
inline bool is_floating(DType t) { return t == DType::f32 || t == DType::f64; }
// Integer dtypes (b8 excluded).
inline bool is_integral(DType t) { return t == DType::i64 || t == DType::i32 || t == DType::u8; }
const char* dtype_name(DType t);  // "f32", "f64", "i64", "bool", "i32", "u8"

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
