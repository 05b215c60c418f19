#!/usr/bin/env bash
# Data parallelism on CPU devices: the training step of the Fashion-MNIST MLP
# (784-512-512-10, momentum SGD, global batch 256) by dp on 1 and 2 devices
# and by PyTorch DDP on 2 processes, runs interleaved; then the share of dp's
# allreduce hidden behind backward (from traces) and dp's allreduce bandwidth
# against the memcpy bound (dp-bench allreduce).
#
#   bench/run_parallel_bench.sh [--build DIR] [--rounds R] [--steps N] [--allreduce full|quick|none]
#
# Needs bench/train_step and bench/dp-bench built (ninja -C DIR bench/train_step
# bench/dp-bench), 2 CPUs, and python3-torch (installed with apt when missing).
#
# Every compute thread gets one core and one BLAS thread
# (OPENBLAS_NUM_THREADS=OMP_NUM_THREADS=MKL_NUM_THREADS=1):
#   dp_1dev   taskset -c 0:   train_step --devices 1 --workers 1
#   dp_2dev   taskset -c 0,1: train_step --devices 2 --workers 1 (caller + 1 worker: a thread per core)
#   dp_2shared the same with --shared-model (one copy of the params, each
#             param updated once, the updates spread over the replicas: what
#             the sample runs for --devices cpu:N)
#   ddp_2proc taskset -c 0,1: pytorch_ddp.py --procs 2 (gloo; each process 1 thread, pinned to its own core)
# and, as references for the ratios:
#   dp_plain  taskset -c 0:   train_step (the plain training net, no parallelize, simple executor)
#   torch_1   taskset -c 0:   pytorch_mlp.py 1 (1 torch thread)
# Per round every configuration runs once, the order rotating from round to
# round so that drift in the machine's load hits all alike; each run reports
# the median step time of N steps (after 20 warm-up steps) as samples/s. The
# summary gives the median over rounds and the ratios, and the 2-device
# ratios round by round next to bench/core_pair_probe's verdict at each
# round's start and end (do cores 0 and 1 share a last-level cache?). Each
# round also runs one traced dp_2dev step (train_step --trace) for
# trace_overlap.py.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
build="$root/build"
rounds=5
steps=100
allreduce=full
usage() { echo "usage: $0 [--build DIR] [--rounds R] [--steps N] [--allreduce full|quick|none]" >&2; exit 2; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build=$(cd "$2" && pwd); shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --allreduce) allreduce=$2; shift 2 ;;
    *) usage ;;
  esac
done
[[ $allreduce == full || $allreduce == quick || $allreduce == none ]] || usage

train_step="$build/bench/train_step"
dp_bench="$build/bench/dp-bench"
core_pair_probe="$build/bench/core_pair_probe"
for exe in "$train_step" "$dp_bench" "$core_pair_probe"; do
  if [[ ! -x "$exe" ]]; then
    echo "error: $exe not found; build it: ninja -C $build bench/train_step bench/dp-bench bench/core_pair_probe" >&2
    exit 1
  fi
done
# shellcheck source=bench/bench_lib.sh
source "$here/bench_lib.sh"
ensure_torch
if [[ $(nproc) -lt 2 ]]; then
  echo "error: needs 2 CPUs (one per replica), $(nproc) available" >&2
  exit 1
fi

machine_header
echo "# torch $("$py" -c 'import torch; print(torch.__version__)'), rounds $rounds, $steps timed steps per run (20 warm-up), 1 BLAS thread per compute thread"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

declare -A results  # config -> newline-separated samples/s
add() { results[$1]+="$2"$'\n'; }

run_dp() {  # config cpus train_step-options...
  local key=$1 cpus=$2 out
  shift 2
  out=$(taskset -c "$cpus" "$train_step" --steps "$steps" "$@")
  echo "  $(printf '%-10s' "$key") $(echo "$out" | sed 's/^train_step model=[^ ]* //')"
  add "$key" "$(echo "$out" | field samples_per_s)"
}

run_py() {  # config cpus script args...
  local key=$1 cpus=$2 out
  shift 2
  out=$(taskset -c "$cpus" "$py" "$@" --steps "$steps")
  echo "  $(printf '%-10s' "$key") $(echo "$out" | tail -1 | sed 's/^pytorch_[a-z]* //')"
  add "$key" "$(echo "$out" | tail -1 | field samples_per_s)"
}

run_config() {
  case "$1" in
    dp_1dev) run_dp dp_1dev 0 --devices 1 --workers 1 ;;
    dp_2dev) run_dp dp_2dev 0,1 --devices 2 --workers 1 ;;
    dp_2shared) run_dp dp_2shared 0,1 --devices 2 --workers 1 --shared-model ;;
    ddp_2proc) run_py ddp_2proc 0,1 "$here/pytorch_ddp.py" --procs 2 ;;
    dp_plain) run_dp dp_plain 0 ;;
    torch_1) run_py torch_1 0 "$here/pytorch_mlp.py" 1 ;;
  esac
}

probes=""
probe() {  # SEPARATOR: whether cores 0 and 1 share a last-level cache now (core_pair_probe.c)
  local out
  out=$("$core_pair_probe" 0 1)
  echo "  $out"
  probes+="$(echo "$out" | grep -o 'shared_cache=[a-z]*' | cut -d= -f2)$1"
}

configs=(dp_1dev dp_2dev dp_2shared ddp_2proc dp_plain torch_1)
for r in $(seq 1 "$rounds"); do
  echo "round $r/$rounds"
  probe /
  for i in "${!configs[@]}"; do
    run_config "${configs[$(((i + r - 1) % ${#configs[@]}))]}"
  done
  probe " "
  # One traced step (the last of 20 runs), for trace_overlap.py.
  taskset -c 0,1 "$train_step" --devices 2 --workers 1 --warmup 19 --steps 1 --trace "$tmp/trace_$r.json" >/dev/null
done

med() { printf '%s' "${results[$1]}" | median; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", a / b}'; }
echo
echo "median samples/s over $rounds rounds:"
for c in "${configs[@]}"; do
  printf '  %-10s %10.1f\n' "$c" "$(med "$c")"
done
verdict() { awk -v s="$1" 'BEGIN {print (s >= 1.8 ? "met" : "MISSED")}'; }
scaling=$(ratio "$(med dp_2dev)" "$(med dp_1dev)")
shared=$(ratio "$(med dp_2shared)" "$(med dp_1dev)")
echo
echo "dp 2 devices / dp 1 device:          ${scaling}x (target >= 1.8x: $(verdict "$scaling"))"
echo "dp 2 devices shared / dp 1 device:   ${shared}x (target >= 1.8x: $(verdict "$shared"))"
echo "dp 2 devices / torch DDP 2 procs:    $(ratio "$(med dp_2dev)" "$(med ddp_2proc)")x"
echo "reference: dp 2 devices / dp plain net, 1 core:   $(ratio "$(med dp_2dev)" "$(med dp_plain)")x"
echo "reference: dp 1 device / dp plain net, 1 core:    $(ratio "$(med dp_1dev)" "$(med dp_plain)")x (parallelize's cost on one replica)"
echo "reference: torch DDP 2 procs / torch 1 thread:    $(ratio "$(med ddp_2proc)" "$(med torch_1)")x"
# Round by round, with whether cores 0 and 1 shared a last-level cache at
# the round's start and end: the cloud VM moves its vCPUs between such
# placements, and replicas that hand data to each other scale less apart.
by_round() { paste -d' ' <(printf '%s' "${results[$1]}") <(printf '%s' "${results[$2]}") | awk '{printf " %.2f", $1 / $2}'; }
echo "round by round (cores sharing a cache at start/end: $probes):"
echo "  dp 2 devices / 1 device:$(by_round dp_2dev dp_1dev);  shared / 1 device:$(by_round dp_2shared dp_1dev)"

echo
echo "allreduce hidden behind backward (dp_2dev, one traced step per round; see trace_overlap.py):"
"$py" "$here/trace_overlap.py" "$tmp"/trace_*.json | sed "s|$tmp/||; s/^/  /"

if [[ $allreduce != none ]]; then
  echo
  quick=()
  [[ $allreduce == quick ]] && quick=(--quick)
  taskset -c 0,1 "$dp_bench" allreduce --devices 2 "${quick[@]}"
fi
