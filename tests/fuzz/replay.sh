#!/bin/sh
# Runs a fuzz target once over every file of the given directories (seeds and
# fixed findings): any crash, sanitizer report or broken promise fails.
set -eu
exe=$1; shift
files=""
for d in "$@"; do
  [ -d "$d" ] || continue
  for f in "$d"/*; do [ -f "$f" ] && files="$files $f"; done
done
if [ -z "$files" ]; then echo "no inputs in $*"; exit 1; fi
# shellcheck disable=SC2086
exec "$exe" -rss_limit_mb=2048 -timeout=60 $files
