#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Reproduces the README's results tables (run on an otherwise idle machine).
#   bash tools/experiments/evidence.sh lm        # default (RSA-XL), xl, rsa_bert, bert on tiny Shakespeare
#   bash tools/experiments/evidence.sh regular   # regular languages, RSA against softmax, 1 thread each
#   bash tools/experiments/evidence.sh hybrids   # char LM: SRU++, RSA-XL, XL, StarSaber (causal) at ~650k parameters
#   bash tools/experiments/evidence.sh copy      # copy task at T = 100 and 300: RelRNN, RNN, LSTM, same step budget
#   bash tools/experiments/evidence.sh encoders  # StarSaber against BERT: MLM, and membership classification
# Results: out/evidence_<name>/ (checkpoints, metrics.jsonl, loss.png) and a
# markdown table on stdout.
set -euo pipefail
cd "$(dirname "$0")/../.."
R=./build/tools/remora
what=${1:-lm}

summary() {  # name config out
  local name=$1 cfg=$2 out=$3
  local params test
  params=$($R info "$cfg" | awk '/^  total/ {print $2}')
  test=$($R eval "$cfg" --checkpoint "$out/best.safetensors" --split test)
  /usr/bin/python3 - "$name" "$params" "$out" "$test" <<'EOF'
import json, sys
name, params, out, test = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
rows = [json.loads(l) for l in open(out + "/metrics.jsonl")]
valid = [r for r in rows if r["split"] == "valid"]
train = [r for r in rows if r["split"] == "train"]
key = "bpc" if "bpc" in valid[-1] else "mlm_accuracy"
best = min(v[key] for v in valid) if key == "bpc" else max(v[key] for v in valid)
tps = sum(r["tokens_per_s"] for r in train) / len(train)
print(f"| {name} | {params} | {key} | {best:.4f} | {test[key]:.4f} | {train[-1]['elapsed'] / 60:.1f} min | {tps:.0f} |")
EOF
}

# One row of the copy-task table: name config delay.
copy_row() {
  local name=$1 cfg=$2 T=$3 out=out/copy_${1}_T$3
  # The same budget for every model at a given T: 600 steps of 32 at T = 100, 300 steps
  # of 16 at T = 300 (each step is three times longer), unless STEPS / BATCH say otherwise.
  local steps=${STEPS:-$([ "$T" -ge 300 ] && echo 300 || echo 600)} batch=${BATCH:-$([ "$T" -ge 300 ] && echo 16 || echo 32)}
  $R train "$cfg" --out "$out" --set data.delay=$T --set train.steps=$steps --set data.batch_size=$batch \
      --set train.threads=${THREADS:-2} >"$out.log" 2>&1 ||
    { echo "$name T=$T failed, see $out.log"; exit 1; }
  local params test
  params=$($R info "$cfg" --set data.delay=$T | awk '/^  total/ {print $2}')
  test=$($R eval "$cfg" --checkpoint "$out/best.safetensors" --set data.delay=$T --split test)
  /usr/bin/python3 - "$name" "$T" "$params" "$out" "$test" <<'EOF'
import json, sys
name, T, params, out, test = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], json.loads(sys.argv[5])
rows = [json.loads(l) for l in open(out + "/metrics.jsonl")]
valid = [r for r in rows if r["split"] == "valid"]
train = [r for r in rows if r["split"] == "train"]
print(f"| {T} | {name} | {params} | {valid[-1]['step']} | {max(v['accuracy'] for v in valid):.3f} | "
      f"{test['accuracy']:.3f} | {train[-1]['elapsed'] / 60:.1f} min |")
EOF
}

if [ "$what" = hybrids ]; then
  echo "| config | parameters | metric | best valid | test (best checkpoint) | wall time | train tokens/s |"
  echo "|---|---|---|---|---|---|---|"
  for name in ${MODELS:-srupp default xl starsaber_lm}; do
    out=out/evidence_$name
    $R train configs/$name.json --out "$out" --set train.threads=${THREADS:-2} >"$out.log" 2>&1 || { echo "$name failed, see $out.log"; exit 1; }
    summary "$name" configs/$name.json "$out"
  done
elif [ "$what" = copy ]; then
  echo "| T | model | parameters | steps | best valid accuracy | test accuracy | wall time |"
  echo "|---|---|---|---|---|---|---|"
  for T in ${DELAYS:-100 300}; do
    for name in ${MODELS:-relrnn rnn lstm}; do copy_row "$name" configs/copy_$name.json "$T"; done
  done
elif [ "$what" = encoders ]; then
  echo "| config | parameters | metric | best valid | test (best checkpoint) | wall time | train tokens/s |"
  echo "|---|---|---|---|---|---|---|"
  for name in starsaber starsaber_gated bert; do
    out=out/evidence_$name
    [ -f "$out/best.safetensors" ] || $R train configs/$name.json --out "$out" --set train.threads=${THREADS:-2} >"$out.log" 2>&1 ||
      { echo "$name failed, see $out.log"; exit 1; }
    summary "$name" configs/$name.json "$out"
  done
  echo
  echo "| language | model | in-distribution (2-50) | 51-100 | 101-150 |"
  echo "|---|---|---|---|---|"
  for lang in ${LANGS:-parity tomita3 dyck2}; do
    for name in starsaber bert; do
      out=out/classify_${name}_$lang
      [ -f "$out/best.safetensors" ] || $R train configs/classify_$name.json --out "$out" \
          --set data.language=$lang --set train.threads=${THREADS:-2} >"$out.log" 2>&1
      r=$($R eval configs/classify_$name.json --checkpoint "$out/best.safetensors" --set data.language=$lang)
      /usr/bin/python3 -c "import json,sys; r=json.loads(sys.argv[1]); b=r['bin_accuracy']; print(f'| $lang | $name | {r[\"accuracy\"]:.3f} | {b[0]:.3f} | {b[1]:.3f} |')" "$r"
    done
  done
elif [ "$what" = lm ]; then
  echo "| config | parameters | metric | best valid | test (best checkpoint) | wall time | train tokens/s |"
  echo "|---|---|---|---|---|---|---|"
  for name in default xl rsa_bert bert; do
    out=out/evidence_$name
    $R train configs/$name.json --out "$out" --set train.threads=${THREADS:-2} >"$out.log" 2>&1 || { echo "$name failed, see $out.log"; exit 1; }
    $R plot "$out" >/dev/null
    summary "$name" configs/$name.json "$out"
  done
elif [ "$what" = regular ]; then
  echo "| language | attention | in-distribution (2-50) | 51-100 | 101-150 |"
  echo "|---|---|---|---|---|"
  for lang in ${LANGS:-parity tomita3 tomita4 tomita5 aa_star dyck2}; do
    for kind in rsa softmax; do
      out=out/regular_${kind}_$lang
      [ -f "$out/best.safetensors" ] || $R train configs/regular_$kind.json --out "$out" \
          --set data.language=$lang --set train.threads=1 >"$out.log" 2>&1
      r=$($R eval configs/regular_$kind.json --checkpoint "$out/best.safetensors" --set data.language=$lang \
          --set train.threads=1)
      /usr/bin/python3 -c "import json,sys; r=json.loads(sys.argv[1]); b=r['bin_accuracy']; print(f'| $lang | $kind | {r[\"accuracy\"]:.3f} | {b[0]:.3f} | {b[1]:.3f} |')" "$r"
    done
  done
else
  echo "usage: bash tools/experiments/evidence.sh lm|regular|hybrids|copy|encoders" >&2
  exit 2
fi
