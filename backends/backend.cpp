// SPDX-License-Identifier: BSD-3-Clause
#include "backend.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "../core/error.h"

namespace remora {

Backend* cpu_backend();  // backends/cpu/cpu_backend.cpp

void Backend::dropout_forward(const DropoutArgs&) {
  REMORA_FAIL("dropout_forward: the " << name() << " backend has no fused dropout kernels "
                                      << "(supports(OpKind::fused_dropout) is false)");
}
void Backend::dropout_backward(const DropoutBackwardArgs&) {
  REMORA_FAIL("dropout_backward: the " << name() << " backend has no fused dropout kernels "
                                       << "(supports(OpKind::fused_dropout) is false)");
}

namespace {

// The host is part of this library: registered on the first lookup, so it is
// there before any static initialiser of another file asks for it.
DeviceAllocator* host_device(int) { return cpu_backend(); }

DeviceFactory factory_of(DeviceType type) {
  static const bool host = (register_device(DeviceType::cpu, &host_device), true);
  (void)host;
  return device_factory(type);
}

#ifdef REMORA_CUDA_PLUGIN
std::string g_plugin_error;  // why libremora_cuda.so did not load (empty: it did, or no try)

// The CUDA backend is a plugin, libremora_cuda.so, beside libremora.so. It is
// loaded on the first request for a cuda device, not at startup: cuBLAS alone
// costs ~150 MiB of resident memory when it is mapped (measured: remora --help
// took 227 MiB with CUDA linked in), which a CPU run should not pay. The
// plugin registers itself (register_device, register_kernels) as it loads.
void load_cuda_plugin() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (device_factory(DeviceType::cuda)) return;
    const std::string dir = library_dir(reinterpret_cast<const void*>(&library_dir));
    const char* env = std::getenv("REMORA_CUDA_PLUGIN");  // an explicit path wins
    const std::string path = env && *env ? std::string(env) : dir + "libremora_cuda.so";
    if (!dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL)) {
      const char* e = dlerror();
      g_plugin_error = "the CUDA backend " + path + " could not be loaded: " + (e ? e : "unknown error");
    } else if (!device_factory(DeviceType::cuda)) {
      g_plugin_error = path + " loaded but registered no CUDA backend";
    }
  });
}
#endif

// Why a device type has no registered factory (the CUDA plugin is tried first).
[[noreturn]] void no_backend(Device dev) {
  if (dev.is_cuda()) {
#ifdef REMORA_CUDA_PLUGIN
    REMORA_FAIL("device " << dev.str() << " was requested, but " << g_plugin_error << "; use device cpu");
#else
    REMORA_FAIL("device " << dev.str()
                          << " was requested, but this Remora build has no CUDA backend; "
                             "rebuild with nvcc present (-DREMORA_CUDA=ON) or use device cpu");
#endif
  }
  REMORA_FAIL("device " << dev.str() << " was requested, but no backend is registered for its device type; "
                                        "use device cpu");
}
}  // namespace

std::string library_dir(const void* symbol) {
  Dl_info info{};
  if (!dladdr(symbol, &info) || !info.dli_fname) return "";
  const std::string self = info.dli_fname;
  const size_t slash = self.rfind('/');
  return slash == std::string::npos ? "" : self.substr(0, slash + 1);
}

Backend& backend(Device dev) {
  DeviceFactory f = factory_of(dev.type);
#ifdef REMORA_CUDA_PLUGIN
  if (!f && dev.is_cuda()) {
    load_cuda_plugin();
    f = factory_of(dev.type);
  }
#endif
  if (!f) no_backend(dev);
  // Every device Remora runs on registers its Backend (a DeviceAllocator).
  Backend* b = static_cast<Backend*>(f(dev.index));
  REMORA_CHECK(b != nullptr, "device " << dev.str() << " is not available on this machine");
  return *b;
}

bool supports(Device dev, OpKind op, const OpProblem& p) { return backend(dev).supports(op, p); }

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

namespace {
thread_local bool g_gemm_bf16 = false;
}  // namespace
GemmBf16OperandsScope::GemmBf16OperandsScope() : prev_(g_gemm_bf16) { g_gemm_bf16 = true; }
GemmBf16OperandsScope::~GemmBf16OperandsScope() { g_gemm_bf16 = prev_; }
bool gemm_bf16_operands() { return g_gemm_bf16; }

}  // namespace remora
