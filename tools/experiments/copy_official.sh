#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The copy task with the official MemoryNets recipe (docs/relevancy.md):
# RelRNN, RNN and LSTM at T = 100 and T = 200, seeds 1 and 2, two runs at a time,
# one thread each, at low priority. Each run evaluates on 200 of the 500 fixed valid
# sequences every EVAL100 / EVAL200 steps (the learning curve: OUT/<run>/metrics.jsonl), then
# the last checkpoint on the 500 test sequences (OUT/<run>/test.json).
#
#   STEPS100=800 STEPS200=400 bash tools/experiments/copy_official.sh
#   RESUME=1 STEPS100=1600 STEPS200=800 bash tools/experiments/copy_official.sh  # continue the same runs
# (the learning rate is constant, and --resume reproduces an uninterrupted run exactly,
# so a continued run is the longer run.)
#   python3 tools/experiments/copy_curves.py out/copy_official docs/copy_curves.png
# Without RESUME=1 a run already in OUT is replaced. SET="--set key=value ..." adds
# settings to every train and eval (tools/experiments/evidence.sh's smoke budgets).
set -euo pipefail
cd "$(dirname "$0")/../.."
REMORA=${REMORA:-build/cli/remora}
OUT=${OUT:-out/copy_official}
STEPS100=${STEPS100:-800}
STEPS200=${STEPS200:-400}
EVAL100=${EVAL100:-100}
EVAL200=${EVAL200:-50}
EVAL_BATCHES=${EVAL_BATCHES:-2}  # x eval_batch_size 100 = 200 of the 500 valid sequences per point
PAR=${PAR:-2}
RESUME=${RESUME:-0}
SEEDS=${SEEDS:-1 2}
MODELS=${MODELS:-relrnn lstm rnn}
TS=${TS:-200 100}
SET=${SET:-}
mkdir -p "$OUT"

run_one() {  # model T seed
  local model=$1 T=$2 seed=$3 steps every cfg name
  steps=$([ "$T" = 100 ] && echo "$STEPS100" || echo "$STEPS200")
  every=$([ "$T" = 100 ] && echo "$EVAL100" || echo "$EVAL200")
  cfg=configs/copy_official_T$T.json
  [ "$model" != relrnn ] && cfg=configs/copy_official_T${T}_$model.json
  name=${model}_T${T}_s$seed
  local t0=$SECONDS
  local resume=(--overwrite)
  [ "${RESUME:-0}" = 1 ] && resume=(--resume)
  # shellcheck disable=SC2086  # SET is a list of words
  OMP_NUM_THREADS=1 nice -n 10 "$REMORA" train "$cfg" --out "$OUT/$name" "${resume[@]}" --set seed="$seed" \
    --set train.steps="$steps" --set train.eval_every="$every" --set train.eval_batches="$EVAL_BATCHES" --set train.log_every=10 \
    --set train.threads=1 $SET >> "$OUT/$name.log" 2>&1
  # shellcheck disable=SC2086
  OMP_NUM_THREADS=1 nice -n 10 "$REMORA" eval "$cfg" --checkpoint "$OUT/$name/last.safetensors" \
    --split test --set seed="$seed" --set train.threads=1 $SET > "$OUT/$name/test.json" 2>> "$OUT/$name.log"
  echo "$name $((SECONDS - t0)) s" >> "$OUT/walltime.txt"
}
export -f run_one
export REMORA OUT STEPS100 STEPS200 EVAL100 EVAL200 EVAL_BATCHES RESUME SET

# Longest first, so that the two lanes finish together.
jobs=()
for model in $MODELS; do
  for T in ${TS:-200 100}; do
    for seed in $SEEDS; do
      jobs+=("$model $T $seed")
      # A run started afresh forgets the wall time of the run it replaces.
      if [ "$RESUME" != 1 ] && [ -f "$OUT/walltime.txt" ]; then
        sed -i "/^${model}_T${T}_s$seed /d" "$OUT/walltime.txt"
      fi
    done
  done
done
printf '%s\n' "${jobs[@]}" | xargs -P "$PAR" -L 1 bash -c 'run_one $0 $1 $2'
