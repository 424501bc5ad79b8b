#!/usr/bin/env bash
# Issue 49, step 2: what io_uring saves a proxy's small request/response traffic here, measured
# before building a data plane on it. One minimal HTTP/1.1 keep-alive relay
# (bench/proxy/uring-relay: a GET head in, the response back, nothing else) over tokio's epoll,
# over tokio-uring (io_uring under tokio's timers and tasks) and over monoio's io_uring runtime,
# plain and with the ring set up `COOP_TASKRUN | SINGLE_ISSUER | DEFER_TASKRUN`
# (`monoio-deferred`), then tailguard (BIN, default target/dist/tailguard) and HAProxy
# (bench/proxy/haproxy.cfg) for scale, each in front of one zero-latency nginx backend and driven
# to its maximum closed-loop rate in turn, ROUNDS times interleaved. Prints req/s and the arm's
# CPU µs per request (user + system) per run, then the medians per arm. First it checks whether
# tokio-uring answers at all with the deferred ring flags (it stalls: its completions are reaped
# through tokio's epoll and never by an `io_uring_enter` that waits, which deferred task work
# needs). docs/proxy.md ("io_uring, measured") has a run.
# Usage: [BIN=...] bench/proxy/uring.sh [SECONDS] [ROUNDS] [CONNS]
set -euo pipefail
cd "$(dirname "$0")/../.."
. bench/lib.sh
secs=${1:-5} rounds=${2:-3} conns=${3:-32}
bin=${BIN:-target/dist/tailguard}
cargo build --release -q -p tailguard-uring-relay
relay=target/release/uring-relay
dir=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill $p 2>/dev/null || true; done; sleep 0.2; rm -rf "$dir"' EXIT
nginx -p "$dir" -c "$PWD/bench/proxy/nginx-backend.conf" & pids+=($!)
declare -A port=([epoll]=18371 [tokio-uring]=18372 [monoio]=18373 [monoio-deferred]=18374)
declare -A pid
for arm in epoll tokio-uring monoio monoio-deferred; do
  "$relay" "$arm" "127.0.0.1:${port[$arm]}" 127.0.0.1:18301 & pid[$arm]=$!; pids+=($!)
done
"$relay" tokio-uring-deferred 127.0.0.1:18375 127.0.0.1:18301 & pids+=($!)
"$bin" proxy --listen 127.0.0.1:18351 --admin 127.0.0.1:18352 --upstream 127.0.0.1:18301 \
  --threads 1 2>"$dir/tailguard.log" & pid[tailguard]=$!; pids+=($!); port[tailguard]=18351
arms=(epoll tokio-uring monoio monoio-deferred tailguard)
if command -v haproxy >/dev/null; then
  haproxy -f bench/proxy/haproxy.cfg -db 2>"$dir/haproxy.log" & pid[haproxy]=$!; pids+=($!)
  port[haproxy]=18321 arms+=(haproxy)
fi
wait_ready 18301 "${port[@]}"
if curl -s -m 2 -o /dev/null http://127.0.0.1:18375/; then
  echo "tokio-uring-deferred answers"
else
  echo "tokio-uring-deferred: no answer within 2 s (stalled)"
fi
ticks() { awk '{print $14, $15}' "/proc/$1/stat"; } # user and system
for r in $(seq "$rounds"); do
  for arm in "${arms[@]}"; do
    read -r u0 s0 < <(ticks "${pid[$arm]}")
    "$bin" load --rate 0 -c "$conns" -d "${secs}s" -q --json "$dir/out.json" \
      "http://127.0.0.1:${port[$arm]}/" >/dev/null
    read -r u1 s1 < <(ticks "${pid[$arm]}")
    cpu_row "$dir/out.json" "$arm" "$r" "$((u1 - u0))" "$((s1 - s0))" 15 | tee -a "$dir/rows"
  done
done
medians "$dir/rows" \
  'median {arm:15} {m[0]:9.0f} req/s  cpu {m[1]:5.1f} us/req (user {m[2]:4.1f} sys {m[3]:4.1f}) over {runs} runs' \
  3 6 9 11
