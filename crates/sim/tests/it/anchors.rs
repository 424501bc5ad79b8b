//! The findings docs/sim.md reports, checked on the full built-in scenarios: seed 002's
//! ranking on `slow-middle` and seed 000's on `add-steps`.

use tailguard_sim::{run, ArmResult, Overrides, Report, Scenario};

fn report(name: &str, arms: &[&str]) -> Report {
    let mut s = Scenario::builtin(name).unwrap();
    let o = Overrides {
        arms: arms.iter().map(|a| a.to_string()).collect(),
        ..Overrides::default()
    };
    s.apply(&o).unwrap();
    run(&s).unwrap()
}

fn arm<'a>(r: &'a Report, name: &str) -> &'a ArmResult {
    r.arms.iter().find(|a| a.name == name).unwrap()
}

/// Seed 002 with a 1 s deadline: round robin near 95%, least loaded near 99%, peak EWMA at
/// 99.9% or better; every request counted.
#[test]
fn slow_middle_reproduces_seed_002() {
    let r = report(
        "slow-middle",
        &[
            "round-robin",
            "p2c-least-loaded",
            "heap-least-loaded",
            "p2c-peak-ewma",
        ],
    );
    let within = |name| arm(&r, name).within_deadline_rate();
    assert!(
        (0.94..0.97).contains(&within("round-robin")),
        "{}",
        within("round-robin")
    );
    for least_loaded in ["p2c-least-loaded", "heap-least-loaded"] {
        assert!(
            (0.985..0.997).contains(&within(least_loaded)),
            "{}",
            within(least_loaded)
        );
    }
    assert!(
        within("p2c-peak-ewma") >= 0.999,
        "{}",
        within("p2c-peak-ewma")
    );
    assert!(r.arms.iter().all(|a| a.requests == 60_000));
}

/// Seed 000: the proxy beats round robin on p50, p95, p99 and success rate.
#[test]
fn add_steps_proxy_beats_round_robin() {
    let r = report("add-steps", &["baseline", "proxy"]);
    let (base, proxy) = (arm(&r, "baseline"), arm(&r, "proxy"));
    for q in [0.5, 0.95, 0.99] {
        assert!(
            proxy.latency.quantile(q) < base.latency.quantile(q),
            "q {q}"
        );
    }
    assert_eq!(proxy.success_rate(), 1.0);
    assert!(base.success_rate() < 0.92);
    assert!(proxy.achieved_rate() > 2.5 * base.achieved_rate());
}
