#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Builds and runs the libFuzzer targets of tests/fuzz (docs/reliability.md).
#
#   bash tools/scripts/fuzz.sh --smoke                 # CI: every target ${FUZZ_SMOKE_SECONDS:-10} s
#   bash tools/scripts/fuzz.sh --runs 1000000 [T...]   # the long runs of docs/reliability.md
#   bash tools/scripts/fuzz.sh --seconds 600 hf        # one target for ten minutes
#   bash tools/scripts/fuzz.sh --build                 # only build the targets (in build-asan/)
#
# Targets: safetensors config hf ids corpus labelled series_csv (default: all). Each run starts from
# the committed seeds and regression inputs in tests/fuzz/corpus/<target>/ (read
# only: new inputs go to a scratch folder) and fails on any finding: a crash, a
# sanitizer (ASan / UBSan) report, a leak, a timeout, an out-of-memory, a broken
# property. The input that found it is kept in build-asan/fuzz/findings/<target>/;
# copy it into tests/fuzz/corpus/<target>/regress-<name> once the parser is fixed.
# Long runs go through `nice -n 19` (the machine is shared).
set -euo pipefail
cd "$(dirname "$0")/../.."
mode=seconds; amount=${FUZZ_SMOKE_SECONDS:-10}; build_only=0; targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --smoke) mode=seconds; amount=${FUZZ_SMOKE_SECONDS:-10} ;;
    --seconds) mode=seconds; amount=$2; shift ;;
    --runs) mode=runs; amount=$2; shift ;;
    --build) build_only=1 ;;
    -h|--help) sed -n '3,17p' "$0"; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1") ;;
  esac
  shift
done
[ ${#targets[@]} -gt 0 ] || targets=(safetensors config hf ids corpus labelled series_csv)

# The targets live in the sanitizer build (build-asan/, configured by
# tools/scripts/test.sh --sanitize with clang: ASan + UBSan + coverage on every object),
# so after `tools/scripts/test.sh --sanitize` (as in CI) there is nothing left to build.
command -v clang++ >/dev/null 2>&1 || command -v clang++-14 >/dev/null 2>&1 ||
  { echo "fuzz.sh: clang++ not found (apt-get install clang libclang-rt-14-dev)" >&2; exit 2; }
bash tools/scripts/test.sh --sanitize --configure >/dev/null
cmake --build build-asan -j"$(nproc 2>/dev/null || echo 2)" --target remora_fuzz
[ "$build_only" = 1 ] && exit 0

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export OMP_NUM_THREADS=1
status=0
for t in "${targets[@]}"; do
  bin=build-asan/tests/fuzz/fuzz_$t
  [ -x "$bin" ] || { echo "fuzz.sh: no target '$t'" >&2; exit 2; }
  max_len=4096; [ "$t" = hf ] && max_len=8192
  scratch=build-asan/fuzz/scratch/$t; findings=build-asan/fuzz/findings/$t
  rm -rf "$scratch"; mkdir -p "$scratch" "$findings"
  opts=(-max_len=$max_len -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
        -artifact_prefix="$findings/")
  if [ "$mode" = runs ]; then opts+=(-runs="$amount"); else opts+=(-max_total_time="$amount"); fi
  log=build-asan/fuzz/fuzz_$t.log
  echo "== fuzz_$t: ${mode} ${amount} (log $log)"
  rc=0
  nice -n 19 "$bin" "${opts[@]}" "$scratch" "tests/fuzz/corpus/$t" > "$log" 2>&1 || rc=$?
  grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb|^Done [0-9]+ runs" "$log" || true
  if [ $rc -ne 0 ] || grep -qE "ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|FUZZ_ASSERT" "$log"; then
    echo "fuzz.sh: fuzz_$t FAILED (exit $rc); the end of $log:" >&2
    tail -n 60 "$log" >&2
    ls -l "$findings" >&2 || true
    status=1
  fi
done
exit $status
