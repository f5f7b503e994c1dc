# SPDX-License-Identifier: BSD-3-Clause
# shellcheck shell=bash
# Shared by the scripts in tools/experiments/ (sourced, not run).
#
#   REMORA   the remora driver (default build/cli/remora)
#   PYTHON   the Python of the table scripts (default /usr/bin/python3)
#   FRESH=1  train_once retrains a run even when a finished one of the same command is there
#   NICE     the niceness of the remora commands (none: the caller's)

REMORA=${REMORA:-build/cli/remora}
PYTHON=${PYTHON:-/usr/bin/python3}

# remora ARGS...: the driver, under nice -n NICE when NICE is set.
remora() {
  if [ -n "${NICE:-}" ]; then nice -n "$NICE" "$REMORA" "$@"; else "$REMORA" "$@"; fi
}

# train_once OUT CONFIG [ARGS...]: `remora train CONFIG ARGS --out OUT`, its log in OUT.log.
# A run that finished with the same CONFIG and ARGS (the line in OUT/finished) is kept
# as it is; any other content of OUT is deleted first.
train_once() {
  local out=$1
  shift
  local stamp="$*"
  if [ "${FRESH:-0}" != 1 ] && [ -f "$out/finished" ] && [ "$(cat "$out/finished")" = "$stamp" ]; then
    return 0
  fi
  rm -rf "$out"
  mkdir -p "$(dirname "$out")"
  if ! remora train "$@" --out "$out" >"$out.log" 2>&1; then
    echo "training failed: $REMORA train $* --out $out (log: $out.log)" >&2
    tail -n 5 "$out.log" >&2
    return 1
  fi
  printf '%s\n' "$stamp" >"$out/finished"
}

# resume_once OUT FROM STEPS [ARGS...]: OUT is a copy of the finished run FROM, continued
# with --resume to STEPS steps (ARGS: further --set of the continued run). Kept when OUT
# finished the same continuation of the same FROM.
resume_once() {
  local out=$1 from=$2 steps=$3
  shift 3
  local stamp
  stamp="resume $(cat "$from/finished") to $steps $*"
  if [ "${FRESH:-0}" != 1 ] && [ -f "$out/finished" ] && [ "$(cat "$out/finished")" = "$stamp" ]; then
    return 0
  fi
  rm -rf "$out"
  cp -r "$from" "$out"
  rm -f "$out/finished"
  if ! remora train "$out/config.json" --out "$out" --resume --set train.steps="$steps" "$@" >"$out.log" 2>&1; then
    echo "training failed: $REMORA train --resume $out to $steps steps (log: $out.log)" >&2
    tail -n 5 "$out.log" >&2
    return 1
  fi
  printf '%s\n' "$stamp" >"$out/finished"
}

# eval_once OUT FILE CONFIG [ARGS...]: `remora eval CONFIG ARGS` into OUT/FILE, unless OUT/FILE is
# newer than OUT/finished (an evaluation of this very training).
eval_once() {
  local out=$1 file=$2
  shift 2
  if [ -s "$out/$file" ] && [ "$out/$file" -nt "$out/finished" ]; then
    return 0
  fi
  if ! remora eval "$@" >"$out/$file.tmp" 2>>"$out.log"; then
    echo "evaluation failed: $REMORA eval $* (log: $out.log)" >&2
    tail -n 5 "$out.log" >&2
    return 1
  fi
  mv "$out/$file.tmp" "$out/$file"
}

# have_torch: whether PYTHON imports torch (tools/experiments/copy_probe.py needs it).
have_torch() {
  "$PYTHON" -c 'import torch' >/dev/null 2>&1
}
