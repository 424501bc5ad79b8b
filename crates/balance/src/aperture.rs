//! Aperture: P2C inside a subset of the endpoints sized to the offered load.
//!
//! # What
//! Finagle's aperture balancer (Linkerd 1's `aperture`), in its original "random aperture" form:
//! 1. Each balancer orders the endpoints in its own random ring, fixed at construction.
//! 2. It only uses the first `aperture` endpoints of its ring, with P2C over any load metric.
//! 3. Offered load is an exponential moving average, over `window` (5 s), of the requests in
//!    flight through this balancer, updated at every request start and end. Each in-flight count
//!    is weighted by how long it held (Finagle feeds the count just after each change, which
//!    reads a lone request as a steady load of one). Per-endpoint load is
//!    `offered / aperture`; above `high_load` (2.0) the aperture widens by one, below
//!    `low_load` (0.5) it narrows by one, never below `min_aperture` nor above the endpoint count.
//! 4. When no endpoint in the aperture is ready, the first ready endpoint further along the ring
//!    serves; when none at all is ready, P2C in the aperture picks among all.
//!
//! # Why
//! With many clients and many endpoints, every client talking to every endpoint means
//! `clients x endpoints` connections, each too idle to carry a useful load signal. Aperture keeps
//! each client on a few endpoints, enough for its own load, and random rings spread the clients.
//! The price: with few clients and low load, the endpoints outside every aperture sit idle.
//!
//! # Example
//! ```
//! use std::time::Duration;
//! use rand::SeedableRng;
//! use tailguard_balance::{all_ready, load::Pending, Aperture, ApertureConfig, Balance};
//!
//! let mut rng = rand::rngs::StdRng::seed_from_u64(5);
//! let mut ap = Aperture::new(vec![Pending::default(); 100], ApertureConfig::default(), &mut rng);
//! assert_eq!(ap.aperture(), 1); // an idle client needs one endpoint
//! let now = Duration::ZERO;
//! let only = ap.pick(now, &all_ready, &mut rng).unwrap();
//! assert_eq!(ap.pick(now, &all_ready, &mut rng), Some(only));
//! ```

use crate::load::{Estimator, Load, Snapshot};
use crate::pair::distinct_pair;
use crate::{Balance, Ready, MAX_EFFORT};
use rand::seq::SliceRandom;
use rand::{Rng, RngCore};
use std::time::Duration;

/// Parameters of [`Aperture`] (Finagle's defaults).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ApertureConfig {
    /// The smallest subset.
    pub min_aperture: usize,
    /// Narrow when the load per endpoint in the aperture falls below this.
    pub low_load: f64,
    /// Widen when the load per endpoint in the aperture rises above this.
    pub high_load: f64,
    /// Time constant of the offered-load average.
    pub window: Duration,
}

impl Default for ApertureConfig {
    fn default() -> Self {
        Self {
            min_aperture: 1,
            low_load: 0.5,
            high_load: 2.0,
            window: Duration::from_secs(5),
        }
    }
}

/// An [`ApertureConfig`] that cannot work.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ApertureError {
    /// The aperture must hold at least one endpoint.
    #[error("aperture: min_aperture must be at least 1")]
    ZeroMinAperture,
    /// The load band must be `0 <= low_load < high_load`.
    #[error("aperture: need 0 <= low_load < high_load, got {low} and {high}")]
    Band {
        /// The low bound given.
        low: f64,
        /// The high bound given.
        high: f64,
    },
    /// The averaging window must be positive.
    #[error("aperture: window must be above zero")]
    ZeroWindow,
}

impl ApertureConfig {
    /// Checks the parameters.
    ///
    /// # Errors
    /// The first [`ApertureError`] found.
    pub fn validate(&self) -> Result<(), ApertureError> {
        if self.min_aperture == 0 {
            return Err(ApertureError::ZeroMinAperture);
        }
        let band_ok = self.low_load >= 0.0 && self.low_load < self.high_load;
        if !band_ok {
            return Err(ApertureError::Band {
                low: self.low_load,
                high: self.high_load,
            });
        }
        if self.window.is_zero() {
            return Err(ApertureError::ZeroWindow);
        }
        Ok(())
    }
}

/// P2C within a load-sized subset of a per-balancer random ring.
#[derive(Clone, Debug)]
pub struct Aperture<E> {
    loads: Vec<E>,
    ring: Vec<usize>,
    aperture: usize,
    config: ApertureConfig,
    in_flight: u32,
    offered: f64,
    stamp: Duration,
}

impl<E: Load> Aperture<E> {
    /// An aperture balancer; `rng` shuffles its ring (step 1).
    pub fn new(loads: Vec<E>, config: ApertureConfig, rng: &mut dyn RngCore) -> Self {
        let mut ring: Vec<usize> = (0..loads.len()).collect();
        ring.shuffle(rng);
        let aperture = config.min_aperture.clamp(1, loads.len().max(1));
        Self {
            loads,
            ring,
            aperture,
            config,
            in_flight: 0,
            offered: 0.0,
            stamp: Duration::ZERO,
        }
    }

    /// How many endpoints the balancer currently uses.
    pub fn aperture(&self) -> usize {
        self.aperture.min(self.loads.len())
    }

    /// The endpoints' load estimators.
    pub fn loads(&self) -> &[E] {
        &self.loads
    }

    /// Step 3: average in the in-flight count that held since the last change (`held`), then
    /// resize the aperture by at most one.
    fn adjust(&mut self, held: u32, now: Duration) {
        let elapsed = now.saturating_sub(self.stamp).as_secs_f64();
        let w = (-elapsed / self.config.window.as_secs_f64()).exp();
        self.offered = self.offered * w + f64::from(held) * (1.0 - w);
        self.stamp = self.stamp.max(now);
        let per_endpoint = self.offered / self.aperture as f64;
        if per_endpoint > self.config.high_load && self.aperture < self.loads.len() {
            self.aperture += 1;
        } else if per_endpoint < self.config.low_load && self.aperture > self.config.min_aperture {
            self.aperture -= 1;
        }
    }

    /// Step 2: P2C over ring positions `0..aperture`, ready endpoints only.
    fn draw(&mut self, now: Duration, ready: Ready<'_>, rng: &mut dyn RngCore) -> Option<usize> {
        let a = self.aperture();
        if a == 1 {
            let only = rng.random_range(0..a);
            return Some(self.ring[only]).filter(|&i| ready(i));
        }
        let (pa, pb) = distinct_pair(a, rng);
        let (first, second) = (self.ring[pa], self.ring[pb]);
        let mut best: Option<(usize, f64)> = None;
        for i in [first, second] {
            if ready(i) {
                let cost = self.loads[i].cost(now);
                if best.is_none_or(|(_, c)| cost < c) {
                    best = Some((i, cost));
                }
            }
        }
        best.map(|(i, _)| i)
    }
}

impl<E: Estimator + std::fmt::Debug> Balance for Aperture<E> {
    fn len(&self) -> usize {
        self.loads.len()
    }

    fn pick(&mut self, now: Duration, ready: Ready<'_>, rng: &mut dyn RngCore) -> Option<usize> {
        if self.loads.is_empty() {
            return None;
        }
        for _ in 0..MAX_EFFORT {
            if let Some(i) = self.draw(now, ready, rng) {
                return Some(i);
            }
        }
        // Step 4: borrow along the ring, else pick among all inside the aperture.
        let along_ring = self.ring.iter().copied().find(|&i| ready(i));
        along_ring.or_else(|| self.draw(now, &crate::all_ready, rng))
    }

    fn start(&mut self, endpoint: usize, now: Duration) {
        self.loads[endpoint].start(now);
        self.adjust(self.in_flight, now);
        self.in_flight += 1;
    }

    fn settle(&mut self, endpoint: usize, sent: Duration, answered: bool, now: Duration) {
        self.loads[endpoint].settle(sent, answered, now);
    }

    fn end(&mut self, endpoint: usize, rtt: Duration, now: Duration) {
        self.loads[endpoint].end(rtt, now);
        self.adjust(self.in_flight, now);
        self.in_flight = self.in_flight.saturating_sub(1);
    }

    fn snapshot(&self, endpoint: usize, now: Duration) -> Option<Snapshot> {
        self.loads.get(endpoint)?.snapshot(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::Pending;
    use rand::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;

    fn aperture(n: usize) -> (Aperture<Pending>, Xoshiro256PlusPlus) {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(9);
        let ap = Aperture::new(
            vec![Pending::default(); n],
            ApertureConfig::default(),
            &mut rng,
        );
        (ap, rng)
    }

    #[test]
    fn widens_under_load_and_narrows_when_idle() {
        let (mut ap, _) = aperture(20);
        let mut now = Duration::ZERO;
        for k in 0..200 {
            now += Duration::from_millis(50);
            ap.start(k % 20, now);
        }
        let wide = ap.aperture();
        assert!(wide > 5, "aperture {wide} after 200 requests in flight");
        for k in 0..200 {
            now += Duration::from_millis(50);
            ap.end(k % 20, Duration::ZERO, now);
        }
        for _ in 0..200 {
            now += Duration::from_millis(500);
            ap.start(0, now);
            ap.end(0, Duration::ZERO, now);
        }
        assert_eq!(ap.aperture(), 1);
    }

    #[test]
    fn borrows_outside_the_aperture_when_it_is_down() {
        let (mut ap, mut rng) = aperture(10);
        let inside = ap.ring[0];
        let outside = ap.ring[7];
        let ready = |i: usize| i == outside;
        assert_eq!(ap.pick(Duration::ZERO, &ready, &mut rng), Some(outside));
        assert_eq!(ap.pick(Duration::ZERO, &|_| false, &mut rng), Some(inside));
    }

    #[test]
    fn validate_names_the_broken_constraint() {
        let bad = ApertureConfig {
            low_load: 3.0,
            ..ApertureConfig::default()
        };
        assert!(matches!(bad.validate(), Err(ApertureError::Band { .. })));
        let zero = ApertureConfig {
            min_aperture: 0,
            ..ApertureConfig::default()
        };
        assert_eq!(zero.validate(), Err(ApertureError::ZeroMinAperture));
    }
}
