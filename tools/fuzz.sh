#!/usr/bin/env bash
# Runs every libFuzzer target of a -Dfuzz=true build for a bounded time:
#   tools/fuzz.sh BUILD_DIR SECONDS_PER_TARGET [TARGET...]
# Each starts from the committed seeds (tests/fuzz/corpus/<target>) plus
# what earlier runs of this build found (BUILD_DIR/fuzz-corpus/<target>).
# Prints executions and coverage per target; a crash, sanitizer report,
# leak, timeout or broken promise fails it, and its input is kept under
# BUILD_DIR/fuzz-artifacts/ (once fixed, move it to
# tests/fuzz/regressions/<target>/, which the build's tests replay).
# Writes BUILD_DIR/fuzz-results.txt ("<target> ok|failed" per line).
set -uo pipefail
cd "$(dirname "$0")/.."
dir=$1
seconds=$2
shift 2
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(net_binary net_json model_binary model_json idx checkpoint store_address)

results="$dir/fuzz-results.txt"
: >"$results"
status=0
for t in "${targets[@]}"; do
  exe="$dir/tests/fuzz/fuzz_$t"
  work="$dir/fuzz-corpus/$t"
  artifacts="$dir/fuzz-artifacts/$t"
  log="$dir/fuzz-logs/$t.log"
  mkdir -p "$work" "$artifacts" "$(dirname "$log")"
  dict=()
  case $t in *json) dict=(-dict=tests/fuzz/json.dict) ;; esac
  # -timeout: one input may take at most 20 s; -rss_limit_mb also caps any
  # single allocation (malloc_limit_mb defaults to it).
  "$exe" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$artifacts/" "${dict[@]}" "$work" "tests/fuzz/corpus/$t" >"$log" 2>&1
  rc=$?
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  last=$(grep -E '^#[0-9]+' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' <<<"$last" | grep -o '[0-9]*')
  ft=$(grep -o 'ft: [0-9]*' <<<"$last" | grep -o '[0-9]*')
  corp=$(grep -o 'corp: [0-9]*' <<<"$last" | grep -o '[0-9]*')
  if [ $rc -eq 0 ]; then
    echo "== fuzz $t: ${execs:-?} executions in ${seconds} s, coverage ${cov:-?} edges / ${ft:-?} features, corpus ${corp:-?} inputs"
    echo "$t ok" >>"$results"
  else
    echo "== fuzz $t: FAILED (exit $rc) after ${execs:-?} executions; log $log; input kept in $artifacts/"
    grep -E 'ERROR|SUMMARY|broken promise|runtime error' "$log" | head -5
    echo "$t failed" >>"$results"
    status=1
  fi
done
exit $status
