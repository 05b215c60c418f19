#!/bin/sh
# Builds (if needed) and tests the Java binding:  test.sh [BUILD_DIR]
# BUILD_DIR defaults to <repo>/build-cpu. Test classes go to
# BUILD_DIR/bindings/java/test-classes; nothing is written into the sources.
# The last line is "bindings-java: N passed, N failed, N skipped".
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-$root/build-cpu}
build=$(cd "$build" && pwd) || { echo "bindings-java: no build directory $1"; exit 1; }
out=$build/bindings/java
junit=${JUNIT_CONSOLE:-/usr/share/java/junit-platform-console-standalone.jar}

# The jar and JNI library come from Meson (bindings/java/meson.build).
if [ ! -f "$out/dp.jar" ] || [ ! -f "$out/libdp_jni.so" ] || [ "${DP_JAVA_REBUILD:-1}" = 1 ]; then
  ninja -C "$build" bindings/java/dp.jar bindings/java/libdp_jni.so samples/train_fashion_mnist >/dev/null ||
    { ninja -C "$build" bindings/java/dp.jar bindings/java/libdp_jni.so samples/train_fashion_mnist; \
      echo "bindings-java: 0 passed, 1 failed, 0 skipped"; exit 1; }
fi
if [ ! -f "$out/dp.jar" ] || [ ! -f "$out/libdp_jni.so" ]; then
  echo "$out has no dp.jar/libdp_jni.so: was Meson configured with a JDK (-Djava=enabled)?"
  echo "bindings-java: 0 passed, 1 failed, 0 skipped"
  exit 1
fi

rm -rf "$out/test-classes" "$out/test-tmp"
mkdir -p "$out/test-classes"
if ! javac -encoding UTF-8 -d "$out/test-classes" -cp "$out/dp.jar:$junit" \
    "$here"/src/test/java/org/dp/*.java $(ls "$here"/examples/*.java 2>/dev/null); then
  echo "bindings-java: 0 passed, 1 failed, 0 skipped"
  exit 1
fi

log=$out/test-output.txt
LD_LIBRARY_PATH="$build/capi:$out${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
timeout --kill-after=10 "${DP_JAVA_TEST_TIMEOUT:-600}" \
  java -Xss2m -Xmx512m -Xcheck:jni -Djava.library.path="$out" \
    -Ddp.source.root="$root" -Ddp.build.root="$build" \
    -Djunit.jupiter.execution.timeout.default="180 s" \
    -jar "$junit" --disable-banner --details=tree --disable-ansi-colors \
    --class-path "$out/dp.jar:$out/test-classes" --select-package org.dp >"$log" 2>&1
rc=$?
cat "$log"
rm -rf "$out/test-tmp"

num() { sed -n "s/^\[ *\([0-9][0-9]*\) tests $1 *\].*/\1/p" "$log" | head -n 1; }
passed=$(num successful)
failed=$(num failed)
skipped=$(num skipped)
aborted=$(num aborted)
if [ -z "$passed" ]; then
  echo "bindings-java: 0 passed, 1 failed, 0 skipped"
  exit 1
fi
failed=$((failed + ${aborted:-0}))
echo "bindings-java: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ] && [ "$rc" -eq 0 ]
