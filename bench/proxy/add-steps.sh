#!/usr/bin/env bash
# Seed 000 live on loopback: ten `tailguard serve` backends (the add-steps fleet), then
# `tailguard load` in a closed loop of 50 workers (as the original slow_cooker run) against
#   baseline: client-side round robin over the ten backends (ten URLs), and
#   proxy:    one URL, through `tailguard proxy --config bench/proxy/add-steps.yaml`.
# Usage: bench/proxy/add-steps.sh [DURATION]   (default 30s; needs a release build)
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${TAILGUARD:-target/release/tailguard}
DURATION=${1:-30s}
OUT=${OUT:-/tmp/tailguard-add-steps}
mkdir -p "$OUT"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

"$BIN" serve --fleet add-steps --listen 127.0.0.1:9000 --no-control >"$OUT/serve.log" 2>&1 &
pids+=($!)
"$BIN" proxy --config bench/proxy/add-steps.yaml >"$OUT/proxy.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
  curl -sf http://127.0.0.1:9990/ready >/dev/null 2>&1 && curl -s -o /dev/null http://127.0.0.1:9009/ && break
  sleep 0.1
done

urls=()
for p in $(seq 9000 9009); do urls+=("http://127.0.0.1:$p/"); done
echo "== baseline: client round robin over ten backends"
"$BIN" load --rate 0 --concurrency 50 --duration "$DURATION" --interval 10s \
  --json "$OUT/baseline.json" "${urls[@]}" | tee "$OUT/baseline.txt"
echo "== proxy: tailguard proxy (peak EWMA, retryableRead5XX, success-rate accrual)"
"$BIN" load --rate 0 --concurrency 50 --duration "$DURATION" --interval 10s \
  --json "$OUT/proxy.json" http://127.0.0.1:4140/ | tee "$OUT/proxy.txt"
