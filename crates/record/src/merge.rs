//! Merging the summaries of several generators into one, exactly: counts add, histograms add,
//! and intervals line up by wall-clock time.
//!
//! Each generator's `--json` carries its run's start (`start_unix_s`) and, for the run and for
//! every interval, the histograms themselves ([`Encoded`]). An interval of a generator belongs
//! to the window of the merged report that holds its middle (windows of the report interval,
//! counted from the earliest start), so generators started together by `--start-at` line up
//! interval for interval, and ones started a little apart still land in one window each.
//! Percentiles are then read from the added histograms: the merged p99 is the p99 of every
//! request of every generator, not an average of p99s.

use crate::summary::{Encoded, IntervalSummary, RunSummary, Totals};
use std::collections::BTreeMap;
use tailguard_histogram::{log, Histogram};

/// Why summaries could not be merged.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    /// Nothing to merge.
    #[error("nothing to merge")]
    Empty,
    /// A summary lacks what an exact merge needs.
    #[error(
        "{source_name}: {missing}; write it again with this version's `tailguard load --json`"
    )]
    Incomplete {
        /// The summary's name.
        source_name: String,
        /// What it lacks.
        missing: &'static str,
    },
    /// A histogram could not be decoded.
    #[error("{source_name}: {reason}")]
    Histogram {
        /// The summary's name.
        source_name: String,
        /// The decoder's complaint.
        reason: String,
    },
    /// The same part of a schedule twice: its requests would be counted twice.
    #[error("part {part} is in both {first} and {second}: each part of a schedule counts once")]
    DuplicatePart {
        /// The part.
        part: String,
        /// One summary holding it.
        first: String,
        /// The other.
        second: String,
    },
    /// A time no run could have (hostile or damaged input).
    #[error("{source_name}: {field} is {value}, not a time a run could have")]
    Implausible {
        /// The summary's name.
        source_name: String,
        /// Which field.
        field: String,
        /// Its value, as written.
        value: String,
    },
    /// Parts of schedules split different ways.
    #[error("{source_name} is part {part}, but {other} is part of a schedule split in {of}")]
    MixedParts {
        /// The odd one.
        source_name: String,
        /// Its part.
        part: String,
        /// A summary split the other way.
        other: String,
        /// How many parts that one has.
        of: u64,
    },
}

/// A merged summary and what the merge noticed on the way.
#[derive(Clone, Debug)]
pub struct Merged {
    /// The merged run, in the format of `tailguard load --json`.
    pub summary: RunSummary,
    /// Each merged interval's latency and service time histograms (for an interval log).
    pub interval_histograms: Vec<[Histogram; 2]>,
    /// Things the reader should know: missing parts, different seeds.
    pub notes: Vec<String>,
}

/// One window of the merged report, filling up.
#[derive(Default)]
struct Window {
    start: f64,
    end: f64,
    timestamp: String,
    target: u64,
    /// The highest offered rate of each generator's intervals here.
    rates: BTreeMap<usize, f64>,
    counts: Totals,
    hists: [Histogram; 3],
}

/// Merges `parts`, each named by its source (a file name), into one summary.
///
/// # Errors
/// A summary without a start time or histograms, an undecodable histogram, or the same part of
/// a schedule twice.
pub fn merge(parts: &[(String, RunSummary)]) -> Result<Merged, MergeError> {
    let first = &parts.first().ok_or(MergeError::Empty)?.1;
    let notes = check_parts(parts)?;
    let origin = parts
        .iter()
        .map(|(_, r)| r.start_unix_s)
        .fold(f64::INFINITY, f64::min);
    let length = parts
        .iter()
        .map(|(_, r)| interval_length(r))
        .fold(0.0, f64::max);
    let mut windows: BTreeMap<usize, Window> = BTreeMap::new();
    let mut total = Totals::default();
    let mut total_hists: [Histogram; 3] = Default::default();
    for (p, (name, run)) in parts.iter().enumerate() {
        for iv in &run.intervals {
            let start = run.start_unix_s + iv.start_s;
            let w = windows
                .entry(log::window(origin, length, start, iv.duration_s))
                .or_insert_with(|| Window {
                    start: f64::INFINITY,
                    ..Window::default()
                });
            w.start = w.start.min(start);
            w.end = w.end.max(start + iv.duration_s);
            w.timestamp = w.timestamp.clone().max(iv.timestamp.clone());
            w.target = w.target.saturating_add(iv.target);
            let rate = w.rates.entry(p).or_insert(0.0);
            *rate = rate.max(iv.totals.target_rate);
            add_counts(&mut w.counts, &iv.totals);
            add_histograms(&mut w.hists, name, &iv.totals)?;
        }
        add_counts(&mut total, &run.totals);
        add_histograms(&mut total_hists, name, &run.totals)?;
    }
    let mut interval_histograms = Vec::with_capacity(windows.len());
    let intervals = windows
        .into_values()
        .map(|w| {
            let duration = w.end - w.start;
            let iv = IntervalSummary {
                timestamp: w.timestamp,
                start_s: w.start - origin,
                duration_s: duration,
                target: w.target,
                change: String::new(),
                totals: finish(w.counts, &w.hists, w.rates.values().sum(), duration),
            };
            let [latency, service, _] = w.hists;
            interval_histograms.push([latency, service]);
            iv
        })
        .collect();
    let end = |f: fn(&RunSummary) -> f64| {
        parts
            .iter()
            .map(|(_, r)| r.start_unix_s + f(r) - origin)
            .fold(0.0, f64::max)
    };
    let send_phase_s = end(|r| r.send_phase_s);
    let target_rate = parts.iter().map(|(_, r)| r.totals.target_rate).sum();
    let (urls, per_target) = targets(parts);
    let summary = RunSummary {
        tool: first.tool.clone(),
        urls,
        method: first.method.clone(),
        concurrency: parts
            .iter()
            .fold(0u64, |n, (_, r)| n.saturating_add(r.concurrency)),
        arrivals: same(parts, |r| r.arrivals.clone()).unwrap_or_else(|| "mixed".into()),
        duration_s: end(|r| r.duration_s),
        send_phase_s,
        totals: finish(total, &total_hists, target_rate, send_phase_s),
        per_target,
        histogram: total_hists[0]
            .log_buckets()
            .iter()
            .map(|b| [b.from_us, b.to_us, b.count])
            .collect(),
        client_cpu_us_per_request: cpu_per_request(parts),
        intervals,
        start_unix_s: origin,
        interval_s: length,
        part: None,
        seed: same(parts, |r| r.seed).flatten(),
        merged_from: parts.iter().map(|(n, _)| n.clone()).collect(),
    };
    Ok(Merged {
        summary,
        interval_histograms,
        notes,
    })
}

/// The report interval of a run: as recorded, or the length of its first interval.
fn interval_length(r: &RunSummary) -> f64 {
    if r.interval_s > 0.0 {
        r.interval_s
    } else {
        r.intervals.first().map_or(0.0, |iv| iv.duration_s)
    }
}

/// Refuses what cannot merge; notes what merges but is not one whole schedule.
fn check_parts(parts: &[(String, RunSummary)]) -> Result<Vec<String>, MergeError> {
    let incomplete = |name: &String, missing| MergeError::Incomplete {
        source_name: name.clone(),
        missing,
    };
    let mut seen: BTreeMap<u64, &String> = BTreeMap::new();
    let mut split: Option<(u64, &String)> = None;
    for (name, run) in parts {
        if run.start_unix_s == 0.0 {
            return Err(incomplete(name, "no start time (start_unix_s)"));
        }
        plausible(name, run)?;
        if run.totals.hdr.is_none() || run.intervals.iter().any(|iv| iv.totals.hdr.is_none()) {
            return Err(incomplete(name, "no histograms (hdr)"));
        }
        let Some((index, of)) = run.part.as_deref().and_then(parse_part) else {
            continue;
        };
        match split {
            Some((n, other)) if n != of => {
                return Err(MergeError::MixedParts {
                    source_name: name.clone(),
                    part: format!("{index}/{of}"),
                    other: other.clone(),
                    of: n,
                })
            }
            _ => split = Some((of, name)),
        }
        if let Some(first) = seen.insert(index, name) {
            return Err(MergeError::DuplicatePart {
                part: format!("{index}/{of}"),
                first: first.clone(),
                second: name.clone(),
            });
        }
    }
    let mut notes = Vec::new();
    if let Some((of, _)) = split {
        let missing: Vec<String> = (0..of)
            .filter(|i| !seen.contains_key(i))
            .map(|i| format!("{i}/{of}"))
            .collect();
        if !missing.is_empty() {
            notes.push(format!(
                "parts {} are missing: the merged run is not the whole schedule",
                missing.join(", ")
            ));
        }
        if same(parts, |r| r.seed).is_none() {
            notes.push(
                "the parts have different seeds: together they are not one schedule".to_string(),
            );
        }
    }
    Ok(notes)
}

/// Latest start accepted: the year 5138, far beyond any real run, far below overflow.
const MAX_EPOCH_S: f64 = 1e11;
/// Longest offset or length accepted: about 31 years.
const MAX_SPAN_S: f64 = 1e9;

/// Refuses times no run could have, so that no later arithmetic overflows.
fn plausible(name: &str, run: &RunSummary) -> Result<(), MergeError> {
    let check = |field: String, value: f64, max: f64| {
        if value.is_finite() && (0.0..=max).contains(&value) {
            Ok(())
        } else {
            Err(MergeError::Implausible {
                source_name: name.to_string(),
                field,
                // Short even for 1e300.
                value: if value.abs() < 1e12 {
                    value.to_string()
                } else {
                    format!("{value:e}")
                },
            })
        }
    };
    check("start_unix_s".into(), run.start_unix_s, MAX_EPOCH_S)?;
    check("duration_s".into(), run.duration_s, MAX_SPAN_S)?;
    check("send_phase_s".into(), run.send_phase_s, MAX_SPAN_S)?;
    check("interval_s".into(), run.interval_s, MAX_SPAN_S)?;
    for (i, iv) in run.intervals.iter().enumerate() {
        check(format!("intervals[{i}].start_s"), iv.start_s, MAX_SPAN_S)?;
        check(
            format!("intervals[{i}].duration_s"),
            iv.duration_s,
            MAX_SPAN_S,
        )?;
    }
    Ok(())
}

/// `I/N` as `(I, N)`.
fn parse_part(s: &str) -> Option<(u64, u64)> {
    let (i, n) = s.split_once('/')?;
    Some((i.trim().parse().ok()?, n.trim().parse().ok()?))
}

/// The value every part has, if they agree.
fn same<T: PartialEq>(parts: &[(String, RunSummary)], f: impl Fn(&RunSummary) -> T) -> Option<T> {
    let mut values = parts.iter().map(|(_, r)| f(r));
    let first = values.next()?;
    values.all(|v| v == first).then_some(first)
}

/// Adds the counts of `t` to `acc` (percentiles and rates are computed at the end).
fn add_counts(acc: &mut Totals, t: &Totals) {
    // Saturating: a damaged file must not wrap a count around (or panic).
    let add = |a: &mut u64, b: u64| *a = a.saturating_add(b);
    add(&mut acc.requests, t.requests);
    add(&mut acc.good, t.good);
    add(&mut acc.bad, t.bad);
    add(&mut acc.failed, t.failed);
    add(&mut acc.late_sends, t.late_sends);
    add(&mut acc.bytes, t.bytes);
    for (k, v) in &t.status_codes {
        add(acc.status_codes.entry(k.clone()).or_insert(0), *v);
    }
    for (k, v) in &t.errors {
        add(acc.errors.entry(k.clone()).or_insert(0), *v);
    }
}

fn add_histograms(acc: &mut [Histogram; 3], name: &str, t: &Totals) -> Result<(), MergeError> {
    let hdr = t.hdr.as_ref().ok_or_else(|| MergeError::Incomplete {
        source_name: name.to_string(),
        missing: "no histograms (hdr)",
    })?;
    let decoded = hdr.decode().map_err(|e| MergeError::Histogram {
        source_name: name.to_string(),
        reason: e.to_string(),
    })?;
    for (a, b) in acc.iter_mut().zip(&decoded) {
        a.merge(b);
    }
    Ok(())
}

/// Summed counts plus what is derived from them and from the histograms.
fn finish(mut t: Totals, hists: &[Histogram; 3], target_rate: f64, secs: f64) -> Totals {
    t.target_rate = target_rate;
    t.achieved_rate = if secs > 0.0 {
        t.requests as f64 / secs
    } else {
        0.0
    };
    t.success_rate = match t.requests {
        0 => 1.0,
        n => t.good as f64 / n as f64,
    };
    t.latency_us = hists[0].percentiles();
    t.service_time_us = hists[1].percentiles();
    t.send_lag_us = hists[2].percentiles();
    t.hdr = Some(Encoded {
        latency: log::encode(&hists[0]).unwrap_or_default(),
        service_time: log::encode(&hists[1]).unwrap_or_default(),
        send_lag: log::encode(&hists[2]).unwrap_or_default(),
    });
    t
}

/// Every target of every part, in order of first appearance, with its requests.
fn targets(parts: &[(String, RunSummary)]) -> (Vec<String>, Vec<u64>) {
    let mut urls: Vec<String> = Vec::new();
    let mut counts: Vec<u64> = Vec::new();
    for (_, run) in parts {
        for (i, url) in run.urls.iter().enumerate() {
            let at = urls.iter().position(|u| u == url).unwrap_or_else(|| {
                urls.push(url.clone());
                counts.push(0);
                urls.len() - 1
            });
            counts[at] = counts[at].saturating_add(run.per_target.get(i).copied().unwrap_or(0));
        }
    }
    (urls, counts)
}

/// Client CPU per request over every part, when every part measured it.
fn cpu_per_request(parts: &[(String, RunSummary)]) -> Option<f64> {
    let mut cpu = 0.0;
    let mut requests = 0.0;
    for (_, r) in parts {
        if r.totals.requests > 0 {
            let n = r.totals.requests as f64;
            cpu += r.client_cpu_us_per_request? * n;
            requests += n;
        }
    }
    (requests > 0.0).then(|| cpu / requests)
}

#[cfg(test)]
mod tests {
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
        assert_eq!(s.totals.latency_us, union.percentiles());
        let mut second = Histogram::new();
        for v in [400, 50_000, 3_000, 4_000, 90] {
            second.record_us(v);
        }
        assert_eq!(s.intervals[1].totals.latency_us, second.percentiles());
        assert_eq!(m.interval_histograms[1][0], second);
        // The merged summary carries its histograms: it merges again.
        let again = merge(&[("m".into(), s.clone())]).unwrap();
        assert_eq!(again.summary.totals.latency_us, union.percentiles());
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
}
