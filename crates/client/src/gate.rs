//! A service's admission, whole: its hard cap and adaptive limit on attempts in flight
//! ([`tailguard_resilience::limit`]), its queue of first attempts by criticality
//! ([`tailguard_resilience::admission`]), and what waits in it. The simulator keeps one per
//! client in virtual time, the proxy one per service behind a lock; both ask it at each
//! arrival, each retry or backup, each end of an attempt that held a place, and each
//! successful attempt's round trip.
//!
//! `K` is what the caller needs to wake a waiting request: the simulator's request key, the
//! proxy's sender. Everything that decides is here; the caller only delivers.

use crate::config::AdmissionConfig;
use std::collections::BTreeMap;
use std::time::Duration;
use tailguard_resilience::admission::{Admission, Arrival, Criticality, Estimate, Refusal, Ticket};
use tailguard_resilience::limit::ConcurrencyLimit;

/// One service's (or one simulated client's) admission state.
#[derive(Debug)]
pub struct Gate<K> {
    cfg: AdmissionConfig,
    admission: Admission,
    limit: Option<ConcurrencyLimit>,
    /// The requests waiting, by ticket (ordered: a run stays deterministic).
    waiting: BTreeMap<Ticket, K>,
    /// When the caller's expiry timer is set for (the caller's bookkeeping; the simulator's
    /// pending event).
    pub expiry_at: Option<Duration>,
    /// The typical successful attempt: an exponential average of their round trips (1/10).
    typical: Option<Duration>,
}

/// What became of an arriving request.
#[derive(Debug, PartialEq, Eq)]
pub enum Admitted<K> {
    /// Send its first attempt now (it holds a place: [`Gate::release`] when it ends).
    Now,
    /// It waits under this ticket; a request it displaced from a full queue (refused) is
    /// handed back.
    Waits(Ticket, Option<K>),
    /// Refused, and why.
    Refused(Refusal),
}

impl<K> Gate<K> {
    /// A gate with `cfg`'s settings, created at `now`.
    pub fn new(cfg: AdmissionConfig, now: Duration) -> Self {
        Gate {
            admission: Admission::new(cfg.queue),
            limit: cfg.limit.map(|l| ConcurrencyLimit::new(l, now)),
            cfg,
            waiting: BTreeMap::new(),
            expiry_at: None,
            typical: None,
        }
    }

    /// The bound on attempts in flight now: the adaptive limit (if any) under the cap (if any).
    pub fn bound(&self) -> u32 {
        self.cfg
            .bound(self.limit.as_ref().map(ConcurrencyLimit::limit))
    }

    /// Attempts holding a place now.
    pub fn in_flight(&self) -> u32 {
        self.admission.in_flight()
    }

    /// Requests waiting now.
    pub fn waiting(&self) -> usize {
        self.admission.waiting()
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

    /// Request `key` of `class`, due by `deadline`, arrives at `now`. Without the gate's
    /// `criticality`, every request is `default`.
    pub fn arrive(
        &mut self,
        now: Duration,
        key: K,
        class: Criticality,
        deadline: Option<Duration>,
    ) -> Admitted<K> {
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
            (Arrival::Refused(why), _) => Admitted::Refused(why),
        }
    }

    /// A retry or a backup: it goes (holding a place) only with room and no one waiting.
    pub fn try_extra(&mut self) -> bool {
        let bound = self.bound();
        self.admission.try_extra(bound)
    }

    /// An attempt that held a place ended at `now`; the requests that go now are pushed to
    /// `go`, and those whose deadline can no longer be met (or whose wait is over) to
    /// `refused`.
    pub fn release(&mut self, now: Duration, go: &mut Vec<K>, refused: &mut Vec<(K, Refusal)>) {
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
    pub fn learn(&mut self, now: Duration, rtt: Option<Duration>, go: &mut Vec<K>) {
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

    /// The waiting requests whose wait ends at `now` (`maxWait`, or a deadline that can no
    /// longer be met), pushed to `refused`.
    pub fn expire(&mut self, now: Duration, refused: &mut Vec<(K, Refusal)>) {
        let (bound, estimate) = (self.bound(), self.estimate());
        let mut out = Vec::new();
        self.admission.expire(now, bound, estimate, &mut out);
        for (t, why) in out {
            if let Some(k) = self.waiting.remove(&t) {
                refused.push((k, why));
            }
        }
    }

    /// When the next wait ends.
    pub fn next_expiry(&self) -> Option<Duration> {
        self.admission.next_expiry()
    }

    /// A waiting request ended otherwise (its total timeout, its caller gone): it leaves the
    /// queue, and its key is handed back (`None`: it was no longer waiting).
    pub fn cancel(&mut self, ticket: Ticket) -> Option<K> {
        self.admission.cancel(ticket);
        self.waiting.remove(&ticket)
    }
}
