#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Crash safety: `remora train` is killed with SIGKILL at random
# moments, many times. After every kill each checkpoint on disk must load and
# `--resume` must continue from it (never going back a step); a temporary file
# left by a kill in the middle of a checkpoint write is removed (with a message)
# at the next start (so is a metrics.jsonl.tmp of the --resume rewrite).
# Finally the run finishes and leaves no temporary behind.
#   bash tests/crash/kill_train.sh PATH/TO/remora [KILLS] [SECONDS]
source "$(dirname "$0")/common.sh"
KILLS=${2:-40}
BUDGET=${3:-150}
OUT=$WORK/run
RANDOM=${CRASH_SEED:-15}
# Kill moments are spread over the length of one uninterrupted run, measured
# here, so that kills land in startup, steps and checkpoint writes alike on a
# fast release build and on a slow sanitizer build.
t0=$(date +%s%N)
"$REMORA" train "$CONFIG" --out "$WORK/probe" >/dev/null 2>&1 || fail "an uninterrupted run failed"
RUN_MS=$(( ($(date +%s%N) - t0) / 1000000 ))
[ "$RUN_MS" -ge 20 ] || RUN_MS=20
rm -rf "$WORK/probe"
start=$SECONDS
kills=0; tmp_seen=0; resumed=0; last_step=0
while [ $kills -lt "$KILLS" ] && [ $((SECONDS - start)) -lt "$BUDGET" ]; do
  args=(train "$CONFIG" --out "$OUT")
  # A run killed before its first checkpoint can only start over: --overwrite
  # (train refuses to replace a directory holding a run without it).
  if [ -f "$OUT/last.safetensors" ]; then args+=(--resume); elif [ -d "$OUT" ]; then args+=(--overwrite); fi
  had_tmp=0; ls "$OUT"/*.safetensors.tmp >/dev/null 2>&1 && had_tmp=1
  "$REMORA" "${args[@]}" >"$WORK/train.out" 2>"$WORK/train.err" &
  pid=$!
  # A random moment within one run's length (startup, training steps, checkpoint writes).
  ms=$(( (RANDOM * 32768 + RANDOM) % RUN_MS ))
  sleep "$((ms / 1000)).$(printf '%03d' $((ms % 1000)))"
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null && finished=1 || finished=0
  kills=$((kills + 1))
  if [ $finished = 1 ]; then  # it got to the end before the kill: start over
    rm -rf "$OUT"; last_step=0; continue
  fi
  if grep -q "resumed from" "$WORK/train.err"; then
    step=$(sed -n 's/.*resumed from .* at step \([0-9]*\).*/\1/p' "$WORK/train.err" | tail -1)
    [ "$step" -ge "$last_step" ] || fail "resume went back from step $last_step to $step"
    last_step=$step; resumed=$((resumed + 1))
  fi
  if [ $had_tmp = 1 ] && grep -q "resumed from\|model " "$WORK/train.err"; then
    grep -q "removed .*\.safetensors\.tmp" "$WORK/train.err" ||
      fail "a leftover temporary checkpoint was not cleaned up at start: $(cat "$WORK/train.err")"
  fi
  ls "$OUT"/*.safetensors.tmp >/dev/null 2>&1 && tmp_seen=$((tmp_seen + 1))
  for f in "$OUT"/last.safetensors "$OUT"/best.safetensors; do
    [ -f "$f" ] || continue
    loads "$f" || fail "after kill $kills, $f does not load"
  done
done
# A leftover temporary is removed at the next start even when no kill left one.
if [ -f "$OUT/last.safetensors" ]; then
  printf 'partial' > "$OUT/last.safetensors.tmp"
  printf '{"step": 1}\n' > "$OUT/metrics.jsonl.tmp"  # a kill inside --resume's metrics rewrite
  "$REMORA" train "$CONFIG" --out "$OUT" --resume >"$WORK/train.out" 2>"$WORK/train.err" ||
    { cat "$WORK/train.err" >&2; fail "the final --resume failed"; }
  grep -q "removed $OUT/last.safetensors.tmp" "$WORK/train.err" || fail "no message about the leftover temporary"
  grep -q "removed $OUT/metrics.jsonl.tmp" "$WORK/train.err" || fail "no message about the leftover metrics temporary"
  grep -q "resumed from" "$WORK/train.err" || fail "the final run did not resume"
else
  "$REMORA" train "$CONFIG" --out "$OUT" --overwrite >"$WORK/train.out" 2>"$WORK/train.err" ||
    fail "the final run failed: $(tail -2 "$WORK/train.err")"
fi
grep -q "^done: 40 steps" "$WORK/train.err" || fail "the final run did not finish: $(tail -2 "$WORK/train.err")"
! ls "$OUT"/*.tmp >/dev/null 2>&1 || fail "temporary files remain: $(ls "$OUT")"
loads "$OUT/last.safetensors" || fail "the final checkpoint does not load"
echo "kill_train: $kills SIGKILLs (one run: $RUN_MS ms) in $((SECONDS - start)) s, $resumed resumes, a leftover .tmp seen after $tmp_seen kills; every checkpoint loaded"
