#include "backend.h"

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

}  // namespace remora

namespace remora {

void Backend::sru_forward(DType, const SruProblem&, const void*, const void*, const void*,
                          const void*, const void*, const void*, void*, void*, void*) {
  REMORA_CHECK(false, "sru_recurrence is not implemented on the " << name() << " backend");
}

void Backend::sru_backward(DType, const SruProblem&, const void*, const void*, const void*,
                           const void*, const void*, const void*, const void*, const void*,
                           const void*, const void*, void*, void*, void*, void*, void*) {
  REMORA_CHECK(false, "sru_recurrence backward is not implemented on the " << name() << " backend");
}

}  // namespace remora
