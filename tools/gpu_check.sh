#!/usr/bin/env bash
# One command for a GPU session (issue 11 §3; docs/gpu_check.md says how to run
# it through the lent machine's `run` tool). Stages, each under the 10-minute
# command limit, resuming from a state file in the build directory:
#   1 build      configure with REMORA_CUDA=ON and build (incremental on rerun)
#   2 tests      [cuda] and [backends] (every registry case on the device, f32
#                and f64, TF32), then the whole suite
#   3 memcheck   compute-sanitizer --tool memcheck  on the small [cuda] cases
#   4 racecheck  compute-sanitizer --tool racecheck  (REMORA_CUDA_SYNC=1 for all)
#   5 synccheck  compute-sanitizer --tool synccheck
#   6 initcheck  compute-sanitizer --tool initcheck
#   7 huge       tensors over 2^31 elements ([backends][huge])
#   8 models     every model type trains 20 steps on the GPU and the CPU ([models_parity])
#   9 bench      remora_bench_cuda (the RSA table, and the tensor-core "flash" table:
#                fused RSA fwd+bwd, B 8, H 8, D 64/128, causal, L 1k/2k/4k, TF32 flash
#                kernels vs the FP32 reference kernel, ms and TFLOP/s), and
#                tools/bench_cuda.py when torch imports (the same rows beside torch
#                eager RSA and scaled_dot_product_attention, with the ratios)
#  10 report     docs/gpu_report.md (copied to $OUT when set)
# Usage: tools/gpu_check.sh [--stage N] [--list] [--reset] [--fetch-deps]
#   no argument: runs the pending stages in order while the time budget
#   (REMORA_GPU_CHECK_BUDGET seconds, default 560) lasts, then says what is next.
# Without a GPU it says so and exits 77 (ctest counts that as skipped).
# Environment: REMORA_GPU_BUILD (build dir, default build-gpu), REMORA_COMMIT
# (the commit under test when the tree has no .git), REMORA_GPU_DEPS (folder of
# .deb files to unpack for OpenBLAS/json/Catch2/CLI11 when the machine lacks them,
# default .gpudeps; --fetch-deps downloads them on a machine with apt).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${REMORA_GPU_BUILD:-$ROOT/build-gpu}"
case "$BUILD" in /*) ;; *) BUILD="$ROOT/$BUILD" ;; esac
STATE_DIR="$BUILD/gpu_check"
STATE="$STATE_DIR/state"
BUDGET="${REMORA_GPU_CHECK_BUDGET:-560}"
DEPS="${REMORA_GPU_DEPS:-$ROOT/.gpudeps}"
START=$SECONDS
STAGES=(build tests memcheck racecheck synccheck initcheck huge models bench report)
# The most seconds each stage may take, and what it usually takes (a stage is
# started only when its estimate fits the budget left; it then runs under
# `timeout` capped at what is left, so one call never outlasts the budget).
LIMITS=(540 540 540 540 420 420 420 480 540 30)
ESTIMATE=(300 240 240 240 150 150 120 180 240 5)
CAP=540
DEB_PKGS=(libopenblas-dev libopenblas0 libopenblas0-pthread libopenblas-pthread-dev libgfortran5
          nlohmann-json3-dev catch2 libcli11-dev)

say() { printf 'gpu_check: %s\n' "$*"; }

fetch_deps() {
  mkdir -p "$DEPS"
  (cd "$DEPS" && apt-get download "${DEB_PKGS[@]}") || { say "apt-get download failed"; exit 1; }
  say "downloaded $(ls "$DEPS"/*.deb | wc -l) packages into $DEPS (git-ignored: name it in carry, see docs/gpu_check.md)"
  exit 0
}

have_gpu() {
  command -v nvidia-smi >/dev/null 2>&1 || { WHY="nvidia-smi not found (no NVIDIA driver)"; return 1; }
  local l
  l="$(nvidia-smi -L 2>&1)" || { WHY="nvidia-smi failed: ${l%%$'\n'*}"; return 1; }
  echo "$l" | grep -q '^GPU ' || { WHY="nvidia-smi lists no GPU"; return 1; }
  return 0
}

done_stage() { grep -qx "done $1" "$STATE" 2>/dev/null; }
mark_done() { echo "done $1" >>"$STATE"; }

# Unpacks carried .deb files (never into /) and points CMake and the loader at them.
use_deps() {
  [ -d "$DEPS" ] && ls "$DEPS"/*.deb >/dev/null 2>&1 || return 0
  local root="$BUILD/deps-root"
  if [ ! -f "$root/.unpacked" ]; then
    mkdir -p "$root"
    for d in "$DEPS"/*.deb; do dpkg -x "$d" "$root" || say "could not unpack $d"; done
    touch "$root/.unpacked"
  fi
  export CMAKE_PREFIX_PATH="$root/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
  local libs="$root/usr/lib/x86_64-linux-gnu"
  # Debian's libopenblas.so is an alternatives link: point at the pthread build.
  [ -e "$libs/libopenblas.so" ] || ln -sf openblas-pthread/libopenblas.so "$libs/libopenblas.so"
  [ -e "$libs/libopenblas.so.0" ] || ln -sf openblas-pthread/libopenblas.so.0 "$libs/libopenblas.so.0"
  [ -e "$libs/libblas.so.3" ] || ln -sf openblas-pthread/libblas.so.3 "$libs/libblas.so.3"
  export LD_LIBRARY_PATH="$libs:$libs/openblas-pthread${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export CPATH="$root/usr/include:$root/usr/include/x86_64-linux-gnu${CPATH:+:$CPATH}"
  OPENBLAS_FLAGS=(-DOPENBLAS_LIBRARY="$libs/openblas-pthread/libopenblas.so"
                  -DCBLAS_INCLUDE_DIR="$root/usr/include/x86_64-linux-gnu/openblas-pthread")
}

T="$BUILD/tests/remora_tests"
run_logged() {  # name limit cmd...: runs under timeout, log in $STATE_DIR/name.log
  local name=$1 limit=$2
  shift 2
  timeout --signal=KILL "$limit" "$@" >"$STATE_DIR/$name.log" 2>&1
  local rc=$?
  echo "$rc" >"$STATE_DIR/$name.rc"
  return $rc
}

# A Catch2 run's last summary line ("All tests passed (N assertions in M test cases)"
# or "test cases: ... | ... failed").
catch_summary() { grep -E '^(All tests passed|test cases:|No tests ran)' "$1" | tail -1; }

stage_build() {
  use_deps
  local gen=()
  command -v ninja >/dev/null 2>&1 && [ ! -f "$BUILD/CMakeCache.txt" ] && gen=(-G Ninja)
  local launcher=()
  command -v ccache >/dev/null 2>&1 && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
  local nvcc_hint=()
  [ -x /usr/local/cuda/bin/nvcc ] && nvcc_hint=(-DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc)
  run_logged configure 300 cmake -S "$ROOT" -B "$BUILD" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DREMORA_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 "${nvcc_hint[@]}" "${launcher[@]}" "${OPENBLAS_FLAGS[@]}" || {
    say "configure failed (log: $STATE_DIR/configure.log)"; tail -20 "$STATE_DIR/configure.log"; return 1; }
  run_logged build $((CAP - 20)) cmake --build "$BUILD" -j "$(nproc)" || {
    say "build did not finish (rc $(cat "$STATE_DIR/build.rc")); rerun to continue it"; tail -30 "$STATE_DIR/build.log"; return 1; }
  grep -m1 'CUDA backend' "$STATE_DIR/configure.log" >"$STATE_DIR/build.md"
}

stage_tests() {
  use_deps
  export REMORA_BACKENDS_REPORT="$STATE_DIR/backends_table.md"
  : >"$REMORA_BACKENDS_REPORT"
  run_logged tests_cuda $((CAP * 45 / 100)) "$T" "[cuda]~[huge]~[models_parity]" --durations yes
  local rc1=$?
  unset REMORA_BACKENDS_REPORT
  run_logged tests_all $((CAP * 50 / 100)) ctest --test-dir "$BUILD" -j 8 -E "gpu_check_no_gpu" --output-on-failure
  local rc2=$?
  {
    echo "- \`remora_tests \"[cuda]\"\` (includes every [backends] device comparison): $(catch_summary "$STATE_DIR/tests_cuda.log") (rc $rc1)"
    grep -E '^backends: cuda' "$STATE_DIR/tests_cuda.log" | sed 's/^/  - /'
    echo "- whole suite under ctest: $(grep -E 'tests passed|tests failed' "$STATE_DIR/tests_all.log" | tail -1) (rc $rc2)"
    grep -E '^\s+[0-9]+ - .*\(Failed|Timeout|Subprocess' "$STATE_DIR/tests_all.log" | sed 's/^ */  - failed: /'
    # NCCL (issue 12): one rank on the GPU; the ctest line says Passed or Failed.
    echo "- NCCL all-reduce/broadcast of CUDA tensors (dist_nccl_np1): $(grep -E 'dist_nccl_np1 ' "$STATE_DIR/tests_all.log" | grep -oE 'Passed|Failed|Not Run|Timeout' | head -1)"
  } >"$STATE_DIR/tests.md"
  return 0
}

stage_sanitizer() {  # tool
  local tool=$1
  use_deps
  if ! command -v compute-sanitizer >/dev/null 2>&1; then
    echo "- $tool: compute-sanitizer not found" >"$STATE_DIR/$tool.md"
    return 0
  fi
  # Small problems only (sanitizers slow kernels 10-100x): the registry walk
  # skips the backend-only (large) cases.
  REMORA_CUDA_SYNC=1 REMORA_BACKENDS_SKIP_LARGE=1 run_logged "$tool" $((CAP - 10)) \
    compute-sanitizer --tool "$tool" --error-exitcode 99 --print-limit 20 "$T" "[cuda]~[huge]~[models_parity]"
  local rc=$?
  local errs
  errs="$(grep -E '^========= ERROR SUMMARY' "$STATE_DIR/$tool.log" | tail -1)"
  local verdict="rc $rc"
  [ "$rc" = 137 ] && verdict="TIMED OUT after $((CAP - 10)) s: partial"
  echo "- $tool: ${errs:-no summary line} — tests: $(catch_summary "$STATE_DIR/$tool.log") ($verdict)" >"$STATE_DIR/$tool.md"
  return 0
}

stage_huge() {
  use_deps
  run_logged huge $((CAP - 10)) "$T" "[huge]" --durations yes
  echo "- tensors over 2^31 elements: $(catch_summary "$STATE_DIR/huge.log") (rc $(cat "$STATE_DIR/huge.rc"))" >"$STATE_DIR/huge.md"
  grep -E 'skipped' "$STATE_DIR/huge.log" | head -3 | sed 's/^/  - /' >>"$STATE_DIR/huge.md"
  return 0  # failures are in the report, not a reason to rerun the stage
}

stage_models() {
  use_deps
  run_logged models $((CAP - 10)) "$T" "[models_parity]" --durations yes
  {
    echo "- models, 20 steps each on the GPU and the CPU: $(catch_summary "$STATE_DIR/models.log") (rc $(cat "$STATE_DIR/models.rc"))"
    grep -E '^models_parity:' "$STATE_DIR/models.log" | sed 's/^/  - /'
  } >"$STATE_DIR/models.md"
  return 0  # failures are in the report, not a reason to rerun the stage
}

stage_bench() {
  use_deps
  run_logged bench_cuda $((CAP * 35 / 100)) "$BUILD/tools/remora_bench_cuda"
  local py=""
  if python3 -c 'import torch; assert torch.cuda.is_available()' >/dev/null 2>&1; then
    run_logged bench_cuda_py $((CAP * 60 / 100)) python3 "$ROOT/tools/bench_cuda.py" --remora-bench "$BUILD/tools/remora_bench_cuda"
    py="ran (rc $(cat "$STATE_DIR/bench_cuda_py.rc"))"
  else
    py="skipped: python3 cannot import torch with CUDA"
  fi
  {
    echo "- remora_bench_cuda (rc $(cat "$STATE_DIR/bench_cuda.rc")): the RSA table, then the tensor-core"
    echo "  \"flash\" table (TF32 FlashAttention kernels vs the FP32 reference kernel; tc = tensor-core launches)"
    echo '```'
    tail -60 "$STATE_DIR/bench_cuda.log"
    echo '```'
    echo "- tools/bench_cuda.py: $py (second table: the flash rows beside torch eager RSA and SDPA, ratio = peer / flash)"
    [ -f "$STATE_DIR/bench_cuda_py.log" ] && { echo '```'; tail -80 "$STATE_DIR/bench_cuda_py.log"; echo '```'; }
  } >"$STATE_DIR/bench.md"
  return 0  # failures are in the report, not a reason to rerun the stage
}

stage_report() {
  local out="$ROOT/docs/gpu_report.md"
  local commit="${REMORA_COMMIT:-$(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo 'unknown (set REMORA_COMMIT)')}"
  {
    echo "# GPU check report"
    echo
    echo "Written by tools/gpu_check.sh (issue 11). Every number below comes from the logs of this run."
    echo
    echo "| | |"
    echo "| --- | --- |"
    echo "| date | $(date -u '+%Y-%m-%d %H:%M UTC') |"
    echo "| commit | $commit |"
    echo "| device | $(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null | head -1) |"
    echo "| driver | $(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1) |"
    echo "| CUDA compiler | $(nvcc --version 2>/dev/null | grep -o 'release [0-9.]*' | head -1) |"
    echo "| build | $(cat "$STATE_DIR/build.md" 2>/dev/null) |"
    echo
    for s in tests memcheck racecheck synccheck initcheck huge models bench; do
      echo "## $s"
      echo
      cat "$STATE_DIR/$s.md" 2>/dev/null || echo "- not run"
      echo
    done
    if [ -s "$STATE_DIR/backends_table.md" ]; then
      echo "## every registry comparison (worst = max |got - ref| / allowed; < 1 passes)"
      echo
      echo "| device | case | dtype | result | worst | elements |"
      echo "| --- | --- | --- | --- | --- | --- |"
      cat "$STATE_DIR/backends_table.md"
    fi
  } >"$out"
  say "wrote $out"
  if [ -n "${OUT:-}" ] && [ -d "${OUT:-}" ]; then
    cp "$out" "$OUT/gpu_report.md"
    tar -czf "$OUT/gpu_check_logs.tar.gz" -C "$STATE_DIR" . 2>/dev/null
    say "copied the report and the logs to \$OUT"
  fi
}

run_stage() {  # index (1-based)
  local i=$1 name=${STAGES[$(($1 - 1))]}
  say "stage $i/${#STAGES[@]}: $name (at most $CAP s)"
  local t0=$SECONDS rc=0
  case "$name" in
    build) stage_build || rc=$? ;;
    tests) stage_tests || rc=$? ;;
    memcheck | racecheck | synccheck | initcheck) stage_sanitizer "$name" || rc=$? ;;
    huge) stage_huge || rc=$? ;;
    models) stage_models || rc=$? ;;
    bench) stage_bench || rc=$? ;;
    report) stage_report || rc=$? ;;
  esac
  if [ "$rc" = 0 ]; then
    mark_done "$i"
    say "stage $i ($name) done in $((SECONDS - t0)) s"
    for f in "$STATE_DIR/$name.md"; do [ -f "$f" ] && cat "$f"; done
  else
    say "stage $i ($name) failed (rc $rc) after $((SECONDS - t0)) s; rerun to retry it"
  fi
  return $rc
}

# ---- main ----
STAGE=""
case "${1:-}" in
  --fetch-deps) fetch_deps ;;
  --list) for i in "${!STAGES[@]}"; do echo "$((i + 1)) ${STAGES[$i]} (<= ${LIMITS[$i]} s)"; done; exit 0 ;;
  --stage) STAGE="${2:?--stage needs a number}" ;;
  --reset) rm -f "$STATE"; say "state cleared"; exit 0 ;;
  "") ;;
  *) echo "usage: tools/gpu_check.sh [--stage N] [--list] [--reset] [--fetch-deps]" >&2; exit 2 ;;
esac

WHY=""
if ! have_gpu; then
  say "no GPU here: $WHY. Nothing was built or run; this check needs an NVIDIA GPU (see docs/gpu_check.md)."
  exit 77
fi
mkdir -p "$STATE_DIR"
touch "$STATE"
OPENBLAS_FLAGS=()

if [ -n "$STAGE" ]; then
  [[ "$STAGE" =~ ^[0-9]+$ ]] && [ "$STAGE" -ge 1 ] && [ "$STAGE" -le ${#STAGES[@]} ] ||
    { echo "gpu_check: --stage must be 1..${#STAGES[@]}" >&2; exit 2; }
  CAP=${LIMITS[$((STAGE - 1))]}
  run_stage "$STAGE"
  exit $?
fi

for i in $(seq 1 ${#STAGES[@]}); do
  done_stage "$i" && continue
  left=$((BUDGET - (SECONDS - START)))
  if [ "$left" -lt "${ESTIMATE[$((i - 1))]}" ]; then
    say "time budget: ${left} s left, stage $i (${STAGES[$((i - 1))]}) usually takes ${ESTIMATE[$((i - 1))]} s; run tools/gpu_check.sh again to resume"
    exit 0
  fi
  CAP=${LIMITS[$((i - 1))]}
  [ "$left" -lt "$CAP" ] && CAP=$left
  run_stage "$i" || exit 1
done
say "all stages done; report: docs/gpu_report.md"
exit 0
