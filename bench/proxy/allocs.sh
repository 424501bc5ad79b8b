#!/usr/bin/env bash
# Heap allocations and clock reads per request in the proxy process, for two tailguard
# binaries run with the same flags (no routes, limits, split, access log or tracing) in front of
# one nginx backend: what a feature that is not configured costs the request path. Counted
# with `perf stat` on uprobes (set up here with `perf probe`, so it needs root): each binary's
# mimalloc entry points (`mi_malloc_aligned`, `mi_zalloc_aligned`, `mi_realloc_aligned`, what
# Rust's global allocator calls) and libc's `clock_gettime` (what `Instant::now` calls), over
# RATE req/s for SECONDS, ROUNDS times interleaved, then the medians. Background work (the
# dashboard's ticker, the event-loop sampler) counts too, the same in both.
# Usage: bench/proxy/allocs.sh BEFORE_BIN AFTER_BIN [RATE] [SECONDS] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
. bench/lib.sh
before=$1 after=$2 rate=${3:-2000} secs=${4:-4} rounds=${5:-3}
libc=$(ldconfig -p | awk '/libc.so.6 .*x86-64/ {print $NF; exit}')
perf probe -l 2>/dev/null | grep -q "probe_libc:clock_gettime " \
  || perf probe -q -x "$libc" --add clock_gettime
# One group of events per binary (they share function names): tgb_* and tga_*.
probe_bin() { # probe_bin GROUP BINARY
  local f
  perf probe -q -d "$1:*" 2>/dev/null || true
  for f in malloc zalloc realloc; do
    perf probe -q -x "$2" --add "$1:$1_$f=mi_${f}_aligned"
  done
}
probe_bin tgb "$before"
probe_bin tga "$after"
declare -A group=([before]=tgb [after]=tga)
dir=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill $p 2>/dev/null || true; done; sleep 0.2; rm -rf "$dir"; perf probe -q -d "tgb:*" -d "tga:*" 2>/dev/null || true' EXIT
nginx -p "$dir" -c "$PWD/bench/proxy/nginx-backend.conf" & pids+=($!)
"$before" proxy --listen 127.0.0.1:18441 --admin 127.0.0.1:18442 --upstream 127.0.0.1:18301 \
  --threads 1 2>/dev/null & a_pid=$!; pids+=($a_pid)
"$after" proxy --listen 127.0.0.1:18451 --admin 127.0.0.1:18452 --upstream 127.0.0.1:18301 \
  --threads 1 2>/dev/null & b_pid=$!; pids+=($b_pid)
wait_ready 18301 18441 18451
declare -A port=([before]=18441 [after]=18451) pid=([before]=$a_pid [after]=$b_pid)
served() { curl -s "http://127.0.0.1:$(( $1 + 1 ))/metrics" | awk '/^tailguard_proxy_requests_total/ {n += $2} END {print n + 0}'; }
for r in $(seq "$rounds"); do
  for arm in before after; do
    n0=$(served "${port[$arm]}")
    "$after" load --rate "$rate" -c 16 -d "${secs}s" -q "http://127.0.0.1:${port[$arm]}/" >/dev/null 2>&1 &
    lp=$!
    g=${group[$arm]}
    events=$g:${g}_malloc,$g:${g}_zalloc,$g:${g}_realloc,probe_libc:clock_gettime
    perf stat -x, -e "$events" -p "${pid[$arm]}" -o "$dir/stat" -- sleep "$secs" 2>/dev/null
    wait $lp
    n1=$(served "${port[$arm]}")
    awk -F, -v arm="$arm" -v r="$r" -v n=$((n1 - n0)) '
      /_(malloc|zalloc|realloc)/ {a += $1}
      /clock_gettime/ {c = $1}
      END {printf "round %s %-7s %7d requests  %6.2f allocations/request  %6.2f clock reads/request\n", r, arm, n, a / n, c / n}' "$dir/stat" \
      | tee -a "$dir/rows"
  done
done
medians "$dir/rows" 'median {arm:7} {m[0]:6.2f} allocations/request, {m[1]:6.2f} clock reads/request over {runs} runs' 5 7
