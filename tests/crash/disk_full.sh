#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Disk full and unwritable output: `remora train --resume` on a full
# disk or into a read-only folder must fail with a clear one-line error (exit 1
# or 2) naming the path, and leave the previous checkpoint byte for byte intact
# and loadable, with no temporary file behind.
#   1. file size limit: RLIMIT_FSIZE below the checkpoint's size, SIGXFSZ
#      ignored, so write() fails with EFBIG (works anywhere, root included);
#   2. a full file system: a 1 MiB tmpfs filled up (ENOSPC), when mount works;
#   3. read-only: a read-only bind mount of the run folder (root cannot write
#      there either), when mount works; a --out whose parent is a file otherwise.
# Prints which of them ran.
#   bash tests/crash/disk_full.sh PATH/TO/remora
source "$(dirname "$0")/common.sh"

# $1 out dir: a finished 3-step run there.
seed_run() {
  "$REMORA" train "$CONFIG" --out "$1" --set train.steps=3 >"$WORK/seed.out" 2>"$WORK/seed.err" ||
    { cat "$WORK/seed.err" >&2; fail "the seed run into $1 failed"; }
  sha256sum "$1/last.safetensors" "$1/best.safetensors" > "$WORK/sums"
}
# $1 out dir, $2 what: the checkpoints are unchanged, load, and no temporary is left.
check_intact() {
  sha256sum -c --quiet "$WORK/sums" || fail "$2: a checkpoint in $1 changed"
  loads "$1/last.safetensors" || fail "$2: $1/last.safetensors does not load"
  loads "$1/best.safetensors" || fail "$2: $1/best.safetensors does not load"
  ! ls "$1"/*.tmp >/dev/null 2>&1 || fail "$2: temporary files remain: $(ls "$1")"
}
# $1 rc, $2 stderr file, $3 what, then fragments the one-line message must hold.
check_error() {
  local rc=$1 err=$2 what=$3; shift 3
  { [ "$rc" = 1 ] || [ "$rc" = 2 ]; } || { cat "$err" >&2; fail "$what: exit $rc, expected 1 or 2"; }
  local msg; msg=$(grep "^remora train:" "$err" | tail -1)
  [ -n "$msg" ] || { cat "$err" >&2; fail "$what: no 'remora train:' error line"; }
  for f in "$@"; do
    [[ "$msg" == *"$f"* ]] || fail "$what: the error does not name '$f': $msg"
  done
  echo "  $what: exit $rc: $msg"
}
ran=()

# ---- 1. RLIMIT_FSIZE
OUT=$WORK/fsize
seed_run "$OUT"
size=$(stat -c %s "$OUT/last.safetensors")
limit_kb=$((size / 1024 / 2)); [ $limit_kb -ge 2 ] || limit_kb=2
rc=0
( trap '' XFSZ; ulimit -f $limit_kb
  exec "$REMORA" train "$CONFIG" --out "$OUT" --resume --set train.steps=6 ) >"$WORK/t.out" 2>"$WORK/t.err" || rc=$?
# The first checkpoint file of the evaluation fails (best, when the score improved; else last).
check_error $rc "$WORK/t.err" "RLIMIT_FSIZE ${limit_kb} KiB < checkpoint $size B" "$OUT/" ".safetensors" "File too large"
check_intact "$OUT" "RLIMIT_FSIZE"
ran+=("RLIMIT_FSIZE (EFBIG)")

# ---- 2. a full tmpfs
MNT=$WORK/mnt
mkdir -p "$MNT"
if mount -t tmpfs -o size=1m remora_crash "$MNT" 2>/dev/null; then
  cleanup_hooks+=("umount '$MNT'")
  OUT=$MNT/run
  seed_run "$OUT"
  dd if=/dev/zero of="$MNT/filler" bs=4k >/dev/null 2>&1 || true  # until ENOSPC
  rc=0
  "$REMORA" train "$CONFIG" --out "$OUT" --resume --set train.steps=6 >"$WORK/t.out" 2>"$WORK/t.err" || rc=$?
  check_error $rc "$WORK/t.err" "tmpfs of 1 MiB, full" "$OUT/" "No space left on device"
  check_intact "$OUT" "full tmpfs"
  # With room again, the same command resumes and finishes.
  rm -f "$MNT/filler"
  "$REMORA" train "$CONFIG" --out "$OUT" --resume --set train.steps=6 >"$WORK/t.out" 2>"$WORK/t.err" ||
    { cat "$WORK/t.err" >&2; fail "resuming after space was freed failed"; }
  grep -q "^done: 6 steps" "$WORK/t.err" || fail "resuming after space was freed did not finish"
  ran+=("tmpfs full (ENOSPC)")

  # ---- 3. read-only: a read-only bind mount of the run folder
  OUT=$MNT/ro
  seed_run "$OUT"
  if mount --bind "$OUT" "$OUT" 2>/dev/null; then
    cleanup_hooks=("umount '$OUT'" "${cleanup_hooks[@]}")
    if mount -o remount,bind,ro "$OUT" 2>/dev/null; then
      rc=0
      "$REMORA" train "$CONFIG" --out "$OUT" --resume --set train.steps=6 >"$WORK/t.out" 2>"$WORK/t.err" || rc=$?
      check_error $rc "$WORK/t.err" "read-only bind mount" "$OUT" "not writable"
      check_intact "$OUT" "read-only"
      ran+=("read-only bind mount (EROFS)")
    fi
  fi
else
  echo "  mount not permitted here: the tmpfs and read-only mount cases are skipped"
fi

# ---- 3b. a --out under a regular file (fails for root too)
echo "not a folder" > "$WORK/a_file"
rc=0
"$REMORA" train "$CONFIG" --out "$WORK/a_file/run" >"$WORK/t.out" 2>"$WORK/t.err" || rc=$?
check_error $rc "$WORK/t.err" "--out under a file" "$WORK/a_file/run"
[ "$(cat "$WORK/a_file")" = "not a folder" ] || fail "the file under --out was changed"
ran+=("--out under a regular file (ENOTDIR)")

echo "disk_full: passed: ${ran[*]}"
