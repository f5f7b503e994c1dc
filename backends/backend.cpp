#include "backend.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "../core/error.h"

namespace remora {

Backend* cpu_backend();  // backends/cpu/cpu_backend.cpp

namespace {
Backend* (*g_cuda)(int) = nullptr;
}

void register_backend(DeviceType type, Backend* (*get)(int index)) {
  REMORA_CHECK(type == DeviceType::cuda, "register_backend: only cuda can be registered");
  g_cuda = get;
}

Backend& backend(Device dev) {
  if (dev.is_cpu()) return *cpu_backend();
  REMORA_CHECK(g_cuda != nullptr,
               "device " << dev.str()
                         << " was requested, but this Remora build has no CUDA backend; "
                            "rebuild with nvcc present (-DREMORA_CUDA=ON) or use device cpu");
  Backend* b = g_cuda(dev.index);
  REMORA_CHECK(b != nullptr, "device " << dev.str() << " is not available on this machine");
  return *b;
}

bool cuda_is_available(int index, std::string* why) {
  try {
    backend(Device::cuda(index));
    return true;
  } catch (const Error& e) {
    if (why) *why = e.what();
    return false;
  }
}

namespace {
std::atomic<int>& tf32_flag() {
  static std::atomic<int> flag{[] {
    const char* e = std::getenv("REMORA_CUDA_TF32");
    return e && *e && std::strcmp(e, "0") != 0 ? 1 : 0;
  }()};
  return flag;
}
}  // namespace
void set_cuda_tf32(bool on) { tf32_flag().store(on ? 1 : 0); }
bool cuda_tf32() { return tf32_flag().load() != 0; }

}  // namespace remora
