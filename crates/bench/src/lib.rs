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

mod board;
pub mod console;
pub mod html;
pub mod results;
pub mod saved;
pub mod table;

mod compare;
mod error;
mod live;
mod nagle;
mod options;
mod overhead;
mod peers;
mod pin;
mod run;

pub use console::Console;
pub use error::BenchError;
pub use options::{Options, LIVE_ADDR};
pub use peers::Peer;
pub use results::{ArmRun, BenchReport, IntervalPoint, ProxyCost, SimPrediction};

use run::Run;
use tailguard_sim::Scenario;

/// The Cargo profile that built this binary (`release`, `dist`, `debug`, ...): `dist` (one
/// codegen unit, fat LTO) built the published figures; `release` builds several times faster.
pub const BUILD_PROFILE: &str = env!("TAILGUARD_BUILD_PROFILE");

/// Whether LLVM's profile-guided optimisation built this binary (`scripts/build-pgo.sh`).
pub const BUILD_PGO: bool = !env!("TAILGUARD_BUILD_PGO").is_empty();

/// The build, as `tool` in a report says it: `release`, `dist`, or `dist, PGO`.
fn build_name() -> String {
    match BUILD_PGO {
        true => format!("{BUILD_PROFILE}, PGO"),
        false => BUILD_PROFILE.to_owned(),
    }
}

/// The line a run starts with: which profile built the binary, and what that means for its
/// figures.
fn build_line() -> String {
    if BUILD_PGO {
        format!(
            "# built with the {BUILD_PROFILE} profile and profile-guided optimisation \
             (scripts/build-pgo.sh); the published figures come from the dist profile without it"
        )
    } else if BUILD_PROFILE == "dist" {
        "# built with the dist profile (one codegen unit, fat LTO), as the published figures".into()
    } else {
        format!(
            "# built with the {BUILD_PROFILE} profile; the published figures come from \
             `cargo build --profile dist` (one codegen unit, fat LTO: about 4% less CPU per request in load)"
        )
    }
}

/// The scenarios `bench` knows by name.
pub const BUILTINS: [(&str, &str); 7] = [
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
        "overload",
        "issue 48: twice the capacity for 30 s, then half; no limit, a cap, the gradient limit, and it with criticality (capacity measured first)",
    ),
    (
        "herd",
        "sim's scale scenario live: 1,000 backends at 50,000 req/s from one client (beyond this machine: `tailguard sim herd` is the model)",
    ),
];

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
    if opts.pin && name != "overhead" {
        return Err(BenchError::Invalid(
            "--pin applies to the overhead scenario only".to_owned(),
        ));
    }
    // Before the runtimes start, so their threads inherit the load generator's CPUs.
    let pin = opts.pin.then(pin::Pin::split).transpose()?;
    let _restore = pin.as_ref().map(pin::Pin::rest_here).transpose()?;
    let board = board::Board::new(&title, &description);
    let mut rts = live::Runtimes::new(board, pin)?;
    if let Some(addr) = opts.live {
        let at = rts.serve_page(addr, opts.live_fallback)?;
        console.line(&format!("# live page: http://{at}/ (--no-live to skip)"));
    }
    console.line(&build_line());
    let mut run = Run {
        report: BenchReport {
            format: results::FORMAT,
            tool: format!(
                "tailguard {} ({} profile)",
                env!("CARGO_PKG_VERSION"),
                build_name()
            ),
            scenario: title,
            description,
            load: String::new(),
            deadline_ms: 1000.0,
            started_unix_s: epoch_secs(),
            arms: Vec::new(),
            notes: Vec::new(),
            interrupted: false,
            title: None,
        },
        console,
        stop: opts.stop.clone(),
    };
    let result = match &scenario {
        Some(s) => compare::run(s, opts, &rts, &mut run),
        None if name == "overhead" => overhead::run(opts, &rts, &mut run),
        None => nagle::run(opts, &rts, &mut run),
    };
    rts.close_page();
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
