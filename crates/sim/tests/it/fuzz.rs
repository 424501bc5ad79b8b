//! Arbitrary scenarios: a scenario or an error, never a panic; what parses also runs (briefly)
//! without a panic; each case within a generous time bound.

use proptest::prelude::*;
use std::time::Duration;
use tailguard_sim::scenario::LoadShape;
use tailguard_sim::{Overrides, Scenario};

/// Far above what any case takes: a case near it is a hang in the making.
const CASE_BOUND: Duration = Duration::from_secs(5);

/// Runs `f`, failing when it takes [`CASE_BOUND`] or longer.
fn timed<T>(f: impl FnOnce() -> T) -> T {
    tailguard_fuzzkit::timed(CASE_BOUND, f)
}

/// A scenario touching most of the format: an inline fleet, capacity, every arm feature.
const FULL: &str = "\
name: full
seed: 3
fleet:
  backends:
    - {name: a, latency: 5ms, capacity: {workers: 2, queue: 4}}
    - {name: b, latency: {uniform: {min: 1ms, max: 9ms}}, fail: {error: 0.2}}
    - {name: c, latency: 20ms, schedule: ['from 0s to 1s latency x10', 'every 2s pause 1s']}
servers: {concurrency: 4, probe_delay: 1ms}
load: {loop: open, arrivals: poisson, rate: 300, ramp: {from: 100, over: 1s}, duration: 2s, clients: 2}
deadline: 100ms
arms:
  - {name: rr, balancer: {kind: round-robin}}
  - name: ewma
    balancer: {kind: p2c, load: peak-ewma, tau: 1s, default_rtt: 5ms}
    accrual: {kind: success-rate, threshold: 0.5, requests: 10}
    retries: {percent: 0.2, min_per_sec: 10, ttl: 10s, max_retries: 2}
    hedge: {max_extra_load: 0.05, min_per_sec: 5}
    outlier: {interval: 1s, factor: 3, min_requests: 5, base_ejection: 1s}
    timeouts: {attempt: 50ms, total: 200ms}
  - {name: probe, balancer: {kind: prequal, probes: 3, pool: 16}}
  - {name: ap, balancer: {kind: aperture, load: least-loaded, min_aperture: 2}}
";

/// This parser's own tricky values, besides the shared ones (`tailguard_fuzzkit::TRICKY`).
const EXTRA: &[&str] = &["5000000h", "closed"];

/// `doc` with a few lines changed (the shared mutations, with this parser's tricky values).
fn mutated(doc: &'static str) -> impl Strategy<Value = String> {
    tailguard_fuzzkit::mutated(doc, EXTRA)
}

/// What any accepted scenario keeps to: a rate the schedule takes, clients and backends the
/// simulator holds (the limits as documented in docs/sim.md).
fn within_limits(s: &Scenario) -> Result<(), TestCaseError> {
    if let LoadShape::Open { rate, .. } = s.load.shape {
        prop_assert!((0.001..=10_000_000.0).contains(&rate), "rate {}", rate);
    }
    prop_assert!(
        (1..=10_000).contains(&s.load.clients),
        "clients {}",
        s.load.clients
    );
    prop_assert!(s.fleet.backends.len() <= 10_000);
    Ok(())
}

/// Runs `s` for a moment of virtual time when its load is small enough to take milliseconds.
fn runs_briefly(mut s: Scenario) {
    let brief = Overrides {
        duration: Some(Duration::from_millis(200)),
        ..Overrides::default()
    };
    if s.apply(&brief).is_err() || s.fleet.backends.len() > 100 || s.load.clients > 8 {
        return;
    }
    let small = match s.load.shape {
        LoadShape::Open { rate, .. } => rate <= 5_000.0,
        LoadShape::Closed { workers, .. } => workers <= 100,
    };
    if small {
        let _ = tailguard_sim::run(&s);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(6_000))]

    #[test]
    fn any_scenario_is_a_scenario_or_an_error(
        text in prop_oneof![
            3 => mutated(FULL),
            1 => mutated(Scenario::builtin_yaml("slow-middle").unwrap()),
            1 => mutated(Scenario::builtin_yaml("add-steps").unwrap()),
            1 => "\\PC{0,200}",
        ]
    ) {
        if let Ok(s) = timed(|| Scenario::from_yaml_str(&text, "fuzz.yaml")) {
            within_limits(&s)?;
            timed(|| runs_briefly(s));
        }
    }

    #[test]
    fn any_command_line_change_is_applied_or_refused(
        rate in prop_oneof![Just(None), any::<f64>().prop_map(Some), (0.0f64..1e8).prop_map(Some)],
        clients in prop_oneof![Just(None), any::<u32>().prop_map(Some), (0u32..20).prop_map(Some)],
        secs in prop_oneof![Just(None), any::<u64>().prop_map(Some), (0u64..100).prop_map(Some)],
    ) {
        let mut s = Scenario::builtin("slow-middle").unwrap();
        let o = Overrides {
            rate,
            clients,
            duration: secs.map(Duration::from_secs),
            ..Overrides::default()
        };
        if timed(|| s.apply(&o)).is_ok() {
            within_limits(&s)?;
        }
    }
}

#[test]
fn the_seed_scenario_parses_and_runs() {
    let s = Scenario::from_yaml_str(FULL, "full.yaml").unwrap();
    let report = tailguard_sim::run(&s).unwrap();
    assert_eq!(report.arms.len(), 4);
}
