// SPDX-License-Identifier: BSD-3-Clause
#include "version.h"

namespace remora {

// build_info() is defined in the generated build_info.cpp (tools/cmake/build_info.cmake
// writes it at build time, so the commit is that of the build, not of the configure);
// cpu_isa_level() by the CPU backend (backends/cpu/cpu_backend.cpp), which owns the choice.

namespace {
const char* yes_no(bool b) { return b ? "yes" : "no"; }
}  // namespace

std::string version_line() {
  const BuildInfo& b = build_info();
  return std::string("remora ") + b.version + " (commit " + b.commit + ", " + b.build_type + ", cpu " +
         cpu_isa_level() + ", cuda " + yes_no(b.cuda) + ", mpi " + yes_no(b.mpi) + ", nccl " + yes_no(b.nccl) +
         (b.sanitizers ? ", sanitizers" : "") + ")";
}

std::string version_string() {
  const BuildInfo& b = build_info();
  std::string s = std::string("remora ") + b.version + "\n";
  s += std::string("  commit:      ") + b.commit + "\n";
  s += std::string("  build type:  ") + b.build_type + (b.sanitizers ? " (ASan + UBSan)" : "") + "\n";
  s += "  cpu kernels: " + cpu_isa_level() + " (OpenBLAS for matrix products)\n";
  s += std::string("  cuda:        ") + (b.cuda ? "built (libremora_cuda.so, loaded on first use)" : "not built") + "\n";
  s += std::string("  mpi:         ") + (b.mpi ? "built (data parallel training)" : "not built") + "\n";
  s += std::string("  nccl:        ") + (b.nccl ? "built" : "not built") + "\n";
  return s;
}

}  // namespace remora
