#!/usr/bin/env bash
# The main job: set up, build, and train the default model.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$jobs" --target remora_demo
./build/tools/remora_demo "$@"
