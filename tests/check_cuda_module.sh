#!/bin/sh
# CUDA as a module (libdp_cuda.so, loaded on demand; see dp_build_info in
# dp.h). In every build: libdp.so needs no CUDA library (DT_NEEDED) and a
# process working on the CPU maps none (test_cuda_module). In a CUDA build,
# also: the module sits in dp/ beside libdp.so and brings the CUDA libraries, and
# without it, with a module whose CUDA libraries are missing, or with
# another build's module, dp has zero CUDA devices and cuda_state says which.
#
#   check_cuda_module.sh PROBE LIBDP [MODULE]      (MODULE: the CUDA build's libdp_cuda.so)
#   check_cuda_module.sh --rss PROBE               a CPU process's resident set after
#       dp_version, linked against this (CUDA) build and against the CPU-only build in
#       $DP_CPU_BUILD (the median of 5 runs each): at most 2 MiB apart. Skipped (exit 77)
#       without DP_CPU_BUILD; tools/test.sh sets it.
set -eu

if [ "$1" = --rss ]; then
  probe=$2
  cpu_probe=${DP_CPU_BUILD:+$DP_CPU_BUILD/tests/test_cuda_module}
  if [ -z "$cpu_probe" ] || [ ! -x "$cpu_probe" ]; then
    echo "skipped: no CPU-only build's probe to compare with (tools/test.sh passes DP_CPU_BUILD)"
    exit 77
  fi
  median() {
    for _ in 1 2 3 4 5; do "$1" rss; done | sort -n | sed -n 3p
  }
  with_cuda=$(median "$probe")
  cpu_only=$(median "$cpu_probe")
  diff=$((with_cuda - cpu_only))
  echo "RSS after dp_version: CUDA build $with_cuda kB, CPU-only build $cpu_only kB (difference $diff kB)"
  [ "$diff" -le 2048 ] && [ "$diff" -ge -2048 ] || { echo "more than 2 MiB apart"; exit 1; }
  exit 0
fi

probe=$1
libdp=$2
module=${3:-}
fail=0

needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }
cuda_libs='libcudart|libcublas|libnccl|libcuda\.so|libdp_cuda'
if needed "$libdp" | grep -E "$cuda_libs"; then
  echo "FAIL: $libdp needs the CUDA libraries above"
  fail=1
else
  echo "ok: $libdp needs no CUDA library"
fi

run() {  # run EXPECTED [ENV=VALUE]: the probe with that environment
  expected=$1
  shift
  if env "$@" "$probe" check "$expected" >"$tmp/out" 2>&1; then
    echo "ok: ${*:-default}: $(grep '^cuda=' "$tmp/out")"
  else
    echo "FAIL: ${*:-default} (expected cuda_state $expected):"
    cat "$tmp/out"
    fail=1
  fi
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [ -z "$module" ]; then
  run 0
  # Built without CUDA, the override changes nothing.
  run 0 DP_CUDA_MODULE="$tmp/libdp_cuda.so"
  exit $fail
fi

if needed "$module" | grep -q libcudart; then
  echo "ok: the module needs the CUDA runtime: $(needed "$module" | tr '\n' ' ')"
else
  echo "FAIL: $module does not link the CUDA runtime"
  fail=1
fi
[ "$(dirname "$module")" = "$(dirname "$libdp")/dp" ] || { echo "FAIL: the module is not in dp/ beside libdp"; fail=1; }

# Found in dp/ beside libdp: loads (whether a driver and a GPU are there or not).
run loaded -u DP_CUDA_MODULE
# Not there.
run 2 DP_CUDA_MODULE="$tmp/missing/libdp_cuda.so"
# There, but a library it needs is not: a module linked against a library
# that is then removed.
echo 'int dp_test_gone(void) { return 1; }' >"$tmp/gone.c"
echo 'int dp_test_gone(void); int dp_test_uses_gone(void) { return dp_test_gone(); }' >"$tmp/module.c"
mkdir "$tmp/broken"
cc -shared -fPIC -o "$tmp/libdp_test_gone.so" "$tmp/gone.c"
cc -shared -fPIC -o "$tmp/broken/libdp_cuda.so" "$tmp/module.c" -L"$tmp" -ldp_test_gone
rm "$tmp/libdp_test_gone.so"
run 3 DP_CUDA_MODULE="$tmp/broken/libdp_cuda.so"
# Another library where the module should be (no entry point): a mismatch.
run 4 DP_CUDA_MODULE="$libdp"
exit $fail
