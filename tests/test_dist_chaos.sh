#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# test_dist_chaos.sh CASE HELPER REMORA SRC MPIRUN...: one fault in a 2-rank job
# (mpirun -np 2), which must end within its bound (the configured timeout plus
# a small margin) with a non-zero exit code, no rank left running, and a
# message naming the faulty rank where the surviving rank can know it.
#
# HELPER is remora_dist_fault (tests/test_dist_fault.cpp: collective timeout
# 4 s, evaluation timeout 6 s), REMORA the driver (`remora train` on a tiny
# Transformer-XL with train.distributed.timeout_s=4, eval_timeout_s=6). Faults
# are injected with REMORA_TEST_FAULT (dist.h: fault_point) or signals. CASE
# (R = the faulty rank, 0 or 1):
#   step_stop_rR | step_stall_rR   helper: rank R stops (SIGSTOP) / stalls
#                                  (alive, busy) at step 50 -> "rank R did not reach"
#   step_kill_rR | step_exit_rR    helper: rank R is killed (SIGKILL) / exits 3
#   nostart_rR                     helper: rank R never reaches MPI_Init; the
#                                  other rank's launch watchdog ends the job
#   eval_stall_rR | eval_stop_rR   helper: rank R stalls / stops in the
#                                  evaluation (rank 0 evaluating, rank 1 waiting)
#   abort_r1 | error_r1 | config   helper: abort(), a remora::Error, different configs
#   driver_stop_rR                 `remora train`: rank R stopped (SIGSTOP) mid-run
#   driver_kill_r0                 `remora train`: rank 0 killed (SIGKILL) mid-run
#   driver_nostart_rR              `remora train`: rank R never reaches MPI_Init
#   driver_eval_rR                 `remora train`: rank R stalls in the evaluation
#   driver_evalauto_r0             the same for rank 0 with eval_timeout_s left
#                                  to its default, derived: T * (eval_batches + 1)
#   all                            every case above but those in $CHAOS_SKIP (none by default),
#                                  one after the other, with a table of how long
#                                  each job took
# The bound counts from the fault: the fault injection's line in the output
# (REMORA_TEST_FAULT) or the signal.
#
# In driver_eval_rR the other ranks wait for rank 0's evaluation at most
# train.distributed.eval_timeout_s (dist::wait_for_rank in the Trainer), and
# say while they wait that they wait for rank 0.
set -u
case_=$1; helper=$2; remora=$3; src=$4; shift 4
mpirun=("$@")
T=4 E=6 grace=1  # the timeouts the helper and the driver runs use; grace: dist::grace_seconds(T or E)
margin=4         # launch and teardown (mpirun, 2 ranks on 2 busy cores)

if [ "$case_" = all ]; then
  cases=(config abort_r1 error_r1)
  for r in 0 1; do
    cases+=(step_stop_r$r step_stall_r$r step_kill_r$r step_exit_r$r nostart_r$r eval_stall_r$r eval_stop_r$r
            driver_stop_r$r driver_nostart_r$r driver_eval_r$r)
  done
  cases+=(driver_kill_r0 driver_evalauto_r0)
  summary=() failed=0
  for c in "${cases[@]}"; do
    [[ " ${CHAOS_SKIP-} " == *" $c "* ]] && { summary+=("SKIP  $c"); continue; }
    out=$(bash "$0" "$c" "$helper" "$remora" "$src" "${mpirun[@]}" 2>&1)
    rc=$?
    line=$(grep -E "^chaos " <<<"$out" | tail -1)
    [ $rc -eq 0 ] || { echo "$out"; failed=1; }
    summary+=("$([ $rc -eq 0 ] && echo PASS || echo FAIL)  $c: ${line#chaos }")
  done
  printf '%s\n' "${summary[@]}"
  exit $failed
fi

work=$(mktemp -d)
token="remora-chaos-$$-$RANDOM"  # in every rank's environment, to find the ranks
trap 'rm -rf "$work"' EXIT
fail() {
  echo "FAIL ($case_): $*"
  local p
  for p in $(leftovers); do kill -CONT "$p" 2>/dev/null; kill -9 "$p" 2>/dev/null; done
  exit 1
}
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
secs() { echo "$(($1 / 1000)).$(printf %03d $(($1 % 1000)))"; }

# Processes whose environment holds the token and the rank's OMPI_COMM_WORLD_RANK.
rank_pid() {
  local p
  for p in /proc/[0-9]*; do
    tr '\0' '\n' 2>/dev/null <"$p/environ" | grep -qx "REMORA_CHAOS_TOKEN=$token" || continue
    tr '\0' '\n' 2>/dev/null <"$p/environ" | grep -qx "OMPI_COMM_WORLD_RANK=$1" && { echo "${p#/proc/}"; return; }
  done
}
leftovers() {
  local p
  for p in /proc/[0-9]*; do
    [ "${p#/proc/}" = $$ ] && continue
    tr '\0' '\n' 2>/dev/null <"$p/environ" | grep -qx "OMPI_COMM_WORLD_RANK=[0-9]*" || continue
    tr '\0' '\n' 2>/dev/null <"$p/environ" | grep -qx "REMORA_CHAOS_TOKEN=$token" && echo "${p#/proc/}"
  done
}

fault_env=""   # REMORA_TEST_FAULT for the job
signal=""      # or a signal sent to rank $rank once the job runs
rank=${case_##*_r}
[[ "$rank" =~ ^[01]$ ]] || rank=1
other=$((1 - rank))
expect=()      # regular expressions the output must contain
kind=helper
args=(run)
bound=$((T + margin))
case "$case_" in
  step_stop_r? | step_stall_r?)
    a=${case_#step_}; fault_env="$rank:step:${a%_r?}"; bound=$((T + grace + margin))
    # While it waits, the other rank names the one it waits for (an ask, as at the timeout).
    expect=("rank $other of 2: MPI_Iallreduce \(collective [0-9]+\) did not complete within $T s" "rank $rank did not reach it"
            "rank $other of 2: waiting [0-9.]+ s \(at most $T s\) in MPI_Iallreduce \(collective [0-9]+\): rank $rank did not reach it") ;;
  step_kill_r?)
    fault_env="$rank:step:kill"; expect=("process rank $rank with PID [0-9]+ .*(signal 9|Killed)") ;;
  step_exit_r?)
    fault_env="$rank:step:exit"; expect=("Process name: \[\[[0-9]+,[0-9]+\],$rank\]" "Exit code: *3") ;;
  nostart_r?)
    # The surviving rank cannot know which rank is missing (MPI is not up yet):
    # its message says what it waited for.
    fault_env="$rank:init:stall"
    expect=("dist: rank $other of 2 \(as launched\): MPI_Init_thread did not complete within $T s") ;;
  eval_stall_r? | eval_stop_r?)
    # Rank 1 waits for rank 0's evaluation at most E; rank 0 then waits for the
    # others at most T (dist::wait_for_rank).
    a=${case_#eval_}; fault_env="$rank:evaluation:${a%_r?}"; bound=$((E + grace + margin))
    expect=("rank $other of 2: barrier 'evaluation and checkpoint' \(collective [0-9]+\) did not complete within $([ $rank = 0 ] && echo $E || echo $T) s"
            "rank $rank did not reach it")
    [ $rank = 0 ] && expect+=("rank 1 of 2: waiting [0-9.]+ s \(at most $E s\) in barrier 'evaluation and checkpoint' \(collective [0-9]+\): for rank 0") ;;
  abort_r1) args=(abort 1); expect=("process rank 1 with PID [0-9]+ .*signal 6") ;;
  error_r1) args=(error 1); expect=("rank 1 hit an error") ;;
  config) args=(config); expect=("configurations differ between ranks" "differing from rank 0: rank 1") ;;
  driver_*)
    kind=driver
    bound=$((T + grace + margin))
    case "$case_" in
      driver_stop_r?) signal=STOP; expect=("did not complete within $T s" "rank $rank did not reach it") ;;
      driver_kill_r?) signal=KILL; expect=("process rank $rank with PID [0-9]+ .*(signal 9|Killed)") ;;
      driver_nostart_r?) fault_env="$rank:init:stall"; bound=$((T + margin))
        expect=("dist: rank $other of 2 \(as launched\): MPI_Init_thread did not complete within $T s") ;;
      driver_eval_r?) fault_env="$rank:barrier:stall"; bound=$((E + grace + margin))
        expect=("did not complete within ($T|$E) s" "rank $rank did not reach it")
        [ $rank = 0 ] && expect+=("rank 1 of 2: waiting [0-9.]+ s \(at most $E s\) in barrier 'evaluation and checkpoint' \(collective [0-9]+\): for rank 0") ;;
      driver_evalauto_r0) fault_env="0:barrier:stall"; D=$((T * (2 + 1))); bound=$((D + 2 + margin))
        expect=("rank 1 of 2: barrier 'evaluation and checkpoint' \(collective [0-9]+\) did not complete within $D s"
                "rank 0 did not reach it"
                "rank 1 of 2: waiting [0-9.]+ s \(at most $D s\) in barrier 'evaluation and checkpoint' \(collective [0-9]+\): for rank 0") ;;
      *) fail "unknown case" ;;
    esac ;;
  *) fail "unknown case" ;;
esac

if [ $kind = helper ]; then
  cmd=("$helper" "${args[@]}")
else
  # Evaluation (and so the barrier) at step 5 for driver_eval, never otherwise.
  every=100000
  [[ "$case_" == driver_eval* ]] && every=5
  eval_bound=(--set train.distributed.eval_timeout_s=$E)
  [ "$case_" = driver_evalauto_r0 ] && eval_bound=()  # the derived default
  cmd=("$remora" train "$src/configs/xl.json" --set data.seq_len=16 --set data.batch_size=4
       --set data.eval_batch_size=4 --set train.steps=100000 --set train.log_every=1 --set train.eval_every=$every
       --set train.eval_batches=2 --set train.threads=1 --set model.n_layer=2 --set model.d_model=32
       --set model.n_head=2 --set model.d_inner=64 --set model.mem_len=16
       --set train.distributed.timeout_s=$T "${eval_bound[@]}" --out "$work/run")
fi

export REMORA_CHAOS_TOKEN=$token
xs=(-x REMORA_CHAOS_TOKEN)
if [ -n "$fault_env" ]; then export REMORA_TEST_FAULT=$fault_env; xs+=(-x REMORA_TEST_FAULT); fi
start=$(now_ms)
timeout -k 5 $((bound * 3)) "${mpirun[@]}" "${xs[@]}" -np 2 "${cmd[@]}" >"$work/log" 2>&1 &
job=$!
from=$start  # the moment the bound counts from: the start, or the signal
if [ -n "$signal" ]; then
  # Mid-run: once the driver has logged a few steps.
  for _ in $(seq 600); do
    [ "$(wc -l 2>/dev/null <"$work/run/metrics.jsonl" || echo 0)" -ge 3 ] && break
    kill -0 $job 2>/dev/null || break
    sleep 0.1
  done
  victim=$(rank_pid "$rank")
  [ -n "$victim" ] || { kill $job; wait $job; cat "$work/log"; fail "rank $rank's process not found"; }
  from=$(now_ms)
  kill -$signal "$victim"
  echo "sent SIG$signal to rank $rank (pid $victim)"
fi
# Wait for the job, noting when the fault injection happens (its line).
while kill -0 $job 2>/dev/null; do
  if [ $from = $start ] && [ -n "$fault_env" ] && grep -q "fault injection (REMORA_TEST_FAULT)" "$work/log"; then
    from=$(now_ms)
  fi
  sleep 0.05
done
wait $job
rc=$?
end=$(now_ms)
ms=$((end - from))
cat "$work/log"
echo "chaos $case_: exit code $rc after $(secs $ms)s (bound ${bound}s$([ $from != $start ] && echo ", from the fault; $(secs $((end - start)))s in all"))"
[ "$rc" -ne 0 ] || fail "the job exited 0"
[ "$rc" -ne 124 ] || fail "the job hung (stopped by timeout)"
(( ms < bound * 1000 )) || fail "the job took $(secs $ms)s, over the ${bound}s bound"
grep -q SURVIVED "$work/log" && fail "a rank survived"
for e in "${expect[@]}"; do grep -Eq -- "$e" "$work/log" || fail "the output has no line matching: $e"; done
left=""
for _ in $(seq 20); do left=$(leftovers); [ -z "$left" ] && break; sleep 0.25; done
if [ -n "$left" ]; then
  for p in $left; do kill -CONT "$p" 2>/dev/null; kill -9 "$p" 2>/dev/null; done
  fail "processes of the job still run after it ended: $left"
fi
echo "PASS"
