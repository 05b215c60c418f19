#!/usr/bin/env bash
# The main job end to end: samples/train_fashion_mnist (default settings, no
# environment variables) against the same loop in PyTorch
# (bench/pytorch_fashion.py), one epoch each, runs interleaved.
#
#   bench/run_e2e_bench.sh [--build DIR] [--rounds R] [--cnn-limit N]
#
# Needs the sample and bench/train_step built in DIR (default build) and
# python3-torch (installed with apt when missing).
#
# Each round runs, for the MLP at batch 64 and 256:
#   1 core  (taskset -c 0):   dp; torch 1 thread
#   2 cores (taskset -c 0,1): dp (one device); dp --devices cpu:2;
#                             torch 2 threads and torch 1 thread (its best counts)
# and the CNN at batch 64 on 2 cores over the first N training images
# (default 12800): dp; torch 2 threads and 1 thread.
# Each round starts and ends with bench/core_pair_probe (do cores 0 and 1
# share a last-level cache?), and so does each 2-core dp run; the summary
# gives the 2-core ratios round by round next to the rounds' probes, and by
# placement over the runs that stayed in one (the cloud VM moves its vCPUs
# between the two, and steps whose threads hand data to each other scale
# less without a shared cache: bench/README.md).
# Samples/s are the samples' last line (the training loop only, as the sample
# prints it). The summary gives medians over rounds with their spread
# (min..max), the ratios of medians, and the fraction of the GEMM floor: the
# step's FLOPs at the 1024^3 sgemm peak measured on the same cores
# (train_step --peak), i.e. the share of the machine's sgemm speed that the
# whole job reaches.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
build="$root/build"
rounds=3
cnn_limit=12800
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build=$(cd "$2" && pwd); shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --cnn-limit) cnn_limit=$2; shift 2 ;;
    *) echo "usage: $0 [--build DIR] [--rounds R] [--cnn-limit N]" >&2; exit 2 ;;
  esac
done
sample="$build/samples/train_fashion_mnist"
train_step="$build/bench/train_step"
core_pair_probe="$build/bench/core_pair_probe"
for exe in "$sample" "$train_step" "$core_pair_probe"; do
  [[ -x "$exe" ]] || { echo "error: $exe not found; build it: ninja -C $build" >&2; exit 1; }
done
# shellcheck source=bench/bench_lib.sh
source "$here/bench_lib.sh"
ensure_torch

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

placement() {  # yes / no: do cores 0 and 1 share a last-level cache now (core_pair_probe.c)
  "$core_pair_probe" 0 1 | grep -o "shared_cache=[a-z]*" | cut -d= -f2
}
dp() {  # CPUS KEY ARGS...: one sample run, its samples/s appended to $tmp/KEY
  # and, for 2-core runs, the cores' placement (probed before and after the
  # run: yes, no, or mixed when it changed) to $tmp/KEY.placement
  local cpus=$1 key=$2
  shift 2
  local out before="" after
  [[ $cpus == 0,1 ]] && before=$(placement)
  out=$(taskset -c "$cpus" "$sample" --epochs 1 "$@" | tail -n 1)
  echo "$out" | field samples_per_s >>"$tmp/$key"
  if [[ -n $before ]]; then
    after=$(placement)
    [[ $before == "$after" ]] || after=mixed
    echo "$after" >>"$tmp/$key.placement"
    out+="  (shared cache: $after)"
  fi
  echo "  dp    $key: $out"
}

probe() {  # whether cores 0 and 1 share a last-level cache now, appended to $tmp/probe
  local out
  out=$("$core_pair_probe" 0 1)
  echo "  $out"
  echo "$out" | grep -o "shared_cache=[a-z]*" | cut -d= -f2 >>"$tmp/probe"
}

machine_header
echo "# dp $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?'), $rounds rounds; reproduce: bench/run_e2e_bench.sh --build $build --rounds $rounds"
for r in $(seq 1 "$rounds"); do
  echo "round $r"
  probe
  for b in 64 256; do
    dp 0 "dp_1core_b$b" --model mlp --batch "$b"
    torch_run 0 1 "torch_1core_b$b" --model mlp --batch "$b"
    dp 0,1 "dp_2core_b$b" --model mlp --batch "$b"
    torch_run 0,1 2 "torch_2core_t2_b$b" --model mlp --batch "$b"
    dp 0,1 "dp_cpu2_b$b" --model mlp --batch "$b" --devices cpu:2
    torch_run 0,1 1 "torch_2core_t1_b$b" --model mlp --batch "$b"
  done
  dp 0,1 dp_cnn --model cnn --batch 64 --limit "$cnn_limit"
  torch_run 0,1 2 torch_cnn_t2 --model cnn --batch 64 --limit "$cnn_limit"
  torch_run 0,1 1 torch_cnn_t1 --model cnn --batch 64 --limit "$cnn_limit"
  probe
done
peak1=$(taskset -c 0 "$train_step" --steps 1 --warmup 0 --peak | grep sgemm_peak | field gflops)
peak2=$(taskset -c 0,1 "$train_step" --steps 1 --warmup 0 --peak | grep sgemm_peak | field gflops)

med() { median <"$tmp/$1"; }
spread() { sort -g "$tmp/$1" | awk 'NR==1{lo=$1} {hi=$1} END{printf "%.0f..%.0f", lo, hi}'; }
best() { awk -v a="$(med "$1")" -v b="$(med "$2")" 'BEGIN{print (a > b ? a : b)}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{if (a == "nan" || b == "nan" || b == 0) print "-"; else printf "%.2f", a / b}'; }
# Training FLOPs per sample: forward, and backward without the first layer's dX.
mlp_flop=$(awk 'BEGIN{f = 2 * (784*512 + 512*512 + 512*10); print 3 * f - 2 * 784 * 512}')
cnn_flop=$(awk 'BEGIN{c1 = 2*32*25*784; c2 = 2*64*800*196; f1 = 2*3136*256; f2 = 2*256*10;
                      print (c1 + c2 + f1 + f2) + c1 + 2 * (c2 + f1 + f2)}')
floor() { awk -v s="$1" -v f="$2" -v p="$3" 'BEGIN{printf "%.2f", s * f / (p * 1e9)}'; }

echo
echo "medians over $rounds rounds, samples/s (spread min..max); sgemm peak: 1 core $peak1, 2 cores $peak2 GFLOP/s"
for b in 64 256; do
  d1=$(med "dp_1core_b$b"); t1=$(med "torch_1core_b$b")
  d2=$(med "dp_2core_b$b"); dx=$(med "dp_cpu2_b$b"); t2=$(best "torch_2core_t2_b$b" "torch_2core_t1_b$b")
  echo "mlp batch $b:"
  echo "  1 core : dp $d1 ($(spread "dp_1core_b$b"))  torch $t1 ($(spread "torch_1core_b$b"))  dp/torch $(ratio "$d1" "$t1")  (target >= 1.5)  GEMM floor fraction $(floor "$d1" "$mlp_flop" "$peak1")"
  echo "  2 cores: dp $d2 ($(spread "dp_2core_b$b"))  torch best $t2 (2 threads $(med "torch_2core_t2_b$b"), 1 thread $(med "torch_2core_t1_b$b"))  dp/torch $(ratio "$d2" "$t2")  (target >= 1.5)  GEMM floor fraction $(floor "$d2" "$mlp_flop" "$peak2")"
  echo "  2 cores / 1 core: dp $(ratio "$d2" "$d1")$([[ $b == 256 ]] && echo '  (target >= 1.8)')"
  echo "  --devices cpu:2: $dx ($(spread "dp_cpu2_b$b"))  / one device $(ratio "$dx" "$d2")  (target >= $([[ $b == 64 ]] && echo 1.0 || echo 1.1))"
done
# The 2-core comparisons by placement: medians over the 2-core runs whose
# cores shared a last-level cache before and after the run, and over those
# whose cores did not (1-core runs do not depend on it).
in_place() {  # KEY PLACEMENT: median samples/s of KEY's runs in that placement
  paste -d' ' "$tmp/$1" "$tmp/$1.placement" | awk -v p="$2" '$2 == p {print $1}' | median
}
runs_in() { grep -c "^$2\$" "$tmp/$1.placement" || true; }
by_placement() {  # B: 2 cores / 1 core and cpu:2 / one device, per placement
  local b=$1 p d2 dx
  for p in yes no; do
    d2=$(in_place "dp_2core_b$b" $p); dx=$(in_place "dp_cpu2_b$b" $p)
    printf '  batch %s, shared cache %-3s: 2 cores / 1 core %s (%s runs);  cpu:2 / one device %s (%s and %s runs)\n' \
      "$b" "$p" "$(ratio "$d2" "$(med "dp_1core_b$b")")" "$(runs_in "dp_2core_b$b" $p)" "$(ratio "$dx" "$d2")" \
      "$(runs_in "dp_cpu2_b$b" $p)" "$(runs_in "dp_2core_b$b" $p)"
  done
}
echo "by the placement of cores 0,1 around each 2-core run (core_pair_probe before and after; mixed runs left out):"
for b in 64 256; do by_placement "$b"; done
# The 2-core comparisons round by round, with whether cores 0 and 1 shared a
# last-level cache at the round's start and end (bench/core_pair_probe.c):
# the cloud VM moves its vCPUs between such placements, and a step whose
# threads hand data to each other scales less on cores that do not.
per_round() { paste -d' ' "$tmp/$1" "$tmp/$2" | awk '{printf " %.2f", $1 / $2}'; }
echo "round by round (cores 0,1 sharing a cache at start/end: $(paste -d/ - - <"$tmp/probe" | tr '\n' ' '))"
for b in 64 256; do
  echo "  batch $b: 2 cores / 1 core$(per_round "dp_2core_b$b" "dp_1core_b$b");  cpu:2 / one device$(per_round "dp_cpu2_b$b" "dp_2core_b$b")"
done
dc=$(med dp_cnn); tc=$(best torch_cnn_t2 torch_cnn_t1)
echo "cnn batch 64, 2 cores, $cnn_limit images: dp $dc ($(spread dp_cnn))  torch best $tc (2 threads $(med torch_cnn_t2), 1 thread $(med torch_cnn_t1))  dp/torch $(ratio "$dc" "$tc")  (target >= 1.2)  GEMM floor fraction $(floor "$dc" "$cnn_flop" "$peak2")"
