//! A client's admission in virtual time: its cap or adaptive limit on attempts in flight and
//! its queue of first attempts ([`tailguard_resilience::admission`], the same code the proxy
//! runs). The engine (`mod.rs`) asks it at each arrival, each retry or backup, and each end of
//! an attempt that held a place.

use super::slab::Key;
use crate::client::AdmissionConfig;
use std::collections::BTreeMap;
use std::time::Duration;
use tailguard_resilience::admission::{Admission, Arrival, Criticality, Estimate, Ticket};
use tailguard_resilience::limit::ConcurrencyLimit;

/// One client's admission state.
pub(super) struct Gate {
    cfg: AdmissionConfig,
    admission: Admission,
    limit: Option<ConcurrencyLimit>,
    /// The requests waiting, by ticket (ordered: the run stays deterministic).
    waiting: BTreeMap<Ticket, Key>,
    /// When a queue expiry event is pending for.
    pub(super) expiry_at: Option<Duration>,
    /// The typical successful attempt: an exponential average of their round trips (1/10).
    typical: Option<Duration>,
}

/// What became of an arriving request, in the engine's terms.
pub(super) enum Admitted {
    /// Send its first attempt now.
    Now,
    /// It waits; a request it displaced from a full queue is refused.
    Waits(Ticket, Option<Key>),
    /// Refused.
    Refused,
}

impl Gate {
    pub(super) fn new(cfg: AdmissionConfig, now: Duration) -> Self {
        Gate {
            admission: Admission::new(cfg.queue),
            limit: cfg.limit.map(|l| ConcurrencyLimit::new(l, now)),
            cfg,
            waiting: BTreeMap::new(),
            expiry_at: None,
            typical: None,
        }
    }

    /// The bound on attempts in flight now.
    pub(super) fn bound(&self) -> u32 {
        self.cfg
            .bound(self.limit.as_ref().map(ConcurrencyLimit::limit))
    }

    /// What a waiting request's expected wait is made of: the limiter's long-term round trip
    /// (else the typical attempt's) per turn, and the typical attempt. `None` until an attempt
    /// has succeeded: the deadline rule needs a figure.
    fn estimate(&self) -> Option<Estimate> {
        let typical = self.typical?;
        let rtt = self
            .limit
            .as_ref()
            .and_then(ConcurrencyLimit::long_rtt)
            .unwrap_or(typical);
        Some(Estimate { rtt, p50: typical })
    }

    /// Request `key` of `class`, due by `deadline`, arrives at `now`.
    pub(super) fn arrive(
        &mut self,
        now: Duration,
        key: Key,
        class: Criticality,
        deadline: Option<Duration>,
    ) -> Admitted {
        let (bound, estimate) = (self.bound(), self.estimate());
        let class = match self.cfg.criticality {
            true => class,
            false => Criticality::Default,
        };
        match self.admission.arrive(now, class, deadline, bound, estimate) {
            (Arrival::Admitted, _) => Admitted::Now,
            (Arrival::Queued(t), displaced) => {
                self.waiting.insert(t, key);
                let displaced = displaced.and_then(|d| self.waiting.remove(&d));
                Admitted::Waits(t, displaced)
            }
            (Arrival::Refused(_), _) => Admitted::Refused,
        }
    }

    /// A retry or a backup: it goes only with room and no one waiting.
    pub(super) fn try_extra(&mut self) -> bool {
        let bound = self.bound();
        self.admission.try_extra(bound)
    }

    /// An attempt that held a place ended at `now`; the requests that go now are pushed to
    /// `go`, and those whose deadline can no longer be met (or whose wait is over) to
    /// `refused`.
    pub(super) fn release(&mut self, now: Duration, go: &mut Vec<Key>, refused: &mut Vec<Key>) {
        let bound = self.bound();
        let mut tickets = Vec::new();
        self.admission.release(bound, &mut tickets);
        go.extend(tickets.iter().filter_map(|t| self.waiting.remove(t)));
        if self.admission.waiting() > 0 {
            self.expire(now, refused);
        }
    }

    /// A successful attempt's round trip, or a timeout (`None`), for the adaptive limit and
    /// the typical attempt; the requests a higher limit lets go are pushed to `go`.
    pub(super) fn learn(&mut self, now: Duration, rtt: Option<Duration>, go: &mut Vec<Key>) {
        if let Some(rtt) = rtt {
            self.typical = Some(match self.typical {
                None => rtt,
                Some(t) => t.mul_f64(0.9) + rtt.mul_f64(0.1),
            });
        }
        let in_flight = self.admission.in_flight();
        let Some(limit) = &mut self.limit else {
            return;
        };
        match rtt {
            Some(rtt) => limit.on_sample(now, rtt, in_flight),
            None => limit.on_drop(now, in_flight),
        }
        let bound = self.bound();
        let mut tickets = Vec::new();
        self.admission.admit_waiting(bound, &mut tickets);
        go.extend(tickets.iter().filter_map(|t| self.waiting.remove(t)));
    }

    /// The waiting requests whose wait ends at `now` (`max_wait`, or a deadline that can no
    /// longer be met), pushed to `refused`.
    pub(super) fn expire(&mut self, now: Duration, refused: &mut Vec<Key>) {
        let (bound, estimate) = (self.bound(), self.estimate());
        let mut out = Vec::new();
        self.admission.expire(now, bound, estimate, &mut out);
        refused.extend(out.iter().filter_map(|(t, _)| self.waiting.remove(t)));
    }

    /// When the next wait ends.
    pub(super) fn next_expiry(&self) -> Option<Duration> {
        self.admission.next_expiry()
    }

    /// A waiting request ended otherwise (its total timeout).
    pub(super) fn cancel(&mut self, ticket: Ticket) {
        self.admission.cancel(ticket);
        self.waiting.remove(&ticket);
    }
}
