//! What a bench run measured, in the shape `--json` writes and `tailguard report` reads back.
//!
//! One [`BenchReport`] per run: the scenario, then one [`ArmRun`] per arm and phase, each with
//! the live figures (every request counted, latency from the scheduled send), the live
//! interval series, and, for balancer scenarios, the simulator's prediction for the same arm.

use serde::{Deserialize, Serialize};
use tailguard_histogram::{Histogram, Percentiles};
use tailguard_record::{IntervalSummary, RunSummary};

/// The version of the JSON layout; bumped when a field changes meaning.
pub const FORMAT: u32 = 1;

/// A whole bench run.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct BenchReport {
    /// Layout version ([`FORMAT`]).
    pub format: u32,
    /// The tool and version that measured it.
    pub tool: String,
    /// Scenario name.
    pub scenario: String,
    /// One line on what the scenario shows.
    pub description: String,
    /// The traffic, in words (open or closed loop, rate, duration).
    pub load: String,
    /// A good response within this many milliseconds counts as "within deadline".
    pub deadline_ms: f64,
    /// Seconds since the Unix epoch when the run started.
    pub started_unix_s: u64,
    /// One entry per arm and phase, in the order they ran.
    pub arms: Vec<ArmRun>,
    /// Things a reader must know (arms skipped, peers not installed, differences from the seed).
    pub notes: Vec<String>,
    /// True when Ctrl-C ended the run: the arms listed are the ones measured.
    pub interrupted: bool,
    /// The page's title, when not `tailguard bench: SCENARIO` (a saved `load` run's names its
    /// targets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
}

/// One arm (in one phase) measured live.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ArmRun {
    /// The arm's name (`baseline`, `proxy`, `p2c-peak-ewma`, `haproxy`...).
    pub name: String,
    /// Rows with the same group are compared with each other (e.g. `max rate`, `10 req/s`).
    pub group: String,
    /// How the traffic went, in words.
    pub via: String,
    /// Offered requests per second (0: closed loop).
    pub target_rate: f64,
    /// Requests per second achieved.
    pub achieved_rate: f64,
    /// Requests sent.
    pub requests: u64,
    /// Requests with a good response (1xx-4xx).
    pub good: u64,
    /// Good responses over requests.
    pub success_rate: f64,
    /// Good responses within the deadline over requests.
    pub within_deadline_rate: f64,
    /// Latency of every request (failures included), scheduled send to outcome, microseconds.
    pub latency_us: Percentiles,
    /// Mean latency, microseconds: kept to show what an average hides, never a headline.
    pub mean_us: f64,
    /// The percentile curve: `(percentile, microseconds)` pairs from p0 to the max.
    pub curve: Vec<(f64, u64)>,
    /// One point per interval.
    pub intervals: Vec<IntervalPoint>,
    /// What the proxy in the path cost, when one was measured.
    pub proxy: Option<ProxyCost>,
    /// The simulator's prediction for the same arm and load, when there is one.
    pub sim: Option<SimPrediction>,
    /// The load generator's own summary (status codes, errors, send lag, histogram table).
    pub load: RunSummary,
    /// Each second of the arm as the live page drew it (absent in results saved before it
    /// existed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub seconds: Vec<SecondPoint>,
    /// The overload figures, for an overload scenario.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overload: Option<OverloadRun>,
}

/// One second of an arm, as the live page draws it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SecondPoint {
    /// When the second ended, seconds since the arm started.
    pub at_s: f64,
    /// Requests that ended in the second, per second.
    pub rps: f64,
    /// Good over requests that ended in the second (`null`: none ended).
    pub success: Option<f64>,
    /// Percentiles over the ten seconds that end with this one, microseconds (`null`: no
    /// request in them).
    pub p50_us: Option<u64>,
    /// See `p50_us`.
    pub p99_us: Option<u64>,
    /// See `p50_us`.
    pub p999_us: Option<u64>,
    /// Requests each backend received in the second: `[name, requests, failed]` (a backend
    /// that received none is left out).
    pub backends: Vec<(String, u64, u64)>,
}

impl From<&tailguard_record::live::Sample> for SecondPoint {
    fn from(s: &tailguard_record::live::Sample) -> Self {
        SecondPoint {
            at_s: s.at_ms as f64 / 1e3,
            rps: s.rps,
            success: s.success,
            p50_us: s.p50_us,
            p99_us: s.p99_us,
            p999_us: s.p999_us,
            backends: s
                .endpoints
                .iter()
                .map(|e| (e.addr.to_string(), e.attempts.into(), e.failures.into()))
                .collect(),
        }
    }
}

/// One interval of one arm.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct IntervalPoint {
    /// Seconds from the arm's start to the interval's start.
    pub start_s: f64,
    /// Interval length, seconds.
    pub duration_s: f64,
    /// Requests completed in the interval.
    pub requests: u64,
    /// Good over completed; `None` when nothing completed.
    pub success_rate: Option<f64>,
    /// Median latency, microseconds; `None` when nothing was timed.
    pub p50_us: Option<u64>,
    /// 99th percentile latency, microseconds; `None` when nothing was timed.
    pub p99_us: Option<u64>,
    /// Largest latency, microseconds; `None` when nothing was timed.
    pub max_us: Option<u64>,
    /// The interval began after the sending ended: only the last responses (a different
    /// population, drawn apart from the line).
    #[serde(default)]
    pub drain: bool,
}

impl IntervalPoint {
    /// The points of a load run's intervals, the drain marked.
    pub fn of_run(run: &tailguard_record::RunSummary) -> Vec<IntervalPoint> {
        let open = run.arrivals != "closed" && run.send_phase_s > 0.0;
        run.intervals
            .iter()
            .map(|iv| IntervalPoint {
                drain: open && iv.start_s >= run.send_phase_s - 1e-6,
                ..IntervalPoint::from(iv)
            })
            .collect()
    }
}

/// CPU and memory of the proxy process or threads during an arm.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ProxyCost {
    /// Proxy CPU (user + system) per request, microseconds.
    pub cpu_us_per_request: Option<f64>,
    /// The user-space part of `cpu_us_per_request` (the rest is the kernel's: system calls and,
    /// on loopback, the receiving side's TCP stack). Absent in results saved before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_user_us_per_request: Option<f64>,
    /// Resident memory at the end of the arm, KiB (a separate process only).
    pub rss_kib: Option<u64>,
}

/// What `tailguard sim` predicts for an arm.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SimPrediction {
    /// Latency percentiles, microseconds.
    pub latency_us: Percentiles,
    /// Requests per second.
    pub achieved_rate: f64,
    /// Good over requests.
    pub success_rate: f64,
    /// Good within the deadline over requests.
    pub within_deadline_rate: f64,
    /// The overload figures, for an overload scenario (against the scenario's nominal
    /// capacity and unloaded p99).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overload: Option<OverloadRun>,
}

/// An arm's figures under overload (issue 48): measured against a capacity and an unloaded
/// p99 (live: measured in the same run, closed loop, direct), over the seconds offered more.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct OverloadRun {
    /// What the backends serve, requests per second.
    pub capacity: f64,
    /// Their p99 unloaded, microseconds.
    pub unloaded_p99_us: u64,
    /// The seconds offered over capacity: `from_s..to_s`.
    pub from_s: usize,
    /// See `from_s`.
    pub to_s: usize,
    /// Good answers within the deadline per second during the overload, over capacity.
    pub goodput_ratio: f64,
    /// Critical requests that ended during the overload answered well within the deadline.
    pub critical_success: f64,
    /// Seconds after the overload until the p99 of the next five seconds together is within
    /// twice the unloaded p99 ([`tailguard_sim::results::recovery`]) (`null`: never in the run).
    pub recovery_s: Option<usize>,
    /// The p99 of the requests admitted (not refused) that ended during the overload, µs.
    pub admitted_p99_us: u64,
    /// Requests refused after the recovery (after the overload when there was none).
    #[serde(default)]
    pub refused_after: u64,
}

impl OverloadRun {
    /// The figures of `timeline` against `o` over `window`.
    pub fn of(
        timeline: &[tailguard_sim::Second],
        o: &tailguard_sim::Overload,
        window: (usize, usize),
    ) -> Self {
        let f = tailguard_sim::results::overload_figures(timeline, o, window);
        OverloadRun {
            capacity: o.capacity,
            unloaded_p99_us: tailguard_histogram::duration_us(o.unloaded_p99),
            from_s: window.0,
            to_s: window.1,
            goodput_ratio: f.goodput_ratio,
            critical_success: f.critical_success,
            recovery_s: f.recovery_s,
            admitted_p99_us: tailguard_histogram::duration_us(f.admitted_p99),
            refused_after: f.refused_after,
        }
    }
}

impl From<&IntervalSummary> for IntervalPoint {
    /// The load generator's interval (its percentiles leave fast failures out).
    fn from(iv: &IntervalSummary) -> Self {
        IntervalPoint {
            start_s: iv.start_s,
            duration_s: iv.duration_s,
            requests: iv.totals.requests,
            success_rate: iv.totals.success_rate,
            p50_us: iv.totals.latency_us.map(|l| l.p50),
            p99_us: iv.totals.latency_us.map(|l| l.p99),
            max_us: iv.totals.latency_us.map(|l| l.max),
            drain: false,
        }
    }
}

/// The percentiles a curve is drawn through: nines from p0 to p99.999, then the max.
pub fn curve(h: &Histogram) -> Vec<(f64, u64)> {
    if h.is_empty() {
        return Vec::new();
    }
    let mut points = Vec::new();
    for q in [
        0.0, 10.0, 25.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95, 99.99, 99.999,
    ] {
        points.push((q, h.quantile_us(q / 100.0)));
    }
    points.push((100.0, h.max_us()));
    points
}

impl BenchReport {
    /// The arms of `group`, in run order.
    pub fn group<'a>(&'a self, group: &str) -> impl Iterator<Item = &'a ArmRun> + 'a {
        let group = group.to_owned();
        self.arms.iter().filter(move |a| a.group == group)
    }

    /// The groups in the order they first appear.
    pub fn groups(&self) -> Vec<&str> {
        let mut seen: Vec<&str> = Vec::new();
        for a in &self.arms {
            if !seen.contains(&a.group.as_str()) {
                seen.push(&a.group);
            }
        }
        seen
    }

    /// The arm named `name` (the first one, if several phases share the name).
    pub fn arm(&self, name: &str) -> Option<&ArmRun> {
        self.arms.iter().find(|a| a.name == name)
    }
}
