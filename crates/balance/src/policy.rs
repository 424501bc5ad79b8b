//! Choosing a balancer at run time: [`Policy`] builds a `Box<dyn Balance + Send>`.
//!
//! The simulator's arms and the proxy's configuration both describe a balancer as a `Policy`, so
//! the same words build the same code in both.
//!
//! # Example
//! ```
//! use std::time::Duration;
//! use rand::SeedableRng;
//! use tailguard_balance::{LoadKind, Policy};
//!
//! let mut rng = rand::rngs::StdRng::seed_from_u64(1);
//! let policy = Policy::p2c(LoadKind::peak_ewma());
//! assert_eq!(policy.to_string(), "p2c peak-ewma (tau 10s, default rtt 30ms)");
//! let balancer = policy.build(11, Duration::ZERO, &mut rng).unwrap();
//! assert_eq!(balancer.len(), 11);
//! ```

use crate::load::{PeakEwma, PeakEwmaConfig, PeakEwmaError, Pending};
use crate::{
    Aperture, ApertureConfig, ApertureError, Balance, BestOf, Choices, ChoicesError,
    HeapLeastLoaded, Prequal, PrequalConfig, PrequalError, Random, RoundRobin,
};
use rand::{Rng, RngCore};
use std::fmt;
use std::time::Duration;

/// Which load metric a load-aware picker reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoadKind {
    /// Requests in flight ("least loaded").
    Pending,
    /// Peak EWMA of the round-trip time, times `pending + 1`.
    PeakEwma(PeakEwmaConfig),
}

impl LoadKind {
    /// Peak EWMA with linkerd2-proxy's defaults.
    pub fn peak_ewma() -> Self {
        LoadKind::PeakEwma(PeakEwmaConfig::default())
    }
}

/// A balancing policy.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Policy {
    /// Each ready endpoint in turn, starting at a random one.
    RoundRobin,
    /// A uniformly random ready endpoint.
    Random,
    /// The cheapest of `choices` random endpoints (P2C when `D(2)`).
    BestOf {
        /// How many endpoints to compare.
        choices: Choices,
        /// The metric compared.
        load: LoadKind,
    },
    /// Exact least loaded (pending requests) with a min-heap.
    Heap,
    /// P2C inside a load-sized subset.
    Aperture {
        /// Aperture sizing.
        config: ApertureConfig,
        /// The metric compared inside the aperture.
        load: LoadKind,
    },
    /// Probes for requests in flight and latency; hot-cold choice ([`crate::prequal`]).
    Prequal(PrequalConfig),
}

/// A [`Policy`] with a broken parameter.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum PolicyError {
    /// The number of choices.
    #[error(transparent)]
    Choices(#[from] ChoicesError),
    /// The peak EWMA parameters.
    #[error(transparent)]
    PeakEwma(#[from] PeakEwmaError),
    /// The aperture parameters.
    #[error(transparent)]
    Aperture(#[from] ApertureError),
    /// The probing parameters.
    #[error(transparent)]
    Prequal(#[from] PrequalError),
}

impl Policy {
    /// Power of two choices over `load`.
    pub fn p2c(load: LoadKind) -> Self {
        Policy::BestOf {
            choices: Choices::D(2),
            load,
        }
    }

    /// Checks every parameter.
    ///
    /// # Errors
    /// The first broken parameter, as a [`PolicyError`].
    pub fn validate(&self) -> Result<(), PolicyError> {
        let load = match self {
            Policy::RoundRobin | Policy::Random | Policy::Heap => return Ok(()),
            Policy::Prequal(config) => return Ok(config.validate()?),
            Policy::BestOf { choices, load } => {
                choices.validate()?;
                load
            }
            Policy::Aperture { config, load } => {
                config.validate()?;
                load
            }
        };
        if let LoadKind::PeakEwma(cfg) = load {
            cfg.validate()?;
        }
        Ok(())
    }

    /// Builds a balancer over `endpoints` endpoints, created at `now`; `rng` places the round
    /// robin start and shuffles the aperture ring.
    ///
    /// # Errors
    /// As [`Policy::validate`].
    pub fn build(
        &self,
        endpoints: usize,
        now: Duration,
        rng: &mut dyn RngCore,
    ) -> Result<Box<dyn Balance + Send>, PolicyError> {
        self.validate()?;
        let n = endpoints;
        Ok(match *self {
            Policy::RoundRobin => {
                let first = if n == 0 { 0 } else { rng.random_range(0..n) };
                Box::new(RoundRobin::starting_at(n, first))
            }
            Policy::Random => Box::new(Random::new(n)),
            Policy::Heap => Box::new(HeapLeastLoaded::new(n)),
            Policy::Prequal(config) => Box::new(Prequal::new(config, n, now)),
            Policy::BestOf { choices, load } => match load {
                LoadKind::Pending => Box::new(BestOf::new(vec![Pending::default(); n], choices)),
                LoadKind::PeakEwma(cfg) => {
                    Box::new(BestOf::new(vec![PeakEwma::new(cfg, now); n], choices))
                }
            },
            Policy::Aperture { config, load } => match load {
                LoadKind::Pending => {
                    Box::new(Aperture::new(vec![Pending::default(); n], config, rng))
                }
                LoadKind::PeakEwma(cfg) => {
                    Box::new(Aperture::new(vec![PeakEwma::new(cfg, now); n], config, rng))
                }
            },
        })
    }
}

impl fmt::Display for LoadKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadKind::Pending => f.write_str("least-loaded"),
            LoadKind::PeakEwma(c) => write!(
                f,
                "peak-ewma (tau {}, default rtt {}{})",
                short(c.tau),
                short(c.default_rtt),
                if c.pending_age {
                    ""
                } else {
                    ", no pending age"
                }
            ),
        }
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Policy::RoundRobin => f.write_str("round robin"),
            Policy::Random => f.write_str("random"),
            Policy::Heap => f.write_str("heap least-loaded"),
            Policy::BestOf {
                choices: Choices::D(2),
                load,
            } => write!(f, "p2c {load}"),
            Policy::BestOf {
                choices: Choices::D(d),
                load,
            } => write!(f, "best-of-{d} {load}"),
            Policy::BestOf {
                choices: Choices::All,
                load,
            } => write!(f, "full-scan {load}"),
            Policy::Aperture { load, .. } => write!(f, "aperture p2c {load}"),
            Policy::Prequal(c) => write!(
                f,
                "prequal ({} probes per request, pool {}, max age {}, q_rif {})",
                c.probes_per_query,
                c.pool_size,
                short(c.max_age),
                c.q_rif
            ),
        }
    }
}

/// `10s`, `30ms`, `1.5s`: short durations for descriptions.
fn short(d: Duration) -> String {
    if d.subsec_nanos() == 0 {
        format!("{}s", d.as_secs())
    } else if d.as_nanos().is_multiple_of(1_000_000) && d < Duration::from_secs(1) {
        format!("{}ms", d.as_millis())
    } else {
        format!("{}s", d.as_secs_f64())
    }
}
