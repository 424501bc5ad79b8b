//! Trip when the success rate over the last `window` of time falls below a threshold, given at
//! least `min_requests` in that window (Linkerd 1's `io.l5d.successRateWindowed`, Finagle's
//! `successRateWithinDuration`, minimum 5 requests).
//!
//! Unlike the per-request average, an endpoint that gets little traffic is judged on what it did
//! recently, not on requests from long ago.
//!
//! # Example
//! ```
//! use std::time::Duration;
//! use tailguard_resilience::accrual::WindowedSuccessRate;
//!
//! let s = Duration::from_secs;
//! let mut w = WindowedSuccessRate::new(0.5, s(30), 5);
//! for t in 0..4 {
//!     assert!(!w.record(false, s(t))); // four requests: below the minimum
//! }
//! assert!(w.record(false, s(4)));
//! ```

use crate::window::Window;
use std::time::Duration;

/// Success and request counts over a sliding time window.
#[derive(Clone, Debug, PartialEq)]
pub struct WindowedSuccessRate {
    threshold: f64,
    window_len: Duration,
    min_requests: u32,
    window: Window<2>,
}

impl WindowedSuccessRate {
    /// Trips below `threshold` over `window`, given at least `min_requests` in it.
    pub fn new(threshold: f64, window: Duration, min_requests: u32) -> Self {
        Self {
            threshold,
            window_len: window,
            min_requests: min_requests.max(1),
            window: Window::new(window),
        }
    }

    /// Records one outcome at `now`; true when the endpoint should be marked dead.
    pub fn record(&mut self, success: bool, now: Duration) -> bool {
        self.window.add(now, [i64::from(success), 1]);
        let [good, total] = self.window.sum(now);
        total >= i64::from(self.min_requests) && (good as f64) < self.threshold * total as f64
    }

    /// Forgets the history (on revival).
    pub fn reset(&mut self) {
        self.window = Window::new(self.window_len);
    }
}
