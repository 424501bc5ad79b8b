//! Service level objectives for CI: `--slo 'p99<=5ms,p999<=20ms,success>=99.9%'`.
//!
//! Each objective is `METRIC OP VALUE`. Metrics: the latency percentiles `min p50 p90 p95 p99
//! p999 p9999 max` (corrected latency, values with a unit: `us`, `ms`, `s`), any other
//! percentile `--percentiles` measures (`p98`, `p99.5`), `success` (good
//! responses over all requests, as a percentage or a fraction) and `rate` (achieved requests
//! per second). Operators: `<=`, `<`, `>=`, `>`. A run that misses any objective exits with
//! status 1.
//!
//! # Example
//! ```
//! use tailguard_load::slo;
//! let objectives = slo::parse("p99<=5ms, success>=99.9%").unwrap();
//! assert_eq!(objectives.len(), 2);
//! assert_eq!(objectives[0].to_string(), "p99<=5ms");
//! assert_eq!(slo::parse("p98<=5ms").unwrap()[0].percentile(), Some(98.0));
//! assert!(slo::parse("p100<=5ms").unwrap_err().to_string().contains("unknown metric \"p100\""));
//! ```

use std::fmt;
use tailguard_record::RunSummary;
use tailguard_report::Unit;

/// One objective.
#[derive(Clone, Debug, PartialEq)]
pub struct Objective {
    metric: Metric,
    op: Op,
    /// Microseconds for latency, a fraction for success, req/s for rate.
    threshold: f64,
    text: String,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Metric {
    /// One of the summary's own percentiles (`p99`, `p999`) or `min`/`max`.
    Latency(&'static str),
    /// Another percentile (`p98`, `p99.5`): one `--percentiles` measures.
    Quantile(f64),
    Success,
    Rate,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Op {
    Le,
    Lt,
    Ge,
    Gt,
}

/// A malformed `--slo` value.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SloError {
    /// No operator in an objective.
    #[error("bad objective {0:?}: expected METRIC<=VALUE (or <, >=, >)")]
    NoOperator(String),
    /// A metric name not in the list.
    #[error("bad objective: unknown metric {0:?} (use min, p50, p90, p95, p99, p999, p9999, max, another percentile such as p98 or p99.5 that --percentiles measures, success, rate)")]
    UnknownMetric(String),
    /// A value that does not parse for its metric.
    #[error("bad objective {objective:?}: {reason}")]
    BadValue {
        /// The objective text.
        objective: String,
        /// What is wrong with the value.
        reason: String,
    },
}

/// The verdict on one objective (in the run summary too: `slo` in the JSON).
pub use tailguard_record::SloVerdict as Verdict;

const LATENCY: [&str; 8] = ["min", "p50", "p90", "p95", "p99", "p999", "p9999", "max"];

/// Parses a comma-separated list of objectives.
pub fn parse(spec: &str) -> Result<Vec<Objective>, SloError> {
    spec.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(parse_one)
        .collect()
}

fn parse_one(text: &str) -> Result<Objective, SloError> {
    let (name, op, value) = split_op(text).ok_or_else(|| SloError::NoOperator(text.into()))?;
    let metric = match name.trim() {
        "success" => Metric::Success,
        "rate" => Metric::Rate,
        n => match LATENCY.iter().find(|m| **m == n) {
            Some(m) => Metric::Latency(m),
            None => quantile(n).ok_or_else(|| SloError::UnknownMetric(n.into()))?,
        },
    };
    let bad = |reason: String| SloError::BadValue {
        objective: text.into(),
        reason,
    };
    let value = value.trim();
    let threshold = match metric {
        Metric::Latency(_) | Metric::Quantile(_) => parse_latency_us(value).map_err(bad)?,
        Metric::Success => parse_fraction(value).map_err(bad)?,
        Metric::Rate => value
            .parse::<f64>()
            .map_err(|_| bad(format!("{value:?} is not a rate in req/s")))?,
    };
    Ok(Objective {
        metric,
        op,
        threshold,
        text: text.replace(' ', ""),
    })
}

/// `p98`, `p99.5`, `p99.9`: a percentile above 0 and below 100 (the summary's own are
/// spelled `p999` and `p9999`; `p99.9` is read as `p999`).
fn quantile(name: &str) -> Option<Metric> {
    let p: f64 = name.strip_prefix('p')?.parse().ok()?;
    if !(p > 0.0 && p < 100.0) {
        return None;
    }
    let own = [
        (50.0, "p50"),
        (90.0, "p90"),
        (95.0, "p95"),
        (99.0, "p99"),
        (99.9, "p999"),
        (99.99, "p9999"),
    ];
    Some(match own.iter().find(|(v, _)| (v - p).abs() < 1e-9) {
        Some((_, name)) => Metric::Latency(name),
        None => Metric::Quantile(p),
    })
}

fn split_op(text: &str) -> Option<(&str, Op, &str)> {
    for (sym, op) in [("<=", Op::Le), (">=", Op::Ge), ("<", Op::Lt), (">", Op::Gt)] {
        if let Some((l, r)) = text.split_once(sym) {
            return Some((l, op, r));
        }
    }
    None
}

fn parse_latency_us(v: &str) -> Result<f64, String> {
    let split = v
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(|| format!("{v:?} needs a unit (us, ms or s)"))?;
    let (num, unit) = v.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("{num:?} is not a number"))?;
    let scale = match unit.trim() {
        "us" | "µs" => 1.0,
        "ms" => 1e3,
        "s" => 1e6,
        u => return Err(format!("unknown unit {u:?} (use us, ms or s)")),
    };
    Ok(n * scale)
}

fn parse_fraction(v: &str) -> Result<f64, String> {
    let (num, pct) = match v.strip_suffix('%') {
        Some(n) => (n, true),
        None => (v, false),
    };
    let n: f64 = num
        .parse()
        .map_err(|_| format!("{v:?} is not a percentage"))?;
    let f = if pct { n / 100.0 } else { n };
    if (0.0..=1.0).contains(&f) {
        Ok(f)
    } else {
        Err(format!("{v:?} is not between 0% and 100%"))
    }
}

/// The report line: `# SLO p99<=5ms: met (actual 3.2ms)`.
impl Objective {
    /// A latency objective's bound, microseconds (`p99<=5ms`: 5,000); `None` for success and
    /// rate objectives.
    pub fn latency_bound_us(&self) -> Option<f64> {
        matches!(self.metric, Metric::Latency(_) | Metric::Quantile(_)).then_some(self.threshold)
    }

    /// The percentile this objective needs measured by `--percentiles` (`p98<=5ms`: 98), if
    /// it is not one the summary always has.
    pub fn percentile(&self) -> Option<f64> {
        match self.metric {
            Metric::Quantile(p) => Some(p),
            _ => None,
        }
    }
}

impl fmt::Display for Objective {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl Objective {
    /// Judges the objective against a finished run.
    pub fn judge(&self, run: &RunSummary) -> Verdict {
        let t = &run.totals;
        // Nothing measured (no request, or none timed: every one failed before an answer),
        // so nothing was met.
        let measured = match self.metric {
            Metric::Latency(name) => t
                .latency_us
                .and_then(|l| l.get(name))
                .map(|us| (us as f64, Unit::Auto.format(us))),
            Metric::Quantile(p) => run
                .percentiles
                .iter()
                .find(|q| (q.percentile - p).abs() < 1e-9)
                .and_then(|q| q.latency_us)
                .map(|us| (us as f64, Unit::Auto.format(us))),
            Metric::Success => t.success_rate.map(|r| (r, format!("{:.3}%", r * 100.0))),
            Metric::Rate => {
                (t.requests > 0).then(|| (t.achieved_rate, format!("{:.1}/s", t.achieved_rate)))
            }
        };
        let Some((actual, shown)) = measured else {
            return Verdict {
                objective: self.text.clone(),
                actual: "no data".to_owned(),
                met: false,
            };
        };
        // `99.9%` parses to 0.9990000000000001: allow float rounding on the inclusive bounds.
        let eps = 1e-9 * self.threshold.abs().max(1.0);
        let met = match self.op {
            Op::Le => actual <= self.threshold + eps,
            Op::Lt => actual < self.threshold,
            Op::Ge => actual >= self.threshold - eps,
            Op::Gt => actual > self.threshold,
        };
        Verdict {
            objective: self.text.clone(),
            actual: shown,
            met,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(p99_us: u64, success: f64) -> RunSummary {
        let mut r = RunSummary::default();
        r.totals.latency_us = Some(tailguard_histogram::Percentiles {
            p99: p99_us,
            ..Default::default()
        });
        r.totals.success_rate = Some(success);
        r.totals.achieved_rate = 1000.0;
        r.totals.requests = 1000;
        r
    }

    #[test]
    fn any_percentile_can_be_an_objective_when_it_is_measured() {
        let o = &parse("p98<=5ms,p99.9<=9ms,p75<1s").unwrap();
        assert_eq!(o[0].percentile(), Some(98.0));
        assert_eq!(o[1].percentile(), None, "p99.9 is the summary's own p999");
        assert_eq!(o[2].percentile(), Some(75.0));
        let mut r = run(4_000, 1.0);
        r.percentiles = vec![tailguard_record::Quantile {
            percentile: 98.0,
            latency_us: Some(4_500),
            service_time_us: Some(4_000),
        }];
        let v = o[0].judge(&r);
        assert!(v.met, "{v}");
        assert_eq!(v.actual, "4.50ms");
        assert_eq!(o[2].judge(&r).actual, "no data");
        for bad in ["p0<=1ms", "p100<=1ms", "pfoo<=1ms", "p-5<=1ms"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn an_objective_without_samples_is_missed() {
        let mut empty = run(0, 1.0);
        empty.totals.requests = 0;
        empty.totals.latency_us = None;
        empty.totals.success_rate = None;
        for spec in ["p99<=1ms", "success>=99.9%", "rate>=0"] {
            let v = parse(spec).unwrap()[0].judge(&empty);
            assert!(!v.met, "{spec}");
            assert_eq!(v.actual, "no data");
        }
        // Every request failed before an answer: a success rate (0%), but no latency.
        let mut failed = run(0, 0.0);
        failed.totals.latency_us = None;
        let v = parse("p99<=5ms").unwrap()[0].judge(&failed);
        assert!(!v.met);
        assert_eq!(v.to_string(), "# SLO p99<=5ms: MISSED (actual no data)");
        assert!(!parse("success>=99%").unwrap()[0].judge(&failed).met);
    }

    #[test]
    fn judges_latency_success_and_rate() {
        let objs = parse("p99<=5ms,success>=99.9%,rate>990").unwrap();
        let verdicts: Vec<bool> = objs
            .iter()
            .map(|o| o.judge(&run(5_000, 0.999)).met)
            .collect();
        assert_eq!(verdicts, [true, true, true]);
        let missed = objs[0].judge(&run(5_001, 1.0));
        assert!(!missed.met);
        assert_eq!(missed.actual, "5.00ms");
        assert!(!objs[1].judge(&run(1, 0.998)).met);
        assert!(parse("p50<250us").unwrap()[0].judge(&run(0, 1.0)).met);
        assert!(parse("success>=0.5").unwrap()[0].judge(&run(0, 0.5)).met);
    }

    #[test]
    fn errors_name_the_broken_part() {
        let cases = [
            ("p99=5ms", "expected METRIC<=VALUE"),
            ("p99<=5", "needs a unit"),
            ("p99<=5min", "unknown unit \"min\""),
            ("success>=120%", "not between 0% and 100%"),
            ("rate>fast", "not a rate"),
            ("latency<1s", "unknown metric \"latency\""),
        ];
        for (spec, want) in cases {
            let err = parse(spec).unwrap_err().to_string();
            assert!(err.contains(want), "{spec}: {err}");
        }
    }
}
