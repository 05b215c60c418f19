#!/usr/bin/env bash
# README's first command: installs the dependencies, configures and builds dp
# (with CUDA when the toolkit is at /usr/local/cuda), and runs the main sample.
set -euo pipefail
cd "$(dirname "$0")/.."

tools/install-deps.sh
[ -f build/build.ninja ] || meson setup build
ninja -C build
./build/samples/mlp_forward --nets samples/nets
