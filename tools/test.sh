#!/usr/bin/env bash
# README's test command: builds and tests both configurations,
#   build      default (-Dcuda=auto: CUDA compiled and linked when the toolkit exists)
#   build-cpu  -Dcuda=disabled (CPU only)
# then the unit tests that drive threads (async, exec, core, collectives,
# parallelize) under ThreadSanitizer,
#   build-tsan -Dcuda=disabled -Db_sanitize=thread (only those tests' targets are built)
# and ends with one line "N passed, N failed" over all three.
set -euo pipefail
cd "$(dirname "$0")/.."

configs=("build:" "build-cpu:-Dcuda=disabled")
status=0
for c in "${configs[@]}"; do
  dir=${c%%:*}
  opts=${c#*:}
  if [ ! -f "$dir/build.ninja" ]; then
    # shellcheck disable=SC2086
    meson setup "$dir" $opts >/dev/null
  fi
  start=$(date +%s)
  ninja -C "$dir" >/dev/null
  echo "== $dir: built in $(( $(date +%s) - start )) s (options: ${opts:-default})"
  meson test -C "$dir" --print-errorlogs --num-processes 2 || status=1
done

# ThreadSanitizer over the tests that drive threads: the async executor, its
# worker pools and nets, the in-process collectives and data-parallel training
# (the whole suite under TSan would take far longer).
# OpenBLAS is not instrumented, so it runs single-threaded; any report fails
# the test (halt_on_error). No suppressions are needed.
tsan_dir=build-tsan
tsan_opts="-Dcuda=disabled -Db_sanitize=thread -Dbuildtype=debugoptimized -Dsamples=false"
tsan_tests=(async exec core collectives parallelize)
if [ ! -f "$tsan_dir/build.ninja" ]; then
  # shellcheck disable=SC2086
  meson setup "$tsan_dir" $tsan_opts >/dev/null
fi
start=$(date +%s)
ninja -C "$tsan_dir" "${tsan_tests[@]/#/tests/test_}" >/dev/null
echo "== $tsan_dir: built ${tsan_tests[*]} in $(( $(date +%s) - start )) s (options: $tsan_opts)"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1"
export OPENBLAS_NUM_THREADS=1
tsan_wrapper=()
# TSan (GCC 12) cannot map its shadow memory under high-entropy ASLR
# (vm.mmap_rnd_bits > 28 on recent kernels); run without ASLR there if we may.
if ! "$tsan_dir/tests/test_core" --count >/dev/null 2>&1 && setarch "$(uname -m)" -R true 2>/dev/null; then
  echo "== $tsan_dir: TSan does not start with this ASLR setting; running its tests under setarch -R"
  tsan_wrapper=(--wrapper "setarch $(uname -m) -R")
fi
# --no-rebuild: only the targets above are built; a plain `meson test` would
# build the whole project with TSan first.
meson test -C "$tsan_dir" --no-rebuild "${tsan_wrapper[@]}" --print-errorlogs --num-processes 2 "${tsan_tests[@]}" ||
  status=1

python3 - "${configs[@]%%:*}" "$tsan_dir" <<'PY'
import json, sys
passed = failed = skipped = 0
for d in sys.argv[1:]:
    with open(f"{d}/meson-logs/testlog.json") as f:
        for line in f:
            r = json.loads(line)["result"]
            if r in ("OK", "EXPECTEDFAIL"):
                passed += 1
            elif r == "SKIP":
                skipped += 1
            else:
                failed += 1
print(f"{passed} passed, {failed} failed, {skipped} skipped")
PY
exit $status
