#!/usr/bin/env bash
# The main job on a GPU end to end: samples/train_fashion_mnist --devices cuda:1
# (default settings otherwise, no environment variables: the train net runs as
# a CUDA graph) against its PyTorch peer (bench/pytorch_fashion.py --device
# cuda: the same loop, batches gathered on the host and copied to the GPU, the
# loss read every step), one epoch each, runs interleaved: MLP and CNN at
# batches 64, 256 and 1024. Each row also runs dp op by op (--no-graphs), dp
# with TF32, BF16 and FP16 GEMMs (--math; fp16 with dynamic loss scaling),
# dp with the dataset in host memory
# (--host-loader: each batch gathered on the host into page-locked buffers and
# copied to the GPU on the loader's stream; by default the sample keeps the
# dataset on the GPU and gathers each batch there), dp with the FC engine
# CUBLASLT (dp_cublaslt: the sample's model with "engine": "CUBLASLT" on its FC
# ops, written here; the bias and relu in the GEMM's epilogue), and PyTorch with its step captured as a CUDA graph
# (--cuda-graphs, capturable Adam). Then, per row, where dp's step goes
# (bench/gpu_step_breakdown.py on one profiled run's --trace: the CUDA
# graph's kernels per step, the step's wall time, the device's time for the
# graph from CUDA events, and their ratio, the GPU-busy fraction).
#
#   bench/run_gpu_bench.sh [--build DIR] [--rounds R] [--cnn-limit N] [--python PY] [--rows "mlp:256 cnn:256"]
#
# --rows picks rows (default: mlp and cnn at 64, 256 and 1024), e.g. the
# issue's target rows "mlp:256 mlp:1024 cnn:256" where device time is short.
# For the GPU machine (../shared/gpu/README.md: `bash .gpukit/run.sh
# 'bench/run_gpu_bench.sh --build $B'`): its python3 has torch with CUDA; the
# Fashion-MNIST files are where the sample looks by default. The CNN trains on
# the first N training images (default 0: all). Prints each run's line, then
# per row the medians over rounds with their spread (min..max) and the ratios
# dp/torch eager (issue 26's target: >= 1.2 on every row) and dp/torch with
# CUDA graphs (issue 27's: >= 1.2 for MLP b256, b1024 and CNN b256).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
build="$root/build"
rounds=3
cnn_limit=0
py=${PYTHON:-python3}
row_list="mlp:64 mlp:256 mlp:1024 cnn:64 cnn:256 cnn:1024"
usage="usage: $0 [--build DIR] [--rounds R] [--cnn-limit N] [--python PY] [--rows \"mlp:256 cnn:256 ...\"]"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build=$(cd "$2" && pwd); shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --cnn-limit) cnn_limit=$2; shift 2 ;;
    --python) py=$2; shift 2 ;;
    --rows) row_list=$2; shift 2 ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
done
sample="$build/samples/train_fashion_mnist"
[[ -x "$sample" ]] || { echo "error: $sample not found; build it: ninja -C $build" >&2; exit 1; }
"$py" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' ||
  { echo "error: $py has no torch with a CUDA device" >&2; exit 1; }
# shellcheck source=bench/bench_lib.sh
source "$here/bench_lib.sh"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
machine_header
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | sed 's/^/# GPU: /' || true

rows=()
for r in $row_list; do
  [[ $r =~ ^(mlp|cnn):[0-9]+$ ]] || { echo "$usage" >&2; exit 2; }
  rows+=("${r%%:*} ${r#*:}")
done
limit_args() {  # MODEL
  [[ $1 == cnn && $cnn_limit -gt 0 ]] && echo "--limit $cnn_limit"
  return 0
}

# Variants: name, then the program's extra arguments (@LT@: the model with
# the CUBLASLT engine, below; a later --model wins).
dp_variants=("dp|" "dp_nographs|--no-graphs" "dp_tf32|--math tf32" "dp_bf16|--math bf16" "dp_fp16|--math fp16"
  "dp_hostloader|--host-loader" "dp_cublaslt|--model @LT@")
for m in mlp cnn; do
  "$py" "$root/tools/with_fc_engine.py" "$root/samples/nets/fashion_$m.json" "$tmp/fashion_${m}_cublaslt.json" CUBLASLT
done
torch_variants=("torch|" "torch_graphs|--cuda-graphs")

for ((round = 1; round <= rounds; ++round)); do
  echo "round $round/$rounds"
  for row in "${rows[@]}"; do
    read -r model batch <<<"$row"
    key="${model}_$batch"
    for v in "${dp_variants[@]}"; do
      name=${v%%|*}
      args=${v#*|}
      args=${args//@LT@/$tmp/fashion_${model}_cublaslt.json}
      # shellcheck disable=SC2046,SC2086
      out=$("$sample" --model "$model" --batch "$batch" --epochs 1 --devices cuda:1 $args $(limit_args "$model") |
        tail -n 1)
      echo "$out" | field samples_per_s >>"$tmp/${name}_$key"
      echo "  $name $key: $out"
    done
    for v in "${torch_variants[@]}"; do
      name=${v%%|*}
      # shellcheck disable=SC2046,SC2086
      out=$("$py" "$here/pytorch_fashion.py" --device cuda --model "$model" --batch "$batch" --epochs 1 ${v#*|} \
        $(limit_args "$model") | tail -n 1)
      echo "$out" | field samples_per_s >>"$tmp/${name}_$key"
      echo "  $name $key: $out"
    done
  done
done

spread() { sort -g "$1" | awk 'NR==1 {lo=$1} {hi=$1} END {printf "%.0f..%.0f", lo, hi}'; }
ratio() { awk -v d="$1" -v t="$2" 'BEGIN {printf "%.2f", (t > 0 ? d / t : 0)}'; }
echo
echo "samples/s, medians of $rounds rounds (min..max)"
printf "%-10s" row
for v in "${dp_variants[@]}" "${torch_variants[@]}"; do printf " %24s" "${v%%|*}"; done
printf " %10s %10s\n" dp/torch dp/tgraphs
for row in "${rows[@]}"; do
  read -r model batch <<<"$row"
  key="${model}_$batch"
  printf "%-10s" "$key"
  for v in "${dp_variants[@]}" "${torch_variants[@]}"; do
    f="$tmp/${v%%|*}_$key"
    printf " %10.0f (%11s)" "$(median <"$f")" "$(spread "$f")"
  done
  d=$(median <"$tmp/dp_$key")
  printf " %10s %10s\n" "$(ratio "$d" "$(median <"$tmp/torch_$key")")" "$(ratio "$d" "$(median <"$tmp/torch_graphs_$key")")"
done

echo
echo "dp's step, graphs on (one profiled epoch of up to 10240 images; the last step's trace):"
for row in "${rows[@]}"; do
  read -r model batch <<<"$row"
  trace="$tmp/trace_${model}_$batch.json"
  if "$sample" --model "$model" --batch "$batch" --epochs 1 --devices cuda:1 --limit 10240 --trace "$trace" \
    >/dev/null 2>&1; then
    printf "%-10s %s\n" "${model}_$batch" "$("$py" "$here/gpu_step_breakdown.py" "$trace" | sed 's/^[^:]*: //')"
  else
    printf "%-10s %s\n" "${model}_$batch" "(the profiled run failed)"
  fi
done
