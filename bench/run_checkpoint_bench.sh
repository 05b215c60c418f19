#!/usr/bin/env bash
# Checkpoints: dp's save / load of 1 GiB (64 x 16 MiB float32) against plain
# write+fsync / read of the same bytes and against torch.save / torch.load,
# and the MLP's training step while asynchronous saves run.
#
#   bench/run_checkpoint_bench.sh [--build DIR] [--dir DIR] [--runs R] [--rounds N]
#
# Needs bench/checkpoint_bench built (ninja -C DIR bench/checkpoint_bench) and
# python3-torch (installed with apt when missing). Three separate runs (R) of
# each, torch interleaved between dp's io runs; every dp io run has N rounds
# (raw and dp writes alternate which goes first). Reported per run: medians
# over its rounds; the summary: the median over runs with min..max.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
build="$root/build"
dir="$root/build-bench-tmp"
runs=3
rounds=5
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build=$(cd "$2" && pwd); shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    *) echo "usage: $0 [--build DIR] [--dir DIR] [--runs R] [--rounds N]" >&2; exit 2 ;;
  esac
done
bench="$build/bench/checkpoint_bench"
[[ -x "$bench" ]] || { echo "error: $bench not found; build it: ninja -C $build bench/checkpoint_bench" >&2; exit 1; }
mkdir -p "$dir"

# shellcheck source=bench/bench_lib.sh
source "$here/bench_lib.sh"
ensure_torch
machine_header
echo "# files in $dir ($(df -T "$dir" | awk 'NR==2 {print $2}')), $runs runs"
echo "# reproduce: $0 --build $build --dir $dir --runs $runs --rounds $rounds"

declare -A results
add() { results[$1]+="$2"$'\n'; }
summary() {  # key label
  local v
  v=$(printf '%s' "${results[$1]}" | grep -v '^$' || true)
  if [[ -z "$v" ]]; then printf '%-34s n/a\n' "$2"; return; fi
  printf '%-34s median %s  (min %s, max %s)\n' "$2" "$(printf '%s\n' "$v" | median)" \
    "$(printf '%s\n' "$v" | sort -g | head -1)" "$(printf '%s\n' "$v" | sort -g | tail -1)"
}

for r in $(seq 1 "$runs"); do
  echo "run $r/$runs"
  out=$(taskset -c 0,1 "$bench" io --dir "$dir" --rounds "$rounds")
  echo "$out" | grep -E '^(ratio|mmap_load_s|raw_|dp_)' | sed 's/^/  /'
  for k in raw_write raw_atomic dp_save raw_read dp_load dp_mmap; do
    add "$k" "$(echo "$out" | grep "^$k median" | field median)"
  done
  add save_ratio "$(echo "$out" | grep '^ratio dp_save/raw_write' | field median)"
  add atomic_ratio "$(echo "$out" | grep '^ratio dp_save/raw_atomic' | field median)"
  add load_ratio "$(echo "$out" | grep '^ratio dp_load' | field median)"
  add mmap_s "$(echo "$out" | grep '^mmap_load_s' | field median)"
  tout=$(taskset -c 0,1 "$py" "$here/pytorch_checkpoint.py" --dir "$dir")
  echo "  $tout"
  add torch_save "$(echo "$tout" | field torch_save)"
  add torch_load "$(echo "$tout" | field torch_load)"
  add torch_load_mmap "$(echo "$tout" | field torch_load_mmap)"
  sout=$(OPENBLAS_NUM_THREADS=2 taskset -c 0,1 "$bench" step --dir "$dir")
  echo "$sout" | sed 's/^/  /'
  add step_ratio "$(echo "$sout" | grep '^ratio' | grep -o 'alone=[0-9.]*' | cut -d= -f2)"
done

echo "summary (GiB/s unless noted; medians over $runs runs)"
summary raw_write "raw write + fsync"
summary raw_atomic "raw write, temp + fsync + rename"
summary dp_save "dp_checkpoint_save"
summary torch_save "torch.save + fsync"
summary save_ratio "dp_save / raw_write (>= 0.90)"
summary atomic_ratio "dp_save / raw_atomic"
summary raw_read "raw read (cache dropped)"
summary dp_load "dp_checkpoint_load (verified)"
summary torch_load "torch.load"
summary load_ratio "dp_load / raw_read (>= 0.90)"
summary dp_mmap "dp mmap load (verified)"
summary mmap_s "dp mmap load, s (verified)"
summary torch_load_mmap "torch.load(mmap=True), pages read (torch >= 2.1)"
summary step_ratio "MLP step during async save / alone (<= 1.05)"
