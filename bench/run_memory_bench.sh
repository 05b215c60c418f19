#!/usr/bin/env bash
# Memory planning (docs/MEMORY.md): the training step's memory and time with
# each memory mode, bench/train_step through the public C API, default
# settings otherwise. For each case (model, batch, devices) and round, the
# three modes run back to back (interleaved), so the time ratios compare
# runs seconds apart. Memory: step_bytes = the workspace's peak on the host
# during the last step less what the init net left (params and optimizer
# state): what activations, gradients and op scratch took at most, from the
# allocator's counts (dp_net_memory_stats), not estimates. The cases of two
# replicas also run zero and zero_free: share and free with the optimizer
# state sharded over the replicas (ZeRO-1), compared by working memory: the
# peak less the replicas' params (activations, gradients, optimizer state).
#
#   bench/run_memory_bench.sh [--build DIR] [--rounds N] [--steps N]
#
# Prints each run, then per case: the median step (ms) and step memory (MiB)
# of each mode, and share and free as ratios of keep (memory, time); then,
# for two replicas, working memory (MiB) of keep, share, zero and zero_free,
# the zero modes' against keep's, and their times against share's and free's.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
build="$root/build"
rounds=3
steps=150
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build=$(cd "$2" && pwd); shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    *) echo "usage: $0 [--build DIR] [--rounds N] [--steps N]" >&2; exit 2 ;;
  esac
done
step="$build/bench/train_step"
[[ -x "$step" ]] || { echo "error: $step not found; build it: ninja -C $build" >&2; exit 1; }
# shellcheck source=bench/bench_lib.sh
source "$here/bench_lib.sh"
nets="$root/samples/nets"
# model batch devices (0: one device, the simple executor; 2: two CPU
# replicas, the async executor)
cases=("fashion_cnn 64 0" "fashion_cnn 64 2" "fashion_mlp 64 0" "fashion_mlp 256 0" "fashion_mlp 256 2")

machine_header
echo "# dp $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?'); reproduce: bench/run_memory_bench.sh --build $build --rounds $rounds --steps $steps"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for ((r = 1; r <= rounds; ++r)); do
  for c in "${cases[@]}"; do
    read -r model batch devices <<<"$c"
    dev=()
    ((devices > 0)) && dev=(--devices "$devices")
    modes=(keep share free)
    ((devices > 1)) && modes+=(zero zero_free)
    for mode in "${modes[@]}"; do
      flags=(--memory "$mode")
      [[ $mode == zero ]] && flags=(--memory share --zero)
      [[ $mode == zero_free ]] && flags=(--memory free --zero)
      out=$("$step" --model "$nets/$model.json" --batch "$batch" "${dev[@]}" --steps "$steps" --warmup 20 "${flags[@]}")
      echo "round=$r case=${model}_b${batch}_d${devices} mode=$mode ms=$(field median_ms <<<"$out") step_bytes=$(field step_bytes <<<"$out") peak_bytes=$(field peak_bytes <<<"$out") param_bytes=$(field param_bytes <<<"$out")" |
        tee -a "$log"
    done
  done
done

echo
echo "medians over $rounds rounds: step ms and step memory MiB per mode; share and free against keep (memory, time):"
python3 - "$log" <<'PY'
import re, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    f = dict(re.findall(r"(\w+)=(\S+)", line))
    runs.setdefault((f["case"], f["round"]), {})[f["mode"]] = (
        float(f["ms"]), float(f["step_bytes"]), float(f["peak_bytes"]) - float(f["param_bytes"]))
for case in dict.fromkeys(c for c, _ in runs):
    rs = [m for (c, _), m in runs.items() if c == case and len(m) >= 3]
    med = lambda mode, i: statistics.median(r[mode][i] for r in rs)
    ratio = lambda mode, i: statistics.median(r[mode][i] / r["keep"][i] for r in rs)
    spread = lambda mode: max(r[mode][0] / r["keep"][0] for r in rs) - min(r[mode][0] / r["keep"][0] for r in rs)
    cells = "  ".join(f"{m} {med(m, 0):.3f} ms {med(m, 1) / 2**20:.1f} MiB" for m in ("keep", "share", "free"))
    rel = "  ".join(f"{m}: memory {ratio(m, 1):.2f} time {ratio(m, 0):.3f} (spread {spread(m):.3f})" for m in ("share", "free"))
    print(f"  {case:22} {cells}\n  {'':22} {rel}")
    zs = [r for r in rs if "zero" in r and "zero_free" in r]
    if zs:
        modes = ("keep", "share", "zero", "zero_free")
        work = "  ".join(f"{m} {statistics.median(r[m][2] for r in zs) / 2**20:.1f} MiB" for m in modes)
        print(f"  {'':22} working memory (peak less params): {work}")
        for z, base in (("zero", "share"), ("zero_free", "free")):
            zk = statistics.median(r[z][2] / r["keep"][2] for r in zs)
            zt = [r[z][0] / r[base][0] for r in zs]
            print(f"  {'':22} {z}: memory/keep {zk:.2f}, time/{base} {statistics.median(zt):.3f} "
                  f"(spread {max(zt) - min(zt):.3f})")
PY
