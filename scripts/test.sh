#!/usr/bin/env bash
# The project's test command (README "Quick start"): format, lints, unused dependencies, and
# both test tiers (docs/developing.md).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
# Every dependency a manifest lists is used (cargo-machete; .ci/run installs it).
cargo machete
# Tier 1: fast and deterministic (paused time where timing is logic, seeded RNGs, loopback).
start=$SECONDS
cargo test --workspace --locked
echo "tier 1: $((SECONDS - start)) s (build included)"
# Tier 2: live tests that need programs outside Rust (chromium, dnsmasq, nginx, HAProxy,
# h2load) or the wall clock (live bench scenarios, timer precision, delayed ACKs); marked
# #[ignore = "tier 2: ..."].
start=$SECONDS
cargo test --workspace --locked -- --ignored
echo "tier 2: $((SECONDS - start)) s"
