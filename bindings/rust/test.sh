#!/bin/sh
# Builds and tests the Rust binding against a dp build directory.
# Usage: bindings/rust/test.sh [BUILD_DIR]   (default: <repo>/build-cpu)
# Last line: "bindings-rust: N passed, N failed, N skipped".
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:-$root/build-cpu}
build=$(cd "$build" && pwd) || { echo "bindings-rust: 0 passed, 1 failed, 0 skipped"; exit 1; }

export PKG_CONFIG_PATH="$build/meson-uninstalled${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export LD_LIBRARY_PATH="$build/capi${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CARGO_TARGET_DIR="$build/bindings-rust-target"
export DP_BUILD_DIR="$build"
# Debian's toolchain (Rust 1.63), never a rustup one earlier in PATH.
export PATH="/usr/bin:$PATH"
export RUSTC=/usr/bin/rustc
export CARGO_HOME="${CARGO_HOME:-$build/bindings-rust-cargo-home}"

log="$CARGO_TARGET_DIR/test.log"
mkdir -p "$CARGO_TARGET_DIR"
cd "$here" || exit 1
timeout 900 /usr/bin/cargo test --offline -j 2 -- --test-threads=2 >"$log" 2>&1
rc=$?
cat "$log"
# Cargo.lock is generated (no dependencies); keep the source tree clean.
rm -f "$here/Cargo.lock"

passed=0; failed=0; skipped=0
eval "$(awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i; if ($(i+1) ~ /^ignored/) s += $i } }
           END { printf "passed=%d failed=%d skipped=%d\n", p, f, s }' "$log")"
if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi   # build error or timeout
echo "bindings-rust: $passed passed, $failed failed, $skipped skipped"
[ "$rc" -eq 0 ] && [ "$failed" -eq 0 ]
