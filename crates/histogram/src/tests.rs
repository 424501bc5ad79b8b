use super::*;
use proptest::prelude::*;

#[test]
fn empty_histogram_reads_zero() {
    let h = Histogram::new();
    assert_eq!(h.percentiles(), Percentiles::default());
    assert!(h.log_buckets().is_empty());
    assert_eq!(h.fraction_at_or_below_us(10), 1.0);
}

#[test]
fn zero_and_sub_millisecond_values_are_kept() {
    let mut h = Histogram::new();
    h.record_us(0);
    h.record_us(260);
    assert_eq!(h.min_us(), 0);
    assert_eq!(h.max_us(), 260);
    assert_eq!(h.quantile_us(0.5), 0);
}

#[test]
fn values_beyond_one_hour_are_clamped_and_counted() {
    let mut h = Histogram::new();
    h.record(Duration::from_secs(7_200));
    assert_eq!(h.count(), 1);
    assert_eq!(h.saturated(), 1);
    assert!(h.max_us() >= MAX_US && h.max_us() <= MAX_US + MAX_US / 1000);
}

#[test]
fn corrected_recording_fills_in_missing_samples() {
    // A closed-loop client meaning to send every 100 ms sees one 1 s stall: HdrHistogram adds the
    // 900, 800, ... 100 ms samples the stalled requests would have seen.
    let mut h = Histogram::new();
    h.record_corrected(Duration::from_secs(1), Duration::from_millis(100));
    assert_eq!(h.count(), 10);
    assert!(h.min_us().abs_diff(100_000) <= 100, "{}", h.min_us());
}

#[test]
fn take_returns_the_interval_and_empties() {
    let mut h = Histogram::new();
    h.record_us(5);
    let snap = h.take();
    assert_eq!(snap.count(), 1);
    assert!(h.is_empty());
}

#[test]
fn buckets_double_and_hold_every_value() {
    let mut h = Histogram::new();
    for v in [0, 1, 3, 900, 1_000, 70_000] {
        h.record_us(v);
    }
    let buckets = h.log_buckets();
    assert_eq!(buckets.first().map(|b| b.from_us), Some(0));
    assert!(buckets.last().unwrap().to_us > 70_000);
    for pair in buckets.windows(2) {
        assert_eq!(pair[0].to_us, pair[1].from_us);
    }
    assert_eq!(buckets.iter().map(|b| b.count).sum::<u64>(), 6);
}

#[test]
fn interval_log_round_trips() {
    let mut out = Vec::new();
    let mut w = log::Writer::new(&mut out, 1_700_000_000.5, "test").unwrap();
    let mut a = Histogram::new();
    let mut b = Histogram::new();
    for v in 0..1000 {
        a.record_us(v);
        b.record_us(v * 1000);
    }
    w.write(&a, Duration::ZERO, Duration::from_secs(1), Some("lat"))
        .unwrap();
    w.write(&b, Duration::from_secs(1), Duration::from_secs(1), None)
        .unwrap();
    drop(w);
    let text = String::from_utf8(out.clone()).unwrap();
    assert!(text.contains("#[StartTime: 1700000000.500"), "{text}");
    let back = log::read(&out).unwrap();
    assert_eq!(back.len(), 2);
    assert_eq!(back[0].histogram, a);
    assert_eq!(back[1].histogram, b);
    assert_eq!(back[1].offset, Duration::from_secs(1));
    assert_eq!(back[0].tag.as_deref(), Some("lat"));
    assert_eq!(back[1].tag, None);
}

#[test]
fn interval_log_rejects_bad_input_and_tags() {
    assert!(matches!(
        log::read(b"not a log\n"),
        Err(log::LogError::Parse { .. })
    ));
    let mut out = Vec::new();
    let mut w = log::Writer::new(&mut out, 0.0, "t").unwrap();
    let err = w.write(
        &Histogram::new(),
        Duration::ZERO,
        Duration::ZERO,
        Some("a b"),
    );
    assert!(matches!(err, Err(log::LogError::Tag(_))));
}

proptest! {
    #[test]
    fn quantiles_are_within_three_significant_digits(
        mut values in proptest::collection::vec(0u64..10_000_000_000, 1..400),
        q in 0.0f64..=1.0,
    ) {
        let mut h = Histogram::new();
        for v in &values {
            h.record_us(*v);
        }
        values.sort_unstable();
        let clamped: Vec<u64> = values.iter().map(|v| (*v).min(MAX_US)).collect();
        // HdrHistogram's quantile is the value at rank ceil(q * n), floored at the first.
        let rank = ((q * clamped.len() as f64).ceil() as usize).clamp(1, clamped.len());
        let exact = clamped[rank - 1];
        let got = h.quantile_us(q);
        let tolerance = exact / 1000 + 1;
        prop_assert!(got + tolerance >= exact && got <= exact + tolerance,
            "q={q} exact={exact} got={got}");
    }

    #[test]
    fn merge_equals_recording_everything_in_one(
        a in proptest::collection::vec(0u64..100_000_000, 0..200),
        b in proptest::collection::vec(0u64..100_000_000, 0..200),
    ) {
        let (mut ha, mut hb, mut all) = (Histogram::new(), Histogram::new(), Histogram::new());
        for v in &a { ha.record_us(*v); all.record_us(*v); }
        for v in &b { hb.record_us(*v); all.record_us(*v); }
        ha.merge(&hb);
        prop_assert_eq!(ha, all);
    }
}

#[test]
fn a_compact_histogram_is_within_one_percent_and_merges_with_its_kind() {
    let mut a = Histogram::compact();
    let mut b = Histogram::compact();
    for ms in 1..=100 {
        a.record(Duration::from_millis(ms));
        b.record(Duration::from_millis(ms + 100));
    }
    a.merge(&b);
    assert_eq!(a.count(), 200);
    for (q, exact) in [(0.5, 100_000.0), (0.99, 198_000.0), (1.0, 200_000.0)] {
        let got = a.quantile_us(q) as f64;
        assert!(
            (got - exact).abs() / exact <= 0.01,
            "q{q}: {got} vs {exact}"
        );
    }
    a.reset();
    assert!(a.is_empty());
}

#[test]
fn recorded_values_rebuild_the_same_counts() {
    for mut h in [Histogram::new(), Histogram::compact()] {
        let mut copy = h.clone();
        copy.reset();
        for us in [3, 3, 950, 12_345, 12_346, 2_000_000] {
            h.record_us(us);
        }
        let pairs = h.recorded_us();
        assert_eq!(pairs.iter().map(|p| p.1).sum::<u64>(), 6);
        assert!(pairs.windows(2).all(|w| w[0].0 < w[1].0), "{pairs:?}");
        for (us, n) in pairs {
            copy.record_n_us(us, n);
        }
        assert_eq!(copy, h);
    }
}
