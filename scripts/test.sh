#!/usr/bin/env bash
# The project's test command (README "Quick start"): format, lints, every test.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
# Every dependency a manifest lists is used (cargo-machete; .ci/run installs it).
cargo machete
cargo test --workspace --locked
