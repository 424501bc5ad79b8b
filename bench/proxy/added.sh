#!/usr/bin/env bash
# Added latency of the hop: open-loop load at fixed rates, direct to one zero-latency nginx
# backend, through `tailguard proxy --threads 1` and through HAProxy (`nbthread 1`), ROUNDS
# interleaved rounds per rate; prints p50/p99/p99.9 per run, then the medians per rate and arm
# (the added latency is a proxy's figure less direct's, read off the medians).
# Usage: bench/proxy/added.sh BIN [SECONDS] [ROUNDS] [RATES] [CONNS]
set -euo pipefail
cd "$(dirname "$0")/../.."
. bench/lib.sh
bin=$1 secs=${2:-10} rounds=${3:-3} rates=${4:-"2000 10000"} conns=${5:-32}
dir=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill $p 2>/dev/null || true; done; sleep 0.2; rm -rf "$dir"' EXIT
nginx -p "$dir" -c "$PWD/bench/proxy/nginx-backend.conf" & pids+=($!)
"$bin" proxy --listen 127.0.0.1:18351 --admin 127.0.0.1:18352 --upstream 127.0.0.1:18301 \
  --threads 1 2>"$dir/proxy.log" & pids+=($!)
haproxy -f bench/proxy/haproxy.cfg -db 2>"$dir/haproxy.log" & pids+=($!)
wait_ready 18301 18351 18321
declare -A port=([direct]=18301 [tailguard]=18351 [haproxy]=18321)
for rate in $rates; do
  for r in $(seq "$rounds"); do
    for arm in direct tailguard haproxy; do
      "$bin" load --rate "$rate" -c "$conns" -d "${secs}s" -q --json "$dir/out.json" \
        "http://127.0.0.1:${port[$arm]}/" >/dev/null
      python3 - "$dir/out.json" "$arm" "$r" "$rate" <<'PY' | tee -a "$dir/rows"
import json, sys
s = json.load(open(sys.argv[1]))
arm, r, rate = sys.argv[2], sys.argv[3], sys.argv[4]
q = s["latency_us"] or {"p50": 0, "p99": 0, "p999": 0}
print(f"round {r} {arm}@{rate} p50 {q['p50']:.0f} p99 {q['p99']:.0f} p99.9 {q['p999']:.0f} us")
PY
    done
  done
done
medians "$dir/rows" 'median {arm:18} p50 {m[0]:6.0f}  p99 {m[1]:6.0f}  p99.9 {m[2]:6.0f} us over {runs} runs' 4 6 8
