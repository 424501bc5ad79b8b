#!/usr/bin/env bash
# The project's test command (README "Quick start"): format, lints, unused dependencies, and
# both test tiers (docs/developing.md). Each step prints how long it took.
set -euo pipefail
cd "$(dirname "$0")/.."
step() { # step NAME COMMAND...: runs it, then prints its time
  local name=$1 start=$SECONDS
  shift
  "$@"
  echo "$name: $((SECONDS - start)) s"
}
step "fmt" cargo fmt --all -- --check
# Every dependency a manifest lists is used (cargo-machete; .ci/run installs it).
step "machete" cargo machete
# The test harnesses are compiled unoptimised, the code they test as in every build
# (scripts/rustc-test-harness.sh says why); a wrapper already set still runs the compiler.
export TAILGUARD_INNER_WRAPPER="${RUSTC_WRAPPER:-}"
export RUSTC_WRAPPER="$PWD/scripts/rustc-test-harness.sh"
# Clippy lints the workspace's crates while the test build compiles them, as `cargo clippy
# --workspace --all-targets -- -D warnings` would: clippy-driver is rustc with clippy's lints,
# and Cargo runs it for the workspace's own crates only (dependencies are compiled by rustc).
# A separate `cargo clippy` pass type-checked every crate and dependency a second time (150
# to 230 s of the suite's 13 to 15 minutes on 2 cores, docs/developing.md). CLIPPY_ARGS is how
# `cargo clippy` passes its arguments to clippy-driver; the canary below stops the suite if
# this toolchain's clippy-driver no longer reads it (lints would then only warn).
export RUSTC_WORKSPACE_WRAPPER
RUSTC_WORKSPACE_WRAPPER="$(rustc --print sysroot)/bin/clippy-driver"
export CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"
canary=$(mktemp -d)
printf 'pub fn f(x: u32) -> u32 { x.clone() }\n' > "$canary/lib.rs"
if "$RUSTC_WORKSPACE_WRAPPER" rustc "$canary/lib.rs" --crate-type lib --emit metadata \
  -o "$canary/lib.rmeta" >"$canary/out" 2>&1 \
  || ! grep -q 'clippy::clone-on-copy. implied by .-D warnings' "$canary/out"; then
  cat "$canary/out" >&2
  echo "clippy-driver did not deny a clippy lint with CLIPPY_ARGS: use cargo clippy" >&2
  exit 1
fi
rm -r "$canary"
# Tier 1: fast and deterministic (paused time where timing is logic, seeded RNGs, loopback).
# `--all-targets` builds (and lints) the benches too, as clippy did; the run leaves them out.
step "clippy + tier 1 build" cargo test --workspace --all-targets --locked --no-run
step "tier 1" cargo test --workspace --locked
# Tier 2: live tests that need programs outside Rust (chromium, dnsmasq, nginx, HAProxy,
# h2load) or the wall clock (live bench scenarios, timer precision, delayed ACKs); marked
# #[ignore = "tier 2: ..."].
step "tier 2" cargo test --workspace --locked -- --ignored
