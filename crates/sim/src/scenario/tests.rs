use super::*;
use tailguard_balance::{Choices, LoadKind, Policy};
use tailguard_resilience::TripPolicy;

fn parse(text: &str) -> Result<Scenario, ScenarioError> {
    Scenario::from_yaml_str(text, "test.yaml")
}

const MINIMAL: &str = "fleet: echo\nload: {rate: 10, duration: 1s}\n";

fn with_arms(arms: &str) -> String {
    format!("{MINIMAL}arms:\n{arms}")
}

fn error(text: &str) -> String {
    parse(text).unwrap_err().to_string()
}

#[test]
fn every_builtin_parses_and_names_its_arms() {
    for name in Scenario::builtin_names() {
        let text = Scenario::builtin_yaml(name).unwrap();
        let s = Scenario::from_yaml_str(text, name).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(&s.name, name);
        assert!(!s.arms.is_empty() && !s.description.is_empty());
    }
    assert!(Scenario::builtin("nope").is_none());
}

#[test]
fn add_steps_proxy_arm_is_the_seed_config() {
    let s = Scenario::builtin("add-steps").unwrap();
    let proxy = s.arms.iter().find(|a| a.name == "proxy").unwrap();
    assert_eq!(proxy.policy, Policy::p2c(LoadKind::peak_ewma()));
    let accrual = proxy.accrual.unwrap();
    assert_eq!(
        accrual.policy,
        TripPolicy::SuccessRate {
            threshold: 0.9,
            requests: 20
        }
    );
    let retries = proxy.retries.unwrap();
    assert_eq!(retries.budget.percent, 0.2);
    assert!(matches!(
        s.load.shape,
        LoadShape::Closed { workers: 50, .. }
    ));
}

#[test]
fn balancer_kinds_map_to_policies() {
    let s = parse(&with_arms(
        "  - {name: a, balancer: {kind: best-of, choices: 3}}\n\
         \x20 - {name: b, balancer: {kind: full-scan, load: peak-ewma, tau: 5s}}\n\
         \x20 - {name: c, balancer: {kind: aperture, min_aperture: 2}}\n",
    ))
    .unwrap();
    assert_eq!(
        s.arms[0].policy,
        Policy::BestOf {
            choices: Choices::D(3),
            load: LoadKind::Pending
        }
    );
    assert!(matches!(
        s.arms[1].policy,
        Policy::BestOf { choices: Choices::All, load: LoadKind::PeakEwma(c) } if c.tau.as_secs() == 5
    ));
    assert!(
        matches!(s.arms[2].policy, Policy::Aperture { config, .. } if config.min_aperture == 2)
    );
}

#[test]
fn errors_name_the_place_and_the_constraint() {
    // (scenario text, expected fragment of the message)
    let cases = [
        (with_arms("  - {name: a, balancer: {kind: p2c, tua: 1s}}\n"), "test.yaml:4:"),
        (with_arms("  - {name: a, balancer: {kind: rr}}\n"), "balancer.kind: `rr`: expected one of roundRobin"),
        (with_arms("  - {name: a, balancer: {kind: p2c, tau: 1s}}\n"), "balancer.decayTimeMs: applies to kind ewma, or to kind p2c with `load: ewma`"),
        (with_arms("  - {name: a, balancer: {kind: p2c, choices: 3}}\n"), "balancer.choices: does not apply to kind p2c; it belongs to bestOf"),
        (with_arms("  - {name: a, balancer: {kind: best-of, choices: 1}}\n"), "balancer.choices: must be at least 2"),
        (with_arms("  - {name: a, balancer: {kind: heap}}\n  - {name: a, balancer: {kind: heap}}\n"), "two arms are named `a`"),
        (with_arms("  - {name: a, balancer: {kind: heap}, accrual: {kind: success-rate}}\n"), "accrual.successRate: required for kind io.l5d.successRate"),
        (with_arms("  - {name: a, balancer: {kind: heap}, retries: {percent: -1}}\n"), "percent must be between"),
        (with_arms("  - {name: a, balancer: {kind: heap}, timeouts: {attempt: 0s}}\n"), "timeouts must be above zero"),
        (format!("{MINIMAL}arms: []\n"), "at least one arm"),
        ("fleet: echo\nload: {loop: closed, rate: 5, duration: 1s}\narms: [{name: a, balancer: {kind: heap}}]\n".into(), "need `loop: open`"),
        ("fleet: nowhere.yaml\nload: {rate: 5, duration: 1s}\narms: [{name: a, balancer: {kind: heap}}]\n".into(), "nowhere.yaml"),
    ];
    for (text, want) in cases {
        let got = error(&text);
        assert!(got.contains(want), "want {want:?} in {got:?}");
    }
}

#[test]
fn inline_fleets_and_closed_loops_parse() {
    let text = "\
fleet:
  backends:
    - {name: x, latency: 5ms, replicas: 3}
servers: {concurrency: 2}
load: {loop: closed, workers: 4, interval: 100ms, duration: 2s, method: put}
deadline: 250ms
arms: [{name: a, balancer: {kind: round-robin}}]
";
    let s = parse(text).unwrap();
    assert_eq!(s.fleet.backends.len(), 3);
    assert_eq!(s.servers.concurrency, Some(2));
    assert_eq!(s.deadline, Duration::from_millis(250));
    assert_eq!(s.load.method, tailguard_resilience::Method::Put);
    assert_eq!(
        s.load.to_string(),
        "closed loop, 4 workers each sending at most once per 100ms, for 2s, 1 client, PUT"
    );
}

#[test]
fn overrides_change_the_scenario_or_name_the_unknown_arm() {
    let mut s = Scenario::builtin("slow-middle").unwrap();
    let o = Overrides {
        seed: Some(9),
        clients: Some(3),
        arms: vec!["p2c-peak-ewma".into(), "round-robin".into()],
        ..Overrides::default()
    };
    s.apply(&o).unwrap();
    assert_eq!((s.seed, s.load.clients, s.arms.len()), (9, 3, 2));
    assert_eq!(s.arms[0].name, "p2c-peak-ewma");
    let bad = Overrides {
        arms: vec!["nope".into()],
        ..Overrides::default()
    };
    let err = s.apply(&bad).unwrap_err().to_string();
    assert!(err.contains("no arm `nope`"), "{err}");
}

#[test]
fn an_open_loop_ramps_and_says_so() {
    let text = "fleet: echo\n\
                load: {arrivals: poisson, rate: 2755, ramp: {from: 1450, over: 30s}, duration: 60s}\n\
                arms: [{name: a, balancer: {kind: heap}}]\n";
    let s = parse(text).unwrap();
    let ramp = tailguard_pacing::Ramp {
        from: 1450.0,
        over: Duration::from_secs(30),
    };
    assert_eq!(
        s.load.shape,
        LoadShape::Open {
            arrivals: tailguard_pacing::Arrivals::Poisson,
            rate: 2755.0,
            ramp: Some(ramp)
        }
    );
    assert_eq!(
        s.load.to_string(),
        "open loop, poisson arrivals from 1450 to 2755 req/s over 30s, then 2755 req/s, \
         for 1m, 1 client, GET"
    );
    // Other arrivals keep the ramp; another rate is a flat open loop.
    let mut other = s.clone();
    other
        .apply(&Overrides {
            arrivals: Some(tailguard_pacing::Arrivals::Constant),
            ..Overrides::default()
        })
        .unwrap();
    assert!(matches!(other.load.shape, LoadShape::Open { ramp: Some(r), .. } if r == ramp));
    other
        .apply(&Overrides {
            rate: Some(100.0),
            ..Overrides::default()
        })
        .unwrap();
    assert!(matches!(
        other.load.shape,
        LoadShape::Open { ramp: None, .. }
    ));
}

#[test]
fn ramp_errors_name_the_key() {
    let arms = "arms: [{name: a, balancer: {kind: heap}}]\n";
    let cases = [
        (
            "load: {loop: closed, workers: 5, ramp: {from: 1, over: 1s}, duration: 1s}",
            "load: `ramp` needs `loop: open`",
        ),
        (
            "load: {rate: 10, ramp: {from: 0, over: 1s}, duration: 1s}",
            "load: ramp.from must be from 0.001 to 10000000, got 0",
        ),
        (
            "load: {rate: 10, ramp: {from: 5, over: 0s}, duration: 1s}",
            "load: ramp.over must be longer than zero",
        ),
        (
            "load: {rate: 10, ramp: {from: 5}, duration: 1s}",
            "missing field `over`",
        ),
        (
            "load: {rate: 10, ramp: {from: 5, over: 1s, to: 9}, duration: 1s}",
            "unknown field `to`",
        ),
    ];
    for (load, want) in cases {
        let got = error(&format!("fleet: echo\n{load}\n{arms}"));
        assert!(got.contains(want), "want {want:?} in {got:?}");
    }
}
