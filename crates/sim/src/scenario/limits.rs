//! How much a scenario may ask of the simulator, checked when it is read and after command-line
//! changes: a run's work (requests, clients, their state per endpoint) is bounded before it
//! starts, and the engine stops an arm that goes past the same bound anyway.

use super::load::{Load, LoadShape};
use tailguard_pacing::Schedule;

/// The most requests one arm simulates: a minute or two of simulation.
pub const MAX_REQUESTS: f64 = 100_000_000.0;

/// The most independent client-side balancers.
pub const MAX_CLIENTS: u32 = 10_000;

/// The most closed-loop workers.
pub const MAX_WORKERS: u32 = 10_000;

/// The most balancer states (one per client and endpoint).
pub const MAX_CLIENT_ENDPOINTS: usize = 10_000_000;

/// The most arms one scenario compares.
pub const MAX_ARMS: usize = 64;

/// Refuses a scenario of `arms` arms over `backends` endpoints whose `load` would exceed a
/// limit; `Err` names the field and the limit.
pub(crate) fn check(arms: usize, backends: usize, load: &Load) -> Result<(), String> {
    if arms > MAX_ARMS {
        return Err(format!("arms: at most {MAX_ARMS}, got {arms}"));
    }
    let clients = load.clients;
    if !(1..=MAX_CLIENTS).contains(&clients) {
        return Err(format!(
            "clients must be from 1 to {MAX_CLIENTS}, got {clients}"
        ));
    }
    let states = clients as usize * backends;
    if states > MAX_CLIENT_ENDPOINTS {
        return Err(format!(
            "{clients} clients x {backends} endpoints is {states} balancer states, more than \
             {MAX_CLIENT_ENDPOINTS}"
        ));
    }
    let requests = expected_requests(load)?;
    if requests > MAX_REQUESTS {
        return Err(format!(
            "load: about {requests:.3e} requests per arm, more than the {MAX_REQUESTS:e} the \
             simulator runs: lower the rate or the duration"
        ));
    }
    Ok(())
}

/// The requests an arm is expected to send: the schedule's count in the duration, or each
/// closed-loop worker's sends at most once per interval (0 without an interval: bounded by
/// latencies, which the engine guards).
fn expected_requests(load: &Load) -> Result<f64, String> {
    let secs = load.duration.as_secs_f64();
    match load.shape {
        LoadShape::Open {
            arrivals,
            rate,
            ramp,
        } => {
            let mut schedule =
                Schedule::new(arrivals, rate, 0).map_err(|e| format!("load: {e}"))?;
            if let Some(r) = ramp {
                schedule = schedule.with_ramp(r).map_err(|e| format!("load: {e}"))?;
            }
            Ok(schedule.expected(load.duration))
        }
        LoadShape::Closed { workers, interval } => {
            if !(1..=MAX_WORKERS).contains(&workers) {
                return Err(format!(
                    "load: workers must be from 1 to {MAX_WORKERS}, got {workers}"
                ));
            }
            Ok(match interval.as_secs_f64() {
                0.0 => 0.0,
                i => f64::from(workers) * secs / i,
            })
        }
    }
}
