//! Trip after `n` failures in a row (Finagle's `FailureAccrualPolicy.consecutiveFailures`;
//! Linkerd 1's `io.l5d.consecutiveFailures`, default 5; linkerd2-proxy's breaker, default 7).
//!
//! Simple and quick on a dead endpoint, blind to one that fails every other request.
//!
//! # Example
//! ```
//! use tailguard_resilience::accrual::ConsecutiveFailures;
//!
//! let mut c = ConsecutiveFailures::new(2);
//! assert!(!c.record(false));
//! assert!(!c.record(true)); // a success resets the count
//! assert!(!c.record(false));
//! assert!(c.record(false));
//! ```

/// Counts failures since the last success.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsecutiveFailures {
    limit: u32,
    failures: u32,
}

impl ConsecutiveFailures {
    /// Trips at `limit` failures in a row (at least 1).
    pub fn new(limit: u32) -> Self {
        Self {
            limit: limit.max(1),
            failures: 0,
        }
    }

    /// Records one outcome; true when the endpoint should be marked dead.
    pub fn record(&mut self, success: bool) -> bool {
        self.failures = if success { 0 } else { self.failures + 1 };
        self.failures >= self.limit
    }

    /// Forgets the history (on revival).
    pub fn reset(&mut self) {
        self.failures = 0;
    }
}
