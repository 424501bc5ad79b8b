//! Endpoint load estimators and pickers: how to choose an endpoint so the tail stays short.
//!
//! Two layers, kept apart as in tower (`tower::load` and `tower::balance::p2c`):
//!
//! - [`load`]: what an endpoint costs right now. [`load::Pending`] counts requests in flight;
//!   [`load::PeakEwma`] weighs a peak-sensitive round-trip estimate by them. Pickers only see the
//!   one-method [`load::Load`] trait.
//! - pickers, behind the [`Balance`] trait: [`RoundRobin`], [`Random`], [`BestOf`] (power of `d`
//!   choices, P2C at `d = 2`, full scan at `d = n`) over any estimator, [`HeapLeastLoaded`],
//!   [`Aperture`], and the probing [`Prequal`] (which also asks for probes and hears their
//!   replies). [`Policy`] builds any of them at run time.
//!
//! Everything here is pure: no clock, no global RNG, no I/O, no allocation per request. Time is a
//! [`std::time::Duration`] since an epoch the caller fixes (the simulator's virtual zero, or the
//! proxy's start-up instant); randomness comes in as `&mut dyn RngCore`. The simulator and the
//! proxy run the same structs, and so do the tests.
//!
//! # Example
//! ```
//! use std::time::Duration;
//! use rand::SeedableRng;
//! use tailguard_balance::{LoadKind, Policy};
//!
//! let mut rng = rand::rngs::StdRng::seed_from_u64(42);
//! let mut balancer = Policy::p2c(LoadKind::peak_ewma()).build(3, Duration::ZERO, &mut rng).unwrap();
//! let now = Duration::from_millis(1);
//! let healthy = |i: usize| i != 2; // e.g. failure accrual marked endpoint 2 down
//! let endpoint = balancer.pick(now, &healthy, &mut rng).unwrap();
//! assert_ne!(endpoint, 2);
//! balancer.start(endpoint, now);
//! let done = now + Duration::from_millis(20);
//! balancer.settle(endpoint, now, true, done); // its answer began (the stall clock stops)
//! balancer.end(endpoint, Duration::from_millis(20), done);
//! ```

#![warn(missing_docs)]

pub mod aperture;
pub mod balancer;
pub mod best_of;
pub mod heap;
pub mod load;
pub mod pair;
pub mod policy;
pub mod prequal;
pub mod random;
pub mod round_robin;
pub mod slow_start;
pub mod split;

pub use aperture::{Aperture, ApertureConfig, ApertureError};
pub use balancer::{all_ready, Balance, ProbeReply, ProbeVerdict, Ready, MAX_EFFORT};
pub use best_of::{BestOf, Choices, ChoicesError};
pub use heap::HeapLeastLoaded;
pub use policy::{LoadKind, Policy, PolicyError};
pub use prequal::{Prequal, PrequalConfig, PrequalError};
pub use random::Random;
pub use round_robin::RoundRobin;
pub use slow_start::{SlowStart, SlowStartError};
