#!/bin/sh
# Vets and tests the Go binding against a libdp build (default: build-cpu).
# Last line: "bindings-go: N passed, N failed, N skipped" (top-level tests
# and subtests, from go test -v); exits non-zero on any failure. Leaves no
# files in the source tree (Go's caches go to BUILD_DIR unless GOCACHE and
# GOPATH say otherwise, so a CI machine without a writable $HOME works).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$root/build-cpu}" && pwd) || { echo "bindings-go: 0 passed, 1 failed, 0 skipped"; exit 1; }

export PKG_CONFIG_PATH="$build/meson-uninstalled${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export LD_LIBRARY_PATH="$build/capi${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export DP_BUILD_DIR="$build"
# Offline: standard library only, nothing fetched.
export GOFLAGS=-mod=mod GOPROXY=off GOSUMDB=off GOTOOLCHAIN=local GO111MODULE=on
export GOCACHE="${GOCACHE:-$build/bindings-go-cache}" GOPATH="${GOPATH:-$build/bindings-go-path}"

cd "$here" || exit 1
log=$(mktemp "${TMPDIR:-/tmp}/bindings-go.XXXXXX")
trap 'rm -f "$log"' EXIT

rc=0
go vet ./... || rc=1
go test -v -count=1 -timeout 300s ./... >"$log" 2>&1 || rc=1
# The concurrency test again under the race detector (the binding's own
# state; TSan checks dp's side in tools/test.sh). Only that test: -race
# makes the rest several times slower for nothing they exercise.
go test -race -v -count=1 -timeout 300s -run '^TestConcurrentFeedFetch$' . >>"$log" 2>&1 || rc=1
cat "$log"

passed=$(grep -Ec '^[[:space:]]*--- PASS:' "$log")
failed=$(grep -Ec '^[[:space:]]*--- FAIL:' "$log")
skipped=$(grep -Ec '^[[:space:]]*--- SKIP:' "$log")
# A build failure, panic or timeout runs no test to report: count it.
if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi
[ "$failed" -ne 0 ] && rc=1
echo "bindings-go: $passed passed, $failed failed, $skipped skipped"
exit $rc
