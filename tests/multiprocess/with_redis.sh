#!/usr/bin/env bash
# Runs a command with a Redis server of its own:
#   with_redis.sh COMMAND ARGS...   (the string @STORE@ in ARGS becomes its redis:// URL)
# The server listens on a free loopback port, keeps nothing on disk, and is
# stopped when the command ends. Skips (exit 77) when redis-server is not
# installed (tools/install-deps.sh installs it).
set -euo pipefail
if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then
  echo "SKIP: redis-server / redis-cli not installed (tools/install-deps.sh installs redis-server)"
  exit 77
fi
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
dir=$(mktemp -d "${TMPDIR:-/tmp}/dp-redis-XXXXXX")
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" --daemonize no \
  >"$dir/redis.log" 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; rm -rf "$dir"' EXIT
# Until it answers: at most 10 s.
for _ in $(seq 1 200); do
  redis-cli -p "$port" ping >/dev/null 2>&1 && break
  kill -0 "$server" 2>/dev/null || { cat "$dir/redis.log"; exit 1; }
  sleep 0.05
done
redis-cli -p "$port" ping >/dev/null
args=()
for a in "$@"; do args+=("${a//@STORE@/redis://127.0.0.1:$port/dp-test}"); done
"${args[@]}"
