#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# The runs of one table of docs/results.md, and the table: trains (or keeps) the runs,
# evaluates them and prints the table's Markdown block (the table and the sentences that
# quote it) on stdout. tools/experiments/results.sh calls it for every block and writes
# the blocks into docs/results.md.
#
#   bash tools/experiments/evidence.sh lm               # default (RSA-XL), xl, rsa_bert, bert on tiny Shakespeare
#   bash tools/experiments/evidence.sh hybrids          # char LM: SRU++, RSA-XL, XL, StarSaber (causal) at ~650k parameters
#   bash tools/experiments/evidence.sh encoders         # StarSaber against BERT, masked LM
#   bash tools/experiments/evidence.sh classify         # StarSaber against BERT, membership classification
#   bash tools/experiments/evidence.sh copy_official    # copy task, official recipe (copy_official.sh, copy_curves.py)
#   bash tools/experiments/evidence.sh copy_probe       # what RelRNN attends to (copy_probe.py; needs PyTorch)
#   bash tools/experiments/evidence.sh copy             # copy task at T = 100 and 300, uniform init and Adam
#   bash tools/experiments/evidence.sh copy_long        # the T = 100 runs of `copy` continued to 2,000 and 6,000 steps
#   bash tools/experiments/evidence.sh regular          # regular languages, RSA against softmax
#   bash tools/experiments/evidence.sh regular_protocol # regular languages, Bhattamishra et al.'s recipe (regular_protocol.sh)
#   bash tools/experiments/evidence.sh forecast         # weekly CO2: RSA-XL and XL at two horizons, 3 seeds, beside NumPy baselines
#
# Environment:
#   REMORA   the driver (default build/cli/remora)
#   RUNS     the folder of the runs (default out): RUNS/evidence_<config>, RUNS/classify_*,
#            RUNS/copy_*, RUNS/regular_*, RUNS/copy_official, RUNS/regular_protocol
#   FIGURES  where the figures go (default RUNS): default_loss.png (lm), copy_curves.png (copy_official)
#   THREADS  threads per run (default: 2 for lm, hybrids and encoders, 1 for the others)
#   MODELS, LANGS, DELAYS  restrict lm/hybrids/encoders, classify/regular, copy to these
#   QUICK=1  smoke budgets: a few steps per run, tiny evaluations, a 100 kB corpus; the
#            numbers mean nothing, the pipeline is exercised end to end
#   FRESH=1  retrain runs that already finished with the same settings (they are kept otherwise)
# Exits 77 when a table cannot be made on this machine (copy_probe without PyTorch).
set -euo pipefail
cd "$(dirname "$0")/../.."
source tools/experiments/common.sh
what=${1:-}
RUNS=${RUNS:-out}
FIGURES=${FIGURES:-$RUNS}
QUICK=${QUICK:-0}
Q=3  # steps per run with QUICK=1
mkdir -p "$RUNS" "$FIGURES"
table() { "$PYTHON" tools/experiments/tables.py "$@"; }
quick() { [ "$QUICK" = 1 ]; }

# Settings of each family of runs, the smoke budgets added with QUICK=1.
char_set() {  # tiny Shakespeare language models and masked LMs
  SET=(--set train.threads="${THREADS:-2}")
  if quick; then
    [ -s "$RUNS/quick_corpus.txt" ] || head -c 100000 data/tinyshakespeare.txt >"$RUNS/quick_corpus.txt"
    SET+=(--set train.steps="$Q" --set train.eval_every="$Q" --set train.eval_batches=1 --set train.log_every=1
          --set data.path="$(realpath "$RUNS/quick_corpus.txt")")
  fi
}
strings_set() {  # regular languages and classification
  SET=(--set train.threads="${THREADS:-1}")
  quick && SET+=(--set train.steps="$Q" --set train.eval_every="$Q" --set train.eval_batches=1 --set train.log_every=1
                 --set data.n_train=200 --set data.n_test=20 --set data.eval_batch_size=20)
  return 0
}
copy_set() {  # the copy task with uniform init and Adam
  SET=(--set train.threads="${THREADS:-1}")
  quick && SET+=(--set train.eval_every="$Q" --set train.eval_batches=1 --set train.log_every=1
                 --set data.n_test=20 --set data.eval_batch_size=20)
  return 0
}

# A language model or masked LM: OUT/params.txt and OUT/test.json (best checkpoint, test split).
lm_run() {  # name
  local name=$1 out=$RUNS/evidence_$1
  char_set
  train_once "$out" "configs/$name.json" "${SET[@]}"
  "$REMORA" info "configs/$name.json" "${SET[@]}" | awk '/^  total/ {print $2}' >"$out/params.txt"
  eval_once "$out" test.json "configs/$name.json" "${SET[@]}" --checkpoint "$out/best.safetensors" --split test
}

lm_table() {  # kind default_models
  local kind=$1 dirs=() name
  for name in ${MODELS:-$2}; do
    lm_run "$name"
    dirs+=("$RUNS/evidence_$name")
  done
  table "$kind" "${dirs[@]}"
}

# Membership classification or next-character prediction of a formal language:
# OUT/eval.json (best checkpoint; the valid and test sets are the same held-out strings).
bins_run() {  # out config language
  local out=$1 cfg=$2 lang=$3
  strings_set
  train_once "$out" "$cfg" --set data.language="$lang" "${SET[@]}"
  eval_once "$out" eval.json "$cfg" --set data.language="$lang" "${SET[@]}" --checkpoint "$out/best.safetensors"
}

# One run of the copy task with uniform init: the same budget for every model at a given
# T, 600 steps of 32 at T = 100 and 300 steps of 16 at T = 300 (each step is three times
# longer), unless STEPS / BATCH say otherwise.
copy_run() {  # model T
  local name=$1 T=$2 out=$RUNS/copy_$1_T$2 cfg=configs/copy_$1.json steps batch
  steps=${STEPS:-$([ "$T" -ge 300 ] && echo 300 || echo 600)}
  batch=${BATCH:-$([ "$T" -ge 300 ] && echo 16 || echo 32)}
  quick && steps=$Q && batch=4
  copy_set
  SET+=(--set data.delay="$T" --set train.steps="$steps" --set data.batch_size="$batch")
  train_once "$out" "$cfg" "${SET[@]}"
  "$REMORA" info "$cfg" "${SET[@]}" | awk '/^  total/ {print $2}' >"$out/params.txt"
  eval_once "$out" test.json "$cfg" "${SET[@]}" --checkpoint "$out/best.safetensors" --split test
}

# The official-recipe copy runs, in two passes (800 / 400 steps, then resumed to 2,400 at
# T = 100 and 600 at T = 200; resuming reproduces an uninterrupted run exactly): the
# RelRNN T = 100 checkpoints of the first pass are kept as stepN.safetensors for copy_probe.
copy_official_runs() {
  local out=$RUNS/copy_official s1=(800 400) s2=(2400 600) env=() stamp seed step
  quick && s1=(2 1) s2=(4 2) env=(EVAL100=2 EVAL200=1 EVAL_BATCHES=1
    SET="--set data.n_test=20 --set data.eval_batch_size=20 --set data.batch_size=4")
  stamp="copy_official ${s1[*]} ${s2[*]} ${env[*]}"
  if [ "${FRESH:-0}" != 1 ] && [ -f "$out/finished" ] && [ "$(cat "$out/finished")" = "$stamp" ]; then
    return 0
  fi
  rm -rf "$out"
  env OUT="$out" REMORA="$REMORA" STEPS100="${s1[0]}" STEPS200="${s1[1]}" "${env[@]}" bash tools/experiments/copy_official.sh
  for seed in 1 2; do
    step=$("$PYTHON" -c 'import json, sys; print(json.loads(open(sys.argv[1]).readlines()[-1])["step"])' \
      "$out/relrnn_T100_s$seed/metrics.jsonl")
    cp "$out/relrnn_T100_s$seed/last.safetensors" "$out/relrnn_T100_s$seed/step$step.safetensors"
  done
  env OUT="$out" REMORA="$REMORA" RESUME=1 STEPS100="${s2[0]}" STEPS200="${s2[1]}" "${env[@]}" \
    bash tools/experiments/copy_official.sh
  printf '%s\n' "$stamp" >"$out/finished"
}

case "$what" in
  lm)
    lm_table lm "default xl rsa_bert bert"
    if [ -f "$RUNS/evidence_default/metrics.jsonl" ]; then
      "$REMORA" plot "$RUNS/evidence_default" >/dev/null
      [ "$(realpath "$FIGURES")" = "$(realpath "$RUNS/evidence_default")" ] ||
        cp "$RUNS/evidence_default/loss.png" "$FIGURES/default_loss.png"
    fi
    ;;
  hybrids)
    lm_table hybrids "srupp default xl starsaber_lm"
    ;;
  encoders)
    lm_table encoders "starsaber starsaber_gated bert"
    ;;
  classify)
    dirs=()
    for lang in ${LANGS:-parity tomita3 dyck2}; do
      for name in starsaber bert; do
        bins_run "$RUNS/classify_${name}_$lang" "configs/classify_$name.json" "$lang"
        dirs+=("$RUNS/classify_${name}_$lang")
      done
    done
    table classify "${dirs[@]}"
    ;;
  regular)
    dirs=()
    for lang in ${LANGS:-parity tomita3 tomita4 tomita5 aa_star dyck2}; do
      for kind in rsa softmax; do
        bins_run "$RUNS/regular_${kind}_$lang" "configs/regular_$kind.json" "$lang"
        dirs+=("$RUNS/regular_${kind}_$lang")
      done
    done
    table regular "${dirs[@]}"
    ;;
  copy)
    dirs=()
    for T in ${DELAYS:-100 300}; do
      for name in ${MODELS:-relrnn rnn lstm}; do
        copy_run "$name" "$T"
        dirs+=("$RUNS/copy_${name}_T$T")
      done
    done
    table copy "${dirs[@]}"
    ;;
  forecast)
    # configs/forecast_co2.json (the shipped weekly CO2 series): RSA-XL and softmax XL at
    # horizons of 13 and 26 weeks, seeds 1-3; forecast_reference.py rebuilds the same test
    # windows in NumPy (it fails when their count differs from the model's) and scores the
    # last-value and least-squares linear baselines on them.
    dirs=()
    for attn in rsa softmax; do
      for H in 13 26; do
        for seed in ${SEEDS:-1 2 3}; do
          out=$RUNS/forecast_${attn}_h${H}_s${seed}
          SET=(--set train.threads="${THREADS:-2}" --set data.horizon="$H" --set seed="$seed")
          [ "$attn" = softmax ] && SET+=(--set 'model.attention={"type":"softmax"}')
          quick && SET+=(--set train.steps="$Q" --set train.eval_every="$Q" --set train.eval_batches=1 --set train.log_every=1)
          train_once "$out" configs/forecast_co2.json "${SET[@]}"
          eval_once "$out" test.json configs/forecast_co2.json "${SET[@]}" --checkpoint "$out/best.safetensors" --split test
          "$PYTHON" tools/experiments/forecast_reference.py configs/forecast_co2.json --horizon "$H" \
            --check "$out/test.json" >"$out/reference.json"
          dirs+=("$out")
        done
      done
    done
    table forecast "${dirs[@]}"
    ;;
  copy_long)
    # The T = 100 runs of `copy`, continued (--resume) to 2,000 and then 6,000 steps.
    dirs=()
    stages="2000 6000"
    quick && stages="$((Q + 2)) $((Q + 4))"
    for name in ${MODELS:-relrnn rnn lstm}; do
      copy_run "$name" 100
      from=$RUNS/copy_${name}_T100
      for steps in $stages; do
        out=$RUNS/copy_long_${name}_$steps
        resume_once "$out" "$from" "$steps"
        eval_once "$out" test.json "$out/config.json" --checkpoint "$out/best.safetensors" --split test
        dirs+=("$out")
        from=$out
      done
    done
    table copy_long "${dirs[@]}"
    ;;
  copy_official)
    copy_official_runs
    "$PYTHON" tools/experiments/copy_curves.py "$RUNS/copy_official" "$FIGURES/copy_curves.png"
    ;;
  copy_probe)
    if ! have_torch; then
      echo "copy_probe: $PYTHON cannot import torch (tools/experiments/copy_probe.py needs PyTorch)" >&2
      exit 77
    fi
    copy_official_runs
    files=()
    n=50
    quick && n=4
    for seed in 1 2; do
      for ckpt in "$RUNS/copy_official/relrnn_T100_s$seed"/step*.safetensors \
                  "$RUNS/copy_official/relrnn_T100_s$seed/last.safetensors"; do
        f=${ckpt%.safetensors}.probe.json
        [ -s "$f" ] && [ "$f" -nt "$RUNS/copy_official/finished" ] ||
          "$PYTHON" tools/experiments/copy_probe.py "$ckpt" 100 "$n" >"$f"
        files+=("$f")
      done
    done
    table copy_probe "${files[@]}"
    ;;
  regular_protocol)
    set_=""
    quick && set_="--set train.steps=$Q --set train.eval_every=$Q --set train.eval_batches=1 --set train.log_every=1
      --set data.n_train=200 --set data.n_test=20 --set data.eval_batch_size=20"
    OUT=$RUNS/regular_protocol SET=$set_ SEEDS="1 2" LANGS=parity bash tools/experiments/regular_protocol.sh
    OUT=$RUNS/regular_protocol SET=$set_ SEEDS=1 LANGS=tomita5 bash tools/experiments/regular_protocol.sh
    table regular_protocol "$RUNS"/regular_protocol/parity_{rsa,softmax}_s{1,2} "$RUNS"/regular_protocol/tomita5_{rsa,softmax}_s1
    ;;
  *)
    echo "usage: bash tools/experiments/evidence.sh lm|hybrids|encoders|classify|copy_official|copy_probe|copy|copy_long|regular|regular_protocol" >&2
    exit 2
    ;;
esac
