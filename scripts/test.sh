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
step "clippy" cargo clippy --workspace --all-targets --locked -- -D warnings
# Every dependency a manifest lists is used (cargo-machete; .ci/run installs it).
step "machete" cargo machete
# The test harnesses are compiled unoptimised, the code they test as in every build
# (scripts/rustc-test-harness.sh says why); a wrapper already set still runs the compiler.
export TAILGUARD_INNER_WRAPPER="${RUSTC_WRAPPER:-}"
export RUSTC_WRAPPER="$PWD/scripts/rustc-test-harness.sh"
# Tier 1: fast and deterministic (paused time where timing is logic, seeded RNGs, loopback).
step "tier 1 build" cargo test --workspace --locked --no-run
step "tier 1" cargo test --workspace --locked
# Tier 2: live tests that need programs outside Rust (chromium, dnsmasq, nginx, HAProxy,
# h2load) or the wall clock (live bench scenarios, timer precision, delayed ACKs); marked
# #[ignore = "tier 2: ..."].
step "tier 2" cargo test --workspace --locked -- --ignored
