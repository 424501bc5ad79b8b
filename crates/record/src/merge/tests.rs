//! Merging summaries: exact percentiles, parts, hostile input.

use super::*;
use crate::Stats;

/// A part's summary: `intervals` one-second intervals with the given latencies each.
fn part(name: &str, start: f64, part: &str, latencies: &[&[u64]]) -> (String, RunSummary) {
    let mut total = Stats::new();
    let mut intervals = Vec::new();
    for (i, values) in latencies.iter().enumerate() {
        let mut s = Stats::new();
        for &v in *values {
            s.latency.record_us(v);
            s.service.record_us(v / 2);
            s.send_lag.record_us(1);
            s.good += 1;
        }
        let mut totals = Totals::from_stats(&s, 10.0, std::time::Duration::from_secs(1));
        totals.hdr = Some(Encoded::of(&s).unwrap());
        intervals.push(IntervalSummary {
            timestamp: format!("2026-11-26T12:00:0{}Z", i + 1),
            start_s: i as f64,
            duration_s: 1.0,
            target: values.len() as u64,
            change: String::new(),
            totals,
        });
        total.merge(&s);
    }
    let secs = latencies.len() as f64;
    let mut totals = Totals::from_stats(&total, 10.0, std::time::Duration::from_secs_f64(secs));
    totals.hdr = Some(Encoded::of(&total).unwrap());
    let run = RunSummary {
        urls: vec!["http://127.0.0.1:1/".into()],
        per_target: vec![total.requests()],
        arrivals: "poisson".into(),
        concurrency: 8,
        duration_s: secs,
        send_phase_s: secs,
        totals,
        intervals,
        start_unix_s: start,
        interval_s: 1.0,
        part: Some(part.into()),
        seed: Some(7),
        ..RunSummary::default()
    };
    (name.to_string(), run)
}

#[test]
fn percentiles_are_those_of_the_union_and_counts_add() {
    let t0 = 1_800_000_000.0;
    let a = part("a", t0, "0/2", &[&[100, 200, 300], &[400, 50_000]]);
    // Started 0.2 s later: its intervals still fall in the same windows.
    let b = part(
        "b",
        t0 + 0.2,
        "1/2",
        &[&[1_000, 2_000], &[3_000, 4_000, 90]],
    );
    let m = merge(&[a, b]).unwrap();
    assert!(m.notes.is_empty(), "{:?}", m.notes);
    let s = &m.summary;
    assert_eq!(s.totals.requests, 10);
    assert_eq!(s.totals.good, 10);
    assert_eq!(s.per_target, vec![10]);
    assert_eq!(s.concurrency, 16);
    assert_eq!(s.totals.target_rate, 20.0);
    assert_eq!(s.intervals.len(), 2);
    assert_eq!(s.intervals[0].totals.requests, 5);
    assert_eq!(s.intervals[1].totals.requests, 5);
    assert_eq!(s.intervals[0].target, 5);
    assert!((s.duration_s - 2.2).abs() < 1e-6, "{}", s.duration_s);
    let mut union = Histogram::new();
    for v in [100, 200, 300, 400, 50_000, 1_000, 2_000, 3_000, 4_000, 90] {
        union.record_us(v);
    }
    assert_eq!(s.totals.latency_us, Some(union.percentiles()));
    let mut second = Histogram::new();
    for v in [400, 50_000, 3_000, 4_000, 90] {
        second.record_us(v);
    }
    assert_eq!(s.intervals[1].totals.latency_us, Some(second.percentiles()));
    let encoded = s.intervals[1].totals.hdr.as_ref().unwrap();
    assert_eq!(encoded.decode().unwrap()[0], second);
    // The merged summary carries its histograms: it merges again.
    let again = merge(&[("m".into(), s.clone())]).unwrap();
    assert_eq!(again.summary.totals.latency_us, Some(union.percentiles()));
}

#[test]
fn a_part_twice_is_refused_and_a_missing_part_noted() {
    let t0 = 1_800_000_000.0;
    let a = part("a.json", t0, "0/3", &[&[100]]);
    let twice = merge(&[a.clone(), a.clone()]).unwrap_err();
    assert!(twice.to_string().contains("part 0/3 is in both"), "{twice}");
    let b = part("b.json", t0, "2/3", &[&[100]]);
    let m = merge(&[a.clone(), b]).unwrap();
    assert_eq!(m.notes.len(), 1);
    assert!(m.notes[0].contains("1/3"), "{:?}", m.notes);
    let c = part("c.json", t0, "1/2", &[&[100]]);
    assert!(matches!(merge(&[a, c]), Err(MergeError::MixedParts { .. })));
}

#[test]
fn summaries_without_histograms_or_start_are_refused() {
    let (name, mut run) = part("old.json", 1_800_000_000.0, "0/1", &[&[100]]);
    run.totals.hdr = None;
    let err = merge(&[(name.clone(), run.clone())]).unwrap_err();
    assert!(err.to_string().contains("old.json: no histograms"), "{err}");
    run.start_unix_s = 0.0;
    assert!(merge(&[(name, run)])
        .unwrap_err()
        .to_string()
        .contains("start"));
    assert!(matches!(merge(&[]), Err(MergeError::Empty)));
}

#[test]
fn times_no_run_could_have_are_refused_and_counts_saturate() {
    let (name, mut run) = part("bad.json", 1_800_000_000.0, "0/1", &[&[100]]);
    run.intervals[0].start_s = 1e300;
    let err = merge(&[(name.clone(), run.clone())]).unwrap_err();
    assert!(
        err.to_string().contains("intervals[0].start_s is 1e300"),
        "{err}"
    );
    run.intervals[0].start_s = 0.0;
    for start in [-1.0, f64::NAN, 1e300] {
        run.start_unix_s = start;
        assert!(matches!(
            merge(&[(name.clone(), run.clone())]),
            Err(MergeError::Implausible { .. })
        ));
    }
    run.start_unix_s = 1_800_000_000.0;
    run.totals.requests = u64::MAX;
    let (other, mut two) = part("two.json", 1_800_000_000.0, "0/1", &[&[100]]);
    two.part = None;
    let m = merge(&[(name, run), (other, two)]).unwrap();
    assert_eq!(m.summary.totals.requests, u64::MAX);
}

#[test]
fn part_counts_are_bounded_and_missing_parts_are_counted_not_listed() {
    let t0 = 1_800_000_000.0;
    for huge in ["0/10000000", "0/18446744073709551615", "5/3", "x/y"] {
        let p = part("huge.json", t0, huge, &[&[100]]);
        let err = merge(&[p]).unwrap_err();
        assert!(matches!(err, MergeError::BadPart { .. }), "{huge}: {err}");
        assert!(err.to_string().contains("at most 10000"), "{err}");
    }
    let one = part("one.json", t0, "3/10000", &[&[100]]);
    let m = merge(&[one]).unwrap();
    assert_eq!(
        m.notes[0],
        "9999 of 10000 parts are missing (0/10000, 1/10000, 2/10000, 4/10000, 5/10000, ...): \
         the merged run is not the whole schedule"
    );
    let two = part("a.json", t0, "0/4", &[&[100]]);
    let m = merge(&[two]).unwrap();
    assert!(
        m.notes[0].starts_with("parts 1/4, 2/4, 3/4 are missing"),
        "{}",
        m.notes[0]
    );
}

#[test]
fn a_whole_run_given_twice_is_refused() {
    let t0 = 1_800_000_000.0;
    let (_, mut run) = part("a.json", t0, "0/1", &[&[100, 200]]);
    run.part = None;
    let a = ("a.json".to_string(), run.clone());
    let copy = ("copy-of-a.json".to_string(), run.clone());
    let err = merge(&[a.clone(), copy]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "a.json and copy-of-a.json are the same run (same start, counts and histograms): it \
         would count twice"
    );
    // Two generators of the whole schedule, started together: different runs, both count.
    let (_, mut other) = part("b.json", t0, "0/1", &[&[300, 400]]);
    other.part = None;
    let m = merge(&[a, ("b.json".into(), other)]).unwrap();
    assert_eq!(m.summary.totals.requests, 4);
}

#[test]
fn intervals_out_of_time_order_are_refused() {
    let (name, mut run) = part("a.json", 1_800_000_000.0, "0/1", &[&[1], &[2], &[3]]);
    run.intervals.swap(0, 2);
    let err = merge(&[(name, run)]).unwrap_err();
    assert_eq!(err.to_string(), "a.json: intervals[1] is not in time order");
}
