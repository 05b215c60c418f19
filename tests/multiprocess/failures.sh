#!/usr/bin/env bash
# A process that dies or stalls never hangs the others:
#   failures.sh MP_WORKER MODE ROUNDS [TIMEOUT_MS]
# starts 3 mp_worker processes directly (not under dp-run, which would stop
# the survivors itself) ROUNDS times; each round a random rank kills
# (MODE=kill: SIGKILL) or stops (MODE=stall: SIGSTOP) itself at a random
# step, and the survivors must each report the failure, naming it, within
# the timeout plus 1 s (mp_worker checks that and exits 0). Every wait here
# is bounded; a stopped victim is killed at the end of its round.
set -euo pipefail
worker=$1 mode=$2 rounds=$3 timeout_ms=${4:-3000}
dir=$(mktemp -d "${TMPDIR:-/tmp}/dp-failures-XXXXXX")
pids=()
trap 'kill -KILL "${pids[@]}" 2>/dev/null || true; rm -rf "$dir"' EXIT
RANDOM=$$
for round in $(seq 1 "$rounds"); do
  # From step 1 on: every process is then past the init net (step 0's
  # allreduce needed all of them), so the failure hits a train step.
  victim=$((RANDOM % 3)) step=$((1 + RANDOM % 7))
  pids=()
  for rank in 0 1 2; do
    # Survivors are bounded by their own timeout, and by `timeout` should
    # that fail; the victim is killed below (a stopped one waits for that).
    bound=(timeout -s KILL 60)
    [ "$rank" = "$victim" ] && bound=()
    DP_RANK=$rank DP_WORLD_SIZE=3 DP_STORE="file://$dir/store" DP_RUN_ID="round-$round" DP_TIMEOUT_MS=$timeout_ms \
      "${bound[@]}" "$worker" "$mode" --victim "$victim" --step "$step" --steps 10 >"$dir/out.$rank" 2>&1 &
    pids+=($!)
  done
  for rank in 0 1 2; do
    [ "$rank" = "$victim" ] && continue
    status=0
    wait "${pids[$rank]}" || status=$?
    if [ "$status" != 0 ]; then
      echo "round $round ($mode rank $victim at step $step): survivor rank $rank exited $status"
      for r in 0 1 2; do echo "--- rank $r:"; cat "$dir/out.$r"; done
      kill -KILL "${pids[$victim]}" 2>/dev/null || true
      exit 1
    fi
    grep "failed after" "$dir/out.$rank" | sed "s/^/round $round: /"
  done
  kill -KILL "${pids[$victim]}" 2>/dev/null || true
  status=0
  wait "${pids[$victim]}" || status=$?
  if [ "$status" != 137 ]; then
    echo "round $round: the victim rank $victim ended with $status, not by SIGKILL"
    cat "$dir/out.$victim"
    exit 1
  fi
done
echo "failures.sh: $rounds rounds of $mode passed"
