#!/usr/bin/env bash
# Reproducible builds: two builds of this commit, from copies of the checkout
# at different paths (of different lengths), give the same libdp.so.0 bytes.
#   tools/check_reproducible.sh --package OUT_DIR
# (tools/test.sh's check) builds again the library of the package build that
# tools/check_packages.sh left in OUT_DIR (OUT_DIR/src/obj-<triplet>): the
# same files copied to another path, configured by debian/rules with the
# same build profiles and options (dpkg-buildpackage -T
# override_dh_auto_configure: Debian's compiler flags and SOURCE_DATE_EPOCH
# from debian/changelog, as in the package build), libdp.so.0 alone
# compiled (~3 min on 2 cores) and compared with the first byte for byte,
# debug info included (the pkg.dp.tests profile compiles the C API with -g).
#   tools/check_reproducible.sh [OUT_DIR] [MESON_OPTION...]
# two plain Meson builds, one after the other, in build directories of
# different names (default OUT_DIR build-repro; options default to the
# CPU-only release library alone: -Dcuda=disabled -Dtests=false
# -Dsamples=false -Dbench=false -Djava=disabled), SOURCE_DATE_EPOCH the
# commit's time (~8 min on 2 cores).
# Ends "check_reproducible: ok" or exits non-zero, showing which sections of
# the two libraries differ.
set -euo pipefail
cd "$(dirname "$0")/.."
copy() {  # FROM_DIR TO_DIR: this checkout's tracked and unignored files, as they are in FROM_DIR
  mkdir -p "$2"
  git ls-files -co --exclude-standard -z | tar --null -C "$1" -cf - -T - | tar -xf - -C "$2"
}
start=$(date +%s)
if [ "${1:-}" = --package ]; then
  pkg=$(realpath -m "${2:?usage: $0 --package OUT_DIR}")
  [ -f "$pkg/build-environment" ] || { echo "check_reproducible: no package build in $pkg (tools/check_packages.sh)"; exit 1; }
  tree=obj-$(dpkg-architecture -qDEB_HOST_MULTIARCH)
  a=$(find "$pkg/src/$tree/capi" -maxdepth 1 -name 'libdp.so.0.*' -type f)
  [ -n "$a" ] || { echo "check_reproducible: no libdp.so.0 in $pkg/src/$tree/capi"; exit 1; }
  second=$pkg-repro/a-second-copy/of/the/checkout/src
  rm -rf "$pkg-repro"
  copy "$pkg/src" "$second" ||
    { echo "check_reproducible: $pkg/src is not a copy of this checkout's files (build it again: tools/check_packages.sh)"; exit 1; }
  log=$pkg-repro/build.log
  # shellcheck disable=SC1091
  (cd "$second" && set -a && . "$pkg/build-environment" && set +a &&
    dpkg-buildpackage -us -uc -d -T override_dh_auto_configure &&
    SOURCE_DATE_EPOCH=$(dpkg-parsechangelog -STimestamp) ninja -C "$tree" "capi/$(basename "$a")") >"$log" 2>&1 ||
    { tail -n 40 "$log"; echo "check_reproducible: FAIL: the second build failed (its log: $log)"; exit 1; }
  b=$second/$tree/capi/$(basename "$a")
  echo "== the package build's libdp built again in $(( $(date +%s) - start )) s ($(tr '\n' ' ' <"$pkg/build-environment"))"
  cleanup=$pkg-repro
else
  out=$(realpath -m "${1:-build-repro}")
  shift || true
  opts=("$@")
  [ ${#opts[@]} -gt 0 ] || opts=(-Dcuda=disabled -Dtests=false -Dsamples=false -Dbench=false -Djava=disabled)
  rm -rf "$out"
  epoch=$(git log -1 --format=%ct)
  build() {  # SOURCE_COPY BUILD_NAME
    copy . "$1"
    (cd "$1" && SOURCE_DATE_EPOCH=$epoch meson setup "$2" "${opts[@]}" >/dev/null &&
      SOURCE_DATE_EPOCH=$epoch meson compile -C "$2" capi/dp >/dev/null)
  }
  build "$out/a/src" build-a
  build "$out/the-second-copy/of/the/checkout/src" other-build
  echo "== two builds in $(( $(date +%s) - start )) s"
  a=$(find "$out/a/src/build-a/capi" -name 'libdp.so.0.*' -type f)
  b=$(find "$out/the-second-copy/of/the/checkout/src/other-build/capi" -name 'libdp.so.0.*' -type f)
fi
if cmp -s "$a" "$b"; then
  [ -z "${cleanup:-}" ] || rm -rf "$cleanup"
  echo "check_reproducible: ok: libdp.so.0 is byte-identical ($(sha256sum <"$a" | cut -c1-16)…, $(stat -c %s "$a") bytes)"
  exit 0
fi
echo "check_reproducible: FAIL: the two libdp.so.0 differ ($(cmp -l "$a" "$b" 2>/dev/null | wc -l) bytes; sizes $(stat -c %s "$a") and $(stat -c %s "$b")):"
# Section by section (--dump-section: objcopy -O binary leaves out the
# sections not loaded, the debug info among them).
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for s in $(readelf -SW "$a" | sed -n 's/^ *\[ *[0-9]*\] \([^ ]*\) .*/\1/p'); do
  rm -f "$tmp/a" "$tmp/b"
  objcopy --dump-section "$s=$tmp/a" "$a" "$tmp/a.elf" 2>/dev/null || true
  objcopy --dump-section "$s=$tmp/b" "$b" "$tmp/b.elf" 2>/dev/null || true
  cmp -s "$tmp/a" "$tmp/b" || echo "  section $s differs"
done
echo "  (the first build: $a; the second: $b)"
exit 1
