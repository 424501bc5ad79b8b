//! `tailguard bench`: a scenario run live on loopback.
//!
//! The fleet runs in this process (`tailguard_serve`), each arm in turn on a fresh fleet so
//! scheduled faults line up with the arm's start. An arm is client-side round robin in the
//! load generator itself (the seeds' baseline), a `tailguard_proxy` with the arm's balancer,
//! retries and accrual, or a peer proxy (HAProxy, nginx) when installed. The load is
//! `tailguard_load`; the prediction is `tailguard_sim` on the same scenario. Results are
//! [`BenchReport`]s, rendered as a text table ([`table`]) or a self-contained HTML page
//! ([`html`]).
//!
//! Scenarios: every `sim` scenario (built-in `add-steps`, `slow-middle`, `gc-pause`, or a
//! YAML file), plus `overhead` (seed 003) and `nagle` (seed 001), which compare paths and
//! socket options rather than balancers.

pub mod console;
pub mod html;
pub mod results;
pub mod saved;
pub mod table;

mod compare;
mod live;
mod nagle;
mod overhead;
mod peers;

pub use console::Console;
pub use peers::Peer;
pub use results::{ArmRun, BenchReport, IntervalPoint, ProxyCost, SimPrediction};

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tailguard_report::Unit;
use tailguard_sim::Scenario;

/// Why a bench run could not start or finish.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// The scenario name or file is unusable.
    #[error(transparent)]
    Scenario(#[from] tailguard_sim::ScenarioError),
    /// A flag value is unusable.
    #[error("{0}")]
    Invalid(String),
    /// The fleet could not start.
    #[error("fleet: {0}")]
    Fleet(#[from] tailguard_serve::ServeError),
    /// The tailguard proxy could not start.
    #[error("proxy: {0}")]
    Proxy(#[from] tailguard_proxy::StartError),
    /// A peer proxy could not start.
    #[error("{0}")]
    Peer(String),
    /// The load generator refused or failed.
    #[error("load: {0}")]
    Load(#[from] tailguard_load::LoadError),
    /// A runtime, socket or file operation failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// How to run a scenario.
#[derive(Clone, Debug)]
pub struct Options {
    /// Arms to run by name (`all` for every arm); `None`: the scenario's seed comparison.
    pub arms: Option<Vec<String>>,
    /// Load length per arm (per phase and rate for `overhead` and `nagle`).
    pub duration: Option<Duration>,
    /// Interval report period (default 5 s, 1 s for `gc-pause`).
    pub interval: Option<Duration>,
    /// Latency units.
    pub unit: Unit,
    /// Run the simulator on the same arms and show its prediction.
    pub predict: bool,
    /// Draw a progress bar on stderr (when it is a terminal).
    pub progress: bool,
    /// `overhead`: run the tailguard arm as this binary's `proxy` subcommand in a child process
    /// (its own CPU and memory); `None`: in this process (CPU only).
    pub proxy_exe: Option<PathBuf>,
    /// `overhead`: include HAProxy and nginx when installed.
    pub peers: bool,
    /// `overhead`: gRPC ping calls on one HTTP/2 connection instead of HTTP/1.1 requests.
    pub grpc: bool,
    /// `nagle`: the rates to try (default 10, 100, 1,000 and 10,000 req/s).
    pub rates: Option<Vec<f64>>,
    /// `overhead`: interleaved rounds per phase, each path's median reported (default 3).
    pub rounds: Option<usize>,
    /// Set to stop between arms (Ctrl-C); the load generator stops itself on Ctrl-C.
    pub stop: Arc<AtomicBool>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            arms: None,
            duration: None,
            interval: None,
            unit: Unit::Auto,
            predict: true,
            progress: false,
            proxy_exe: None,
            peers: true,
            grpc: false,
            rates: None,
            rounds: None,
            stop: Arc::new(AtomicBool::new(false)),
        }
    }
}

/// The scenarios `bench` knows by name.
pub const BUILTINS: [(&str, &str); 6] = [
    (
        "add-steps",
        "seed 000: ten backends from 0 ms to 2 s; proxy vs client round robin",
    ),
    (
        "slow-middle",
        "seed 002: one of eleven backends x10 for 30 s; round robin vs least loaded vs peak EWMA",
    ),
    (
        "overhead",
        "seed 003: max rate direct / tailguard / HAProxy / nginx, then all at 75% of the lowest",
    ),
    (
        "nagle",
        "seed 001: latency at 10 to 10,000 req/s with TCP_NODELAY on and off",
    ),
    (
        "gc-pause",
        "seed 004: a backend paused 5 s of every 10 s; the intervals show what a mean hides",
    ),
    (
        "herd",
        "sim's scale scenario live: 1,000 backends at 50,000 req/s from one client (beyond this machine: `tailguard sim herd` is the model)",
    ),
];

/// A run in progress: the report so far and where to talk.
#[derive(Debug)]
pub(crate) struct Run<'a> {
    pub report: BenchReport,
    pub console: &'a Console,
    stop: Arc<AtomicBool>,
}

impl Run<'_> {
    /// True once Ctrl-C asked to stop.
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Adds a finished arm (and its note); true when the run must stop (Ctrl-C).
    pub(crate) fn record(&mut self, done: live::Outcome) -> bool {
        self.report.arms.push(done.arm);
        self.report.notes.extend(done.note);
        if done.interrupted || self.stopped() {
            self.report.interrupted = true;
        }
        self.report.interrupted
    }

    /// True (and the report marked interrupted) once Ctrl-C asked to stop: checked before
    /// each arm so none starts after the request.
    pub fn halt(&mut self) -> bool {
        if self.stopped() {
            self.report.interrupted = true;
        }
        self.report.interrupted
    }
}

/// Runs scenario `name` (built-in or a YAML file of the `sim` format) live, talking to
/// `console`. An interrupted run returns what it measured, with `interrupted` set.
///
/// # Errors
/// Unknown scenarios and arms, and a fleet, proxy or load that cannot start.
pub fn run(name: &str, opts: &Options, console: &Console) -> Result<BenchReport, BenchError> {
    let scenario = match name {
        "overhead" | "nagle" => None,
        _ => Some(Scenario::load(name).map_err(|e| match e {
            // Name bench's own built-ins, not the simulator's.
            tailguard_sim::ScenarioError::Unknown { name, .. } => {
                let names: Vec<&str> = BUILTINS.iter().map(|(n, _)| *n).collect();
                BenchError::Invalid(format!(
                    "`{name}` is neither a scenario file nor a built-in bench scenario (built-ins: {})",
                    names.join(", ")
                ))
            }
            other => BenchError::Scenario(other),
        })?),
    };
    let (description, title) = match &scenario {
        Some(s) => (s.description.clone(), s.name.clone()),
        None => (
            BUILTINS
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, d)| (*d).to_owned())
                .unwrap_or_default(),
            name.to_owned(),
        ),
    };
    let rts = live::Runtimes::new()?;
    let mut run = Run {
        report: BenchReport {
            format: results::FORMAT,
            tool: concat!("tailguard ", env!("CARGO_PKG_VERSION")).to_owned(),
            scenario: title,
            description,
            load: String::new(),
            deadline_ms: 1000.0,
            started_unix_s: epoch_secs(),
            arms: Vec::new(),
            notes: Vec::new(),
            interrupted: false,
        },
        console,
        stop: opts.stop.clone(),
    };
    let result = match &scenario {
        Some(s) => compare::run(s, opts, &rts, &mut run),
        None if name == "overhead" => overhead::run(opts, &rts, &mut run),
        None => nagle::run(opts, &rts, &mut run),
    };
    console.finish();
    match result {
        Ok(()) => Ok(run.report),
        // Something measured before the failure is still worth a report.
        Err(e) if !run.report.arms.is_empty() => {
            run.report.notes.push(format!("stopped early: {e}"));
            run.report.interrupted = true;
            Ok(run.report)
        }
        Err(e) => Err(e),
    }
}

/// Seconds since the Unix epoch: when the run started, for the report.
#[allow(clippy::disallowed_methods)] // A report timestamp, not timing.
fn epoch_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
