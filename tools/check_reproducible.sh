#!/usr/bin/env bash
# Reproducible builds: two builds of this commit, from copies of the checkout
# at different paths (of different lengths), in build directories of
# different names, one after the other, give the same libdp.so.0 bytes.
#   tools/check_reproducible.sh [OUT_DIR] [MESON_OPTION...]
# (default OUT_DIR build-repro; options default to the CPU-only release
# library alone: -Dcuda=disabled -Dtests=false -Dsamples=false -Dbench=false
# -Djava=disabled). SOURCE_DATE_EPOCH is the commit's time, as a package
# build sets it. Ends "check_reproducible: ok" or exits non-zero, showing
# where the two libraries differ. Not part of tools/test.sh: it compiles the
# engine twice (~8 min on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:-build-repro}")
shift || true
opts=("$@")
[ ${#opts[@]} -gt 0 ] || opts=(-Dcuda=disabled -Dtests=false -Dsamples=false -Dbench=false -Djava=disabled)
rm -rf "$out"
epoch=$(git log -1 --format=%ct)
build() {  # SOURCE_COPY BUILD_NAME
  mkdir -p "$1"
  git ls-files -co --exclude-standard -z | tar --null -cf - -T - | tar -xf - -C "$1"
  (cd "$1" && SOURCE_DATE_EPOCH=$epoch meson setup "$2" "${opts[@]}" >/dev/null &&
    SOURCE_DATE_EPOCH=$epoch meson compile -C "$2" capi/dp >/dev/null)
}
start=$(date +%s)
build "$out/a/src" build-a
build "$out/the-second-copy/of/the/checkout/src" other-build
echo "== two builds in $(( $(date +%s) - start )) s"
a=$(find "$out/a/src/build-a/capi" -name 'libdp.so.0.*' -type f)
b=$(find "$out/the-second-copy/of/the/checkout/src/other-build/capi" -name 'libdp.so.0.*' -type f)
if cmp -s "$a" "$b"; then
  echo "check_reproducible: ok: libdp.so.0 is byte-identical ($(sha256sum <"$a" | cut -c1-16)…, $(stat -c %s "$a") bytes)"
  exit 0
fi
echo "check_reproducible: FAIL: the two libdp.so.0 differ ($(cmp -l "$a" "$b" | wc -l) bytes):"
for s in $(readelf -SW "$a" | sed -n 's/^ *\[ *[0-9]*\] \([^ ]*\) .*/\1/p'); do
  if ! cmp -s <(objcopy -O binary --only-section="$s" "$a" /dev/stdout 2>/dev/null) \
              <(objcopy -O binary --only-section="$s" "$b" /dev/stdout 2>/dev/null); then
    echo "  section $s differs"
  fi
done
exit 1
