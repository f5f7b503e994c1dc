#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# A power cut at any point of a training step loses nothing: the file-system
# calls of one `remora train --resume` step (the metrics rewrite and appends,
# config.json, the checkpoint saves) are recorded with strace, and every crash
# state that the recorded calls allow (power_cut.py: at each call, any subset
# of the calls not yet fsynced lost) is built as a run directory. In every
# state each checkpoint and config.json must be its previous or its new
# version, byte for byte, and `remora train --resume` from it must finish the
# run with weights bit-identical to an uninterrupted run's.
#   bash tests/crash/power_cut.sh PATH/TO/remora
# Exits 77 (skipped) without strace, or where ptrace is refused.
source "$(dirname "$0")/common.sh"
command -v strace >/dev/null 2>&1 || { echo "power_cut: strace not installed (apt-get install strace): skipped"; exit 77; }
strace -f -qq -o /dev/null true 2>/dev/null || { echo "power_cut: strace cannot trace here (ptrace refused): skipped"; exit 77; }
HERE=$(cd "$(dirname "$0")" && pwd)

# The weights of a checkpoint, as bytes per tensor (metadata such as the version left out).
cat > "$WORK/tensors.py" <<'PY'
import json, struct, sys
def tensors(p):
    b = open(p, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n]); h.pop("__metadata__", None)
    return {k: b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]] for k, v in h.items()}
a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
sys.exit(0 if a.keys() == b.keys() and all(a[k] == b[k] for k in a) else 1)
PY

"$REMORA" train "$CONFIG" --out "$WORK/ref" --set train.steps=4 >/dev/null 2>"$WORK/ref.err" ||
  { cat "$WORK/ref.err" >&2; fail "the uninterrupted run failed"; }
RUN=$WORK/run
"$REMORA" train "$CONFIG" --out "$RUN" --set train.steps=2 >/dev/null 2>"$WORK/seed.err" ||
  { cat "$WORK/seed.err" >&2; fail "the first two steps failed"; }
cp -a "$RUN" "$WORK/before"
# LeakSanitizer (sanitizer builds) stops the world with ptrace, which strace holds: off for this run.
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" strace -f -y -qq -o "$WORK/trace" \
  -e trace=open,openat,creat,write,pwrite64,fsync,fdatasync,rename,renameat,renameat2,unlink,unlinkat,ftruncate \
  "$REMORA" train "$CONFIG" --out "$RUN" --resume --set train.steps=3 >/dev/null 2>"$WORK/step3.err" ||
  { cat "$WORK/step3.err" >&2; fail "the traced third step failed"; }
cp -a "$RUN" "$WORK/after"
mkdir "$WORK/states"
python3 "$HERE/power_cut.py" "$WORK/trace" "$RUN" "$WORK/before" "$WORK/after" "$WORK/states" \
  --max-subsets 256 --per-combination 6 >"$WORK/states.txt" || { cat "$WORK/states.txt" >&2; fail "a crash state holds a torn checkpoint"; }
grep '^power_cut' "$WORK/states.txt"
n=0
for d in $(sed -n 's/^state \([^ ]*\) .*/\1/p' "$WORK/states.txt"); do
  "$REMORA" train "$CONFIG" --out "$d" --resume --set train.steps=4 >/dev/null 2>"$WORK/resume.err" ||
    { cat "$WORK/resume.err" >&2; fail "resuming from the crash state $d ($(grep -F "$d " "$WORK/states.txt")) failed"; }
  python3 "$WORK/tensors.py" "$d/last.safetensors" "$WORK/ref/last.safetensors" ||
    fail "the run resumed from $d ($(grep -F "$d " "$WORK/states.txt")) ended with other weights than the uninterrupted run"
  n=$((n + 1))
done
[ "$n" -gt 1 ] || fail "only $n crash states were resumed: the trace did not record the step's saves"
echo "power_cut: $n distinct crash states resumed to weights bit-identical to the uninterrupted run"
