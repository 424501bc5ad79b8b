#!/usr/bin/env bash
# Builds target/pgo/tailguard: the `dist` profile (one codegen unit, fat LTO) laid out and
# inlined by a profile of its own hot paths (LLVM's profile-guided optimisation). Three steps:
# 1. an instrumented `dist` build that counts every branch and call it takes;
# 2. training: that binary runs the hop as users run it, on 127.0.0.1 only: `serve` behind
#    `proxy --threads 1`, driven by `load` over HTTP/1.1 (open loop, closed loop, a POST) and
#    gRPC (unary calls on one HTTP/2 connection); every process writes its counts when it exits;
# 3. a `dist` build that reads the merged counts.
# Each build has a target directory of its own under target/pgo-work (a change of RUSTFLAGS
# would rebuild the usual target directory from scratch), and the flags apply to the binary's
# crates only, not to build scripts (`--target`). It needs `llvm-profdata` of rustc's own LLVM:
# the rustup component `llvm-tools`, added when missing. Takes about 20 minutes on 2 cores.
# What it gains is measured in docs/proxy.md ("Build profiles and PGO").
# Usage: scripts/build-pgo.sh, or scripts/build-pgo.sh --train BIN for the training alone.
set -euo pipefail
cd "$(dirname "$0")/.."

# Runs the hop on BIN as users run it; fails when any request of it failed (`--slo`), so a
# training that trained nothing stops the build.
train() {
  local bin=$1 serve proxy url
  "$bin" serve --listen 127.0.0.1:18401 --threads 1 --no-control >/dev/null 2>&1 &
  serve=$!
  "$bin" proxy --listen 127.0.0.1:18402 --admin 127.0.0.1:18403 --upstream 127.0.0.1:18401 \
    --threads 1 >/dev/null 2>&1 &
  proxy=$!
  train_pids=("$serve" "$proxy")
  trap 'kill "${train_pids[@]}" 2>/dev/null || true' EXIT
  # Bounded polling: about 20 s at most for both to listen and answer.
  for _ in $(seq 20); do
    curl -s -m 1 -o /dev/null http://127.0.0.1:18402/ && break
    sleep 0.1
  done
  curl -s -m 1 -o /dev/null --fail http://127.0.0.1:18402/ || { echo "the proxy did not answer" >&2; exit 1; }
  url=http://127.0.0.1:18402/
  local all=(-q --slo 'success>=100%')
  "$bin" load "${all[@]}" -r 5000 -c 16 -d 4s "$url" >/dev/null
  "$bin" load "${all[@]}" -r 0 -c 32 -d 4s "$url" >/dev/null
  "$bin" load "${all[@]}" -r 2000 -c 8 -d 2s -X POST --data 'a small body' "$url" >/dev/null
  "$bin" load "${all[@]}" --grpc --call ping --h2-connections 1 -r 0 -c 32 -d 4s "$url" >/dev/null
  # The proxy drains and exits on SIGTERM, `serve` on SIGINT: both write their counts then.
  kill -TERM "$proxy"
  kill -INT "$serve"
  wait "$proxy" "$serve"
  trap - EXIT
  echo "trained: HTTP/1.1 open and closed loop, POST, gRPC; every request answered"
}

if [ "${1:-}" = --train ]; then
  # The training alone, on any tailguard binary (a tier-2 test runs it so it cannot rot).
  train "$2"
  exit 0
fi
host=$(rustc -vV | sed -n 's/^host: //p')
profdata="$(rustc --print sysroot)/lib/rustlib/$host/bin/llvm-profdata"
if [ ! -x "$profdata" ] && command -v rustup >/dev/null; then
  rustup component add llvm-tools || true
fi
[ -x "$profdata" ] || {
  echo "no llvm-profdata of this rustc's LLVM at $profdata: rustup component add llvm-tools" >&2
  exit 2
}
work=$PWD/target/pgo-work
rm -rf "$work/profiles"
mkdir -p "$work/profiles" target/pgo

echo "== 1/3: the instrumented build"
RUSTFLAGS="-Cprofile-generate=$work/profiles" \
  cargo build --profile dist --locked -p tailguard --target "$host" --target-dir "$work/gen"
bin=$work/gen/$host/dist/tailguard

echo "== 2/3: training"
train "$bin"
"$profdata" merge -o "$work/merged.profdata" "$work/profiles"
echo "profiles: $(ls "$work/profiles" | wc -l) files merged"

echo "== 3/3: the optimised build"
RUSTFLAGS="-Cprofile-use=$work/merged.profdata" \
  cargo build --profile dist --locked -p tailguard --target "$host" --target-dir "$work/use"
cp "$work/use/$host/dist/tailguard" target/pgo/tailguard
echo "built target/pgo/tailguard"
