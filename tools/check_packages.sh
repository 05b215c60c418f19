#!/usr/bin/env bash
# The Debian packages' clean-room check:
#   tools/check_packages.sh [--no-build | --for-tests] [OUT_DIR]
# builds dp's packages (dpkg-buildpackage -us -uc -b) from a copy of this
# checkout's tracked and unignored files in OUT_DIR/src (default build-deb;
# the .debs land in OUT_DIR), unpacks every one of them into a throw-away
# root (dpkg -x: no root privileges needed), and there builds and runs
#   - a C program found through pkg-config alone (tests/install/consumer.c),
#   - a C++ program found through CMake alone (find_package(dp 0.5 REQUIRED),
#     target dp::dp: tests/install),
#   - the Go binding's training example (bindings/go, cgo through pkg-config),
#   - a Java program against the installed dp.jar and libdp_jni.so,
# with no build tree on any path: each checks that the libdp it loaded is
# the root's. With libdp0-cuda among the packages, the installed libdp must
# load the installed module. --no-build checks the .debs already in OUT_DIR.
# --for-tests is tools/test.sh's CPU-only build: the packages without CUDA,
# with the test suite, samples and benchmarks built too (build profiles
# pkg.dp.nocuda and pkg.dp.tests, nocheck: tools/test.sh runs the suite in
# OUT_DIR/src/obj-<triplet>), so that one compilation gives both.
# Ends "check_packages: ok" or exits non-zero.
set -euo pipefail
cd "$(dirname "$0")/.."
build=1
profiles=${DEB_BUILD_PROFILES:-}
options=${DEB_BUILD_OPTIONS:-}
case "${1:-}" in
  --no-build) build=0; shift ;;
  --for-tests) profiles="pkg.dp.nocuda pkg.dp.tests $profiles"; options="nocheck noautodbgsym $options"; shift ;;
esac
out=$(realpath -m "${1:-build-deb}")
if [ $build = 1 ]; then
  src=$out/src
  rm -rf "$out"
  mkdir -p "$src"
  git ls-files -co --exclude-standard -z | tar --null -cf - -T - | tar -xf - -C "$src"
  start=$(date +%s)
  (cd "$src" && DEB_BUILD_PROFILES="$profiles" DEB_BUILD_OPTIONS="parallel=$(nproc) $options" \
    dpkg-buildpackage -us -uc -b) \
    >"$out/dpkg-buildpackage.log" 2>&1 || { tail -n 60 "$out/dpkg-buildpackage.log"; exit 1; }
  echo "== packages built in $(( $(date +%s) - start )) s${profiles:+ (profiles: $profiles)}"
  # What the build was given, for a second build of the same kind
  # (tools/check_reproducible.sh --package).
  printf 'DEB_BUILD_PROFILES=%q\nDEB_BUILD_OPTIONS=%q\n' "$profiles" "$options" >"$out/build-environment"
fi
ls "$out"/*.deb >/dev/null 2>&1 || { echo "no .deb in $out"; exit 1; }
echo "== checking:" "$(cd "$out" && ls ./*.deb | sed 's|^\./||' | tr '\n' ' ')"

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
for deb in "$out"/*.deb; do dpkg -x "$deb" "$root"; done
triplet=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
libdir=$root/usr/lib/$triplet
[ -e "$libdir/libdp.so.0" ] || { echo "libdp0 did not install $libdir/libdp.so.0"; exit 1; }
export PKG_CONFIG_PATH=$libdir/pkgconfig PKG_CONFIG_SYSROOT_DIR=$root
export LD_LIBRARY_PATH=$libdir
work=$root/work
mkdir -p "$work"

# run_from_root NAME COMMAND...: runs it once (stdout passes through) with the
# loader's trace on stderr, and fails unless it succeeded having mapped the
# root's libdp.
run_from_root() {
  local name=$1 trace=$work/$1.libs
  shift
  LD_DEBUG=libs "$@" 2>"$trace" || { echo "$name failed:"; grep -v '^ *[0-9]*:' "$trace"; exit 1; }
  grep -q "$libdir/libdp.so.0" "$trace" || { echo "$name did not load the installed libdp:"; cat "$trace"; exit 1; }
}

# C, through pkg-config.
# shellcheck disable=SC2046
cc -std=c11 -Wall -Wextra -pedantic -Werror tests/install/consumer.c $(pkg-config --cflags --libs dp) \
  -o "$work/consumer"
run_from_root c-consumer "$work/consumer" | tee "$work/c.out"
if ls "$out"/libdp0-cuda_*.deb >/dev/null 2>&1; then
  grep -q '^cuda_state=[156] ' "$work/c.out" || { echo "the installed libdp did not load libdp0-cuda's module"; exit 1; }
else
  grep -q '^cuda_state=[02] ' "$work/c.out" || { echo "without libdp0-cuda, a CUDA state is reported"; exit 1; }
fi

# C++, through CMake.
cmake -S tests/install -B "$work/cmake" -DCMAKE_PREFIX_PATH="$root/usr" -DDP_REQUEST=0.5 >"$work/cmake.log" 2>&1 ||
  { cat "$work/cmake.log"; exit 1; }
cmake --build "$work/cmake" >>"$work/cmake.log" 2>&1 || { cat "$work/cmake.log"; exit 1; }
run_from_root cmake-consumer "$work/cmake/consumer"

# Go: the binding's sources (not a build tree), cgo through pkg-config.
cp -r bindings/go "$work/go"
(cd "$work/go" && GOFLAGS=-mod=mod GOCACHE=$work/gocache GOPATH=$work/gopath \
  go build -o "$work/train" ./examples/train_fashion_mnist)
run_from_root go-example "$work/train" --epochs 1 --limit 2000 --nets samples/nets --min-acc 0.5 | tail -n 2

# Java: the installed jar and JNI library (on the JVM's library path here).
if [ -f "$root/usr/share/java/dp.jar" ]; then
  mkdir -p "$work/java"
  cat >"$work/java/Consumer.java" <<'JAVA'
public final class Consumer {
  public static void main(String[] args) {
    System.out.println("installed dp " + org.dp.Dp.version() + " via dp.jar");
  }
}
JAVA
  javac -cp "$root/usr/share/java/dp.jar" -d "$work/java" "$work/java/Consumer.java"
  run_from_root java-consumer java -Djava.library.path="$libdir/jni" -cp "$root/usr/share/java/dp.jar:$work/java" Consumer
fi
echo "check_packages: ok"
