#!/usr/bin/env bash
# Two CPU replicas' layouts against one device, by where the two CPUs sit:
# bench/train_step (the engine's step alone) on one device, on
# --devices 2 with a copy of the model each, and with one shared model,
# each iteration between two bench/core_pair_probe runs (whether CPUs 0 and
# 1 share a last-level cache). The 2-vCPU cloud VMs move their vCPUs
# between placements that do and do not, minutes apart (bench/README.md),
# so the script runs for a time and sorts the iterations by placement,
# keeping those whose two probes agree; DP_SHARED_MODEL_AUTO should pick the
# faster layout in each.
#
#   bench/run_layout_bench.sh [--build DIR] [--seconds S] [--batches "64 256"] [--compare DIR]
#
# --compare DIR also runs DIR's train_step with a copy each (another build's
# copies, before a change). Prints each iteration, then per placement and
# batch the median step (ms) of each and its ratio to one device.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
build="$root/build"
seconds=420
batches="64 256"
compare=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build=$(cd "$2" && pwd); shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --batches) batches=$2; shift 2 ;;
    --compare) compare=$(cd "$2" && pwd); shift 2 ;;
    *) echo "usage: $0 [--build DIR] [--seconds S] [--batches LIST] [--compare DIR]" >&2; exit 2 ;;
  esac
done
step="$build/bench/train_step"
probe_exe="$build/bench/core_pair_probe"
model="$root/samples/nets/fashion_mlp.json"
for exe in "$step" "$probe_exe" ${compare:+"$compare/bench/train_step"}; do
  [[ -x "$exe" ]] || { echo "error: $exe not found; build it: ninja -C $build" >&2; exit 1; }
done
# shellcheck source=bench/bench_lib.sh
source "$here/bench_lib.sh"
read -r -a bs <<<"$batches"

probe() { "$probe_exe" 0 1 | grep -o "shared_cache=[a-z]*" | cut -d= -f2; }
ms() { taskset -c 0,1 "$@" --model "$model" --steps 300 --warmup 30 | field median_ms; }

machine_header
echo "# dp $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?'); reproduce: bench/run_layout_bench.sh --build $build --seconds $seconds --batches \"$batches\"${compare:+ --compare $compare}"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
end=$((SECONDS + seconds))
while ((SECONDS < end)); do
  for b in "${bs[@]}"; do
    before=$(probe)
    line="b$b one=$(ms "$step" --batch "$b") copies=$(ms "$step" --batch "$b" --devices 2)"
    line+=" shared=$(ms "$step" --batch "$b" --devices 2 --shared-model)"
    [[ -n $compare ]] && line+=" copies_compared=$(ms "$compare/bench/train_step" --batch "$b" --devices 2)"
    after=$(probe)
    echo "$before $after $line" | tee -a "$log"
  done
done

echo
echo "medians by placement (both probes agreeing), ms a step, and one device / each:"
python3 - "$log" <<'PY'
import re, statistics, sys
groups = {}
for line in open(sys.argv[1]):
    parts = line.split()
    if len(parts) < 4 or parts[0] != parts[1]:
        continue
    groups.setdefault((parts[0], parts[2]), []).append(dict(re.findall(r"(\w+)=([0-9.]+)", line)))
for (placement, batch), runs in sorted(groups.items()):
    keys = [k for k in runs[0] if k != "one"]
    med = lambda k: statistics.median(float(r[k]) for r in runs)
    ratio = lambda k: statistics.median(float(r["one"]) / float(r[k]) for r in runs)
    cells = "  ".join(f"{k} {med(k):.3f} ({ratio(k):.2f})" for k in keys)
    print(f"  shared cache {placement:3} batch {batch[1:]:>4}, {len(runs)} runs: one {med('one'):.3f}  {cells}")
PY
