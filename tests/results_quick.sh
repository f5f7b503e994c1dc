#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# docs/results.md's smoke run: tools/experiments/results.sh --quick writes a copy of the
# page in a temporary folder. Checks that every table block of the copy holds a
# well-formed Markdown table, a measured line and the smoke-run line, that the text
# outside the blocks is docs/results.md's, that the figures were drawn, and that
# docs/results.md and its figures were not touched.
#
#   bash tests/results_quick.sh PATH/TO/remora [TABLE ...]
#
# With TABLE names only those tables run. The copy_probe table needs PyTorch;
# where /usr/bin/python3 cannot import torch it is left as it is, and that is accepted.
set -euo pipefail
REMORA=$(realpath "$1")
shift
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
PY=/usr/bin/python3
DOC=tools/experiments/results_doc.py
fail() { echo "results_quick: $*" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
guarded=(docs/results.md docs/default_loss.png docs/copy_curves.png)
sha256sum "${guarded[@]}" >"$tmp/before"

only=()
[ $# -gt 0 ] && only=(--only "$@")
t0=$SECONDS
REMORA="$REMORA" bash tools/experiments/results.sh --quick "${only[@]}" --out "$tmp/page/results.md" \
  --runs "$tmp/runs" >"$tmp/log" 2>&1 || { cat "$tmp/log" >&2; fail "results.sh --quick failed"; }
echo "results_quick: results.sh --quick ${*:-(every table)} took $((SECONDS - t0)) s"

sha256sum -c --quiet "$tmp/before" || fail "results.sh --quick changed docs/results.md or its figures"

regenerated=$(sed -n 's/.*; regenerated: \(.*\); kept: \(.*\); failed: .*/\1/p' "$tmp/log")
kept=$(sed -n 's/.*; regenerated: \(.*\); kept: \(.*\); failed: .*/\2/p' "$tmp/log")
[ -n "$regenerated" ] && [ "$regenerated" != none ] || { cat "$tmp/log" >&2; fail "no table was regenerated"; }
wanted=("$@")
[ ${#wanted[@]} -gt 0 ] || mapfile -t wanted < <(bash tools/experiments/results.sh --list)
for t in "${wanted[@]}"; do
  if [[ " $regenerated " != *" $t "* ]]; then
    if [ "$t" = copy_probe ] && [[ " $kept " == *" copy_probe "* ]] && ! "$PY" -c 'import torch' 2>/dev/null; then
      echo "results_quick: copy_probe kept (no PyTorch here)"
      continue
    fi
    cat "$tmp/log" >&2
    fail "table $t was not regenerated"
  fi
done

# Every table block of the copy (copy_probe is a sentence, not a table).
tables=()
for t in $(bash tools/experiments/results.sh --list); do [ "$t" = copy_probe ] || tables+=("$t"); done
# shellcheck disable=SC2086  # regenerated is a list of names
"$PY" "$DOC" check "$tmp/page/results.md" "${tables[@]}" --quick $regenerated || fail "malformed blocks (above)"

diff <("$PY" "$DOC" outside docs/results.md) <("$PY" "$DOC" outside "$tmp/page/results.md") >&2 ||
  fail "the text outside the blocks differs from docs/results.md"

png() { [ -s "$1" ] && [ "$(head -c 4 "$1" | tail -c 3)" = PNG ]; }
if [[ " $regenerated " == *" lm "* ]]; then
  png "$tmp/page/default_loss.png" || fail "no default_loss.png beside the copy"
fi
if [[ " $regenerated " == *" copy_official "* ]]; then
  png "$tmp/page/copy_curves.png" || fail "no copy_curves.png beside the copy"
fi
echo "results_quick: regenerated $regenerated; every block well-formed; docs/results.md untouched"
