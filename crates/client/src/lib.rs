//! The request path of one client-side balancer, assembled from the pure crates.
//!
//! An [`ArmConfig`] says what a client does: a balancing [`Policy`](tailguard_balance::Policy), a [`Classifier`], and
//! optional retries under a budget, failure accrual, latency outlier ejection, hedging and
//! timeouts. A [`Client`] holds the running state for one client over `n` endpoints, and is the
//! only place that combines them:
//!
//! 1. [`Client::on_request`]: a request arrives (deposits into the retry and hedge budgets).
//! 2. [`Client::pick`]: an endpoint that accrual and ejection allow, other than the one to
//!    avoid (the endpoint a retry or hedge must not go back to); if none is allowed, any
//!    endpoint but that one; if there is only one endpoint, that one.
//! 3. [`Client::on_send`] / [`Client::on_complete`] / [`Client::on_cancel`]: every attempt
//!    feeds the balancer's load, the accrual state machine, the ejection statistics and the
//!    hedge histogram, in that order. The [`Sent`] that `on_send` returns goes back with the
//!    outcome; an answer that starts before its outcome is known (a gRPC stream) is marked
//!    with [`Client::on_answer`], so the stream is not taken for a stall.
//! 4. [`Client::may_retry`] / [`Client::may_backup`]: the budgets decide; a backup is a hedge
//!    (the hedge budget) or the rescue of an attempt whose endpoint has gone silent (the retry
//!    budget; see *A stalled endpoint* below).
//!
//! # Pushback
//! A backend may say how long to leave it alone: `Retry-After` on a 429 or 503.
//! [`Client::on_pushback`] keeps such an endpoint out of picks for that long, capped at
//! [`ArmConfig::pushback_max`] (10 s by default), and never more than half of the endpoints at
//! once (the others' pushbacks are noted, not honoured, so a backend cannot empty the set);
//! when every endpoint has asked, [`Client::pushed_back`] says how long until the first may be
//! asked again, so the caller can answer at once. A 429 that asks is not a failure for accrual
//! ([`Client::on_complete_pushed`]).
//!
//! # A stalled endpoint
//! An endpoint that stops answering (a GC pause, `SIGSTOP`) holds every request already sent
//! to it. The balancer stops sending more as soon as it notices (peak EWMA prices the silence,
//! [`tailguard_balance::load::Quiet`]); the requests already there are rescued when
//! [`ArmConfig::rescue`] is on: at the backup delay (the hedger's, or the p99 of successful
//! attempts capped at [`STALLED_FACTOR`] times the typical endpoint's mean when hedging is off)
//! the client checks the attempt's endpoint, and if it has answered nothing for that long and
//! for ten times its own mean latency, a backup goes to another endpoint, charged to the retry
//! budget like the retry of a lost attempt; the first success wins. An endpoint that answers
//! other requests meanwhile is slow, not stalled: its attempt waits (or is hedged, if hedging
//! is on). The client tracks each endpoint's silence itself, so rescue works under every
//! balancer.
//!
//! # A fast failure never looks cheap
//! A load estimate that learns from round trips rewards an endpoint that fails fast: a refused
//! connection or an instant 503 is the cheapest answer there is, so peak EWMA would send a
//! broken endpoint *more* traffic (Prequal calls this "sinkholing"). So the load estimate of a
//! failed attempt, or of an explicit overload answer (HTTP 429, gRPC RESOURCE_EXHAUSTED), is
//! `max(rtt, failure_penalty)` ([`ArmConfig::failure_penalty`], 1 s by default), as Linkerd 2's
//! load biaser scores a 429 as 5 s of latency. Only the load estimate is charged: outlier
//! ejection and hedging see the real round trip, and accrual sees the outcome.
//!
//! The simulator drives it in virtual time; the proxy is meant to drive the same struct with
//! `now` taken from its clock, so an arm in `tailguard sim` and a route in `tailguard proxy`
//! run the same code with the same parameters.
//!
//! # Example
//! ```
//! use std::time::Duration;
//! use rand::SeedableRng;
//! use tailguard_balance::{LoadKind, Policy};
//! use tailguard_resilience::{AttemptOutcome, Method};
//! use tailguard_client::{ArmConfig, Client};
//!
//! let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(1);
//! let arm = ArmConfig::new("ewma", Policy::p2c(LoadKind::peak_ewma()));
//! let mut client = Client::new(&arm, 3, Duration::ZERO, &mut rng).unwrap();
//! let now = Duration::from_millis(5);
//! client.on_request(now);
//! let endpoint = client.pick(now, None, &mut rng);
//! let sent = client.on_send(endpoint, now);
//! let (rtt, done) = (Duration::from_millis(20), Duration::from_millis(25));
//! let end = client.on_complete(endpoint, sent, rtt, Method::Get, AttemptOutcome::Status(200), done, &mut rng);
//! assert!(end.class.success);
//! ```

#![warn(missing_docs)]

mod config;
pub mod gate;
pub mod spec;

pub use config::{
    AdmissionConfig, ArmConfig, ArmError, RetryConfig, Timeouts, DEFAULT_FAILURE_PENALTY,
    DEFAULT_PUSHBACK_MAX, MAX_QUEUE,
};
pub use tailguard_resilience::accrual::Transition;

use rand::RngCore;
use std::time::Duration;
use tailguard_balance::load::Quiet;
use tailguard_balance::{Balance, ProbeVerdict};
use tailguard_resilience::hedge::STALLED_FACTOR;
use tailguard_resilience::{
    Accrual, AttemptOutcome, Class, Classifier, HedgeConfig, Hedger, Method, OutlierDetector,
    RetryBudget, Ticket,
};

/// What to do about a first attempt still out at its backup delay ([`Client::may_backup`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backup {
    /// Send a hedge (the hedge budget was charged).
    Hedge,
    /// Send a rescue: the endpoint is silent (the retry budget was charged).
    Rescue,
    /// Nothing yet: ask again after this long (rescue is on and the endpoint may still turn
    /// out silent, or the retry budget may refill).
    Wait(Duration),
    /// No backup for this attempt (hedging's budget refused, and no rescue).
    No,
}

/// The delay quantile of the rescue check when hedging is off: p99 of successful attempts.
const RESCUE_QUANTILE_LOAD: f64 = 0.01;

/// How long after a refusal by the concurrency limit the budgets' floors stay suspended.
pub const OVERLOAD_MEMORY: Duration = Duration::from_secs(1);

/// How an attempt ended, as [`Client::on_complete`] judged it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    /// Its class: success, and whether a failure may be retried.
    pub class: Class,
    /// The change it made to its endpoint's failure accrual, if any: out of rotation
    /// (tripped) or back in it (revived).
    pub transition: Option<Transition>,
}

/// One attempt from [`Client::on_send`] to its end ([`Client::on_complete`] or
/// [`Client::on_cancel`], which take it back): when it was sent, whether it stopped waiting for
/// its endpoint, and its failure-accrual ticket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sent {
    at: Duration,
    settled: bool,
    ticket: Option<Ticket>,
}

impl Sent {
    /// When the attempt was sent.
    pub fn at(&self) -> Duration {
        self.at
    }

    /// Its failure-accrual ticket (`None` without accrual).
    pub fn ticket(&self) -> Option<Ticket> {
        self.ticket
    }
}

/// Counters of what a client's resilience machinery did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClientStats {
    /// Endpoints marked dead by failure accrual.
    pub trips: u64,
    /// Retries the budget granted.
    pub retries: u64,
    /// Retries the budget refused.
    pub retries_refused: u64,
    /// Backup requests sent by hedging.
    pub hedges: u64,
    /// Backups sent to rescue an attempt at a silent endpoint (also counted in `retries`).
    pub rescues: u64,
    /// Load probes asked for (a probing balancer only).
    pub probes: u64,
    /// Probe replies distrusted: they contradicted what this client saw at the endpoint.
    pub probes_distrusted: u64,
}

/// The running request path of one client over `n` endpoints (see the module docs).
#[derive(Debug)]
pub struct Client {
    balancer: Box<dyn Balance + Send>,
    accrual: Vec<Accrual>,
    outlier: Option<OutlierDetector>,
    budget: Option<RetryBudget>,
    hedger: Option<Hedger>,
    /// The rescue's delay when hedging is off (its budget unused).
    rescue_timer: Option<Hedger>,
    /// Each endpoint's silence, when rescue is on.
    quiet: Vec<Quiet>,
    /// Each endpoint's pushback, when honoured at all (`pushback_max`).
    pushed: Vec<Pushed>,
    pushback_max: Option<Duration>,
    /// Each endpoint's active health check verdicts (empty: no checks), and how many are
    /// unhealthy.
    health: Vec<tailguard_resilience::Health>,
    unhealthy: usize,
    health_check: Option<tailguard_resilience::HealthCheckConfig>,
    /// When each endpoint began its slow start (empty: slow start is off).
    warm_since: Vec<Option<Duration>>,
    slow_start: Option<tailguard_balance::SlowStart>,
    classifier: Classifier,
    failure_penalty: Option<Duration>,
    /// Until when the budgets' per-second floors are suspended ([`Client::on_overload`]).
    floors_off_until: Duration,
    stats: ClientStats,
}

impl Client {
    /// A client over `endpoints` endpoints, created at `now`.
    ///
    /// # Errors
    /// When the arm does not validate.
    pub fn new(
        arm: &ArmConfig,
        endpoints: usize,
        now: Duration,
        rng: &mut dyn RngCore,
    ) -> Result<Self, ArmError> {
        arm.validate()?;
        let rescue = arm.rescue && arm.retries.is_some();
        let accrual = match &arm.accrual {
            Some(config) => vec![Accrual::new(config); endpoints],
            None => Vec::new(),
        };
        let mut balancer = arm.policy.build(endpoints, now, rng)?;
        balancer.set_slow_start(arm.slow_start);
        Ok(Self {
            balancer,
            accrual,
            outlier: arm.outlier.map(|c| OutlierDetector::new(endpoints, c)),
            budget: arm.retries.map(|r| RetryBudget::new(r.budget)),
            hedger: arm.hedge.map(|h| Hedger::new(h, endpoints)),
            rescue_timer: (rescue && arm.hedge.is_none()).then(|| {
                let config = HedgeConfig {
                    max_extra_load: RESCUE_QUANTILE_LOAD,
                    ..HedgeConfig::default()
                };
                Hedger::new(config, endpoints)
            }),
            quiet: if rescue {
                vec![Quiet::default(); endpoints]
            } else {
                Vec::new()
            },
            pushed: match arm.pushback_max {
                Some(_) => vec![Pushed::default(); endpoints],
                None => Vec::new(),
            },
            pushback_max: arm.pushback_max,
            health: match arm.health_check {
                Some(_) => vec![tailguard_resilience::Health::default(); endpoints],
                None => Vec::new(),
            },
            unhealthy: 0,
            health_check: arm.health_check.clone(),
            warm_since: match arm.slow_start {
                Some(_) => vec![None; endpoints],
                None => Vec::new(),
            },
            slow_start: arm.slow_start,
            classifier: arm.classifier,
            failure_penalty: arm.failure_penalty,
            floors_off_until: Duration::ZERO,
            stats: ClientStats::default(),
        })
    }

    /// Takes over what `old` learned, when the endpoint set changes at `now`: `from[i]` is the
    /// index in `old` of this client's endpoint `i` (`None`: a new endpoint, which starts
    /// fresh). Each kept endpoint's failure accrual carries over (a dead endpoint stays dead;
    /// see [`tailguard_resilience::Accrual::carried`]), and so do the retry budget, the hedger
    /// (its latencies and budget belong to the service, not to an endpoint) and the counters. Load estimates and outlier statistics start fresh: they re-learn within one
    /// decay time.
    pub fn inherit(&mut self, old: &Client, from: &[Option<usize>], now: Duration) {
        for (slot, j) in self.accrual.iter_mut().zip(from) {
            if let Some(a) = j.and_then(|j| old.accrual.get(j)) {
                *slot = a.carried(now);
            }
        }
        if let (Some(b), Some(prev)) = (&mut self.budget, &old.budget) {
            *b = prev.clone();
        }
        if let (Some(h), Some(prev)) = (&mut self.hedger, &old.hedger) {
            h.inherit(prev, from);
        }
        if let (Some(h), Some(prev)) = (&mut self.rescue_timer, &old.rescue_timer) {
            h.inherit(prev, from);
        }
        // Health: a kept endpoint keeps its verdict; a new one starts unchecked.
        for (slot, j) in self.health.iter_mut().zip(from) {
            if let Some(h) = j.and_then(|j| old.health.get(j)) {
                *slot = *h;
            }
        }
        self.unhealthy = self.health.iter().filter(|h| !h.is_healthy()).count();
        // Slow start: an endpoint new to a set that had endpoints warms up from now; one kept
        // goes on warming from when it began. The first set (nothing before) is not slowed.
        if let Some(slow) = self.slow_start {
            let had_endpoints = !old.balancer.is_empty();
            for (i, j) in from.iter().enumerate() {
                let since = match j {
                    None if had_endpoints => Some(now),
                    None => None,
                    Some(j) => old.warm_since.get(*j).copied().flatten(),
                };
                if let Some(since) = since.filter(|s| now.saturating_sub(*s) < slow.window) {
                    self.warm(i, since);
                }
            }
        }
        self.stats = old.stats;
    }

    /// What the client did so far.
    pub fn stats(&self) -> ClientStats {
        self.stats
    }

    /// The balancer's load of `endpoint` at `now` (cost and requests in flight), read without
    /// changing it, for metrics and admin pages; `None` when the policy tracks no load.
    pub fn load(
        &self,
        endpoint: usize,
        now: Duration,
    ) -> Option<tailguard_balance::load::Snapshot> {
        self.balancer.snapshot(endpoint, now)
    }

    /// The failure accrual state of `endpoint` (`None` without accrual).
    pub fn accrual_status(&self, endpoint: usize) -> Option<tailguard_resilience::accrual::Status> {
        self.accrual.get(endpoint).map(Accrual::status)
    }

    /// Step 1: a request arrived at `now`.
    pub fn on_request(&mut self, now: Duration) {
        if let Some(b) = &mut self.budget {
            b.deposit(now);
        }
        if let Some(h) = &mut self.hedger {
            h.on_request(now);
        }
    }

    /// One active health check of `endpoint` ended at `now`, `passed` or not; returns the new
    /// state when it changed. Back from unhealthy, the endpoint starts its slow start.
    pub fn on_health_check(
        &mut self,
        endpoint: usize,
        passed: bool,
        now: Duration,
    ) -> Option<tailguard_resilience::HealthState> {
        use tailguard_resilience::HealthState;
        let config = self.health_check.as_ref()?;
        let h = self.health.get_mut(endpoint)?;
        let was_healthy = h.is_healthy();
        let change = h.record(passed, config)?;
        match (was_healthy, h.is_healthy()) {
            (true, false) => self.unhealthy += 1,
            (false, true) => {
                self.unhealthy = self.unhealthy.saturating_sub(1);
                if change == HealthState::Healthy {
                    self.warm(endpoint, now);
                }
            }
            _ => {}
        }
        Some(change)
    }

    /// What the checks say of `endpoint` (`None` without health checks).
    pub fn health(&self, endpoint: usize) -> Option<tailguard_resilience::HealthState> {
        self.health.get(endpoint).map(|h| h.state())
    }

    /// True when every endpoint failed its checks: health is ignored (Envoy's panic mode),
    /// since sending to an endpoint that fails its checks beats failing every request.
    pub fn health_panic(&self) -> bool {
        !self.health.is_empty() && self.unhealthy == self.health.len()
    }

    /// Starts (or restarts) `endpoint`'s slow start at `since`, when slow start is on.
    fn warm(&mut self, endpoint: usize, since: Duration) {
        if let Some(slot) = self.warm_since.get_mut(endpoint) {
            *slot = Some(since);
            self.balancer.warm_up(endpoint, since);
        }
    }

    /// When `endpoint`'s slow start began, if it is still warming at `now` (`None` also when
    /// slow start is off), for admin pages.
    pub fn warming_since(&self, endpoint: usize, now: Duration) -> Option<Duration> {
        let (slow, since) = (self.slow_start?, self.warm_since.get(endpoint).copied()??);
        (now.saturating_sub(since) < slow.window).then_some(since)
    }

    /// The silence of `endpoint` at `now`: how long it has owed an answer (zero when nothing
    /// waits there, or when rescue is off).
    pub fn silence(&self, endpoint: usize, now: Duration) -> Duration {
        self.quiet
            .get(endpoint)
            .map_or(Duration::ZERO, |q| q.silence(now))
    }

    /// True when latency outlier detection has ejected `endpoint` at `now`.
    pub fn is_ejected(&self, endpoint: usize, now: Duration) -> bool {
        self.outlier
            .as_ref()
            .is_some_and(|o| o.is_ejected(endpoint, now))
    }

    /// True when `endpoint` is in rotation at `now` (accrual, ejection and pushback agree).
    pub fn is_ready(&self, endpoint: usize, now: Duration) -> bool {
        in_rotation(&self.accrual, self.outlier.as_ref(), endpoint, now)
            && !is_pushed(&self.pushed, endpoint, now)
            && checks_pass(&self.health, self.health_panic(), endpoint)
    }

    /// Step 2: the endpoint for the next attempt, avoiding `avoid` whenever another exists.
    /// When no endpoint is in rotation, ejection gives way before accrual does: an endpoint
    /// ejected for being slow, but answering, beats one that accrual saw failing (and only
    /// then any endpoint, as Finagle does when all are down).
    ///
    /// # Panics
    /// When the client has no endpoints.
    pub fn pick(&mut self, now: Duration, avoid: Option<usize>, rng: &mut dyn RngCore) -> usize {
        let panic = self.health_panic();
        let Self {
            balancer,
            accrual,
            outlier,
            pushed,
            health,
            ..
        } = self;
        let ready = |i: usize| {
            Some(i) != avoid
                && in_rotation(accrual, outlier.as_ref(), i, now)
                && !is_pushed(pushed, i, now)
                && checks_pass(health, panic, i)
        };
        let mut chosen = balancer
            .pick(now, &ready, rng)
            .expect("a client has endpoints");
        if !ready(chosen)
            && (outlier.is_some() || is_pushed(pushed, chosen, now) || !health.is_empty())
        {
            let alive = |i: usize| Some(i) != avoid && in_rotation(accrual, None, i, now);
            chosen = balancer.pick(now, &alive, rng).unwrap_or(chosen);
        }
        if Some(chosen) == avoid && balancer.len() > 1 {
            let other = |i: usize| Some(i) != avoid;
            chosen = balancer.pick(now, &other, rng).unwrap_or(chosen);
        }
        self.warm_after_ejection(chosen, now);
        chosen
    }

    /// Slow start for an endpoint back from a latency ejection, noticed when it is first
    /// picked after the ejection ended (the picks before the next one see it warming).
    fn warm_after_ejection(&mut self, endpoint: usize, now: Duration) {
        if self.slow_start.is_none() {
            return;
        }
        let ended = self
            .outlier
            .as_ref()
            .and_then(|o| o.ejection_ended(endpoint, now));
        let since = self.warm_since.get(endpoint).copied().flatten();
        if let Some(end) = ended.filter(|&end| since.is_none_or(|s| s < end)) {
            self.warm(endpoint, end);
        }
    }

    /// After a pick: the endpoints a probing balancer wants probed now, appended to `out` (ready
    /// ones only; none for other balancers). Send each probe off the request path and report
    /// it with [`Client::on_probe`].
    pub fn probe_targets(&mut self, now: Duration, rng: &mut dyn RngCore, out: &mut Vec<usize>) {
        let panic = self.health_panic();
        let Self {
            balancer,
            accrual,
            outlier,
            pushed,
            health,
            stats,
            ..
        } = self;
        let ready = |i: usize| {
            in_rotation(accrual, outlier.as_ref(), i, now)
                && !is_pushed(pushed, i, now)
                && checks_pass(health, panic, i)
        };
        let before = out.len();
        balancer.probe_targets(now, &ready, rng, out);
        stats.probes += (out.len() - before) as u64;
    }

    /// A probe of `endpoint` came back at `now` with `reply`, or failed (`None`); returns what
    /// the balancer made of it.
    pub fn on_probe(
        &mut self,
        endpoint: usize,
        reply: Option<tailguard_balance::ProbeReply>,
        now: Duration,
    ) -> ProbeVerdict {
        let verdict = self.balancer.probe_reply(endpoint, reply, now);
        self.stats.probes_distrusted += u64::from(verdict == ProbeVerdict::Distrusted);
        verdict
    }

    /// Step 3: an attempt goes to `endpoint` at `now`; keep what this returns for its outcome.
    pub fn on_send(&mut self, endpoint: usize, now: Duration) -> Sent {
        self.balancer.start(endpoint, now);
        if let Some(q) = self.quiet.get_mut(endpoint) {
            q.start(now);
        }
        Sent {
            at: now,
            settled: false,
            ticket: self.accrual.get_mut(endpoint).map(|a| a.on_send(now)),
        }
    }

    /// Step 3: the endpoint began to answer the attempt `sent` at `now`, before its outcome is
    /// known (a stream's head): it no longer waits for its endpoint, though it stays in flight
    /// until [`Client::on_complete`]. Once per attempt; later calls do nothing.
    pub fn on_answer(&mut self, endpoint: usize, sent: &mut Sent, now: Duration) {
        self.settle(endpoint, sent, true, now);
    }

    /// Settles `sent` once, for the balancer and the endpoint's silence: answered, or given
    /// up unanswered.
    fn settle(&mut self, endpoint: usize, sent: &mut Sent, answered: bool, now: Duration) {
        if !sent.settled {
            sent.settled = true;
            self.balancer.settle(endpoint, sent.at, answered, now);
            if let Some(q) = self.quiet.get_mut(endpoint) {
                q.settle(answered, now);
            }
        }
    }

    /// `endpoint` asked at `now` to be left alone for `wait` (`Retry-After` on a 429 or 503):
    /// it is kept out of picks until `now + min(wait, pushback_max)`, unless half of the
    /// endpoints (rounded down) are out by pushback already, in which case the request is
    /// noted for [`Client::pushed_back`] but not honoured. Returns whether it was honoured;
    /// does nothing when pushback is off. O(endpoints), once per pushback answer.
    pub fn on_pushback(&mut self, endpoint: usize, wait: Duration, now: Duration) -> bool {
        let Some(max) = self.pushback_max else {
            return false;
        };
        let n = self.pushed.len();
        if endpoint >= n {
            return false;
        }
        let until = now.saturating_add(wait.min(max));
        let out = (0..n)
            .filter(|&i| i != endpoint && self.pushed[i].out_until > now)
            .count();
        let p = &mut self.pushed[endpoint];
        p.asked_until = p.asked_until.max(until);
        if out < n / 2 {
            p.out_until = p.asked_until;
            true
        } else {
            false
        }
    }

    /// How long `endpoint`'s pushback still keeps it out of picks at `now` (`None`: it is not
    /// kept out), for admin pages.
    pub fn pushed_back_for(&self, endpoint: usize, now: Duration) -> Option<Duration> {
        let p = self.pushed.get(endpoint)?;
        (p.out_until > now).then(|| p.out_until - now)
    }

    /// When the endpoint a pick chose has itself asked to be left alone at `now`, and so has
    /// every other: how long until the first of them may be asked again (the caller answers at
    /// once, saying so). `None` otherwise; O(1) unless `endpoint` asked.
    pub fn pushed_back(&self, endpoint: usize, now: Duration) -> Option<Duration> {
        if self
            .pushed
            .get(endpoint)
            .is_none_or(|p| p.asked_until <= now)
        {
            return None;
        }
        let mut soonest = Duration::MAX;
        for p in &self.pushed {
            if p.asked_until <= now {
                return None;
            }
            soonest = soonest.min(p.asked_until - now);
        }
        Some(soonest)
    }

    /// [`Client::on_complete`] for an answer that also asked for pushback (`Retry-After`):
    /// the pushback is recorded first ([`Client::on_pushback`]), and a 429 that asks is not a
    /// failure for accrual, even when 4xx count as failures (the backend said when to come
    /// back; it did not fail).
    #[allow(clippy::too_many_arguments)] // on_complete's record and the wait asked
    pub fn on_complete_pushed(
        &mut self,
        endpoint: usize,
        sent: Sent,
        rtt: Duration,
        method: Method,
        outcome: AttemptOutcome,
        wait: Duration,
        now: Duration,
        rng: &mut dyn RngCore,
    ) -> Completion {
        self.on_pushback(endpoint, wait, now);
        let asked_politely = outcome == AttemptOutcome::Status(429);
        self.complete(
            endpoint,
            sent,
            rtt,
            method,
            outcome,
            asked_politely,
            now,
            rng,
        )
    }

    /// Step 3: the attempt `sent` ended at `now` with `outcome`, `rtt` after it was sent (or,
    /// for a streamed answer, its head came `rtt` after); returns its class and what it changed
    /// in its endpoint's failure accrual.
    #[allow(clippy::too_many_arguments)] // one attempt's full record, passed flat on the hot path
    pub fn on_complete(
        &mut self,
        endpoint: usize,
        sent: Sent,
        rtt: Duration,
        method: Method,
        outcome: AttemptOutcome,
        now: Duration,
        rng: &mut dyn RngCore,
    ) -> Completion {
        self.complete(endpoint, sent, rtt, method, outcome, false, now, rng)
    }

    /// [`Client::on_complete`], with `not_failure` keeping an answer that would be a failure
    /// (a 429 under `four_xx_is_failure`) from counting as one for accrual.
    #[allow(clippy::too_many_arguments)]
    fn complete(
        &mut self,
        endpoint: usize,
        mut sent: Sent,
        rtt: Duration,
        method: Method,
        outcome: AttemptOutcome,
        not_failure: bool,
        now: Duration,
        rng: &mut dyn RngCore,
    ) -> Completion {
        let class = self.classifier.classify(method, outcome);
        let charged = match self.failure_penalty {
            Some(p) if !class.success || outcome.is_overload() => rtt.max(p),
            _ => rtt,
        };
        // A timeout is the endpoint's silence; any other outcome is an answer, however bad.
        let answered = outcome != AttemptOutcome::Timeout;
        self.settle(endpoint, &mut sent, answered, now);
        self.balancer.end(endpoint, charged, now);
        if !class.success {
            self.balancer.failed(endpoint, now);
        }
        let transition = match (self.accrual.get_mut(endpoint), sent.ticket) {
            (Some(a), Some(t)) => a.on_outcome(t, class.success || not_failure, now, rng),
            _ => None,
        };
        match transition {
            Some(Transition::Tripped { .. }) => self.stats.trips += 1,
            // Back from failure accrual: a slow start from now.
            Some(Transition::Revived) => self.warm(endpoint, now),
            None => {}
        }
        // Only a success says how fast an endpoint is: a refused connection or an instant 503
        // is no latency sample for ejection or for the hedge delay.
        if let Some(o) = &mut self.outlier {
            match class.success {
                true => o.record(endpoint, rtt, now),
                false => o.record_failure(endpoint, now),
            }
        }
        if class.success {
            for h in [&mut self.hedger, &mut self.rescue_timer]
                .into_iter()
                .flatten()
            {
                h.record(endpoint, rtt, now);
            }
        }
        Completion { class, transition }
    }

    /// Step 3: the attempt `sent` was abandoned at `now` (another attempt won, or the request
    /// timed out): given up unanswered, it ends for the balancer with its elapsed time as the
    /// RTT (as tower's load handles do when dropped), and without an outcome for accrual.
    pub fn on_cancel(&mut self, endpoint: usize, mut sent: Sent, now: Duration) {
        self.settle(endpoint, &mut sent, false, now);
        self.balancer
            .end(endpoint, now.saturating_sub(sent.at), now);
        if let (Some(a), Some(t)) = (self.accrual.get_mut(endpoint), sent.ticket) {
            a.on_cancel(t, now);
        }
    }

    /// Step 4: may a failed attempt be retried at `now`? Charges the budget when it may.
    pub fn may_retry(&mut self, now: Duration) -> bool {
        let floor = now >= self.floors_off_until;
        let granted = self
            .budget
            .as_mut()
            .is_some_and(|b| b.try_withdraw_with(now, floor));
        if granted {
            self.stats.retries += 1;
        } else if self.budget.is_some() {
            self.stats.retries_refused += 1;
        }
        granted
    }

    /// The service's concurrency limit refused a request at `now`: for the next second the
    /// retry and hedge budgets grant only what the share of requests earned, never their
    /// per-second floors (a floor of retries into a saturated service adds load exactly when
    /// it hurts; what requests earn still pays for the retries a failure deserves).
    pub fn on_overload(&mut self, now: Duration) {
        self.floors_off_until = self.floors_off_until.max(now + OVERLOAD_MEMORY);
    }

    /// How many retries the budget would grant at `now`, without charging it (`None`: retries
    /// are off), for dashboards.
    pub fn retries_left(&mut self, now: Duration) -> Option<u64> {
        self.budget.as_mut().map(|b| b.balance(now))
    }

    /// How long to wait before hedging an attempt sent at `now` (`None`: do not hedge).
    pub fn hedge_delay(&mut self, now: Duration) -> Option<Duration> {
        self.hedger.as_mut().and_then(|h| h.delay(now))
    }

    /// How long after sending a first attempt at `now` to ask [`Client::may_backup`]: the
    /// hedge delay with hedging, else the rescue's delay with rescue (`None`: no backup, or not
    /// enough samples yet).
    pub fn backup_delay(&mut self, now: Duration) -> Option<Duration> {
        if self.hedger.is_some() {
            return self.hedge_delay(now);
        }
        self.rescue_timer.as_mut().and_then(|h| h.delay(now))
    }

    /// Step 4: may a hedge be sent at `now`? Charges the hedge budget when it may.
    pub fn may_hedge(&mut self, now: Duration) -> bool {
        let floor = now >= self.floors_off_until;
        let granted = self
            .hedger
            .as_mut()
            .is_some_and(|h| h.try_hedge_with(now, floor));
        self.stats.hedges += u64::from(granted);
        granted
    }

    /// Step 4: a first attempt to `endpoint` is still out at `now`, its backup delay past;
    /// `first` the first time this is asked for it. A hedge when hedging is on, this is the
    /// first ask and its budget allows; else, with rescue on, a rescue when the endpoint has
    /// been silent for the backup delay and for [`STALLED_FACTOR`] times its own mean latency,
    /// and the retry budget allows; or when to ask again.
    pub fn may_backup(&mut self, endpoint: usize, first: bool, now: Duration) -> Backup {
        if first && self.may_hedge(now) {
            return Backup::Hedge;
        }
        // Rescue needs somewhere else to go.
        if self.quiet.len() < 2 {
            return Backup::No;
        }
        let Some(delay) = self.backup_delay(now) else {
            return Backup::No;
        };
        // Silent for the delay, and for ten times what this endpoint usually takes: a slow
        // endpoint's one request out is not a stall.
        let own = [&self.hedger, &self.rescue_timer]
            .into_iter()
            .flatten()
            .find_map(|h| h.endpoint_mean(endpoint))
            .map_or(Duration::ZERO, |m| m.mul_f64(STALLED_FACTOR));
        let threshold = delay.max(own);
        let silence = self.silence(endpoint, now);
        if silence < threshold {
            // At least every delay: the attempt asked about may have given way to a retry.
            return Backup::Wait((threshold - silence).min(delay));
        }
        if !self.may_retry(now) {
            return Backup::Wait(delay);
        }
        self.stats.rescues += 1;
        Backup::Rescue
    }
}

/// One endpoint's pushback: until when it asked to be left alone, and until when that is
/// honoured (no later than asked; never for more than half of the endpoints at once).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Pushed {
    asked_until: Duration,
    out_until: Duration,
}

/// True when `endpoint`'s health checks let it take requests: not unhealthy, or every
/// endpoint is (`panic`: health ignored).
fn checks_pass(health: &[tailguard_resilience::Health], panic: bool, endpoint: usize) -> bool {
    panic || health.get(endpoint).is_none_or(|h| h.is_healthy())
}

/// True when `endpoint`'s pushback keeps it out of picks at `now`.
fn is_pushed(pushed: &[Pushed], endpoint: usize, now: Duration) -> bool {
    pushed.get(endpoint).is_some_and(|p| p.out_until > now)
}

/// True when `endpoint` is in rotation at `now`: alive for failure accrual and not ejected as a
/// latency outlier (a function of the two fields, so a pick can ask while it borrows the
/// balancer).
fn in_rotation(
    accrual: &[Accrual],
    outlier: Option<&OutlierDetector>,
    endpoint: usize,
    now: Duration,
) -> bool {
    accrual.get(endpoint).is_none_or(|a| a.is_available(now))
        && outlier.is_none_or(|o| !o.is_ejected(endpoint, now))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use tailguard_balance::Policy;
    use tailguard_resilience::accrual::Status;
    use tailguard_resilience::{AccrualConfig, Backoff, TripPolicy};

    fn arm() -> ArmConfig {
        let mut arm = ArmConfig::new("t", Policy::RoundRobin);
        arm.accrual = Some(AccrualConfig {
            policy: TripPolicy::ConsecutiveFailures { failures: 1 },
            backoff: Backoff::Constant(Duration::from_secs(60)),
        });
        arm
    }

    /// Sends one attempt to `endpoint` at `now` and fails it.
    fn fail(c: &mut Client, endpoint: usize, now: Duration, rng: &mut dyn RngCore) {
        let sent = c.on_send(endpoint, now);
        c.on_complete(
            endpoint,
            sent,
            Duration::ZERO,
            Method::Get,
            AttemptOutcome::Status(503),
            now,
            rng,
        );
    }

    /// The share of `n` attempts endpoint 0 gets when it fails every call at once and the two
    /// others answer in 1 ms, under P2C peak EWMA with `penalty`.
    fn share_of_fast_failer(penalty: Option<Duration>, n: u64) -> f64 {
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(3);
        let mut arm = ArmConfig::new("t", Policy::p2c(tailguard_balance::LoadKind::peak_ewma()));
        arm.failure_penalty = penalty;
        let mut c = Client::new(&arm, 3, Duration::ZERO, &mut rng).unwrap();
        let mut hits = 0;
        for i in 0..n {
            let now = Duration::from_millis(i);
            let e = c.pick(now, None, &mut rng);
            let t = c.on_send(e, now);
            let (status, rtt) = if e == 0 { (503, 0) } else { (200, 1) };
            let done = now + Duration::from_millis(rtt);
            let outcome = AttemptOutcome::Status(status);
            c.on_complete(e, t, done - now, Method::Get, outcome, done, &mut rng);
            hits += u64::from(e == 0);
        }
        hits as f64 / n as f64
    }

    #[test]
    fn a_fast_failing_endpoint_is_charged_the_penalty_not_its_short_round_trip() {
        let without = share_of_fast_failer(None, 3000);
        let with = share_of_fast_failer(Some(DEFAULT_FAILURE_PENALTY), 3000);
        // Without the penalty the instant failer is the cheapest endpoint: it sinks traffic.
        assert!(without > 0.5, "without a penalty: {without}");
        assert!(with < 0.01, "with the penalty: {with}");
    }

    #[test]
    fn a_new_endpoint_set_keeps_what_was_learned_about_the_endpoints_it_keeps() {
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(7);
        let t0 = Duration::from_secs(1);
        let mut old = Client::new(&arm(), 3, t0, &mut rng).unwrap();
        fail(&mut old, 2, t0, &mut rng); // endpoint 2 dead for 60 s, then probing
        let later = t0 + Duration::from_secs(61);
        fail(&mut old, 0, later, &mut rng); // endpoint 0 dead for 60 s from `later`
        let probe = old.on_send(2, later).ticket();
        assert_eq!(
            probe.map(|t| t.kind),
            Some(tailguard_resilience::accrual::TicketKind::Probe)
        );
        assert!(matches!(
            old.accrual_status(2),
            Some(Status::Probing { .. })
        ));

        // New set: old 2, old 0, a new endpoint, old 1.
        let now = later + Duration::from_secs(1);
        let mut next = Client::new(&arm(), 4, now, &mut rng).unwrap();
        next.inherit(&old, &[Some(2), Some(0), None, Some(1)], now);
        // Old 0 is still dead; old 1 and the new one are alive.
        assert!(!next.is_ready(1, now));
        assert!(next.is_ready(2, now) && next.is_ready(3, now));
        // Old 2's probe reports to the old set: the new one may probe at once, no waiting.
        assert!(matches!(next.accrual_status(0), Some(Status::Dead { until, .. }) if until == now));
        assert!(next.is_ready(0, now));
        assert_eq!(next.stats().trips, 2, "counters carry over");
    }

    #[test]
    fn retries_left_reads_the_budget_without_charging_it() {
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(3);
        let now = Duration::from_secs(1);
        let mut off = Client::new(&arm(), 2, now, &mut rng).unwrap();
        assert_eq!(off.retries_left(now), None, "retries off: no budget");
        let mut on_arm = arm();
        on_arm.retries = Some(RetryConfig::default());
        let mut c = Client::new(&on_arm, 2, now, &mut rng).unwrap();
        // The default reserve: 10 retries per second over a 10 s window.
        assert_eq!(c.retries_left(now), Some(100));
        assert_eq!(c.retries_left(now), Some(100), "reading does not charge");
        assert!(c.may_retry(now));
        assert_eq!(c.retries_left(now), Some(99));
    }
}

#[cfg(test)]
mod rescue_tests {
    use super::*;
    use rand::SeedableRng;
    use tailguard_balance::Policy;

    const OK: AttemptOutcome = AttemptOutcome::Status(200);

    /// A round-robin client over three endpoints with rescue on, warmed with 120 answers of
    /// 10 ms: the backup delay is 10 ms and an endpoint is silent after 100 ms.
    fn warm(rescue: bool) -> (Client, rand_xoshiro::Xoshiro256PlusPlus) {
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(5);
        let mut arm = ArmConfig::new("t", Policy::RoundRobin);
        arm.retries = Some(RetryConfig::default());
        arm.rescue = rescue;
        let mut c = Client::new(&arm, 3, Duration::ZERO, &mut rng).unwrap();
        let ms10 = Duration::from_millis(10);
        for i in 0..120u64 {
            let now = Duration::from_millis(i);
            c.on_request(now);
            let e = c.pick(now, None, &mut rng);
            let s = c.on_send(e, now);
            c.on_complete(e, s, ms10, Method::Get, OK, now + ms10, &mut rng);
        }
        (c, rng)
    }

    #[test]
    fn only_a_silent_endpoint_is_rescued() {
        let ms = Duration::from_millis;
        let (mut c, mut rng) = warm(true);
        let t0 = ms(1_000);
        assert_eq!(c.backup_delay(t0).map(|d| d.as_millis()), Some(10));
        let stuck = c.on_send(0, t0);
        // Endpoint 0 keeps answering other requests: slow request, not a stall.
        for k in 1..20u64 {
            let at = t0 + ms(10 * k);
            let s = c.on_send(0, at);
            c.on_complete(0, s, ms(5), Method::Get, OK, at + ms(5), &mut rng);
        }
        let later = t0 + ms(200);
        assert!(matches!(c.may_backup(0, false, later), Backup::Wait(_)));
        // Then it says nothing for 100 ms: silent, rescued, charged as a retry.
        let silent = t0 + ms(295);
        assert_eq!(c.may_backup(0, false, silent), Backup::Rescue);
        assert_eq!((c.stats().rescues, c.stats().retries), (1, 1));
        c.on_cancel(0, stuck, silent);
    }

    #[test]
    fn no_rescue_when_it_is_off_or_nowhere_else_to_go() {
        let ms = Duration::from_millis;
        let (mut off, _) = warm(false);
        off.on_send(0, ms(1_000));
        assert_eq!(off.may_backup(0, true, ms(5_000)), Backup::No);
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(5);
        let mut arm = ArmConfig::new("t", Policy::RoundRobin);
        arm.retries = Some(RetryConfig::default());
        arm.rescue = true;
        let mut one = Client::new(&arm, 1, Duration::ZERO, &mut rng).unwrap();
        one.on_send(0, ms(0));
        assert_eq!(one.may_backup(0, false, ms(60_000)), Backup::No);
    }
}

#[cfg(test)]
mod slow_start_tests {
    use super::*;
    use rand::SeedableRng;
    use tailguard_balance::{LoadKind, Policy, SlowStart};
    use tailguard_resilience::{AccrualConfig, Backoff, TripPolicy};

    const OK: AttemptOutcome = AttemptOutcome::Status(200);

    fn arm(slow: Option<SlowStart>) -> ArmConfig {
        let mut arm = ArmConfig::new("t", Policy::p2c(LoadKind::peak_ewma()));
        arm.slow_start = slow;
        arm.accrual = Some(AccrualConfig {
            policy: TripPolicy::ConsecutiveFailures { failures: 1 },
            backoff: Backoff::Constant(Duration::from_secs(1)),
        });
        arm
    }

    fn ten_seconds() -> Option<SlowStart> {
        Some(SlowStart {
            window: Duration::from_secs(10),
            aggression: 1.0,
            min_weight: 0.1,
        })
    }

    /// Share of endpoint 3 over [from, to) ms: one request a millisecond, every endpoint
    /// answering in 40 ms (so about 40 are in flight and P2C weighs them).
    fn share(c: &mut Client, rng: &mut dyn RngCore, from: u64, to: u64) -> f64 {
        let mut out: std::collections::VecDeque<(u64, usize, Sent)> = Default::default();
        let mut hits = 0;
        for ms in from..to + 40 {
            while out.front().is_some_and(|(due, _, _)| *due <= ms) {
                let (due, e, s) = out.pop_front().unwrap();
                let now = Duration::from_millis(due);
                c.on_complete(e, s, Duration::from_millis(40), Method::Get, OK, now, rng);
            }
            if ms >= to {
                continue;
            }
            let now = Duration::from_millis(ms);
            c.on_request(now);
            let e = c.pick(now, None, rng);
            out.push_back((ms + 40, e, c.on_send(e, now)));
            hits += u64::from(e == 3);
        }
        hits as f64 / (to - from) as f64
    }

    /// Three endpoints warm for 5 s, then a fourth joins at 5 s.
    fn joined(slow: Option<SlowStart>) -> (Client, rand_xoshiro::Xoshiro256PlusPlus) {
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(11);
        let mut old = Client::new(&arm(slow), 3, Duration::ZERO, &mut rng).unwrap();
        for ms in 0..5_000u64 {
            let now = Duration::from_millis(ms);
            let e = old.pick(now, None, &mut rng);
            let s = old.on_send(e, now);
            let done = now + Duration::from_millis(40);
            old.on_complete(
                e,
                s,
                Duration::from_millis(40),
                Method::Get,
                OK,
                done,
                &mut rng,
            );
        }
        let at = Duration::from_secs(5);
        let mut c = Client::new(&arm(slow), 4, at, &mut rng).unwrap();
        c.inherit(&old, &[Some(0), Some(1), Some(2), None], at);
        (c, rng)
    }

    #[test]
    fn a_new_endpoint_takes_a_growing_share_over_the_window() {
        let (mut c, mut rng) = joined(ten_seconds());
        assert_eq!(
            c.warming_since(3, Duration::from_secs(6)),
            Some(Duration::from_secs(5))
        );
        let early = share(&mut c, &mut rng, 5_000, 7_000);
        let late = share(&mut c, &mut rng, 13_000, 15_000);
        let after = share(&mut c, &mut rng, 16_000, 18_000);
        assert!(early < 0.12, "early {early}");
        assert!(
            early < late && late <= after + 0.05,
            "{early} {late} {after}"
        );
        assert!(after > 0.2, "a full share after the window: {after}");
        assert_eq!(c.warming_since(3, Duration::from_secs(16)), None);
        // Without slow start it takes its share at once.
        let (mut cold, mut rng) = joined(None);
        let without = share(&mut cold, &mut rng, 5_000, 7_000);
        assert!(without > early * 1.5, "{without} against {early}");
    }

    #[test]
    fn the_first_set_is_not_slowed() {
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(1);
        let c = Client::new(&arm(ten_seconds()), 3, Duration::ZERO, &mut rng).unwrap();
        assert!((0..3).all(|i| c.warming_since(i, Duration::ZERO).is_none()));
        // A set that replaces an empty one (discovery's first answer) is not slowed either.
        let empty = Client::new(&arm(ten_seconds()), 0, Duration::ZERO, &mut rng).unwrap();
        let mut first = Client::new(&arm(ten_seconds()), 2, Duration::ZERO, &mut rng).unwrap();
        first.inherit(&empty, &[None, None], Duration::from_secs(1));
        assert!((0..2).all(|i| first.warming_since(i, Duration::from_secs(1)).is_none()));
    }

    /// Back from accrual, an endpoint warms up; failing again during its slow start trips it
    /// again, and the next revival starts the slow start over.
    #[test]
    fn an_endpoint_back_from_accrual_warms_up_and_starts_over_when_it_fails_again() {
        let ms = Duration::from_millis;
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(2);
        let mut c = Client::new(&arm(ten_seconds()), 3, Duration::ZERO, &mut rng).unwrap();
        let fail = |c: &mut Client, rng: &mut dyn RngCore, at| {
            let s = c.on_send(0, at);
            let bad = AttemptOutcome::Status(503);
            c.on_complete(0, s, ms(1), Method::Get, bad, at, rng)
        };
        let succeed = |c: &mut Client, rng: &mut dyn RngCore, at| {
            let s = c.on_send(0, at);
            c.on_complete(0, s, ms(1), Method::Get, OK, at, rng)
        };
        fail(&mut c, &mut rng, ms(100));
        assert!(!c.is_ready(0, ms(200)), "tripped");
        // The probe after the 1 s backoff succeeds: back, warming from then.
        let back = succeed(&mut c, &mut rng, ms(1_200));
        assert_eq!(back.transition, Some(Transition::Revived));
        assert_eq!(c.warming_since(0, ms(1_300)), Some(ms(1_200)));
        // It fails again during its slow start: out again.
        fail(&mut c, &mut rng, ms(3_000));
        assert!(!c.is_ready(0, ms(3_100)));
        let again = succeed(&mut c, &mut rng, ms(4_100));
        assert_eq!(again.transition, Some(Transition::Revived));
        assert_eq!(
            c.warming_since(0, ms(4_200)),
            Some(ms(4_100)),
            "the slow start starts over"
        );
    }
}

#[cfg(test)]
mod health_tests {
    use super::*;
    use rand::SeedableRng;
    use tailguard_balance::Policy;
    use tailguard_resilience::{HealthCheckConfig, HealthState};

    fn client(n: usize) -> (Client, rand_xoshiro::Xoshiro256PlusPlus) {
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(4);
        let mut arm = ArmConfig::new("t", Policy::RoundRobin);
        arm.health_check = Some(HealthCheckConfig::default());
        arm.slow_start = Some(tailguard_balance::SlowStart {
            window: Duration::from_secs(10),
            aggression: 1.0,
            min_weight: 0.1,
        });
        (Client::new(&arm, n, Duration::ZERO, &mut rng).unwrap(), rng)
    }

    fn picks(c: &mut Client, rng: &mut dyn RngCore, n: usize) -> Vec<usize> {
        (0..n).map(|_| c.pick(Duration::ZERO, None, rng)).collect()
    }

    #[test]
    fn an_unhealthy_endpoint_gets_nothing_until_every_one_is() {
        let (mut c, mut rng) = client(3);
        let s = Duration::from_secs;
        assert_eq!(c.health(0), Some(HealthState::Unchecked));
        assert_eq!(
            c.on_health_check(0, false, s(1)),
            Some(HealthState::Unhealthy)
        );
        assert!(!picks(&mut c, &mut rng, 30).contains(&0));
        assert!(!c.is_ready(0, s(1)));
        c.on_health_check(1, false, s(1));
        c.on_health_check(2, false, s(1));
        // Every endpoint unhealthy: panic mode, health ignored, all take requests again.
        assert!(c.health_panic());
        let all = picks(&mut c, &mut rng, 30);
        assert!((0..3).all(|i| all.contains(&i)), "{all:?}");
        // One comes back (two passes): the panic ends, and it warms up.
        c.on_health_check(1, true, s(2));
        assert_eq!(c.on_health_check(1, true, s(3)), Some(HealthState::Healthy));
        assert!(!c.health_panic());
        assert_eq!(picks(&mut c, &mut rng, 10), vec![1; 10]);
        assert_eq!(c.warming_since(1, s(4)), Some(s(3)));
    }

    #[test]
    fn a_new_set_keeps_the_verdicts_of_the_endpoints_it_keeps() {
        let (mut old, mut rng) = client(2);
        old.on_health_check(0, false, Duration::ZERO);
        let (mut next, _) = client(3);
        next.inherit(&old, &[Some(1), None, Some(0)], Duration::from_secs(1));
        assert_eq!(next.health(2), Some(HealthState::Unhealthy));
        assert_eq!(next.health(1), Some(HealthState::Unchecked));
        assert!(!picks(&mut next, &mut rng, 20).contains(&2));
    }
}
