//! Pending requests: the cost of an endpoint is the number of requests in flight to it.
//!
//! The "least loaded" metric of Finagle and Linkerd 1 (`p2c`, `heap`) and of Envoy's
//! `LEAST_REQUEST`; tower's `PendingRequests`. It sees queueing (a slow endpoint accumulates
//! requests) but not latency itself: with few requests in flight, a slow endpoint looks as cheap
//! as a fast one.

use super::{Estimator, Load, Snapshot};
use std::time::Duration;

/// Requests in flight to one endpoint.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pending {
    pending: u32,
}

impl Pending {
    /// Requests currently in flight.
    pub fn pending(&self) -> u32 {
        self.pending
    }
}

impl Load for Pending {
    fn cost(&mut self, _now: Duration) -> f64 {
        f64::from(self.pending)
    }
}

impl Estimator for Pending {
    fn start(&mut self, _now: Duration) {
        self.pending += 1;
    }

    fn end(&mut self, _rtt: Duration, _now: Duration) {
        self.pending = self.pending.saturating_sub(1);
    }

    fn snapshot(&self, _now: Duration) -> Option<Snapshot> {
        Some(Snapshot {
            cost: f64::from(self.pending),
            pending: self.pending,
        })
    }
}
