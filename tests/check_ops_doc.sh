#!/bin/sh
# Fails when the committed docs/OPS.md differs from the reference the build
# generated from the op catalogue (tools/ops_doc), saying how to refresh it.
set -eu
generated="$1"
committed="$2"
if cmp -s "$generated" "$committed"; then
  echo "docs/OPS.md matches the op catalogue"
  exit 0
fi
echo "docs/OPS.md is stale: it differs from what this build's op catalogue generates ($generated):"
diff -u "$committed" "$generated" | head -60 || true
echo "Regenerate it with 'ninja -C <this build directory> ops-doc' (a build without CUDA), which copies"
echo "$generated to docs/OPS.md, and commit it."
exit 1
