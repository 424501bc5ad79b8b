//! Failure rates with a fixed seed, as seen by a client and by the control endpoint.

use crate::common;

use common::{addr, control_get, serve};
use tailguard_testsupport::client::{raw_get, Raw};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_close_and_reset_rates_are_within_bounds() {
    let yaml = "seed: 5\nbackends: [{latency: 0s, fail: {error: 0.3, status: 503, close: 0.1, reset: 0.1}}]";
    let running = serve(yaml).await;
    let target = addr(&running, 0);
    let n = 1000;
    let (mut error, mut close, mut reset, mut ok) = (0, 0, 0, 0);
    for _ in 0..n {
        match raw_get(target).await {
            Raw::Status(503) => error += 1,
            Raw::Status(200) => ok += 1,
            Raw::Closed => close += 1,
            Raw::Reset => reset += 1,
            other => panic!("unexpected {other:?}"),
        }
    }
    // Five binomial standard deviations: with a fixed seed the counts are the same every run,
    // and the bound says the seed is not a lucky one.
    for (name, count, p) in [
        ("error", error, 0.3),
        ("close", close, 0.1),
        ("reset", reset, 0.1),
        ("ok", ok, 0.5),
    ] {
        let sd = (n as f64 * p * (1.0 - p)).sqrt();
        let want = n as f64 * p;
        assert!(
            (count as f64 - want).abs() < 5.0 * sd,
            "{name}: {count} of {n}, want about {want}"
        );
    }
    let json = control_get(&running, "/backends/0").await;
    let counts = &json["requests"];
    assert_eq!(counts["error"], error);
    assert_eq!(counts["close"], close);
    assert_eq!(counts["reset"], reset);
    assert_eq!(counts["ok"], ok);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_seed_gives_the_same_outcomes() {
    let yaml = "seed: 9\nbackends: [{latency: 0s, fail: {error: 0.5}}]";
    let mut runs = Vec::new();
    for _ in 0..2 {
        let running = serve(yaml).await;
        let target = addr(&running, 0);
        let mut outcomes = Vec::new();
        for _ in 0..50 {
            outcomes.push(raw_get(target).await);
        }
        runs.push(outcomes);
    }
    assert_eq!(runs[0], runs[1]);
}
