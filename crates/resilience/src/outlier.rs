//! Latency outlier ejection: take out endpoints much slower than their peers.
//!
//! # What
//! Envoy's outlier detection, applied to latency instead of success rate:
//! 1. Each endpoint sums the latencies of its *successful* attempts over an `interval` (10 s).
//!    A failure is no latency sample (a refused connection answers in 0.2 ms, and counting it
//!    would make the one endpoint still answering look like the slow one); it only marks the
//!    endpoint *failing* once [`FAILING_STREAK`] attempts in a row have failed, until it
//!    succeeds again.
//! 2. At the end of each interval, endpoints with at least `min_requests` samples get their mean
//!    compared with the median of those means; one above `factor` times the median (3x) is an
//!    outlier. At least three endpoints must have enough samples, or nothing is judged.
//! 3. Outliers are ejected, worst first, for `base_ejection * times_ejected` (capped at
//!    `max_ejection`), but never more than `max_ejected_percent` of the endpoints at once
//!    (at least one), and never when it would leave fewer than half of the endpoints both
//!    healthy (not failing) and in rotation: the fleet cannot eject itself into an outage.
//! 4. Panic: when endpoints start failing and fewer than half of all endpoints are healthy and
//!    in rotation, every ejection ends at once (Envoy's 50% panic threshold, which balances
//!    over all hosts below it): a slow endpoint that answers beats a fast one that refuses.
//! 5. An interval without ejection decrements `times_ejected` (Envoy's rule), so an endpoint
//!    that recovered soon gets short ejections again.
//!
//! # Why
//! Failure accrual sees errors, not slowness. A latency-aware balancer already routes around a
//! slow endpoint, but a plain round robin does not, and even peak EWMA keeps probing it with a
//! request now and then. Ejection stops that for a while, at the price of a blind spot: while
//! ejected, a recovered endpoint gets nothing.
//!
//! # Example
//! ```
//! use std::time::Duration;
//! use tailguard_resilience::{OutlierConfig, OutlierDetector};
//!
//! let ms = Duration::from_millis;
//! let mut d = OutlierDetector::new(4, OutlierConfig::default());
//! for i in 0..40u64 {
//!     let slow = if i % 4 == 3 { 10 } else { 1 };
//!     d.record((i % 4) as usize, ms(100 * slow), ms(i * 100));
//! }
//! d.record(0, ms(100), ms(10_000)); // the interval ends: evaluate
//! assert!(d.is_ejected(3, ms(10_000)));
//! assert!(!d.is_ejected(0, ms(10_000)));
//! assert!(!d.is_ejected(3, ms(40_000)));
//! ```

use std::time::Duration;

/// Failed attempts in a row after which an endpoint counts as failing (step 1): one failure is
/// noise, three in a row at any rate worth balancing is not.
pub const FAILING_STREAK: u32 = 3;

/// Parameters of an [`OutlierDetector`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OutlierConfig {
    /// How often endpoints are judged.
    pub interval: Duration,
    /// How many times the median mean latency makes an outlier.
    pub factor: f64,
    /// Samples an endpoint needs in an interval to be judged.
    pub min_requests: u32,
    /// Ejection time for a first ejection.
    pub base_ejection: Duration,
    /// The longest ejection.
    pub max_ejection: Duration,
    /// The largest share of endpoints ejected at once (at least one endpoint).
    pub max_ejected_percent: f64,
}

impl Default for OutlierConfig {
    /// Envoy's timing (10 s interval, 30 s base, 300 s max, 10% ejected at most), 3x the median.
    fn default() -> Self {
        Self {
            interval: Duration::from_secs(10),
            factor: 3.0,
            min_requests: 5,
            base_ejection: Duration::from_secs(30),
            max_ejection: Duration::from_secs(300),
            max_ejected_percent: 0.1,
        }
    }
}

/// An [`OutlierConfig`] that cannot work.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum OutlierError {
    /// The interval must be positive.
    #[error("outlier ejection: interval must be above zero")]
    ZeroInterval,
    /// An outlier must be slower than the median: `factor > 1`.
    #[error("outlier ejection: factor must be above 1, got {0}")]
    Factor(f64),
    /// The ejected share must be within 0 to 1.
    #[error("outlier ejection: max_ejected_percent must be between 0 and 1, got {0}")]
    Percent(f64),
}

impl OutlierConfig {
    /// Checks the parameters.
    ///
    /// # Errors
    /// The first [`OutlierError`] found.
    pub fn validate(&self) -> Result<(), OutlierError> {
        if self.interval.is_zero() {
            return Err(OutlierError::ZeroInterval);
        }
        if !(self.factor > 1.0 && self.factor.is_finite()) {
            return Err(OutlierError::Factor(self.factor));
        }
        if !(0.0..=1.0).contains(&self.max_ejected_percent) {
            return Err(OutlierError::Percent(self.max_ejected_percent));
        }
        Ok(())
    }
}

/// Latency statistics and ejections for a set of endpoints.
#[derive(Clone, Debug)]
pub struct OutlierDetector {
    config: OutlierConfig,
    sum_s: Vec<f64>,
    count: Vec<u32>,
    ejected_until: Vec<Duration>,
    times_ejected: Vec<u32>,
    /// Failed attempts in a row, per endpoint (reset by a success).
    failed_in_row: Vec<u32>,
    next_evaluation: Duration,
    /// (mean, endpoint) of the judged endpoints, reused every interval.
    scratch: Vec<(f64, usize)>,
}

impl OutlierDetector {
    /// A detector over `n` endpoints.
    pub fn new(n: usize, config: OutlierConfig) -> Self {
        Self {
            config,
            sum_s: vec![0.0; n],
            count: vec![0; n],
            ejected_until: vec![Duration::ZERO; n],
            times_ejected: vec![0; n],
            failed_in_row: vec![0; n],
            next_evaluation: config.interval,
            scratch: Vec::with_capacity(n),
        }
    }

    /// When `endpoint`'s last ejection ended, if it was ever ejected and is back at `now`.
    pub fn ejection_ended(&self, endpoint: usize, now: Duration) -> Option<Duration> {
        let until = *self.ejected_until.get(endpoint)?;
        (!until.is_zero() && until <= now).then_some(until)
    }

    /// True when `endpoint` is ejected at `now`.
    pub fn is_ejected(&self, endpoint: usize, now: Duration) -> bool {
        now < self.ejected_until[endpoint]
    }

    /// An attempt to `endpoint` succeeded at `now` after `latency` (step 1); evaluates when an
    /// interval has ended.
    pub fn record(&mut self, endpoint: usize, latency: Duration, now: Duration) {
        self.tick(now);
        self.sum_s[endpoint] += latency.as_secs_f64();
        self.count[endpoint] += 1;
        self.failed_in_row[endpoint] = 0;
    }

    /// An attempt to `endpoint` failed at `now` (step 1): no latency sample; the endpoint may
    /// turn failing, and then ejections may end (step 4).
    pub fn record_failure(&mut self, endpoint: usize, now: Duration) {
        self.tick(now);
        let streak = &mut self.failed_in_row[endpoint];
        *streak = streak.saturating_add(1);
        if *streak == FAILING_STREAK && self.panicking(now) {
            for until in &mut self.ejected_until {
                *until = (*until).min(now);
            }
        }
    }

    /// True when `endpoint` is failing (step 1).
    pub fn is_failing(&self, endpoint: usize) -> bool {
        self.failed_in_row[endpoint] >= FAILING_STREAK
    }

    /// Endpoints healthy (not failing) and not ejected at `now`.
    fn healthy_in_rotation(&self, now: Duration) -> usize {
        (0..self.count.len())
            .filter(|&i| !self.is_failing(i) && !self.is_ejected(i, now))
            .count()
    }

    /// Step 4: some endpoint is ejected, and fewer than half are healthy and in rotation.
    fn panicking(&self, now: Duration) -> bool {
        let n = self.count.len();
        vec_count(&self.ejected_until, now) > 0 && self.healthy_in_rotation(now) * 2 < n
    }

    /// Evaluates when an interval has ended at `now`.
    fn tick(&mut self, now: Duration) {
        if now >= self.next_evaluation {
            self.evaluate(now);
            let periods = (now - self.next_evaluation).as_nanos() / self.config.interval.as_nanos();
            let periods = u32::try_from(periods).unwrap_or(u32::MAX).saturating_add(1);
            self.next_evaluation += self.config.interval.saturating_mul(periods);
        }
    }

    /// Step 2's means: (mean, endpoint) of the endpoints with enough samples, into `scratch`;
    /// the interval's sums start again.
    fn take_means(&mut self) {
        self.scratch.clear();
        for i in 0..self.count.len() {
            if self.count[i] >= self.config.min_requests.max(1) {
                self.scratch
                    .push((self.sum_s[i] / f64::from(self.count[i]), i));
            }
        }
        self.sum_s.iter_mut().for_each(|s| *s = 0.0);
        self.count.iter_mut().for_each(|c| *c = 0);
    }

    /// Steps 2, 3 and 5.
    fn evaluate(&mut self, now: Duration) {
        self.take_means();
        let mut ejected_now = vec_count(&self.ejected_until, now);
        let mut healthy = self.healthy_in_rotation(now);
        let n = self.ejected_until.len();
        let cap = ((n as f64 * self.config.max_ejected_percent) as usize).max(1);
        if self.scratch.len() >= 3 {
            self.scratch
                .sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            let median = self.scratch[self.scratch.len() / 2].0;
            for k in (0..self.scratch.len()).rev() {
                let (mean, i) = self.scratch[k];
                if mean <= self.config.factor * median || ejected_now >= cap {
                    break;
                }
                if self.is_ejected(i, now) {
                    continue;
                }
                let loses_healthy = !self.is_failing(i);
                if loses_healthy && healthy.saturating_sub(1) * 2 < n {
                    break; // step 3: too few healthy endpoints would be left
                }
                self.eject(i, now);
                ejected_now += 1;
                healthy -= usize::from(loses_healthy);
            }
        }
        for i in 0..n {
            if !self.is_ejected(i, now) {
                self.times_ejected[i] = self.times_ejected[i].saturating_sub(1);
            }
        }
    }

    fn eject(&mut self, endpoint: usize, now: Duration) {
        self.times_ejected[endpoint] = self.times_ejected[endpoint].saturating_add(1);
        let length = self
            .config
            .base_ejection
            .saturating_mul(self.times_ejected[endpoint])
            .min(self.config.max_ejection);
        // At least a nanosecond, so a zero base still counts as ejected this round.
        self.ejected_until[endpoint] = now + length.max(Duration::from_nanos(1));
    }
}

fn vec_count(until: &[Duration], now: Duration) -> usize {
    until.iter().filter(|&&u| now < u).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn ejects_at_most_the_cap_and_ejections_grow() {
        let config = OutlierConfig {
            max_ejected_percent: 0.2,
            ..OutlierConfig::default()
        };
        let mut d = OutlierDetector::new(10, config);
        // Endpoints 7, 8, 9 are ten times slower, interval after interval.
        for k in 0..=4_000u64 {
            let i = (k % 10) as usize;
            let lat = if i >= 7 {
                ms(1_000 + i as u64)
            } else {
                ms(100)
            };
            d.record(i, lat, ms(k * 10));
            let now = ms(k * 10);
            let ejected: Vec<usize> = (0..10).filter(|&i| d.is_ejected(i, now)).collect();
            let want: &[usize] = match k * 10 {
                0..10_000 => &[],
                10_000..40_000 => &[8, 9], // two of ten, the worst first, for 30 s
                40_000..100_000 => &[8, 9], // back at 40 s and ejected again, for 60 s
                _ => &[8, 9],
            };
            assert_eq!(ejected, want, "at {now:?}");
        }
        assert_eq!(d.times_ejected[9], 2);
        assert_eq!(d.ejected_until[9], ms(100_000));
    }

    #[test]
    fn too_few_judged_endpoints_eject_nothing() {
        let mut d = OutlierDetector::new(3, OutlierConfig::default());
        d.record(0, ms(1), ms(0));
        for k in 0..10 {
            d.record(1, ms(1), ms(k));
            d.record(2, ms(1_000), ms(k));
        }
        d.record(0, ms(1), ms(10_000));
        assert!((0..3).all(|i| !d.is_ejected(i, ms(10_000))));
    }

    /// Three endpoints, 2 slower than the others, recorded over `[from, from + 10 s)`.
    fn three_with_a_slow_one(d: &mut OutlierDetector, from: u64) {
        for k in 0..300u64 {
            let i = (k % 3) as usize;
            let lat = if i == 2 { ms(300) } else { ms(20) };
            d.record(i, lat, ms(from + k * 33));
        }
    }

    #[test]
    fn failures_are_no_latency_samples_so_the_one_answering_endpoint_is_not_ejected() {
        let config = OutlierConfig {
            max_ejected_percent: 0.5,
            ..OutlierConfig::default()
        };
        let mut d = OutlierDetector::new(3, config);
        // 0 and 1 refuse in 0.2 ms; 2 answers in 300 ms.
        for k in 0..300u64 {
            let i = (k % 3) as usize;
            let now = ms(k * 33);
            if i == 2 {
                d.record(i, ms(300), now);
            } else {
                d.record_failure(i, now);
            }
        }
        d.record(2, ms(300), ms(10_000));
        assert!(!d.is_ejected(2, ms(10_000)), "the only answering endpoint");
        assert!(d.is_failing(0) && d.is_failing(1) && !d.is_failing(2));
    }

    #[test]
    fn an_ejection_ends_when_the_endpoints_left_in_rotation_start_failing() {
        let mut d = OutlierDetector::new(3, OutlierConfig::default());
        three_with_a_slow_one(&mut d, 0);
        d.record(0, ms(20), ms(10_000));
        assert!(d.is_ejected(2, ms(10_001)));
        // 0 fails three times in a row: 1 is the only healthy endpoint in rotation, fewer than
        // half of three, so 2 comes back at once.
        for k in 0..3 {
            d.record_failure(0, ms(10_100 + k));
            assert_eq!(
                d.is_ejected(2, ms(10_200)),
                k < 2,
                "after {} failures",
                k + 1
            );
        }
    }

    #[test]
    fn no_ejection_leaves_fewer_than_half_healthy_in_rotation() {
        let config = OutlierConfig {
            max_ejected_percent: 1.0,
            ..OutlierConfig::default()
        };
        let mut d = OutlierDetector::new(5, config);
        // 0 and 1 failing; 2 and 3 fast; 4 slow: ejecting 4 would leave 2 of 5 healthy.
        for k in 0..500u64 {
            let i = (k % 5) as usize;
            let now = ms(k * 19);
            match i {
                0 | 1 => d.record_failure(i, now),
                4 => d.record(i, ms(300), now),
                _ => d.record(i, ms(20), now),
            }
        }
        d.record(2, ms(20), ms(10_000));
        assert!(!d.is_ejected(4, ms(10_000)));
        // The same with every endpoint healthy: 4 goes.
        let mut d = OutlierDetector::new(5, config);
        for k in 0..500u64 {
            let i = (k % 5) as usize;
            d.record(i, if i == 4 { ms(300) } else { ms(20) }, ms(k * 19));
        }
        d.record(2, ms(20), ms(10_000));
        assert!(d.is_ejected(4, ms(10_000)));
    }

    #[test]
    fn validate_names_the_broken_constraint() {
        let bad = OutlierConfig {
            factor: 0.5,
            ..OutlierConfig::default()
        };
        assert_eq!(bad.validate(), Err(OutlierError::Factor(0.5)));
        assert_eq!(OutlierConfig::default().validate(), Ok(()));
    }
}
