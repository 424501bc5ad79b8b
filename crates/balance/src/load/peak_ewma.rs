//! Peak EWMA: a round-trip-time estimate that jumps up at once and comes down slowly.
//!
//! # What
//! Per endpoint: an RTT `estimate`, the `stamp` of its last update, and the `pending` count.
//!
//! 1. `cost = max(estimate, silence) * (pending + 1)`: latency weighted by queue depth, where
//!    `silence` is how long the endpoint has owed an answer (0 when nothing waits; step 5).
//! 2. A completed request with round trip `rtt` at `now`: if `rtt > estimate`, the estimate
//!    becomes `rtt` (the "peak"); otherwise, with `w = exp(-(now - stamp) / tau)`,
//!    `estimate = estimate * w + rtt * (1 - w)`. Then `stamp = now`.
//! 3. Reading the cost first observes an RTT of zero at `now`: the estimate decays toward zero
//!    with time constant `tau` between samples, and `stamp` moves to `now`. Finagle
//!    (`PeakEwma` in `finagle-core`'s load balancer), tower (`tower::load::PeakEwma`) and the
//!    Envoy contrib policy all decay on read; so does this one. Because decays compose
//!    (`exp(-a) * exp(-b) = exp(-(a + b))`), how often the cost is read does not change how fast
//!    an idle estimate falls; it does make a later lower sample count for less, since `w` is
//!    measured from the last read, not the last sample.
//! 4. Until its first sample, an endpoint costs `default_rtt * (pending + 1)`, and that default
//!    does not decay; the first sample replaces it whatever its size. (tower seeds the estimate
//!    with the default and lets it decay; Finagle starts at zero and adds a large penalty while
//!    the first request is outstanding. Holding the default keeps a new endpoint neither free nor
//!    shunned.)
//!
//! 5. *A stall*: the estimator counts the requests still waiting for their answer (`start`
//!    adds one; [`Estimator::settle`] removes it when its answer begins, or when it is given up)
//!    and keeps `quiet_since`, the time since which the endpoint has owed an answer: set when a
//!    request starts with none waiting, moved to `now` by every answer while others still wait.
//!    `silence = now - quiet_since` while requests wait. An attempt given up unanswered (a
//!    timeout, a backup that won, a cancelled request) is a peak sample of the silence so far,
//!    and the silence carries over to the next request until the endpoint answers one, so an
//!    endpoint whose requests are all given up does not look fresh to the next. O(1), `now`
//!    passed in. With [`PeakEwmaConfig::pending_age`] off, `silence` is 0 and a given-up request
//!    teaches nothing but its own round trip: linkerd2-proxy's cost.
//!
//! # Why
//! Round trips are learned only when they end. An endpoint that stops answering (a GC pause, a
//! `SIGSTOP`, a full disk) completes nothing, so its estimate stays at its last fast value and,
//! without the silence, it keeps winning picks until every caller waits there (`tailguard sim
//! stall`). The silence prices the stall as it grows: the endpoint costs more than a healthy
//! one as soon as it has been quiet longer than the healthy round trip while owing answers. It
//! never lowers a cost, and an endpoint that answers steadily resets it with every answer, so
//! it changes nothing there; one slow request on an endpoint that keeps answering the others
//! is a request's problem (hedging's), not a stall. An answer that starts and then streams (a
//! gRPC server stream) settles at its first byte, so a long stream is not a stall.
//!
//! A slow endpoint must lose traffic as soon as one slow response shows it (the peak), and
//! win it back only gradually, so one lucky fast response does not undo the lesson. Weighting
//! by `pending + 1` keeps load spreading when estimates are equal. This is what keeps the tail
//! short in seed 002 ("Beyond Round Robin"). Defaults are linkerd2-proxy's: `tau` 10 s,
//! `default_rtt` 30 ms.
//!
//! # Example
//! ```
//! use std::time::Duration;
//! use tailguard_balance::load::{Estimator, Load, PeakEwma, PeakEwmaConfig};
//!
//! let ms = Duration::from_millis;
//! let mut e = PeakEwma::new(PeakEwmaConfig::default(), Duration::ZERO);
//! assert_eq!(e.cost(ms(0)), 30e6); // the default RTT, in nanoseconds
//! e.start(ms(0));
//! e.settle(ms(0), true, ms(200)); // its answer begins...
//! e.end(ms(200), ms(200)); // ...and ends: a slow response, the estimate jumps to it
//! assert_eq!(e.estimate(), ms(200));
//! let later = e.cost(ms(10_200)); // ten seconds idle: down by a factor e
//! assert!((later - 200e6 / std::f64::consts::E).abs() < 1.0);
//! ```

use super::{Estimator, Load, Quiet, Snapshot};
use std::time::Duration;

/// Parameters of [`PeakEwma`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeakEwmaConfig {
    /// Decay time constant: after `tau` without samples the estimate is down to `1/e`.
    pub tau: Duration,
    /// The RTT assumed for an endpoint that has not answered yet.
    pub default_rtt: Duration,
    /// Price an endpoint by how long it has owed an answer when that is above the estimate
    /// (step 5; on by default; the key `pendingAge`).
    pub pending_age: bool,
}

impl Default for PeakEwmaConfig {
    /// linkerd2-proxy's defaults (decay 10 s, default RTT 30 ms), with the pending age on.
    fn default() -> Self {
        Self {
            tau: Duration::from_secs(10),
            default_rtt: Duration::from_millis(30),
            pending_age: true,
        }
    }
}

/// A [`PeakEwmaConfig`] that cannot work.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PeakEwmaError {
    /// `tau` must be positive: a zero time constant forgets every sample at once.
    #[error("peak EWMA decay time (tau) must be above zero")]
    ZeroTau,
}

impl PeakEwmaConfig {
    /// Checks the parameters.
    ///
    /// # Errors
    /// [`PeakEwmaError::ZeroTau`] when `tau` is zero.
    pub fn validate(&self) -> Result<(), PeakEwmaError> {
        if self.tau.is_zero() {
            return Err(PeakEwmaError::ZeroTau);
        }
        Ok(())
    }
}

/// The peak EWMA estimator of one endpoint.
#[derive(Clone, Debug, PartialEq)]
pub struct PeakEwma {
    tau_ns: f64,
    /// RTT estimate in nanoseconds (the default RTT until `sampled`).
    estimate_ns: f64,
    stamp: Duration,
    pending: u32,
    sampled: bool,
    pending_age: bool,
    quiet: Quiet,
}

impl PeakEwma {
    /// A new estimator created at `now`. A zero `tau` is raised to one nanosecond; call
    /// [`PeakEwmaConfig::validate`] at the edge to reject it instead.
    pub fn new(config: PeakEwmaConfig, now: Duration) -> Self {
        Self {
            tau_ns: nanos(config.tau).max(1.0),
            estimate_ns: nanos(config.default_rtt),
            stamp: now,
            pending: 0,
            sampled: false,
            pending_age: config.pending_age,
            quiet: Quiet::default(),
        }
    }

    /// The current RTT estimate, without decaying it.
    pub fn estimate(&self) -> Duration {
        Duration::from_nanos(self.estimate_ns as u64)
    }

    /// Requests in flight.
    pub fn pending(&self) -> u32 {
        self.pending
    }

    /// How long the endpoint has owed an answer at `now` (zero when nothing waits, or with the
    /// pending age off).
    pub fn silence(&self, now: Duration) -> Duration {
        if !self.pending_age {
            return Duration::ZERO;
        }
        self.quiet.silence(now)
    }

    /// The price of one more request at `now` from an estimate in nanoseconds (step 1).
    fn price(&self, estimate_ns: f64, now: Duration) -> f64 {
        estimate_ns.max(nanos(self.silence(now))) * (f64::from(self.pending) + 1.0)
    }

    /// True once a round trip was observed.
    pub fn is_sampled(&self) -> bool {
        self.sampled
    }

    /// Feeds one round trip observed at `now` (step 2; the first sample replaces the default).
    pub fn observe(&mut self, rtt: Duration, now: Duration) {
        let rtt_ns = nanos(rtt);
        if !self.sampled || rtt_ns > self.estimate_ns {
            self.estimate_ns = rtt_ns;
        } else {
            let w = self.weight(now);
            self.estimate_ns = self.estimate_ns * w + rtt_ns * (1.0 - w);
        }
        self.sampled = true;
        self.stamp = self.stamp.max(now);
    }

    /// Step 3: observe a zero RTT at `now`, so the estimate decays between samples.
    fn decay(&mut self, now: Duration) {
        if self.sampled {
            self.estimate_ns *= self.weight(now);
            self.stamp = self.stamp.max(now);
        }
    }

    /// `exp(-(now - stamp) / tau)`: 1 when no time passed (or time went backwards).
    fn weight(&self, now: Duration) -> f64 {
        let elapsed = nanos(now.saturating_sub(self.stamp));
        (-elapsed / self.tau_ns).exp()
    }
}

impl Load for PeakEwma {
    /// Decays the estimate to `now` (as Finagle and tower do on read), then returns
    /// `max(estimate, age) * (pending + 1)` in nanoseconds.
    fn cost(&mut self, now: Duration) -> f64 {
        self.decay(now);
        self.price(self.estimate_ns, now)
    }
}

impl Estimator for PeakEwma {
    fn start(&mut self, now: Duration) {
        self.pending += 1;
        self.quiet.start(now);
    }

    fn settle(&mut self, _sent: Duration, answered: bool, now: Duration) {
        let given_up = self.quiet.settle(answered, now);
        if let Some(silence) = given_up.filter(|_| self.pending_age) {
            if nanos(silence) > self.estimate_ns || !self.sampled {
                self.observe(silence, now);
            }
        }
    }

    fn end(&mut self, rtt: Duration, now: Duration) {
        self.pending = self.pending.saturating_sub(1);
        self.observe(rtt, now);
    }

    /// The cost [`Load::cost`] would return at `now`, without decaying the estimate in place.
    fn snapshot(&self, now: Duration) -> Option<Snapshot> {
        let weight = if self.sampled { self.weight(now) } else { 1.0 };
        Some(Snapshot {
            cost: self.price(self.estimate_ns * weight, now),
            pending: self.pending,
        })
    }
}

fn nanos(d: Duration) -> f64 {
    d.as_nanos() as f64
}

#[cfg(test)]
mod tests;
