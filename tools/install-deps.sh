#!/usr/bin/env bash
# Installs dp's build and test dependencies from Debian's packages.
# Skips apt entirely when everything is already installed.
set -euo pipefail

packages=(
  meson ninja-build pkg-config g++ python3 binutils
  flatbuffers-compiler libflatbuffers-dev doctest-dev
  libgloo-dev libopenblas-dev zlib1g-dev
  libxxhash-dev              # checkpoint checksums (XXH3)
  libdnnl-dev                # oneDNN: the CPU convolution and pooling backend (-Ddnnl=auto)
  dataset-fashion-mnist
  clang libclang-rt-14-dev   # the sanitizer build and libFuzzer (tools/test.sh, tools/fuzz.sh)
  redis-server               # the Redis store of the multi-process tests (tests/multiprocess)
  golang-go rustc cargo      # the Go and Rust bindings (bindings/go, bindings/rust)
  default-jdk-headless junit5  # the Java binding and its JUnit 5 console launcher (bindings/java)
  cmake                      # the CMake package's consumer test (tests/install)
  debhelper dpkg-dev fakeroot  # the Debian packages (debian/, tools/check_packages.sh)
  abigail-tools              # the ABI guard: abidw, abidiff (tools/check_abi.sh)
  libonnx-dev libprotobuf-dev  # ONNX import and export (-Donnx=auto: src/onnx_io)
  python3-torch python3-torchvision python3-onnx  # the ONNX tests' reference models and runs (tests/onnx)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
