#!/usr/bin/env bash
# dp vs PyTorch: one training step of the Fashion-MNIST MLP (784-512-512-10,
# momentum SGD, batch 256) on 1 and 2 cores, runs interleaved.
#
#   bench/run_train_bench.sh [--build DIR] [--rounds R] [--steps N]
#
# Needs bench/train_step built (ninja -C DIR bench/train_step; -Dbench=true,
# the default) and python3-torch (installed with apt when missing).
#
# Configurations:
#   1 core : taskset -c 0;   dp (its own threads: one per CPU it may use); torch 1 thread, 1 BLAS thread
#   2 cores: taskset -c 0,1; dp (two threads); torch best of
#            (1 torch thread, OPENBLAS_NUM_THREADS=2) and (2 torch threads)
# Each round runs dp, then every torch variant, alternating, so that drift in
# the machine's load hits both alike. Each run reports the median step time of
# N steps; the summary gives the median over rounds of samples/s, the ratio
# dp/torch and the fraction of the sgemm peak (1024^3 cblas_sgemm, measured by
# train_step --peak in the same configuration).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
build="$root/build"
rounds=5
steps=100
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build=$(cd "$2" && pwd); shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    *) echo "usage: $0 [--build DIR] [--rounds R] [--steps N]" >&2; exit 2 ;;
  esac
done

train_step="$build/bench/train_step"
if [[ ! -x "$train_step" ]]; then
  echo "error: $train_step not found; build it: ninja -C $build bench/train_step" >&2
  exit 1
fi

# shellcheck source=bench/bench_lib.sh
source "$here/bench_lib.sh"
ensure_torch

ncpu=$(nproc)
machine_header
echo "# torch $("$py" -c 'import torch; print(torch.__version__)'), rounds $rounds, $steps timed steps per run (20 warm-up)"

declare -A results  # key "config/variant" -> newline-separated samples/s
add() { results[$1]+="$2"$'\n'; }

run_dp() {  # cpus blas_threads key (dp ignores the BLAS setting: it runs BLAS single-threaded in its own
            # threads; the sgemm peak uses blas_threads)
  local out
  out=$(OPENBLAS_NUM_THREADS=$2 OMP_NUM_THREADS=$2 taskset -c "$1" "$train_step" --steps "$steps" --peak)
  echo "  dp    [$3] $(echo "$out" | head -1 | sed 's/^train_step model=[^ ]* //') sgemm_peak=$(echo "$out" | grep sgemm_peak | field gflops)"
  add "$3/dp" "$(echo "$out" | head -1 | field samples_per_s)"
  add "$3/peak" "$(echo "$out" | grep sgemm_peak | field gflops)"
}

run_torch() {  # cpus blas_threads torch_threads key
  local out
  out=$(OPENBLAS_NUM_THREADS=$2 OMP_NUM_THREADS=$3 MKL_NUM_THREADS=$2 taskset -c "$1" "$py" "$here/pytorch_mlp.py" "$3" \
        --steps "$steps")
  echo "  torch [$4] $(echo "$out" | sed 's/^pytorch_mlp //')"
  add "$4" "$(echo "$out" | field samples_per_s)"
}

if [[ $ncpu -lt 2 ]]; then
  echo "warning: only $ncpu CPU: the 2-core configuration is skipped" >&2
fi

for r in $(seq 1 "$rounds"); do
  echo "round $r/$rounds"
  run_dp 0 1 1core
  run_torch 0 1 1 1core/torch_t1
  if [[ $ncpu -ge 2 ]]; then
    run_dp 0,1 2 2core
    run_torch 0,1 2 1 2core/torch_t1_blas2
    run_torch 0,1 2 2 2core/torch_t2
  fi
done

# FLOPs per step, as train_step and pytorch_mlp.py count them.
flop=$(awk 'BEGIN {b=256; f=2*b*(784*512+512*512+512*10); printf "%.0f", f + f + (f - 2*b*784*512)}')

echo
printf '%-7s %14s %14s %-16s %9s %10s %12s %12s\n' config "dp samples/s" "torch samp/s" "torch best of" dp/torch "peak GF/s" "dp %peak" "torch %peak"
summarize() {  # config torch_keys...
  local cfg=$1; shift
  local dp peak best=0 bestkey="" m
  dp=$(printf '%s' "${results[$cfg/dp]}" | median)
  peak=$(printf '%s' "${results[$cfg/peak]}" | median)
  for k in "$@"; do
    m=$(printf '%s' "${results[$cfg/$k]}" | median)
    if awk -v a="$m" -v b="$best" 'BEGIN {exit !(a > b)}'; then best=$m; bestkey=$k; fi
  done
  awk -v cfg="$cfg" -v dp="$dp" -v t="$best" -v k="$bestkey" -v p="$peak" -v f="$flop" 'BEGIN {
    printf "%-7s %14.1f %14.1f %-16s %9.3f %10.1f %11.1f%% %11.1f%%\n", cfg, dp, t, k, dp / t, p,
           100 * dp * f / 256 / (p * 1e9), 100 * t * f / 256 / (p * 1e9) }'
}
summarize 1core torch_t1
if [[ $ncpu -ge 2 ]]; then
  summarize 2core torch_t1_blas2 torch_t2
  for k in torch_t1_blas2 torch_t2; do
    echo "# 2core/$k median samples/s: $(printf '%s' "${results[2core/$k]}" | median)"
  done
fi
