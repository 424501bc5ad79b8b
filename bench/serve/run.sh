#!/usr/bin/env bash
# Throughput of one zero-latency `tailguard serve` backend against one nginx worker returning a
# fixed 200, with the same wrk command, interleaved run by run, medians reported.
#
#   apt-get install -y nginx wrk        # once
#   cargo build --profile dist -p tailguard
#   bench/serve/run.sh                  # RUNS=5 DURATION=10s CONNS=32 WRK_THREADS=1 SERVE_THREADS=1
#
# nginx runs one worker and `serve` one runtime thread (its default; SERVE_THREADS changes it),
# so on a 2-core machine wrk has the other core. Besides req/s, the CPU time each server used
# per request is read from /proc (10 ms ticks). Loopback only.
set -euo pipefail
cd "$(dirname "$0")/../.."

BIN=${TAILGUARD:-target/dist/tailguard}
RUNS=${RUNS:-5}
DURATION=${DURATION:-10s}
CONNS=${CONNS:-32}
WRK_THREADS=${WRK_THREADS:-1}
SERVE_THREADS=${SERVE_THREADS:-1}
NGINX_PORT=28080   # must match bench/serve/nginx.conf
SERVE_PORT=28081
NGINX_URL=http://127.0.0.1:$NGINX_PORT/
SERVE_URL=http://127.0.0.1:$SERVE_PORT/

for tool in nginx wrk curl; do
    command -v "$tool" >/dev/null || { echo "needs $tool (apt-get install -y nginx wrk curl)" >&2; exit 2; }
done
[ -x "$BIN" ] || { echo "no $BIN: cargo build --profile dist -p tailguard" >&2; exit 2; }

for url in "$NGINX_URL" "$SERVE_URL"; do
    if curl -s -o /dev/null "$url"; then echo "something already listens at $url" >&2; exit 2; fi
done

work=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

nginx -p "$work" -c "$PWD/bench/serve/nginx.conf" -e stderr &
nginx_master=$!
pids+=($nginx_master)
"$BIN" serve --latency 0s --body $'text:ok\n' --listen 127.0.0.1:$SERVE_PORT --no-control \
    --threads "$SERVE_THREADS" >/dev/null &
serve_pid=$!
pids+=($serve_pid)

for url in "$NGINX_URL" "$SERVE_URL"; do
    for _ in $(seq 50); do curl -sf -o /dev/null "$url" && break; sleep 0.1; done
    curl -sf -o /dev/null "$url" || { echo "$url did not come up" >&2; exit 1; }
done

nginx_worker=$(ps -o pid= --ppid "$nginx_master" | head -1 | tr -d ' ')

ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# "req/s cpu-us-per-request" of one wrk run against URL, CPU read from PID.
measure() {
    local before after out
    before=$(ticks "$2")
    out=$(wrk -t"$WRK_THREADS" -c"$CONNS" -d"$DURATION" "$1")
    after=$(ticks "$2")
    echo "$out" | awk -v t=$((after - before)) -v hz="$(getconf CLK_TCK)" '
        /^Requests\/sec:/ {rps = $2}
        / requests in / {n = $1}
        END {printf "%.0f %.1f\n", rps, t * 1e6 / hz / n}'
}

echo "# wrk -t$WRK_THREADS -c$CONNS -d$DURATION, $RUNS interleaved runs; serve --threads $SERVE_THREADS; nginx 1 worker"
echo "run  nginx_rps nginx_cpu_us/req  serve_rps serve_cpu_us/req"
nr=() nc=() sr=() sc=()
for run in $(seq "$RUNS"); do
    read -r a b < <(measure "$NGINX_URL" "$nginx_worker")
    read -r c d < <(measure "$SERVE_URL" "$serve_pid")
    nr+=("$a") nc+=("$b") sr+=("$c") sc+=("$d")
    echo "$run    $a $b    $c $d"
done
med() { printf '%s\n' "$@" | sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
n_rps=$(med "${nr[@]}") s_rps=$(med "${sr[@]}")
echo "median $n_rps $(med "${nc[@]}")    $s_rps $(med "${sc[@]}")"
awk -v n="$n_rps" -v s="$s_rps" 'BEGIN {printf "serve / nginx throughput = %.2f\n", s / n}'
