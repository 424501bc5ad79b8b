# Helpers the bench scripts share. Source it from the repository root: `. bench/lib.sh`.

# Waits until each of PORTS on 127.0.0.1 answers HTTP/1.1 or HTTP/2 (prior knowledge), five seconds at most each (readiness:
# bounded polling; a port still down shows in the run that follows).
# Usage: wait_ready PORT...
wait_ready() {
  local port
  for port in "$@"; do
    for _ in $(seq 50); do
      curl -sf "http://127.0.0.1:$port/" >/dev/null 2>&1 && break
      # An HTTP/2-only listener (HAProxy's `proto h2`) answers prior knowledge only.
      curl -sf --http2-prior-knowledge "http://127.0.0.1:$port/" >/dev/null 2>&1 && break
      sleep 0.1
    done
  done
}

# Prints the medians per arm of the rows in FILE, lines of `round R ARM ...` as the scripts
# tee them: the numbers in COLUMNS (0-based, split on white space, brackets stripped), through
# the Python format string FORMAT, which sees `arm`, `runs` and the medians `m[0]`, `m[1]`...
# Usage: medians FILE FORMAT COLUMN...
medians() {
  python3 - "$@" <<'PY'
import sys, statistics, collections
rows, fmt, cols = sys.argv[1], sys.argv[2], [int(c) for c in sys.argv[3:]]
by = collections.defaultdict(list)
for line in open(rows):
    f = line.split()
    by[f[2]].append([float(f[c].strip("()")) for c in cols])
for arm, v in by.items():
    m = [statistics.median(x[i] for x in v) for i in range(len(cols))]
    print(fmt.format(arm=arm, runs=len(v), m=m))
PY
}

# Prints one run's row, `round R ARM req/s cpu ... us/req (user ... sys ...) good G/N`, from
# load's JSON report FILE and the proxy's user and system clock ticks over the run, the arm's
# name padded to WIDTH (the rows `medians` reads).
# Usage: cpu_row FILE ARM ROUND USER_TICKS SYSTEM_TICKS WIDTH
cpu_row() {
  python3 - "$@" "$(getconf CLK_TCK)" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
arm, r, user, system, width, hz = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
rate, good = s["achieved_rate"], s["good"]
us = lambda ticks: ticks / hz * 1e6 / max(1, s["requests"])
print(f"round {r} {arm:{width}} {rate:9.0f} req/s  cpu {us(user + system):5.1f} us/req"
      f" (user {us(user):4.1f} sys {us(system):4.1f})  good {good}/{s['requests']}")
PY
}
