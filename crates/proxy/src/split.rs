//! A weighted split (`split: [{service, weight}]`): a service with no endpoints of its own
//! whose requests each go to one leaf service, picked by smooth weighted round robin
//! ([`tailguard_balance::split`]), one pick per process shared by every serving thread.
//!
//! The split service routes (hosts, path prefix), picks the route, admits (rate limits,
//! in-flight limit) and bounds the request (`totalTimeoutMs`, a route's `timeoutMs`); from
//! the pick on, the request is the leaf's: its endpoints, balancer, retries, hedging, budget
//! and counters, and every attempt of the request stays in that leaf. A reload that changes
//! only weights keeps the leaves (their pools and what they learned): see [`crate::start`].

use crate::service::Service;
use std::sync::{Arc, Mutex};
use tailguard_balance::split::{SmoothWeighted, SplitError};

/// The leaves of a split service and whose turn is next.
#[derive(Debug)]
pub struct Split {
    leaves: Vec<Arc<Service>>,
    order: Mutex<SmoothWeighted>,
}

impl Split {
    /// A split over `leaves`, each with its weight.
    ///
    /// # Errors
    /// When the weights cannot be split over (validated before, so only in theory).
    pub fn new(leaves: Vec<(Arc<Service>, u32)>) -> Result<Self, SplitError> {
        let weights: Vec<u32> = leaves.iter().map(|(_, w)| *w).collect();
        Ok(Self {
            order: Mutex::new(SmoothWeighted::new(&weights)?),
            leaves: leaves.into_iter().map(|(s, _)| s).collect(),
        })
    }

    /// The leaf of the next request, and its index.
    pub fn pick(&self) -> (usize, &Arc<Service>) {
        let i = self.order.lock().unwrap_or_else(|p| p.into_inner()).pick();
        (i, &self.leaves[i])
    }

    /// Every leaf, in the configured order.
    pub fn leaves(&self) -> &[Arc<Service>] {
        &self.leaves
    }
}
