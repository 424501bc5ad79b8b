//! Fleet files end to end: parsing, errors with positions, built-ins, decisions.

use super::*;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use std::time::Duration;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A fleet file using every field (the fuzz tests mutate the same file).
const FILE: &str = include_str!("../tests/it/full.yaml");

#[test]
fn parses_a_full_file() {
    let fleet = Fleet::from_yaml_str(FILE, "fleet.yaml").unwrap();
    assert_eq!(fleet.seed, 7);
    let names: Vec<&str> = fleet.backends.iter().map(|b| b.name.as_str()).collect();
    assert_eq!(names, ["fast", "flaky-0", "flaky-1", "busy", "b4", "b5"]);
    let flaky = &fleet.backends[1];
    assert_eq!(flaky.failure.status(), 503);
    assert_eq!(flaky.schedule.faults().len(), 3);
    assert_eq!(flaky.body, Body::Echo);
    assert!(fleet.backends[3].capacity.is_some());
    assert_eq!(fleet.backends[4].body, Body::Size(1024));
    assert_eq!(fleet.backends[5].body, Body::Name);
    assert_eq!(
        fleet.backends[5].latency,
        LatencyDist::Fixed(Duration::ZERO)
    );
}

fn error_of(text: &str) -> String {
    Fleet::from_yaml_str(text, "bad.yaml")
        .unwrap_err()
        .to_string()
}

#[test]
fn errors_name_file_line_and_field() {
    let typo = "backends:\n  - name: a\n    latncy: 5ms\n";
    let err = error_of(typo);
    assert!(err.starts_with("bad.yaml:3:"), "{err}");
    assert!(err.contains("backends[0]: unknown field `latncy`"), "{err}");

    let bad_dist =
        "backends:\n  - name: a\n  - latency: {normal: {mean: 5ms, sd: 1ms, max: 1ms, min: 2ms}}\n";
    let err = error_of(bad_dist);
    assert!(err.starts_with("bad.yaml:3:"), "{err}");
    assert!(
        err.contains("backends[1].latency") && err.contains("max is smaller"),
        "{err}"
    );

    let bad_fault = "backends:\n  - schedule:\n    - from 5s latency x2\n    - from 10s fail 1.5\n";
    let err = error_of(bad_fault);
    assert!(err.starts_with("bad.yaml:"), "{err}");
    assert!(err.starts_with("bad.yaml:4:"), "{err}");
    assert!(
        err.contains("backends[0].schedule[1]") && err.contains("fail 1.5"),
        "{err}"
    );
    let unpaired = "backends:\n  - schedule: ['at 5s up']\n";
    assert!(
        error_of(unpaired).contains("backends[0].schedule: no open-ended"),
        "{}",
        error_of(unpaired)
    );

    let sum = "backends:\n  - fail: {error: 0.9, close: 0.2}\n";
    assert!(error_of(sum).contains("exceeds 1"), "{}", error_of(sum));
    assert!(error_of("backends: []").contains("at least one backend"));
    assert!(error_of("backends: [{name: a}, {name: a}]").contains("two backends are named `a`"));
    assert!(error_of("seed: 1\n").contains("missing field `backends`"));
    assert!(error_of("backends: [{body: {bytes: 3}}]").contains("unknown variant `bytes`"));
}

#[test]
fn missing_file_and_unknown_names_are_errors() {
    let err = Fleet::from_file(std::path::Path::new("/nonexistent/f.yaml")).unwrap_err();
    assert!(err.to_string().contains("/nonexistent/f.yaml"), "{err}");
    let err = Fleet::load("no-such-fleet").unwrap_err().to_string();
    assert!(
        err.contains("add-steps, slow-middle, echo, gc-pause, stall"),
        "{err}"
    );
}

#[test]
fn builtins_parse_and_match_the_seeds() {
    for name in Fleet::builtin_names() {
        assert!(Fleet::builtin(name).is_some(), "{name}");
    }
    let steps = Fleet::builtin("add-steps").unwrap();
    let lat: Vec<Duration> = steps
        .backends
        .iter()
        .map(|b| {
            b.decide(Duration::ZERO, &mut Xoshiro256PlusPlus::seed_from_u64(0))
                .latency
        })
        .collect();
    let want = [0, 10, 20, 40, 80, 160, 320, 640, 1000, 2000].map(ms);
    assert_eq!(lat, want);
    assert_eq!(steps.backends[8].failure.error().get(), 0.4);
    assert_eq!(steps.backends[9].failure.error().get(), 0.6);

    let middle = Fleet::builtin("slow-middle").unwrap();
    assert_eq!(middle.backends.len(), 11);
    let b5 = &middle.backends[5];
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
    assert!(b5.decide(Duration::from_secs(20), &mut rng).latency > ms(1000));
    assert!(b5.decide(Duration::from_secs(45), &mut rng).latency <= ms(200));

    let gc = Fleet::builtin("gc-pause").unwrap();
    assert_eq!(
        gc.backends[0].paused_until(Duration::from_secs(17)),
        Some(Duration::from_secs(20))
    );
    assert_eq!(Fleet::builtin("echo").unwrap().backends[0].body, Body::Echo);
}

#[test]
fn decide_applies_effects_in_order_and_fails_on_schedule() {
    let text = "backends:\n  - latency: 10ms\n    schedule: ['from 1s to 2s latency x10', 'from 1s to 2s latency +5ms', 'from 3s to 4s fail 100% status 503', 'from 5s to 6s reset 100%']\n";
    let spec = &Fleet::from_yaml_str(text, "t").unwrap().backends[0];
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
    let at =
        |secs: f64, rng: &mut Xoshiro256PlusPlus| spec.decide(Duration::from_secs_f64(secs), rng);
    assert_eq!(at(0.5, &mut rng).latency, ms(10));
    assert_eq!(at(1.5, &mut rng).latency, ms(105));
    assert_eq!(at(3.5, &mut rng).outcome, Outcome::Respond { status: 503 });
    assert_eq!(at(5.5, &mut rng).outcome, Outcome::Reset);
    assert_eq!(at(6.0, &mut rng).outcome, Outcome::Respond { status: 200 });
}

#[test]
fn same_seed_same_decisions() {
    let fleet = Fleet::builtin("slow-middle").unwrap();
    let run = |seed| {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        (0..100)
            .map(|i| fleet.backends[i % 11].decide(Duration::from_millis(i as u64 * 300), &mut rng))
            .collect::<Vec<_>>()
    };
    assert_eq!(run(fleet.backend_seed(0)), run(fleet.backend_seed(0)));
    assert_ne!(run(fleet.backend_seed(0)), run(fleet.backend_seed(1)));
}

#[test]
fn runtime_changes_go_through_the_schedule() {
    let mut spec = BackendSpec::new("x", LatencyDist::Fixed(ms(1)));
    spec.pause(Duration::from_secs(3), Some(Duration::from_secs(2)));
    assert_eq!(
        spec.paused_until(Duration::from_secs(4)),
        Some(Duration::from_secs(5))
    );
    spec.go_down(Duration::from_secs(10), None);
    assert!(spec.is_down(Duration::from_secs(100)));
    spec.come_up(Duration::from_secs(12));
    assert!(spec.is_down(Duration::from_secs(11)) && !spec.is_down(Duration::from_secs(12)));
    spec.pause(Duration::from_secs(20), None);
    spec.resume(Duration::from_secs(21));
    assert_eq!(
        spec.paused_until(Duration::from_secs(20)),
        Some(Duration::from_secs(21))
    );
}

#[test]
fn body_flags_parse() {
    assert_eq!("echo".parse::<Body>().unwrap(), Body::Echo);
    assert_eq!("size:10".parse::<Body>().unwrap(), Body::Size(10));
    assert_eq!(
        "text:hi there".parse::<Body>().unwrap(),
        Body::Text("hi there".into())
    );
    assert!("size:ten".parse::<Body>().is_err());
}

#[test]
fn a_bad_duration_points_at_its_line() {
    let err =
        error_of("backends:\n  - name: a\n  - latency: {uniform: {min: 1ms, max: 2 fortnights}}\n");
    assert!(err.starts_with("bad.yaml:3:"), "{err}");
    assert!(
        err.contains("backends[1].latency.uniform.max: unknown unit"),
        "{err}"
    );
}

#[test]
fn a_scenario_can_embed_a_fleet() {
    #[derive(serde::Deserialize)]
    struct Scenario {
        fleet: Fleet,
        rate: u32,
    }
    let text = "rate: 1000\nfleet:\n  seed: 3\n  backends: [{latency: 1ms}, {latency: 2ms}]\n";
    let scenario: Scenario = serde_yaml_ng::from_str(text).unwrap();
    assert_eq!((scenario.rate, scenario.fleet.seed), (1000, 3));
    assert_eq!(scenario.fleet.backends.len(), 2);
    let bad = "rate: 1\nfleet:\n  backends: [{latency: 1 parsec}]\n";
    let err = serde_yaml_ng::from_str::<Scenario>(bad)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("fleet.backends[0].latency"), "{err}");
}

#[test]
fn capacity_faults_scale_or_set_the_workers_for_their_window() {
    let fleet = Fleet::from_yaml_str(
        "backends: [{latency: 1ms, capacity: 6, schedule: ['from 10s to 20s capacity x0.1', \
         'from 30s to 40s capacity 9']}, {latency: 1ms}]",
        "t",
    )
    .unwrap();
    let b = &fleet.backends[0];
    let at = |s: u64| b.workers(Duration::from_secs(s));
    assert_eq!(
        (at(5), at(15), at(35), at(45)),
        (Some(6), Some(1), Some(9), Some(6))
    );
    assert_eq!(fleet.backends[1].workers(Duration::ZERO), None);
    assert_eq!(
        b.schedule.faults()[0].to_string(),
        "from 10s to 20s capacity x0.1"
    );
    for bad in ["capacity x0", "capacity 0", "capacity lots"] {
        let fault = format!("from 1s {bad}");
        assert!(fault.parse::<Fault>().is_err(), "{bad}");
    }
}

/// A failure answers in place of the real answer, so its status must be final: a 1xx is an
/// interim response, and is refused wherever a failure status is written (`fail.status`,
/// `capacity.status`, a fault's `fail N% status S`), the error naming the key (the position's
/// path names `capacity` and the fault; `fail`'s fields are reported at the backend).
#[test]
fn a_failure_status_must_be_final() {
    for (text, key) in [
        (
            "backends:\n  - fail: {error: 0.5, status: 101}\n",
            "fail.status: 101",
        ),
        ("backends:\n  - fail: {status: 199}\n", "fail.status: 199"),
        (
            "backends:\n  - capacity: {workers: 1, status: 100}\n",
            "capacity: status: 100",
        ),
        ("backends:\n  - fail: {status: 600}\n", "fail.status: 600"),
        (
            "backends:\n  - schedule: ['from 1s fail 50% status 103']\n",
            "status: 103",
        ),
    ] {
        let err = error_of(text);
        assert!(err.contains(key), "{key}: {err}");
        assert!(
            err.contains("not a final HTTP status: use 200 to 599"),
            "{err}"
        );
    }
    for status in [200, 302, 429, 599] {
        let text = format!(
            "backends:\n  - fail: {{error: 0.5, status: {status}}}\n    \
             capacity: {{workers: 1, queue: 1, status: {status}}}\n    \
             schedule: ['from 1s fail 50% status {status}']\n"
        );
        Fleet::from_yaml_str(&text, "ok.yaml").unwrap();
    }
    for status in [0, 100, 101, 199, 600] {
        assert_eq!(
            Failure::new(Ratio::ONE, status, Ratio::ZERO, Ratio::ZERO),
            Err(FailureError::Status(status))
        );
    }
}
