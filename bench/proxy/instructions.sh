#!/usr/bin/env bash
# User-space instructions per proxied GET, counted by valgrind's callgrind: the one measure of
# the hop's own work that this noisy two-core machine repeats to within about 1%, so a change
# of 1-2% shows where timed runs cannot tell it from noise. Each proxy (the tailguard binaries
# given, then HAProxy with bench/proxy/haproxy.cfg when installed) runs under callgrind in
# front of one zero-latency nginx backend; after a warm-up its counters are zeroed, N GETs go
# through (open loop, 500 req/s over 8 keep-alive connections), and the instructions counted
# are divided by the requests. Timers and the runtime's wake-ups are counted too, at this
# low rate more of them per request than at a high one. System calls are not counted (the
# kernel's side is `strace -c`'s and `perf`'s). Set PROFILE=DIR to keep each run's
# callgrind file there for `callgrind_annotate`; CALLGRIND_ARGS=--cache-sim=yes adds its cache
# model and prints L1 data and instruction misses per GET too; NO_PEERS=1 leaves HAProxy out.
# With GRPC=1 the requests are gRPC ping calls (tailguard.serve.v1.Ping/Ping) over one HTTP/2
# connection to the first binary's `tailguard serve --threads 1`, HAProxy with
# bench/proxy/haproxy-grpc.cfg.
# Usage: [GRPC=1] bench/proxy/instructions.sh BIN... [N=2000]
set -euo pipefail
cd "$(dirname "$0")/../.."
. bench/lib.sh
command -v valgrind >/dev/null || { echo "valgrind is not installed (apt-get install -y valgrind)" >&2; exit 2; }
n=${N:-2000}
load=$1
dir=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill $p 2>/dev/null || true; done; sleep 0.2; rm -rf "$dir"' EXIT
if [ "${GRPC:-0}" = 1 ]; then
  "$load" serve --listen 127.0.0.1:18301 --threads 1 --no-control >/dev/null 2>&1 & pids+=($!)
  cfg=bench/proxy/haproxy-grpc.cfg calls=(--grpc --call ping --h2-connections 1) unit=call
else
  nginx -p "$dir" -c "$PWD/bench/proxy/nginx-backend.conf" & pids+=($!)
  cfg=bench/proxy/haproxy.cfg calls=() unit=GET
fi
wait_ready 18301
arms=("$@")
[ "${NO_PEERS:-0}" = 1 ] || ! command -v haproxy >/dev/null || arms+=(haproxy)
for arm in "${arms[@]}"; do
  if [ "$arm" = haproxy ]; then
    port=18321 cmd=(haproxy -f "$cfg" -db)
  else
    port=18361 cmd=("$arm" proxy --listen 127.0.0.1:18361 --admin 127.0.0.1:18362
      --upstream 127.0.0.1:18301 --threads 1)
  fi
  valgrind --tool=callgrind --callgrind-out-file="$dir/cg.out" ${CALLGRIND_ARGS:-} "${cmd[@]}" 2>"$dir/vg.log" &
  p=$!
  pids+=($p)
  # Under valgrind a start takes seconds: bounded polling, 30 s at most.
  for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$port/" 2>/dev/null && break; sleep 0.3; done
  "$load" load "${calls[@]}" --rate 500 -c 8 -d 2s -q "http://127.0.0.1:$port/" >/dev/null
  callgrind_control -z "$p" >/dev/null 2>&1
  "$load" load "${calls[@]}" --rate 500 -c 8 -d "$((n / 500))s" -q --json "$dir/out.json" \
    "http://127.0.0.1:$port/" >/dev/null
  callgrind_control -d "$p" >/dev/null 2>&1
  requests=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['requests'])" "$dir/out.json")
  # The dump is the newest part file (callgrind numbers each dump).
  out=$(ls -t "$dir"/cg.out* | head -1)
  # Each event's count per request, by the names on the file's `events:` line.
  per=$(awk -v n="$requests" -v unit="$unit" '/^events:/ {for (i = 2; i <= NF; i++) name[i] = $i}
    /^(summary|totals):/ {for (i = 2; i <= NF; i++) v[name[i]] = $i / n; exit}
    END {printf "%8.0f instructions per %s", v["Ir"], unit;
      if ("D1mr" in v) printf ", L1 data misses %.0f (read %.0f, write %.0f)",
        v["D1mr"] + v["D1mw"], v["D1mr"], v["D1mw"];
      if ("I1mr" in v) printf ", L1 instruction misses %.0f", v["I1mr"]}' "$out")
  printf '%-28s %s over %d requests\n' "$arm" "$per" "$requests"
  if [ -n "${PROFILE:-}" ]; then
    mkdir -p "$PROFILE" && cp "$out" "$PROFILE/$(basename "$arm").callgrind"
  fi
  kill "$p" 2>/dev/null || true
  wait "$p" 2>/dev/null || true
  rm -f "$dir"/cg.out*
done
