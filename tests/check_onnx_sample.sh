#!/bin/sh
# The main job's model through ONNX (the sample_onnx_* tests): trained by
# train_fashion_mnist and exported with --export; samples/onnx_infer imports
# it and must classify the test images exactly as the sample's own inference
# net did (the same accuracy line: the same scores, bit for bit); then, where
# a python3 has torch and onnx, tests/onnx/onnx_reference.py runs the
# exported model on onnx_infer's first batch and must reproduce dp's outputs
# within 1e-4 (relative to each output's largest magnitude).
#   check_onnx_sample.sh OUT_DIR TRAIN_FASHION_MNIST ONNX_INFER TRAIN_ARGS...
# TRAIN_ARGS are the sample's; --limit/--test-limit among them bound both runs.
set -eu
out=$1
train=$2
infer=$3
shift 3
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$out"
mkdir -p "$out/dump"
test_limit=10000
prev=""
for a in "$@"; do
  [ "$prev" = "--test-limit" ] && test_limit=$a
  prev=$a
done

"$train" "$@" --export "$out/model.onnx" >"$out/train.log"
cat "$out/train.log"
grep -q "^exported ONNX model: $out/model.onnx$" "$out/train.log"
want=$(sed -n 's/^inference: \(test_acc=[0-9.]*\) .*/\1/p' "$out/train.log")
"$infer" "$out/model.onnx" --limit "$test_limit" --dump "$out/dump" >"$out/infer.log"
cat "$out/infer.log"
got=$(sed -n 's/^\(test_acc=[0-9.]*\) .*/\1/p' "$out/infer.log")
if [ -z "$want" ] || [ "$got" != "$want" ]; then
  echo "FAIL: onnx_infer's '$got' is not the sample's inference '$want'"
  exit 1
fi
echo "onnx_infer classifies as the sample's inference net: $got"

for py in python3 /usr/bin/python3; do
  if command -v "$py" >/dev/null 2>&1 && "$py" -c 'import torch, onnx' 2>/dev/null; then
    "$py" "$here/onnx/onnx_reference.py" --check-manifest "$out/dump/manifest.txt"
    exit $?
  fi
done
echo "(no python3 with torch and onnx: the reference run is left out)"
