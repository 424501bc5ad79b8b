#!/usr/bin/env bash
# Proxy overhead A/B: two tailguard binaries (e.g. before and after a change) and HAProxy in
# front of one zero-latency nginx backend, each driven to its maximum closed-loop throughput
# in turn, ROUNDS times (interleaved, so a busy machine slows every arm alike). Prints req/s
# and proxy CPU µs per request (user + system) for every run, then the medians per arm.
# With GRPC=1: gRPC ping calls (tailguard.serve.v1.Ping/Ping) on H2CONNS HTTP/2 connections
# (default 1), CONNS in flight, to `tailguard serve --threads 1` (AFTER_BIN's), HAProxy with
# `proto h2` on both sides, and a `direct` arm, the load generator straight to that backend (its
# CPU column is the backend's).
# BEFORE_ARGS and AFTER_ARGS add proxy flags to one arm (e.g. the same binary twice, with
# BEFORE_ARGS="--h1-upstream hyper": hyper's HTTP/1.1 client against the lean one).
# Usage: [GRPC=1 [H2CONNS=N]] bench/proxy/ab.sh BEFORE_BIN AFTER_BIN [SECONDS] [ROUNDS] [CONNS]
set -euo pipefail
cd "$(dirname "$0")/../.."
. bench/lib.sh
before=$1 after=$2 secs=${3:-10} rounds=${4:-3} conns=${5:-32}
load=${LOAD:-$after}
dir=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill $p 2>/dev/null || true; done; sleep 0.2; rm -rf "$dir"' EXIT
if [ "${GRPC:-0}" = 1 ]; then
  "$after" serve --listen 127.0.0.1:18301 --threads 1 --no-control >/dev/null 2>&1 & pids+=($!)
  serve_pid=$!
  cfg=bench/proxy/haproxy-grpc.cfg calls=(--grpc --call ping --h2-connections "${H2CONNS:-1}")
else
  nginx -p "$dir" -c "$PWD/bench/proxy/nginx-backend.conf" & pids+=($!)
  cfg=bench/proxy/haproxy.cfg calls=()
fi
"$before" proxy --listen 127.0.0.1:18341 --admin 127.0.0.1:18342 --upstream 127.0.0.1:18301 \
  --threads 1 ${BEFORE_ARGS:-} 2>"$dir/a.log" & a_pid=$!; pids+=($a_pid)
"$after" proxy --listen 127.0.0.1:18351 --admin 127.0.0.1:18352 --upstream 127.0.0.1:18301 \
  --threads 1 ${AFTER_ARGS:-} 2>"$dir/b.log" & b_pid=$!; pids+=($b_pid)
haproxy -f "$cfg" -db 2>"$dir/haproxy.log" & ha_pid=$!; pids+=($ha_pid)
wait_ready 18301 18341 18351 18321
declare -A port=([before]=18341 [after]=18351 [haproxy]=18321)
declare -A pid=([before]=$a_pid [after]=$b_pid [haproxy]=$ha_pid)
arms=(before after haproxy)
if [ "${GRPC:-0}" = 1 ]; then
  port[direct]=18301 pid[direct]=$serve_pid arms+=(direct)
fi
ticks() { awk '{print $14, $15}' "/proc/$1/stat"; } # user and system
for r in $(seq "$rounds"); do
  for arm in "${arms[@]}"; do
    read -r u0 s0 < <(ticks "${pid[$arm]}")
    "$load" load "${calls[@]}" --rate 0 -c "$conns" -d "${secs}s" -q --json "$dir/out.json" \
      "http://127.0.0.1:${port[$arm]}/" >/dev/null
    read -r u1 s1 < <(ticks "${pid[$arm]}")
    cpu_row "$dir/out.json" "$arm" "$r" "$((u1 - u0))" "$((s1 - s0))" 8 | tee -a "$dir/rows"
  done
done
medians "$dir/rows" \
  'median {arm:8} {m[0]:9.0f} req/s  cpu {m[1]:5.1f} us/req (user {m[2]:4.1f} sys {m[3]:4.1f}) over {runs} runs' \
  3 6 9 11
