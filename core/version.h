// SPDX-License-Identifier: BSD-3-Clause
/// \file
/// What this copy of Remora is: its version, the commit it was built from, the
/// build type, and which optional parts were compiled in.
///
/// \code
///   std::cout << remora::version_string();   // what `remora --version` prints
///   if (remora::build_info().cuda) ...       // the CUDA backend was built
/// \endcode
///
/// `remora info` prints the same, and every checkpoint records version_line()
/// in its metadata ("remora_version").
#pragma once
#include <string>

namespace remora {

/// The facts fixed when this copy of Remora was built (build_info()).
struct BuildInfo {
  const char* version;     ///< "0.2.0" (the project version)
  const char* commit;      ///< `git describe --always --dirty` at build time, "unknown" outside git
  const char* build_type;  ///< CMAKE_BUILD_TYPE: "Release", "RelWithDebInfo", ...
  bool cuda;               ///< the CUDA backend plugin (libremora_cuda.so) was built
  bool mpi;                ///< distributed training on MPI (distributed/) was built
  bool nccl;               ///< NCCL all-reduce of CUDA tensors was built
  bool sanitizers;         ///< AddressSanitizer + UndefinedBehaviorSanitizer
};
/// This build's facts (generated at build time, so the commit is the build's).
const BuildInfo& build_info();

/// The CPU kernels' vector ISA on this machine ("baseline", "avx2", "avx512";
/// chosen at run time, capped by REMORA_CPU_ISA).
std::string cpu_isa_level();

/// One line: "remora 0.2.0 (commit 1a2b3c4, Release, cpu avx2, cuda no, mpi yes, nccl no)"
/// (", sanitizers" is added before the ")" in a sanitizer build).
std::string version_line();
/// Several lines, one fact each (what `remora --version` prints).
std::string version_string();

}  // namespace remora
