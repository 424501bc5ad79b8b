#!/usr/bin/env bash
# Faults and soak against HAProxy (issue 28): tailguard proxy with the probing balancer, hedging
# and outlier ejection (bench/proxy/faults.yaml) and HAProxy given its best
# (bench/proxy/faults-haproxy.cfg), each in front of its own `tailguard serve` fleet of three
# ~5 ms backends (bench/proxy/faults-fleet.yaml), all on 127.0.0.1. One thread each.
#
# Part 1, the fault matrix: per fault, one run per arm, interleaved (tailguard, haproxy, ...),
# open loop at RATE req/s for RUN_S seconds, the fault applied from 5 s to RUN_S-5 s through
# the fleet's control endpoint. Every run starts a fresh fleet and a fresh proxy, so no run
# inherits another's accrual, ejection or health-check state.
# Part 2, the soak: per arm, SOAK_RATE req/s for SOAK_S seconds, one backend down for
# SOAK_DOWN every 20 s (rotating), with the proxy's RSS and descriptors at start and end.
#
# Usage: bench/proxy/faults.sh [SOAK_SECONDS]        (default 600; e.g. 60 for a smoke run)
# Environment: BIN (tailguard binary, default target/dist/tailguard), PARTS ("matrix soak"),
# ARMS ("tailguard haproxy"), FAULTS (default all: none down pause slow fail503 two-down
# all-down), RATE (1000), RUN_S (30), SOAK_RATE (2000), SOAK_DOWN (3s), OUT (a directory for
# every run's JSON and logs; default a new one under /tmp, kept). `faults.sh --summary DIR`
# prints the tables of a finished OUT again.
set -euo pipefail
cd "$(dirname "$0")/../.."
here=bench/proxy
summary() { python3 "$here/faults-summary.py" "$1"; }
if [[ ${1:-} == --summary ]]; then summary "$2"; exit 0; fi
if ! command -v haproxy >/dev/null; then
  echo "faults.sh: haproxy is missing: apt-get install -y haproxy" >&2; exit 2
fi
for tool in curl python3; do
  command -v $tool >/dev/null || { echo "faults.sh: $tool is missing" >&2; exit 2; }
done
BIN=${BIN:-target/dist/tailguard}
[[ -x $BIN ]] || { echo "faults.sh: no $BIN: cargo build --profile dist -p tailguard" >&2; exit 2; }
SOAK_S=${1:-${SOAK_S:-600}}
PARTS=${PARTS:-matrix soak} ARMS=${ARMS:-tailguard haproxy}
FAULTS=${FAULTS:-none down pause slow fail503 two-down all-down}
RATE=${RATE:-1000} RUN_S=${RUN_S:-30} SOAK_RATE=${SOAK_RATE:-2000} SOAK_DOWN=${SOAK_DOWN:-3s}
[[ $SOAK_S =~ ^[0-9]+$ && $SOAK_S -ge 30 && $RUN_S =~ ^[0-9]+$ && $RUN_S -ge 12 ]] ||
  { echo "faults.sh: SOAK_SECONDS must be at least 30 and RUN_S at least 12" >&2; exit 2; }
OUT=${OUT:-$(mktemp -d /tmp/tailguard-faults.XXXXXX)}
mkdir -p "$OUT/matrix" "$OUT/soak"

# Ports: per arm a control port, three backends, the proxy and its admin/stats port.
declare -A control=([tailguard]=19100 [haproxy]=19200) listen=([tailguard]=19101 [haproxy]=19201)
declare -A url=([tailguard]=http://127.0.0.1:19110/ [haproxy]=http://127.0.0.1:19210/)
declare -A admin=([tailguard]=http://127.0.0.1:19111 [haproxy]=http://127.0.0.1:19211)
for p in 19100 19101 19102 19103 19110 19111 19200 19201 19202 19203 19210 19211; do
  if (exec 3<>/dev/tcp/127.0.0.1/$p) 2>/dev/null; then
    echo "faults.sh: 127.0.0.1:$p is taken; this script needs 19100-19111 and 19200-19211" >&2
    exit 2
  fi
done

pids=() # every process this script started and has not yet stopped
stop() { # stop PID: TERM, at most 5 s, then KILL
  kill "$1" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
  forget "$1"
}
forget() { local keep=() p; for p in "${pids[@]}"; do [[ $p == "$1" ]] || keep+=("$p"); done; pids=("${keep[@]}"); }
cleanup() { local p; for p in "${pids[@]}"; do stop "$p"; done; }
trap cleanup EXIT
trap 'exit 130' INT TERM
start() { # start LOG CMD...: runs CMD in the background, its pid in $started
  "${@:2}" >"$1" 2>&1 &
  started=$!; pids+=("$started")
}
ready() { # ready URL PID: bounded poll (10 s) for any HTTP answer while PID lives
  for _ in $(seq 100); do
    curl -so /dev/null -m 1 "$1" && return 0
    kill -0 "$2" 2>/dev/null || { echo "faults.sh: $1: its process exited (see $OUT)" >&2; return 1; }
    sleep 0.1
  done
  echo "faults.sh: $1 did not answer in 10 s" >&2; return 1
}
now() { echo "$EPOCHREALTIME"; }
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; } # user + system CPU, clock ticks
hz=$(getconf CLK_TCK)
sleep_until() { # sleep_until T0 SECONDS: until SECONDS after T0
  local left; left=$(awk -v t0="$1" -v s="$2" -v n="$(now)" 'BEGIN { d = t0 + s - n; print (d > 0 ? d : 0) }')
  sleep "$left"
}
ctl() { # ctl ARM BACKEND JSON: a change through the fleet's control endpoint
  curl -sf -m 5 -o /dev/null -d "$3" "http://127.0.0.1:${control[$1]}/backends/$2" ||
    echo "faults.sh: control change $3 to $1 backend $2 failed" >&2
}
sample() { # sample PID LABEL FILE: a line "LABEL RSS-KiB descriptors"; never ends the run
  local rss fds
  rss=$(awk '/^VmRSS/ { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0)
  fds=$(find "/proc/$1/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
  echo "$2 ${rss:-0} $fds" >>"$3" || echo "faults.sh: could not write $3" >&2
}

up() { # up ARM DIR: a fresh fleet and proxy for ARM, logs in DIR; $fleet_pid, $proxy_pid
  start "$2/fleet.log" "$BIN" serve --fleet "$here/faults-fleet.yaml" \
    --listen "127.0.0.1:${listen[$1]}" --control "127.0.0.1:${control[$1]}"
  fleet_pid=$started
  ready "http://127.0.0.1:${control[$1]}/backends" "$fleet_pid"
  if [[ $1 == tailguard ]]; then
    start "$2/proxy.log" "$BIN" proxy --config "$here/faults.yaml"
  else
    start "$2/proxy.log" haproxy -f "$here/faults-haproxy.cfg" -db
  fi
  proxy_pid=$started
  ready "${url[$1]}" "$proxy_pid"
}
down() { # down ARM DIR: the proxy's own view saved, then proxy and fleet stopped
  if [[ $1 == tailguard ]]; then
    curl -s -m 5 "${admin[$1]}/metrics" >"$2/proxy-metrics.txt" || true
    curl -s -m 5 "${admin[$1]}/endpoints" >"$2/proxy-endpoints.json" || true
  else
    curl -s -m 5 "${admin[$1]}/stats;csv" >"$2/proxy-stats.csv" || true
  fi
  curl -s -m 5 "http://127.0.0.1:${control[$1]}/backends" >"$2/fleet.json" || true
  stop "$proxy_pid"; stop "$fleet_pid"
}
load() { # load ARM DIR RATE SECONDS: tailguard load in the background, its pid in $load_pid
  start "$2/load.log" timeout -s INT $(($4 + 60)) "$BIN" load -r "$3" -c 1000 -d "${4}s" \
    -i 1s -q --json "$2/load.json" "${url[$1]}"
  load_pid=$started
}
finish_load() { # wait for load (bounded by its timeout wrapper); keep its status
  local rc=0; wait "$load_pid" || rc=$?
  forget "$load_pid"
  [[ $rc == 0 ]] || echo "faults.sh: load exited with $rc (see $1/load.log)" >&2
}

apply_fault() { # apply_fault ARM FAULT SECONDS
  local len=$3
  case $2 in
    none) ;;
    down) ctl "$1" 0 "{\"down\": \"${len}s\"}" ;;
    pause) ctl "$1" 0 "{\"pause\": \"${len}s\"}" ;;
    slow) ctl "$1" 0 "{\"faults\": [\"from 0s to ${len}s latency x10\"]}" ;;
    fail503) ctl "$1" 0 "{\"faults\": [\"from 0s to ${len}s fail 50% status 503\"]}" ;;
    two-down) ctl "$1" 0 "{\"down\": \"${len}s\"}"; ctl "$1" 1 "{\"down\": \"${len}s\"}" ;;
    all-down) for b in 0 1 2; do ctl "$1" $b '{"down": "5s"}'; done ;;
    *) echo "faults.sh: unknown fault $2" >&2; exit 2 ;;
  esac
}

matrix() {
  local arm fault dir t0 cpu0
  for fault in $FAULTS; do
    for arm in $ARMS; do
      dir=$OUT/matrix/$arm-$fault; mkdir -p "$dir"
      echo "# matrix: $arm, $fault ($RUN_S s at $RATE req/s)" >&2
      up "$arm" "$dir"
      cpu0=$(ticks "$proxy_pid"); t0=$(now); load "$arm" "$dir" "$RATE" "$RUN_S"
      sleep_until "$t0" 5
      apply_fault "$arm" "$fault" $((RUN_S - 10))
      finish_load "$dir"
      echo "$cpu0 $(ticks "$proxy_pid") $hz" >"$dir/cpu.txt" || true || true
      down "$arm" "$dir"
    done
  done
}

soak() { # per arm: one backend down for SOAK_DOWN every 20 s, rotating; RSS and fds sampled
  local arm dir t0 k cpu0
  for arm in $ARMS; do
    dir=$OUT/soak/$arm; mkdir -p "$dir"
    echo "# soak: $arm, $SOAK_S s at $SOAK_RATE req/s, a backend down for $SOAK_DOWN every 20 s" >&2
    up "$arm" "$dir"
    sample "$proxy_pid" idle "$dir/proc.txt"
    cpu0=$(ticks "$proxy_pid"); t0=$(now); load "$arm" "$dir" "$SOAK_RATE" "$SOAK_S"
    sleep_until "$t0" 10; sample "$proxy_pid" start "$dir/proc.txt"
    for ((k = 1; 20 * k < SOAK_S - 5; k++)); do
      sleep_until "$t0" $((20 * k))
      ctl "$arm" $(((k - 1) % 3)) "{\"down\": \"$SOAK_DOWN\"}"
      sample "$proxy_pid" "t$((20 * k))" "$dir/proc.txt"
    done
    sleep_until "$t0" $((SOAK_S - 2)); sample "$proxy_pid" end "$dir/proc.txt"
    finish_load "$dir"
    echo "$cpu0 $(ticks "$proxy_pid") $hz" >"$dir/cpu.txt" || true
    sample "$proxy_pid" after "$dir/proc.txt"
    down "$arm" "$dir"
  done
}

echo "# results in $OUT; $BIN ($("$BIN" --version 2>/dev/null || echo '?')), $(haproxy -v | head -1)" >&2
if [[ $PARTS == *matrix* ]]; then matrix; fi
if [[ $PARTS == *soak* ]]; then soak; fi
summary "$OUT"
