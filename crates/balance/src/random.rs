//! Random: a uniformly random ready endpoint.
//!
//! The simplest stateless policy, and the one power-of-d-choices improves on: with `n`
//! endpoints and `n` requests in flight, the most loaded endpoint holds about
//! `log n / log log n` of them, against `log log n` with two choices (Mitzenmacher, "The Power of
//! Two Choices in Randomized Load Balancing", 2001).
//!
//! # Example
//! ```
//! use std::time::Duration;
//! use rand::SeedableRng;
//! use tailguard_balance::{Balance, Random};
//!
//! let mut rng = rand::rngs::StdRng::seed_from_u64(1);
//! let mut random = Random::new(4);
//! let only_3 = |i: usize| i == 3;
//! assert_eq!(random.pick(Duration::ZERO, &only_3, &mut rng), Some(3));
//! ```

use crate::{Balance, Ready, MAX_EFFORT};
use rand::{Rng, RngCore};
use std::time::Duration;

/// Uniform random choice among the ready endpoints.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Random {
    n: usize,
}

impl Random {
    /// Random choice over `n` endpoints.
    pub fn new(n: usize) -> Self {
        Self { n }
    }
}

impl Balance for Random {
    fn len(&self) -> usize {
        self.n
    }

    fn pick(&mut self, _now: Duration, ready: Ready<'_>, rng: &mut dyn RngCore) -> Option<usize> {
        if self.n == 0 {
            return None;
        }
        for _ in 0..MAX_EFFORT {
            let i = rng.random_range(0..self.n);
            if ready(i) {
                return Some(i);
            }
        }
        // Unlucky or mostly down: draw exactly among the ready ones, or among all.
        let count = (0..self.n).filter(|&i| ready(i)).count();
        if count == 0 {
            return Some(rng.random_range(0..self.n));
        }
        let k = rng.random_range(0..count);
        (0..self.n).filter(|&i| ready(i)).nth(k)
    }

    fn start(&mut self, _endpoint: usize, _now: Duration) {}

    fn end(&mut self, _endpoint: usize, _rtt: Duration, _now: Duration) {}
}
