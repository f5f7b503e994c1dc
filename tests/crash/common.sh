# SPDX-License-Identifier: BSD-3-Clause
# Shared by the crash-safety tests (sourced): a temporary folder, a ~3 KB
# corpus and a tiny char-level Transformer-XL config that saves a checkpoint
# after every step (eval_every 1), so kills and full disks hit checkpoint writes.
set -euo pipefail
REMORA=${1:?usage: $0 PATH/TO/remora}
WORK=$(mktemp -d /tmp/remora_crash_XXXXXX)
cleanup_hooks=()
cleanup() {
  local h
  for h in "${cleanup_hooks[@]}"; do eval "$h" || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT
python3 - "$WORK/corpus.txt" <<'PY'
import sys
words = "the quick brown fox jumps over a lazy dog and runs to its den while birds sing of summer rain".split()
x, out, line = 12345, [], 0
while sum(len(w) + 1 for w in out) < 3000:
    x = (x * 1103515245 + 12345) % 2**32
    out.append(words[(x >> 16) % 20] + (".\n" if (line := line + 1) % 11 == 0 else " "))
open(sys.argv[1], "w").write("".join(out))
PY
# $2: steps (default 40)
write_config() {
  cat > "$WORK/tiny.json" <<JSON
{
  "seed": 3, "device": "cpu",
  "model": {"type": "transformer_xl", "n_layer": 1, "d_model": 16, "n_head": 2, "d_inner": 32,
            "dropout": 0.1, "mem_len": 8,
            "attention": {"type": "rsa", "rem": {"regular": 1}, "gate": "head"}},
  "data": {"type": "char", "path": "$WORK/corpus.txt", "seq_len": 8, "batch_size": 2},
  "train": {"steps": ${1:-40}, "eval_every": 1, "eval_batches": 1, "log_every": 1, "threads": 1,
            "optimizer": {"type": "adamw", "lr": 0.01}}
}
JSON
}
write_config
CONFIG=$WORK/tiny.json
export OMP_NUM_THREADS=1
fail() { echo "FAIL: $*" >&2; exit 1; }
# A checkpoint loads: `remora eval` on it exits 0.
loads() {
  "$REMORA" eval "$CONFIG" --checkpoint "$1" >"$WORK/eval.out" 2>"$WORK/eval.err" ||
    { cat "$WORK/eval.err" >&2; return 1; }
}
