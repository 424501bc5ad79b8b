use super::*;
use proptest::prelude::*;

const MS: u64 = 1_000_000;

fn ewma() -> PeakEwma {
    PeakEwma::new(PeakEwmaConfig::default(), Duration::ZERO)
}

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

fn ns(v: u64) -> Duration {
    Duration::from_nanos(v)
}

fn without_age() -> PeakEwma {
    let config = PeakEwmaConfig {
        pending_age: false,
        ..PeakEwmaConfig::default()
    };
    PeakEwma::new(config, Duration::ZERO)
}

#[test]
fn unsampled_endpoint_costs_the_default_rtt_and_does_not_decay() {
    let mut e = without_age();
    assert_eq!(e.cost(Duration::ZERO), 30e6);
    assert_eq!(e.cost(Duration::from_secs(100)), 30e6);
    e.start(Duration::ZERO);
    assert_eq!(e.cost(Duration::from_secs(100)), 60e6);
}

#[test]
fn a_silent_endpoint_costs_its_silence_at_once() {
    // Fast (5 ms) and answering: the estimate prices it. Then it stops answering: its two
    // waiting requests make it cost the silence, growing with time, before anything completes.
    for (mut e, priced) in [(ewma(), true), (without_age(), false)] {
        e.start(ms(0));
        e.settle(ms(0), true, ms(5));
        e.end(ms(5), ms(5));
        assert_eq!(e.cost(ms(5)), 5e6);
        e.start(ms(10));
        e.start(ms(11));
        let stalled = e.cost(ms(110));
        if priced {
            assert_eq!(stalled, 100e6 * 3.0, "100 ms of silence, two pending");
        } else {
            assert!(stalled < 5e6 * 3.0, "{stalled}");
        }
    }
}

#[test]
fn a_request_given_up_unanswered_is_a_peak_sample_of_the_silence() {
    let mut e = ewma();
    e.start(ms(0));
    e.settle(ms(0), true, ms(5));
    e.end(ms(5), ms(5));
    e.start(ms(10));
    // A backup elsewhere won after 60 ms: the endpoint said nothing for 60 ms.
    e.settle(ms(10), false, ms(70));
    e.end(ms(60), ms(70));
    assert_eq!(e.estimate(), ms(60));
    // The next request inherits the silence: it costs 60 ms + its own wait, not 5 ms.
    e.start(ms(100));
    assert_eq!(e.cost(ms(110)), 70e6 * 2.0);
    // An answer ends it.
    e.settle(ms(100), true, ms(112));
    e.end(ms(12), ms(112));
    assert!(e.cost(ms(112)) <= 60e6);
}

#[test]
fn first_sample_replaces_the_default_even_when_lower() {
    let mut e = ewma();
    e.observe(ns(MS), Duration::from_secs(1));
    assert_eq!(e.estimate(), ns(MS));
}

#[test]
fn lower_sample_moves_the_estimate_by_elapsed_weight() {
    let mut e = ewma();
    e.observe(ns(100 * MS), Duration::ZERO);
    e.observe(ns(0), Duration::from_secs(10)); // w = 1/e
    let want = 100e6 / std::f64::consts::E;
    assert!((e.estimate_ns - want).abs() < 1.0, "{}", e.estimate_ns);
}

#[test]
fn read_moves_the_stamp_so_a_later_low_sample_weighs_less() {
    // Without a read, a sample 10 s later gets weight 1 - 1/e; after a read at 9.9 s it only
    // gets the weight of 0.1 s: decay on read, as Finagle and tower do.
    let mut unread = ewma();
    let mut read = ewma();
    for e in [&mut unread, &mut read] {
        e.observe(ns(100 * MS), Duration::ZERO);
    }
    read.cost(Duration::from_millis(9_900));
    unread.observe(ns(10 * MS), Duration::from_secs(10));
    read.observe(ns(10 * MS), Duration::from_secs(10));
    assert!(read.estimate() < unread.estimate());
    let decayed = 100e6 * (-1.0f64).exp();
    assert!((read.estimate_ns - decayed).abs() < 0.02 * decayed);
}

#[test]
fn time_going_backwards_changes_nothing() {
    let mut e = ewma();
    e.observe(ns(50 * MS), Duration::from_secs(5));
    let before = e.cost(Duration::from_secs(5));
    assert_eq!(e.cost(Duration::from_secs(1)), before);
}

#[test]
fn validate_rejects_zero_tau() {
    let cfg = PeakEwmaConfig {
        tau: Duration::ZERO,
        ..PeakEwmaConfig::default()
    };
    assert_eq!(cfg.validate(), Err(PeakEwmaError::ZeroTau));
    assert_eq!(PeakEwmaConfig::default().validate(), Ok(()));
}

proptest! {
    /// A sample above the estimate becomes the estimate exactly (the peak).
    #[test]
    fn peak_is_taken_at_once(first in 1u64..10_000_000_000, bump in 1u64..10_000_000_000,
                             gap in 0u64..100_000_000_000) {
        let mut e = ewma();
        e.observe(ns(first), Duration::ZERO);
        let peak = e.estimate_ns as u64 + bump;
        e.observe(ns(peak), ns(gap));
        prop_assert_eq!(e.estimate(), ns(peak));
    }

    /// The estimate never leaves [0, largest sample]; the cost is estimate * (pending + 1).
    #[test]
    fn estimate_stays_within_the_samples(
        samples in proptest::collection::vec((0u64..5_000_000_000, 0u64..2_000_000_000), 1..60),
        pending in 0u32..50,
    ) {
        let mut e = ewma();
        let mut now = 0u64;
        let mut max = 0u64;
        for (rtt, gap) in samples {
            now += gap;
            e.observe(ns(rtt), ns(now));
            max = max.max(rtt);
            prop_assert!(e.estimate_ns >= 0.0 && e.estimate_ns <= max as f64 + 1e-6);
        }
        for _ in 0..pending { e.start(ns(now)); }
        let est = e.estimate_ns;
        prop_assert_eq!(e.cost(ns(now)), est * (f64::from(pending) + 1.0));
    }

    /// Idle decay does not depend on how often the cost is read: decays compose.
    #[test]
    fn decay_is_independent_of_read_frequency(
        start in 1u64..5_000_000_000,
        reads in proptest::collection::vec(0u64..3_000_000_000, 0..40),
    ) {
        let mut once = ewma();
        let mut often = ewma();
        once.observe(ns(start), Duration::ZERO);
        often.observe(ns(start), Duration::ZERO);
        let mut now = 0u64;
        for gap in reads {
            now += gap;
            let c = often.cost(ns(now));
            prop_assert!(c >= 0.0);
        }
        let a = once.cost(ns(now));
        let b = often.cost(ns(now));
        prop_assert!((a - b).abs() <= 1e-9 * a.max(1.0), "{a} vs {b}");
    }

    /// Without samples the cost never rises as time passes.
    #[test]
    fn cost_never_rises_without_samples(start in 1u64..5_000_000_000,
                                        gaps in proptest::collection::vec(0u64..1_000_000_000, 1..30)) {
        let mut e = ewma();
        e.observe(ns(start), Duration::ZERO);
        let mut now = 0;
        let mut last = e.cost(Duration::ZERO);
        for g in gaps {
            now += g;
            let c = e.cost(ns(now));
            prop_assert!(c <= last);
            last = c;
        }
    }

    /// Repeated equal samples converge to that value from any starting estimate.
    #[test]
    fn constant_samples_converge(start in 0u64..5_000_000_000, rtt in 1u64..1_000_000_000) {
        let mut e = ewma();
        e.observe(ns(start), Duration::ZERO);
        let mut now = Duration::ZERO;
        for _ in 0..1_000 {
            now += Duration::from_millis(500);
            e.observe(ns(rtt), now);
        }
        let err = (e.estimate_ns - rtt as f64).abs();
        prop_assert!(err <= 0.001 * rtt as f64 + 1.0, "estimate {} rtt {rtt}", e.estimate_ns);
    }
}

/// A snapshot reads what `cost` would return, and leaves the estimator as it was.
#[test]
fn snapshot_matches_cost_without_decaying_in_place() {
    let mut e = ewma();
    e.start(Duration::ZERO);
    e.start(Duration::ZERO);
    e.end(ms(200), ms(200));
    let before = e.clone();
    let later = ms(5_200);
    let seen = e.snapshot(later).expect("peak EWMA tracks its load");
    assert_eq!(e, before, "a snapshot must not decay the estimate");
    assert_eq!(seen.pending, 1);
    let cost = e.clone().cost(later);
    assert!(
        (seen.cost - cost).abs() <= 1e-6 * cost,
        "{} vs {cost}",
        seen.cost
    );
    // Unsampled: the default RTT, not decayed.
    let fresh = ewma();
    assert_eq!(fresh.snapshot(ms(60_000)).map(|s| s.cost), Some(30e6));
}
