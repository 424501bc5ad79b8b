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
# Usage: scripts/build-pgo.sh
set -euo pipefail
cd "$(dirname "$0")/.."
host=$(rustc -vV | sed -n 's/^host: //p')
profdata="$(rustc --print sysroot)/lib/rustlib/$host/bin/llvm-profdata"
if [ ! -x "$profdata" ]; then
  rustup component add llvm-tools
fi
[ -x "$profdata" ] || { echo "no llvm-profdata at $profdata (rustup component add llvm-tools)" >&2; exit 2; }
work=$PWD/target/pgo-work
rm -rf "$work/profiles"
mkdir -p "$work/profiles" target/pgo

echo "== 1/3: the instrumented build"
RUSTFLAGS="-Cprofile-generate=$work/profiles" \
  cargo build --profile dist --locked -p tailguard --target "$host" --target-dir "$work/gen"
bin=$work/gen/$host/dist/tailguard

echo "== 2/3: training"
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done' EXIT
"$bin" serve --listen 127.0.0.1:18401 --threads 1 --no-control >/dev/null 2>&1 &
serve=$!
pids+=("$serve")
"$bin" proxy --listen 127.0.0.1:18402 --admin 127.0.0.1:18403 --upstream 127.0.0.1:18401 \
  --threads 1 >/dev/null 2>&1 &
proxy=$!
pids+=("$proxy")
# Bounded polling: 10 s at most for both to listen.
for _ in $(seq 100); do
  curl -s -o /dev/null http://127.0.0.1:18402/ && break
  sleep 0.1
done
curl -s -o /dev/null --fail http://127.0.0.1:18402/ || { echo "the proxy did not answer" >&2; exit 1; }
url=http://127.0.0.1:18402/
"$bin" load -r 5000 -c 16 -d 4s -q "$url" >/dev/null
"$bin" load -r 0 -c 32 -d 4s -q "$url" >/dev/null
"$bin" load -r 2000 -c 8 -d 2s -q -X POST --data 'a small body' "$url" >/dev/null
"$bin" load --grpc --call ping --h2-connections 1 -r 0 -c 32 -d 4s -q "$url" >/dev/null
# The proxy drains and exits on SIGTERM, `serve` on SIGINT: both write their counts then.
kill -TERM "$proxy"
kill -INT "$serve"
wait "$proxy" "$serve" || true
pids=()
"$profdata" merge -o "$work/merged.profdata" "$work/profiles"
echo "profiles: $(ls "$work/profiles" | wc -l) files merged"

echo "== 3/3: the optimised build"
RUSTFLAGS="-Cprofile-use=$work/merged.profdata" \
  cargo build --profile dist --locked -p tailguard --target "$host" --target-dir "$work/use"
cp "$work/use/$host/dist/tailguard" target/pgo/tailguard
echo "built target/pgo/tailguard"
