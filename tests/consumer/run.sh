#!/usr/bin/env bash
# Installs the build into a fresh prefix, then configures, builds and runs the
# consumer project against it.  Usage: run.sh BUILD_DIR SOURCE_DIR WORK_DIR
set -euo pipefail
build=$1; src=$2; work=$3
rm -rf "$work"; mkdir -p "$work"
cmake --install "$build" --prefix "$work/prefix" >/dev/null
test -f "$work/prefix/include/remora/remora.h"
test -f "$work/prefix/lib/cmake/Remora/RemoraConfig.cmake"
cmake -S "$src/tests/consumer" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" \
      -DCMAKE_BUILD_TYPE="${CONSUMER_BUILD_TYPE:-Release}" ${CONSUMER_CXX_FLAGS:+-DCMAKE_CXX_FLAGS="$CONSUMER_CXX_FLAGS"} >/dev/null
cmake --build "$work/build" >/dev/null
"$work/build/app"
