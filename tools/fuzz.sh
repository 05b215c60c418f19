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
# Targets run in parallel, DP_FUZZ_JOBS at a time (default: the CPU count).
set -uo pipefail
cd "$(dirname "$0")/.."
dir=$1
seconds=$2
shift 2
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(net_binary net_json model_binary model_json idx checkpoint store_address)
  [ -x "$dir/tests/fuzz/fuzz_onnx" ] && targets+=(onnx)  # in builds with ONNX
fi

results="$dir/fuzz-results.txt"
: >"$results"
# Targets run DP_FUZZ_JOBS at a time (default: one per CPU; each libFuzzer
# process is single-threaded).
jobs=${DP_FUZZ_JOBS:-$(nproc)}

# Fuzzes one target; writes its summary to $dir/fuzz-logs/<t>.summary and
# "<t> ok|failed" to $dir/fuzz-logs/<t>.result.
fuzz_one() {
  local t=$1
  local exe="$dir/tests/fuzz/fuzz_$t"
  local work="$dir/fuzz-corpus/$t"
  local artifacts="$dir/fuzz-artifacts/$t"
  local log="$dir/fuzz-logs/$t.log"
  mkdir -p "$work" "$artifacts" "$(dirname "$log")"
  local dict=()
  case $t in *json) dict=(-dict=tests/fuzz/json.dict) ;; esac
  # -timeout: one input may take at most 20 s; -rss_limit_mb also caps any
  # single allocation (malloc_limit_mb defaults to it).
  "$exe" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$artifacts/" "${dict[@]}" "$work" "tests/fuzz/corpus/$t" >"$log" 2>&1
  local rc=$?
  local execs last cov ft corp
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  last=$(grep -E '^#[0-9]+' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' <<<"$last" | grep -o '[0-9]*')
  ft=$(grep -o 'ft: [0-9]*' <<<"$last" | grep -o '[0-9]*')
  corp=$(grep -o 'corp: [0-9]*' <<<"$last" | grep -o '[0-9]*')
  if [ $rc -eq 0 ]; then
    echo "== fuzz $t: ${execs:-?} executions in ${seconds} s, coverage ${cov:-?} edges / ${ft:-?} features, corpus ${corp:-?} inputs" \
      >"$dir/fuzz-logs/$t.summary"
    echo "$t ok" >"$dir/fuzz-logs/$t.result"
  else
    {
      echo "== fuzz $t: FAILED (exit $rc) after ${execs:-?} executions; log $log; input kept in $artifacts/"
      grep -E 'ERROR|SUMMARY|broken promise|runtime error' "$log" | head -5
    } >"$dir/fuzz-logs/$t.summary"
    echo "$t failed" >"$dir/fuzz-logs/$t.result"
  fi
}

mkdir -p "$dir/fuzz-logs"
running=0
for t in "${targets[@]}"; do
  rm -f "$dir/fuzz-logs/$t.result" "$dir/fuzz-logs/$t.summary"
  fuzz_one "$t" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then
    wait -n
    running=$((running - 1))
  fi
done
wait
status=0
for t in "${targets[@]}"; do
  cat "$dir/fuzz-logs/$t.summary" 2>/dev/null || echo "== fuzz $t: no result"
  result=$(cat "$dir/fuzz-logs/$t.result" 2>/dev/null || echo "$t failed")
  echo "$result" >>"$results"
  [ "$result" = "$t ok" ] || status=1
done
exit $status
