#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Installs what Remora needs from Debian packages, only when something is missing.
set -euo pipefail
# gnuplot-nox: `remora plot` draws the loss curve with gnuplot (tests/test_driver.cpp runs it).
pkgs=(cmake g++ make libopenblas-dev catch2 nlohmann-json3-dev gnuplot-nox)
# libicu-dev: Unicode classes and normalisation for the tokenizers (text/).
pkgs+=(libicu-dev)
# libcli11-dev: the `remora` driver parses its command line with CLI11 (header-only).
pkgs+=(libcli11-dev)
# libopenmpi-dev, openmpi-bin: data-parallel training (distributed/, REMORA_MPI) and its mpirun tests.
pkgs+=(libopenmpi-dev openmpi-bin)
# clang, libclang-rt-14-dev (libFuzzer + sanitizer runtimes):
# the fuzz targets of tests/fuzz (tools/scripts/fuzz.sh, run by CI).
pkgs+=(clang libclang-rt-14-dev)
# doxygen: the API reference (the `docs` target) and its undocumented-API check.
pkgs+=(doxygen)
# dpkg-dev, file: the Debian package target (cpack) finds the library dependencies
# with dpkg-shlibdeps (ctest package_deb checks them).
pkgs+=(dpkg-dev file)
# strace: the power-cut test records a training step's file-system calls (ctest crash_power_cut).
pkgs+=(strace)
# pybind11-dev: the Python module (python/, REMORA_PYTHON) is a pybind11 extension.
pkgs+=(pybind11-dev)
# python3-numpy: zero-copy NumPy interop in the Python package and its tests.
pkgs+=(python3-numpy)
# python3-pytest: runs the Python package's tests (ctest python_tests).
pkgs+=(python3-pytest)
# python3-torch: remora.torch (RSA inside a PyTorch model), its tests and examples.
pkgs+=(python3-torch)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi
