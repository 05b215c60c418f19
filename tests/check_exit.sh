#!/usr/bin/env bash
# check_exit.sh CODE TEXT COMMAND [ARGS...]: runs COMMAND and passes (exit 0)
# only when it exits with exactly CODE and its output (stdout and stderr)
# contains TEXT, a fixed string. For tests of expected failures: meson's
# should_fail passes on any non-zero exit, a usage error or a crash included.
set -u
if [ $# -lt 3 ]; then
  echo "usage: $0 CODE TEXT COMMAND [ARGS...]" >&2
  exit 2
fi
want_code=$1
want_text=$2
shift 2
out=$("$@" 2>&1)
code=$?
printf '%s\n' "$out"
status=0
if [ "$code" -ne "$want_code" ]; then
  echo "check_exit: FAILED: $1 exited with $code, expected $want_code" >&2
  status=1
fi
if ! grep -qF -- "$want_text" <<<"$out"; then
  echo "check_exit: FAILED: the output lacks: $want_text" >&2
  status=1
fi
[ $status -eq 0 ] && echo "check_exit: ok: exit $code and the output names: $want_text"
exit $status
