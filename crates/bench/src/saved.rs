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
        success_rate: t.success_rate,
        within_deadline_rate: t.success_rate,
        latency_us: t.latency_us,
        mean_us: 0.0,
        curve: [
            (0.0, t.latency_us.min),
            (50.0, t.latency_us.p50),
            (90.0, t.latency_us.p90),
            (95.0, t.latency_us.p95),
            (99.0, t.latency_us.p99),
            (99.9, t.latency_us.p999),
            (99.99, t.latency_us.p9999),
            (100.0, t.latency_us.max),
        ]
        .to_vec(),
        intervals: s.intervals.iter().map(IntervalPoint::from).collect(),
        proxy: None,
        sim: None,
        load: s,
        seconds: Vec::new(),
    };
    BenchReport {
        format: FORMAT,
        tool: arm.load.tool.clone(),
        scenario: "load".to_owned(),
        description: "saved `tailguard load` runs".to_owned(),
        load: String::new(),
        deadline_ms: 0.0,
        started_unix_s: 0,
        arms: vec![arm],
        notes: vec!["latency percentiles of a load run leave fast failures out".to_owned()],
        interrupted: false,
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
        };
    };
    let rest: Vec<(String, BenchReport)> = runs.collect();
    if rest.is_empty() {
        return first;
    }
    let mut out = first.clone();
    let label = |l: &str, arms: &mut Vec<ArmRun>| {
        for a in arms.iter_mut() {
            a.name = format!("{l}/{}", a.name);
        }
    };
    label(&first_label, &mut out.arms);
    out.description = format!("{} runs side by side", rest.len() + 1);
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
        s.totals.success_rate = 1.0;
        s.totals.latency_us.p99 = p99;
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
        std::fs::write(dir.join("junk.json"), "{\"x\": 1}").unwrap();
        let err = read(&dir.join("junk.json"), "junk").unwrap_err();
        assert!(
            err.contains("junk.json") && err.contains("neither"),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
