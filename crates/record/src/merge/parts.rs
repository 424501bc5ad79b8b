//! What may be merged: plausible times, histograms present, each part of a schedule once,
//! each whole run once.

use super::error::{MergeError, MAX_PARTS};
use crate::summary::RunSummary;
use std::collections::BTreeMap;

/// Latest start accepted: the year 5138, far beyond any real run, far below overflow.
const MAX_EPOCH_S: f64 = 1e11;
/// Longest offset or length accepted: about 31 years.
const MAX_SPAN_S: f64 = 1e9;
/// Missing parts named one by one; the rest are counted.
const NAMED_MISSING: usize = 5;

/// Refuses what cannot merge; notes what merges but is not one whole schedule.
pub(super) fn check_parts(parts: &[(String, RunSummary)]) -> Result<Vec<String>, MergeError> {
    let incomplete = |name: &String, missing| MergeError::Incomplete {
        source_name: name.clone(),
        missing,
    };
    let mut seen: BTreeMap<u64, &String> = BTreeMap::new();
    let mut split: Option<(u64, &String)> = None;
    let mut whole: Vec<(&String, &RunSummary)> = Vec::new();
    for (name, run) in parts {
        if run.start_unix_s == 0.0 {
            return Err(incomplete(name, "no start time (start_unix_s)"));
        }
        plausible(name, run)?;
        if run.totals.hdr.is_none() || run.intervals.iter().any(|iv| iv.totals.hdr.is_none()) {
            return Err(incomplete(name, "no histograms (hdr)"));
        }
        let Some(part) = run.part.as_deref() else {
            same_run_twice(&whole, name, run)?;
            whole.push((name, run));
            continue;
        };
        let (index, of) = parse_part(part).ok_or_else(|| MergeError::BadPart {
            source_name: name.clone(),
            part: short(part),
        })?;
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
    Ok(notes(parts, split.map(|(of, _)| of), &seen))
}

/// Refuses a whole (unsharded) run given twice: the same start, counts and histograms.
fn same_run_twice(
    earlier: &[(&String, &RunSummary)],
    name: &str,
    run: &RunSummary,
) -> Result<(), MergeError> {
    let key = |r: &RunSummary| {
        (
            r.start_unix_s.to_bits(),
            r.totals.requests,
            r.totals.hdr.as_ref().map(|h| h.latency.clone()),
        )
    };
    match earlier.iter().find(|(_, r)| key(r) == key(run)) {
        Some((first, _)) => Err(MergeError::SameRun {
            first: (*first).clone(),
            second: name.to_owned(),
        }),
        None => Ok(()),
    }
}

/// What the reader should know: parts missing, seeds that differ.
fn notes(
    parts: &[(String, RunSummary)],
    of: Option<u64>,
    seen: &BTreeMap<u64, &String>,
) -> Vec<String> {
    let mut notes = Vec::new();
    let Some(of) = of else {
        return notes;
    };
    let missing = of - seen.len() as u64;
    if missing > 0 {
        notes.push(format!(
            "{}: the merged run is not the whole schedule",
            missing_parts(seen, of, missing)
        ));
    }
    if same(parts, |r| r.seed).is_none() {
        notes.push("the parts have different seeds: together they are not one schedule".into());
    }
    notes
}

/// `parts 1/4, 3/4 are missing`, or for many, `9990 of 10000 parts are missing (0/10000,
/// 1/10000, ...)`: a few named, never a line per part.
fn missing_parts(seen: &BTreeMap<u64, &String>, of: u64, missing: u64) -> String {
    let named: Vec<String> = (0..of)
        .filter(|i| !seen.contains_key(i))
        .take(NAMED_MISSING)
        .map(|i| format!("{i}/{of}"))
        .collect();
    if missing as usize <= NAMED_MISSING {
        format!("parts {} are missing", named.join(", "))
    } else {
        format!(
            "{missing} of {of} parts are missing ({}, ...)",
            named.join(", ")
        )
    }
}

/// `I/N` as `(I, N)`, with `I < N <= MAX_PARTS`.
fn parse_part(s: &str) -> Option<(u64, u64)> {
    let (i, n) = s.split_once('/')?;
    let (i, n): (u64, u64) = (i.trim().parse().ok()?, n.trim().parse().ok()?);
    (i < n && n <= MAX_PARTS).then_some((i, n))
}

/// At most 40 characters of `s`, for an error message.
fn short(s: &str) -> String {
    match s.char_indices().nth(40) {
        Some((cut, _)) => format!("{}...", &s[..cut]),
        None => s.to_owned(),
    }
}

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

/// The value every part has, if they agree.
pub(super) fn same<T: PartialEq>(
    parts: &[(String, RunSummary)],
    f: impl Fn(&RunSummary) -> T,
) -> Option<T> {
    let mut values = parts.iter().map(|(_, r)| f(r));
    let first = values.next()?;
    values.all(|v| v == first).then_some(first)
}
