//! The contract between the request path and a picker: [`Balance`].
//!
//! A balancer owns the load state of its endpoints (indexed `0..len()`), picks one per request,
//! and hears when each request starts and ends. Which endpoints may be picked right now (failure
//! accrual, outlier ejection, "not the one that just failed") is decided outside and passed to
//! [`Balance::pick`] as a `ready` predicate, so balancing and health stay apart.
//!
//! Every picker obeys the same two rules:
//! 1. it returns a ready endpoint whenever one exists;
//! 2. when none is ready it still returns one (chosen among all), as Finagle does when every
//!    node is down ("we might as well try") and as Envoy's panic threshold does: failing the
//!    request outright cannot be better than trying.
//!
//! The trait is object safe (`Box<dyn Balance + Send>`): the simulator and the proxy choose the
//! policy at run time. The hot path does not allocate.
//!
//! # Example
//! ```
//! use std::time::Duration;
//! use rand::SeedableRng;
//! use tailguard_balance::{Balance, RoundRobin};
//!
//! let mut rng = rand::rngs::StdRng::seed_from_u64(7);
//! let mut rr = RoundRobin::new(3);
//! let now = Duration::ZERO;
//! let down_is_1 = |i: usize| i != 1;
//! assert_eq!(rr.pick(now, &down_is_1, &mut rng), Some(0));
//! assert_eq!(rr.pick(now, &down_is_1, &mut rng), Some(2)); // 1 is skipped
//! assert_eq!(rr.pick(now, &|_| false, &mut rng), Some(0)); // all down: pick anyway
//! ```

use crate::load::Snapshot;
use rand::RngCore;
use std::time::Duration;

/// How many random draws a picker makes before it stops hoping to land on a ready endpoint by
/// chance and scans for one (Finagle's `maxEffort`).
pub const MAX_EFFORT: u32 = 5;

/// What an endpoint says when a probing balancer probes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProbeReply {
    /// Requests in flight there: in service and waiting.
    pub rif: u32,
    /// Its estimate of a request's latency there now.
    pub latency: Duration,
}

/// What a probing balancer made of a probe's reply ([`Balance::probe_reply`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProbeVerdict {
    /// The reply is in the pool as it came.
    Used,
    /// No reply: the endpoint is judged by what this client sees there.
    NoAnswer,
    /// The reply contradicted what this client sees there (or the endpoint lied lately): it
    /// is judged by this client's view instead.
    Distrusted,
    /// This balancer does not probe.
    Ignored,
}

/// Which endpoints may take a request now (`ready(i)`: endpoint `i` is in rotation, by the
/// caller's failure accrual and ejection), as every pick asks it.
pub type Ready<'a> = &'a dyn Fn(usize) -> bool;

/// Chooses an endpoint per request and tracks the load it creates.
pub trait Balance: std::fmt::Debug {
    /// Number of endpoints.
    fn len(&self) -> usize;

    /// True when there is no endpoint at all.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Picks an endpoint for a request at `now`: a ready one if any is ready, otherwise one of
    /// all. `None` only when there are no endpoints. Picking does not count as sending: call
    /// [`Balance::start`] when the request goes out.
    fn pick(&mut self, now: Duration, ready: Ready<'_>, rng: &mut dyn RngCore) -> Option<usize>;

    /// A request was sent to `endpoint` at `now`.
    fn start(&mut self, endpoint: usize, now: Duration);

    /// A request sent to `endpoint` ended at `now` after `rtt`, however it ended.
    fn end(&mut self, endpoint: usize, rtt: Duration, now: Duration);

    /// The request sent to `endpoint` at `sent` stopped waiting at `now`: its answer began
    /// (`answered`), or it was given up unanswered (once per [`Balance::start`], at or before
    /// its [`Balance::end`]; see [`crate::load::Estimator::settle`]). Only a balancer whose load
    /// prices an endpoint's silence listens.
    fn settle(&mut self, endpoint: usize, sent: Duration, answered: bool, now: Duration) {
        let _ = (endpoint, sent, answered, now);
    }

    /// The load of `endpoint` at `now` as this balancer weighs it, read without changing any
    /// state (for metrics and admin pages; picking never calls it). `None` when the balancer
    /// tracks no load (round robin, random) or `endpoint` is out of range.
    fn snapshot(&self, endpoint: usize, now: Duration) -> Option<Snapshot> {
        let _ = (endpoint, now);
        None
    }

    /// Slow start for the endpoints this balancer warms up ([`Balance::warm_up`]); `None` turns
    /// it off. Only the load-aware pickers of [`crate::BestOf`] listen: the others take no
    /// cost to scale.
    fn set_slow_start(&mut self, slow_start: Option<crate::SlowStart>) {
        let _ = slow_start;
    }

    /// `endpoint` joined (or came back) at `since`: its cost is divided by the slow-start
    /// factor of the time since, until the window is over ([`crate::slow_start`]).
    fn warm_up(&mut self, endpoint: usize, since: Duration) {
        let _ = (endpoint, since);
    }

    /// A request sent to `endpoint` failed at `now` (an endpoint-side failure by the caller's
    /// classifier; [`Balance::end`] is called as well). Only a probing balancer, whose replies
    /// cannot tell a fast failure from a fast success, listens.
    fn failed(&mut self, endpoint: usize, now: Duration) {
        let _ = (endpoint, now);
    }

    /// The endpoints this balancer wants probed now, appended to `out` (called after each
    /// pick; only a probing balancer wants any). The caller sends the probes off the request
    /// path and reports each with [`Balance::probe_reply`].
    fn probe_targets(
        &mut self,
        now: Duration,
        ready: Ready<'_>,
        rng: &mut dyn RngCore,
        out: &mut Vec<usize>,
    ) {
        let _ = (now, ready, rng, out);
    }

    /// A probe of `endpoint` came back at `now` with `reply`, or failed (`None`); returns what
    /// became of it.
    fn probe_reply(
        &mut self,
        endpoint: usize,
        reply: Option<ProbeReply>,
        now: Duration,
    ) -> ProbeVerdict {
        let _ = (endpoint, reply, now);
        ProbeVerdict::Ignored
    }
}

/// The predicate for "every endpoint is ready".
pub fn all_ready(_endpoint: usize) -> bool {
    true
}
