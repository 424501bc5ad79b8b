#!/usr/bin/env bash
# What an idle keep-alive downstream connection costs the proxy in resident memory: for each
# BIN, a proxy on one thread in front of `serve`, N client connections that each send one GET
# and read its answer, then stay open; prints the proxy's RSS before and with them, and the
# difference per connection.
# Usage: bench/proxy/conn-memory.sh N BIN...
set -euo pipefail
cd "$(dirname "$0")/../.."
. bench/lib.sh
n=$1; shift
dir=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill $p 2>/dev/null || true; done; sleep 0.2; rm -rf "$dir"' EXIT
cat > "$dir/conns.py" <<'PY'
import socket, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
held = []
for _ in range(n):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
    got = b""
    while b"\r\n\r\n" not in got:
        chunk = s.recv(65536)
        if not chunk:
            sys.exit("closed before answering")
        got += chunk
    held.append(s)
print("open", flush=True)
sys.stdin.readline()   # hold them until told
PY
rss() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; } # KiB
for bin in "$@"; do
  "$bin" serve --listen 127.0.0.1:18600 --no-control --threads 1 >/dev/null 2>&1 & serve=$!
  "$bin" proxy --listen 127.0.0.1:18650 --admin 127.0.0.1:18699 --upstream 127.0.0.1:18600 \
    --threads 1 2>/dev/null & proxy=$!
  pids+=($serve $proxy)
  wait_ready 18600 18650
  before=$(rss $proxy)
  mkfifo "$dir/hold"
  python3 "$dir/conns.py" 18650 "$n" < "$dir/hold" > "$dir/out" & client=$!
  exec 3>"$dir/hold"
  for _ in $(seq 300); do grep -q open "$dir/out" 2>/dev/null && break; sleep 0.1; done # bounded
  with=$(rss $proxy)
  exec 3>&-
  wait $client || true
  rm -f "$dir/hold" "$dir/out"
  kill $proxy $serve; wait $proxy $serve 2>/dev/null || true
  echo "$bin: RSS ${before} KiB idle, ${with} KiB with $n connections: $(( (with - before) * 1024 / n )) B per connection"
done
