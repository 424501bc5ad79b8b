use super::*;

fn parse<T: serde::de::DeserializeOwned>(yaml: &str) -> T {
    tailguard_text::yaml::from_yaml(yaml, "test").unwrap()
}

fn balancer(yaml: &str) -> Result<Policy, SpecError> {
    parse::<BalancerSpec>(yaml).policy()
}

fn shape_error<T: serde::de::DeserializeOwned + std::fmt::Debug>(yaml: &str) -> String {
    tailguard_text::yaml::from_yaml::<T>(yaml, "test")
        .unwrap_err()
        .to_string()
}

#[test]
fn both_spellings_of_a_balancer_mean_the_same() {
    let pairs = [
        ("{kind: roundRobin}", "{kind: round-robin}"),
        (
            "{kind: ewma, decayTimeMs: 5000, defaultRttMs: 20, pendingAge: false}",
            "{kind: p2c, load: peak-ewma, tau: 5s, default_rtt: 20ms, pending_age: false}",
        ),
        (
            "{kind: bestOf, choices: 3, load: ewma}",
            "{kind: best-of, choices: 3, load: peak-ewma}",
        ),
        (
            "{kind: fullScan, load: leastLoaded}",
            "{kind: full-scan, load: least-loaded}",
        ),
        (
            "{kind: aperture, minAperture: 4, windowMs: 2000}",
            "{kind: aperture, min_aperture: 4, window: 2s}",
        ),
        (
            "{kind: prequal, poolSize: 8, maxAgeMs: 500, qRif: 0.5}",
            "{kind: prequal, pool: 8, max_age: 500ms, q_rif: 0.5}",
        ),
    ];
    for (linkerd, scenario) in pairs {
        assert_eq!(
            balancer(linkerd),
            balancer(scenario),
            "{linkerd} / {scenario}"
        );
        assert!(balancer(linkerd).is_ok(), "{linkerd}");
    }
    // bestOf's choices default to 2 in both.
    assert_eq!(
        balancer("{kind: bestOf}").unwrap(),
        Policy::BestOf {
            choices: Choices::D(2),
            load: LoadKind::Pending
        }
    );
}

/// A key for each balancer kind that does not take it: refused, naming the kinds it is for.
#[test]
fn every_balancer_kind_refuses_the_keys_of_the_others() {
    let value = |key: &str| match key {
        "load" => "ewma",
        "probePath" => "/load",
        "lowLoad" | "highLoad" | "qRif" => "0.5",
        "pendingAge" => "false",
        _ => "3",
    };
    for (kind, _) in BALANCER_KINDS {
        for (key, kinds) in BALANCER_KEYS {
            let yaml = format!("{{kind: {kind}, {key}: {}}}", value(key));
            let got = balancer(&yaml);
            if kinds.contains(kind) {
                // Peak-EWMA keys on a load-aware kind also need `load: ewma`.
                if let Err(e) = &got {
                    assert!(e.message.contains("load: ewma"), "{yaml}: {e}");
                }
                continue;
            }
            let e = got.unwrap_err();
            assert_eq!(e.key, *key, "{yaml}");
            assert!(
                e.message
                    .contains(&format!("does not apply to kind {kind}"))
                    && e.message.contains(&kinds.join(", ")),
                "{yaml}: {e}"
            );
        }
    }
    let e = balancer("{kind: p2c, tau: 5s}").unwrap_err();
    assert_eq!(e.key, "decayTimeMs");
    assert!(e.message.contains("with `load: ewma`"), "{e}");
    let e = balancer("{kind: ewma, decayTimeMs: 5000, tau: 5s}").unwrap_err();
    assert!(e.message.contains("given twice"), "{e}");
    let e = balancer("{kind: fastest}").unwrap_err();
    assert!(
        e.to_string()
            .starts_with("kind: `fastest`: expected one of roundRobin"),
        "{e}"
    );
    assert!(shape_error::<BalancerSpec>("{kind: ewma, decay: 5}").contains("unknown field `decay`"));
}

#[test]
fn accrual_kinds_take_their_own_keys_in_either_spelling() {
    let config = |yaml: &str| parse::<AccrualSpec>(yaml).config();
    let pairs = [
        ("{kind: io.l5d.consecutiveFailures, failures: 3}", "{kind: consecutive, failures: 3}"),
        (
            "{kind: io.l5d.successRate, successRate: 0.9, requests: 20, backoff: {kind: constant, ms: 10000}}",
            "{kind: success-rate, threshold: 0.9, requests: 20, backoff: {kind: constant, delay: 10s}}",
        ),
        (
            "{kind: io.l5d.successRateWindowed, successRate: 0.8, window: 30, requests: 5}",
            "{kind: success-rate-windowed, threshold: 0.8, window: 30s, min_requests: 5}",
        ),
    ];
    for (linkerd, scenario) in pairs {
        assert_eq!(config(linkerd), config(scenario), "{linkerd}");
        assert!(config(linkerd).unwrap().is_some());
    }
    assert_eq!(config("{kind: none}"), Ok(None));
    for (kind, _) in ACCRUAL_KINDS {
        for (key, kinds) in ACCRUAL_KEYS {
            if kinds.contains(kind) {
                continue;
            }
            let v = if *key == "backoff" {
                "{kind: constant, ms: 1}"
            } else {
                "1"
            };
            let yaml = format!("{{kind: {kind}, {key}: {v}}}");
            let e = config(&yaml).unwrap_err();
            assert_eq!(e.key, *key, "{yaml}");
            assert!(e.message.contains(&kinds.join(", ")), "{yaml}: {e}");
        }
    }
    // The case: success-rate keys on consecutive failures are refused, not ignored.
    let e = config("{kind: io.l5d.consecutiveFailures, successRate: 0.5}").unwrap_err();
    assert_eq!(e.key, "successRate");
    let e = config("{kind: io.l5d.successRate}").unwrap_err();
    assert_eq!(
        e.to_string(),
        "successRate: required for kind io.l5d.successRate"
    );
}

#[test]
fn backoffs_and_retries_in_either_spelling() {
    let backoff = |yaml: &str| parse::<BackoffSpec>(yaml).backoff();
    assert_eq!(
        backoff("{kind: jittered, minMs: 10, maxMs: 100}"),
        backoff("{kind: equal-jittered, start: 10ms, max: 100ms}")
    );
    assert_eq!(
        backoff("{kind: fullJittered, minMs: 10, maxMs: 100}"),
        backoff("{kind: full-jittered, start: 10ms, max: 100ms}")
    );
    for (kind, _) in BACKOFF_KINDS {
        for (key, kinds) in BACKOFF_KEYS {
            if kinds.contains(kind) {
                continue;
            }
            let e = backoff(&format!("{{kind: {kind}, {key}: 5}}")).unwrap_err();
            assert_eq!(e.key, *key, "{kind} {key}");
        }
    }
    assert_eq!(backoff("{kind: constant}").unwrap_err().key, "ms");
    let retries = |yaml: &str| parse::<RetriesSpec>(yaml).config();
    assert_eq!(
        retries("{budget: {minRetriesPerSec: 5, percentCanRetry: 0.1, ttlSecs: 10}, maxRetries: 2, backoff: {kind: constant, ms: 5}}"),
        retries("{min_per_sec: 5, percent: 0.1, ttl: 10s, max_retries: 2, backoff: {kind: constant, delay: 5ms}}"),
    );
    let e = retries("{budget: {ttlSecs: 10}, percent: 0.1}").unwrap_err();
    assert_eq!(e.key, "budget");
    let e = retries("{backoff: {kind: constant, minMs: 1}}").unwrap_err();
    assert_eq!(e.key, "backoff.minMs");
}

#[test]
fn hedge_and_outlier_in_either_spelling() {
    let hedge = |yaml: &str| parse::<HedgeSpec>(yaml).config();
    assert_eq!(
        hedge("{maxExtraLoad: 0.1, minPerSec: 2, windowMs: 5000, minSamples: 50, minDelayMs: 2, maxDelayMs: 300}"),
        hedge("{max_extra_load: 0.1, min_per_sec: 2, window: 5s, min_samples: 50, min_delay: 2ms, max_delay: 300ms}"),
    );
    let e = hedge("{maxExtraLoad: 2}").unwrap_err();
    assert_eq!(
        e.key_in("services[web].service.hedge"),
        "services[web].service.hedge"
    );
    let outlier = |yaml: &str| parse::<OutlierSpec>(yaml).config();
    assert_eq!(
        outlier("{intervalMs: 1000, factor: 2.5, minRequests: 10, baseEjectionMs: 5000, maxEjectionMs: 60000, maxEjectedPercent: 20}"),
        outlier("{interval: 1s, factor: 2.5, min_requests: 10, base_ejection: 5s, max_ejection: 60s, max_ejected_percent: 0.2}"),
    );
    let e = outlier("{maxEjectedPercent: 20, max_ejected_percent: 0.2}").unwrap_err();
    assert!(e.message.contains("given twice"), "{e}");
}
