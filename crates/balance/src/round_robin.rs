//! Round robin: each ready endpoint in turn.
//!
//! What nginx and HAProxy do by default, and the baseline of both seed experiments. It uses no
//! information about the endpoints, so a slow endpoint gets its full share: in seed 002 that is
//! one request in eleven taking ten times longer, and a p99 to match.
//!
//! # Example
//! ```
//! use std::time::Duration;
//! use rand::SeedableRng;
//! use tailguard_balance::{all_ready, Balance, RoundRobin};
//!
//! let mut rng = rand::rngs::StdRng::seed_from_u64(1);
//! let mut rr = RoundRobin::new(2);
//! let picks: Vec<_> = (0..4).map(|_| rr.pick(Duration::ZERO, &all_ready, &mut rng)).collect();
//! assert_eq!(picks, [Some(0), Some(1), Some(0), Some(1)]);
//! ```

use crate::{Balance, Ready};
use rand::RngCore;
use std::time::Duration;

/// Round robin over `n` endpoints, skipping the ones that are not ready.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoundRobin {
    n: usize,
    next: usize,
}

impl RoundRobin {
    /// Round robin starting at endpoint 0.
    pub fn new(n: usize) -> Self {
        Self::starting_at(n, 0)
    }

    /// Round robin starting at `first` (independent clients start at different places, so
    /// they do not all hit endpoint 0 together).
    pub fn starting_at(n: usize, first: usize) -> Self {
        Self {
            n,
            next: if n == 0 { 0 } else { first % n },
        }
    }
}

impl Balance for RoundRobin {
    fn len(&self) -> usize {
        self.n
    }

    fn pick(&mut self, _now: Duration, ready: Ready<'_>, _rng: &mut dyn RngCore) -> Option<usize> {
        if self.n == 0 {
            return None;
        }
        let chosen = (0..self.n)
            .map(|k| (self.next + k) % self.n)
            .find(|&i| ready(i))
            .unwrap_or(self.next);
        self.next = (chosen + 1) % self.n;
        Some(chosen)
    }

    fn start(&mut self, _endpoint: usize, _now: Duration) {}

    fn end(&mut self, _endpoint: usize, _rtt: Duration, _now: Duration) {}
}
