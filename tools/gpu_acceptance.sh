#!/usr/bin/env bash
# Issue 26's acceptance on a GPU machine (and issue 27's math modes), in one command for the GPU kit's
# EXTRA (../shared/gpu/README.md): `bash .gpukit/run.sh 'tools/gpu_acceptance.sh $B'`
# after the kit has built dp and run the gpu suite (which holds the device
# parity harness, test_device_parity_gpu).
#
#   tools/gpu_acceptance.sh BUILD_DIR [--no-bench]
#
# Runs, each bounded in time, printing PASS or FAIL per line and a summary:
#   - the sample's MLP (>= 0.88) and CNN (>= 0.91) on cuda:1 and on cuda:0,cuda:0 (3 epochs, defaults);
#   - --checkpoint/--resume on cuda:1 (1 epoch, then resumed to 2), and a checkpoint of cuda:1 resumed on
#     cpu:2 and one of cpu:2 resumed on cuda:1;
#   - the missing-GPU error stays clear (cuda:9);
#   - the MLP and CNN on cuda:1 with --math tf32, bf16 and fp16 (fp16 with dynamic loss scaling; 3 epochs),
#     to the same accuracy bars;
#   - the MLP on cuda:1 and the CNN on cuda:0,cuda:0 with --host-loader (the dataset in host memory,
#     batches staged to the GPU through page-locked buffers on the loader's copy stream);
#   - the MLP on cuda:0,cuda:0 with --zero (ZeRO-1: Adam's moments sharded over the two replicas), and
#     with --compress bf16 --zero (the gradients rounded through bfloat16);
#   - the MLP and CNN on cuda:1 with the FC engine CUBLASLT (the sample's model with "engine": "CUBLASLT" on
#     its FC ops: the bias and relu in the GEMM's epilogue), to the same bars;
#   - bench/run_gpu_bench.sh (1 round; --no-bench skips it).
# Exit status: the number of failed checks (0: all passed).
set -uo pipefail

build=${1:?usage: tools/gpu_acceptance.sh BUILD_DIR [--no-bench]}
bench=1
[[ ${2:-} == --no-bench ]] && bench=0
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
sample="$build/samples/train_fashion_mnist"
failed=0
shown=3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

check() {  # NAME SECONDS COMMAND...: runs it, its last $shown lines shown, PASS when it exits 0
  local name=$1 seconds=$2
  shift 2
  local start=$SECONDS out rc
  out=$(timeout "$seconds" "$@" 2>&1)
  rc=$?
  echo "$out" | tail -n "$shown" | sed 's/^/    /'
  if [[ $rc -eq 0 ]]; then
    echo "PASS $name ($((SECONDS - start)) s)"
  else
    echo "FAIL $name (exit $rc, $((SECONDS - start)) s)"
    failed=$((failed + 1))
  fi
}

check "mlp cuda:1 >= 0.88" 300 "$sample" --model mlp --devices cuda:1 --min-acc 0.88
check "cnn cuda:1 >= 0.91" 300 "$sample" --model cnn --devices cuda:1 --min-acc 0.91
check "mlp cuda:0,cuda:0 >= 0.88" 300 "$sample" --model mlp --devices cuda:0,cuda:0 --min-acc 0.88
check "cnn cuda:0,cuda:0 >= 0.91" 300 "$sample" --model cnn --devices cuda:0,cuda:0 --min-acc 0.91
check "checkpoint on cuda:1" 120 "$sample" --epochs 1 --devices cuda:1 --checkpoint "$tmp/gpu"
check "resume on cuda:1" 120 "$sample" --epochs 2 --devices cuda:1 --checkpoint "$tmp/gpu" --resume
check "cuda:1 checkpoint resumed on cpu:2" 300 "$sample" --epochs 2 --devices cpu:2 --checkpoint "$tmp/gpu" --resume
check "checkpoint on cpu:2" 300 "$sample" --epochs 1 --devices cpu:2 --checkpoint "$tmp/cpu"
check "cpu:2 checkpoint resumed on cuda:1" 120 "$sample" --epochs 2 --devices cuda:1 --checkpoint "$tmp/cpu" --resume
missing=$("$sample" --epochs 1 --devices cuda:9 2>&1)
if [[ $? -ne 0 && $missing == *cuda:9* ]]; then
  echo "PASS missing GPU named: $(echo "$missing" | tail -n 1)"
else
  echo "FAIL missing GPU error: $missing"
  failed=$((failed + 1))
fi
for math in tf32 bf16 fp16; do
  check "mlp cuda:1 --math $math >= 0.88" 300 "$sample" --model mlp --devices cuda:1 --math "$math" --min-acc 0.88
  check "cnn cuda:1 --math $math >= 0.91" 300 "$sample" --model cnn --devices cuda:1 --math "$math" --min-acc 0.91
done
check "mlp cuda:1 --host-loader >= 0.88" 300 "$sample" --model mlp --devices cuda:1 --host-loader --min-acc 0.88
check "cnn cuda:0,cuda:0 --host-loader >= 0.91" 300 "$sample" --model cnn --devices cuda:0,cuda:0 --host-loader \
  --min-acc 0.91
check "mlp cuda:0,cuda:0 --zero >= 0.88" 300 "$sample" --model mlp --devices cuda:0,cuda:0 --zero --min-acc 0.88
check "mlp cuda:0,cuda:0 --compress bf16 --zero >= 0.88" 300 "$sample" --model mlp --devices cuda:0,cuda:0 \
  --compress bf16 --zero --min-acc 0.88
for m in mlp cnn; do
  python3 "$root/tools/with_fc_engine.py" "$root/samples/nets/fashion_$m.json" "$tmp/fashion_${m}_cublaslt.json" CUBLASLT
done
check "mlp cuda:1 FC engine CUBLASLT >= 0.88" 300 "$sample" --model "$tmp/fashion_mlp_cublaslt.json" --devices cuda:1 \
  --min-acc 0.88
check "cnn cuda:1 FC engine CUBLASLT >= 0.91" 300 "$sample" --model "$tmp/fashion_cnn_cublaslt.json" --devices cuda:1 \
  --min-acc 0.91
shown=9  # the bench's summary table
[[ $bench -eq 1 ]] && check "bench (1 round)" 600 "$root/bench/run_gpu_bench.sh" --build "$build" --rounds 1

echo "gpu_acceptance: $failed failed"
exit "$failed"
