#!/usr/bin/env bash
# Data parallelism across processes on the CPU: the training step of the
# Fashion-MNIST MLP (784-512-512-10, momentum SGD) with the same global batch
#   dp_2proc      dp-run -n 2, each process pinned to its own core: train_step --devices 1
#                 (the processes talk through shared memory: the default on one host)
#   dp_2proc_tcp  the same over Gloo's TCP transport (DP_LOCAL_TRANSPORT=tcp, as between hosts)
#   dp_2proc_zero, dp_2proc_tcp_zero  the same two with the optimizer state sharded (train_step --zero: ZeRO-1,
#                 a reduce-scatter and an all-gather per bucket instead of the allreduce)
#   dp_2dev       one process on both cores: train_step --devices 2 --workers 1
#   ddp_2proc     PyTorch DDP (gloo), 2 processes x 1 thread, each on its own core
# run interleaved (the order rotating from round to round), one BLAS thread per
# compute thread; then the allreduce between 2 processes (one core each) per
# buffer size, dp's communicators (dp-bench process-allreduce: shared memory;
# Gloo auto, ring, halving-doubling, bcube) against torch.distributed.all_reduce (gloo).
#
#   bench/run_multiprocess_bench.sh [--build DIR] [--rounds R] [--steps N] [--batches "256 64"]
#                                   [--allreduce full|quick|none] [--configs "dp_2proc dp_2proc_zero ..."]
#
# Needs bench/train_step, bench/dp-bench and tools/dp_run/dp-run built
# (ninja -C DIR bench/train_step bench/dp-bench tools/dp_run/dp-run), 2 CPUs,
# and python3-torch (installed with apt when missing). Reports, per batch, the
# median samples/s over rounds with their spread (min..max) and the ratios
# dp_2proc / ddp_2proc (target >= 1.5), dp_2proc / dp_2dev (target >= 0.9) and
# the sharded state's against the allreduce's (target >= 1: no slower).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
build="$root/build"
rounds=3
steps=200
batches="256 64"
allreduce=full
configs=(dp_2proc dp_2proc_tcp dp_2proc_zero dp_2proc_tcp_zero dp_2dev ddp_2proc)
usage() { echo "usage: $0 [--build DIR] [--rounds R] [--steps N] [--batches \"B ...\"] [--allreduce full|quick|none] [--configs \"C ...\"]" >&2; exit 2; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build=$(cd "$2" && pwd); shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --batches) batches=$2; shift 2 ;;
    --allreduce) allreduce=$2; shift 2 ;;
    --configs) read -r -a configs <<<"$2"; shift 2 ;;
    *) usage ;;
  esac
done
[[ $allreduce == full || $allreduce == quick || $allreduce == none ]] || usage

train_step="$build/bench/train_step"
dp_bench="$build/bench/dp-bench"
dp_run="$build/tools/dp_run/dp-run"
for exe in "$train_step" "$dp_bench" "$dp_run"; do
  if [[ ! -x "$exe" ]]; then
    echo "error: $exe not found; build it: ninja -C $build bench/train_step bench/dp-bench tools/dp_run/dp-run" >&2
    exit 1
  fi
done
# shellcheck source=bench/bench_lib.sh
source "$here/bench_lib.sh"
# torch only for its configs and its allreduce.
py=python3
if [[ " ${configs[*]} " == *" ddp_2proc "* || $allreduce != none ]]; then ensure_torch; fi
if [[ $(nproc) -lt 2 ]]; then
  echo "error: needs 2 CPUs (one per process), $(nproc) available" >&2
  exit 1
fi

machine_header
echo "# torch $("$py" -c 'import torch; print(torch.__version__)' 2>/dev/null || echo none), rounds $rounds, $steps timed steps per run (20 warm-up), 1 BLAS thread per compute thread"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1

declare -A results  # config/batch -> newline-separated samples/s
add() { results[$1]+="$2"$'\n'; }

run_config() {  # config batch
  local out
  case "$1" in
    dp_2proc|dp_2proc_tcp|dp_2proc_zero|dp_2proc_tcp_zero)
      # Each process on its own core (DP_LOCAL_RANK), rank 0's line.
      local transport=auto zero=()
      [[ $1 == dp_2proc_tcp* ]] && transport=tcp
      [[ $1 == *_zero ]] && zero=(--zero)
      out=$(DP_LOCAL_TRANSPORT=$transport "$dp_run" -n 2 --no-prefix -- \
              sh -c 'exec taskset -c "$DP_LOCAL_RANK" "$0" "$@" | sed "s/^/rank$DP_RANK /"' \
              "$train_step" --devices 1 --batch "$2" --steps "$steps" "${zero[@]}" | grep '^rank0 ' | sed 's/^rank0 //') ;;
    dp_2dev) out=$(taskset -c 0,1 "$train_step" --devices 2 --workers 1 --batch "$2" --steps "$steps") ;;
    ddp_2proc) out=$(taskset -c 0,1 "$py" "$here/pytorch_ddp.py" --procs 2 --batch "$2" --steps "$steps" | tail -1) ;;
  esac
  echo "  $(printf '%-12s' "$1") $(echo "$out" | sed 's/^train_step model=[^ ]* //; s/^pytorch_ddp //')"
  add "$1/$2" "$(echo "$out" | field samples_per_s)"
}

for r in $(seq 1 "$rounds"); do
  echo "round $r/$rounds"
  for b in $batches; do
    for i in "${!configs[@]}"; do
      run_config "${configs[$(((i + r - 1) % ${#configs[@]}))]}" "$b"
    done
  done
done

med() { printf '%s' "${results[$1]}" | median; }
has() { [[ " ${configs[*]} " == *" $1 "* ]]; }
spread() { printf '%s' "${results[$1]}" | sort -g | awk 'NR==1 {lo=$1} {hi=$1} END {printf "%.1f..%.1f", lo, hi}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", a / b}'; }
verdict() { awk -v r="$1" -v t="$2" 'BEGIN {print (r >= t ? "met" : "MISSED")}'; }
for b in $batches; do
  echo
  echo "batch $b: median samples/s over $rounds rounds (min..max)"
  for c in "${configs[@]}"; do
    printf '  %-12s %10.1f  (%s)\n' "$c" "$(med "$c/$b")" "$(spread "$c/$b")"
  done
  if has dp_2proc && has ddp_2proc && has dp_2dev; then
    r1=$(ratio "$(med dp_2proc/$b)" "$(med ddp_2proc/$b)")
    r2=$(ratio "$(med dp_2proc/$b)" "$(med dp_2dev/$b)")
    echo "  dp 2 processes / torch DDP 2 processes: ${r1}x (target >= 1.5: $(verdict "$r1" 1.5))"
    echo "  dp 2 processes / dp 2 devices in one:   ${r2}x (target >= 0.9: $(verdict "$r2" 0.9))"
  fi
  if has dp_2proc_tcp && has ddp_2proc && has dp_2dev; then
    echo "  the same over TCP: $(ratio "$(med dp_2proc_tcp/$b)" "$(med ddp_2proc/$b)")x DDP," \
         "$(ratio "$(med dp_2proc_tcp/$b)" "$(med dp_2dev/$b)")x dp 2 devices"
  fi
  for t in dp_2proc dp_2proc_tcp; do
    if has "$t" && has "${t}_zero"; then
      # Each round's pair (run back to back), then the median of the ratios.
      rz=$(paste <(printf '%s' "${results[${t}_zero/$b]}") <(printf '%s' "${results[$t/$b]}") |
           awk '{print $1 / $2}' | median)
      rs=$(paste <(printf '%s' "${results[${t}_zero/$b]}") <(printf '%s' "${results[$t/$b]}") |
           awk '{r = $1 / $2} NR == 1 || r < lo {lo = r} NR == 1 || r > hi {hi = r} END {printf "%.3f..%.3f", lo, hi}')
      echo "  $t sharded state / allreduce, per round: $(printf '%.3f' "$rz")x ($rs; target >= 1, no slower: $(verdict "$rz" 1))"
    fi
  done
done

if [[ $allreduce != none ]]; then
  max=256
  [[ $allreduce == quick ]] && max=1
  echo
  echo "allreduce between 2 processes (one core each):"
  "$dp_run" -n 2 --no-prefix -- sh -c 'exec taskset -c "$DP_LOCAL_RANK" "$0" "$@"' \
    "$dp_bench" process-allreduce --max-mib "$max" | sed 's/^/  /'
  taskset -c 0,1 "$py" "$here/pytorch_allreduce.py" --procs 2 --max-mib "$max" | sed 's/^/  /'
fi
