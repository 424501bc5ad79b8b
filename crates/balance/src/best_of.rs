//! Power of d choices: draw `d` distinct endpoints at random, send to the cheapest.
//!
//! # What
//! 1. Draw `d` distinct endpoints uniformly (for `d = 2`, Finagle's and tower's draw: `a` from
//!    `[0, n)`, `b` from `[0, n - 1)`, and `b += 1` when `b >= a`).
//! 2. Keep the ready one with the lowest [`Load::cost`]; ties go to the first drawn. For
//!    `d = 2`, when only one of the pair is ready (the other is down, or is the endpoint a
//!    retry avoids), up to [`MAX_EFFORT`] more draws look for a second ready one to compare it
//!    with, so no endpoint is taken without a comparison because its partner was out.
//! 3. If none of them is ready, draw again, up to [`MAX_EFFORT`] times (Finagle's `maxEffort`);
//!    then scan every endpoint for the cheapest ready one; if none is ready, take the cheapest
//!    of one more draw among all.
//!
//! With `d >= n` ([`Choices::All`]) the picker scans every endpoint (Envoy's full-scan
//! `LEAST_REQUEST`), starting at a random offset so ties do not always favour endpoint 0.
//!
//! # Why
//! Two random choices already bring the worst queue from `log n / log log n` down to
//! `log log n` (Mitzenmacher 2001), with O(1) work and no shared ordering. More choices help a
//! single balancer a little; for many independent balancers a full scan is harmful, since every
//! balancer sends to the same "best" endpoint at once (the herd effect). The simulator shows both.
//!
//! # Example
//! ```
//! use std::time::Duration;
//! use rand::SeedableRng;
//! use tailguard_balance::{all_ready, load::Constant, Balance, BestOf, Choices};
//!
//! let mut rng = rand::rngs::StdRng::seed_from_u64(3);
//! let loads = vec![Constant(5.0), Constant(1.0), Constant(9.0)];
//! let mut scan = BestOf::new(loads, Choices::All);
//! assert_eq!(scan.pick(Duration::ZERO, &all_ready, &mut rng), Some(1));
//! ```

use crate::load::{Estimator, Load, Snapshot};
use crate::pair::distinct_pair;
use crate::{all_ready, Balance, Ready, MAX_EFFORT};
use rand::{Rng, RngCore};
use std::time::Duration;

/// How many endpoints a [`BestOf`] picker compares per request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Choices {
    /// `d` random distinct endpoints (`d = 2` is P2C; `d = 1` is random).
    D(usize),
    /// Every endpoint (full scan).
    All,
}

impl Default for Choices {
    /// Two choices: P2C.
    fn default() -> Self {
        Choices::D(2)
    }
}

/// A [`Choices`] that cannot work.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ChoicesError {
    /// `d` must be at least 1.
    #[error("best-of-d needs at least one choice (d >= 1)")]
    Zero,
}

impl Choices {
    /// Checks the value.
    ///
    /// # Errors
    /// [`ChoicesError::Zero`] for `D(0)`.
    pub fn validate(self) -> Result<(), ChoicesError> {
        match self {
            Choices::D(0) => Err(ChoicesError::Zero),
            _ => Ok(()),
        }
    }

    fn count(self) -> usize {
        match self {
            Choices::D(d) => d.max(1),
            Choices::All => usize::MAX,
        }
    }
}

/// Best of `d` random choices over any load estimator.
#[derive(Clone, Debug)]
pub struct BestOf<E> {
    loads: Vec<E>,
    d: usize,
    /// A permutation of `0..n` for drawing `d > 2` distinct endpoints without allocating.
    scratch: Vec<usize>,
    /// Slow start, and when each endpoint began warming (empty: none is).
    slow: Option<crate::SlowStart>,
    warm_since: Vec<Option<Duration>>,
}

impl<E: Load> BestOf<E> {
    /// A picker over one load estimator per endpoint.
    pub fn new(loads: Vec<E>, choices: Choices) -> Self {
        let d = choices.count();
        let n = loads.len();
        let scratch = if d > 2 && d < n {
            (0..n).collect()
        } else {
            Vec::new()
        };
        Self {
            loads,
            d,
            scratch,
            slow: None,
            warm_since: Vec::new(),
        }
    }

    /// The endpoints' load estimators.
    pub fn loads(&self) -> &[E] {
        &self.loads
    }

    /// Steps 1 and 2: the cheapest ready endpoint among `d` random ones, if any is ready.
    fn draw(&mut self, now: Duration, ready: Ready<'_>, rng: &mut dyn RngCore) -> Option<usize> {
        let n = self.loads.len();
        match self.d {
            1 => Some(rng.random_range(0..n)).filter(|&i| ready(i)),
            2 => {
                let (a, b) = distinct_pair(n, rng);
                match (ready(a), ready(b)) {
                    (true, true) => self.cheapest(now, [a, b].into_iter()),
                    (false, false) => None,
                    // One of the pair may not take it (down, or the endpoint a retry avoids):
                    // compare the other with a second ready one rather than take it blind, or
                    // a stalled endpoint wins every pair it shares with one out of rotation.
                    (a_ready, _) => {
                        let one = if a_ready { a } else { b };
                        let other = (0..MAX_EFFORT)
                            .map(|_| rng.random_range(0..n))
                            .find(|&j| j != one && ready(j));
                        self.cheapest(now, std::iter::once(one).chain(other))
                    }
                }
            }
            d => {
                for k in 0..d {
                    let j = rng.random_range(k..n);
                    self.scratch.swap(k, j);
                }
                let mut best: Option<(usize, f64)> = None;
                for k in 0..d {
                    let i = self.scratch[k];
                    if ready(i) {
                        best = lower(best, i, self.weighed(i, now));
                    }
                }
                best.map(|(i, _)| i)
            }
        }
    }

    /// The cheapest ready endpoint of all, scanning from a random offset.
    fn scan(&mut self, now: Duration, ready: Ready<'_>, rng: &mut dyn RngCore) -> Option<usize> {
        let n = self.loads.len();
        let offset = rng.random_range(0..n);
        self.cheapest(now, (0..n).map(|k| (offset + k) % n).filter(|&i| ready(i)))
    }

    fn cheapest(
        &mut self,
        now: Duration,
        candidates: impl Iterator<Item = usize>,
    ) -> Option<usize> {
        let mut best: Option<(usize, f64)> = None;
        for i in candidates {
            best = lower(best, i, self.weighed(i, now));
        }
        best.map(|(i, _)| i)
    }

    /// Endpoint `i`'s cost at `now`, divided by its slow-start factor while it warms up: as
    /// `(cost + 1) / factor - 1`, so that an idle endpoint's zero (least loaded: no request in
    /// flight) is scaled too, like one more request; a cost in nanoseconds (peak EWMA) barely
    /// notices the 1.
    fn weighed(&mut self, i: usize, now: Duration) -> f64 {
        let cost = self.loads[i].cost(now);
        match (self.slow, self.warm_since.get(i).copied().flatten()) {
            (Some(slow), Some(since)) => {
                (cost + 1.0) / slow.factor(now.saturating_sub(since)) - 1.0
            }
            _ => cost,
        }
    }
}

/// Keeps the first of equal costs.
fn lower(best: Option<(usize, f64)>, i: usize, cost: f64) -> Option<(usize, f64)> {
    match best {
        Some((_, c)) if c <= cost => best,
        _ => Some((i, cost)),
    }
}

impl<E: Estimator + std::fmt::Debug> Balance for BestOf<E> {
    fn len(&self) -> usize {
        self.loads.len()
    }

    fn pick(&mut self, now: Duration, ready: Ready<'_>, rng: &mut dyn RngCore) -> Option<usize> {
        let n = self.loads.len();
        if n <= 1 {
            return (n == 1).then_some(0);
        }
        if self.d >= n {
            return self
                .scan(now, ready, rng)
                .or_else(|| self.scan(now, &all_ready, rng));
        }
        for _ in 0..MAX_EFFORT {
            if let Some(i) = self.draw(now, ready, rng) {
                return Some(i);
            }
        }
        // Step 3: most endpoints are not ready.
        self.scan(now, ready, rng)
            .or_else(|| self.draw(now, &all_ready, rng))
    }

    fn start(&mut self, endpoint: usize, now: Duration) {
        self.loads[endpoint].start(now);
    }

    fn settle(&mut self, endpoint: usize, sent: Duration, answered: bool, now: Duration) {
        self.loads[endpoint].settle(sent, answered, now);
    }

    fn set_slow_start(&mut self, slow_start: Option<crate::SlowStart>) {
        self.slow = slow_start;
        self.warm_since = match slow_start {
            Some(_) => vec![None; self.loads.len()],
            None => Vec::new(),
        };
    }

    fn warm_up(&mut self, endpoint: usize, since: Duration) {
        if let Some(slot) = self.warm_since.get_mut(endpoint) {
            *slot = Some(since);
        }
    }

    fn end(&mut self, endpoint: usize, rtt: Duration, now: Duration) {
        self.loads[endpoint].end(rtt, now);
    }

    fn snapshot(&self, endpoint: usize, now: Duration) -> Option<Snapshot> {
        self.loads.get(endpoint)?.snapshot(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::Constant;
    use rand::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;

    fn rng() -> Xoshiro256PlusPlus {
        Xoshiro256PlusPlus::seed_from_u64(11)
    }

    #[test]
    fn two_choices_never_pick_the_single_worst_endpoint() {
        let mut loads = vec![Constant(1.0); 5];
        loads[2] = Constant(100.0);
        let mut p2c = BestOf::new(loads, Choices::D(2));
        let mut r = rng();
        for _ in 0..2_000 {
            assert_ne!(p2c.pick(Duration::ZERO, &all_ready, &mut r), Some(2));
        }
    }

    #[test]
    fn d_choices_avoid_the_d_minus_1_worst() {
        let loads: Vec<_> = (0..10).map(|i| Constant(f64::from(i))).collect();
        let mut best3 = BestOf::new(loads, Choices::D(3));
        let mut r = rng();
        for _ in 0..2_000 {
            let i = best3.pick(Duration::ZERO, &all_ready, &mut r).unwrap();
            assert!(i < 8, "{i}");
        }
    }

    #[test]
    fn mostly_down_still_finds_the_ready_one() {
        let mut p2c = BestOf::new(vec![Constant(0.0); 100], Choices::D(2));
        let mut r = rng();
        for _ in 0..200 {
            assert_eq!(p2c.pick(Duration::ZERO, &|i| i == 42, &mut r), Some(42));
        }
    }

    #[test]
    fn all_down_picks_anyway_and_single_endpoint_always() {
        let mut p2c = BestOf::new(vec![Constant(0.0); 3], Choices::D(2));
        let mut r = rng();
        assert!(p2c.pick(Duration::ZERO, &|_| false, &mut r).is_some());
        let mut one = BestOf::new(vec![Constant(0.0)], Choices::D(2));
        assert_eq!(one.pick(Duration::ZERO, &|_| false, &mut r), Some(0));
        let mut none = BestOf::<Constant>::new(Vec::new(), Choices::All);
        assert_eq!(none.pick(Duration::ZERO, &all_ready, &mut r), None);
    }

    #[test]
    fn validate_rejects_zero_choices() {
        assert_eq!(Choices::D(0).validate(), Err(ChoicesError::Zero));
        assert_eq!(Choices::All.validate(), Ok(()));
    }
}
