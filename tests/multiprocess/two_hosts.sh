#!/usr/bin/env bash
# Two "hosts" on one machine: network namespaces dpA (10.77.0.1) and dpB
# (10.77.0.2) joined by a veth pair, each running `dp-run -n PER_HOST` of a
# two-node job (--nodes 2, its own --node-rank, one store and run id) whose
# processes talk to the other host over its veth interface only
# (DP_INTERFACE), and to each other through shared memory (different
# network namespaces count as different hosts):
#   two_hosts.sh DP_RUN PER_HOST MP_WORKER [WORKER ARGS...]
# Needs root and iproute2's `ip`; exits 77 (skipped) when either is missing
# or namespaces cannot be made here. Everything it creates is removed at the end.
set -euo pipefail
dp_run=$1 per_host=$2 worker=$3
shift 3
if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null; then
  echo "SKIP: needs root and iproute2's ip to make network namespaces"
  exit 77
fi
a=dpA$$ b=dpB$$
dir=$(mktemp -d "${TMPDIR:-/tmp}/dp-two-hosts-XXXXXX")
cleanup() {
  ip netns del "$a" 2>/dev/null || true
  ip netns del "$b" 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
if ! ip netns add "$a" 2>"$dir/err" || ! ip netns add "$b" 2>>"$dir/err"; then
  echo "SKIP: cannot create network namespaces here: $(head -1 "$dir/err")"
  exit 77
fi
ip link add vethA netns "$a" type veth peer name vethB netns "$b"
ip -n "$a" addr add 10.77.0.1/24 dev vethA
ip -n "$b" addr add 10.77.0.2/24 dev vethB
for ns in "$a" "$b"; do
  ip -n "$ns" link set lo up
done
ip -n "$a" link set vethA up
ip -n "$b" link set vethB up
store="file://$dir/store"
run_id="two-hosts-$$"
status=0
DP_INTERFACE=vethA ip netns exec "$a" "$dp_run" -n "$per_host" --nodes 2 --node-rank 0 --store "$store" --run-id "$run_id" \
  --timeout-ms 30000 -- "$worker" "$@" >"$dir/a.log" 2>&1 &
pa=$!
DP_INTERFACE=vethB ip netns exec "$b" "$dp_run" -n "$per_host" --nodes 2 --node-rank 1 --store "$store" --run-id "$run_id" \
  --timeout-ms 30000 -- "$worker" "$@" >"$dir/b.log" 2>&1 || status=$?
wait "$pa" || status=$?
sed 's/^/host A: /' "$dir/a.log"
sed 's/^/host B: /' "$dir/b.log"
exit "$status"
