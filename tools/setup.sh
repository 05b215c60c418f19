#!/usr/bin/env bash
# README's first command: installs the dependencies, configures and builds dp
# (with CUDA when the toolkit is at /usr/local/cuda), and runs the main job:
# training the Fashion-MNIST MLP for 3 epochs on the CPU.
set -euo pipefail
cd "$(dirname "$0")/.."

tools/install-deps.sh
[ -f build/build.ninja ] || meson setup build
ninja -C build
./build/samples/train_fashion_mnist --model mlp --epochs 3
