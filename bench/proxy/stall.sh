#!/usr/bin/env bash
# Issue 45's acceptance, live: the README's proxy (`--upstream a,b,c`, no other flags) in front of
# `serve --fleet stall` (a and b log-normal around 5 ms; c ten times slower, failing 20%; a paused
# from 10 s to 14 s), `load -r 200 -c 50 -i 1s -d 30s` through it. Arms, interleaved round by
# round, each on a fresh fleet so the pause falls at the same second of its run:
#   tailguard   tailguard proxy, defaults
#   roundrobin  tailguard proxy --balancer roundRobin
#   haproxy     HAProxy, `balance roundrobin` (its default), when installed
#   before      an earlier tailguard build's defaults, when BEFORE=path/to/tailguard is set
# Prints per run: p99, p99.9, max, the worst interval's p99 (the pause's), intervals with no
# completion, failed requests; then the medians per arm.
# Usage: bench/proxy/stall.sh [ROUNDS (default 3)]   (from the repository root; TG=binary)
set -euo pipefail
. bench/lib.sh
rounds=${1:-3}
tg=${TG:-target/release/tailguard}
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
arms="tailguard roundrobin"
command -v haproxy >/dev/null && arms="$arms haproxy"
[ -n "${BEFORE:-}" ] && arms="$arms before"
cat > "$work/haproxy.cfg" <<CFG
defaults
  mode http
  timeout connect 1s
  timeout client 60s
  timeout server 60s
frontend f
  bind 127.0.0.1:4150
  default_backend b
backend b
  balance roundrobin
  server a 127.0.0.1:9150
  server b 127.0.0.1:9151
  server c 127.0.0.1:9152
CFG
ups=127.0.0.1:9150,127.0.0.1:9151,127.0.0.1:9152
rows="$work/rows"
for round in $(seq "$rounds"); do
  for arm in $arms; do
    case $arm in
      tailguard) "$tg" proxy --listen 127.0.0.1:4150 --upstream $ups --no-admin >/dev/null 2>&1 & ;;
      roundrobin) "$tg" proxy --listen 127.0.0.1:4150 --upstream $ups --balancer roundRobin --no-admin >/dev/null 2>&1 & ;;
      haproxy) haproxy -f "$work/haproxy.cfg" >/dev/null 2>&1 & ;;
      before) "$BEFORE" proxy --listen 127.0.0.1:4150 --upstream $ups --no-admin >/dev/null 2>&1 & ;;
    esac
    proxy=$!
    # The fleet last, so its schedule (the pause at 10 s) starts with the load.
    "$tg" serve --fleet stall --listen 127.0.0.1:9150 --no-control >/dev/null 2>&1 &
    fleet=$!
    wait_ready 9150 9151 9152 4150
    "$tg" load -r 200 -c 50 -i 1s -d 30s -q --json "$work/$arm.json" http://127.0.0.1:4150/ >/dev/null || true
    kill $proxy $fleet 2>/dev/null; wait $proxy $fleet 2>/dev/null || true
    python3 - "$work/$arm.json" "$round" "$arm" <<'PY' | tee -a "$rows"
import json, sys
d = json.load(open(sys.argv[1]))
lat = d["latency_us"]
iv = d["intervals"]
empty = sum(1 for i in iv if i["good"] + i["bad"] == 0)
worst = max((i["latency_us"].get("p99", 0) for i in iv if i["requests"]), default=0)
print(f"round {sys.argv[2]} {sys.argv[3]:<10} p99 {lat['p99']/1e3:8.1f} ms  p99.9 {lat['p999']/1e3:8.1f} ms"
      f"  max {lat['max']/1e3:8.1f} ms  worst-interval-p99 {worst/1e3:8.1f} ms"
      f"  empty-intervals {empty}  failed {d['failed']}  requests {d['requests']}")
PY
  done
done
echo "# medians over $rounds rounds"
medians "$rows" "{arm:<10} p99 {m[0]:8.1f} ms  p99.9 {m[1]:8.1f} ms  max {m[2]:8.1f} ms  worst-interval-p99 {m[3]:8.1f} ms  empty-intervals {m[4]:.0f}  failed {m[5]:.0f}" 4 7 10 13 16 18
