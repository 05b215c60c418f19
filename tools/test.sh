#!/usr/bin/env bash
# README's test command: builds and tests both configurations,
#   build      default, unity (-Dcuda=auto: CUDA compiled, and the CUDA module linked, when
#              the toolkit exists; the CUDA, C API, sample and package tests: what
#              CUDA changes; only their targets are built)
# then the CPU-only build, which is the Debian package build (-Dcuda=disabled,
# Debian's compiler flags, a unity build, the test suite built too: tools/check_packages.sh
# --for-tests), in build-deb/src/obj-<triplet>: the packages are installed in a
# throw-away root and C (pkg-config), C++ (CMake), Go and Java consumers
# built and run against them alone; its libdp.so.0 is built a second time
# from a copy at another path and must be the same bytes
# (tools/check_reproducible.sh --package); the whole suite runs in its tree,
# including the ABI guard (tools/check_abi.py against abi/),
# and compares a CPU process's resident set against the two (cuda_module_rss),
# then the Go, Rust and Java bindings' suites (bindings/<lang>/test.sh)
# against the CPU-only build's libdp,
# then the whole suite under AddressSanitizer + UndefinedBehaviorSanitizer
# (clang, recovery off), with the fuzz targets built and each fuzzed for a
# bounded time (DP_FUZZ_SECONDS, default 30, two targets at a time),
#   build-san  CC=clang -Dcuda=disabled -Db_sanitize=address,undefined -Dfuzz=true -Dunity=on
# then the unit tests that drive threads (async, exec, core, data, optimizers, collectives, comm, shm,
# parallelize, checkpoint, caching allocator) and the C API's workspace threads and inference (serving) tests under
# ThreadSanitizer, in the one build without ONNX, whose refusals the C API's onnx_api test checks there,
#   build-tsan -Dcuda=disabled -Donnx=disabled -Db_sanitize=thread -Dunity=on (only those tests' targets are built)
# and ends with one line "N passed, N failed, N skipped" over all of them
# (a fuzz finding counts as a failed test).
set -euo pipefail
cd "$(dirname "$0")/.."

status=0
# The default (CUDA) build runs what its CUDA parts change: the CUDA unit
# tests (zero devices reported gracefully, CUDA ops and collectives refusing
# cleanly; their GPU cases skip without a GPU; every CUDA kernel has a
# parity case), the C API and sample tests
# and the package checks (exports, install). The CPU-only suites (unit,
# multiprocess jobs, failure injection) run in the CPU-only build and under
# the sanitizers: the same CPU code, without each of their hundreds of
# process starts loading the CUDA libraries.
select=(--suite capi --suite samples --suite package --suite gpu)
# Unity builds, here and in the other builds of this script: Meson compiles
# each target's sources 8 to a compiler run, so headers are parsed once per
# group; on two cores that takes a third or more off every build. A plain
# `meson setup` (a developer's) compiles file by file.
[ -f build/build.ninja ] || meson setup build -Dunity=on -Dunity_size=8 >/dev/null
start=$(date +%s)
# The CUDA build compiles only what its tests run (tools/test_targets.py).
read -r -a targets <<<"$(tools/test_targets.py build "${select[@]}" --test cuda --test cuda_collectives \
  --test device_parity)"
ninja -C build "${targets[@]}" >/dev/null
echo "== build: built in $(( $(date +%s) - start )) s (options: default, unity)"
meson test -C build --no-rebuild --print-errorlogs --num-processes 2 "${select[@]}" || status=1
# (Test names and suites intersect in one `meson test`: the CUDA unit tests
# run on their own, logged as testlog-cuda; device_parity among them, as only
# a CUDA build has the CUDA kernels it checks each have a parity case.)
meson test -C build --no-rebuild --print-errorlogs --logbase testlog-cuda cuda cuda_collectives device_parity ||
  status=1

# The CPU-only build: the Debian packages' build, checked installed (a
# result line of its own), then its tree's whole suite. It is rebuilt from
# a fresh copy of the checkout every time (as a package build must be).
results=$PWD/build/test-results.txt
: >"$results"
start=$(date +%s)
if tools/check_packages.sh --for-tests build-deb; then
  echo "packages: 1 passed, 0 failed, 0 skipped" >>"$results"
else
  echo "packages: 0 passed, 1 failed, 0 skipped" >>"$results"
  status=1
fi
cpu_dir=build-deb/src/obj-$(dpkg-architecture -qDEB_HOST_MULTIARCH)
echo "== $cpu_dir: packages built and checked in $(( $(date +%s) - start )) s"
# Reproducible: the package build's libdp.so.0 built again from a copy at
# another path, with the same profiles, flags and SOURCE_DATE_EPOCH, is the
# same bytes (libdp alone: ~3 min).
if tools/check_reproducible.sh --package build-deb; then
  echo "reproducible: 1 passed, 0 failed, 0 skipped" >>"$results"
else
  echo "reproducible: 0 passed, 1 failed, 0 skipped" >>"$results"
  status=1
fi
meson test -C "$cpu_dir" --no-rebuild --print-errorlogs --num-processes 2 || status=1

# CUDA as a module: a process on the CPU pays nothing for a CUDA build — its
# resident set after dp_version is the CPU-only build's within 2 MiB
# (tests/check_cuda_module.sh --rss; only where the default build has CUDA).
if meson test -C build --list 2>/dev/null | grep -q cuda_module_rss; then
  DP_CPU_BUILD=$PWD/$cpu_dir meson test -C build --no-rebuild --print-errorlogs --logbase testlog-rss \
    cuda_module_rss || status=1
fi

# The Go, Rust and Java bindings, each with its own runner (go test, cargo
# test, the JUnit console launcher), against the CPU-only build's libdp.
# Each bindings/<lang>/test.sh ends with "bindings-<lang>: N passed, N
# failed, N skipped"; its whole output is in <the CPU build>/bindings-<lang>.log.
for lang in go rust java; do
  script=bindings/$lang/test.sh
  [ -f "$script" ] || continue
  log=$cpu_dir/bindings-$lang.log
  start=$(date +%s)
  if bash "$script" "$PWD/$cpu_dir" >"$log" 2>&1; then result=ok; else result=failed; status=1; fi
  line=$(grep -E "^bindings-$lang: [0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$" "$log" | tail -n 1 || true)
  echo "== bindings/$lang: $result in $(( $(date +%s) - start )) s: ${line:-no result line}"
  [ "$result" = ok ] || tail -n 60 "$log"
  echo "${line:-bindings-$lang: 0 passed, 0 failed, 0 skipped}" >>"$results"
  # A suite that failed counts at least one failure, whatever its line says.
  if [ "$result" = failed ] && ! [[ $line =~ [1-9][0-9]*\ failed ]]; then
    echo "bindings-$lang: 0 passed, 1 failed, 0 skipped" >>"$results"
  fi
done

# ASan + UBSan over every unit, C API, sample and fuzz-replay test, then
# each fuzz target for a bounded time. Any report aborts its process.
san_dir=build-san
# -O1 (what the sanitizers' authors recommend) and line tables only
# (-gline-tables-only): reports still name files and lines, and the build
# takes far less time than at -O2 with full debug info.
san_opts="-Dcuda=disabled -Db_sanitize=address,undefined -Db_lundef=false -Ddebug=true -Doptimization=1 -Dfuzz=true
  -Dbench=false -Dunity=on -Dunity_size=8 -Dc_args=['-fno-sanitize-recover=all','-gline-tables-only']
  -Dcpp_args=['-fno-sanitize-recover=all','-gline-tables-only']"
if [ ! -f "$san_dir/build.ninja" ]; then
  # shellcheck disable=SC2086
  CC=clang CXX=clang++ meson setup "$san_dir" $san_opts >/dev/null
fi
start=$(date +%s)
ninja -C "$san_dir" >/dev/null
echo "== $san_dir: built in $(( $(date +%s) - start )) s (options: CC=clang $(echo $san_opts))"
export ASAN_OPTIONS="abort_on_error=1:detect_stack_use_after_return=1:strict_string_checks=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
# The package checks (exported symbols, install) are the plain builds' job:
# a sanitizer runtime changes what a shared library imports. The timeouts
# double: ASan runs the samples and the threaded tests 2-7x slower, too near
# their limits on 2 cores beside a second test.
meson test -C "$san_dir" --no-rebuild --print-errorlogs --num-processes 2 --timeout-multiplier 2 --no-suite package ||
  status=1
tools/fuzz.sh "$san_dir" "${DP_FUZZ_SECONDS:-30}" || status=1

# ThreadSanitizer over the tests that drive threads: the async executor, its
# worker pools and nets, the compute team (core), the device memory
# allocator's lock (caching_allocator), the loader's thread (data),
# updates in parts (optimizers), the in-process collectives and data-parallel
# training, feeds and fetches from many threads through the C API
# (workspace_threads) and serving one model from threads (inference), whose
# libdp is built with TSan too; the whole suite under TSan would take far
# longer.
# OpenBLAS is not instrumented, so it runs single-threaded; any report fails
# the test (halt_on_error). No suppressions are needed.
tsan_dir=build-tsan
# It is also the build without ONNX (-Donnx=disabled; every other build has
# it): onnx_api checks there that dp's ONNX functions say they are missing.
tsan_opts="-Dcuda=disabled -Donnx=disabled -Db_sanitize=thread -Ddebug=true -Doptimization=1 -Dsamples=false
  -Dc_args=-g1 -Dcpp_args=-g1 -Dunity=on -Dunity_size=8"
tsan_tests=(async exec core caching_allocator data optimizers collectives comm shm parallelize memory_plan checkpoint
  workspace_threads inference onnx_api)
if [ ! -f "$tsan_dir/build.ninja" ]; then
  # shellcheck disable=SC2086
  meson setup "$tsan_dir" $tsan_opts >/dev/null
fi
start=$(date +%s)
ninja -C "$tsan_dir" "${tsan_tests[@]/#/tests/test_}" >/dev/null
echo "== $tsan_dir: built ${tsan_tests[*]} in $(( $(date +%s) - start )) s (options: $tsan_opts)"
# tools/tsan.supp: Gloo's socket I/O between ranks that are threads of one test process.
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/tools/tsan.supp"
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

python3 - "$results" build "$cpu_dir" "$san_dir" "$tsan_dir" <<'PY'
import glob, json, os, re, sys
passed = failed = skipped = 0
# The packages' check and the bindings' suites: "<name>: N passed, N failed, N skipped".
for line in open(sys.argv.pop(1)):
    m = re.match(r"[\w-]+: (\d+) passed, (\d+) failed, (\d+) skipped", line)
    if m:
        passed += int(m[1])
        failed += int(m[2])
        skipped += int(m[3])
    else:
        failed += 1
# tools/fuzz.sh leaves one line per target: "<name> ok|failed".
fuzz = os.path.join(sys.argv[-2], "fuzz-results.txt")
if os.path.exists(fuzz):
    for line in open(fuzz):
        if line.split()[1:2] == ["ok"]:
            passed += 1
        else:
            failed += 1
else:
    failed += 1
for log in [p for d in sys.argv[1:] for p in sorted(glob.glob(f"{d}/meson-logs/testlog*.json"))]:
    with open(log) as f:
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
