//! Saved results read back: `tailguard bench --json` files, and `tailguard load --json` files
//! shown as one-arm reports, so `tailguard report` can render and compare both.

use crate::results::{ArmRun, BenchReport, IntervalPoint, FORMAT};
use std::path::Path;
use tailguard_record::RunSummary;

/// Reads a bench report, or a load summary as a one-arm report named `label`.
///
/// # Errors
/// A file that cannot be read, or JSON that is neither shape (the message names the file).
pub fn read(path: &Path, label: &str) -> Result<BenchReport, String> {
    if let Some(records) = read_records(path)? {
        return Ok(from_load(label, records));
    }
    let bytes = tailguard_record::read_json_file(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let text = String::from_utf8(bytes)
        .map_err(|_| format!("cannot read {}: not UTF-8", path.display()))?;
    match serde_json::from_str::<BenchReport>(&text) {
        Ok(r) if r.format <= FORMAT => Ok(r),
        Ok(r) => Err(format!(
            "{}: written by a newer tailguard (format {}, this one reads up to {FORMAT})",
            path.display(),
            r.format
        )),
        Err(bench_err) => match serde_json::from_str::<RunSummary>(&text) {
            Ok(s) => Ok(from_load(label, s)),
            Err(_) => Err(format!(
                "{}: neither a `tailguard bench --json` nor a `tailguard load --json` file \
                 ({bench_err})",
                path.display()
            )),
        },
    }
}

/// A `tailguard load --output` records file, read through (any size: it is streamed) into the
/// run's summary; `None` when `path` is not one.
fn read_records(path: &Path) -> Result<Option<RunSummary>, String> {
    use std::io::BufRead as _;
    use tailguard_record::records;
    let open = || {
        tailguard_load::files::open_regular(path)
            .map(|f| std::io::BufReader::with_capacity(256 * 1024, f))
            .map_err(|e| format!("cannot read {}: {e}", path.display()))
    };
    let mut start = open()?;
    let head = start
        .fill_buf()
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if !records::is_records(&String::from_utf8_lossy(&head[..head.len().min(64)])) {
        return Ok(None);
    }
    let read = records::read(start).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut summary = read.summary();
    if let Some(r) = &mut summary.records {
        r.path = path.display().to_string();
    }
    Ok(Some(summary))
}

/// A load summary as a report with one arm.
pub fn from_load(label: &str, s: RunSummary) -> BenchReport {
    let t = &s.totals;
    let arm = ArmRun {
        name: label.to_owned(),
        group: "load".to_owned(),
        via: format!("{} to {}", s.tool, s.urls.join(" ")),
        target_rate: t.target_rate,
        achieved_rate: t.achieved_rate,
        requests: t.requests,
        good: t.good,
        success_rate: t.success_rate.unwrap_or(0.0),
        within_deadline_rate: t.success_rate.unwrap_or(0.0),
        latency_us: t.latency_us.unwrap_or_default(),
        mean_us: 0.0,
        // No curve without a timed request (not a line along zero).
        curve: t
            .latency_us
            .map(|l| l.by_percent().to_vec())
            .unwrap_or_default(),
        intervals: IntervalPoint::of_run(&s),
        proxy: None,
        sim: None,
        load: s,
        seconds: Vec::new(),
        overload: None,
    };
    let run = &arm.load;
    let mut notes = vec!["latency percentiles of a load run leave fast failures out".to_owned()];
    if !run.merged_from.is_empty() {
        notes.push(format!("merged from {}", run.merged_from.join(", ")));
    }
    BenchReport {
        format: FORMAT,
        tool: run.tool.clone(),
        scenario: "load".to_owned(),
        description: "a saved `tailguard load` run".to_owned(),
        load: load_model(run),
        // A load run has no deadline: none is shown, not a zero one.
        deadline_ms: 0.0,
        started_unix_s: run.start_unix_s.max(0.0) as u64,
        interrupted: run.interrupted,
        title: Some(format!("tailguard load: {}", run.urls.join(" "))),
        arms: vec![arm],
        notes,
    }
}

/// A load run's model in words: `open loop, constant arrivals at 50 req/s, concurrency 10,
/// planned 20s (interrupted after 3.2s)`.
pub fn load_model(run: &RunSummary) -> String {
    let trim = tailguard_report::interval::trim_float;
    let mut model = if run.arrivals == "closed" {
        format!("closed loop, {} workers", run.concurrency)
    } else {
        format!(
            "open loop, {} arrivals at {} req/s, concurrency {}",
            run.arrivals,
            trim(run.totals.target_rate),
            run.concurrency
        )
    };
    match run.planned_duration_s {
        Some(d) => model.push_str(&format!(", {}s", trim(d))),
        None => model.push_str(&format!(", {} requests", run.totals.requests + run.unsent)),
    }
    if run.interrupted {
        model.push_str(&format!(" (interrupted after {}s)", trim(run.duration_s)));
    }
    if let Some(part) = &run.part {
        model.push_str(&format!(", part {part}"));
    }
    model
}

/// The change of each later run's arms from the first run's arm of the same group and name:
/// `change b/load vs a/load: p50 +1.20ms (+12.0%, slower: past the run-to-run noise of
/// ±300µs); p99 -400µs (-3.1%, within the noise of ±2.10ms); p99.9 ...; max ...; req/s ...;
/// success ...`.
///
/// The noise of a percentile is how far it moves from interval to interval within a run: the
/// interquartile range of its interval values (full-length intervals only), the larger of the
/// two runs'. A change is called slower or faster only past that, and only for the percentiles
/// the intervals carry (p50, p99) when both runs have at least three full intervals; the
/// others show the change alone.
fn changes(first_label: &str, first: &BenchReport, rest: &[(String, BenchReport)]) -> Vec<String> {
    let mut out = Vec::new();
    for (label, run) in rest {
        for arm in &run.arms {
            // The same arm of the same group; a group of one arm in each (saved load runs,
            // each named after its file) pairs whatever the names.
            let in_group = |r: &BenchReport| r.arms.iter().filter(|a| a.group == arm.group).count();
            let Some(base) = first.arms.iter().find(|a| {
                a.group == arm.group
                    && (a.name == arm.name || (in_group(first) == 1 && in_group(run) == 1))
            }) else {
                continue;
            };
            let name = |l: &str, a: &ArmRun| {
                if a.name == l {
                    l.to_owned()
                } else {
                    format!("{l}/{}", a.name)
                }
            };
            let (now, then) = (name(label, arm), name(first_label, base));
            let mut parts = Vec::new();
            let (a, b) = (&base.latency_us, &arm.latency_us);
            let judged: [(&str, u64, u64, IntervalValue); 2] = [
                ("p50", a.p50, b.p50, |i| i.p50_us),
                ("p99", a.p99, b.p99, |i| i.p99_us),
            ];
            let have = |x: &ArmRun| x.requests > 0;
            if !have(base) || !have(arm) {
                out.push(format!("change {now} vs {then}: no data to compare"));
                continue;
            }
            for (name, x, y, of) in judged {
                let noise = noise(base, of).zip(noise(arm, of)).map(|(p, q)| p.max(q));
                parts.push(format!("{name} {}", latency_change(x, y, noise)));
            }
            for (name, x, y) in [("p99.9", a.p999, b.p999), ("max", a.max, b.max)] {
                parts.push(format!("{name} {}", latency_change(x, y, None)));
            }
            parts.push(format!(
                "req/s {:+.1} ({})",
                arm.achieved_rate - base.achieved_rate,
                percent_change(base.achieved_rate, arm.achieved_rate)
            ));
            parts.push(format!(
                "success {:+.3} points",
                (arm.success_rate - base.success_rate) * 100.0
            ));
            out.push(format!("change {now} vs {then}: {}", parts.join("; ")));
        }
    }
    out
}

/// One percentile of an interval.
type IntervalValue = fn(&IntervalPoint) -> Option<u64>;

/// The interquartile range of an arm's interval values of one percentile (full-length
/// intervals), or `None` with fewer than three.
fn noise(arm: &ArmRun, of: IntervalValue) -> Option<u64> {
    let longest = arm
        .intervals
        .iter()
        .map(|i| i.duration_s)
        .fold(0.0, f64::max);
    let mut v: Vec<u64> = arm
        .intervals
        .iter()
        .filter(|i| i.duration_s >= 0.9 * longest)
        .filter_map(of)
        .collect();
    if v.len() < 3 {
        return None;
    }
    v.sort_unstable();
    let n = v.len();
    Some(v[(3 * n) / 4].min(v[n - 1]) - v[n / 4])
}

/// `+1.20ms (+12.0%, slower: past the run-to-run noise of ±300µs)`.
fn latency_change(from: u64, to: u64, noise: Option<u64>) -> String {
    let f = |us: u64| tailguard_report::Unit::Auto.format(us);
    let sign = if to >= from { "+" } else { "-" };
    let delta = from.abs_diff(to);
    let pct = percent_change(from as f64, to as f64);
    match noise {
        None => format!("{sign}{} ({pct})", f(delta)),
        Some(n) if delta > n => {
            let word = if to > from { "slower" } else { "faster" };
            format!(
                "{sign}{} ({pct}, {word}: past the run-to-run noise of ±{})",
                f(delta),
                f(n)
            )
        }
        Some(n) => format!("{sign}{} ({pct}, within the noise of ±{})", f(delta), f(n)),
    }
}

/// `+12.0%`, or `-` from zero.
fn percent_change(from: f64, to: f64) -> String {
    if from > 0.0 {
        format!("{:+.1}%", (to - from) / from * 100.0)
    } else {
        "-".to_owned()
    }
}

/// Several saved runs side by side: each arm is renamed `LABEL/ARM` (the label is the file's
/// name) and keeps its group, so the same arm of two runs lands in the same table.
pub fn side_by_side(runs: Vec<(String, BenchReport)>) -> BenchReport {
    let mut runs = runs.into_iter();
    let Some((first_label, first)) = runs.next() else {
        return BenchReport {
            format: FORMAT,
            tool: String::new(),
            scenario: String::new(),
            description: String::new(),
            load: String::new(),
            deadline_ms: 0.0,
            started_unix_s: 0,
            arms: Vec::new(),
            notes: Vec::new(),
            interrupted: false,
            title: None,
        };
    };
    let rest: Vec<(String, BenchReport)> = runs.collect();
    if rest.is_empty() {
        return first;
    }
    let changed = changes(&first_label, &first, &rest);
    let mut out = first.clone();
    let label = |l: &str, arms: &mut Vec<ArmRun>| {
        for a in arms.iter_mut() {
            a.name = format!("{l}/{}", a.name);
        }
    };
    label(&first_label, &mut out.arms);
    out.description = format!("{} runs side by side", rest.len() + 1);
    if out.title.is_some() {
        out.title = Some(format!(
            "tailguard report: {} runs side by side",
            rest.len() + 1
        ));
    }
    out.notes = first
        .notes
        .iter()
        .map(|n| format!("{first_label}: {n}"))
        .collect();
    for (l, mut r) in rest {
        if r.scenario != out.scenario {
            out.scenario = format!("{} + {}", out.scenario, r.scenario);
        }
        label(&l, &mut r.arms);
        out.arms.extend(r.arms);
        out.notes
            .extend(r.notes.iter().map(|n| format!("{l}: {n}")));
        out.interrupted |= r.interrupted;
    }
    out.notes.extend(changed);
    // Rows of one group next to each other, runs in file order within a group.
    let groups: Vec<String> = out.groups().iter().map(|g| (*g).to_owned()).collect();
    let mut arms = Vec::with_capacity(out.arms.len());
    for g in &groups {
        arms.extend(out.arms.iter().filter(|a| &a.group == g).cloned());
    }
    out.arms = arms;
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load_summary(p99: u64) -> RunSummary {
        let mut s = RunSummary {
            tool: "tailguard-load".into(),
            ..RunSummary::default()
        };
        s.totals.requests = 10;
        s.totals.good = 10;
        s.totals.success_rate = Some(1.0);
        s.totals.latency_us = Some(tailguard_histogram::Percentiles {
            p99,
            ..Default::default()
        });
        s
    }

    #[test]
    fn load_files_become_one_arm_reports_and_line_up() {
        let dir = std::env::temp_dir().join(format!("tg-saved-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let a = dir.join("before.json");
        let b = dir.join("after.json");
        std::fs::write(&a, serde_json::to_string(&load_summary(900)).unwrap()).unwrap();
        std::fs::write(&b, serde_json::to_string(&load_summary(300)).unwrap()).unwrap();
        let ra = read(&a, "before").unwrap();
        let rb = read(&b, "after").unwrap();
        assert_eq!(ra.arms[0].latency_us.p99, 900);
        let both = side_by_side(vec![("before".into(), ra), ("after".into(), rb)]);
        let names: Vec<&str> = both.arms.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["before/before", "after/after"]);
        let change = both.notes.iter().find(|n| n.starts_with("change")).unwrap();
        assert!(
            change.starts_with("change after vs before: p50 "),
            "{change}"
        );
        // Without intervals the noise is unknown: the change alone, no verdict.
        assert!(change.contains("p99 -600µs (-66.7%);"), "{change}");
        std::fs::write(dir.join("junk.json"), "{\"x\": 1}").unwrap();
        let err = read(&dir.join("junk.json"), "junk").unwrap_err();
        assert!(
            err.contains("junk.json") && err.contains("neither"),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Ten 1 s intervals per run: p99 wobbling by ±100 µs around 1 ms before; after, either
    /// 2 ms (past the noise: slower) or 1.05 ms (within it).
    #[test]
    fn a_change_gets_a_verdict_only_past_the_run_to_run_noise() {
        let with_intervals = |p99: u64| {
            let mut s = load_summary(p99);
            s.intervals = (0..10)
                .map(|i| {
                    let mut iv = tailguard_record::IntervalSummary {
                        start_s: f64::from(i),
                        duration_s: 1.0,
                        ..Default::default()
                    };
                    iv.totals.requests = 100;
                    iv.totals.latency_us = Some(tailguard_histogram::Percentiles {
                        p50: 500,
                        p99: p99 + if i % 2 == 0 { 100 } else { 0 },
                        ..Default::default()
                    });
                    iv
                })
                .collect();
            from_load("x", s)
        };
        let before = with_intervals(1_000);
        let slower = changes("a", &before, &[("b".into(), with_intervals(2_000))]);
        assert!(
            slower[0]
                .contains("p99 +1.00ms (+100.0%, slower: past the run-to-run noise of ±100µs)"),
            "{slower:?}"
        );
        assert!(
            slower[0].starts_with("change b/x vs a/x: p50 +0µs (-, within the noise of ±0µs)"),
            "{slower:?}"
        );
        let same = changes("a", &before, &[("b".into(), with_intervals(1_050))]);
        assert!(
            same[0].contains("p99 +50µs (+5.0%, within the noise of ±100µs)"),
            "{same:?}"
        );
        let mut empty = load_summary(0);
        empty.totals.requests = 0;
        let none = changes("a", &before, &[("b".into(), from_load("y", empty))]);
        assert_eq!(none, ["change b/y vs a/x: no data to compare"]);
    }
}
