#!/usr/bin/env bash
# What a backend flooding interim (1xx) answers costs a proxy and its other services: a fast
# `serve` backend behind service `web`, a backend streaming `100 Continue` for 20 s behind
# `/flood` (interim-flood.py), tailguard's proxy (one thread) and HAProxy (nbthread 1) each in
# front of both. Per proxy, interleaved for ROUNDS rounds: an open-loop load of RATE req/s on
# `web` for SECONDS, alone and while 3 requests a second go to `/flood`. Prints each phase's
# p50/p99 on `web`, the proxy's CPU (% of a core) and what the flood requests got.
# FLOOD_BIN sets the `tailguard` whose `load` sends the flood requests (default BIN): one from
# before the interim bound reads every interim answer a proxy passes on, as a naive client does.
# Usage: [FLOOD_BIN=...] bench/proxy/interim-flood.sh [BIN] [RATE] [SECONDS] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${1:-target/dist/tailguard} rate=${2:-500} secs=${3:-10} rounds=${4:-3}
dir=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill $p 2>/dev/null || true; done; sleep 0.2; rm -rf "$dir"' EXIT

"$bin" serve --listen 127.0.0.1:18800 --no-control --threads 1 >/dev/null 2>&1 & pids+=($!)
python3 bench/proxy/interim-flood.py 18810 20 & pids+=($!)
cat > "$dir/proxy.yaml" <<'YAML'
admin: {ip: 127.0.0.1, port: 18899}
servers: [{ip: 127.0.0.1, port: 18850}]
services:
  - {name: flood, pathPrefix: /flood, upstreams: ["127.0.0.1:18810"]}
  - {name: web, upstreams: ["127.0.0.1:18800"]}
YAML
cat > "$dir/haproxy.cfg" <<'CFG'
global
  nbthread 1
  maxconn 4096
defaults
  mode http
  timeout connect 5s
  timeout client 30s
  timeout server 30s
  http-reuse always
frontend fe
  bind 127.0.0.1:18851
  use_backend flood if { path_beg /flood }
  default_backend web
backend web
  server s1 127.0.0.1:18800
backend flood
  server f1 127.0.0.1:18810
CFG
"$bin" proxy --config "$dir/proxy.yaml" --threads 1 2>/dev/null & tg=$!; pids+=($tg)
haproxy -f "$dir/haproxy.cfg" -db >/dev/null 2>&1 & hap=$!; pids+=($hap)
for _ in $(seq 100); do # readiness: bounded polling
  curl -sf http://127.0.0.1:18899/ready >/dev/null 2>&1 \
    && curl -sf http://127.0.0.1:18851/ >/dev/null 2>&1 && break
  sleep 0.1
done
hz=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }

for r in $(seq "$rounds"); do
  for proxy in tailguard haproxy; do
    case $proxy in tailguard) port=18850 pid=$tg ;; haproxy) port=18851 pid=$hap ;; esac
    "$bin" load -r "$rate" -c 50 -d 3s -q "http://127.0.0.1:$port/" >/dev/null 2>&1 || true # warm
    for phase in quiet flooded; do
      flood=
      if [ "$phase" = flooded ]; then
        "${FLOOD_BIN:-$bin}" load -r 3 -c 3 -d "${secs}s" --timeout 25s --no-preflight -q --json "$dir/flood.json" \
          "http://127.0.0.1:$port/flood" >/dev/null 2>&1 & flood=$!
      fi
      c0=$(cpu "$pid")
      "$bin" load -r "$rate" -c 50 -d "${secs}s" -q --json "$dir/run.json" \
        "http://127.0.0.1:$port/" >/dev/null 2>&1 || true
      c1=$(cpu "$pid")
      got=-
      if [ -n "$flood" ]; then
        wait "$flood" || true
        got=$(python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); l = d.get("latency_us") or {}
codes = ",".join(f"{n}x{c}" for c, n in sorted(d["status_codes"].items()))
errs = ",".join(f"{n}x{k}" for k, n in sorted(d["errors"].items()))
p50, top = l.get("p50", 0) / 1000, l.get("max", 0) / 1000
print(f"{codes or errs} in {p50:.1f}-{top:.1f} ms")' "$dir/flood.json")
      fi
      python3 - "$dir/run.json" "$r" "$proxy" "$phase" "$(( (c1 - c0) * 1000 / hz ))" "$secs" "$got" \
        <<'PY' | tee -a "$dir/rows"
import json, sys
d = json.load(open(sys.argv[1]))
l = d["latency_us"]
secs = float(sys.argv[6])
print(f"round {sys.argv[2]} {sys.argv[3]:<9} {sys.argv[4]:<7} web p50 {l['p50']:>6} us  p99 {l['p99']:>7} us  "
      f"proxy CPU {int(sys.argv[5]) / secs / 10:5.1f}% of a core  flood got {sys.argv[7]}")
PY
    done
  done
done
python3 - "$dir/rows" <<'PY'
import sys, statistics, collections
p99, cpu = collections.defaultdict(list), collections.defaultdict(list)
for line in open(sys.argv[1]):
    f = line.split()
    key = (f[2], f[3])
    p99[key].append(int(f[9])); cpu[key].append(float(f[13].rstrip("%")))
for proxy in ("tailguard", "haproxy"):
    q, h = statistics.median(p99[(proxy, "quiet")]), statistics.median(p99[(proxy, "flooded")])
    cq, ch = statistics.median(cpu[(proxy, "quiet")]), statistics.median(cpu[(proxy, "flooded")])
    print(f"{proxy}: median web p99 quiet {q} us, flooded {h} us ({h / q:.2f}x); "
          f"proxy CPU {cq:.1f}% -> {ch:.1f}% of a core (+{ch - cq:.1f})")
PY
