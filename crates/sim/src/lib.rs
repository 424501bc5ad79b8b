//! `tailguard sim`: a deterministic discrete-event simulation of tailguard's balancers, in
//! virtual time.
//!
//! The simulator runs the very structs the proxy runs (`tailguard_balance` pickers and load
//! estimators, `tailguard_resilience` accrual, budgets, hedging and ejection, assembled in
//! [`client`]) against the same fleet model `tailguard serve` runs live (`tailguard_fleet`).
//! A [`Scenario`] names the fleet, the load and the arms; [`run`] plays every arm from the same
//! seeds and returns a [`Report`]; [`render`] prints it as a table, JSON, SVG or HTML.
//!
//! Like Finagle's load-balancer `Simulation` behind seed 002, but counting every request, in
//! virtual time (60 s of 1,000 req/s in milliseconds), and reproducible byte for byte.
//!
//! # Example
//! ```
//! use std::time::Duration;
//! use tailguard_sim::{run, Overrides, Scenario};
//!
//! let mut scenario = Scenario::builtin("slow-middle").unwrap();
//! let short = Overrides {
//!     duration: Some(Duration::from_secs(20)),
//!     arms: vec!["round-robin".into(), "p2c-peak-ewma".into()],
//!     ..Overrides::default()
//! };
//! scenario.apply(&short).unwrap();
//! let report = run(&scenario).unwrap();
//! let (rr, ewma) = (&report.arms[0], &report.arms[1]);
//! assert!(ewma.within_deadline_rate() > rr.within_deadline_rate());
//! ```

#![warn(missing_docs)]

/// The assembled client request path, shared with `tailguard proxy` (re-exported so
/// `tailguard_sim::client::ArmConfig` keeps working).
pub use tailguard_client as client;
pub mod engine;
pub mod render;
pub mod results;
pub mod scenario;

pub use engine::{run_arm, RunError};
pub use results::{ArmResult, Overload, OverloadFigures, Report, Second, MAX_TIMELINE};
pub use scenario::{Overrides, Scenario, ScenarioError};

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
/// The duration syntax of scenario and fleet files (`150ms`, `1.5s`), for command-line flags.
/// Open-loop arrival processes, and the linear ramp of an open loop's rate.
pub use tailguard_pacing::{Arrivals, Ramp};

/// Runs every arm of `scenario`, each from the same seeds, on as many threads as the machine
/// has (arms are independent, so the report does not depend on the thread count).
///
/// # Errors
/// [`RunError`] when an arm or the load cannot be built.
pub fn run(scenario: &Scenario) -> Result<Report, RunError> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    run_on(scenario, threads)
}

/// [`run`] on at most `threads` threads (1: everything on the calling thread).
///
/// # Errors
/// [`RunError`] when an arm or the load cannot be built.
pub fn run_on(scenario: &Scenario, threads: usize) -> Result<Report, RunError> {
    let n = scenario.arms.len();
    let threads = threads.clamp(1, n.max(1));
    let arms = if threads == 1 {
        (0..n).map(|i| run_arm(scenario, i)).collect::<Vec<_>>()
    } else {
        let next = AtomicUsize::new(0);
        let slots: Vec<Mutex<Option<Result<ArmResult, RunError>>>> =
            (0..n).map(|_| Mutex::new(None)).collect();
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        break;
                    }
                    let result = run_arm(scenario, i);
                    *slots[i].lock().expect("no panics while holding") = Some(result);
                });
            }
        });
        slots
            .into_iter()
            .map(|m| m.into_inner().expect("no panics").expect("every arm ran"))
            .collect()
    };
    Ok(Report {
        scenario: scenario.name.clone(),
        description: scenario.description.clone(),
        seed: scenario.seed,
        load: match &scenario.stages {
            None => scenario.load.to_string(),
            // The stages set the rate: the load line says so rather than their peak.
            Some(st) => format!("stages {st} (peak {} req/s); {}", st.peak(), scenario.load),
        },
        deadline: scenario.deadline,
        endpoints: scenario
            .fleet
            .backends
            .iter()
            .map(|b| b.name.clone())
            .collect(),
        arms: arms.into_iter().collect::<Result<Vec<_>, _>>()?,
        overload: scenario.overload.map(|o| {
            let seconds = scenario.load.duration.as_secs_f64().ceil() as usize;
            // A closed loop offers what its workers send: never "over capacity" by rate.
            let steady = match scenario.load.shape {
                scenario::LoadShape::Open { rate, .. } => rate,
                scenario::LoadShape::Closed { .. } => 0.0,
            };
            let rate_at = |t: f64| match &scenario.stages {
                Some(s) => s.rate_at(std::time::Duration::from_secs_f64(t)),
                None => steady,
            };
            (o, results::overload_window(seconds, o.capacity, rate_at))
        }),
    })
}
