#!/usr/bin/env bash
# Seed 003, proxy overhead, in one run: one zero-latency nginx backend; the maximum closed-loop
# throughput direct, through tailguard proxy (1 thread), HAProxy (nbthread 1) and nginx
# (1 worker); then every arm at 75% of the lowest maximum: p50, p99, p99.9, proxy CPU per
# request and proxy RSS. Usage: bench/proxy/overhead.sh [MAX_SECONDS] [RATE_SECONDS] [CONNS]
set -euo pipefail
cd "$(dirname "$0")/../.."
max_secs=${1:-10} rate_secs=${2:-30} conns=${3:-32}
for tool in nginx haproxy python3; do
  command -v $tool >/dev/null || { echo "bench/proxy: $tool is missing (apt-get install -y nginx haproxy)" >&2; exit 2; }
done
tg=${TAILGUARD:-target/release/tailguard}
[ -x "$tg" ] || cargo build --release -q -p tailguard
dir=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill $p 2>/dev/null || true; done; sleep 0.2; rm -rf "$dir"' EXIT

nginx -p "$dir" -c "$PWD/bench/proxy/nginx-backend.conf" & pids+=($!)
sleep 0.3
"$tg" proxy --listen 127.0.0.1:18311 --admin 127.0.0.1:18312 --upstream 127.0.0.1:18301 \
  --balancer ewma --threads 1 2>"$dir/tg.log" & tg_pid=$!; pids+=($tg_pid)
haproxy -f bench/proxy/haproxy.cfg -db 2>"$dir/haproxy.log" & ha_pid=$!; pids+=($ha_pid)
nginx -p "$dir" -c "$PWD/bench/proxy/nginx-proxy.conf" 2>"$dir/ngx.log" & pids+=($!)
for port in 18301 18311 18321 18331; do
  for _ in $(seq 50); do curl -sf "http://127.0.0.1:$port/" >/dev/null 2>&1 && break; sleep 0.1; done
done
# nginx's master forks a worker: measure the worker.
ngx_pid=$(pgrep -f "nginx: worker" -P "$(cat "$dir/nginx-proxy.pid")" | head -1)

declare -A port=([direct]=18301 [tailguard]=18311 [haproxy]=18321 [nginx]=18331)
declare -A pid=([direct]=0 [tailguard]=$tg_pid [haproxy]=$ha_pid [nginx]=$ngx_pid)
cpu_ticks() { [ "$1" = 0 ] && echo 0 || awk '{print $14 + $15}' "/proc/$1/stat"; }
rss_kb() { [ "$1" = 0 ] && echo 0 || awk '/VmRSS/ {print $2}' "/proc/$1/status"; }

run() { # arm rate secs -> appends a JSON line
  local arm=$1 rate=$2 secs=$3 before after
  before=$(cpu_ticks "${pid[$arm]}")
  "$tg" load --rate "$rate" -c "$conns" -d "${secs}s" -q --json "$dir/$arm.json" \
    "http://127.0.0.1:${port[$arm]}/" >/dev/null
  after=$(cpu_ticks "${pid[$arm]}")
  python3 - "$dir/$arm.json" "$arm" "$rate" "$((after - before))" "$(rss_kb "${pid[$arm]}")" "$(getconf CLK_TCK)" <<'PY' >>"$dir/results"
import json, sys
r = json.load(open(sys.argv[1]))
arm, rate, ticks, rss, hz = sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
print(json.dumps({"arm": arm, "rate": rate, "summary": r, "cpu_s": ticks / hz, "rss_kb": rss}))
PY
}

for arm in direct tailguard haproxy nginx; do run "$arm" 0 "$max_secs"; done
fixed=$(python3 -c "
import json
rows=[json.loads(l) for l in open('$dir/results')]
print(int(0.75*min(r['summary']['achieved_rate'] for r in rows)))")
for arm in direct tailguard haproxy nginx; do run "$arm" "$fixed" "$rate_secs"; done
python3 bench/proxy/table.py "$dir/results" "$max_secs" "$rate_secs"
