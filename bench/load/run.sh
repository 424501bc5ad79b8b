#!/usr/bin/env bash
# Maximum throughput and client CPU per request: `tailguard load --rate 0` against wrk, same
# server (nginx, one worker), same connection count, same client thread count, interleaved
# rounds, medians. Both of load's HTTP/1.1 clients run: the lean one (the default, on
# httparse) and hyper's (`--h1-client hyper`), so the gain of the lean path is measured in the
# same run. Usage: bench/load/run.sh [ROUNDS] [SECONDS] [CONNECTIONS] [THREADS]
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-5} secs=${2:-10} conns=${3:-32} threads=${4:-1}
for tool in wrk nginx; do
  command -v $tool >/dev/null || { echo "bench/load: $tool is missing (apt-get install -y wrk nginx)" >&2; exit 2; }
done
cargo build --profile dist -q -p tailguard
tg=${CARGO_TARGET_DIR:-target}/dist/tailguard
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
  row="$r $wrk_n $(cpu "$prefix/wrk.time")"
  for client in lean hyper; do
    /usr/bin/time -f "%U %S" -o "$prefix/tg.time" "$tg" load --rate 0 -c "$conns" --threads "$threads" \
      --h1-client "$client" -d "${secs}s" -q --json "$prefix/tg.json" "$url" >/dev/null
    tg_n=$(python3 -c "import json;print(json.load(open('$prefix/tg.json'))['requests'])")
    row="$row $tg_n $(cpu "$prefix/tg.time")"
  done
  echo "$row" >>"$results"
done

python3 - "$results" "$secs" "$conns" "$threads" <<'PY'
import statistics as st, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1])]
secs, conns, threads = float(sys.argv[2]), sys.argv[3], sys.argv[4]
def med(i): return st.median(r[i] for r in rows)
def rps(i): return med(i) / secs
def cpu(i): return st.median(r[i + 1] / r[i] * 1e6 for r in rows)
# Ratios per round, then their median: rounds drift together on a noisy machine.
def ratio(i, j): return st.median(r[i] / r[j] for r in rows)
def cpu_ratio(i, j): return st.median((r[i + 1] / r[i]) / (r[j + 1] / r[j]) for r in rows)
print(f"# {len(rows)} interleaved rounds of {secs:.0f}s, {conns} connections, {threads} client thread(s), nginx 1 worker")
print(f"{'client':<32}{'req/s (median)':>16}{'CPU µs/req':>12}")
for name, i in [("wrk", 1), ("tailguard load (lean, default)", 3), ("tailguard load --h1-client hyper", 5)]:
    print(f"{name:<32}{rps(i):>16.0f}{cpu(i):>12.2f}")
print(f"lean/wrk: throughput {ratio(3, 1):.2f}x, CPU per request {cpu_ratio(3, 1):.2f}x")
print(f"hyper/wrk: throughput {ratio(5, 1):.2f}x, CPU per request {cpu_ratio(5, 1):.2f}x")
print(f"lean/hyper: throughput {ratio(3, 5):.2f}x, CPU per request {cpu_ratio(3, 5):.2f}x")
PY
