#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Runs the bf16 autocast tests ([precision]) with their products on one bf16
# path (REMORA_BF16_GEMM, backends/cpu/cpu_bgemm.h): natively where this
# machine runs it, else through its emulation. Which path ran is printed and
# checked by the [half_path] test under the same setting.
#   bf16_path.sh REMORA_TESTS PATH
set -euo pipefail
bin=$1 path=$2
out=$(REMORA_BF16_GEMM=$path "$bin" "[half_path]" 2>&1) || { echo "$out"; exit 1; }
run=$path
if grep -q "was refused" <<<"$out"; then
  case $path in
    avx512bf16) run=avx512bf16_emulated ;;
    *)
      # OpenBLAS's sbgemm has no emulation: its arithmetic (exact bf16
      # products, f32 sums in an order of its own) is the scalar path's, which
      # runs here under the same bound.
      echo "bf16 path $path does not run on this machine (refused, as it should be); its bound is the scalar path's"
      exit 0 ;;
  esac
  echo "bf16 path $path does not run on this machine: running its emulation, $run"
fi
REMORA_BF16_GEMM=$run "$bin" "[half_path]" | grep -v '^$' | tail -n 3
echo "bf16 autocast tests on path $run:"
REMORA_BF16_GEMM=$run exec "$bin" "[precision]"
