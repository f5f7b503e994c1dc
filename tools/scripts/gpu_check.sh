#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Checks the CUDA backend on a GPU machine in one call within a time budget that
# always leaves a report (docs/gpu.md: what it checks and how to read the report).
#
#   tools/scripts/gpu_check.sh              the checks, in order of value, within one budget:
#       env        GPU, driver, nvcc, cuBLAS, cmake, the carried dependencies, torch
#       build      the carried build (.gpubuild) when it matches the tree, else a
#                  build here (-j nproc, sm_90) from the carried .deb dependencies
#       backends   [backends][cuda]: every registry case on the GPU in f32 and f64
#                  against the CPU in f64, then the gemm-based cases with TF32 on
#       fused      [cuda][rsa], [cuda][sru]: the fused kernels ran (tensor-core
#                  launches counted), their edges, the SRU entries
#       mma        flash_mma_check: the mma.sync forward (cuda_flash_mma.cu) against a
#                  float64 reference, then its TFLOP/s at L = 1,024 - 4,096
#       models     [models_parity][cuda]: every model type trains the same on both
#       allocator  the rest of [cuda]: the caching allocator, pinned copies,
#                  deferred device errors, reductions, Philox streams
#       bench      remora_bench_cuda, then tools/bench/bench_cuda.py (PyTorch eager, SDPA)
#       xl         Transformer-XL training beside PyTorch eager (tools/bench/bench_xl_train.py),
#                  at the config's segments and at L = 1,024 and 4,096
#       huge       [huge]: tensors over 2^31 elements (only with time left)
#   tools/scripts/gpu_check.sh --sanitize   second, optional call: compute-sanitizer racecheck,
#                  memcheck, synccheck, initcheck on the narrow set ([cuda][rsa],
#                  [cuda][sru] and the flash_ registry cases), under the same budget
#   tools/scripts/gpu_check.sh --stage NAME runs env, build and that one stage (same budget);
#                  --stage N names the N-th stage of --plan (with --sanitize: of run 2)
#   tools/scripts/gpu_check.sh --plan       the stage plans with their time estimates
#   tools/scripts/gpu_check.sh --dry-run    everything that needs no GPU: the probe, a build
#                  from the carried .deb files with the system's own copies hidden
#                  (CMAKE_IGNORE_PREFIX_PATH=/usr), a check that no dependency came
#                  from /usr, the carried build packed into .gpubuild, the plan
#   tools/scripts/gpu_check.sh --fetch-deps downloads the .deb files into .gpudeps (needs apt)
#
# Budget: REMORA_GPU_BUDGET seconds (default 540) from the script's start, for
# every mode and for --stage. Each stage runs under `timeout` (kill after 10 s)
# capped at what is left less the time the report needs, so no stage can run
# the call past the budget; a stage that cannot get its minimum is "not run".
# The report (gpu_report.md) and a tarball of the logs are rewritten after every
# stage and on exit (trap), into $OUT when set and into the log folder.
# Without a GPU (not in --dry-run, --plan) the script writes the report with
# every stage "not run", builds nothing and exits 77 (ctest's "skipped").
# Environment: REMORA_GPU_BUILD (build folder, default build-gpu),
# REMORA_GPU_DEPS (.deb folder, default .gpudeps), REMORA_GPU_PREBUILT (carried
# build, default .gpubuild), REMORA_COMMIT (the commit, when the tree has no
# .git and no carried build names it), OUT (where the report goes).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
abs() { case "$1" in /*) echo "$1" ;; *) echo "$ROOT/$1" ;; esac; }
BUILD="$(abs "${REMORA_GPU_BUILD:-build-gpu}")"
DEPS="$(abs "${REMORA_GPU_DEPS:-.gpudeps}")"
DEPS_BUILD="$(abs "${REMORA_GPU_DEPS_BUILD:-.gpudeps-build}")"
PREBUILT="$(abs "${REMORA_GPU_PREBUILT:-.gpubuild}")"
BUDGET="${REMORA_GPU_BUDGET:-540}"
RESERVE=15  # seconds kept for the last report and tarball
START=$SECONDS
ORIG_LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}"
ARCH=90     # H100 / H200

# The .deb files that the GPU image lacks: build (headers, CMake configs) and
# run time (OpenBLAS and what it loads: libgfortran5, which loads libquadmath0).
# ICU's run time (libicu72) is carried: remora_tests links libremora_text, which
# links ICU 72. ICU's headers (libicu-dev, 10 MB) go to a folder of their own,
# $DEPS_BUILD: the build with /usr hidden (--dry-run) needs them, the GPU machine
# only when it must build (a stale carried build), so they are not carried by
# default and the carry stays under the 64 MiB limit.
DEB_PKGS=(libopenblas-dev libopenblas0 libopenblas0-pthread libopenblas-pthread-dev libgfortran5
          libquadmath0 nlohmann-json3-dev catch2 libcli11-dev libicu72)
BUILD_ONLY_PKGS=(libicu-dev)
RUNTIME_LIBS=(libopenblas.so.0 libgfortran.so.5 libquadmath.so.0 libicuuc.so.72 libicudata.so.72)

# ---- stages: name, estimate (s), cap (s), minimum (s), what ----
# The build estimate is the carried build's; building there
# instead takes BUILD_EST_HERE (871 CPU seconds here for the three programs,
# sm_90, cold: ~1 minute over 16 cores, plus the longest compile and configure).
BUILD_EST_HERE=120
# Estimates: the seconds measured on an H100 (docs/gpu_report.md), rounded up.
declare -A EST=([env]=10 [build]=5 [backends]=15 [fused]=5 [mma]=20 [models]=10 [allocator]=5 [bench]=60 [xl]=60
                [huge]=100 [memcheck]=10 [racecheck]=150 [synccheck]=10 [initcheck]=10)
declare -A CAP=([env]=60 [build]=330 [backends]=240 [fused]=90 [mma]=60 [models]=120 [allocator]=60 [bench]=220 [xl]=150
                [huge]=150 [memcheck]=200 [racecheck]=240 [synccheck]=150 [initcheck]=150)
declare -A MINS=([env]=5 [build]=20 [backends]=60 [fused]=15 [mma]=10 [models]=30 [allocator]=10 [bench]=30 [xl]=30
                 [huge]=30 [memcheck]=30 [racecheck]=30 [synccheck]=30 [initcheck]=30)
declare -A WHAT=(
  [env]="GPU, driver, nvcc, cuBLAS, cmake, carried dependencies, torch"
  [build]="carried build when it matches the tree, else cmake + build (-j nproc, sm_$ARCH)"
  [backends]="[backends][cuda]: every registry case, f32 and f64, vs CPU f64; TF32 rerun"
  [fused]="[cuda][rsa],[cuda][sru]: fused kernels ran (tensor-core launches), edges, SRU"
  [mma]="flash_mma_check: mma.sync forward vs float64, then its TFLOP/s (not yet dispatched)"
  [models]="[models_parity][cuda]: every model type, 20 steps, GPU vs CPU"
  [allocator]="rest of [cuda]: caching allocator, pinned copies, deferred errors, reductions"
  [bench]="remora_bench_cuda, tools/bench/bench_cuda.py beside torch eager and SDPA"
  [xl]="Transformer-XL training beside torch eager: configs/xl.json, then L 1024 and 4096 in TF32"
  [huge]="[huge]: tensors over 2^31 elements (only with time left)"
  [memcheck]="compute-sanitizer memcheck on the narrow set"
  [racecheck]="compute-sanitizer racecheck on the narrow set"
  [synccheck]="compute-sanitizer synccheck on the narrow set"
  [initcheck]="compute-sanitizer initcheck on the narrow set")
CHECK_STAGES=(env build backends fused mma models allocator bench xl huge)
# racecheck first: the flash kernels' shared-memory hand-offs are what a
# sanitizer can check that the comparisons cannot.
SANITIZE_STAGES=(env build racecheck memcheck synccheck initcheck)
SANITIZE_TESTS="[cuda][rsa],[cuda][sru],[backends][cuda]~[huge]"
SANITIZE_FILTER="flash_"  # REMORA_BACKENDS_FILTER: the registry cases of the flash kernels

say() { printf 'gpu_check: %s\n' "$*"; }
usage() {
  echo "usage: tools/scripts/gpu_check.sh [--sanitize] [--stage NAME|N] [--plan] [--dry-run] [--fetch-deps]" >&2
  exit 2
}

MODE=check
ONLY=""
while [ $# -gt 0 ]; do
  case "$1" in
    --sanitize) MODE=sanitize ;;
    --stage) ONLY="${2:-}"; shift; [ -n "$ONLY" ] || usage ;;
    --plan | --list) MODE=plan ;;
    --dry-run) MODE=dry-run ;;
    --fetch-deps) MODE=fetch-deps ;;
    *) usage ;;
  esac
  shift
done
if [ "$MODE" = sanitize ]; then STAGES=("${SANITIZE_STAGES[@]}"); else STAGES=("${CHECK_STAGES[@]}"); fi
if [[ "$ONLY" =~ ^[0-9]+$ ]]; then  # --stage N: the N-th stage of the mode's plan (--plan)
  [ "$ONLY" -ge 1 ] && [ "$ONLY" -le ${#STAGES[@]} ] || { echo "gpu_check: --stage N takes 1..${#STAGES[@]}" >&2; exit 2; }
  ONLY="${STAGES[$((ONLY - 1))]}"
fi
if [ -n "$ONLY" ]; then
  [ -n "${EST[$ONLY]:-}" ] || { echo "gpu_check: no stage '$ONLY' (see --plan)" >&2; exit 2; }
  case "$ONLY" in
    env) STAGES=(env) ;;
    build) STAGES=(env build) ;;
    *) STAGES=(env build "$ONLY") ;;
  esac
  case "$ONLY" in memcheck | racecheck | synccheck | initcheck) MODE=sanitize ;; esac
fi

left() { echo $((BUDGET - (SECONDS - START))); }

print_plan() {
  local total=0 s
  echo "Stage plan, budget ${BUDGET} s (REMORA_GPU_BUDGET), ${RESERVE} s kept for the report:"
  for mode in check sanitize; do
    local list
    if [ $mode = check ]; then
      list=("${CHECK_STAGES[@]}")
      echo "  run 1: tools/scripts/gpu_check.sh"
    else
      list=("${SANITIZE_STAGES[@]}")
      echo "  run 2 (optional, a machine whose virtualisation lets compute-sanitizer in): tools/scripts/gpu_check.sh --sanitize"
    fi
    total=0
    printf '    %-10s %9s %7s  %s\n' stage "estimate" "cap" "what"
    for s in "${list[@]}"; do
      printf '    %-10s %7s s %5s s  %s\n' "$s" "${EST[$s]}" "${CAP[$s]}" "${WHAT[$s]}"
      total=$((total + EST[$s]))
    done
    echo "    estimated total ${total} s with the carried build; $((total - EST[build] + BUILD_EST_HERE)) s when building there"
  done
}

# ---- logs and the report ----
LOGS=""
declare -A STATUS NOTE SECS
for s in "${!EST[@]}"; do STATUS[$s]="not run"; NOTE[$s]=""; SECS[$s]=""; done
NOT_RUN_WHY="the script stopped before it"
DEVICE="" DRIVER="" CUDA_DRIVER="" NVCC_VER="" COMMIT="" BUILD_WHAT=""
KERNEL="$(uname -r 2>/dev/null)"
case "$KERNEL" in
  4.4.0*) RUNTIME="gVisor: compute-sanitizer refuses the device there" ;;
  *-fc-*) RUNTIME="Firecracker" ;;
  *) RUNTIME="runtime not recognised" ;;
esac
TORCH_VER=""

LOGS_TEMP=""
set_logs() {  # a log folder: $BUILD/gpu_check, or a temporary one when nothing is built
  if [ "$1" = temp ]; then
    LOGS="$(mktemp -d "${TMPDIR:-/tmp}/gpu_check.XXXXXX")"
    LOGS_TEMP=1
  else
    LOGS="$BUILD/gpu_check"
    mkdir -p "$LOGS"
    rm -f "$LOGS"/*.log "$LOGS"/*.md "$LOGS"/*.rc 2>/dev/null
  fi
}

commit_of() {
  if [ -n "${REMORA_COMMIT:-}" ]; then echo "$REMORA_COMMIT"; return; fi
  local c
  # A carried build made from this very tree names its commit exactly (a .git
  # copied beside the tree may be older than the tree).
  if [ -f "$PREBUILT/STAMP" ] && [ "$(sed -n 's/^tree: //p' "$PREBUILT/STAMP")" = "$(tree_hash)" ] &&
     [ "$MODE" != dry-run ]; then
    echo "$(sed -n 's/^commit: //p' "$PREBUILT/STAMP") (the carried build's stamp; the tree matches it)"
    return
  fi
  if c="$(git -C "$ROOT" rev-parse HEAD 2>/dev/null)"; then
    git -C "$ROOT" diff --quiet HEAD -- 2>/dev/null || c="$c (with uncommitted changes)"
    echo "$c"
    return
  fi
  if [ -f "$PREBUILT/STAMP" ]; then
    echo "$(sed -n 's/^commit: //p' "$PREBUILT/STAMP") (from the carried build's stamp; tree hash $(tree_hash))"
    return
  fi
  echo "unknown (no .git, no carried build: set REMORA_COMMIT); tree hash $(tree_hash)"
}

write_report() {
  [ -n "$LOGS" ] || return 0
  local rep="$LOGS/gpu_report.md" s
  {
    echo "# GPU check report"
    echo
    echo "Written by tools/scripts/gpu_check.sh ($MODE). Every figure below comes from the logs of this run (gpu_check_logs.tar.gz)."
    echo
    echo "| | |"
    echo "| --- | --- |"
    echo "| date | $(date -u '+%Y-%m-%d %H:%M UTC') |"
    echo "| commit | ${COMMIT:-unknown} |"
    echo "| device | ${DEVICE:-none found} |"
    echo "| driver | ${DRIVER:-unknown} (supports CUDA ${CUDA_DRIVER:-?}) |"
    echo "| CUDA compiler | ${NVCC_VER:-not found} |"
    echo "| kernel | ${KERNEL:-?} (${RUNTIME:-runtime unknown}) |"
    echo "| build | ${BUILD_WHAT:-none} |"
    echo "| torch | ${TORCH_VER:-not checked} |"
    echo "| budget | ${BUDGET} s; used $((SECONDS - START)) s |"
    echo
    echo "| stage | status | seconds | notes |"
    echo "| --- | --- | --- | --- |"
    for s in "${STAGES[@]}"; do
      local st="${STATUS[$s]}" n="${NOTE[$s]}"
      [ "$st" = "not run" ] && [ -z "$n" ] && n="$NOT_RUN_WHY"
      echo "| $s | $st | ${SECS[$s]} | ${n//|//} |"
    done
    echo
    for s in "${STAGES[@]}"; do
      [ -s "$LOGS/$s.md" ] || continue
      echo "## $s"
      echo
      cat "$LOGS/$s.md"
      echo
    done
    if [ -s "$LOGS/backends_table.md" ]; then
      echo "## every registry comparison (worst = max |got - ref| / allowed; < 1 passes)"
      echo
      echo "| device | case | dtype | result | worst | elements |"
      echo "| --- | --- | --- | --- | --- | --- |"
      cat "$LOGS/backends_table.md"
    fi
  } >"$rep.tmp" && mv "$rep.tmp" "$rep"
  if [ -n "${OUT:-}" ] && mkdir -p "$OUT" 2>/dev/null; then
    cp "$rep" "$OUT/gpu_report.md" 2>/dev/null
    # Logs over 4 MiB keep their last 4 MiB (the files back from $OUT are capped).
    local tmp
    tmp="$(mktemp -d)"
    for f in "$LOGS"/*; do
      [ -f "$f" ] || continue
      tail -c 4194304 "$f" >"$tmp/$(basename "$f")"
    done
    tar -czf "$OUT/gpu_check_logs.tar.gz" -C "$tmp" . 2>/dev/null
    rm -rf "$tmp"
  fi
}

EXIT_RC=0
on_exit() {
  local rc=$?
  [ "$EXIT_RC" = 0 ] && EXIT_RC=$rc
  write_report
  if [ -n "$LOGS" ]; then
    say "stages:"
    for s in "${STAGES[@]}"; do printf '  %-10s %-10s %5s  %s\n' "$s" "${STATUS[$s]}" "${SECS[$s]}" "${NOTE[$s]:-}"; done
    if [ -n "$LOGS_TEMP" ]; then
      if [ -n "${OUT:-}" ]; then say "report: \$OUT/gpu_report.md, \$OUT/gpu_check_logs.tar.gz"
      else say "report: none written (OUT is not set)"; fi
      rm -rf "$LOGS"
    else
      say "report: $LOGS/gpu_report.md${OUT:+ (and \$OUT/gpu_report.md, \$OUT/gpu_check_logs.tar.gz)}"
    fi
  fi
  exit "$EXIT_RC"
}
on_signal() {
  [ -n "$CHILD" ] && kill -TERM "$CHILD" 2>/dev/null
  NOT_RUN_WHY="the script was stopped ($1) before it"
  for s in "${STAGES[@]}"; do
    [ "${STATUS[$s]}" = running ] && { STATUS[$s]="timed out"; NOTE[$s]="stopped by $1"; }
  done
  EXIT_RC=143
  exit 143
}

# Runs a command under the stage's deadline: timeout, then KILL 10 s later
# (timeout signals the command's whole process group). rc 124 / 137: timed out.
# In the background with `wait`, so that a signal to the script is handled at
# once (the trap stops the child) rather than after the command ends.
DEADLINE=0
CHILD=""
tmo() {  # log cmd...
  local log=$1
  shift
  local cap=$((DEADLINE - SECONDS))
  [ "$cap" -lt 1 ] && cap=1
  timeout -k 10 "$cap" "$@" >"$log" 2>&1 &
  CHILD=$!
  wait "$CHILD"
  local rc=$?
  CHILD=""
  return $rc
}

run_stage() {  # name
  local s=$1 l cap
  l=$(($(left) - RESERVE))
  cap=${CAP[$s]}
  [ "$l" -lt "$cap" ] && cap=$l
  if [ "$cap" -lt "${MINS[$s]}" ]; then
    STATUS[$s]="not run"
    NOTE[$s]="budget: ${l} s left, the stage needs at least ${MINS[$s]} s (usually ${EST[$s]} s)"
    say "$s: ${NOTE[$s]}"
    return 0
  fi
  say "$s: at most ${cap} s (usually ${EST[$s]} s) - ${WHAT[$s]}"
  STATUS[$s]=running
  DEADLINE=$((SECONDS + cap))
  local t0=$SECONDS rc=0
  "stage_$s" || rc=$?
  SECS[$s]=$((SECONDS - t0))
  case "$rc" in
    0) STATUS[$s]=passed ;;
    124 | 137) STATUS[$s]="timed out"; NOTE[$s]="stopped at its cap of ${cap} s${NOTE[$s]:+; ${NOTE[$s]}}" ;;
    77) STATUS[$s]="not run" ;;
    78) STATUS[$s]=refused ;;
    *) STATUS[$s]=failed ;;
  esac
  say "$s: ${STATUS[$s]} after ${SECS[$s]} s${NOTE[$s]:+ - ${NOTE[$s]}}"
  write_report
  return 0
}

# A Catch2 run's summary line.
catch_summary() { grep -E '^(All tests passed|test cases:|No tests ran)' "$1" 2>/dev/null | tail -1; }
# rc of a Catch2 run -> stage rc, with the summary (and the first failures) as
# notes. A run that skipped for want of a usable device ("skipped: no ...")
# fails: on the GPU machine every test must have found the GPU.
catch_result() {  # name log rc
  local s=$1 log=$2 rc=$3 sum skips
  sum="$(catch_summary "$log")"
  skips="$(grep -c 'skipped: no' "$log")"
  NOTE[$s]="${sum:-no summary line (rc $rc)}"
  [ "$skips" -gt 0 ] && NOTE[$s]="$skips tests found no usable device ($(grep -m1 -A1 'skipped: no' "$log" | tr -s ' \n' ' ' | cut -c1-200)); ${NOTE[$s]}"
  {
    echo "- \`$(head -1 "$log.cmd" 2>/dev/null)\`: ${sum:-no summary (rc $rc)}"
    grep -E '^(backends: [a-z]+:[0-9]+|models_parity: [^ ]+ [^ ]+ [^ ]+: )' "$log" | sed 's/^/  - /'
    [ "$skips" -gt 0 ] && echo "  - $skips tests skipped: no usable device"
    if grep -qE ': FAILED:$' "$log"; then
      echo "  - failures (first 15; the log has them all):"
      echo '```'
      grep -A8 -E ': FAILED:$' "$log" | grep -vE '^-+$|^\.+$' | awk '/: FAILED:$/ {n++} n <= 15' | head -150
      echo '```'
    fi
  } >"$LOGS/$s.md"
  case "$rc" in 124 | 137) return "$rc" ;; esac
  [ "$rc" = 0 ] && [ "$skips" = 0 ] && ! grep -q '^No tests ran' "$log" && return 0
  return 1
}
run_tests() {  # stage spec [extra env...]: remora_tests under the stage's deadline
  local s=$1 spec=$2
  shift 2
  echo "remora_tests \"$spec\"${*:+ with $*}" >"$LOGS/$s.log.cmd"
  tmo "$LOGS/$s.log" env "$@" "$T" "$spec" --durations yes
  catch_result "$s" "$LOGS/$s.log" $?
}

# ---- probes ----
have_gpu() {
  command -v nvidia-smi >/dev/null 2>&1 || { WHY="nvidia-smi not found (no NVIDIA driver)"; return 1; }
  local l
  l="$(timeout 30 nvidia-smi -L 2>&1)" || { WHY="nvidia-smi failed: ${l%%$'\n'*}"; return 1; }
  echo "$l" | grep -q '^GPU ' || { WHY="nvidia-smi lists no GPU"; return 1; }
  return 0
}

find_nvcc() {
  if command -v nvcc >/dev/null 2>&1; then command -v nvcc
  elif [ -x /usr/local/cuda/bin/nvcc ]; then echo /usr/local/cuda/bin/nvcc
  else timeout 20 find /usr/local /opt -maxdepth 7 -name nvcc -type f -perm -u+x 2>/dev/null | head -1
  fi
}

# Folders that may hold a CUDA library ($1: a file name pattern).
find_cuda_lib() {
  local d f
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda/lib \
           /usr/lib/x86_64-linux-gnu /usr/local/nvidia/lib64; do
    for f in "$d"/$1; do [ -e "$f" ] && { echo "$f"; return 0; }; done
  done
  f="$(ldconfig -p 2>/dev/null | awk -v p="$1" '{ n = $1; gsub(/\*/, ".*", p); if (n ~ "^" p "$") { print $NF; exit } }')"
  [ -n "$f" ] && { echo "$f"; return 0; }
  # CUDA from pip wheels (nvidia/cublas/lib, nvidia/cuda_runtime/lib, ...).
  timeout 20 find /usr/local /opt /usr/lib -maxdepth 9 -name "$1" \( -type f -o -type l \) 2>/dev/null | head -1
}

# Hash of the sources that decide the build (a carried build is used only when it matches).
tree_hash() {
  (cd "$ROOT" && find CMakeLists.txt core ops nn models backends distributed cases cli train text tests tools configs -type f \
      \( -name '*.cpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' -o -name '*.inc' -o -name '*.in' \
         -o -name 'CMakeLists.txt' -o -name '*.cmake' \) 2>/dev/null | LC_ALL=C sort | xargs sha256sum) |
    sha256sum | cut -c1-16
}

DEPS_ROOT=""
unpack_deps() {  # the carried .deb files into $BUILD/deps-root (never into /)
  ls "$DEPS"/*.deb >/dev/null 2>&1 || return 1
  DEPS_ROOT="$BUILD/deps-root"
  local stamp
  local debs=("$DEPS"/*.deb)
  ls "$DEPS_BUILD"/*.deb >/dev/null 2>&1 && debs+=("$DEPS_BUILD"/*.deb)
  stamp="$(printf '%s\n' "${debs[@]}" | xargs -n1 basename | sha256sum | cut -c1-16)"
  if [ "$(cat "$DEPS_ROOT/.unpacked" 2>/dev/null)" != "$stamp" ]; then
    rm -rf "$DEPS_ROOT"
    mkdir -p "$DEPS_ROOT"
    local d
    for d in "${debs[@]}"; do
      if command -v dpkg-deb >/dev/null 2>&1; then
        dpkg-deb -x "$d" "$DEPS_ROOT" || say "could not unpack $d"
      else  # a .deb is an ar archive holding data.tar.xz
        ar p "$d" data.tar.xz | tar -xJ -C "$DEPS_ROOT" || say "could not unpack $d (no dpkg-deb; ar + tar failed)"
      fi
    done
    local libs="$DEPS_ROOT/usr/lib/x86_64-linux-gnu"
    # Debian points these at the pthread build through alternatives links.
    for l in libopenblas.so libopenblas.so.0 libblas.so.3; do
      [ -e "$libs/$l" ] || ln -sf "openblas-pthread/$l" "$libs/$l"
    done
    echo "$stamp" >"$DEPS_ROOT/.unpacked"
  fi
  return 0
}
deps_env() {  # the unpacked dependencies for CMake, the compiler and the loader
  [ -n "$DEPS_ROOT" ] || return 0
  local libs="$DEPS_ROOT/usr/lib/x86_64-linux-gnu"
  export CMAKE_PREFIX_PATH="$DEPS_ROOT/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
  export LD_LIBRARY_PATH="$libs:$libs/openblas-pthread${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  OPENBLAS_FLAGS=(-DOPENBLAS_LIBRARY="$libs/openblas-pthread/libopenblas.so"
                  -DCBLAS_INCLUDE_DIR="$DEPS_ROOT/usr/include/x86_64-linux-gnu/openblas-pthread")
}
OPENBLAS_FLAGS=()

# "a, b", "a", "b" or "MISSING".
either() {
  if [ -n "$1" ] && [ -n "$2" ]; then echo "$1, $2"
  elif [ -n "$1$2" ]; then echo "$1$2"
  else echo MISSING
  fi
}

# What the build needs and what is missing, exactly (printed and in env.md).
MISSING=()       # needed for a build here
MISSING_RUN=()   # needed to run the carried build
BUILD_PLAN=""    # prebuilt | here | none
stage_env() {
  local md="$LOGS/env.md" nvcc cublas cublas_dev cudart
  : >"$md"
  if [ -n "$DEVICE" ]; then
    echo "- GPU: $DEVICE; driver $DRIVER (CUDA $CUDA_DRIVER); kernel $KERNEL ($RUNTIME)" >>"$md"
  fi
  nvcc="$(find_nvcc)"
  if [ -n "$nvcc" ]; then
    NVCC_VER="$("$nvcc" --version 2>/dev/null | grep -o 'release [0-9.]*, V[0-9.]*' | head -1) ($nvcc)"
    echo "- nvcc: $NVCC_VER" >>"$md"
  else
    MISSING+=("nvcc (not on PATH, not in /usr/local/cuda/bin)")
    echo "- nvcc: MISSING" >>"$md"
  fi
  cublas="$(find_cuda_lib 'libcublas.so.*')"
  cublas_dev="$(find_cuda_lib libcublas.so)"
  cudart="$(find_cuda_lib 'libcudart.so.*')"
  echo "- cuBLAS: ${cublas:-MISSING (libcublas.so.N)}; for building: ${cublas_dev:-MISSING (libcublas.so)}" >>"$md"
  echo "- CUDA runtime: ${cudart:-MISSING (libcudart.so.N)}" >>"$md"
  [ -n "$cublas" ] || MISSING_RUN+=("libcublas.so.N (cuBLAS run time)")
  [ -n "$cudart" ] || MISSING_RUN+=("libcudart.so.N (CUDA run time)")
  [ -n "$cublas_dev" ] || MISSING+=("libcublas.so (cuBLAS for linking)")
  local tool
  for tool in cmake c++; do
    if command -v $tool >/dev/null 2>&1; then
      echo "- $tool: $($tool --version 2>/dev/null | head -1)" >>"$md"
    else
      MISSING+=("$tool")
      echo "- $tool: MISSING" >>"$md"
    fi
  done
  command -v ninja >/dev/null 2>&1 && echo "- ninja: $(ninja --version)" >>"$md" || echo "- ninja: not found (make is used)" >>"$md"
  command -v dpkg-deb >/dev/null 2>&1 || command -v ar >/dev/null 2>&1 ||
    MISSING_RUN+=("dpkg-deb or ar (to unpack the carried .deb files)")
  # The carried .deb files: each package present?
  local p missing_debs=()
  for p in "${DEB_PKGS[@]}"; do
    ls "$DEPS/${p}_"*.deb >/dev/null 2>&1 || missing_debs+=("$p")
  done
  if [ ${#missing_debs[@]} -eq 0 ]; then
    echo "- carried .deb files: all ${#DEB_PKGS[@]} in ${DEPS#$ROOT/}" >>"$md"
  else
    echo "- carried .deb files: missing from ${DEPS#$ROOT/}: ${missing_debs[*]} (tools/scripts/gpu_check.sh --fetch-deps, then carry it)" >>"$md"
  fi
  # Each dependency: from the system or from the .deb files.
  local have_sys have_deb
  for p in "cblas.h:OpenBLAS headers" "nlohmann/json.hpp:nlohmann-json" "catch2/catch.hpp:Catch2" "CLI/CLI.hpp:CLI11" \
           "unicode/utypes.h:ICU headers"; do
    local f="${p%%:*}" name="${p#*:}"
    have_sys="" have_deb=""
    for d in /usr/include /usr/include/x86_64-linux-gnu/openblas-pthread /usr/include/openblas /usr/local/include; do
      [ -e "$d/$f" ] && have_sys="$d/$f"
    done
    case "$f" in
      cblas.h) ls "$DEPS"/libopenblas-pthread-dev_*.deb >/dev/null 2>&1 && have_deb=yes ;;
      nlohmann/*) ls "$DEPS"/nlohmann-json3-dev_*.deb >/dev/null 2>&1 && have_deb=yes ;;
      catch2/*) ls "$DEPS"/catch2_*.deb >/dev/null 2>&1 && have_deb=yes ;;
      CLI/*) ls "$DEPS"/libcli11-dev_*.deb >/dev/null 2>&1 && have_deb=yes ;;
      unicode/*) { ls "$DEPS"/libicu-dev_*.deb || ls "$DEPS_BUILD"/libicu-dev_*.deb; } >/dev/null 2>&1 && have_deb=yes ;;
    esac
    if [ -z "$have_sys$have_deb" ]; then
      MISSING+=("$name ($f: neither on the system nor among the carried .deb files)")
    fi
    echo "- $name: $(either "${have_sys:+system ($have_sys)}" "${have_deb:+carried .deb}")" >>"$md"
  done
  for p in "${RUNTIME_LIBS[@]}"; do
    local sys="" deb=""
    ldconfig -p 2>/dev/null | grep -qE "^[[:space:]]+${p//./\\.} " && sys=system
    case "$p" in
      libopenblas*) ls "$DEPS"/libopenblas0-pthread_*.deb >/dev/null 2>&1 && deb="carried .deb" ;;
      libgfortran*) ls "$DEPS"/libgfortran5_*.deb >/dev/null 2>&1 && deb="carried .deb" ;;
      libquadmath*) ls "$DEPS"/libquadmath0_*.deb >/dev/null 2>&1 && deb="carried .deb" ;;
      libicu*) ls "$DEPS"/libicu72_*.deb >/dev/null 2>&1 && deb="carried .deb" ;;
    esac
    [ -z "$sys$deb" ] && MISSING_RUN+=("$p (run time of OpenBLAS or ICU: neither on the system nor carried)")
    echo "- $p: $(either "$sys" "$deb")" >>"$md"
  done
  # The carried build.
  local th
  th="$(tree_hash)"
  if [ -f "$PREBUILT/STAMP" ]; then
    local ph
    ph="$(sed -n 's/^tree: //p' "$PREBUILT/STAMP")"
    if [ "$ph" = "$th" ]; then
      echo "- carried build: ${PREBUILT#$ROOT/} matches the tree ($th): $(sed -n 's/^built: //p' "$PREBUILT/STAMP")" >>"$md"
      BUILD_PLAN=prebuilt
    else
      echo "- carried build: ${PREBUILT#$ROOT/} is for tree $ph, this tree is $th: not used" >>"$md"
    fi
  else
    echo "- carried build: none (${PREBUILT#$ROOT/}/STAMP absent)" >>"$md"
  fi
  if [ -z "$BUILD_PLAN" ]; then
    if [ ${#MISSING[@]} -eq 0 ] && [ ${#MISSING_RUN[@]} -eq 0 ]; then BUILD_PLAN=here; else BUILD_PLAN=none; fi
  elif [ ${#MISSING_RUN[@]} -gt 0 ]; then
    BUILD_PLAN=none
  fi
  if [ "$MODE" != dry-run ]; then
    if command -v compute-sanitizer >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/compute-sanitizer ]; then
      echo "- compute-sanitizer: found" >>"$md"
    else
      echo "- compute-sanitizer: not found" >>"$md"
    fi
    local tt=$((DEADLINE - SECONDS))
    [ "$tt" -lt 1 ] && tt=1
    TORCH_VER="$(timeout "$tt" python3 -c 'import torch; print(torch.__version__, "cuda", torch.version.cuda, "available" if torch.cuda.is_available() else "NOT available")' 2>&1 | tail -1)"
    echo "- torch: $TORCH_VER" >>"$md"
  fi
  echo "- build plan: $BUILD_PLAN" >>"$md"
  if [ ${#MISSING[@]} -gt 0 ]; then
    echo "- missing for a build here: $(IFS=';'; echo "${MISSING[*]}")" >>"$md"
  fi
  if [ ${#MISSING_RUN[@]} -gt 0 ]; then
    echo "- missing to run anything: $(IFS=';'; echo "${MISSING_RUN[*]}")" >>"$md"
  fi
  cat "$md"
  case "$BUILD_PLAN" in
    prebuilt) NOTE[env]="carried build matches the tree" ;;
    here) NOTE[env]="building here (no matching carried build)" ;;
    none) NOTE[env]="missing: $(IFS=';'; echo "${MISSING_RUN[*]:-}${MISSING_RUN[*]:+; }${MISSING[*]:-}")"; return 1 ;;
  esac
  return 0
}

T="" BENCH="" REMORA=""
# Configures and builds the three programs in $BUILD. $1 = hidden: the
# system's /usr is ignored by CMake's searches (--dry-run's proof that the
# carried .deb files suffice).
build_here() {
  local hidden=${1:-}
  unpack_deps || { NOTE[build]="no .deb files in ${DEPS#$ROOT/}"; [ "$hidden" = hidden ] && return 1; }
  deps_env
  local gen=() launcher=() ignore=()
  command -v ninja >/dev/null 2>&1 && [ ! -f "$BUILD/CMakeCache.txt" ] && gen=(-G Ninja)
  command -v ccache >/dev/null 2>&1 && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
  [ "$hidden" = hidden ] && ignore=(-DCMAKE_IGNORE_PREFIX_PATH=/usr)
  local nvcc
  nvcc="$(find_nvcc)"
  echo "cmake -S . -B ${BUILD#$ROOT/} -DREMORA_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=$ARCH ${ignore[*]}" >"$LOGS/configure.log.cmd"
  tmo "$LOGS/configure.log" cmake -S "$ROOT" -B "$BUILD" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DREMORA_CUDA=ON \
    -DREMORA_MPI=OFF -DREMORA_NCCL=OFF -DCMAKE_CUDA_ARCHITECTURES=$ARCH ${nvcc:+-DCMAKE_CUDA_COMPILER="$nvcc"} \
    "${launcher[@]}" "${ignore[@]}" "${OPENBLAS_FLAGS[@]}"
  local rc=$?
  if [ $rc != 0 ]; then
    NOTE[build]="configure failed (rc $rc): $(grep -m1 -E 'CMake Error|FATAL' -A2 "$LOGS/configure.log" | tr '\n' ' ' | cut -c1-300)"
    tail -30 "$LOGS/configure.log"
    return $rc
  fi
  local t0=$SECONDS
  tmo "$LOGS/build.log" cmake --build "$BUILD" -j "$(nproc)" --target remora_tests remora_cli remora_bench_cuda flash_mma_check
  rc=$?
  if [ $rc != 0 ]; then
    NOTE[build]="build failed (rc $rc) after $((SECONDS - t0)) s: $(grep -m1 -E 'error' "$LOGS/build.log" | cut -c1-300)"
    tail -30 "$LOGS/build.log"
    return $rc
  fi
  BUILD_WHAT="built here in $((SECONDS - t0)) s with $(nproc) jobs, sm_$ARCH ($(grep -m1 -o 'CUDA backend: ON.*' "$LOGS/configure.log"))"
  T="$BUILD/tests/remora_tests"
  BENCH="$BUILD/tools/remora_bench_cuda"
  REMORA="$BUILD/cli/remora"
  MMA="$BUILD/tests/flash_mma_check"
  return 0
}

# The loader's view: every library the programs need must resolve.
check_loads() {
  local f bad=""
  for f in "$@"; do
    local nf
    nf="$(ldd "$f" 2>&1 | grep 'not found' | awk '{print $1}' | tr '\n' ' ')"
    [ -n "$nf" ] && bad="$bad $(basename "$f"): $nf;"
  done
  [ -z "$bad" ] && return 0
  NOTE[build]="libraries not found:$bad"
  return 1
}

stage_build() {
  # cuBLAS and the CUDA runtime where the loader may not look by itself.
  local lib dir
  for lib in 'libcublas.so.*' 'libcudart.so.*'; do
    dir="$(find_cuda_lib "$lib")"
    [ -n "$dir" ] || continue
    dir="$(dirname "$dir")"
    case ":${LD_LIBRARY_PATH:-}:" in *":$dir:"*) ;; *) export LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ;; esac
  done
  if [ "$BUILD_PLAN" = prebuilt ]; then
    unpack_deps && deps_env
    export LD_LIBRARY_PATH="$PREBUILT/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    T="$PREBUILT/bin/remora_tests"
    BENCH="$PREBUILT/bin/remora_bench_cuda"
    REMORA="$PREBUILT/bin/remora"
    MMA="$PREBUILT/bin/flash_mma_check"
    if check_loads "$T" "$BENCH" "$PREBUILT/lib/libremora_cuda.so"; then
      BUILD_WHAT="carried (${PREBUILT#$ROOT/}): $(sed -n 's/^built: //p' "$PREBUILT/STAMP")"
      NOTE[build]="carried build"
      echo "- $BUILD_WHAT" >"$LOGS/build.md"
      return 0
    fi
    say "the carried build does not load (${NOTE[build]}); building here"
    ldd "$T" "$PREBUILT/lib/libremora_cuda.so" >"$LOGS/ldd.log" 2>&1
    [ ${#MISSING[@]} -eq 0 ] || { NOTE[build]="${NOTE[build]} and cannot build here: missing ${MISSING[*]}"; return 1; }
  fi
  build_here || return $?
  echo "- $BUILD_WHAT" >"$LOGS/build.md"
  check_loads "$T" "$BENCH" "$BUILD/libremora_cuda.so"
}

stage_backends() {
  : >"$LOGS/backends_table.md"
  run_tests backends "[backends][cuda]~[huge]~[rsa]" REMORA_BACKENDS_REPORT="$LOGS/backends_table.md"
  local rc=$?
  local fails
  fails="$(grep -c '| FAIL |' "$LOGS/backends_table.md")"
  [ "$fails" -gt 0 ] && { echo "  - $fails comparisons FAIL:"; grep '| FAIL |' "$LOGS/backends_table.md" | head -40 | sed 's/^/    /'; } >>"$LOGS/backends.md"
  return $rc
}
stage_fused() { run_tests fused "[cuda][rsa],[cuda][sru]"; }
# The mma.sync forward of cuda_flash_mma.cu, not yet called by the dispatch:
# its comparisons with a float64 reference, then one JSON line per timing.
stage_mma() {
  [ -x "${MMA:-}" ] || { NOTE[mma]="flash_mma_check was not built"; return 1; }
  tmo "$LOGS/mma.log" "$MMA"
  local rc=$?
  {
    echo "- flash_mma_check (rc $rc): $(grep -c '^ok ' "$LOGS/mma.log") comparisons held, $(grep -c '^FAIL' "$LOGS/mma.log") failed"
    grep '^FAIL' "$LOGS/mma.log" | head -20 | sed 's/^/  - /'
    grep '^{' "$LOGS/mma.log" | sed 's/^/  - /'
  } >"$LOGS/mma.md"
  NOTE[mma]="$(tail -1 "$LOGS/mma.log" | cut -c1-200)"
  return $rc
}
stage_models() { run_tests models "[models_parity][cuda]"; }
stage_allocator() { run_tests allocator "[cuda]~[backends]~[rsa]~[sru]~[models_parity]~[huge]"; }
stage_huge() { run_tests huge "[huge]"; }

# torch runs with the loader path the machine had (not the carried OpenBLAS and libgfortran).
TORCH_ENV=(env -u LD_LIBRARY_PATH)
[ -n "$ORIG_LD_LIBRARY_PATH" ] && TORCH_ENV=(env LD_LIBRARY_PATH="$ORIG_LD_LIBRARY_PATH")
BENCH_ARGS=(--L 1024,2048,4096 --B 8 --H 16 --D 64 --reps 10 --flash-B 8 --flash-H 8 --flash-D 64,128)
stage_bench() {
  local md="$LOGS/bench.md" end=$DEADLINE rc1 rc2=0
  # remora_bench_cuda once (JSON rows, written as they come) within 45 % of the
  # stage; tools/bench/bench_cuda.py then reads those rows (--remora-json) and times
  # the PyTorch peers in the rest.
  DEADLINE=$((SECONDS + (end - SECONDS) * 45 / 100))
  echo "remora_bench_cuda --json ${BENCH_ARGS[*]}" >"$LOGS/bench_cuda.json.cmd"
  tmo "$LOGS/bench_cuda.json" "$BENCH" --json "${BENCH_ARGS[@]}"
  rc1=$?
  DEADLINE=$end
  local cut1="" cut2=""
  case $rc1 in 124 | 137) cut1=", timed out: the rows before" ;; esac
  {
    echo "- remora_bench_cuda (rc $rc1$cut1): $(grep -c '^{' "$LOGS/bench_cuda.json") rows (the rsa section, then the tensor-core flash section)"
    echo '```'
    grep '^{' "$LOGS/bench_cuda.json" | sed -E 's/"(bench|B|H)": [^,]*, //g'
    grep -v '^{' "$LOGS/bench_cuda.json" | tail -5
    echo '```'
  } >"$md"
  local py="skipped: python3 cannot import torch with CUDA ($TORCH_VER)"
  if [[ "$TORCH_VER" == *" available" ]]; then
    echo "python3 tools/bench/bench_cuda.py --remora-json bench_cuda.json" >"$LOGS/bench_cuda_py.log.cmd"
    PYTHONUNBUFFERED=1 tmo "$LOGS/bench_cuda_py.log" "${TORCH_ENV[@]}" python3 "$ROOT/tools/bench/bench_cuda.py" \
      --remora-json "$LOGS/bench_cuda.json" --record "$LOGS/record_cuda.jsonl"
    rc2=$?
    case $rc2 in 124 | 137) cut2=", timed out: the rows before" ;; esac
    py="rc $rc2$cut2"
    {
      echo "- tools/bench/bench_cuda.py ($py): Remora's rows beside torch eager RSA and SDPA; in the flash table ratio = peer ms / remora flash ms (targets >= 3 vs eager RSA, >= 0.6 vs SDPA)"
      echo '```'
      tail -80 "$LOGS/bench_cuda_py.log"
      echo '```'
    } >>"$md"
  else
    echo "- tools/bench/bench_cuda.py: $py" >>"$md"
  fi
  NOTE[bench]="remora_bench_cuda rc $rc1$cut1; bench_cuda.py $py"
  for r in $rc1 $rc2; do case $r in 124 | 137) return $r ;; esac; done
  [ $rc1 = 0 ] && [ $rc2 = 0 ]
}

# Transformer-XL training on the GPU beside PyTorch eager: configs/xl.json as it
# is (segments of 64, f32, TF32 off on both sides), then batch 4 with mem_len =
# L at L = 1,024 and 4,096 with TF32 on on both sides (where Remora's positional
# term runs in the tensor-core attention kernels).
# remora runs through a wrapper with this script's loader path; PyTorch with
# the machine's own.
stage_xl() {
  local md="$LOGS/xl.md" log="$LOGS/xl.log" wrapper="$LOGS/remora.sh" rc1 rc2
  if [[ "$TORCH_VER" != *" available" ]]; then
    NOTE[xl]="python3 cannot import torch with CUDA ($TORCH_VER)"
    return 77
  fi
  [ -x "$REMORA" ] || { NOTE[xl]="no remora program in the build ($REMORA)"; return 1; }
  printf '#!/bin/sh\nexport LD_LIBRARY_PATH="%s"\nexec "%s" "$@"\n' "${LD_LIBRARY_PATH:-}" "$REMORA" >"$wrapper"
  chmod +x "$wrapper"
  local bench=(python3 "$ROOT/tools/bench/bench_xl_train.py" --device cuda --remora "$wrapper" --threads 4
               --config "$ROOT/configs/xl.json" --record "$LOGS/record_xl_train.jsonl")
  echo "bench_xl_train.py --device cuda --config configs/xl.json --steps 60 --warmup 10; then --seq-len 1024,4096 --batch 4 --steps 8 --warmup 3 --tf32" >"$log.cmd"
  local end=$DEADLINE
  DEADLINE=$((SECONDS + (end - SECONDS) * 40 / 100))
  PYTHONUNBUFFERED=1 tmo "$log" "${TORCH_ENV[@]}" "${bench[@]}" --steps 60 --warmup 10
  rc1=$?
  DEADLINE=$end
  PYTHONUNBUFFERED=1 tmo "$log.long" "${TORCH_ENV[@]}" "${bench[@]}" --seq-len 1024,4096 --batch 4 --steps 8 --warmup 3 --tf32
  rc2=$?
  cat "$log.long" >>"$log"
  rm -f "$log.long"
  {
    echo "- tools/bench/bench_xl_train.py --device cuda (rc $rc1, then $rc2): Remora / PyTorch eager; segments of 64 in f32 with TF32 off on both sides, L 1024 and 4096 with TF32 on on both"
    echo '```'
    grep -E '^(Transformer-XL|Remora|PyTorch| +PyTorch peak)' "$log"
    echo '```'
  } >"$md"
  NOTE[xl]="$(grep -E '^PyTorch eager' "$log" | grep -oE '[0-9.]+x tok/s' | tr '\n' ' ')(Remora / PyTorch eager: segments of 64, then L 1024 and L 4096 in TF32)"
  for r in $rc1 $rc2; do case $r in 124 | 137) return $r ;; esac; done
  [ $rc1 = 0 ] && [ $rc2 = 0 ]
}

SANITIZER_REFUSED=""
stage_sanitizer() {  # tool
  local tool=$1 cs
  cs="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
  if [ ! -x "$cs" ]; then NOTE[$tool]="compute-sanitizer not found"; return 77; fi
  if [ -n "$SANITIZER_REFUSED" ]; then NOTE[$tool]="compute-sanitizer refused the device for an earlier tool"; return 77; fi
  local log="$LOGS/$tool.log"
  echo "compute-sanitizer --tool $tool remora_tests \"$SANITIZE_TESTS\" (REMORA_BACKENDS_FILTER=$SANITIZE_FILTER)" >"$log.cmd"
  REMORA_CUDA_SYNC=1 REMORA_BACKENDS_FILTER="$SANITIZE_FILTER" tmo "$log" \
    "$cs" --tool "$tool" --error-exitcode 99 --print-limit 20 "$T" "$SANITIZE_TESTS"
  local rc=$?
  local errs
  errs="$(grep -E '^========= (ERROR|RACECHECK) SUMMARY' "$log" | tail -1)"  # racecheck: "RACECHECK SUMMARY: N hazards"
  if grep -qE 'Device not supported|Error 999|error 999|CUDA_ERROR_UNKNOWN|Target application terminated before first instrumented API call' "$log" &&
     ! grep -q '^All tests passed\|^test cases:' "$log"; then
    SANITIZER_REFUSED="$(grep -m1 -E 'Device not supported|rror 999|CUDA_ERROR_UNKNOWN|terminated before' "$log" | cut -c1-160)"
    NOTE[$tool]="refused the device: $SANITIZER_REFUSED (gVisor machines do this; use a Firecracker VM or bare metal)"
    echo "- $tool: ${NOTE[$tool]}" >"$LOGS/$tool.md"
    return 78
  fi
  NOTE[$tool]="${errs:-no ERROR SUMMARY line}; tests: $(catch_summary "$log")"
  {
    echo "- $tool: ${NOTE[$tool]} (rc $rc)"
    grep -E '^========= (Invalid|Race|Barrier|Uninitialized|Program hit|ERROR)' "$log" | sort | uniq -c | sort -rn | head -10 | sed 's/^/  - /'
  } >"$LOGS/$tool.md"
  case "$rc" in 124 | 137) return $rc ;; esac
  [ "$rc" = 0 ]
}
stage_memcheck() { stage_sanitizer memcheck; }
stage_racecheck() { stage_sanitizer racecheck; }
stage_synccheck() { stage_sanitizer synccheck; }
stage_initcheck() { stage_sanitizer initcheck; }

fetch_deps() {
  mkdir -p "$DEPS" "$DEPS_BUILD"
  (cd "$DEPS" && apt-get download "${DEB_PKGS[@]}") || { say "apt-get download failed"; exit 1; }
  (cd "$DEPS_BUILD" && apt-get download "${BUILD_ONLY_PKGS[@]}") || { say "apt-get download failed"; exit 1; }
  say "downloaded $(ls "$DEPS"/*.deb | wc -l) packages ($(du -sh "$DEPS" | cut -f1)) into $DEPS (git-ignored: carry it, see docs/gpu.md)"
  say "and ${BUILD_ONLY_PKGS[*]} ($(du -sh "$DEPS_BUILD" | cut -f1)) into $DEPS_BUILD (for the build with /usr hidden; carry it too only if the GPU machine must build)"
  exit 0
}

# --dry-run: what can be checked without a GPU, and the carried build.
dry_run() {
  STAGES=(env build)
  set_logs keep
  COMMIT="$(commit_of)"
  trap on_exit EXIT
  DEADLINE=$((SECONDS + 100000))
  run_stage env
  MISSING=()
  BUILD_PLAN=here
  say "build: configure and build with CMAKE_IGNORE_PREFIX_PATH=/usr (the system's copies hidden)"
  STATUS[build]=running
  local t0=$SECONDS
  DEADLINE=$((SECONDS + 7200))
  if ! build_here hidden; then
    STATUS[build]=failed
    SECS[build]=$((SECONDS - t0))
    say "build failed: ${NOTE[build]}"
    EXIT_RC=1
    return
  fi
  SECS[build]=$((SECONDS - t0))
  # Proof: no dependency header came from /usr, every library from the .deb root.
  local leaked
  leaked="$(cd "$BUILD" && { ninja -t deps 2>/dev/null || true; } |
            grep -E '^ +/usr/include/(x86_64-linux-gnu/)?(openblas[^/]*/|cblas|nlohmann/|catch2/|CLI/|unicode/)' | sort -u)"
  local libs
  libs="$(ldd "$T" "$BUILD/libremora_cuda.so" 2>&1 | grep -E 'openblas|gfortran|quadmath|not found' |
         awk '{print $1, $2, $3}' | sort -u)"
  {
    echo "- configured and built with CMAKE_IGNORE_PREFIX_PATH=/usr in ${SECS[build]} s ($(nproc) jobs; ccache: $(command -v ccache >/dev/null && echo on || echo off))"
    echo "- OpenBLAS found at: $(grep -m1 -o 'OpenBLAS: .*' "$LOGS/configure.log")"
    if [ -f "$BUILD/build.ninja" ]; then
      if [ -z "$leaked" ]; then echo "- headers: no OpenBLAS, nlohmann-json, Catch2 or CLI11 header was read from /usr/include (ninja -t deps)"
      else echo "- headers read from /usr/include (the carried copies should have been used):"; echo "$leaked" | sed 's/^ */  - /'; fi
    fi
    echo "- libraries (ldd with the carried root first):"
    echo "$libs" | sed 's/^\s*/  - /'
  } >"$LOGS/build.md"
  if [ -n "$leaked" ] || ! echo "$libs" | grep -q "deps-root" || echo "$libs" | grep -q 'not found'; then
    STATUS[build]=failed
    NOTE[build]="a dependency did not come from the carried .deb files (see build.md)"
    EXIT_RC=1
  else
    STATUS[build]=passed
    NOTE[build]="built from the carried .deb files alone"
  fi
  cat "$LOGS/build.md"
  pack_prebuilt
  print_plan
}

# Stages the programs of $BUILD into $PREBUILT (bin/, lib/, STAMP) for `carry`.
pack_prebuilt() {
  rm -rf "$PREBUILT"
  mkdir -p "$PREBUILT/bin" "$PREBUILT/lib"
  cp -a "$BUILD/tests/remora_tests" "$BUILD/tools/remora_bench_cuda" "$BUILD/cli/remora" \
    "$BUILD/tests/flash_mma_check" "$PREBUILT/bin/"
  # libremora and the libraries the programs link (text, train, dist), not deps-root's.
  find "$BUILD" -maxdepth 2 -path "$BUILD/deps-root" -prune -o -name 'libremora*.so*' -print |
    xargs -I{} cp -a {} "$PREBUILT/lib/"
  {
    echo "commit: $(commit_of)"
    echo "tree: $(tree_hash)"
    echo "built: $(date -u '+%Y-%m-%d %H:%M UTC') on $(uname -n), nvcc $("$(find_nvcc)" --version | grep -o 'release [0-9.]*' | head -1), sm_$ARCH, Release, $(c++ --version | head -1)"
  } >"$PREBUILT/STAMP"
  # The programs run with LD_LIBRARY_PATH=$PREBUILT/lib: the RUNPATH of the build folder is gone there.
  # Proof: with that path (as there), every library resolves outside $BUILD, i.e.
  # from the packed folder, the carried .deb files or the system.
  local stray
  stray="$(LD_LIBRARY_PATH="$PREBUILT/lib:${LD_LIBRARY_PATH:-}" ldd "$PREBUILT"/bin/* "$PREBUILT"/lib/*.so 2>&1 |
           grep -E "=> $BUILD/|not found" | grep -v "=> $BUILD/deps-root/" | sort -u)"
  if [ -n "$stray" ]; then
    EXIT_RC=1
    { echo "- the packed build still needs files of the build folder (or misses some):"
      echo "$stray" | sed 's/^\s*/  - /'; } | tee -a "$LOGS/build.md"
  else
    echo "- packed build: every library resolves from ${PREBUILT#$ROOT/}/lib, the carried .deb files or the system (ldd)" |
      tee -a "$LOGS/build.md"
  fi
  local size
  size="$(du -sm "$PREBUILT" | cut -f1)"
  local tree_mb deps_mb
  tree_mb="$(cd "$ROOT" && git ls-files -z 2>/dev/null | xargs -0 du -cb 2>/dev/null | tail -1 | awk '{printf "%.1f", $1 / 1048576}')"
  deps_mb="$(du -sm "$DEPS" 2>/dev/null | cut -f1)"
  {
    echo "- carried build packed into ${PREBUILT#$ROOT/}: ${size} MiB ($(du -sh "$PREBUILT"/bin/* "$PREBUILT"/lib/libremora_cuda.so "$PREBUILT"/lib/libremora.so.*.* | awk '{printf "%s %s, ", $2, $1}' | sed 's|[^ ]*/||g; s/, $//'))"
    echo "- what travels: the tracked tree ~${tree_mb:-?} MiB + ${PREBUILT#$ROOT/} ${size} MiB + ${DEPS#$ROOT/} ${deps_mb:-0} MiB (limit 64 MiB)"
    echo "- stamp: $(tr '\n' ';' <"$PREBUILT/STAMP")"
  } | tee -a "$LOGS/build.md"
}

# ---- main ----
case "$MODE" in
  plan) print_plan; exit 0 ;;
  fetch-deps) fetch_deps ;;
  dry-run)
    dry_run
    exit "$EXIT_RC"
    ;;
esac

trap on_exit EXIT
trap 'on_signal TERM' TERM
trap 'on_signal INT' INT
trap 'on_signal HUP' HUP
WHY=""
if ! have_gpu; then
  set_logs temp
  COMMIT="$(commit_of)"
  NOT_RUN_WHY="no GPU: $WHY"
  STATUS[env]="no GPU"
  NOTE[env]="$WHY"
  say "no GPU here: $WHY. Nothing was built or run; this check needs an NVIDIA GPU (see docs/gpu.md)."
  EXIT_RC=77
  exit 77
fi
set_logs keep
COMMIT="$(commit_of)"
DEVICE="$(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null | head -1)"
DRIVER="$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)"
CUDA_DRIVER="$(nvidia-smi 2>/dev/null | grep -o 'CUDA Version: [0-9.]*' | grep -o '[0-9.]*$')"
say "$DEVICE, driver $DRIVER, kernel $KERNEL; budget ${BUDGET} s"

for s in "${STAGES[@]}"; do
  if [ "$s" != env ] && [ "$s" != build ]; then
    if [ "${STATUS[build]}" != passed ]; then
      NOTE[$s]="no build (build: ${STATUS[build]})"
      continue
    fi
  fi
  if [ "$s" = build ] && [ "${STATUS[env]}" != passed ]; then
    NOTE[build]="env found what is missing: ${NOTE[env]}"
    continue
  fi
  run_stage "$s"
done
for s in "${STAGES[@]}"; do
  case "${STATUS[$s]}" in failed | "timed out") EXIT_RC=1 ;; esac
done
exit "$EXIT_RC"
