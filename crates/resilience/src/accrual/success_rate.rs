//! Trip when the success rate, a moving average over the last `n` requests, falls below a
//! threshold (Finagle's `FailureAccrualPolicy.successRate`; Linkerd 1's `io.l5d.successRate`,
//! the seed's `successRate: 0.9, requests: 20`).
//!
//! Each outcome moves the average by the weight `1 - e^(-1/n)`: recent requests count most,
//! and about the last `n` matter. It only trips once `n` requests were seen, so one early
//! failure cannot condemn an endpoint.
//!
//! # Example
//! ```
//! use tailguard_resilience::accrual::SuccessRate;
//!
//! let mut sr = SuccessRate::new(0.9, 20);
//! for _ in 0..19 {
//!     assert!(!sr.record(false)); // fewer than 20 requests seen: never trips
//! }
//! assert!(sr.record(false));
//! ```

/// A success-rate EMA over a count of requests.
#[derive(Clone, Debug, PartialEq)]
pub struct SuccessRate {
    threshold: f64,
    required: u32,
    keep: f64,
    rate: f64,
    seen: u32,
}

impl SuccessRate {
    /// Trips below `threshold` once at least `requests` (at least 1) outcomes were seen.
    pub fn new(threshold: f64, requests: u32) -> Self {
        let requests = requests.max(1);
        Self {
            threshold,
            required: requests,
            keep: (-1.0 / f64::from(requests)).exp(),
            rate: 1.0,
            seen: 0,
        }
    }

    /// The current success rate estimate.
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// Records one outcome; true when the endpoint should be marked dead.
    pub fn record(&mut self, success: bool) -> bool {
        let x = if success { 1.0 } else { 0.0 };
        self.rate = self.rate * self.keep + x * (1.0 - self.keep);
        self.seen = self.seen.saturating_add(1);
        self.seen >= self.required && self.rate < self.threshold
    }

    /// Back to a perfect record with nothing seen (on revival).
    pub fn reset(&mut self) {
        self.rate = 1.0;
        self.seen = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The rate stays in [0, 1]; a success never lowers it, a failure never raises it.
        #[test]
        fn rate_is_a_bounded_monotone_average(outcomes in proptest::collection::vec(any::<bool>(), 0..300),
                                              requests in 1u32..100) {
            let mut sr = SuccessRate::new(0.9, requests);
            for ok in outcomes {
                let before = sr.rate();
                let tripped = sr.record(ok);
                prop_assert!((0.0..=1.0).contains(&sr.rate()));
                let moved_right = if ok { sr.rate() >= before } else { sr.rate() <= before };
                prop_assert!(moved_right);
                prop_assert!(!tripped || sr.rate() < 0.9);
            }
        }

        /// A success share well above the threshold never trips, whatever the order.
        #[test]
        fn one_failure_in_twenty_never_trips_at_0_9(offset in 0u32..20) {
            let mut sr = SuccessRate::new(0.9, 20);
            for i in 0..2_000 {
                prop_assert!(!sr.record((i + offset) % 20 != 0));
            }
        }
    }
}
