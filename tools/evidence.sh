#!/usr/bin/env bash
# Reproduces the README's results tables (run on an otherwise idle machine).
#   bash tools/evidence.sh lm        # default (RSA-XL), xl, rsa_bert, bert on tiny Shakespeare
#   bash tools/evidence.sh regular   # regular languages, RSA against softmax, 1 thread each
# Results: out/evidence_<name>/ (checkpoints, metrics.jsonl, loss.png) and a
# markdown table on stdout.
set -euo pipefail
cd "$(dirname "$0")/.."
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

if [ "$what" = lm ]; then
  echo "| config | parameters | metric | best valid | test (best checkpoint) | wall time | train tokens/s |"
  echo "|---|---|---|---|---|---|---|"
  for name in default xl rsa_bert bert; do
    out=out/evidence_$name
    $R train configs/$name.json --out "$out" --set train.threads=2 >"$out.log" 2>&1 || { echo "$name failed, see $out.log"; exit 1; }
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
  echo "usage: bash tools/evidence.sh lm|regular" >&2
  exit 2
fi
