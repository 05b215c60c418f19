#!/usr/bin/env bash
# README's test command: builds and tests both configurations,
#   build      default (-Dcuda=auto: CUDA compiled and linked when the toolkit exists)
#   build-cpu  -Dcuda=disabled (CPU only)
# and ends with one line "N passed, N failed" over both.
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

python3 - "${configs[@]%%:*}" <<'PY'
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
