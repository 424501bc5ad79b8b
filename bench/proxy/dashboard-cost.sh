#!/usr/bin/env bash
# What the dashboard costs the proxy: CPU time per request with the dashboard open (a poller
# doing what the page does: the whole /dashboard.json once, then ?since=N every second) and
# closed, at RATE req/s, interleaved closed/open for ROUNDS rounds of SECONDS each, in one run;
# and the proxy's RSS with 10 services x 20 endpoints once the five-minute history is full
# (the default 5 rounds x 2 x 30 s fill it). The proxy runs on one thread; CPU time is
# utime + stime from /proc. Prints each phase, then the medians and the ratio.
# H1_SERVER=lean|hyper sets the proxy's limits.h1Server.
# Usage: [H1_SERVER=lean|hyper] bench/proxy/dashboard-cost.sh [BIN] [RATE] [SECONDS] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${1:-target/dist/tailguard} rate=${2:-10000} secs=${3:-30} rounds=${4:-5}
dir=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill $p 2>/dev/null || true; done; sleep 0.2; rm -rf "$dir"' EXIT

# 20 backends, and 10 services routed by path prefix, each over all 20.
{
  echo "backends:"
  for i in $(seq 0 19); do echo "  - {name: b$i, latency: 0s}"; done
} > "$dir/fleet.yaml"
ups=$(seq -s, -f '"127.0.0.1:%g"' 18400 18419)
{
  echo "admin: {ip: 127.0.0.1, port: 18499}"
  echo "servers: [{ip: 127.0.0.1, port: 18450}]"
  if [ -n "${H1_SERVER:-}" ]; then echo "limits: {h1Server: $H1_SERVER}"; fi
  echo "services:"
  for s in $(seq 0 9); do
    echo "  - {name: s$s, pathPrefix: /s$s, upstreams: [$ups]}"
  done
} > "$dir/proxy.yaml"
"$bin" serve --fleet "$dir/fleet.yaml" --listen 127.0.0.1:18400 --no-control --threads 1 \
  >/dev/null 2>&1 & pids+=($!)
"$bin" proxy --config "$dir/proxy.yaml" --threads 1 2>/dev/null & proxy=$!; pids+=($proxy)
for _ in $(seq 100); do # readiness: bounded polling
  curl -sf http://127.0.0.1:18450/s0/ >/dev/null 2>&1 && break; sleep 0.1
done
urls=$(for s in $(seq 0 9); do echo "http://127.0.0.1:18450/s$s/"; done)

cpu() { awk '{print $14 + $15}' "/proc/$proxy/stat"; }         # clock ticks
served() { curl -s http://127.0.0.1:18499/metrics | awk '/^tailguard_proxy_requests_total/ {n += $2} END {print n + 0}'; }
rss() { awk '/^VmRSS/ {print $2}' "/proc/$proxy/status"; }     # KiB
hz=$(getconf CLK_TCK)

for r in $(seq "$rounds"); do
  for phase in closed open; do
    poller=
    if [ "$phase" = open ]; then
      python3 - "$secs" <<'PY' & poller=$!
import json, sys, time, urllib.request
base = "http://127.0.0.1:18499"
urllib.request.urlopen(base + "/", timeout=10).read()          # the page
since, end = 0, time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    board = json.load(urllib.request.urlopen(f"{base}/dashboard.json?since={since}", timeout=10))
    for s in board["services"]:
        for x in s["history"]:
            since = max(since, x["seq"])
    time.sleep(1)
PY
    fi
    n0=$(served) c0=$(cpu)
    "$bin" load --rate "$rate" -c "${CONC:-64}" -d "${secs}s" -q $urls >/dev/null 2>&1 || true
    c1=$(cpu) n1=$(served)
    if [ -n "$poller" ]; then wait "$poller" || echo "dashboard poller failed" >&2; fi
    awk -v r="$r" -v p="$phase" -v n=$((n1 - n0)) -v t=$((c1 - c0)) -v hz="$hz" -v rss="$(rss)" \
      'BEGIN {printf "round %s %-6s %8d requests  %6.2f CPU us/request  RSS %.1f MiB\n", r, p, n, t * 1e6 / hz / n, rss / 1024}' \
      | tee -a "$dir/rows"
  done
done
python3 - "$dir/rows" <<'PY'
import sys, statistics, collections
cpu, rss = collections.defaultdict(list), collections.defaultdict(list)
for line in open(sys.argv[1]):
    f = line.split()
    cpu[f[2]].append(float(f[5])); rss[f[2]].append(float(f[9]))
c, o = statistics.median(cpu["closed"]), statistics.median(cpu["open"])
print(f"median CPU/request: closed {c:.2f} us, open {o:.2f} us: {100 * (o / c - 1):+.1f}% with the dashboard open")
print(f"RSS at the end: {rss['open'][-1]:.1f} MiB (10 services x 20 endpoints, {len(cpu['open']) + len(cpu['closed'])} phases)")
PY
