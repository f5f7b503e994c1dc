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

namespace {
Backend* (*g_cuda)(int) = nullptr;
#ifdef REMORA_CUDA_PLUGIN
std::string g_plugin_error;  // why libremora_cuda.so did not load (empty: it did, or no try)

// The CUDA backend is a plugin, libremora_cuda.so, beside libremora.so. It is
// loaded on the first request for a cuda device, not at startup: cuBLAS alone
// costs ~150 MiB of resident memory when it is mapped (measured: remora --help
// took 227 MiB with CUDA linked in), which a CPU run should not pay. The
// plugin registers itself (register_backend, register_kernels) as it loads.
void load_cuda_plugin() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (g_cuda) return;
    const std::string dir = library_dir(reinterpret_cast<const void*>(&register_backend));
    const char* env = std::getenv("REMORA_CUDA_PLUGIN");  // an explicit path wins
    const std::string path = env && *env ? std::string(env) : dir + "libremora_cuda.so";
    if (!dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL)) {
      const char* e = dlerror();
      g_plugin_error = "the CUDA backend " + path + " could not be loaded: " + (e ? e : "unknown error");
    } else if (!g_cuda) {
      g_plugin_error = path + " loaded but registered no CUDA backend";
    }
  });
}
#endif
}  // namespace

std::string library_dir(const void* symbol) {
  Dl_info info{};
  if (!dladdr(symbol, &info) || !info.dli_fname) return "";
  const std::string self = info.dli_fname;
  const size_t slash = self.rfind('/');
  return slash == std::string::npos ? "" : self.substr(0, slash + 1);
}

void register_backend(DeviceType type, Backend* (*get)(int index)) {
  REMORA_CHECK(type == DeviceType::cuda, "register_backend: only cuda can be registered");
  g_cuda = get;
}

Backend& backend(Device dev) {
  if (dev.is_cpu()) return *cpu_backend();
#ifdef REMORA_CUDA_PLUGIN
  load_cuda_plugin();
  REMORA_CHECK(g_cuda != nullptr, "device " << dev.str() << " was requested, but " << g_plugin_error
                                            << "; use device cpu");
#else
  REMORA_CHECK(g_cuda != nullptr,
               "device " << dev.str()
                         << " was requested, but this Remora build has no CUDA backend; "
                            "rebuild with nvcc present (-DREMORA_CUDA=ON) or use device cpu");
#endif
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

namespace {
thread_local bool g_gemm_bf16 = false;
}  // namespace
GemmBf16OperandsScope::GemmBf16OperandsScope() : prev_(g_gemm_bf16) { g_gemm_bf16 = true; }
GemmBf16OperandsScope::~GemmBf16OperandsScope() { g_gemm_bf16 = prev_; }
bool gemm_bf16_operands() { return g_gemm_bf16; }

}  // namespace remora
