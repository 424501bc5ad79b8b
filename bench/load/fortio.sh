#!/usr/bin/env bash
# CPU per request of an open-loop load at a fixed rate: `tailguard load -r R -c 50` against
# `fortio load -qps R -c 50 -uniform` (evenly spaced, as tailguard's constant arrivals), same
# server (nginx, one worker, keep-alive), interleaved rounds, medians. CPU is user + system of
# each client process (getrusage, what /proc accounts). Also tailguard's send lag p99.
# Usage: bench/load/fortio.sh [ROUNDS] [SECONDS] [RATES...]   (default: 3 30 1000 5000)
# Needs nginx and fortio (`go install fortio.org/fortio@v1.66.5`: later releases need a module
# the Go proxy here refuses).
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-3} secs=${2:-30}
shift $(( $# < 2 ? $# : 2 ))
rates=("${@:-1000 5000}")
read -r -a rates <<<"${rates[*]}"
fortio=$(command -v fortio || echo "$(go env GOPATH)/bin/fortio")
for tool in nginx "$fortio"; do
  command -v "$tool" >/dev/null || [ -x "$tool" ] || { echo "bench/load/fortio.sh: $tool is missing" >&2; exit 2; }
done
cargo build --release -q -p tailguard
tg=${CARGO_TARGET_DIR:-target}/release/tailguard
prefix=$(mktemp -d)
nginx -p "$prefix" -c "$PWD/bench/load/nginx.conf" &
ngx=$!
trap 'kill $ngx 2>/dev/null; rm -rf "$prefix"' EXIT
. bench/lib.sh
wait_ready 18181
url=http://127.0.0.1:18181/

cpu() { awk '{print $1 + $2}' "$1"; }
rows="$prefix/rows"
for r in $(seq "$rounds"); do
  for rate in "${rates[@]}"; do
    /usr/bin/time -f "%U %S" -o "$prefix/tg.time" "$tg" load -r "$rate" -c 50 -d "${secs}s" -q \
      --json "$prefix/tg.json" "$url" >/dev/null
    read -r n lag < <(python3 -c "import json;d=json.load(open('$prefix/tg.json'));print(d['requests'], d['send_lag_us']['p99'])")
    echo "round $r tailguard@$rate $n $(cpu "$prefix/tg.time") $lag" | tee -a "$rows"
    /usr/bin/time -f "%U %S" -o "$prefix/fo.time" "$fortio" load -qps "$rate" -c 50 -t "${secs}s" -uniform \
      -quiet "$url" >"$prefix/fo.out" 2>&1
    n=$(awk '/All done/ {print $3}' "$prefix/fo.out")
    echo "round $r fortio@$rate $n $(cpu "$prefix/fo.time") 0" | tee -a "$rows"
  done
done
echo "# $rounds interleaved rounds of ${secs}s, 50 connections, nginx 1 worker; medians"
python3 - "$rows" <<'PY'
import collections, statistics as st, sys
by = collections.defaultdict(list)
for line in open(sys.argv[1]):
    f = line.split()
    by[f[2]].append((float(f[3]), float(f[4]), float(f[5])))
print(f"{'client':<20}{'requests':>10}{'CPU µs/req':>12}{'send lag p99':>14}")
for arm, v in by.items():
    n = st.median(x[0] for x in v)
    cpu = st.median(x[1] / x[0] * 1e6 for x in v)
    lag = st.median(x[2] for x in v)
    print(f"{arm:<20}{n:>10.0f}{cpu:>12.2f}{(f'{lag:.0f} µs' if arm.startswith('tailguard') else '-'):>14}")
rates = sorted({a.split('@')[1] for a in by})
for rate in rates:
    t, f = by.get(f"tailguard@{rate}"), by.get(f"fortio@{rate}")
    if t and f:
        ratio = st.median((a[1] / a[0]) / (b[1] / b[0]) for a, b in zip(t, f))
        print(f"tailguard/fortio at {rate} req/s: CPU per request {ratio:.2f}x (median of per-round ratios)")
PY
