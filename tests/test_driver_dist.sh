#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# test_driver_dist.sh CASE REMORA COMPARE SRC MPIRUN...: `remora train` under
# mpirun -np 2 (docs/distributed.md). CASE:
#   equiv_xl | equiv_bert | equiv_srupp: 20 steps, dropout 0, 2 ranks x half the
#       batch against 1 process x the whole batch: every loss in metrics.jsonl,
#       the validation metrics and every tensor of last.safetensors to 1e-5 relative;
#   equiv_accum: the same for Transformer-XL with train.gradient_accumulation_steps=3
#       (the ranks reduce their gradients once per step, after 3 micro-batches);
#   np1: mpirun -np 1 is bit-identical to a plain run (dropout 0.1);
#   resume: a 2-rank run (dropout 0.1) stopped at step 10 (--until) and resumed is
#       bit-identical to an uninterrupted 2-rank run (metrics and last.safetensors);
#   reshard: a one-process checkpoint resumed by 2 ranks continues the same run (1e-5);
#   batch: a batch that does not divide among the ranks is an error that says so;
#   kill: rank 1 killed (SIGKILL) mid-run: the job ends non-zero within the bound,
#       and the last checkpoint is intact (remora eval loads it);
#   config: the ranks disagree on the config: an error naming rank 1, within the bound.
set -u
case_=$1; remora=$2; compare=$3; src=$4; shift 4
mpirun=("$@")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
bound=60  # seconds for a fault to end the job

# Tiny models, dropout 0, a loss logged at every step, evaluation at 10 and 20.
common=(--set data.seq_len=16 --set data.batch_size=4 --set data.eval_batch_size=4
        --set train.steps=20 --set train.log_every=1 --set train.eval_every=10 --set train.eval_batches=2
        --set train.threads=1 --set model.dropout=0 --set model.dropatt=0)
xl=("$src/configs/xl.json" "${common[@]}" --set model.n_layer=2 --set model.d_model=32 --set model.n_head=2
    --set model.d_inner=64 --set model.mem_len=16)
# BERT with SGD: its attention key biases have a gradient that is 0 in exact
# arithmetic (softmax ignores a shift common to all keys), so Adam would scale
# their pure rounding noise up to lr-sized steps that differ between any two
# summation orders; SGD keeps that noise at rounding size.
bert=("$src/configs/bert.json" "${common[@]}" --set model.n_layer=2 --set model.d_model=32 --set model.n_head=2
      --set model.d_inner=64 --set train.optimizer.type=sgd --set train.optimizer.lr=0.1
      --set train.optimizer.momentum=0.9 --set train.optimizer.weight_decay=0)
srupp=("$src/configs/srupp.json" "${common[@]}" --set model.n_layer=2 --set model.d_model=32
       --set model.d_attn=16 --set model.mem_len=16)
accum=("${xl[@]}" --set train.gradient_accumulation_steps=3)

run1() { "$remora" train "$@" >"$work/log1" 2>&1 || { cat "$work/log1"; fail "1-process run failed"; }; }
run2() { "${mpirun[@]}" -np 2 "$remora" train "$@" >"$work/log2" 2>&1 || { cat "$work/log2"; fail "2-rank run failed"; }; }

case "$case_" in
  equiv_xl | equiv_bert | equiv_srupp | equiv_accum)
    m=${case_#equiv_}
    declare -n cfg=$m
    run1 "${cfg[@]}" --out "$work/one"
    run2 "${cfg[@]}" --out "$work/two"
    cat "$work/log2"
    grep -q "data parallel: 2 ranks x 2 rows of the global batch 4" "$work/log2" || fail "not data-parallel"
    "$compare" "$work/one" "$work/two" 1e-5 || fail "2 ranks x half the batch differ from 1 process x the batch"
    ;;
  np1)
    # mpirun -np 1 takes the one-process path: bit-identical, dropout included.
    run1 "${xl[@]}" --set model.dropout=0.1 --out "$work/plain"
    "${mpirun[@]}" -np 1 "$remora" train "${xl[@]}" --set model.dropout=0.1 --out "$work/np1" >"$work/log" 2>&1 ||
      { cat "$work/log"; fail "mpirun -np 1 failed"; }
    "$compare" "$work/plain" "$work/np1" 0 || fail "mpirun -np 1 differs from a plain run"
    ;;
  resume)
    # With dropout: every rank's own mask stream must be restored too.
    xl+=(--set model.dropout=0.1)
    run2 "${xl[@]}" --out "$work/full"
    run2 "${xl[@]}" --out "$work/split" --until 10
    run2 "${xl[@]}" --out "$work/split" --resume
    grep -q "resumed from .* at step 10" "$work/log2" || { cat "$work/log2"; fail "did not resume at step 10"; }
    "$compare" "$work/full" "$work/split" 0 || fail "the resumed 2-rank run is not bit-identical"
    ;;
  reshard)
    # A one-process checkpoint at step 10 resumed by 2 ranks: the same training
    # (to float summation order) as the uninterrupted one-process run.
    run1 "${xl[@]}" --out "$work/one"
    run1 "${xl[@]}" --out "$work/re" --until 10
    run2 "${xl[@]}" --out "$work/re" --resume
    cat "$work/log2"
    grep -q "written by 1 process(es), resuming with 2: the data is re-sharded" "$work/log2" || fail "no re-shard note"
    "$compare" "$work/one" "$work/re" 1e-5 || fail "the re-sharded run differs"
    ;;
  batch)
    "${mpirun[@]}" -np 2 "$remora" train "${xl[@]}" --set data.batch_size=3 --out "$work/b" >"$work/log" 2>&1
    rc=$?
    cat "$work/log"
    [ "$rc" -ne 0 ] || fail "a batch of 3 on 2 ranks was accepted"
    grep -q "data.batch_size 3 does not divide among 2 ranks" "$work/log" || fail "no message about the batch"
    ;;
  kill)
    # A long run with a checkpoint every 5 steps; kill rank 1 once one exists.
    start=$(now_ms)
    "${mpirun[@]}" -np 2 "$remora" train "${xl[@]}" --set train.steps=100000 --set train.eval_every=5 \
        --out "$work/k" >"$work/log" 2>&1 &
    job=$!
    for _ in $(seq 600); do [ -f "$work/k/last.safetensors" ] && break; sleep 0.2; done
    [ -f "$work/k/last.safetensors" ] || { kill "$job"; cat "$work/log"; fail "no checkpoint appeared"; }
    victim=""
    for p in $(pgrep -P "$job") $(pgrep -P "$(pgrep -P "$job" | tr '\n' ',' | sed 's/,$//')" 2>/dev/null); do
      if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=1"; then victim=$p; fi
    done
    [ -n "$victim" ] || { kill "$job"; fail "rank 1's process not found"; }
    sleep 1
    killed=$(now_ms)
    kill -9 "$victim"
    # The job must end by itself within the bound.
    for _ in $(seq $((bound * 10))); do kill -0 "$job" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$job" 2>/dev/null; then kill -9 "$job"; cat "$work/log"; fail "the job still runs ${bound}s after rank 1 died"; fi
    wait "$job"; rc=$?
    ms=$(( $(now_ms) - killed ))
    cat "$work/log"
    echo "rank 1 (pid $victim) killed; the job ended with exit code $rc after $((ms / 1000)).$(printf %03d $((ms % 1000)))s"
    [ "$rc" -ne 0 ] || fail "the job exited 0"
    (( ms < bound * 1000 )) || fail "over the ${bound}s bound"
    grep -q "rank 1" "$work/log" || fail "the output does not name rank 1"
    pgrep -f "$work/k" >/dev/null && fail "a rank survived"
    "$remora" eval "${xl[@]}" --checkpoint "$work/k/last.safetensors" >"$work/eval" 2>&1 || { cat "$work/eval"; fail "the last checkpoint does not load"; }
    cat "$work/eval"
    ;;
  config)
    start=$(now_ms)
    timeout -k 5 $((bound * 3)) "${mpirun[@]}" -np 2 bash -c \
      'exec "$0" "$@" --set seed=$((1 + OMPI_COMM_WORLD_RANK))' "$remora" train "${xl[@]}" --out "$work/c" >"$work/log" 2>&1
    rc=$?
    ms=$(( $(now_ms) - start ))
    cat "$work/log"
    echo "exit code $rc after $((ms / 1000)).$(printf %03d $((ms % 1000)))s (bound ${bound}s)"
    [ "$rc" -ne 0 ] || fail "ranks with different configs trained"
    [ "$rc" -ne 124 ] || fail "the job hung"
    (( ms < bound * 1000 )) || fail "over the bound"
    grep -q "differ between ranks" "$work/log" || fail "no mismatch message"
    grep -q "rank 1" "$work/log" || fail "the message does not name rank 1"
    [ -f "$work/c/last.safetensors" ] && fail "a checkpoint was written"
    ;;
  *) fail "unknown case $case_" ;;
esac
echo "PASS"
