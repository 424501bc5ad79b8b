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

/// Issue 45's case in virtual time: one of three endpoints paused for 4 s. The default before
/// (peak EWMA blind to the silence, no rescue) holds requests at the paused endpoint for
/// seconds; the default now (the silence priced, requests at a silent endpoint rescued) keeps
/// p99 under 100 ms and the worst request under a second, and neither half does it alone.
#[test]
fn stall_is_priced_and_rescued_by_the_default() {
    let r = report(
        "stall",
        &["proxy-before", "proxy", "proxy-price-only", "round-robin"],
    );
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
    let p99 = |name| ms(arm(&r, name).latency.quantile(0.99));
    let max = |name| arm(&r, name).latency.max_us() as f64 / 1e3;
    assert!(p99("proxy-before") > 1_000.0, "{}", p99("proxy-before"));
    assert!(p99("proxy") <= 100.0, "{}", p99("proxy"));
    assert!(max("proxy") <= 1_000.0, "{}", max("proxy"));
    assert_eq!(arm(&r, "proxy").within_deadline_rate(), 1.0);
    assert!(
        max("proxy-price-only") > 1_000.0,
        "pricing alone leaves the requests already there"
    );
    // The rescue costs little: at most 5 points more extra load than before.
    let extra = |name| {
        let a = arm(&r, name);
        a.attempts.iter().sum::<u64>() as f64 / a.requests as f64 - 1.0
    };
    assert!(
        extra("proxy") - extra("proxy-before") <= 0.05,
        "{} {}",
        extra("proxy"),
        extra("proxy-before")
    );
}
