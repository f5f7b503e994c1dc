#!/usr/bin/env bash
# test_dist_fault.sh BOUND MODE CMD...: runs CMD (mpirun -np 2 remora_dist_fault
# MODE), and passes when the whole job ends within BOUND seconds with a non-zero
# exit code, no rank survived, and the output names rank 1 (the faulty one).
set -u
bound=$1; mode=$2; shift 2
out=$(mktemp)
start=$(date +%s%N)
timeout -k 5 $((bound * 3)) "$@" >"$out" 2>&1
rc=$?
ms=$(( ($(date +%s%N) - start) / 1000000 ))
elapsed=$((ms / 1000)).$(printf %03d $((ms % 1000)))
cat "$out"
echo "dist fault '$mode': exit code $rc after ${elapsed}s (bound ${bound}s)"
fail() { echo "FAIL: $*"; rm -f "$out"; exit 1; }
[ "$rc" -ne 0 ] || fail "the job exited 0"
# 124: timeout stopped it (137 is also mpirun's code for a rank killed by SIGKILL;
# a timeout's own SIGKILL comes after 3x the bound, which the time check catches).
[ "$rc" -ne 124 ] || fail "the job hung (stopped by timeout)"
(( ms < bound * 1000 )) || fail "the job took ${elapsed}s, over the ${bound}s bound"
grep -q SURVIVED "$out" && fail "a rank survived"
case "$mode" in
  config) grep -q "configurations differ between ranks" "$out" || fail "no configuration mismatch message"
          grep -q "differing from rank 0: rank 1" "$out" || fail "the message does not name rank 1" ;;
  error)  grep -q "rank 1 hit an error" "$out" || fail "rank 1's error is not shown" ;;
  stall)  grep -q "rank 0 of 2: MPI_Iallreduce did not complete within 3 s" "$out" || fail "rank 0 did not time out" ;;
  *)      grep -q "rank 1 of 2: failing now" "$out" || fail "rank 1 did not reach the fault" ;;
esac
rm -f "$out"
echo "PASS"
