//! `tailguard load --sweep FROM..TO`: find a service's knee, the highest offered rate that
//! still meets the `--slo`, by short open-loop steps at rising rates.
//!
//! 1. Steps climb an even grid from FROM to TO ([`Search`]), each a whole run of `--duration`
//!    with the pacer at that rate (the first one after the pre-flight request).
//! 2. A step meets the objective when every `--slo` objective is met and the generator sent at
//!    least 90% of the offered rate (less means it could not offer the rate: too few
//!    connections for the latency, so the step says nothing about the service).
//! 3. The first step that misses ends the climb: the objective is clearly lost above it, and
//!    the rates past it would only pile up queues (a step past the knee can take its whole
//!    timeout per request).
//! 4. The knee lies between the last rate met and the first missed: steps bisect that gap
//!    until it is under 2.5% of the rate or four steps were spent on it.
//!
//! The search is pure (it is told each step's verdict, and says which rate to try next), so
//! tests drive it without a server. The report: one line per step as it ends, then the steps
//! in rate order and the knee; `--json` writes the same as data, `--html` the
//! throughput-latency chart.

use crate::run::{run, LoadError, Report};
use crate::Config;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::time::Duration;
use tailguard_report::interval::trim_float;
use tailguard_report::svg::{escape, Chart, Series};
use tailguard_report::Unit;

/// Bisection steps spent between the last rate met and the first missed, at most.
const MAX_REFINEMENTS: u32 = 4;
/// The bisection stops once the gap is under this fraction of the rate met.
const PRECISION: f64 = 0.025;
/// A step that sent less than this fraction of its rate could not offer it.
const OFFERED_AT_LEAST: f64 = 0.9;

/// Which rate to try next (module docs, steps 1, 3 and 4).
#[derive(Clone, Debug, PartialEq)]
pub struct Search {
    grid: Vec<f64>,
    next_grid: usize,
    best_met: Option<f64>,
    first_missed: Option<f64>,
    refinements: u32,
}

/// Where the knee lies once the search ends.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "knee")]
pub enum Knee {
    /// Even the lowest rate tried missed the objective.
    BelowRange {
        /// That rate.
        lowest: f64,
    },
    /// Every rate met it: the knee is at least the highest.
    AboveRange {
        /// The highest rate tried.
        highest: f64,
    },
    /// Between the highest rate met and the lowest missed above it.
    Between {
        /// The highest rate met: the capacity at the objective.
        met: f64,
        /// The lowest rate missed above it.
        missed: f64,
    },
}

impl Search {
    /// A climb over `steps` rates evenly from `from` to `to` (at least two steps).
    pub fn new(from: f64, to: f64, steps: usize) -> Search {
        let steps = steps.max(2);
        let grid = (0..steps)
            .map(|i| from + (to - from) * i as f64 / (steps - 1) as f64)
            .collect();
        Search {
            grid,
            next_grid: 0,
            best_met: None,
            first_missed: None,
            refinements: 0,
        }
    }

    /// The next rate to try, or `None` when the search is over.
    pub fn next(&self) -> Option<f64> {
        let Some(missed) = self.first_missed else {
            return self.grid.get(self.next_grid).copied();
        };
        let met = self.best_met?;
        let open = (missed - met) / met > PRECISION;
        (open && self.refinements < MAX_REFINEMENTS).then_some((met + missed) / 2.0)
    }

    /// The verdict of the step at `rate`.
    pub fn record(&mut self, rate: f64, met: bool) {
        if self.first_missed.is_some() {
            self.refinements += 1;
        } else {
            self.next_grid += 1;
        }
        if met {
            self.best_met = Some(self.best_met.map_or(rate, |b| b.max(rate)));
        } else {
            self.first_missed = Some(self.first_missed.map_or(rate, |m| m.min(rate)));
        }
    }

    /// Where the knee lies, from the steps so far.
    pub fn knee(&self) -> Knee {
        match (self.best_met, self.first_missed) {
            (Some(met), Some(missed)) => Knee::Between { met, missed },
            (Some(met), None) => Knee::AboveRange { highest: met },
            (None, _) => Knee::BelowRange {
                lowest: self.grid[0],
            },
        }
    }
}

/// One step's figures.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// Offered requests per second.
    pub rate: f64,
    /// Sent per second.
    pub achieved_rate: f64,
    /// Median latency, microseconds (`None`: nothing timed).
    pub p50_us: Option<u64>,
    /// 99th percentile latency, microseconds.
    pub p99_us: Option<u64>,
    /// 99.9th percentile latency, microseconds.
    pub p999_us: Option<u64>,
    /// Good over requests (`None`: no request).
    pub success_rate: Option<f64>,
    /// Requests.
    pub requests: u64,
    /// Every objective met, and at least 90% of the rate offered (module docs, step 2).
    pub met: bool,
    /// The objectives' verdicts, as the report prints them.
    pub verdicts: Vec<String>,
}

/// What a sweep found (`--sweep --json`; `tailguard report` reads it back).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SweepReport {
    /// The objectives, as given.
    pub slo: String,
    /// Each step's length, seconds.
    pub step_s: f64,
    /// The steps in the order they ran.
    pub steps: Vec<Step>,
    /// Where the knee lies.
    pub knee: Knee,
    /// Ctrl-C ended the sweep early.
    pub interrupted: bool,
}

/// The sweep's plan: the rates' range and grid.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sweep {
    /// The lowest rate.
    pub from: f64,
    /// The highest rate.
    pub to: f64,
    /// Rates on the climb's grid.
    pub steps: usize,
}

/// Runs the sweep: `cfg` is one step (its `--duration`, `--slo`, targets and connections);
/// progress goes to `out`.
///
/// # Errors
/// A step's [`LoadError`] (the first step's pre-flight, a bad configuration).
pub fn sweep(cfg: Config, plan: Sweep, out: &mut dyn Write) -> Result<SweepReport, LoadError> {
    let slo = cfg
        .slo
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let step_len = cfg.duration.unwrap_or(Duration::from_secs(10));
    let _ = writeln!(
        out,
        "# sweeping {} to {} req/s in steps of {} (at most {} on the grid, then up to {} to narrow the knee) against {slo}",
        trim_float(plan.from),
        trim_float(plan.to),
        tailguard_text::duration::format_duration(step_len),
        plan.steps.max(2),
        MAX_REFINEMENTS
    );
    let mut search = Search::new(plan.from, plan.to, plan.steps);
    let mut steps = Vec::new();
    let mut interrupted = false;
    while let Some(rate) = search.next() {
        let mut step = cfg.clone();
        step.rate = rate;
        step.quiet = true;
        step.final_report = false;
        step.json = None;
        step.hdr_log = None;
        step.metrics_addr = None;
        step.preflight = cfg.preflight && steps.is_empty();
        let mut sink = Vec::new();
        let report = run(step, &mut sink)?;
        let s = figures(rate, &report);
        let _ = writeln!(out, "{}", step_line(steps.len() + 1, &s, cfg.unit));
        let _ = out.flush();
        search.record(rate, s.met);
        steps.push(s);
        if report.interrupted {
            interrupted = true;
            break;
        }
    }
    let report = SweepReport {
        slo,
        step_s: step_len.as_secs_f64(),
        steps,
        knee: search.knee(),
        interrupted,
    };
    let _ = write!(out, "{}", text(&report, cfg.unit));
    Ok(report)
}

fn figures(rate: f64, report: &Report) -> Step {
    let t = &report.summary.totals;
    let offered = t.achieved_rate >= OFFERED_AT_LEAST * rate;
    Step {
        rate,
        achieved_rate: t.achieved_rate,
        p50_us: t.latency_us.map(|l| l.p50),
        p99_us: t.latency_us.map(|l| l.p99),
        p999_us: t.latency_us.map(|l| l.p999),
        success_rate: t.success_rate,
        requests: t.requests,
        met: offered && report.slo_met(),
        verdicts: report.verdicts.iter().map(ToString::to_string).collect(),
    }
}

fn show(v: Option<u64>, unit: Unit) -> String {
    v.map_or("-".to_owned(), |us| unit.format(us))
}

/// `# step 3: 600 req/s: sent 600.0/s, p50 10.1ms, p99 10.9ms, success 100.000%: met`.
fn step_line(n: usize, s: &Step, unit: Unit) -> String {
    let success = s
        .success_rate
        .map_or("-".to_owned(), |r| format!("{:.3}%", r * 100.0));
    let verdict = if s.met {
        "met".to_owned()
    } else if s.achieved_rate < OFFERED_AT_LEAST * s.rate {
        "MISSED (could not offer the rate)".to_owned()
    } else {
        "MISSED".to_owned()
    };
    format!(
        "# step {n}: {} req/s: sent {:.1}/s, p50 {}, p99 {}, success {success}: {verdict}",
        trim_float(s.rate),
        s.achieved_rate,
        show(s.p50_us, unit),
        show(s.p99_us, unit)
    )
}

/// The steps in rate order, then the knee.
pub fn text(r: &SweepReport, unit: Unit) -> String {
    let mut out = String::new();
    let mut steps: Vec<&Step> = r.steps.iter().collect();
    steps.sort_by(|a, b| a.rate.total_cmp(&b.rate));
    out.push_str(&format!(
        "{:>10} {:>10} {:>9} {:>9} {:>9} {:>9}  slo\n",
        "offered/s", "sent/s", "p50", "p99", "p99.9", "success"
    ));
    for s in steps {
        let success = s
            .success_rate
            .map_or("-".to_owned(), |r| format!("{:.2}%", r * 100.0));
        out.push_str(&format!(
            "{:>10} {:>10.1} {:>9} {:>9} {:>9} {:>9}  {}\n",
            trim_float(s.rate),
            s.achieved_rate,
            show(s.p50_us, unit),
            show(s.p99_us, unit),
            show(s.p999_us, unit),
            success,
            if s.met { "met" } else { "MISSED" }
        ));
    }
    let knee = match r.knee {
        Knee::Between { met, missed } => format!(
            "# knee: {} req/s is the highest rate that met {} (the lowest missed above it: {} req/s)",
            trim_float(met),
            r.slo,
            trim_float(missed)
        ),
        Knee::AboveRange { highest } => format!(
            "# knee: not reached: every rate met {}, up to {} req/s (sweep higher)",
            r.slo,
            trim_float(highest)
        ),
        Knee::BelowRange { lowest } => format!(
            "# knee: below the range: even {} req/s missed {} (sweep lower)",
            trim_float(lowest),
            r.slo
        ),
    };
    out.push_str(&knee);
    out.push('\n');
    if r.interrupted {
        out.push_str("# interrupted: the steps above are what was measured\n");
    }
    out
}

impl Knee {
    /// The highest rate known to meet the objective (`None` when even the lowest missed).
    pub fn capacity(&self) -> Option<f64> {
        match *self {
            Knee::Between { met, .. } => Some(met),
            Knee::AboveRange { highest } => Some(highest),
            Knee::BelowRange { .. } => None,
        }
    }
}

/// Draws each latency objective of `slo` on `chart` as a rule at its bound.
fn slo_rules(mut chart: Chart, slo: &str) -> Chart {
    for o in crate::slo::parse(slo).unwrap_or_default() {
        if let Some(us) = o.latency_bound_us() {
            chart = chart.rule(us, format!("SLO {o}"));
        }
    }
    chart
}

/// Reads a sweep's JSON; `None` when `text` is not one (another summary).
pub fn read(text: &str) -> Option<SweepReport> {
    serde_json::from_str::<SweepReport>(text).ok()
}

/// Several sweeps side by side: each one's table and knee, then each knee against the
/// first's (`b/a`), with a warning when their objectives differ.
pub fn compare_text(sweeps: &[(String, SweepReport)], unit: Unit) -> String {
    let mut out = String::new();
    for (name, r) in sweeps {
        out.push_str(&format!(
            "# {name}: --slo {} ({}s steps)\n",
            r.slo,
            trim_float(r.step_s)
        ));
        out.push_str(&text(r, unit));
        out.push('\n');
    }
    let Some((first, base)) = sweeps.first() else {
        return out;
    };
    for (name, r) in &sweeps[1..] {
        let line = match (base.knee.capacity(), r.knee.capacity()) {
            (Some(a), Some(b)) => {
                let bound = |k: &Knee| {
                    if matches!(k, Knee::AboveRange { .. }) {
                        " (at least)"
                    } else {
                        ""
                    }
                };
                format!(
                    "# knee {name}/{first}: {} req/s{} against {} req/s{}: {:.2}x",
                    trim_float(b),
                    bound(&r.knee),
                    trim_float(a),
                    bound(&base.knee),
                    b / a
                )
            }
            _ => format!(
                "# knee {name}/{first}: no ratio (a sweep found no rate that met its objective)"
            ),
        };
        out.push_str(&line);
        out.push('\n');
        if r.slo != base.slo {
            out.push_str(&format!(
                "# note: the objectives differ ({name}: {}; {first}: {}): the knees measure different things\n",
                r.slo, base.slo
            ));
        }
    }
    out
}

/// Several sweeps' curves on one page: p99 by offered rate on a log axis, one colour (and
/// every other one dashed) per sweep, the objectives' bounds drawn, and the sent rate.
pub fn compare_html(sweeps: &[(String, SweepReport)], title: &str) -> String {
    let mut chart = Chart::new("p99 latency by offered rate")
        .x_title("offered requests/s")
        .y_title("p99 latency")
        .y_log(true)
        .y_format(|us| Unit::Auto.format(us.max(0.0) as u64));
    let mut objectives: Vec<&str> = sweeps.iter().map(|(_, r)| r.slo.as_str()).collect();
    objectives.dedup();
    for slo in objectives {
        chart = slo_rules(chart, slo);
    }
    let mut sent = Chart::new("Sent by offered rate")
        .x_title("offered requests/s")
        .y_title("sent requests/s");
    for (i, (name, r)) in sweeps.iter().enumerate() {
        let mut steps: Vec<&Step> = r.steps.iter().collect();
        steps.sort_by(|a, b| a.rate.total_cmp(&b.rate));
        let p99 = steps
            .iter()
            .map(|s| (s.rate, s.p99_us.map_or(f64::NAN, |us| us as f64)))
            .collect();
        let mut series = Series::new(name.clone(), p99).color(i);
        let mut rate = Series::new(
            name.clone(),
            steps.iter().map(|s| (s.rate, s.achieved_rate)).collect(),
        )
        .color(i);
        if i % 2 == 1 {
            series = series.dashed();
            rate = rate.dashed();
        }
        chart = chart.series(series);
        sent = sent.series(rate);
    }
    page(title, &compare_text(sweeps, Unit::Auto), &[chart, sent])
}

/// A self-contained page: the title, the text report, the charts.
fn page(title: &str, table: &str, charts: &[Chart]) -> String {
    let svgs: String = charts.iter().map(Chart::svg).collect();
    format!(
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>{t}</title>\n<style>{style}</style>\n</head>\n<body>\n<h1>{t}</h1>\n\
         <pre>{table}</pre>\n<div class=\"charts\">\n{svgs}</div>\n</body>\n</html>\n",
        t = escape(title),
        style = tailguard_report::web::STYLE,
        table = escape(table),
    )
}

/// The throughput-latency curve as one self-contained HTML page.
pub fn html(r: &SweepReport, title: &str) -> String {
    let mut steps: Vec<&Step> = r.steps.iter().collect();
    steps.sort_by(|a, b| a.rate.total_cmp(&b.rate));
    let latency = |f: fn(&Step) -> Option<u64>| -> Vec<(f64, f64)> {
        steps
            .iter()
            .map(|s| (s.rate, f(s).map_or(f64::NAN, |us| us as f64)))
            .collect()
    };
    let mut chart = Chart::new("Latency by offered rate")
        .x_title("offered requests/s")
        .y_title("latency")
        .y_log(true)
        .y_format(|us| Unit::Auto.format(us.max(0.0) as u64))
        .series(Series::new("p99", latency(|s| s.p99_us)))
        .series(Series::new("p50", latency(|s| s.p50_us)).dashed())
        .series(Series::new("p99.9", latency(|s| s.p999_us)).dashed());
    chart = slo_rules(chart, &r.slo);
    let sent = Chart::new("Sent by offered rate")
        .x_title("offered requests/s")
        .y_title("sent requests/s")
        .series(Series::new(
            "sent",
            steps.iter().map(|s| (s.rate, s.achieved_rate)).collect(),
        ));
    page(title, &text(r, Unit::Auto), &[chart, sent])
}

#[cfg(test)]
mod tests;
