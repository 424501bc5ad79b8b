//! Hostile fleet files: every size, count and depth bounded before anything is built.

use std::time::{Duration, Instant};
use tailguard_fleet::backend::{MAX_BODY_BYTES, MAX_LATENCY};
use tailguard_fleet::{BackendSpec, Body, Effect, Fault, Fleet, LatencyDist, Window};

/// A generous bound for refusing a hostile file: the scan takes microseconds, parsing 40,000
/// levels took seconds.
const QUICK: Duration = Duration::from_secs(2);

#[test]
#[allow(clippy::disallowed_methods)] // the bound under test is wall-clock time
fn deep_nesting_is_refused_before_parsing() {
    let levels = 40_000;
    let flow = format!(
        "backends: [{{latency: 1ms, schedule: {}{}}}]\n",
        "[".repeat(levels),
        "]".repeat(levels)
    );
    let dashes = format!(
        "backends:\n  - latency: 1ms\n    schedule:\n{}x\n",
        "- ".repeat(levels)
    );
    for text in [flow, dashes] {
        let started = Instant::now();
        let err = Fleet::from_yaml_str(&text, "deep.yaml")
            .unwrap_err()
            .to_string();
        let took = started.elapsed();
        assert!(err.starts_with("deep.yaml:"), "{err}");
        assert!(err.contains("nested deeper than 32 levels"), "{err}");
        assert!(took < QUICK, "{took:?}");
    }
}

#[test]
fn a_file_larger_than_a_mebibyte_is_not_read_whole() {
    let dir = std::env::temp_dir().join(format!("tg-fleet-bounds-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("big.yaml");
    let mut text = String::from("backends: [{latency: 1ms}]\n");
    text.push_str(&"#".repeat(2 << 20));
    std::fs::write(&path, &text).unwrap();
    let err = Fleet::from_file(&path).unwrap_err().to_string();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(err.contains("larger than 1048576 bytes"), "{err}");
}

#[test]
fn fault_factors_beyond_a_million_are_refused() {
    for sentence in [
        "from 0s latency x1e308",
        "from 1s latency x1000001",
        "at 2s capacity x1e9",
    ] {
        let err = sentence.parse::<Fault>().unwrap_err().to_string();
        assert!(err.contains("at most 1000000"), "{sentence}: {err}");
    }
    assert!("from 0s latency x1000000".parse::<Fault>().is_ok());
    for sentence in ["from 0s latency 2h", "from 0s latency +61m"] {
        let err = sentence.parse::<Fault>().unwrap_err().to_string();
        assert!(err.contains("at most 1h"), "{sentence}: {err}");
    }
    let err = Fleet::from_yaml_str("backends: [{latency: 2h}]", "f.yaml")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("latency values must be at most 1h, got 2h"),
        "{err}"
    );
}

#[test]
fn decisions_never_overflow_and_stay_within_an_hour() {
    use rand::SeedableRng;
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(7);
    let huge = Duration::from_secs(500_000 * 3600);
    let mut b = BackendSpec::new("b", LatencyDist::Fixed(huge));
    for effect in [
        Effect::LatencyScale(1e300),
        Effect::LatencyAdd(huge),
        Effect::LatencySet(huge),
    ] {
        b.schedule.push(Fault {
            window: Window::Span {
                from: Duration::ZERO,
                to: None,
            },
            effect,
        });
        let d = b.decide(Duration::from_secs(1), &mut rng);
        assert_eq!(d.latency, MAX_LATENCY, "{effect:?}");
    }
    let wild: LatencyDist = "{lognormal: {median: 1s, sigma: 1e300}}".parse().unwrap();
    let b = BackendSpec::new("w", wild);
    for _ in 0..100 {
        assert!(b.decide(Duration::ZERO, &mut rng).latency <= MAX_LATENCY);
    }
}

#[test]
fn bodies_beyond_16_mib_are_refused() {
    let err = "size:18446744073709551615"
        .parse::<Body>()
        .unwrap_err()
        .to_string();
    assert!(err.contains("at most 16777216 bytes"), "{err}");
    assert!("size:16777217".parse::<Body>().is_err());
    assert_eq!(
        "size:16777216".parse::<Body>().unwrap(),
        Body::Size(MAX_BODY_BYTES)
    );
    let file = "backends: [{body: {size: 1000000000000}}]";
    let err = Fleet::from_yaml_str(file, "f.yaml")
        .unwrap_err()
        .to_string();
    assert!(err.contains("at most 16777216 bytes"), "{err}");
}

#[test]
fn replicas_beyond_the_backend_limit_are_refused_before_expanding() {
    let file = "backends:\n  - latency: 1ms\n    replicas: 100000000\n";
    let err = Fleet::from_yaml_str(file, "f.yaml")
        .unwrap_err()
        .to_string();
    assert!(err.contains("at most 10000 backends"), "{err}");
    let split = "backends:\n  - replicas: 6000\n  - replicas: 6000\n";
    let err = Fleet::from_yaml_str(split, "f.yaml")
        .unwrap_err()
        .to_string();
    assert!(err.contains("at most 10000 backends"), "{err}");
    let ok = "backends: [{replicas: 10000}]";
    assert_eq!(
        Fleet::from_yaml_str(ok, "f.yaml").unwrap().backends.len(),
        10_000
    );
}
