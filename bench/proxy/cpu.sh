#!/usr/bin/env bash
# Proxy CPU time per request at a fixed rate below saturation, which a busy machine distorts
# far less than maximum req/s: two tailguard binaries in front of one nginx backend, each sent
# RATE req/s for SECONDS while `perf stat` measures its task clock (hardware instruction
# counters are not available in every VM), ROUNDS times interleaved, then the medians.
# Usage: bench/proxy/cpu.sh BEFORE_BIN AFTER_BIN [RATE] [SECONDS] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
. bench/lib.sh
before=$1 after=$2 rate=${3:-4000} secs=${4:-5} rounds=${5:-2}
dir=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill $p 2>/dev/null || true; done; sleep 0.2; rm -rf "$dir"' EXIT
nginx -p "$dir" -c "$PWD/bench/proxy/nginx-backend.conf" & pids+=($!)
"$before" proxy --listen 127.0.0.1:18341 --admin 127.0.0.1:18342 --upstream 127.0.0.1:18301 \
  --threads 1 2>/dev/null & a_pid=$!; pids+=($a_pid)
"$after" proxy --listen 127.0.0.1:18351 --admin 127.0.0.1:18352 --upstream 127.0.0.1:18301 \
  --threads 1 2>/dev/null & b_pid=$!; pids+=($b_pid)
wait_ready 18301 18341 18351
declare -A port=([before]=18341 [after]=18351) pid=([before]=$a_pid [after]=$b_pid)
served() { curl -s "http://127.0.0.1:$(( $1 + 1 ))/metrics" | awk '/^tailguard_proxy_requests_total/ {n += $2} END {print n + 0}'; }
for r in $(seq "$rounds"); do
  for arm in before after; do
    n0=$(served "${port[$arm]}")
    "$after" load --rate "$rate" -c 32 -d "${secs}s" -q "http://127.0.0.1:${port[$arm]}/" >/dev/null 2>&1 &
    lp=$!
    perf stat -x, -e task-clock -p "${pid[$arm]}" -o "$dir/stat" -- sleep "$secs" 2>/dev/null
    wait $lp
    n1=$(served "${port[$arm]}")
    awk -F, -v arm="$arm" -v r="$r" -v n=$((n1 - n0)) '
      /task-clock/ {ms = $1}
      END {printf "round %s %-7s %7d requests  %6.2f CPU us/request\n", r, arm, n, ms * 1000 / n}' "$dir/stat" \
      | tee -a "$dir/rows"
  done
done
medians "$dir/rows" 'median {arm:7} {m[0]:6.2f} CPU us/request over {runs} runs' 5
