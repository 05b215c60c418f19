#!/bin/sh
# `meson install` into a staging directory, then build and run a C program
# against the installed library using only `pkg-config --cflags --libs dp`,
# and a C++ program through the CMake package alone (find_package(dp), the
# target dp::dp; CMAKE_PREFIX_PATH at the install's prefix), and check that
# the CMake package refuses a newer or another major version than it is.
set -eu
build="$1"
src="$2"
cmake_consumer="$3"
version="$4"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
# (No --tags: Meson leaves the CMake files untagged.)
meson install -C "$build" --destdir "$stage" --no-rebuild --quiet
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
# A CUDA build installs its module in dp/ beside libdp, where libdp finds it.
if [ -f "$build/capi/dp/libdp_cuda.so" ]; then
  [ -f "$(dirname "$lib")/dp/libdp_cuda.so" ] || { echo "libdp_cuda.so was not installed in dp/ beside libdp"; exit 1; }
  grep -q '^cuda_state=[156] ' "$stage/out" || { echo "the installed libdp did not load its CUDA module"; exit 1; }
else
  grep -q '^cuda_state=0 ' "$stage/out" || { echo "a CPU-only build reports a CUDA state"; exit 1; }
fi

# CMake: the relocatable package config and its version file.
config=$(find "$stage" -name dpConfig.cmake | head -n 1)
[ -n "$config" ] || { echo "dpConfig.cmake was not installed"; exit 1; }
[ -f "$(dirname "$config")/dpConfigVersion.cmake" ] || { echo "dpConfigVersion.cmake was not installed"; exit 1; }
prefix=$(dirname "$(dirname "$(dirname "$(dirname "$config")")")")
# (<prefix>/<libdir>/cmake/dp/dpConfig.cmake; libdir may be lib/<triplet>.)
case "$config" in
  */lib/*/cmake/dp/dpConfig.cmake) prefix=$(dirname "$prefix") ;;
esac
[ -f "$prefix/include/dp/dp.h" ] || { echo "cannot find the install prefix above $config"; exit 1; }
major=${version%%.*}
minor=${version#*.}; minor=${minor%%.*}
cmake -S "$cmake_consumer" -B "$stage/cmake-build" -DCMAKE_PREFIX_PATH="$prefix" \
  -DDP_REQUEST="$major.$minor" >"$stage/cmake.log" 2>&1 || { cat "$stage/cmake.log"; exit 1; }
cmake --build "$stage/cmake-build" >>"$stage/cmake.log" 2>&1 || { cat "$stage/cmake.log"; exit 1; }
LD_LIBRARY_PATH=$(dirname "$lib") "$stage/cmake-build/consumer"
# The imported target's library is the installed one (relocated with the prefix).
grep -q "$stage" "$stage/cmake-build/CMakeFiles/consumer.dir/link.txt" ||
  { echo "the CMake consumer did not link the staged libdp"; exit 1; }
for request in "$major.$((minor + 1))" "$((major + 1)).0"; do
  if cmake -S "$cmake_consumer" -B "$stage/cmake-refused-$request" -DCMAKE_PREFIX_PATH="$prefix" \
      -DDP_REQUEST="$request" >"$stage/cmake-refused.log" 2>&1; then
    echo "find_package(dp $request) accepted dp $version"; exit 1
  fi
  grep -q "version: $version" "$stage/cmake-refused.log" ||
    { cat "$stage/cmake-refused.log"; echo "find_package(dp $request) failed for another reason"; exit 1; }
  echo "find_package(dp $request) refused: dp is $version"
done
