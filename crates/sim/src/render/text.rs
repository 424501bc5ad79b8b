//! The text report: a percentile table per arm, then where the requests went.

use super::Report;
use crate::ArmResult;
use std::fmt::Write as _;
use tailguard_histogram::QUANTILES;
use tailguard_report::Unit;
use tailguard_text::duration::format_duration;

/// Endpoint share tables wider than this are summarized instead.
const SHARE_TABLE_MAX: usize = 12;

/// The whole report as text.
pub fn text(report: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# tailguard sim {} (seed {})",
        report.scenario, report.seed
    );
    if !report.description.is_empty() {
        let _ = writeln!(out, "# {}", report.description);
    }
    let _ = writeln!(out, "# load: {}", report.load);
    let _ = writeln!(
        out,
        "# every request counted; latency = final outcome - scheduled send; deadline {}\n",
        format_duration(report.deadline)
    );
    latency_table(&mut out, report);
    out.push('\n');
    overload_table(&mut out, report);
    resilience_table(&mut out, report);
    out.push('\n');
    if report.endpoints.len() <= SHARE_TABLE_MAX {
        share_table(&mut out, report);
    } else {
        share_summary(&mut out, report);
    }
    out.push('\n');
    for arm in &report.arms {
        let _ = writeln!(out, "# {}: {}", arm.name, arm.description);
    }
    out
}

/// An overload scenario's figures per arm: goodput over capacity and critical success during
/// the overload, recovery after it.
fn overload_table(out: &mut String, report: &Report) {
    let Some((o, window)) = report.overload else {
        return;
    };
    let _ = writeln!(
        out,
        "overload: seconds {}-{} offered over {} req/s; recovery: p99 within 2 x {}",
        window.0,
        window.1,
        o.capacity,
        format_duration(o.unloaded_p99)
    );
    let width = name_width(report);
    let heads = ["goodput", "critical", "recovery", "p99 sent"].map(String::from);
    row(out, width, "arm", &heads, 10);
    for arm in &report.arms {
        let f = arm.overload(&o, window);
        let cells = [
            format!("{:.3}", f.goodput_ratio),
            format!("{:.4}", f.critical_success),
            f.recovery_s
                .map_or_else(|| "never".into(), |s| format!("{s}s")),
            Unit::Auto.format(tailguard_histogram::duration_us(f.admitted_p99)),
        ];
        row(out, width, &arm.name, &cells, 10);
    }
    out.push('\n');
}

/// Left-aligned first column, right-aligned others.
fn row(out: &mut String, width: usize, first: &str, cells: &[String], cell_width: usize) {
    let _ = write!(out, "{first:<width$}");
    for c in cells {
        let _ = write!(out, " {c:>cell_width$}");
    }
    out.push('\n');
}

fn name_width(report: &Report) -> usize {
    report
        .arms
        .iter()
        .map(|a| a.name.len())
        .max()
        .unwrap_or(3)
        .max(3)
}

fn percent(v: f64) -> String {
    format!("{:.2}%", v * 100.0)
}

fn latency_table(out: &mut String, report: &Report) {
    let w = name_width(report);
    let mut head: Vec<String> = QUANTILES.iter().map(|(n, _)| label(n)).collect();
    head.push("max".into());
    let deadline = format!("<={}", format_duration(report.deadline));
    head.extend(["success".into(), deadline, "req/s".into()]);
    row(out, w, "arm", &head, 8);
    for arm in &report.arms {
        row(out, w, &arm.name, &latency_cells(arm), 8);
    }
}

fn label(name: &str) -> String {
    match name {
        "p999" => "p99.9".into(),
        "p9999" => "p99.99".into(),
        other => other.into(),
    }
}

fn latency_cells(arm: &ArmResult) -> Vec<String> {
    let mut cells: Vec<String> = QUANTILES
        .iter()
        .map(|(_, q)| Unit::Auto.format(arm.latency.quantile_us(*q)))
        .collect();
    cells.push(Unit::Auto.format(arm.latency.max_us()));
    cells.push(percent(arm.success_rate()));
    cells.push(percent(arm.within_deadline_rate()));
    cells.push(format!("{:.1}", arm.achieved_rate()));
    cells
}

fn resilience_table(out: &mut String, report: &Report) {
    let w = name_width(report);
    let head = [
        "requests",
        "attempts",
        "retries",
        "refused",
        "hedges",
        "probes",
        "trips",
        "endpoints",
    ];
    row(out, w, "arm", &head.map(String::from), 9);
    for arm in &report.arms {
        let s = arm.stats;
        let attempts: u64 = arm.attempts.iter().sum();
        let cells = [
            arm.requests.to_string(),
            attempts.to_string(),
            s.retries.to_string(),
            s.retries_refused.to_string(),
            s.hedges.to_string(),
            s.probes.to_string(),
            s.trips.to_string(),
            format!("{:.1}", arm.endpoints_per_client),
        ];
        row(out, w, &arm.name, &cells, 9);
    }
    out.push_str("(refused: retries the budget denied; probes: load probes a probing balancer\n");
    out.push_str(" sent; trips: endpoints marked dead by accrual; endpoints: distinct endpoints\n");
    out.push_str(" each client sent to)\n");
}

fn share_table(out: &mut String, report: &Report) {
    let w = name_width(report);
    let cw = report
        .endpoints
        .iter()
        .map(String::len)
        .max()
        .unwrap_or(5)
        .max(5);
    out.push_str("share of attempts per endpoint, %\n");
    row(out, w, "arm", &report.endpoints, cw);
    for arm in &report.arms {
        let cells: Vec<String> = arm
            .shares()
            .iter()
            .map(|s| format!("{:.2}", s * 100.0))
            .collect();
        row(out, w, &arm.name, &cells, cw);
    }
}

fn share_summary(out: &mut String, report: &Report) {
    let w = name_width(report);
    let n = report.endpoints.len();
    let _ = writeln!(
        out,
        "share of attempts over {n} endpoints (fair share {})",
        percent(1.0 / n as f64)
    );
    let head = ["min", "median", "max", "unused"].map(String::from);
    row(out, w, "arm", &head, 8);
    for arm in &report.arms {
        let mut s = arm.shares();
        s.sort_by(f64::total_cmp);
        let unused = arm.attempts.iter().filter(|&&a| a == 0).count();
        let cells = [
            percent(s[0]),
            percent(s[n / 2]),
            percent(s[n - 1]),
            unused.to_string(),
        ];
        row(out, w, &arm.name, &cells, 8);
    }
}
