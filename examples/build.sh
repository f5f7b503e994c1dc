#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Builds the examples against an installed Remora (ctest: examples_build, the
# fixture of the example_* tests): installs BUILD_DIR into WORK_DIR/prefix, then
# configures and builds examples/ with find_package(Remora) from there.
# Usage: build.sh BUILD_DIR SOURCE_DIR WORK_DIR
set -euo pipefail
build=$1; src=$2; work=$3
rm -rf "$work"; mkdir -p "$work"
prefix="$work/prefix"
cmake --install "$build" --prefix "$prefix" >/dev/null
launcher=()
if command -v ccache >/dev/null 2>&1; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
cmake -S "$src/examples" -B "$work/build" -DCMAKE_PREFIX_PATH="$prefix" \
      -DCMAKE_BUILD_TYPE="${EXAMPLES_BUILD_TYPE:-Release}" "${launcher[@]}" \
      ${EXAMPLES_CXX:+-DCMAKE_CXX_COMPILER="$EXAMPLES_CXX"} \
      ${EXAMPLES_CXX_FLAGS:+-DCMAKE_CXX_FLAGS="$EXAMPLES_CXX_FLAGS"} >/dev/null
cmake --build "$work/build" -j "${EXAMPLES_JOBS:-2}"
echo "examples: built against $prefix"
