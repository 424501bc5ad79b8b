#!/usr/bin/env bash
# A RUSTC_WRAPPER for the test build (scripts/test.sh sets it): compiles the test harnesses
# themselves (unit-test builds of our crates, the integration tests: every rustc call with
# `--test`) without optimisation, and everything else as Cargo asks. The libraries and the
# binary the tests exercise keep the dev profile's opt-level, so the live tests measure the
# code as every other build of it; only test code, which no test times, is left unoptimised.
# Cargo has no profile for test harnesses alone (`[profile.test]` also builds the workspace's
# libraries): half the test build's time went to optimising them (241 -> 133 s for the
# workspace's own crates on 2 cores, the tier-1 run within a few seconds of before).
# A wrapper already set (sccache...) is kept: TAILGUARD_INNER_WRAPPER runs the compiler.
set -euo pipefail
rustc=$1
shift
inner=()
[ -n "${TAILGUARD_INNER_WRAPPER:-}" ] && inner=("$TAILGUARD_INNER_WRAPPER")
for arg in "$@"; do
  if [ "$arg" = --test ]; then
    exec "${inner[@]}" "$rustc" "$@" -C opt-level=0
  fi
done
exec "${inner[@]}" "$rustc" "$@"
