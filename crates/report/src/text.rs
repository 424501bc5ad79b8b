//! The final report of a run: totals, percentiles side by side, histogram, codes, errors.

use crate::interval::trim_float;
use crate::Unit;
use std::fmt::Write as _;
use tailguard_histogram::Percentiles;
use tailguard_record::RunSummary;

/// Renders the whole end-of-run report.
pub fn final_report(run: &RunSummary, unit: Unit) -> String {
    let mut out = String::new();
    totals(&mut out, run);
    if run.percentiles.is_empty() {
        percentiles(
            &mut out,
            run.totals.latency_us.as_ref(),
            run.totals.service_time_us.as_ref(),
            unit,
        );
    } else {
        chosen_percentiles(&mut out, run, unit);
    }
    histogram(&mut out, &run.histogram, unit);
    codes(&mut out, run);
    messages(&mut out, run, unit);
    per_name(&mut out, run, unit);
    if let Some(r) = &run.records {
        let dropped = match r.dropped {
            0 => String::new(),
            n => format!(", {n} DROPPED (the writer fell behind; not in the file)"),
        };
        let error = r
            .error
            .as_ref()
            .map_or(String::new(), |e| format!("; writing stopped: {e}"));
        let _ = writeln!(
            out,
            "# per-request records: {} written to {}{dropped}{error}",
            r.written, r.path
        );
    }
    for v in &run.slo {
        let _ = writeln!(out, "{v}");
    }
    out
}

/// The most requests a text report lists by name; the rest are summed in one line.
pub const NAMES_SHOWN: usize = 20;

/// Figures per request name (a run of several URLs or a request file): the busiest
/// [`NAMES_SHOWN`], then the others summed.
fn per_name(out: &mut String, run: &RunSummary, unit: Unit) {
    if run.per_name.is_empty() {
        return;
    }
    let mut names: Vec<&tailguard_record::NameSummary> = run.per_name.iter().collect();
    names.sort_by(|a, b| {
        b.requests
            .cmp(&a.requests)
            .then_with(|| a.name.cmp(&b.name))
    });
    let _ = writeln!(
        out,
        "# per request name ({} names):\n{:>10} {:>9} {:>10} {:>10} {:>10}  NAME",
        names.len(),
        "REQUESTS",
        "SUCCESS",
        "P50",
        "P99",
        "MAX"
    );
    let pct = |n: &tailguard_record::NameSummary| {
        n.success_rate
            .map_or("-".to_string(), |r| format!("{:.2}%", r * 100.0))
    };
    let lat = |p: Option<&Percentiles>, f: fn(&Percentiles) -> u64| {
        p.map_or("-".to_string(), |p| unit.format(f(p)))
    };
    for n in names.iter().take(NAMES_SHOWN) {
        let p = n.latency_us.as_ref();
        let _ = writeln!(
            out,
            "{:>10} {:>9} {:>10} {:>10} {:>10}  {}",
            n.requests,
            pct(n),
            lat(p, |p| p.p50),
            lat(p, |p| p.p99),
            lat(p, |p| p.max),
            n.name
        );
    }
    let rest = &names[names.len().min(NAMES_SHOWN)..];
    if !rest.is_empty() {
        let requests: u64 = rest.iter().map(|n| n.requests).sum();
        let good: u64 = rest.iter().map(|n| n.good).sum();
        let success = match requests {
            0 => "-".to_string(),
            r => format!("{:.2}%", good as f64 / r as f64 * 100.0),
        };
        let _ = writeln!(
            out,
            "{requests:>10} {success:>9} {:>10} {:>10} {:>10}  ({} other names: see the JSON)",
            "",
            "",
            "",
            rest.len()
        );
    }
}

fn totals(out: &mut String, run: &RunSummary) {
    let t = &run.totals;
    let success = t
        .success_rate
        .map_or("-".to_string(), |r| format!("{:.3}%", r * 100.0));
    let _ = writeln!(
        out,
        "# {} requests in {}s: good {}, bad {}, failed {} (success {success})",
        t.requests,
        trim_float(run.duration_s),
        t.good,
        t.bad,
        t.failed,
    );
    let target = if t.target_rate > 0.0 {
        let drain = run.duration_s - run.send_phase_s;
        let phases = if run.send_phase_s > 0.0 && drain > 0.0005 {
            format!(
                " over {}s of sending (then {}s for the last responses)",
                trim_float(run.send_phase_s),
                trim_float(drain)
            )
        } else {
            String::new()
        };
        format!(
            "target {}/s, achieved {:.1}/s ({:.1}%){phases}",
            trim_float(t.target_rate),
            t.achieved_rate,
            t.achieved_rate / t.target_rate * 100.0
        )
    } else {
        format!("achieved {:.1}/s (closed loop)", t.achieved_rate)
    };
    let _ = writeln!(
        out,
        "# rate: {target}; sent late (>1ms): {}; send lag p99 {}",
        t.late_sends,
        t.send_lag_us
            .map_or("-".to_string(), |l| Unit::Auto.format(l.p99))
    );
    if t.resent > 0 {
        let _ = writeln!(
            out,
            "# of the requests, {} were failed ones sent again (--retry-after)",
            t.resent
        );
    }
    if run.interrupted {
        let planned = run.planned_duration_s.map_or(String::new(), |d| {
            format!(" of a planned {}s", trim_float(d))
        });
        let _ = writeln!(
            out,
            "# interrupted after {}s{planned}: the figures cover that part only",
            trim_float(run.duration_s)
        );
    }
    if run.unsent > 0 {
        let _ = writeln!(
            out,
            "# unsent: {} requests were due but not sent when the run stopped",
            run.unsent
        );
    }
    if let Some(cpu) = run.client_cpu_us_per_request {
        let _ = writeln!(out, "# client CPU: {cpu:.2}µs per request");
    }
}

/// Latency and service time side by side; `-` where nothing was timed.
fn percentiles(
    out: &mut String,
    latency: Option<&Percentiles>,
    service: Option<&Percentiles>,
    unit: Unit,
) {
    let _ = writeln!(out, "{:>8} {:>10} {:>12}", "", "latency", "service time");
    let value = |p: Option<&Percentiles>, name: &str| {
        p.and_then(|p| p.get(name))
            .map_or("-".to_string(), |v| unit.format(v))
    };
    for name in ["min", "p50", "p90", "p95", "p99", "p999", "p9999", "max"] {
        let _ = writeln!(
            out,
            "{:>8} {:>10} {:>12}",
            label(name),
            value(latency, name),
            value(service, name)
        );
    }
}

/// The percentiles `--percentiles` asked for, between the minimum and the maximum.
fn chosen_percentiles(out: &mut String, run: &RunSummary, unit: Unit) {
    let _ = writeln!(out, "{:>8} {:>10} {:>12}", "", "latency", "service time");
    let show = |v: Option<u64>| v.map_or("-".to_string(), |v| unit.format(v));
    let (l, s) = (
        run.totals.latency_us.as_ref(),
        run.totals.service_time_us.as_ref(),
    );
    let row = |out: &mut String, name: &str, a: Option<u64>, b: Option<u64>| {
        let _ = writeln!(out, "{name:>8} {:>10} {:>12}", show(a), show(b));
    };
    row(out, "min", l.map(|p| p.min), s.map(|p| p.min));
    for q in &run.percentiles {
        row(out, &q.name(), q.latency_us, q.service_time_us);
    }
    row(out, "max", l.map(|p| p.max), s.map(|p| p.max));
}

fn label(name: &str) -> &str {
    match name {
        "p999" => "p99.9",
        "p9999" => "p99.99",
        other => other,
    }
}

fn histogram(out: &mut String, rows: &[[u64; 3]], unit: Unit) {
    let _ = writeln!(out, "{:>10} {:>10} {:>10}", "FROM", "TO", "#REQUESTS");
    for [from, to, count] in rows {
        let _ = writeln!(
            out,
            "{:>10} {:>10} {:>10}",
            unit.format(*from),
            unit.format(*to),
            count
        );
    }
}

/// Streaming calls' messages: counts, then each message's latency and a server stream's first.
fn messages(out: &mut String, run: &RunSummary, unit: Unit) {
    let Some(m) = &run.totals.messages else {
        return;
    };
    let _ = writeln!(out, "# messages: sent {}, received {}", m.sent, m.received);
    let line = |out: &mut String, name: &str, p: &Percentiles| {
        let _ = writeln!(
            out,
            "# {name}: p50 {} p90 {} p99 {} p99.9 {} max {}",
            unit.format(p.p50),
            unit.format(p.p90),
            unit.format(p.p99),
            unit.format(p.p999),
            unit.format(p.max)
        );
    };
    if let Some(p) = &m.latency_us {
        line(out, "per message", p);
    }
    if let Some(p) = &m.first_message_us {
        line(out, "first message", p);
    }
}

fn codes(out: &mut String, run: &RunSummary) {
    let join = |m: &std::collections::BTreeMap<String, u64>| {
        m.iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let t = &run.totals;
    if !t.status_codes.is_empty() {
        let _ = writeln!(out, "# status codes: {}", join(&t.status_codes));
    }
    if !t.errors.is_empty() {
        let _ = writeln!(out, "# errors: {}", join(&t.errors));
    }
    if !t.failed_checks.is_empty() {
        let _ = writeln!(
            out,
            "# failed checks (counted bad): {}",
            join(&t.failed_checks)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tailguard_record::Totals;

    #[test]
    fn report_shows_totals_side_by_side_percentiles_and_codes() {
        let mut run = RunSummary {
            duration_s: 10.0,
            histogram: vec![[0, 512, 3], [512, 1024, 7]],
            client_cpu_us_per_request: Some(4.25),
            totals: Totals {
                target_rate: 1000.0,
                achieved_rate: 999.5,
                requests: 10,
                good: 9,
                failed: 1,
                success_rate: Some(0.9),
                ..Totals::default()
            },
            ..RunSummary::default()
        };
        run.totals.latency_us = Some(Percentiles {
            p999: 1_500,
            ..Percentiles::default()
        });
        run.totals.service_time_us = Some(Percentiles {
            p999: 700,
            ..Percentiles::default()
        });
        run.totals.status_codes.insert("200".into(), 9);
        run.totals.errors.insert("timeout".into(), 1);
        let text = final_report(&run, Unit::Auto);
        assert!(text.contains("# 10 requests in 10s: good 9, bad 0, failed 1 (success 90.000%)"));
        assert!(
            text.contains("target 1000/s, achieved 999.5/s (100.0%)"),
            "{text}"
        );
        assert!(text.contains("   p99.9     1.50ms        700µs"), "{text}");
        assert!(text.contains("     512µs     1.02ms          7"), "{text}");
        assert!(text.contains("# status codes: 200=9"));
        assert!(text.contains("# errors: timeout=1"));
        assert!(text.contains("# client CPU: 4.25µs per request"));
    }
}
