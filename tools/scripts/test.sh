#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The test command: set up, configure, build and run the whole suite with ctest.
#   bash tools/scripts/test.sh              # Release build in build/
#   bash tools/scripts/test.sh --sanitize   # ASan + UBSan build in build-asan/ (+ the fuzz targets)
#   bash tools/scripts/test.sh --sanitize --configure   # only set up and configure build-asan/
set -euo pipefail
cd "$(dirname "$0")/../.."
bash tools/scripts/setup.sh
dir=build; flags=(-DCMAKE_BUILD_TYPE=Release); configure_only=0
for a in "$@"; do
  case "$a" in
    --sanitize)
      # CUDA OFF under the sanitizers: nvcc takes no -fsanitize, and CI time is short.
      # MPI OFF too: OpenMPI's own allocations at MPI_Init are reported by LeakSanitizer
      # (not Remora's leaks); the Release run covers the mpirun tests, and distributed/ still
      # builds and runs as a world of one here. Python OFF: an instrumented extension module
      # needs the sanitizer runtime preloaded into python3; the Release run tests the package.
      dir=build-asan
      flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DREMORA_SANITIZE=ON -DREMORA_CUDA=OFF -DREMORA_MPI=OFF -DREMORA_NCCL=OFF
             -DREMORA_PYTHON=OFF)
      # With clang (setup.sh installs it) the same objects also carry libFuzzer's
      # coverage instrumentation and the fuzz targets of tests/fuzz are built beside
      # the tests: one sanitizer build serves the suite and tools/scripts/fuzz.sh (CI time).
      cxx=$(command -v clang++ || command -v clang++-14 || true)
      [ -n "$cxx" ] && flags+=(-DCMAKE_CXX_COMPILER="$cxx" -DREMORA_FUZZ=ON)
      # Line tables are all a sanitizer report needs (file:line of each frame), and
      # compile and link faster than full debug information.
      flags+=("-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 $([ -n "$cxx" ] && echo -gline-tables-only || echo -g1) -DNDEBUG")
      ;;
    --configure) configure_only=1 ;;
    *) echo "test.sh: unknown option $a (use --sanitize, --configure)" >&2; exit 2 ;;
  esac
done
# The Python module and its tests use the interpreter setup.sh provides the packages for
# (Debian's python3-numpy, -pytest, -torch), whatever python3 comes first on PATH.
if [ -x /usr/bin/python3 ] && [ "$dir" = build ]; then flags+=(-DPython3_EXECUTABLE=/usr/bin/python3); fi
# CUDA: kernels for the GPU this machine has; where it has none, for sm_90 alone (the
# H100 and H200): every kernel is still compiled and assembled by ptxas, in about half
# the time of the default pair (80 and 90, CMakeLists.txt), as no code path differs.
if [ "$dir" = build ]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    flags+=(-DCMAKE_CUDA_ARCHITECTURES=native)
  else
    flags+=(-DCMAKE_CUDA_ARCHITECTURES=90)
  fi
fi
# ccache, when installed, makes rebuilds after a small change (and CI on a warm machine) fast.
if command -v ccache >/dev/null 2>&1; then
  flags+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
jobs=$(nproc 2>/dev/null || echo 2)
# Only the configuration summary (what was found: OpenBLAS, MPI, CUDA ✓/✗).
cmake -S . -B "$dir" "${flags[@]}" | sed -n "/Remora configuration/,\$p"
[ "$configure_only" = 1 ] && exit 0
cmake --build "$dir" -j"$jobs"
ctest --test-dir "$dir" --output-on-failure -j"$jobs"
