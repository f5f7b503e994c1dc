#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# tools/bench/bench_dist.sh [BUILD_DIR] [STEPS] [CONFIG]: data-parallel training
# throughput of `remora train` at np = 1 and np = 2 (one thread per rank),
# the scaling efficiency, and the all-reduce bandwidth MPI achieves in the
# same run (remora_bench_dist), as a markdown table (docs/benchmarks.md).
#
#   nice -n 19 tools/bench/bench_dist.sh build 60 configs/default.json
#
# Training tokens/s are the global batch's tokens per second of the logged
# windows after the first (which includes start-up); np = 1 is a plain run
# (no mpirun), np = 2 is `mpirun -np 2` with the same global batch. Run under
# tools/bench/record.py (record.py dist -- tools/bench/bench_dist.sh ...), the two
# training rows are recorded with the machine, date and commit.
set -eu
build=${1:-build}
steps=${2:-60}
config=${3:-configs/default.json}
remora=$build/cli/remora
bench=$build/distributed/remora_bench_dist
[ -x "$remora" ] || { echo "no $remora (build first)"; exit 2; }
[ -x "$bench" ] || { echo "no $bench (build first)"; exit 2; }
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
       OMPI_MCA_btl_vader_single_copy_mechanism=none
mpirun=(mpirun --allow-run-as-root --oversubscribe)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
log_every=10
sets=(--set train.steps="$steps" --set train.log_every=$log_every --set train.eval_every=0
      --set train.eval_batches=1 --set train.threads=1)

# Mean tokens/s over the train lines after the first window.
tok_s() {
  python3 - "$1" <<'EOF'
import json, sys
xs = [json.loads(l) for l in open(sys.argv[1])]
t = [x["tokens_per_s"] for x in xs if x.get("split") == "train"][1:]
print(f"{sum(t) / len(t):.1f}")
EOF
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
"$remora" train "$config" "${sets[@]}" --out "$work/np1" 2>"$work/np1.log"
"${mpirun[@]}" -np 2 "$remora" train "$config" "${sets[@]}" --out "$work/np2" 2>"$work/np2.log"
t1=$(tok_s "$work/np1/metrics.jsonl")
t2=$(tok_s "$work/np2/metrics.jsonl")
"${mpirun[@]}" -np 2 "$bench" >"$work/bench.txt" 2>&1
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
batch=$(python3 -c "import json; print(json.load(open('$work/np1/config.json'))['data']['batch_size'])")
seq=$(python3 -c "import json; print(json.load(open('$work/np1/config.json'))['data']['seq_len'])")
tokens=$((batch * seq))
params=$(grep -o '[0-9]* parameters' "$work/np1.log" | head -1)

echo "config $config ($params), global batch $tokens tokens/step, $steps steps, OMP_NUM_THREADS=1"
echo "machine: $(getconf _NPROCESSORS_ONLN) cores; load average before $load_before, after $load_after"
echo
echo "| ranks | rows / rank | training tokens/s | ms / step | speed-up | scaling efficiency |"
echo "|---:|---:|---:|---:|---:|---:|"
python3 - "$t1" "$t2" "$tokens" "$batch" "$config" "$steps" "$load_before" "$load_after" <<'EOF'
import json, os, sys
t1, t2, tok, batch = float(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
rows = os.environ.get("REMORA_BENCH_ROWS")
for n, t in ((1, t1), (2, t2)):
    print(f"| {n} | {batch // n} | {t:,.0f} | {tok / t * 1000:,.1f} | {t / t1:.2f} | {t / t1 / n * 100:.0f} % |")
    if rows:
        with open(rows, "a") as f:
            f.write(json.dumps({"config": sys.argv[5], "steps": int(sys.argv[6]), "ranks": n,
                                "rows_per_rank": batch // n, "tokens_per_s": round(t, 1),
                                "ms_per_step": round(tok / t * 1000, 1), "speedup": round(t / t1, 3),
                                "load_before": float(sys.argv[7].split()[0]),
                                "load_after": float(sys.argv[8].split()[0])}) + "\n")
EOF
echo
echo "all-reduce in the same run (mpirun -np 2 remora_bench_dist):"
echo
cat "$work/bench.txt"
# The all-reduce rows, recorded beside the training rows (see record.py).
python3 - "$work/bench.txt" <<'EOF'
import json, os, sys
rows = os.environ.get("REMORA_BENCH_ROWS")
for line in open(sys.argv[1]) if rows else []:
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if len(cells) == 6 and cells[1].isdigit():
        with open(rows, "a") as f:
            f.write(json.dumps({"allreduce": cells[0], "values": int(cells[1]), "bytes": int(cells[2]),
                                "time_us": float(cells[3]),
                                "busbw_gbs": None if cells[5].startswith("-") else float(cells[5])}) + "\n")
EOF
