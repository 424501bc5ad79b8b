//! The side-by-side text table of a [`BenchReport`]: one block per group, one row per arm,
//! the simulator's prediction in the last columns when there is one.

use crate::results::{ArmRun, BenchReport};
use std::fmt::Write as _;
use tailguard_report::Unit;

/// The whole report as text: title, load, one table per group, how each arm ran, notes.
pub fn text(report: &BenchReport, unit: Unit) -> String {
    let mut out = String::new();
    match &report.title {
        Some(title) => {
            let _ = writeln!(out, "# {title}: {}", report.description);
        }
        None => {
            let _ = writeln!(out, "# {}: {}", report.scenario, report.description);
        }
    }
    if !report.load.is_empty() {
        let _ = writeln!(out, "# load: {}", report.load);
    }
    for group in report.groups() {
        let arms: Vec<&ArmRun> = report.group(group).collect();
        out.push('\n');
        if group != report.scenario {
            let _ = writeln!(out, "## {group}");
        }
        rows(&mut out, &arms, report.deadline_ms, unit);
        overload_rows(&mut out, &arms, unit);
    }
    out.push('\n');
    let width = report.arms.iter().map(|a| a.name.len()).max().unwrap_or(0);
    let mut seen: Vec<&str> = Vec::new();
    for a in &report.arms {
        if !seen.contains(&a.name.as_str()) {
            seen.push(&a.name);
            let _ = writeln!(out, "# {:width$}  {}", a.name, a.via);
        }
    }
    for note in &report.notes {
        let _ = writeln!(out, "# note: {note}");
    }
    if report.interrupted {
        let _ = writeln!(out, "# interrupted: the rows above are what was measured");
    }
    out
}

fn rows(out: &mut String, arms: &[&ArmRun], deadline_ms: f64, unit: Unit) {
    let with_cost = arms.iter().any(|a| a.proxy.is_some());
    let with_sim = arms.iter().any(|a| a.sim.is_some());
    let name_w = arms.iter().map(|a| a.name.len()).max().unwrap_or(3).max(3);
    // No deadline (saved `load` runs): no "within" column, rather than a `<=0s` one.
    let within = (deadline_ms > 0.0).then(|| format!("<={}", trim(deadline_ms / 1e3) + "s"));
    let mut head = format!(
        "{:name_w$} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8}",
        "arm", "p50", "p95", "p99", "p99.9", "max", "req/s", "success"
    );
    if let Some(within) = &within {
        let _ = write!(head, " {within:>8}");
    }
    if with_cost {
        let _ = write!(head, " {:>10} {:>8} {:>8}", "cpu/req", "of user", "rss");
    }
    if with_sim {
        let _ = write!(
            head,
            " | {:>9} {:>9} {:>9} {:>8}",
            "sim p50", "sim p99", "sim req/s", "sim ok"
        );
    }
    let _ = writeln!(out, "{head}");
    for a in arms {
        let l = &a.latency_us;
        let _ = write!(
            out,
            "{:name_w$} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9.1} {:>8}",
            a.name,
            unit.format(l.p50),
            unit.format(l.p95),
            unit.format(l.p99),
            unit.format(l.p999),
            unit.format(l.max),
            a.achieved_rate,
            percent(a.success_rate),
        );
        if within.is_some() {
            let _ = write!(out, " {:>8}", percent(a.within_deadline_rate));
        }
        if with_cost {
            let cpu = a
                .proxy
                .as_ref()
                .and_then(|c| c.cpu_us_per_request)
                .map_or("-".to_owned(), |c| format!("{c:.1}us"));
            let user = a
                .proxy
                .as_ref()
                .and_then(|c| c.cpu_user_us_per_request)
                .map_or("-".to_owned(), |c| format!("{c:.1}us"));
            let rss = a
                .proxy
                .as_ref()
                .and_then(|c| c.rss_kib)
                .map_or("-".to_owned(), |k| format!("{:.1}MiB", k as f64 / 1024.0));
            let _ = write!(out, " {cpu:>10} {user:>8} {rss:>8}");
        }
        if let Some(s) = &a.sim {
            let _ = write!(
                out,
                " | {:>9} {:>9} {:>9.1} {:>8}",
                unit.format(s.latency_us.p50),
                unit.format(s.latency_us.p99),
                s.achieved_rate,
                percent(s.success_rate)
            );
        }
        out.push('\n');
    }
}

/// An overload scenario's figures per arm, live and (when predicted) simulated.
fn overload_rows(out: &mut String, arms: &[&ArmRun], unit: Unit) {
    let Some(first) = arms.iter().find_map(|a| a.overload.as_ref()) else {
        return;
    };
    let _ = writeln!(
        out,
        "\noverload: seconds {}-{} offered over {:.0} req/s (measured); recovery: p99 within 2 x {}",
        first.from_s,
        first.to_s,
        first.capacity,
        unit.format(first.unloaded_p99_us)
    );
    let name_w = arms.iter().map(|a| a.name.len()).max().unwrap_or(3).max(3);
    let with_sim = arms
        .iter()
        .any(|a| a.sim.as_ref().is_some_and(|s| s.overload.is_some()));
    let mut head = format!(
        "{:name_w$} {:>8} {:>9} {:>9} {:>9}",
        "arm", "goodput", "critical", "recovery", "p99 sent"
    );
    if with_sim {
        let _ = write!(
            head,
            " | {:>8} {:>9} {:>9} {:>9}",
            "sim", "sim crit", "sim recov", "sim p99"
        );
    }
    let _ = writeln!(out, "{head}");
    let recovery = |r: Option<usize>| r.map_or_else(|| "never".to_owned(), |s| format!("{s}s"));
    for a in arms {
        let Some(o) = &a.overload else { continue };
        let _ = write!(
            out,
            "{:name_w$} {:>8.3} {:>9} {:>9} {:>9}",
            a.name,
            o.goodput_ratio,
            percent(o.critical_success),
            recovery(o.recovery_s),
            unit.format(o.admitted_p99_us)
        );
        if let Some(s) = a.sim.as_ref().and_then(|s| s.overload.as_ref()) {
            let _ = write!(
                out,
                " | {:>8.3} {:>9} {:>9} {:>9}",
                s.goodput_ratio,
                percent(s.critical_success),
                recovery(s.recovery_s),
                unit.format(s.admitted_p99_us)
            );
        }
        out.push('\n');
    }
}

fn percent(r: f64) -> String {
    format!("{:.2}%", r * 100.0)
}

fn trim(v: f64) -> String {
    tailguard_report::interval::trim_float(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{SimPrediction, FORMAT};
    use tailguard_histogram::Histogram;
    use tailguard_record::RunSummary;

    fn arm(name: &str, group: &str, p99_ms: u64, success: f64) -> ArmRun {
        let mut h = Histogram::new();
        for i in 1..=100 {
            h.record_us(i * p99_ms * 10);
        }
        ArmRun {
            name: name.into(),
            group: group.into(),
            via: format!("via {name}"),
            target_rate: 0.0,
            achieved_rate: 123.45,
            requests: 100,
            good: (success * 100.0) as u64,
            success_rate: success,
            within_deadline_rate: success,
            latency_us: h.percentiles(),
            mean_us: h.mean_us(),
            curve: crate::results::curve(&h),
            intervals: Vec::new(),
            proxy: None,
            sim: None,
            load: RunSummary::default(),
            seconds: Vec::new(),
            overload: None,
        }
    }

    #[test]
    fn one_block_per_group_with_sim_columns_when_predicted() {
        let mut proxy = arm("proxy", "add-steps", 600, 1.0);
        proxy.sim = Some(SimPrediction {
            latency_us: proxy.latency_us,
            achieved_rate: 330.0,
            success_rate: 1.0,
            within_deadline_rate: 1.0,
            overload: None,
        });
        let report = BenchReport {
            format: FORMAT,
            tool: "t".into(),
            scenario: "add-steps".into(),
            description: "d".into(),
            load: "closed loop".into(),
            deadline_ms: 1000.0,
            started_unix_s: 0,
            arms: vec![arm("baseline", "add-steps", 2000, 0.8808), proxy],
            notes: vec!["a note".into()],
            interrupted: false,
            title: None,
        };
        let t = text(&report, Unit::Ms);
        assert!(t.contains("sim p99"), "{t}");
        assert!(t.contains("88.08%"), "{t}");
        assert!(t.contains("<=1s"), "{t}");
        assert!(t.contains("# baseline  via baseline"), "{t}");
        assert!(t.contains("# note: a note"));
        assert!(
            !t.contains("## add-steps"),
            "the scenario's own group needs no heading"
        );
        let baseline = t.lines().find(|l| l.starts_with("baseline ")).unwrap();
        assert!(baseline.contains("123.5"), "{baseline}");
    }

    #[test]
    fn proxy_cost_columns_show_cpu_its_user_part_and_rss() {
        let mut proxy = arm("tailguard", "max rate", 1, 1.0);
        proxy.proxy = Some(crate::results::ProxyCost {
            cpu_us_per_request: Some(19.24),
            cpu_user_us_per_request: Some(6.46),
            rss_kib: Some(14_643),
        });
        let report = BenchReport {
            format: FORMAT,
            tool: "t".into(),
            scenario: "overhead".into(),
            description: "d".into(),
            load: "closed loop".into(),
            deadline_ms: 1000.0,
            started_unix_s: 0,
            arms: vec![arm("direct", "max rate", 1, 1.0), proxy],
            notes: Vec::new(),
            interrupted: false,
            title: None,
        };
        let t = text(&report, Unit::Us);
        let head = t.lines().find(|l| l.starts_with("arm ")).unwrap();
        assert!(head.ends_with("cpu/req  of user      rss"), "{head}");
        let row = t.lines().find(|l| l.starts_with("tailguard ")).unwrap();
        assert!(row.ends_with("19.2us    6.5us  14.3MiB"), "{row}");
        let direct = t.lines().find(|l| l.starts_with("direct ")).unwrap();
        assert!(direct.ends_with("-        -        -"), "{direct}");
    }

    #[test]
    fn no_deadline_no_within_column() {
        // Saved `load` runs have no deadline: the table must not invent a `<=0s` column.
        let report = BenchReport {
            format: FORMAT,
            tool: "t".into(),
            scenario: "load".into(),
            description: "saved runs".into(),
            load: String::new(),
            deadline_ms: 0.0,
            started_unix_s: 0,
            arms: vec![arm("run", "load", 1, 1.0)],
            notes: Vec::new(),
            interrupted: false,
            title: None,
        };
        let t = text(&report, Unit::Us);
        let head = t.lines().find(|l| l.starts_with("arm ")).unwrap();
        assert!(head.ends_with("req/s  success"), "{head}");
        assert!(!t.contains("<="), "{t}");
    }
}
