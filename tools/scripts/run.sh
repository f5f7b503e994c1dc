#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The main job: set up, build, and train the default config (a small RSA
# Transformer-XL on tiny Shakespeare), then plot its loss curve.
#   bash tools/scripts/run.sh [extra remora train arguments, e.g. --set train.steps=200]
set -euo pipefail
cd "$(dirname "$0")/../.."
bash tools/scripts/setup.sh
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$jobs" --target remora_cli
./build/cli/remora train configs/default.json --out out/default "$@"
./build/cli/remora plot out/default
