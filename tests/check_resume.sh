#!/usr/bin/env bash
# The sample's --checkpoint / --resume, end to end: a 3-epoch run is killed
# (SIGKILL) once epoch 1 has been saved, then resumed; it must end with the
# final line of an uninterrupted run (timing aside) and the same final
# checkpoint, byte for byte (so bit-identical parameters and optimizer state).
#   check_resume.sh WORK_DIR TRAIN_FASHION_MNIST [ARGS...]
set -euo pipefail
work=$1
exe=$2
shift 2
rm -rf "$work"
mkdir -p "$work/whole" "$work/resumed"

"$exe" "$@" --epochs 3 --checkpoint "$work/whole" >"$work/whole.out"

# The run to interrupt: its checkpoint of epoch 1 is written before the
# epoch's line is printed, so the line is the signal (no sleeping).
coproc RUN { exec "$exe" "$@" --epochs 3 --checkpoint "$work/resumed"; }
pid=$RUN_PID
killed=0
while IFS= read -r -t 300 line <&"${RUN[0]}"; do
  echo "interrupted run: $line"
  if [[ $line == "epoch 1/3 "* ]]; then
    kill -KILL "$pid"
    killed=1
    break
  fi
done
wait "$pid" 2>/dev/null || true
[ "$killed" = 1 ] || { echo "the run to interrupt never finished epoch 1"; exit 1; }

"$exe" "$@" --epochs 3 --checkpoint "$work/resumed" --resume >"$work/resumed.out"
cat "$work/resumed.out"
grep -q '^resumed from .*/step-' "$work/resumed.out" || { echo "the second run did not resume"; exit 1; }
want=$(grep '^final ' "$work/whole.out" | sed 's/ samples_per_s=.*//')
got=$(grep '^final ' "$work/resumed.out" | sed 's/ samples_per_s=.*//')
echo "uninterrupted: $want"
echo "resumed:       $got"
[ -n "$want" ] && [ "$want" = "$got" ] || { echo "final lines differ"; exit 1; }
last=$(cd "$work/whole" && ls step-*.dpckpt | sort | tail -1)
cmp "$work/whole/$last" "$work/resumed/$last" || { echo "final checkpoints $last differ"; exit 1; }
[ "$(cd "$work/whole" && ls step-*.dpckpt | wc -l)" -le 3 ] || { echo "--keep 3 kept more"; exit 1; }
echo "resume ok: $last identical"
rm -rf "$work"
