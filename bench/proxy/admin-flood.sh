#!/usr/bin/env bash
# What a flooded admin port costs the data plane: three `serve` backends, the proxy on one
# thread, an open-loop load of RATE req/s through it (`load -c 50`) for SECONDS, alone and
# while a flood of 64 connections (`load` at 100,000 req/s, far past what they answer, so back to
# back) fetches /dashboard.json from the admin port,
# interleaved for ROUNDS rounds. Prints per phase the data plane's p50/p99/p99.9, the CPU the
# proxy's admin thread (tg-admin) and its other threads took, and what the flood got.
# Usage: bench/proxy/admin-flood.sh [BIN] [RATE] [SECONDS] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${1:-target/dist/tailguard} rate=${2:-500} secs=${3:-10} rounds=${4:-3}
dir=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill $p 2>/dev/null || true; done; sleep 0.2; rm -rf "$dir"' EXIT

printf 'backends:\n  - {name: a, latency: 0s}\n  - {name: b, latency: 0s}\n  - {name: c, latency: 0s}\n' \
  > "$dir/fleet.yaml"
cat > "$dir/proxy.yaml" <<'EOF'
admin: {ip: 127.0.0.1, port: 18699}
servers: [{ip: 127.0.0.1, port: 18650}]
services:
  - {name: web, upstreams: ["127.0.0.1:18600", "127.0.0.1:18601", "127.0.0.1:18602"]}
EOF
"$bin" serve --fleet "$dir/fleet.yaml" --listen 127.0.0.1:18600 --no-control --threads 1 \
  >/dev/null 2>&1 & pids+=($!)
"$bin" proxy --config "$dir/proxy.yaml" --threads 1 2>/dev/null & proxy=$!; pids+=($proxy)
for _ in $(seq 100); do # readiness: bounded polling
  curl -sf http://127.0.0.1:18699/ready >/dev/null 2>&1 && break; sleep 0.1
done
"$bin" load -r "$rate" -c 50 -d 5s -q http://127.0.0.1:18650/ >/dev/null 2>&1 # warm up

# CPU clock ticks of the admin thread and of all the others.
ticks() {
  local admin=0 rest=0 t
  for t in /proc/$proxy/task/*; do
    local n; n=$(awk '{print $14 + $15}' "$t/stat")
    if [ "$(cat "$t/comm")" = tg-admin ]; then admin=$((admin + n)); else rest=$((rest + n)); fi
  done
  echo "$admin $rest"
}
hz=$(getconf CLK_TCK)

for r in $(seq "$rounds"); do
  for phase in quiet flooded; do
    flood=
    if [ "$phase" = flooded ]; then
      "$bin" load -r 100000 -c 64 -d "${secs}s" --timeout 1s -q --json "$dir/flood.json" \
        http://127.0.0.1:18699/dashboard.json >/dev/null 2>&1 & flood=$!
    fi
    read -r a0 o0 < <(ticks)
    "$bin" load -r "$rate" -c 50 -d "${secs}s" -q --json "$dir/run.json" \
      http://127.0.0.1:18650/ >/dev/null 2>&1 || true
    read -r a1 o1 < <(ticks)
    got=-
    if [ -n "$flood" ]; then
      wait "$flood" || true
      got=$(python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); f = d["failed"]
print(",".join(f"{n}x{c}" for c, n in sorted(d["status_codes"].items())) + f",{f}xfailed")' "$dir/flood.json")
    fi
    python3 - "$dir/run.json" "$r" "$phase" "$(( (a1 - a0) * 1000 / hz ))" \
      "$(( (o1 - o0) * 1000 / hz ))" "$secs" "$got" <<'PY' | tee -a "$dir/rows"
import json, sys
d = json.load(open(sys.argv[1]))
l = d["latency_us"]
secs = float(sys.argv[6])
print(f"round {sys.argv[2]} {sys.argv[3]:<7} p50 {l['p50']:>6} us  p99 {l['p99']:>6} us  "
      f"p99.9 {l['p999']:>6} us  admin thread {int(sys.argv[4]) / secs / 10:5.1f}% of a core  "
      f"the rest {int(sys.argv[5]) / secs / 10:5.1f}%  flood got {sys.argv[7]}")
PY
  done
done
python3 - "$dir/rows" <<'PY'
import sys, statistics, collections
p99, admin = collections.defaultdict(list), collections.defaultdict(list)
for line in open(sys.argv[1]):
    f = line.split()
    p99[f[2]].append(int(f[7])); admin[f[2]].append(float(f[14].rstrip("%")))
q, h = statistics.median(p99["quiet"]), statistics.median(p99["flooded"])
print(f"median p99: quiet {q} us, flooded {h} us ({h / q:.2f}x); "
      f"admin thread while flooded {statistics.median(admin['flooded']):.1f}% of a core")
PY
