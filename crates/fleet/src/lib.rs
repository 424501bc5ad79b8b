//! The pure behaviour model of test backends: latency distributions, failures, fault
//! schedules, fleet files.
//!
//! `tailguard serve` runs a fleet live on loopback and `tailguard sim` runs the same fleet in
//! virtual time; both ask this crate what a backend does, so a fleet file means the same thing
//! in either. Nothing here reads a clock or a global RNG: elapsed time and a `rand::Rng` are
//! arguments (see `clippy.toml`), and there is no tokio or hyper.
//!
//! - [`LatencyDist`]: fixed, uniform, clamped normal, log-normal, percentile table, replay.
//! - [`Failure`]: probabilities of an error status, a close and a reset.
//! - [`Capacity`]: workers and a waiting line, so latency grows with load ([`capacity`]).
//! - [`probe`]: what a backend answers a load probe (requests in flight, latency estimate).
//! - [`Schedule`] of [`Fault`]s: "from 15s to 45s latency x10", "every 10s pause 5s", ...
//! - [`BackendSpec::decide`], [`BackendSpec::paused_until`], [`BackendSpec::is_down`]: the
//!   per-request model (the protocol is in [`backend`]).
//! - [`Fleet`]: the file format, built-in fleets (`add-steps`, `slow-middle`, `echo`,
//!   `gc-pause`) and per-backend seeds.
//!
//! The model follows the experiments of the seeds: the add-steps Go servers (seed 000: sleep,
//! then fail with a probability, so failures take the full latency), Finagle's load-balancer
//! simulation (seed 002) and the SIGSTOP loop of the slow_cooker post (seed 004).
//!
//! # Example
//! ```
//! use rand::SeedableRng;
//! use std::time::Duration;
//! use tailguard_fleet::{Fleet, Outcome};
//! let fleet = Fleet::builtin("add-steps").unwrap();
//! let slowest = &fleet.backends[9];
//! let mut rng = rand::rngs::StdRng::seed_from_u64(fleet.backend_seed(9));
//! let d = slowest.decide(Duration::ZERO, &mut rng);
//! assert_eq!(d.latency, Duration::from_secs(2));
//! assert!(matches!(d.outcome, Outcome::Respond { status: 200 | 500 }));
//! ```
#![warn(missing_docs)]

pub mod backend;
mod builtin;
pub mod capacity;
pub mod dist;
pub mod error;
pub mod failure;
pub mod fleet;
pub mod limits;
pub mod probe;
pub mod ratio;
pub mod schedule;

pub use backend::{BackendSpec, Body, BodyError, Decision};
pub use capacity::Capacity;
pub use dist::LatencyDist;
pub use error::FleetError;
pub use failure::{Failure, FailureError, Outcome};
pub use fleet::Fleet;
pub use ratio::{Ratio, RatioError};
pub use schedule::{Effect, Fault, FaultError, Schedule, Window};

#[cfg(test)]
mod tests;
