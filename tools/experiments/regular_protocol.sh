#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Regular languages with Bhattamishra et al.'s training recipe (the one the RSA
# paper builds on; docs/relevancy.md §6): RMSprop 5e-3, batch 32, 7,800 updates
# (25 epochs of 10,000 strings of lengths 2-50), 500 strings per test bin; the
# model is the README's 2-layer d 32 Transformer-XL body, RSA (3 of 4 heads
# REM: 1 regular + 1 cyclic pair) against softmax. One thread, low priority,
# one run at a time. The table reports the LAST checkpoint (the regular task's
# valid and test splits are the same held-out sets, so best.safetensors would be
# chosen on the data it is scored on).
#
#   bash tools/experiments/regular_protocol.sh            # LANGS="parity tomita5" KINDS="rsa softmax" SEEDS=1
set -euo pipefail
cd "$(dirname "$0")/../.."
REMORA=${REMORA:-build/tools/remora}
OUT=${OUT:-out/regular_protocol}
mkdir -p "$OUT"
for lang in ${LANGS:-parity tomita5}; do
  for kind in ${KINDS:-rsa softmax}; do
    for seed in ${SEEDS:-1}; do
      name=${lang}_${kind}_s$seed
      t0=$SECONDS
      OMP_NUM_THREADS=1 nice -n 10 "$REMORA" train configs/regular_bhattamishra_$kind.json --out "$OUT/$name" \
        --set data.language="$lang" --set seed="$seed" --set train.threads=1 > "$OUT/$name.log" 2>&1
      OMP_NUM_THREADS=1 nice -n 10 "$REMORA" eval configs/regular_bhattamishra_$kind.json \
        --checkpoint "$OUT/$name/last.safetensors" --split test --set data.language="$lang" --set seed="$seed" \
        --set train.threads=1 > "$OUT/$name/test_last.json" 2>> "$OUT/$name.log"
      echo "$name $((SECONDS - t0)) s" >> "$OUT/walltime.txt"
    done
  done
done
