#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# ctest gpu_check_no_gpu: without a GPU, tools/scripts/gpu_check.sh builds nothing,
# says so, exits 77 and still writes its report (every stage "not run") and
# the log tarball to $OUT; its --plan names both calls and every stage.
# Usage: gpu_check_no_gpu.sh <tools/scripts/gpu_check.sh> <scratch folder>
set -u
script=$1 scratch=$2
if nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
  echo "a GPU is present: run tools/scripts/gpu_check.sh itself"
  exit 77
fi
rm -rf "$scratch"
mkdir -p "$scratch/out"
fail() { echo "FAIL: $*"; exit 1; }
out="$(OUT="$scratch/out" REMORA_GPU_BUILD="$scratch/build" bash "$script" 2>&1)"
rc=$?
echo "$out"
[ $rc -eq 77 ] || fail "exit code $rc, not 77"
echo "$out" | grep -q 'no GPU here' || fail "it did not say 'no GPU here'"
[ ! -e "$scratch/build" ] || fail "it created the build folder"
rep="$scratch/out/gpu_report.md"
[ -s "$rep" ] || fail "no \$OUT/gpu_report.md"
[ -s "$scratch/out/gpu_check_logs.tar.gz" ] || fail "no \$OUT/gpu_check_logs.tar.gz"
for s in build backends fused mma models allocator bench; do
  grep -qE "^\| $s \| not run \|" "$rep" || fail "the report does not mark stage $s 'not run'"
done
grep -qE '^\| env \| no GPU \|' "$rep" || fail "the report does not say env found no GPU"
grep -qE '^\| commit \| [0-9a-f]{7}' "$rep" || grep -q '^| commit | unknown' "$rep" || fail "no commit line"
plan="$(bash "$script" --plan 2>&1)" || fail "--plan failed"
echo "$plan"
echo "$plan" | grep -q 'run 1: tools/scripts/gpu_check.sh' || fail "--plan does not name the first run"
echo "$plan" | grep -q 'run 2 .*--sanitize' || fail "--plan does not name the sanitizer run"
for s in env build backends fused mma models allocator bench memcheck racecheck synccheck initcheck; do
  echo "$plan" | grep -qE "^    $s +[0-9]+ s" || fail "--plan has no estimate for $s"
done
echo "PASS"
