#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Regenerates docs/results.md: runs the experiments of every table
# (tools/experiments/evidence.sh NAME) and writes each table, with the sentences that
# quote it and its measured line (date, machine, wall time), between the table's
# <!-- results:NAME begin --> / <!-- results:NAME end --> markers; the text outside the
# markers is left as it is. Then rewrites the machine and total blocks and the figures
# (docs/default_loss.png, docs/copy_curves.png).
#
#   bash tools/experiments/results.sh                      # everything: hours, writes docs/results.md
#   bash tools/experiments/results.sh --only lm copy       # these tables only
#   bash tools/experiments/results.sh --quick              # smoke run, minutes: out/results_quick/results.md
#
# Options:
#   --quick        a few steps per run, tiny evaluations and a 100 kB corpus: exercises every
#                  table's pipeline; writes a copy (never docs/results.md)
#   --only NAME... the tables to regenerate (--list names them); the other blocks keep their text
#   --out PATH     the Markdown to write (a folder: PATH/results.md), figures beside it;
#                  default docs/results.md, with --quick out/results_quick/results.md.
#                  It is docs/results.md with the regenerated blocks replaced.
#   --runs DIR     the runs' folder (default out/results, with --quick the output's folder/runs);
#                  emptied first unless --reuse
#   --reuse        keep the runs in DIR that finished with the same settings
#   --list         print the table names and exit
# Environment: REMORA (the driver, default build/cli/remora), PYTHON (default /usr/bin/python3).
# Exits 1 when a table failed (the others are still written), 2 on a usage error.
set -euo pipefail
cd "$(dirname "$0")/../.."
source tools/experiments/common.sh

TABLES=(lm hybrids encoders classify copy_official copy_probe copy copy_long regular regular_protocol forecast)
# Minutes a full run of each table takes on a 2-core machine, for the total block when a
# table's measured line states no time (its runs' budgets at the speeds the tables report).
ESTIMATES=(classify=15 copy_probe=2 copy_long=57 regular=30 regular_protocol=60)
SRC=docs/results.md

usage() {
  sed -n '/^# Regenerates/,/^# Exits/p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

quick=0 reuse=0 out="" runs="" only=()
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 ;;
    --reuse) reuse=1 ;;
    --out) [ $# -ge 2 ] || usage; out=$2; shift ;;
    --runs) [ $# -ge 2 ] || usage; runs=$2; shift ;;
    --list) printf '%s\n' "${TABLES[@]}"; exit 0 ;;
    --only)
      while [ $# -ge 2 ] && [ "${2#--}" = "$2" ]; do only+=("$2"); shift; done
      [ ${#only[@]} -gt 0 ] || usage ;;
    -h|--help) usage ;;
    *) echo "results.sh: unknown argument $1" >&2; usage ;;
  esac
  shift
done
for t in "${only[@]}"; do
  [[ " ${TABLES[*]} " == *" $t "* ]] || { echo "results.sh: no table $t (--list names them)" >&2; exit 2; }
done
selected=("${TABLES[@]}")
[ ${#only[@]} -gt 0 ] && selected=("${only[@]}")

if [ -z "$out" ]; then
  out=$SRC
  [ "$quick" = 1 ] && out=out/results_quick/results.md
fi
case "$out" in *.md) ;; *) out=$out/results.md ;; esac
mkdir -p "$(dirname "$out")"
if [ "$quick" = 1 ] && [ "$(realpath "$out")" = "$(realpath "$SRC")" ]; then
  echo "results.sh: --quick writes a copy; give --out a path other than $SRC" >&2
  exit 2
fi
[ -n "$runs" ] || runs=$([ "$quick" = 1 ] && echo "$(dirname "$out")/runs" || echo out/results)
[ -x "$REMORA" ] || { echo "results.sh: no remora driver at $REMORA (build it, or set REMORA)" >&2; exit 2; }

# The runs' folder: results.sh's own (it holds .results_runs), emptied unless --reuse.
if [ -d "$runs" ] && [ -n "$(ls -A "$runs")" ] && [ ! -f "$runs/.results_runs" ]; then
  echo "results.sh: $runs holds other files; give --runs an empty or new folder" >&2
  exit 2
fi
[ "$reuse" = 1 ] || rm -rf "$runs"
mkdir -p "$runs"
touch "$runs/.results_runs"
runs=$(realpath "$runs")
figures=$(realpath "$(dirname "$out")")
[ "$(realpath "$out")" = "$(realpath "$SRC")" ] || cp "$SRC" "$out"

# The machine, as the measured lines state it.
cpu=$(awk -F': *' '/^model name/ {print $2; exit}' /proc/cpuinfo 2>/dev/null || true)
[ -n "$cpu" ] || cpu=$(lscpu 2>/dev/null | awk -F': *' '/^Model name/ {print $2; exit}')
[ -n "$cpu" ] || cpu="unknown CPU"
cpu=$(echo "$cpu" | tr -s ' ' | sed 's/ *$//')
cores=$(nproc --all 2>/dev/null || getconf _NPROCESSORS_ONLN)
virt=""
if lscpu 2>/dev/null | grep -q '^Hypervisor vendor' || grep -qw hypervisor /proc/cpuinfo 2>/dev/null; then
  virt=" (virtual machine)"
fi

# The wall time of each table, summed over the invocations that worked on its runs
# (RUNS/NAME.seconds; with --reuse a stopped table keeps the time it had spent).
current="" prev=0 t0=0
spent() { echo $((prev + SECONDS - t0)); }
trap '[ -z "$current" ] || spent >"$runs/$current.seconds"' EXIT

echo "results.sh: ${selected[*]} -> $out (runs in $runs)"
start=$SECONDS
done_=() kept=() failed=()
for name in "${selected[@]}"; do
  t0=$SECONDS
  prev=$(cat "$runs/$name.seconds" 2>/dev/null || echo 0)
  current=$name
  block=$runs/$name.md
  printf '%-17s' "$name"
  rc=0
  env REMORA="$REMORA" PYTHON="$PYTHON" RUNS="$runs" FIGURES="$figures" QUICK="$quick" \
    bash tools/experiments/evidence.sh "$name" >"$block" 2>"$runs/$name.err" || rc=$?
  seconds=$(spent)
  echo "$seconds" >"$runs/$name.seconds"
  current=""
  if [ "$rc" = 77 ]; then
    echo "kept: $(tail -n 1 "$runs/$name.err")"
    kept+=("$name")
    continue
  elif [ "$rc" != 0 ] || [ ! -s "$block" ]; then
    echo "FAILED (exit $rc):"
    sed 's/^/    /' "$runs/$name.err" | tail -n 20 >&2
    failed+=("$name")
    continue
  fi
  minutes=$(awk -v s="$seconds" 'BEGIN { printf "%.1f", s / 60 }')
  {
    echo
    echo "_Measured on $(date -u +%F), $cores cores, $cpu$virt: $minutes min._"
    if [ "$quick" = 1 ]; then
      echo "_Smoke run (results.sh --quick): a few steps per run, tiny evaluations; the numbers say nothing about the models._"
    fi
  } >>"$block"
  "$PYTHON" tools/experiments/results_doc.py splice "$out" "$name" "$block"
  echo "$((SECONDS - t0)) s"
  done_+=("$name")
done
"$PYTHON" tools/experiments/results_doc.py meta "$out" "${ESTIMATES[@]}"

echo "results.sh: $out in $((SECONDS - start)) s; regenerated: ${done_[*]:-none}; kept: ${kept[*]:-none}; failed: ${failed[*]:-none}"
[ ${#failed[@]} -eq 0 ]
