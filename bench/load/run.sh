#!/usr/bin/env bash
# Maximum throughput and client CPU per request: `tailguard load --rate 0` against wrk, same
# server (nginx, one worker), same connection count, same client thread count, interleaved
# rounds, medians. Usage: bench/load/run.sh [ROUNDS] [SECONDS] [CONNECTIONS] [THREADS]
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-5} secs=${2:-10} conns=${3:-32} threads=${4:-1}
for tool in wrk nginx; do
  command -v $tool >/dev/null || { echo "bench/load: $tool is missing (apt-get install -y wrk nginx)" >&2; exit 2; }
done
cargo build --release -q -p tailguard
tg=${CARGO_TARGET_DIR:-target}/release/tailguard
prefix=$(mktemp -d)
nginx -p "$prefix" -c "$PWD/bench/load/nginx.conf" &
ngx=$!
trap 'kill $ngx 2>/dev/null; rm -rf "$prefix"' EXIT
url=http://127.0.0.1:18181/
for _ in $(seq 50); do curl -sf "$url" >/dev/null 2>&1 && break; sleep 0.1; done

# CPU seconds (user + system) of a finished command, from /usr/bin/time's output file.
cpu() { awk '{print $1 + $2}' "$1"; }

results=$(mktemp)
for r in $(seq "$rounds"); do
  /usr/bin/time -f "%U %S" -o "$prefix/wrk.time" wrk -t"$threads" -c"$conns" -d"${secs}s" "$url" >"$prefix/wrk.out"
  wrk_n=$(awk '/requests in/ {print $1}' "$prefix/wrk.out")
  /usr/bin/time -f "%U %S" -o "$prefix/tg.time" "$tg" load --rate 0 -c "$conns" --threads "$threads" \
    -d "${secs}s" -q --json "$prefix/tg.json" "$url" >/dev/null
  tg_n=$(python3 -c "import json;print(json.load(open('$prefix/tg.json'))['requests'])")
  echo "$r $wrk_n $(cpu "$prefix/wrk.time") $tg_n $(cpu "$prefix/tg.time")" >>"$results"
done

python3 - "$results" "$secs" "$conns" "$threads" <<'PY'
import statistics as st, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1])]
secs, conns, threads = float(sys.argv[2]), sys.argv[3], sys.argv[4]
def med(i): return st.median(r[i] for r in rows)
wrk_rps, tg_rps = med(1) / secs, med(3) / secs
wrk_cpu = st.median(r[2] / r[1] * 1e6 for r in rows)
tg_cpu = st.median(r[4] / r[3] * 1e6 for r in rows)
print(f"# {len(rows)} interleaved rounds of {secs:.0f}s, {conns} connections, {threads} client thread(s), nginx 1 worker")
print(f"{'client':<22}{'req/s (median)':>16}{'CPU µs/req':>12}")
print(f"{'wrk':<22}{wrk_rps:>16.0f}{wrk_cpu:>12.2f}")
print(f"{'tailguard load':<22}{tg_rps:>16.0f}{tg_cpu:>12.2f}")
print(f"ratio tailguard/wrk: throughput {tg_rps / wrk_rps:.2f}x, CPU per request {tg_cpu / wrk_cpu:.2f}x")
PY
