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
fn encoded_histograms_round_trip_and_reject_garbage() {
    let mut h = Histogram::new();
    for v in [1, 250, 250, 9_999, 3_000_000] {
        h.record_us(v);
    }
    let text = log::encode(&h).unwrap();
    assert_eq!(log::decode(&text).unwrap(), h);
    assert!(matches!(log::decode("%%"), Err(log::LogError::Encoded(_))));
    assert!(matches!(
        log::decode("AAAA"),
        Err(log::LogError::Encoded(_))
    ));
}

#[test]
fn raw_logs_keep_units_and_place_intervals_in_wall_clock_time() {
    // A nanosecond histogram, as a Java tool would log it: kept as written.
    let mut ns = hdrhistogram::Histogram::<u64>::new(3).unwrap();
    ns.record(7_000_000_000).unwrap();
    let interval = log::RawInterval {
        tag: Some("t".into()),
        offset: Duration::from_secs(2),
        length: Duration::from_secs(1),
        histogram: ns.clone(),
    };
    let mut out = Vec::new();
    log::write_raw(
        &mut out,
        1_700_000_000.0,
        "test",
        std::slice::from_ref(&interval),
    )
    .unwrap();
    let back = log::read_raw(&out).unwrap();
    assert_eq!(back.start_epoch_secs, Some(1_700_000_000.0));
    assert_eq!(back.intervals[0].histogram, ns);
    assert_eq!(back.epoch_start(&back.intervals[0]), Some(1_700_000_002.0));
    // No BaseTime: an offset counts from StartTime, an epoch timestamp stands for itself.
    let mut no_base = back.clone();
    no_base.base_epoch_secs = None;
    assert_eq!(
        no_base.epoch_start(&back.intervals[0]),
        Some(1_700_000_002.0)
    );
    let mut absolute = back.intervals[0].clone();
    absolute.offset = Duration::from_secs(1_600_000_000);
    assert_eq!(no_base.epoch_start(&absolute), Some(1_600_000_000.0));
    no_base.start_epoch_secs = None;
    assert_eq!(no_base.epoch_start(&back.intervals[0]), None);
}

#[test]
fn logs_merge_by_window_and_tag_in_their_own_unit() {
    let interval = |tag: &str, offset: u64, values: &[u64]| {
        let mut h = hdrhistogram::Histogram::<u64>::new(3).unwrap();
        for v in values {
            h.record(*v).unwrap();
        }
        log::RawInterval {
            tag: Some(tag.into()),
            offset: Duration::from_secs(offset),
            length: Duration::from_secs(1),
            histogram: h,
        }
    };
    let a = log::RawLog {
        start_epoch_secs: Some(1_000_000_000.0),
        base_epoch_secs: None,
        intervals: vec![interval("x", 0, &[5, 6]), interval("x", 1, &[7])],
    };
    // Started 200 ms later, with no StartTime but epoch timestamps.
    let mut b_first = interval("x", 0, &[1_000_000]);
    b_first.offset = Duration::from_secs_f64(1_000_000_000.2);
    let b = log::RawLog {
        start_epoch_secs: None,
        base_epoch_secs: None,
        intervals: vec![b_first, interval("y", 1_000_000_001, &[9])],
    };
    let m = log::merge(&[a.clone(), b], None).unwrap();
    assert_eq!(m.start_epoch_secs, 1_000_000_000.0);
    assert_eq!(m.window, Duration::from_secs(1));
    let summary: Vec<(Option<&str>, u64, u64)> = m
        .intervals
        .iter()
        .map(|i| (i.tag.as_deref(), i.offset.as_secs(), i.histogram.len()))
        .collect();
    assert_eq!(
        summary,
        vec![(Some("x"), 0, 3), (Some("x"), 1, 1), (Some("y"), 1, 1)]
    );
    assert_eq!(
        m.intervals[0].histogram.max(),
        1_000_447,
        "nanoseconds stay nanoseconds"
    );
    let mut no_time = a;
    no_time.start_epoch_secs = None;
    assert!(matches!(
        log::merge(&[no_time], None),
        Err(log::LogError::NoTime { index: 0 })
    ));
}

#[test]
fn intervals_fall_in_the_window_holding_their_middle() {
    let t0 = 1_700_000_000.0;
    assert_eq!(log::window(t0, 1.0, t0, 1.0), 0);
    assert_eq!(log::window(t0, 1.0, t0 + 0.3, 1.0), 0, "started 0.3 s late");
    assert_eq!(log::window(t0, 1.0, t0 + 0.6, 1.0), 1, "started 0.6 s late");
    assert_eq!(
        log::window(t0, 1.0, t0 + 3.0, 0.05),
        3,
        "a short last interval"
    );
    assert_eq!(log::window(t0, 0.0, t0 + 9.0, 1.0), 0);
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
        assert_eq!(pairs.capacity(), pairs.len(), "no room to spare");
        assert_eq!(pairs.iter().map(|p| p.1).sum::<u64>(), 6);
        assert!(pairs.windows(2).all(|w| w[0].0 < w[1].0), "{pairs:?}");
        for (us, n) in pairs {
            copy.record_n_us(us, n);
        }
        assert_eq!(copy, h);
    }
}
