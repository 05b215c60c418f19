#!/usr/bin/env bash
# The ABI guard (tools/check_abi.py) catches what it must and lets through
# what it may:
#   1. on small libraries built here, one per change from a scratch copy of a
#      header in dp.h's style: a changed member type, a member inserted in
#      the middle, a grown struct that callers allocate, a removed function,
#      a changed signature and a changed enumerator are incompatible (checked
#      and refused by --update); an option struct grown at its end, a new
#      function and a new enumerator are compatible (checked: the baseline
#      must be updated; --update accepts them); a new soname accepts a break;
#   2. on libdp itself (LIB, built with debug info for the C API), a scratch
#      copy of the real baseline in which one member of dp_net_options had
#      another type: the guard fails, naming that member; another in which
#      dp_argdef_name (which abidw does not describe: see prototypes() in
#      tools/check_abi.py) took another pointer type: the guard fails, naming
#      it.
#
#   tests/check_abi_guard.sh LIB
set -euo pipefail
lib=$(realpath "$1")
repo=$(cd "$(dirname "$0")/.." && pwd)
guard="python3 $repo/tools/check_abi.py"
base=$repo/abi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
fail=0

cat >v1.h <<'EOF'
#include <stdint.h>
typedef struct dp_status dp_status;
typedef struct dp_x_options { uint32_t struct_size; int32_t a; int32_t b; } dp_x_options;
typedef struct dp_pair { int32_t x; int32_t y; } dp_pair;
enum { DP_X_ONE = 1, DP_X_TWO = 2 };
dp_status* dp_f(const dp_x_options* o);
dp_status* dp_g(dp_pair* p);
int32_t dp_h(int32_t v);
EOF
# build NAME 'sed expression on v1.h' 'extra definitions' [SONAME]
build() {
  mkdir -p "$1"
  sed "$2" v1.h >"$1/t.h"
  printf '#include "t.h"\ndp_status* dp_f(const dp_x_options* o) { (void)o; return 0; }\n%s\n%s\n' \
    'dp_status* dp_g(dp_pair* p) { (void)p; return 0; }' "$3" >"$1/t.c"
  cc -g -shared -fPIC -Wl,-soname,"${4:-libt.so.0}" -o "$1/libt.so" "$1/t.c"
}
h='int32_t dp_h(int32_t v) { return v; }'
build v1 '' "$h"
build grown_option 's/int32_t b; }/int32_t b; int64_t c; }/' "$h"
build added_function '' "$h int32_t dp_k(void) { return 1; }"
build added_enumerator 's/DP_X_TWO = 2 }/DP_X_TWO = 2, DP_X_THREE = 3 }/' "$h"
build member_type 's/int32_t a; int32_t b;/int64_t a; int32_t b;/' "$h"
build member_inserted 's/int32_t a; int32_t b;/int32_t a; int32_t n; int32_t b;/' "$h"
build grown_pair 's/int32_t y; }/int32_t y; int32_t z; }/' "$h"
build removed_function '' ''
build signature 's/int32_t dp_h(int32_t v);/int64_t dp_h(int32_t v);/' 'int64_t dp_h(int32_t v) { return v; }'
build enumerator 's/DP_X_TWO = 2/DP_X_TWO = 3/' "$h"
build new_soname 's/int32_t a; int32_t b;/int64_t a; int32_t b;/' "$h" libt.so.1

# expect NAME check|update ok|compatible|incompatible|refused|accepted
expect() {
  local args=(--baseline "$tmp/base" --header "$tmp/$1/t.h" "$tmp/$1/libt.so") out rc=0
  [ "$2" = update ] && args=(--update "${args[@]}")
  out=$($guard "${args[@]}" 2>&1) || rc=$?
  local got
  if [ "$2" = update ]; then
    if [ $rc = 0 ]; then got=accepted; else got=refused; fi
  elif [ $rc = 0 ]; then got=ok
  elif grep -q "incompatible: " <<<"$out"; then got=incompatible
  else got=compatible
  fi
  if [ "$got" = "$3" ]; then
    echo "ok: $1 ($2): $3"
  else
    echo "FAIL: $1 ($2): expected $3, got $got:"
    echo "$out"
    fail=1
  fi
}
reset() { rm -rf "$tmp/base"; $guard --update --baseline "$tmp/base" --header v1/t.h v1/libt.so >/dev/null; }

reset
expect v1 check ok
for c in grown_option added_function added_enumerator; do
  expect $c check compatible
  expect $c update accepted
  expect $c check ok
  reset
done
for c in member_type member_inserted grown_pair removed_function signature enumerator; do
  expect $c check incompatible
  expect $c update refused
done
expect new_soname check incompatible
expect new_soname update accepted
expect new_soname check ok

# expect_libdp LINE WHAT: the guard fails libdp against scratch/ (a changed
# copy of its baseline), with LINE in its report.
expect_libdp() {
  local rc=0 out
  out=$($guard --baseline scratch "$lib" 2>&1) || rc=$?
  if [ $rc != 0 ] && grep -qF "$1" <<<"$out"; then
    echo "ok: libdp against a baseline with $2: incompatible"
  else
    echo "FAIL: libdp against a baseline with $2 passed or said otherwise (exit $rc):"
    echo "$out"
    fail=1
  fi
}
# 2. libdp against a scratch copy of its baseline whose dp_net_options had
# `executor` as a 64-bit member: the guard must call that incompatible.
cp -r "$base" scratch
python3 - scratch/libdp.abi <<'PY'
import re, sys
path = sys.argv[1]
s = open(path).read()
ids = dict(re.findall(r"<type-decl name='([^']+)' size-in-bits='\d+' id='([^']+)'", s))
long_id = ids.get("long int") or ids["unsigned long int"]
struct = re.search(r"<class-decl name='dp_net_options'.*?</class-decl>", s, re.S)
body = re.sub(r"(<var-decl name='executor' type-id=')[^']+", r"\g<1>" + long_id, struct[0])
assert body != struct[0], "dp_net_options has no member executor in the baseline"
open(path, "w").write(s.replace(struct[0], body))
PY
expect_libdp "incompatible: struct dp_net_options: member executor" "another type for dp_net_options.executor"
# dp_argdef_name's parameter as another handle, in a scratch baseline's
# prototypes.
rm -rf scratch
cp -r "$base" scratch
grep -q '^const char\* dp_argdef_name(const dp_argdef\* arg)$' scratch/prototypes.txt
sed -i 's/^const char\* dp_argdef_name(const dp_argdef\* arg)$/const char* dp_argdef_name(const dp_opdef* arg)/' \
  scratch/prototypes.txt
expect_libdp "incompatible: dp_argdef_name changed" "dp_argdef_name taking a dp_opdef*"
exit $fail
