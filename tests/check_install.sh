#!/bin/sh
# `meson install` into a staging directory, then build and run a C program
# against the installed library using only `pkg-config --cflags --libs dp`.
set -eu
build="$1"
src="$2"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
meson install -C "$build" --destdir "$stage" --no-rebuild --quiet --tags runtime,devel
pc=$(find "$stage" -name dp.pc | head -n 1)
[ -n "$pc" ] || { echo "dp.pc was not installed"; exit 1; }
lib=$(find "$stage" -name 'libdp.so.0' | head -n 1)
[ -n "$lib" ] || { echo "libdp.so.0 (soname link) was not installed"; exit 1; }
[ -f "$(dirname "$lib")/libdp.so" ] || { echo "libdp.so (dev link) was not installed"; exit 1; }
soname=$(readelf -d "$lib" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
[ "$soname" = "libdp.so.0" ] || { echo "soname is '$soname', expected libdp.so.0"; exit 1; }
flags=$(PKG_CONFIG_PATH=$(dirname "$pc") PKG_CONFIG_SYSROOT_DIR="$stage" pkg-config --cflags --libs dp)
echo "pkg-config: $flags"
cc -std=c11 -Wall -Wextra -pedantic -Werror "$src" $flags -o "$stage/consumer"
LD_LIBRARY_PATH=$(dirname "$lib") "$stage/consumer" | tee "$stage/out"
# A CUDA build installs its module beside libdp, where libdp finds it.
if [ -f "$build/capi/libdp_cuda.so" ]; then
  [ -f "$(dirname "$lib")/libdp_cuda.so" ] || { echo "libdp_cuda.so was not installed beside libdp"; exit 1; }
  grep -q '^cuda_state=[156] ' "$stage/out" || { echo "the installed libdp did not load its CUDA module"; exit 1; }
else
  grep -q '^cuda_state=0 ' "$stage/out" || { echo "a CPU-only build reports a CUDA state"; exit 1; }
fi
