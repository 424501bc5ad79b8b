//! Arbitrary fleet files, fault sentences and flag values: a fleet or an error, never a panic;
//! whatever parses decides within the latency bound; each case within a generous time bound.

use proptest::prelude::*;
use rand::SeedableRng;
use std::time::Duration;
use tailguard_fleet::backend::MAX_LATENCY;
use tailguard_fleet::{BackendSpec, Body, Capacity, Fault, Fleet, LatencyDist, Schedule};

/// Far above what any case takes (milliseconds): a case near it is a hang in the making.
const CASE_BOUND: Duration = Duration::from_secs(2);

/// Runs `f`, failing when it takes [`CASE_BOUND`] or longer.
fn timed<T>(f: impl FnOnce() -> T) -> T {
    tailguard_fuzzkit::timed(CASE_BOUND, f)
}

/// A fleet file using every field (the unit tests check how it parses).
const FILE: &str = include_str!("full.yaml");

/// This parser's own tricky values, besides the shared ones (`tailguard_fuzzkit::TRICKY`).
const EXTRA: &[&str] = &[
    "100000000",
    "5000000h",
    "x1e308",
    "{uniform: {min: 2s, max: 1s}}",
    "{lognormal: {median: 1s, sigma: 1e300}}",
    "{size: 18446744073709551615}",
];

/// `doc` with a few lines changed (the shared mutations, with this parser's tricky values).
fn mutated(doc: &'static str) -> impl Strategy<Value = String> {
    tailguard_fuzzkit::mutated(doc, EXTRA)
}

/// Checks that every backend of `fleet` decides within the latency bound at a few times.
fn decides_within_bounds(fleet: &Fleet) {
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(1);
    for b in &fleet.backends {
        for secs in [0, 1, 2, 3, 17, 31, 44, 1_000_000, 1 << 40] {
            let t = Duration::from_secs(secs);
            assert!(b.decide(t, &mut rng).latency <= MAX_LATENCY);
            let _ = (b.is_down(t), b.paused_until(t), b.workers(t));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(15_000))]

    #[test]
    fn any_fleet_file_is_a_fleet_or_an_error(
        text in prop_oneof![mutated(FILE), "\\PC{0,200}"]
    ) {
        if let Ok(fleet) = timed(|| Fleet::from_yaml_str(&text, "fuzz.yaml")) {
            timed(|| decides_within_bounds(&fleet));
        }
    }
}

/// Sentences of the fault grammar with values of any kind, and the grammar's words in any
/// order.
fn fault_like() -> impl Strategy<Value = String> {
    let time = proptest::sample::select(vec![
        "0s",
        "1s",
        "15s",
        "1ns",
        "0",
        "5000000h",
        "99999999999999h",
        "1e3s",
        "-1s",
        "x",
    ]);
    let factor = proptest::sample::select(vec![
        "x10", "x0", "x1e308", "x-1", "xNaN", "x1000000", "x1000001", "x0.25", "xinf", "x",
    ]);
    let number = proptest::sample::select(vec![
        "50%",
        "200%",
        "0.5",
        "-1",
        "503",
        "700",
        "0",
        "4294967296",
        "NaN",
        "1",
    ]);
    let window = (0usize..5, time.clone(), time.clone()).prop_map(|(k, a, b)| match k {
        0 => format!("from {a}"),
        1 => format!("from {a} to {b}"),
        2 => format!("at {a}"),
        3 => format!("every {a} for {b}"),
        _ => format!("every {a} from {b}"),
    });
    let effect =
        (0usize..11, time, factor, number.clone(), number).prop_map(|(k, t, f, n, m)| match k {
            0 => format!("latency {f}"),
            1 => format!("latency {t}"),
            2 => format!("latency +{t}"),
            3 => format!("fail {n} status {m}"),
            4 => format!("close {n}"),
            5 => format!("reset {n}"),
            6 => format!("pause {t}"),
            7 => "down".to_owned(),
            8 => format!("capacity {f}"),
            9 => format!("capacity {n}"),
            _ => "pause".to_owned(),
        });
    let grammatical = (window, effect).prop_map(|(w, e)| format!("{w} {e}"));
    let word = prop_oneof![
        proptest::sample::select(vec![
            "from", "to", "at", "every", "for", "latency", "fail", "status", "close", "reset",
            "pause", "down", "up", "resume", "capacity", "1s", "x10", "50%",
        ])
        .prop_map(str::to_owned),
        "\\PC{0,6}",
    ];
    let soup = proptest::collection::vec(word, 0..9).prop_map(|w| w.join(" "));
    prop_oneof![3 => grammatical, 1 => soup]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(30_000))]

    #[test]
    fn any_fault_sentence_is_a_fault_or_an_error(text in prop_oneof![fault_like(), "\\PC{0,60}"]) {
        if let Ok(fault) = timed(|| text.parse::<Fault>()) {
            // What parses says itself back and parses again to the same fault.
            prop_assert_eq!(fault.to_string().parse::<Fault>().unwrap(), fault);
        }
        if let Ok(schedule) = timed(|| Schedule::parse(&[text.as_str(), "at 1s down", "at 2s up"])) {
            let mut b = BackendSpec::new("b", LatencyDist::Fixed(Duration::from_millis(5)));
            b.schedule = schedule;
            b.capacity = Some(Capacity::new(4));
            let fleet = Fleet::single(b, 0);
            timed(|| decides_within_bounds(&fleet));
        }
    }

    #[test]
    fn any_flag_value_is_a_body_or_latency_or_an_error(text in prop_oneof![
        proptest::sample::select(tailguard_fuzzkit::TRICKY).prop_map(str::to_owned),
        proptest::sample::select(EXTRA).prop_map(str::to_owned),
        "(size|text|name|echo)?:?[0-9]{0,25}",
        "\\PC{0,40}",
    ]) {
        let _ = timed(|| text.parse::<Body>());
        if let Ok(dist) = timed(|| text.parse::<LatencyDist>()) {
            let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(2);
            let _ = dist.sample(&mut rng);
        }
    }
}
