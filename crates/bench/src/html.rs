//! The HTML report of a bench run: one self-contained page (inline CSS and SVG, no script,
//! nothing fetched) that reads the same with or without JavaScript.
//!
//! The page holds the scenario (description, load, deadline, notes), then per group the
//! side-by-side table and the charts that explain it: latency over time (p99 solid, p50
//! dashed), the percentile curve on a nines axis (the simulator's prediction dashed), success
//! rate over time and requests per second over time. A chart without data is left out. The
//! load generator's own report of each arm closes the group, folded in a `<details>`.
//!
//! Latency axes turn logarithmic when the values span two decades or more, so a p50 of 300 µs
//! stays readable beside a 2 s stall.

use crate::results::{ArmRun, BenchReport, IntervalPoint, SecondPoint};
use std::fmt::Write as _;
use tailguard_report::svg::{escape, number, Chart, Series};
use tailguard_report::text::final_report;
use tailguard_report::Unit;

/// What the report adds to the live page's stylesheet ([`tailguard_report::web::STYLE`]).
const EXTRA_STYLE: &str = ".charts svg{border:1px solid #ddd}pre{font-size:12px}\
dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px}dt{font-weight:bold}dd{margin:0}";

/// One table column: its heading and how an arm fills it (`None`: nothing to show).
struct Column {
    title: &'static str,
    numeric: bool,
    cell: fn(&ArmRun) -> Option<String>,
}

/// Columns every table has.
const COLUMNS: [Column; 11] = [
    text_column("arm", |a| Some(a.name.clone())),
    text_column("via", |a| Some(a.via.clone())),
    num_column("p50", |a| Some(latency(a.latency_us.p50))),
    num_column("p95", |a| Some(latency(a.latency_us.p95))),
    num_column("p99", |a| Some(latency(a.latency_us.p99))),
    num_column("p99.9", |a| Some(latency(a.latency_us.p999))),
    num_column("max", |a| Some(latency(a.latency_us.max))),
    num_column("achieved req/s", |a| Some(rate(a.achieved_rate))),
    num_column("success", |a| Some(percent(a.success_rate))),
    num_column("within deadline", |a| Some(percent(a.within_deadline_rate))),
    num_column("requests", |a| Some(a.requests.to_string())),
];

/// Columns shown when at least one arm of the group has the figure.
const OPTIONAL: [Column; 6] = [
    num_column("proxy CPU/request", |a| {
        let cpu = a.proxy.as_ref()?.cpu_us_per_request?;
        Some(format!("{cpu:.1}µs"))
    }),
    num_column("of which user space", |a| {
        let cpu = a.proxy.as_ref()?.cpu_user_us_per_request?;
        Some(format!("{cpu:.1}µs"))
    }),
    num_column("proxy RSS", |a| {
        let kib = a.proxy.as_ref()?.rss_kib?;
        Some(format!("{:.1} MiB", kib as f64 / 1024.0))
    }),
    num_column("sim p50", |a| Some(latency(a.sim.as_ref()?.latency_us.p50))),
    num_column("sim p99", |a| Some(latency(a.sim.as_ref()?.latency_us.p99))),
    num_column("sim success", |a| {
        Some(percent(a.sim.as_ref()?.success_rate))
    }),
];

const fn text_column(title: &'static str, cell: fn(&ArmRun) -> Option<String>) -> Column {
    Column {
        title,
        numeric: false,
        cell,
    }
}

const fn num_column(title: &'static str, cell: fn(&ArmRun) -> Option<String>) -> Column {
    Column {
        title,
        numeric: true,
        cell,
    }
}

/// The whole report as one self-contained HTML page.
pub fn html(report: &BenchReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<style>{}{EXTRA_STYLE}</style>\n</head>\n<body>",
        escape(&title(report)),
        tailguard_report::web::STYLE
    );
    intro(&mut out, report);
    for group in report.groups() {
        let arms: Vec<&ArmRun> = report.group(group).collect();
        let _ = writeln!(out, "<section>\n<h2>{}</h2>", escape(group));
        table(&mut out, &arms, report.deadline_ms > 0.0);
        cards(&mut out, &arms);
        charts(&mut out, &arms, report.deadline_ms);
        load_reports(&mut out, &arms);
        out.push_str("</section>\n");
    }
    out.push_str("</body>\n</html>\n");
    out
}

/// Title, description, the run's facts and the notes.
fn intro(out: &mut String, report: &BenchReport) {
    let _ = writeln!(
        out,
        "<h1>{}</h1>\n<p>{}</p>",
        escape(&title(report)),
        escape(&report.description)
    );
    if report.interrupted {
        out.push_str("<p class=\"warn\">Interrupted: only the arms below were measured.</p>\n");
    }
    // No deadline and no known start are said so, not shown as `0µs` and 1970.
    let deadline = if report.deadline_ms > 0.0 {
        latency((report.deadline_ms * 1e3).round() as u64)
    } else {
        "none".to_owned()
    };
    let started = match report.started_unix_s {
        0 => "unknown".to_owned(),
        s => utc(s),
    };
    let load = if report.load.is_empty() {
        "not recorded"
    } else {
        &report.load
    };
    let _ = writeln!(
        out,
        "<dl>\n<dt>load</dt><dd>{}</dd>\n<dt>deadline</dt><dd>{deadline}</dd>\n\
         <dt>started</dt><dd>{started}</dd>\n<dt>measured by</dt><dd>{}</dd>\n</dl>",
        escape(load),
        escape(&report.tool)
    );
    if !report.notes.is_empty() {
        out.push_str("<h2>Notes</h2>\n<ul>\n");
        for note in &report.notes {
            let _ = writeln!(out, "<li>{}</li>", escape(note));
        }
        out.push_str("</ul>\n");
    }
}

/// The page's title: the report's own, or `tailguard bench: SCENARIO`.
fn title(report: &BenchReport) -> String {
    report
        .title
        .clone()
        .unwrap_or_else(|| format!("tailguard bench: {}", report.scenario))
}

/// The side-by-side table of one group (the "within deadline" column only with a deadline).
fn table(out: &mut String, arms: &[&ArmRun], deadline: bool) {
    let columns: Vec<&Column> = COLUMNS
        .iter()
        .filter(|c| deadline || c.title != "within deadline")
        .chain(
            OPTIONAL
                .iter()
                .filter(|c| arms.iter().any(|a| (c.cell)(a).is_some())),
        )
        .collect();
    out.push_str("<table>\n<thead><tr>");
    for c in &columns {
        let _ = write!(out, "<th>{}</th>", escape(c.title));
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    for arm in arms {
        out.push_str("<tr>");
        for c in &columns {
            let class = if c.numeric { " class=\"num\"" } else { "" };
            let cell = (c.cell)(arm).unwrap_or_else(|| "–".to_owned());
            let _ = write!(out, "<td{class}>{}</td>", escape(&cell));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody>\n</table>\n");
}

/// One card per arm, side by side, as the live page showed them: the whole run's figures as
/// tiles, then each second's latency, share of requests by backend, success and rate (the
/// seconds exist for runs made with the live figures).
fn cards(out: &mut String, arms: &[&ArmRun]) {
    let values = |f: fn(&SecondPoint) -> [Option<u64>; 3]| {
        arms.iter()
            .flat_map(move |a| a.seconds.iter().flat_map(f))
            .flatten()
            .filter(|&us| us > 0)
            .map(|us| us as f64)
    };
    let latencies = |s: &SecondPoint| [s.p50_us, s.p99_us, s.p999_us];
    let lo = values(latencies).fold(f64::INFINITY, f64::min);
    let hi = values(latencies).fold(0.0, f64::max);
    let top_rate = arms
        .iter()
        .flat_map(|a| a.seconds.iter().map(|s| s.rps))
        .fold(1.0, f64::max);
    out.push_str("<div class=\"arms\">\n");
    for arm in arms {
        let l = &arm.latency_us;
        let tile = |label: &str, value: String| {
            format!(
                "<div class=\"tile\"><div class=\"k\">{label}</div><div class=\"v\">{}</div></div>",
                escape(&value)
            )
        };
        let _ = writeln!(
            out,
            "<article><h3>{}</h3><div class=\"muted\">{}</div><div class=\"tiles\">{}{}{}{}{}</div>",
            escape(&arm.name),
            escape(&arm.via),
            tile("requests/s", rate(arm.achieved_rate)),
            tile("success", percent(arm.success_rate)),
            tile("p50", latency(l.p50)),
            tile("p99", latency(l.p99)),
            tile("p99.9", latency(l.p999)),
        );
        if !arm.seconds.is_empty() {
            out.push_str("<div class=\"charts\">\n");
            let latency_range = (hi > 0.0).then_some((lo, hi));
            for chart in second_charts(arm, latency_range, top_rate) {
                out.push_str(&chart.svg());
            }
            out.push_str("</div>\n");
        }
        out.push_str("</article>\n");
    }
    out.push_str("</div>\n");
}

/// The live page's four charts of one arm, from its seconds; latency and rate on the axes the
/// group shares.
fn second_charts(arm: &ArmRun, latency_range: Option<(f64, f64)>, top_rate: f64) -> [Chart; 4] {
    let over = |f: &dyn Fn(&SecondPoint) -> Option<f64>| -> Vec<(f64, f64)> {
        arm.seconds
            .iter()
            .map(|s| (s.at_s, f(s).unwrap_or(f64::NAN)))
            .collect()
    };
    let x_title = "seconds since the arm started";
    let mut lat = Chart::new(format!("{}: latency (10 s window)", arm.name))
        .x_title(x_title)
        .y_title("latency")
        .y_log(true)
        .y_format(latency_tick);
    if let Some((lo, hi)) = latency_range {
        lat = lat.y_range(lo, hi);
    }
    for (i, (name, f)) in [
        (
            "p50",
            (|s: &SecondPoint| s.p50_us) as fn(&SecondPoint) -> Option<u64>,
        ),
        ("p99", |s: &SecondPoint| s.p99_us),
        ("p99.9", |s: &SecondPoint| s.p999_us),
    ]
    .into_iter()
    .enumerate()
    {
        lat = lat.series(Series::new(name, over(&|s| f(s).map(|us| us as f64))).color(i));
    }
    let mut names: Vec<&str> = Vec::new();
    for s in &arm.seconds {
        for (n, _, _) in &s.backends {
            if !names.contains(&n.as_str()) {
                names.push(n);
            }
        }
    }
    let mut share = Chart::new(format!("{}: share of requests by backend", arm.name))
        .x_title(x_title)
        .y_title("%")
        .y_range(0.0, 100.0)
        .size(640.0, (36.0 + 18.0 * names.len() as f64 + 20.0).max(360.0));
    for (i, name) in names.iter().enumerate() {
        let points = over(&|s| {
            let all: u64 = s.backends.iter().map(|b| b.1).sum();
            let mine = s.backends.iter().find(|b| b.0 == *name).map_or(0, |b| b.1);
            (all > 0).then(|| 100.0 * mine as f64 / all as f64)
        });
        share = share.series(Series::new(*name, points).color(i));
    }
    let success = Chart::new(format!("{}: success", arm.name))
        .x_title(x_title)
        .y_title("%")
        .y_range(0.0, 100.0)
        .series(Series::new("success", over(&|s| s.success.map(|r| 100.0 * r))).color(2));
    let rps = Chart::new(format!("{}: requests per second", arm.name))
        .x_title(x_title)
        .y_title("req/s")
        .y_range(0.0, top_rate)
        .series(Series::new("req/s", over(&|s| Some(s.rps))));
    [lat, share, success, rps]
}

/// The group's charts, each left out when it has nothing to draw.
fn charts(out: &mut String, arms: &[&ArmRun], deadline_ms: f64) {
    let charts = [
        latency_over_time(arms, deadline_ms),
        percentile_curve(arms, deadline_ms),
        success_over_time(arms),
        rate_over_time(arms),
    ];
    out.push_str("<div class=\"charts\">\n");
    for chart in charts.iter().filter(|c| !c.is_empty()) {
        out.push_str(&chart.svg());
    }
    out.push_str("</div>\n");
}

/// p99 (solid) and p50 (dashed) per interval, one colour per arm.
fn latency_over_time(arms: &[&ArmRun], deadline_ms: f64) -> Chart {
    let mut chart = Chart::new("Latency over time (p99 solid, p50 dashed)");
    let mut values = Vec::new();
    for (i, arm) in arms.iter().enumerate() {
        let p99 = over_time(arm, |iv| iv.p99_us.map(|v| v as f64));
        let p50 = over_time(arm, |iv| iv.p50_us.map(|v| v as f64));
        values.extend(p99.iter().chain(&p50).map(|p| p.1));
        chart = chart
            .series(Series::new(format!("{} p99", arm.name), p99).color(i))
            .series(
                Series::new(format!("{} p50", arm.name), p50)
                    .color(i)
                    .dashed(),
            );
    }
    latency_axis(chart, &values, deadline_ms).x_title("seconds since the arm started")
}

/// The percentile curve per arm; the simulator's prediction dashed in the same colour.
fn percentile_curve(arms: &[&ArmRun], deadline_ms: f64) -> Chart {
    let mut chart = Chart::new("Latency by percentile").nines();
    let mut values = Vec::new();
    for (i, arm) in arms.iter().enumerate() {
        let curve: Vec<(f64, f64)> = arm.curve.iter().map(|&(p, us)| (p, us as f64)).collect();
        values.extend(curve.iter().map(|p| p.1));
        chart = chart.series(Series::new(arm.name.clone(), curve).color(i));
        if let Some(sim) = &arm.sim {
            let l = &sim.latency_us;
            // From the median: the simulator's min is not a figure the load shows.
            let predicted: Vec<(f64, f64)> = l.by_percent()[1..]
                .iter()
                .map(|&(p, us)| (p, us as f64))
                .collect();
            let name = format!("{} (sim)", arm.name);
            chart = chart.series(Series::new(name, predicted).color(i).dashed());
        }
    }
    latency_axis(chart, &values, deadline_ms).x_title("percentile")
}

/// Good responses over completed requests per interval, in percent.
fn success_over_time(arms: &[&ArmRun]) -> Chart {
    let mut chart = Chart::new("Success rate over time")
        .x_title("seconds since the arm started")
        .y_title("success")
        .y_range(0.0, 100.0)
        .y_format(|v| format!("{}%", number(v)));
    for (i, arm) in arms.iter().enumerate() {
        let points = over_time(arm, |iv| iv.success_rate.map(|r| r * 100.0));
        chart = chart.series(Series::new(arm.name.clone(), points).color(i));
    }
    chart
}

/// Completed requests over the interval's length.
fn rate_over_time(arms: &[&ArmRun]) -> Chart {
    let mut chart = Chart::new("Requests per second over time")
        .x_title("seconds since the arm started")
        .y_title("requests/s");
    for (i, arm) in arms.iter().enumerate() {
        let points = over_time(arm, |iv| {
            (iv.duration_s > 0.0).then(|| iv.requests as f64 / iv.duration_s)
        });
        chart = chart.series(Series::new(arm.name.clone(), points).color(i));
    }
    chart
}

/// One point per interval at its middle; an interval without a value is a gap. The drain
/// (intervals after the sending ended: only the last, slowest responses) is drawn apart, as
/// dots off the line, not as the line's last points.
fn over_time(arm: &ArmRun, value: fn(&IntervalPoint) -> Option<f64>) -> Vec<(f64, f64)> {
    let mut points = Vec::with_capacity(arm.intervals.len() + 1);
    for iv in &arm.intervals {
        if iv.drain {
            points.push((f64::NAN, f64::NAN));
        }
        points.push((middle(iv), value(iv).unwrap_or(f64::NAN)));
    }
    points
}

fn middle(iv: &IntervalPoint) -> f64 {
    iv.start_s + iv.duration_s / 2.0
}

/// A latency y axis (µs values, readable labels, the deadline as a rule), logarithmic when the
/// positive values span two decades or more.
fn latency_axis(chart: Chart, values: &[f64], deadline_ms: f64) -> Chart {
    let positive = values.iter().copied().filter(|v| *v > 0.0);
    let (lo, hi) = positive.fold((f64::INFINITY, 0.0_f64), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    });
    let mut chart = chart
        .y_title("latency")
        .y_log(hi >= 100.0 * lo)
        .y_format(latency_tick);
    if deadline_ms > 0.0 {
        let us = deadline_ms * 1e3;
        chart = chart.rule(us, format!("deadline {}", latency(us.round() as u64)));
    }
    chart
}

/// The load generator's final report of each arm, folded.
fn load_reports(out: &mut String, arms: &[&ArmRun]) {
    for arm in arms {
        slo_list(out, arm);
        name_table(out, arm);
        let _ = writeln!(
            out,
            "<details><summary>load report: {}</summary>\n<pre>{}</pre></details>",
            escape(&arm.name),
            escape(&final_report(&arm.load, Unit::Auto))
        );
    }
}

/// A load run's verdicts on its `--slo` objectives.
fn slo_list(out: &mut String, arm: &ArmRun) {
    if arm.load.slo.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "<h3>{}: objectives</h3>\n<ul class=\"slo\">",
        escape(&arm.name)
    );
    for v in &arm.load.slo {
        let (class, word) = if v.met {
            ("met", "met")
        } else {
            ("warn", "MISSED")
        };
        let _ = writeln!(
            out,
            "<li class=\"{class}\">{}: {word} (actual {})</li>",
            escape(&v.objective),
            escape(&v.actual)
        );
    }
    out.push_str("</ul>\n");
}

/// A load run's figures per request name (several URLs, or a request file), every name.
fn name_table(out: &mut String, arm: &ArmRun) {
    let names = &arm.load.per_name;
    if names.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "<h3>{}: per request name</h3>\n<table>\n<thead><tr><th>name</th><th>method</th><th>URL</th>\
         <th>requests</th><th>success</th><th>p50</th><th>p99</th><th>max</th></tr></thead>\n<tbody>",
        escape(&arm.name)
    );
    for n in names {
        let lat = |f: fn(&tailguard_histogram::Percentiles) -> u64| {
            n.latency_us
                .as_ref()
                .map_or("–".to_owned(), |p| latency(f(p)))
        };
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
            escape(&n.name),
            escape(&n.method),
            escape(&n.url),
            n.requests,
            n.success_rate.map_or("–".to_owned(), percent),
            lat(|p| p.p50),
            lat(|p| p.p99),
            lat(|p| p.max)
        );
    }
    out.push_str("</tbody>\n</table>\n");
}

/// `260µs`, `42.1ms`, `1.71s`: the same units as the text reports.
fn latency(us: u64) -> String {
    Unit::Auto.format(us)
}

/// A latency axis label: `2.5ms`, `1s`, `100µs` (round values need no trailing zeros).
fn latency_tick(us: f64) -> String {
    let text = latency(us.round() as u64);
    let digits = text.trim_end_matches(|c: char| c.is_alphabetic() || c == 'µ');
    let unit = &text[digits.len()..];
    if digits.contains('.') {
        format!(
            "{}{unit}",
            digits.trim_end_matches('0').trim_end_matches('.')
        )
    } else {
        text
    }
}

/// Requests per second: one decimal below 100, whole above.
fn rate(per_s: f64) -> String {
    if per_s < 100.0 {
        format!("{per_s:.1}")
    } else {
        format!("{per_s:.0}")
    }
}

/// A ratio as a percentage with two decimals; just short of 1 never rounds up to `100.00%`.
fn percent(ratio: f64) -> String {
    let s = format!("{:.2}%", ratio * 100.0);
    if ratio < 1.0 && s == "100.00%" {
        ">99.99%".to_owned()
    } else {
        s
    }
}

/// `2026-11-22 17:10:00 UTC` from seconds since the Unix epoch (proleptic Gregorian).
fn utc(unix_s: u64) -> String {
    let leap = |y: u64| (y.is_multiple_of(4) && !y.is_multiple_of(100)) || y.is_multiple_of(400);
    let (mut day, secs) = (unix_s / 86_400, unix_s % 86_400);
    let mut year = 1970;
    while day >= if leap(year) { 366 } else { 365 } {
        day -= if leap(year) { 366 } else { 365 };
        year += 1;
    }
    let february = if leap(year) { 29 } else { 28 };
    let lengths = [31, february, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    let mut month = 0;
    while day >= lengths[month] {
        day -= lengths[month];
        month += 1;
    }
    format!(
        "{year}-{:02}-{:02} {:02}:{:02}:{:02} UTC",
        month + 1,
        day + 1,
        secs / 3_600,
        secs / 60 % 60,
        secs % 60
    )
}

#[cfg(test)]
mod tests;
