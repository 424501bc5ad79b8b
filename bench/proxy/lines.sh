#!/usr/bin/env bash
# The distinct cache lines one proxied GET touches: the request cycle's working set, measured
# rather than modelled. callgrind's cache model (instructions.sh with CALLGRIND_ARGS) says how
# often a 32 KiB L1 misses; this says how much data a request cycle reads and writes and where
# it lies, which a miss count cannot attribute. Each proxy (the tailguard binaries given, then
# HAProxy with bench/proxy/haproxy.cfg when installed) runs under valgrind's lackey in front of
# one zero-latency nginx backend, one keep-alive connection at 20 GETs a second; every data
# access goes through bench/proxy/lines.c, which cuts the trace at each run of a function the
# proxy runs once per request (tailguard's request-head parse, HAProxy's `stream_new`) and
# counts the distinct 64-byte lines between two cuts. Printed per proxy: the median lines per
# request (and of them written), then by region: the stack, the binary's own data (constants,
# statics, jump tables), shared libraries' data, and the heap with every other mapping.
# Windows with a periodic task's work (over 1.25 times the median: a histogram's rotation, a
# pool's sweep) are left out of the breakdown. FUNCTIONS=N also lists the N functions whose
# code first touched the most lines per request (shared libraries' code, memcpy and memset
# among it, as one row each; for a stripped binary such as HAProxy's package, the nearest
# exported symbol). Needs valgrind, a C compiler and nginx; about two minutes for tailguard and
# four for HAProxy (its start under lackey is slow), on an otherwise idle machine: a starved
# run answers too few requests to count.
# Usage: [FUNCTIONS=N] [NO_PEERS=1] bench/proxy/lines.sh BIN...
set -euo pipefail
cd "$(dirname "$0")/../.."
. bench/lib.sh
command -v valgrind >/dev/null || { echo "valgrind is not installed (apt-get install -y valgrind)" >&2; exit 2; }
command -v cc >/dev/null || { echo "a C compiler is needed (apt-get install -y gcc)" >&2; exit 2; }
load=$1
dir=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill $p 2>/dev/null || true; done; sleep 0.2; rm -rf "$dir"' EXIT
cc -O2 -o "$dir/lines" bench/proxy/lines.c
nginx -p "$dir" -c "$PWD/bench/proxy/nginx-backend.conf" & pids+=($!)
wait_ready 18301
arms=("$@")
[ "${NO_PEERS:-0}" = 1 ] || ! command -v haproxy >/dev/null || arms+=(haproxy)
for arm in "${arms[@]}"; do
  if [ "$arm" = haproxy ]; then
    bin=$(command -v haproxy) marker=stream_new port=18321
    cmd=(haproxy -f bench/proxy/haproxy.cfg -db)
  else
    bin=$arm marker='tailguard_http::h1::server::head::parse' port=18361
    cmd=("$arm" proxy --listen 127.0.0.1:18361 --admin 127.0.0.1:18362 --upstream 127.0.0.1:18301 --threads 1)
  fi
  offset=$(nm -C --defined-only "$bin" 2>/dev/null | awk -v m="$marker" '$3 == m && !found {print $1; found = 1}' || true)
  # A stripped binary (HAProxy's package) has its dynamic symbols only.
  [ -n "$offset" ] || offset=$(nm -D --defined-only "$bin" 2>/dev/null | awk -v m="$marker" '$3 == m && !found {print $1; found = 1}' || true)
  [ -n "$offset" ] || { echo "$arm: no symbol $marker in $bin" >&2; exit 2; }
  # valgrind loads a position-independent executable at 0x108000 on amd64 (checked below).
  base=0
  readelf -h "$bin" | grep -q 'Type:.*DYN' && base=$((0x108000))
  mark=$(printf '%x' $((base + 0x$offset)))
  out="$dir/$(basename "$arm")"
  mkdir -p "$out"
  valgrind --tool=lackey --trace-mem=yes --log-fd=9 "${cmd[@]}" 9>&1 >/dev/null 2>"$out/vg.log" |
    "$dir/lines" "$mark" 20 >"$out/windows" &
  p=$!
  pids+=($p)
  # Under lackey a start takes a minute or more: bounded polling, five minutes at most.
  for _ in $(seq 600); do curl -s -o /dev/null "http://127.0.0.1:$port/" 2>/dev/null && break; sleep 0.5; done
  vg=$(pgrep -of "tool=lackey.*$(basename "${cmd[0]}")" || true)
  [ -n "$vg" ] || { echo "$arm: not running under valgrind:" >&2; tail -5 "$out/vg.log" >&2; exit 1; }
  cp "/proc/$vg/maps" "$out/maps"
  # A proxy that never answered fails the load; the windows below tell.
  "$load" load --rate 20 -c 1 -d 12s -q "http://127.0.0.1:$port/" >/dev/null 2>&1 || true
  kill "$vg" 2>/dev/null || true
  # The pipeline's status is the proxy's: HAProxy ends a SIGTERM with a failure status.
  wait "$p" || true
  grep -q '^W' "$out/windows" || { echo "$arm: no request counted (see the filter's message)" >&2; exit 1; }
  python3 - "$arm" "$bin" "$base" "$out" "${FUNCTIONS:-0}" <<'PY'
import bisect, collections, statistics, subprocess, sys
arm, binary, base, out, functions = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
windows, rows = [], None
for l in open(f"{out}/windows"):
    f = l.split()
    if f[0] == "W":
        rows = []
        windows.append((int(f[2]), int(f[3]), rows))
    else:
        rows.append((int(f[0], 16), int(f[1], 16), f[2] == "1"))
median = statistics.median(w[0] for w in windows)
# A window well above the median holds a periodic task's work (a histogram's rotation, a
# pool's sweep): left out of the breakdown, counted apart.
steady = [w for w in windows if w[0] <= 1.25 * median]
maps = []
for l in open(f"{out}/maps"):
    f = l.split()
    lo, hi = (int(x, 16) for x in f[0].split("-"))
    maps.append((lo, hi, f[5] if len(f) > 5 else ""))
name = binary.split("/")[-1]
own = [m for m in maps if m[2].split("/")[-1] == name]
if base and own and own[0][0] != base:
    sys.exit(f"{arm}: loaded at {own[0][0]:#x}, not {base:#x}: the marker is wrong")
starts = [m[0] for m in maps]
def mapping(a):
    i = bisect.bisect_right(starts, a) - 1
    return maps[i] if i >= 0 and a < maps[i][1] else (0, 0, "")
def region(a):
    lo, hi, path = mapping(a)
    if lo <= 0x1FFF000000 - 1 < hi:  # valgrind's client stack on amd64 ends at 0x1fff001000
        return "stack"
    if path.split("/")[-1] == name:
        return "binary's data"
    if ".so" in path:
        return "libraries' data"
    return "heap and other"
by = collections.defaultdict(lambda: [0.0, 0.0])
for _, _, rows in steady:
    for line, _, w in rows:
        r = by[region(line)]
        r[0] += 1; r[1] += w
n = len(steady)
written = statistics.median(w[1] for w in steady)
print(f"{arm:<28} {median:6.0f} lines per GET ({median * 64 / 1024:.1f} KiB), {written:.0f} written;"
      f" {len(windows)} requests, {len(windows) - n} with periodic work left out")
for r in ("stack", "binary's data", "libraries' data", "heap and other"):
    print(f"    {r:<18} {by[r][0] / n:6.1f} ({by[r][1] / n:.1f} written)")
if functions:
    syms = []
    nm = subprocess.run(["nm", "-C", "--defined-only", binary], capture_output=True, text=True).stdout
    if not nm.strip():  # a stripped binary (HAProxy's package): its dynamic symbols
        nm = subprocess.run(["nm", "-D", "-C", "--defined-only", binary], capture_output=True, text=True).stdout
    for l in nm.splitlines():
        f = l.split(" ", 2)
        if len(f) == 3 and f[1] in "tTwW":
            syms.append((int(f[0], 16) + base, f[2]))
    syms.sort()
    sym_starts = [s[0] for s in syms]
    def function(a):
        path = mapping(a)[2]
        if ".so" in path:
            return "(code in " + path.split("/")[-1] + ")"
        i = bisect.bisect_right(sym_starts, a) - 1
        return syms[i][1] if i >= 0 else "?"
    per = collections.defaultdict(lambda: [0.0, 0.0])
    for _, _, rows in steady:
        for _, site, w in rows:
            r = per[function(site)]
            r[0] += 1; r[1] += w
    for fn, (k, w) in sorted(per.items(), key=lambda x: -x[1][0])[:functions]:
        print(f"    {k / n:6.1f} ({w / n:5.1f} written)  {fn[:110]}")
PY
done
