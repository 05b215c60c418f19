#!/bin/sh
# ONNX models from PyTorch through dp (the `onnx_torch_models` test):
# torch_models.py exports them with their inputs and PyTorch's outputs,
# check_torch_models imports and runs each through the C API (outputs within
# 1e-4 of PyTorch's, the same bits after an export and an import) and
# exports it, and onnx_reference.py runs each exported model on its own and
# compares with dp's outputs. Generated afresh each run in OUT_DIR; nothing
# is kept in the repository.
#   check_torch_models.sh CHECKER OUT_DIR
# Exits 77 (skipped) when no python3 has torch, torchvision and onnx
# (Debian: python3-torch python3-torchvision python3-onnx).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
checker=$1
out=$2
py=""
for candidate in python3 /usr/bin/python3; do
  if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c 'import torch, torchvision, onnx' 2>/dev/null; then
    py=$candidate
    break
  fi
done
if [ -z "$py" ]; then
  echo "SKIP: no python3 with torch, torchvision and onnx (python3-torch python3-torchvision python3-onnx)"
  exit 77
fi
rm -rf "$out"
mkdir -p "$out/dp"
"$py" "$here/torch_models.py" "$out"
"$checker" "$out/manifest.txt" --export "$out/dp"
"$py" "$here/onnx_reference.py" --check-manifest "$out/dp/manifest.txt"
