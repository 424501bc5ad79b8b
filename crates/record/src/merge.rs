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
//!
//! Windows are merged one at a time, in order (each summary's intervals are in time order),
//! so the decoded histograms held at once are one window's and the run's, however long the
//! runs: a window is finished (percentiles read, histograms encoded) before the next starts.

mod error;
mod parts;

pub use error::{MergeError, MAX_PARTS};

use crate::summary::{Encoded, IntervalSummary, Quantile, RunSummary, Totals};
use parts::same;
use std::collections::BTreeMap;
use tailguard_histogram::{log, Histogram};

/// A merged summary and what the merge noticed on the way.
#[derive(Clone, Debug)]
pub struct Merged {
    /// The merged run, in the format of `tailguard load --json`.
    pub summary: RunSummary,
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
/// A summary without a start time or histograms, an undecodable histogram, the same part of
/// a schedule or the same whole run twice, or intervals out of time order.
pub fn merge(parts: &[(String, RunSummary)]) -> Result<Merged, MergeError> {
    let first = &parts.first().ok_or(MergeError::Empty)?.1;
    let notes = parts::check_parts(parts)?;
    let origin = parts
        .iter()
        .map(|(_, r)| r.start_unix_s)
        .fold(f64::INFINITY, f64::min);
    let length = parts
        .iter()
        .map(|(_, r)| interval_length(r))
        .fold(0.0, f64::max);
    let intervals = merge_windows(parts, origin, length)?;
    let mut total = Totals::default();
    let mut total_hists: [Histogram; 3] = Default::default();
    for (name, run) in parts {
        add_counts(&mut total, &run.totals);
        add_histograms(&mut total_hists, name, &run.totals)?;
    }
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
        per_name: per_name(parts),
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
        interrupted: parts.iter().any(|(_, r)| r.interrupted),
        planned_duration_s: parts
            .iter()
            .filter_map(|(_, r)| r.planned_duration_s)
            .reduce(f64::max),
        unsent: parts
            .iter()
            .fold(0u64, |n, (_, r)| n.saturating_add(r.unsent)),
        records: None,
        slo: Vec::new(),
        percentiles: chosen_percentiles(parts, &total_hists),
    };
    Ok(Merged { summary, notes })
}

/// The percentiles the parts were asked for (`--percentiles`), from the merged histograms,
/// when every part asked for the same ones; none otherwise.
fn chosen_percentiles(parts: &[(String, RunSummary)], hists: &[Histogram; 3]) -> Vec<Quantile> {
    let list = |r: &RunSummary| {
        r.percentiles
            .iter()
            .map(|q| q.percentile)
            .collect::<Vec<f64>>()
    };
    let Some(first) = parts.first().map(|(_, r)| list(r)) else {
        return Vec::new();
    };
    if parts.iter().any(|(_, r)| list(r) != first) {
        return Vec::new();
    }
    let at = |h: &Histogram, p: f64| (!h.is_empty()).then(|| h.quantile_us(p / 100.0));
    first
        .into_iter()
        .map(|p| Quantile {
            percentile: p,
            latency_us: at(&hists[0], p),
            service_time_us: at(&hists[1], p),
        })
        .collect()
}

/// The parts' figures per name, merged by name, most requests first.
fn per_name(parts: &[(String, RunSummary)]) -> Vec<crate::NameSummary> {
    let mut by: BTreeMap<&str, crate::NameSummary> = BTreeMap::new();
    for n in parts.iter().flat_map(|(_, r)| &r.per_name) {
        match by.get_mut(n.name.as_str()) {
            Some(m) => m.merge(n),
            None => {
                by.insert(&n.name, n.clone());
            }
        }
    }
    let mut out: Vec<_> = by.into_values().collect();
    out.sort_by(|a, b| {
        b.requests
            .cmp(&a.requests)
            .then_with(|| a.name.cmp(&b.name))
    });
    out
}

/// The merged intervals, one window at a time: every part's intervals of the earliest window
/// any part has next are added, then the window is finished and dropped.
fn merge_windows(
    parts: &[(String, RunSummary)],
    origin: f64,
    length: f64,
) -> Result<Vec<IntervalSummary>, MergeError> {
    let window_of = |(_, run): &(String, RunSummary), i: usize| {
        let iv: &IntervalSummary = &run.intervals[i];
        log::window(origin, length, run.start_unix_s + iv.start_s, iv.duration_s)
    };
    let mut next = vec![0usize; parts.len()];
    let mut out = Vec::new();
    loop {
        let target = (0..parts.len())
            .filter(|&p| next[p] < parts[p].1.intervals.len())
            .map(|p| window_of(&parts[p], next[p]))
            .min();
        let Some(target) = target else {
            return Ok(out);
        };
        let mut w = Window {
            start: f64::INFINITY,
            ..Window::default()
        };
        for (p, part) in parts.iter().enumerate() {
            while next[p] < part.1.intervals.len() {
                let at = window_of(part, next[p]);
                if at > target {
                    break;
                }
                if at < target {
                    return Err(MergeError::OutOfOrder {
                        source_name: part.0.clone(),
                        index: next[p],
                    });
                }
                add_interval(&mut w, p, part, &part.1.intervals[next[p]])?;
                next[p] += 1;
            }
        }
        out.push(finish_window(w, origin));
    }
}

/// Adds interval `iv` of part `p` to window `w`.
fn add_interval(
    w: &mut Window,
    p: usize,
    (name, run): &(String, RunSummary),
    iv: &IntervalSummary,
) -> Result<(), MergeError> {
    let start = run.start_unix_s + iv.start_s;
    w.start = w.start.min(start);
    w.end = w.end.max(start + iv.duration_s);
    if iv.timestamp > w.timestamp {
        w.timestamp.clone_from(&iv.timestamp);
    }
    w.target = w.target.saturating_add(iv.target);
    let rate = w.rates.entry(p).or_insert(0.0);
    *rate = rate.max(iv.totals.target_rate);
    add_counts(&mut w.counts, &iv.totals);
    add_histograms(&mut w.hists, name, &iv.totals)
}

fn finish_window(w: Window, origin: f64) -> IntervalSummary {
    let duration = w.end - w.start;
    IntervalSummary {
        timestamp: w.timestamp,
        start_s: w.start - origin,
        duration_s: duration,
        target: w.target,
        change: String::new(),
        totals: finish(w.counts, &w.hists, w.rates.values().sum(), duration),
    }
}

/// The report interval of a run: as recorded, or the length of its first interval.
fn interval_length(r: &RunSummary) -> f64 {
    if r.interval_s > 0.0 {
        r.interval_s
    } else {
        r.intervals.first().map_or(0.0, |iv| iv.duration_s)
    }
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
    add(&mut acc.resent, t.resent);
    add(&mut acc.bytes, t.bytes);
    for (k, v) in &t.status_codes {
        add(acc.status_codes.entry(k.clone()).or_insert(0), *v);
    }
    for (k, v) in &t.errors {
        add(acc.errors.entry(k.clone()).or_insert(0), *v);
    }
    for (k, v) in &t.failed_checks {
        add(acc.failed_checks.entry(k.clone()).or_insert(0), *v);
    }
    // Message counts add up; their percentiles are not merged (a summary keeps no message
    // histograms), so a merged run shows none.
    if let Some(m) = &t.messages {
        let a = acc.messages.get_or_insert_with(Default::default);
        add(&mut a.sent, m.sent);
        add(&mut a.received, m.received);
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
    let unsent = t.errors.get("no-connection").copied().unwrap_or(0);
    t.achieved_rate = if secs > 0.0 {
        t.requests.saturating_sub(unsent) as f64 / secs
    } else {
        0.0
    };
    t.success_rate = match t.requests {
        0 => None,
        n => Some(t.good as f64 / n as f64),
    };
    t.latency_us = crate::summary::measured(&hists[0]);
    t.service_time_us = crate::summary::measured(&hists[1]);
    t.send_lag_us = crate::summary::measured(&hists[2]);
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
mod tests;
