#!/bin/sh
# Fails if the shared library exports any symbol outside the dp_* C API
# (C++ engine, FlatBuffers and libstdc++ inlines must stay hidden).
set -eu
lib="$1"
syms=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBRWVui]$/ {print $3}')
count=$(printf '%s\n' "$syms" | grep -c '^dp_' || true)
bad=$(printf '%s\n' "$syms" | grep -v '^dp_' | grep -v '^$' || true)
if [ -n "$bad" ]; then
  echo "symbols exported outside dp_*:"; printf '%s\n' "$bad" | head -20
  exit 1
fi
if [ "$count" -lt 30 ]; then
  echo "only $count dp_* symbols exported: the C API is missing"; exit 1
fi
echo "$count dp_* symbols exported, no others"
