#!/usr/bin/env bash
# gRPC maximum calls/s and client CPU per call: `tailguard load --grpc` against ghz and fortio,
# same server (`tailguard serve --threads 1`, which answers fortio's ping), same method
# (fgrpc.PingServer/Ping), one HTTP/2 connection carrying CONC concurrent calls, closed loop,
# interleaved rounds, medians. ghz and fortio come from the Go module proxy (`go install`); a
# tool that cannot be installed is skipped with a message.
# Usage: bench/load/grpc.sh [ROUNDS] [SECONDS] [CONC]
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-3} secs=${2:-10} conc=${3:-50}
gobin=$(go env GOPATH 2>/dev/null || echo "$HOME/go")/bin
export PATH="$gobin:$PATH"
install() { # $1 = binary, $2 = module@version
  command -v "$1" >/dev/null && return 0
  command -v go >/dev/null || { echo "bench/grpc: no go to install $1: skipped" >&2; return 1; }
  go install "$2" >/dev/null 2>&1 || { echo "bench/grpc: go install $2 failed: $1 skipped" >&2; return 1; }
}
have_ghz=0 have_fortio=0
install ghz github.com/bojand/ghz/cmd/ghz@v0.93.0 && have_ghz=1
# fortio's newest releases pull a module the Go proxy here refuses; this one builds.
install fortio fortio.org/fortio@v1.66.5 && have_fortio=1
cargo build --profile dist -q -p tailguard
tg=${CARGO_TARGET_DIR:-target}/dist/tailguard
work=$(mktemp -d)
port=18290
"$tg" serve --listen 127.0.0.1:$port --no-control --threads 1 >/dev/null 2>&1 &
srv=$!
trap 'kill $srv 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done

run() { # $1 = tool; prints "calls cpu_seconds ok_calls"
  local t="$work/$1.time"
  case $1 in
    tailguard)
      /usr/bin/time -f "%U %S" -o "$t" "$tg" load --grpc --call fgrpc.PingServer/Ping -r 0 \
        -c "$conc" --h2-connections 1 --threads 1 -d "${secs}s" -q --json "$work/tg.json" \
        http://127.0.0.1:$port >/dev/null
      python3 -c "import json;j=json.load(open('$work/tg.json'));print(j['requests'], end=' ')"
      cpu "$t"
      python3 -c "import json;j=json.load(open('$work/tg.json'));print('', j['status_codes'].get('OK', 0))" ;;
    ghz)
      /usr/bin/time -f "%U %S" -o "$t" ghz --insecure --proto proto/fgrpc/ping.proto \
        --call fgrpc.PingServer.Ping -c "$conc" --connections 1 --cpus 1 -z "${secs}s" \
        -O json -o "$work/ghz.json" 127.0.0.1:$port >/dev/null 2>&1 || true
      python3 -c "import json;j=json.load(open('$work/ghz.json'));print(j['count'], end=' ')"
      cpu "$t"
      python3 -c "import json;j=json.load(open('$work/ghz.json'));print('', j.get('statusCodeDistribution',{}).get('OK',0))" ;;
    fortio)
      GOMAXPROCS=1 /usr/bin/time -f "%U %S" -o "$t" fortio load -grpc -ping -qps 0 -c 1 -s "$conc" \
        -t "${secs}s" -json "$work/fortio.json" 127.0.0.1:$port >/dev/null 2>&1 || true
      python3 -c "import json;j=json.load(open('$work/fortio.json'));print(j['DurationHistogram']['Count'], end=' ')"
      cpu "$t"
      python3 -c "import json;j=json.load(open('$work/fortio.json'));print('', j.get('RetCodes',{}).get('SERVING',0)+j.get('RetCodes',{}).get('OK',0))" ;;
  esac
}
cpu() { awk '{printf "%s", $1 + $2}' "$1"; }

tools=(tailguard)
[ $have_ghz = 1 ] && tools+=(ghz)
[ $have_fortio = 1 ] && tools+=(fortio)
results="$work/results"
for r in $(seq "$rounds"); do
  for tool in "${tools[@]}"; do
    echo "$r $tool $(run "$tool")" >>"$results"
  done
done
echo "# gRPC ping (fgrpc.PingServer/Ping) against tailguard serve --threads 1: closed loop,"
echo "# $conc calls in flight on one HTTP/2 connection, one client thread, ${secs}s x $rounds rounds (medians)"
python3 - "$results" "$secs" <<'PY'
import statistics as st, sys
rows = [l.split() for l in open(sys.argv[1])]
secs = float(sys.argv[2])
print(f"{'client':10} {'calls/s':>10} {'cpu/call':>10} {'ok/calls':>10}")
for tool in dict.fromkeys(r[1] for r in rows):
    mine = [r for r in rows if r[1] == tool]
    rate = st.median(float(r[2]) / secs for r in mine)
    cpu = st.median(float(r[3]) / float(r[2]) * 1e6 for r in mine if float(r[2]) > 0)
    ok = "/".join(f"{int(r[4])}/{int(r[2])}" for r in mine[:1])
    print(f"{tool:10} {rate:10.0f} {cpu:8.1f}µs {ok:>10}")
PY
