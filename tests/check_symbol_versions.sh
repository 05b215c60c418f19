#!/bin/sh
# Symbol versioning does its job: a program that calls a function of the
# newest version node (capi/libdp.map) refuses to start on a library of the
# previous release, with the loader's "version `DP_x.y' not found" naming the
# node, while a program that calls only older functions starts there; both
# run on this build's libdp.
#   check_symbol_versions.sh LIBDP_SO LIBDP_MAP
# The "previous release" is a stand-in: a libdp.so.0 linked from the same
# version script without its newest node, defining dp_version only.
set -eu
lib="$1"
map="$2"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The nodes, oldest first, and the first function of the newest one.
nodes=$(sed 's,/\*.*,,; s,.*\*/,,' "$map" | sed -n 's/^\(DP_[0-9.]*\) {.*/\1/p')
newest=$(printf '%s\n' "$nodes" | tail -n 1)
previous=$(printf '%s\n' "$nodes" | tail -n 2 | head -n 1)
[ "$newest" != "$previous" ] || { echo "libdp.map has one node: nothing older to run on"; exit 1; }
newfn=$(awk -v node="$newest" '$1 == node && $2 == "{" {inside = 1; next}
  inside && /^}/ {exit} inside && $1 ~ /^dp_.*;$/ {sub(";", "", $1); print $1; exit}' "$map")
[ -n "$newfn" ] || { echo "no function found in $newest"; exit 1; }

# The previous release's library: every node but the newest.
awk -v node="$newest" '$1 == node && $2 == "{" {skip = 1} !skip {print} skip && /^}/ {skip = 0}' "$map" \
  >"$work/old.map"
mkdir "$work/old"
printf 'const char* dp_version(void) { return "%s.0"; }\n' "${previous#DP_}" >"$work/old.c"
cc -shared -fPIC -Wl,-soname,libdp.so.0 -Wl,--version-script="$work/old.map" "$work/old.c" \
  -o "$work/old/libdp.so.0"

# Programs linked against this build's libdp: the new one references the
# newest function (never called: the loader decides before main).
cat >"$work/new.c" <<EOF
#include <stdio.h>
const char* dp_version(void);
void $newfn(void);
int main(int argc, char** argv) {
  (void)argv;
  if (argc > 99) $newfn();
  printf("started on %s\n", dp_version());
  return 0;
}
EOF
cat >"$work/older.c" <<'EOF'
#include <stdio.h>
const char* dp_version(void);
int main(void) { printf("started on %s\n", dp_version()); return 0; }
EOF
libdir=$(dirname "$lib")
for p in new older; do
  cc "$work/$p.c" -L"$libdir" -l:"$(basename "$lib")" -o "$work/$p"
done
readelf -V "$work/new" | grep -q "Name: $newest" ||
  { echo "the program records no need of $newest:"; readelf -V "$work/new"; exit 1; }

for p in new older; do
  LD_LIBRARY_PATH=$libdir "$work/$p" >/dev/null || { echo "$p does not start on this build's libdp"; exit 1; }
done
LD_LIBRARY_PATH=$work/old "$work/older" | grep -q "started on ${previous#DP_}.0" ||
  { echo "a program using only older functions does not start on the previous release"; exit 1; }
if LD_LIBRARY_PATH=$work/old "$work/new" >"$work/out" 2>&1; then
  echo "a program calling $newfn ($newest) started on a library without $newest"; exit 1
fi
grep -q "version \`$newest' not found" "$work/out" ||
  { echo "the loader's refusal does not name $newest:"; cat "$work/out"; exit 1; }
echo "on a ${previous#DP_} library: a program using $newfn ($newest) is refused: $(cat "$work/out")"
echo "a program using older functions starts"
