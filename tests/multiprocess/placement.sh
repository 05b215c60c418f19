#!/usr/bin/env bash
# dp-run's placement of the processes of one host (tools/dp_run, core/cpu_plan):
# with at least as many CPUs as processes each rank is bound to its own CPUs,
# as many for every rank, disjoint, inside dp-run's mask; with fewer (or
# --no-bind) every rank keeps dp-run's whole mask. Every rank sees
# DP_LOCAL_RANK and DP_LOCAL_WORLD_SIZE.
#
#   placement.sh DP_RUN
set -euo pipefail
dp_run=$1

# Each rank prints its mask and local rank; the checks parse dp-run's
# "[rank R] ..." lines.
report='echo "mask $(grep Cpus_allowed_list /proc/self/status | cut -f2) local $DP_LOCAL_RANK/$DP_LOCAL_WORLD_SIZE"'
check() {  # N MODE OUTPUT: MODE bound (disjoint equal shares) or whole (everyone has the mask)
  python3 - "$1" "$2" "$3" <<'PY'
import os, re, sys
n, mode, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
def cpus(text):
    s = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        s.update(range(int(lo), int(hi or lo) + 1))
    return s
mine = set(os.sched_getaffinity(0))
# What dp-run may use: the mask, capped by a cgroup v2 CPU quota (dp's
# budget; core/cpu_budget).
budget = len(mine)
try:
    group = next(l.split("::", 1)[1].strip() for l in open("/proc/self/cgroup") if l.startswith("0::"))
    quota, period = open(f"/sys/fs/cgroup{group}/cpu.max").read().split()
    if quota != "max":
        budget = min(budget, max(1, -(-int(quota) // int(period))))
except (OSError, StopIteration, ValueError):
    pass
ranks = {}
for line in out.splitlines():
    m = re.match(r"\[rank (\d+)\] mask (\S+) local (\d+)/(\d+)$", line)
    if m:
        r = int(m[1])
        assert int(m[3]) == r and int(m[4]) == n, f"rank {r}: local rank/world {m[3]}/{m[4]}, want {r}/{n}"
        ranks[r] = cpus(m[2])
assert sorted(ranks) == list(range(n)), f"ranks reported: {sorted(ranks)}\n{out}"
if mode == "whole":
    for r, s in ranks.items():
        assert s == mine, f"rank {r} bound to {sorted(s)}, want the whole mask {sorted(mine)}"
else:
    seen = set()
    for r, s in ranks.items():
        assert s and s <= mine, f"rank {r}: {sorted(s)} not inside {sorted(mine)}"
        assert not (s & seen), f"rank {r}: {sorted(s)} overlaps another rank's CPUs"
        assert len(s) == budget // n, f"rank {r}: {len(s)} CPUs, want {budget // n}"
        seen |= s
print(f"placement: {n} processes, {mode}: " + "; ".join(f"rank {r} {sorted(s)}" for r, s in sorted(ranks.items())))
PY
}

ncpu=$(python3 -c 'import os; print(len(os.sched_getaffinity(0)))')
for n in 1 2 3; do
  ((n <= ncpu)) || continue
  mode=bound
  ((n == 1)) && mode=whole  # one process: nothing to divide
  check "$n" "$mode" "$("$dp_run" -n "$n" -- sh -c "$report")"
done
more=$((ncpu + 1))
check "$more" whole "$("$dp_run" -n "$more" -- sh -c "$report")"
check 2 whole "$("$dp_run" -n 2 --no-bind -- sh -c "$report")"
echo "placement: ok"
