//! Load metrics: how costly it is to send the next request to one endpoint.
//!
//! A picker reads a [`Load`] and nothing else, so pickers can be tested with a constant load and
//! every picker works over every metric. This split is tower's (`tower::load::Load` apart from
//! `tower::balance::p2c`). The request path feeds an [`Estimator`] (a `Load` that also sees each
//! request start and end); the two estimators are:
//!
//! - [`Pending`]: the number of requests in flight (Finagle's and Linkerd 1's "least loaded");
//! - [`PeakEwma`]: a peak-sensitive moving average of the round-trip time (or the mean age of
//!   the requests still waiting, when higher), times `pending + 1`.
//!
//! # Example
//! ```
//! use std::time::Duration;
//! use tailguard_balance::load::{Estimator, Load, Pending};
//!
//! let now = Duration::ZERO;
//! let mut load = Pending::default();
//! load.start(now);
//! assert_eq!(load.cost(now), 1.0);
//! assert_eq!(load.snapshot(now).map(|s| s.pending), Some(1)); // read-only, for metrics
//! load.end(Duration::from_millis(5), now);
//! assert_eq!(load.cost(now), 0.0);
//! ```

mod peak_ewma;
mod pending;
mod quiet;

pub use peak_ewma::{PeakEwma, PeakEwmaConfig, PeakEwmaError};
pub use pending::Pending;
pub use quiet::Quiet;

use std::time::Duration;

/// The cost of sending one more request to an endpoint: lower is better.
///
/// `now` is the time since an epoch the caller fixes once (the start of a simulation, or the
/// proxy's start-up instant); it must not go backwards. Reading takes `&mut self` because some
/// metrics decay when read (see [`PeakEwma`]).
pub trait Load {
    /// The endpoint's cost at `now`. Never negative, never NaN.
    fn cost(&mut self, now: Duration) -> f64;
}

/// A [`Load`] that the request path keeps up to date.
pub trait Estimator: Load {
    /// A request was sent to this endpoint at `now`.
    fn start(&mut self, now: Duration);

    /// A request sent earlier ended at `now` after `rtt` (response, failure, timeout or
    /// cancellation: every `start` is matched by exactly one `end`).
    fn end(&mut self, rtt: Duration, now: Duration);

    /// The request sent at `sent` stopped waiting for the endpoint at `now`: its answer began
    /// (`answered`: a response head, an error status, a refused or reset connection), or it was
    /// given up unanswered (a timeout, a backup that won, a cancelled request). Every `start`
    /// is matched by exactly one `settle`, at or before its `end` (a streamed answer settles at
    /// its first byte and ends at its last). Only an estimator that prices an endpoint's
    /// silence listens.
    fn settle(&mut self, sent: Duration, answered: bool, now: Duration) {
        let _ = (sent, answered, now);
    }

    /// This endpoint's cost and requests in flight at `now`, read without changing anything
    /// (a metric that decays on read is decayed in the copy, not in place), for metrics and
    /// admin pages. `None` for estimators that do not track them.
    fn snapshot(&self, now: Duration) -> Option<Snapshot> {
        let _ = now;
        None
    }
}

/// One endpoint's load as its balancer sees it, read without changing it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Snapshot {
    /// The cost a picker would compare at `now`, in the estimator's units (requests for
    /// [`Pending`], nanoseconds times `pending + 1` for [`PeakEwma`]).
    pub cost: f64,
    /// Requests in flight.
    pub pending: u32,
}

/// A load that never changes: for tests and for pickers that ignore load.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Constant(pub f64);

impl Load for Constant {
    fn cost(&mut self, _now: Duration) -> f64 {
        self.0
    }
}

impl Estimator for Constant {
    fn start(&mut self, _now: Duration) {}

    fn end(&mut self, _rtt: Duration, _now: Duration) {}

    fn snapshot(&self, _now: Duration) -> Option<Snapshot> {
        Some(Snapshot {
            cost: self.0,
            pending: 0,
        })
    }
}
