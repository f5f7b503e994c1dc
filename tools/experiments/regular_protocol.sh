#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Regular languages with Bhattamishra et al.'s training recipe (the one the RSA
# paper builds on; docs/relevancy.md §6): RMSprop 5e-3, batch 32, 7,800 updates
# (25 epochs of 10,000 strings of lengths 2-50), 500 strings per test bin; the
# model is the 2-layer d 32 Transformer-XL body of docs/results.md, RSA (3 of 4 heads
# REM: 1 regular + 1 cyclic pair) against softmax. One thread, low priority,
# one run at a time. The table reports the LAST checkpoint (the regular task's
# valid and test splits are the same held-out sets, so best.safetensors would be
# chosen on the data it is scored on): OUT/<language>_<attention>_s<seed>/test_last.json.
# A run that finished with the same settings is kept (FRESH=1 retrains it).
#
#   bash tools/experiments/regular_protocol.sh            # LANGS="parity tomita5" KINDS="rsa softmax" SEEDS=1
# SET="--set key=value ..." adds settings to every train and eval (tools/experiments/evidence.sh's
# smoke budgets).
set -euo pipefail
cd "$(dirname "$0")/../.."
source tools/experiments/common.sh
OUT=${OUT:-out/regular_protocol}
SET=${SET:-}
export OMP_NUM_THREADS=1
mkdir -p "$OUT"
for lang in ${LANGS:-parity tomita5}; do
  for kind in ${KINDS:-rsa softmax}; do
    for seed in ${SEEDS:-1}; do
      name=${lang}_${kind}_s$seed
      cfg=configs/regular_bhattamishra_$kind.json
      t0=$SECONDS
      # shellcheck disable=SC2086  # SET is a list of words
      NICE=10 train_once "$OUT/$name" "$cfg" --set data.language="$lang" --set seed="$seed" --set train.threads=1 $SET
      # shellcheck disable=SC2086
      NICE=10 eval_once "$OUT/$name" test_last.json "$cfg" --checkpoint "$OUT/$name/last.safetensors" --split test \
        --set data.language="$lang" --set seed="$seed" --set train.threads=1 $SET
      echo "$name $((SECONDS - t0)) s" >> "$OUT/walltime.txt"
    done
  done
done
