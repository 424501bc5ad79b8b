//! One generation of a service's endpoint set, and the [`tailguard_client::Client`] that
//! balances over it.
//!
//! The proxy does not re-implement balancing: every pick, send, outcome and retry decision goes
//! to the same `Client` the simulator runs, behind one mutex per service, with `now` from
//! [`crate::clock::Clock`]. The lock is held only for those calls, never across I/O.
//!
//! When discovery or a reload changes the endpoints, a new `Endpoints` replaces the old one;
//! requests in flight keep the generation they started with and report their outcome to it.
//! A discovery change carries over what was learned about the addresses that remain
//! ([`Endpoints::inherit`]): a dead endpoint stays out when another one is added.

use crate::config::Upstream;
use crate::metrics::{EndpointHandles, Metrics};
use http::uri::Authority;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::Serialize;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;
use tailguard_client::{ArmConfig, ArmError, Client, Completion};
use tailguard_client::{Backup, Sent};
use tailguard_record::live::EndpointCounts;
use tailguard_resilience::accrual::{Status, Transition};
use tailguard_resilience::{AttemptOutcome, Backoff, Method};

/// Load probes out to one endpoint slot at most: the balancer's pool needs a reply or two per
/// endpoint, and a probe path that hangs must cost at most this many connections, not one
/// per request (at 2,000 req/s, 2,074 of them).
pub const MAX_PROBES_IN_FLIGHT: u32 = 2;

/// Counters of one endpoint slot.
#[derive(Debug, Default)]
struct Counters {
    pending: AtomicU64,
    successes: AtomicU64,
    failures: AtomicU64,
    /// Times failure accrual took it out of rotation.
    ejections: AtomicU64,
    /// Backup requests sent to it.
    hedges: AtomicU64,
    /// Backup requests sent to it whose answer was the one used.
    hedge_wins: AtomicU64,
    /// Load probes to it not answered yet.
    probing: AtomicU32,
    /// Its last failed attempt: when, and what happened.
    last_error: Mutex<Option<(Duration, String)>>,
    /// Its metric handles, looked up on the first attempt.
    handles: OnceLock<EndpointHandles>,
    /// Its address as a URI authority, built once rather than per attempt.
    authority: Option<Authority>,
}

/// One endpoint, as the admin `/endpoints` page shows it.
#[derive(Clone, Debug, Serialize)]
pub struct EndpointView {
    /// The address.
    pub addr: String,
    /// Attempts in flight.
    pub pending: u64,
    /// The cost the balancer compares for this endpoint now (requests in flight for least
    /// loaded and heap, nanoseconds times `pending + 1` for peak EWMA); `null` for balancers
    /// that ignore load (round robin, random).
    pub cost: Option<f64>,
    /// Successful attempts so far.
    pub successes: u64,
    /// Failed attempts so far.
    pub failures: u64,
    /// Successes over all finished attempts (1 before any).
    pub success_rate: f64,
    /// `alive`, `dead`, `probing`, or `ejected` (a latency outlier).
    pub state: &'static str,
    /// Milliseconds until a dead endpoint is open for its probe (0: now; `null` unless dead).
    pub probe_in_ms: Option<u64>,
    /// Times failure accrual took it out of rotation.
    pub ejections: u64,
    /// Backup requests (hedges) sent to it.
    pub hedges: u64,
    /// Backup requests sent to it that answered first with a success.
    pub hedge_wins: u64,
    /// Its last failed attempt (`null`: none yet).
    pub last_error: Option<LastError>,
    /// How long it has owed an answer, in milliseconds (0: it answers, or nothing waits there;
    /// counted with rescue on): a stall shows here before anything times out.
    pub silence_ms: u64,
    /// Milliseconds its own `Retry-After` still keeps it out of picks (`null`: none honoured).
    pub pushed_back_ms: Option<u64>,
    /// Milliseconds into its slow start, while it warms up (`null`: not warming).
    pub slow_start_ms: Option<u64>,
    /// What its active health checks say: `unchecked`, `healthy` or `unhealthy` (`null`:
    /// no health checks).
    pub health: Option<&'static str>,
}

/// An endpoint's last failed attempt.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct LastError {
    /// What happened: `HTTP 503`, `gRPC 14 (UNAVAILABLE)`, `connection refused`, ...
    pub what: String,
    /// How long ago, in milliseconds.
    pub ago_ms: u64,
}

/// What an attempt that failed with `outcome` shows as its endpoint's last error.
pub fn describe(outcome: AttemptOutcome) -> String {
    match outcome {
        AttemptOutcome::Status(s) => format!("HTTP {s}"),
        AttemptOutcome::Grpc(code) => {
            format!("gRPC {code} ({})", tailguard_record::grpc_name(code))
        }
        AttemptOutcome::Refused => "connection refused".into(),
        AttemptOutcome::Reset => "connection reset".into(),
        AttemptOutcome::Timeout => "timeout".into(),
    }
}

#[derive(Debug)]
struct Locked {
    client: Client,
    rng: Xoshiro256PlusPlus,
}

/// The endpoints of a service and their balancer.
#[derive(Debug)]
pub struct Endpoints {
    addrs: Vec<SocketAddr>,
    counters: Vec<Counters>,
    locked: Mutex<Locked>,
}

/// Why [`Endpoints::send`] sent no attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotSent {
    /// The service has no endpoints.
    NoEndpoints,
    /// The slot picked, and every other, asked to be left alone (`Retry-After`); the first may
    /// be asked again after this long.
    PushedBack(usize, Duration),
}

impl Endpoints {
    /// A balancer over `upstreams` (an upstream of weight `w` fills `w` slots), created at `now`.
    ///
    /// # Errors
    /// When `arm` does not validate.
    pub fn new(
        upstreams: &[Upstream],
        arm: &ArmConfig,
        now: Duration,
        seed: u64,
    ) -> Result<Self, ArmError> {
        let addrs: Vec<SocketAddr> = upstreams
            .iter()
            .flat_map(|u| std::iter::repeat_n(u.addr, u.weight as usize))
            .collect();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let client = Client::new(arm, addrs.len(), now, &mut rng)?;
        let counters = addrs
            .iter()
            .map(|a| Counters {
                authority: a.to_string().parse().ok(),
                ..Counters::default()
            })
            .collect();
        Ok(Self {
            addrs,
            counters,
            locked: Mutex::new(Locked { client, rng }),
        })
    }

    /// Takes over what `old` (the generation this one replaces) learned about the addresses
    /// both have, at `now`: failure accrual (a dead endpoint stays dead), the retry budget, and
    /// the success and failure counts. The k-th slot of an address inherits from the k-th slot
    /// of that address in `old`. Call before this generation serves.
    pub fn inherit(&self, old: &Endpoints, now: Duration) {
        let mut seen: Vec<(SocketAddr, usize)> = Vec::new();
        let from: Vec<Option<usize>> = self
            .addrs
            .iter()
            .map(|a| {
                let k = seen.iter().filter(|(s, _)| s == a).count();
                seen.push((*a, k));
                old.addrs
                    .iter()
                    .enumerate()
                    .filter(|(_, o)| *o == a)
                    .nth(k)
                    .map(|(j, _)| j)
            })
            .collect();
        for (i, j) in from.iter().enumerate() {
            if let Some(j) = *j {
                let (to, was) = (&self.counters[i], &old.counters[j]);
                to.successes
                    .store(was.successes.load(Ordering::Relaxed), Ordering::Relaxed);
                to.failures
                    .store(was.failures.load(Ordering::Relaxed), Ordering::Relaxed);
                for (to, was) in [
                    (&to.ejections, &was.ejections),
                    (&to.hedges, &was.hedges),
                    (&to.hedge_wins, &was.hedge_wins),
                ] {
                    to.store(was.load(Ordering::Relaxed), Ordering::Relaxed);
                }
                *lock(&to.last_error) = lock(&was.last_error).clone();
            }
        }
        let previous = old.lock();
        self.lock().client.inherit(&previous.client, &from, now);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Locked> {
        // A panic while holding the lock leaves plain counters behind: keep serving.
        self.locked.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The address of slot `i`.
    pub fn addr(&self, i: usize) -> SocketAddr {
        self.addrs[i]
    }

    /// The address of slot `i` as a URI authority.
    pub fn authority(&self, i: usize) -> Option<&Authority> {
        self.counters[i].authority.as_ref()
    }

    /// The metric handles of slot `i` for `service`, looked up in `metrics` the first time.
    pub fn handles(&self, i: usize, metrics: &Metrics, service: &str) -> &EndpointHandles {
        self.counters[i]
            .handles
            .get_or_init(|| EndpointHandles::new(metrics, service, self.addrs[i]))
    }

    /// The number of slots.
    pub fn len(&self) -> usize {
        self.addrs.len()
    }

    /// An active health check of slot `i` ended at `now`, `passed` or not; the new state when
    /// it changed.
    pub fn health_checked(
        &self,
        i: usize,
        passed: bool,
        now: Duration,
    ) -> Option<tailguard_resilience::HealthState> {
        self.lock().client.on_health_check(i, passed, now)
    }

    /// True when every endpoint failed its health checks (they are ignored: panic mode).
    pub fn health_panic(&self) -> bool {
        self.lock().client.health_panic()
    }

    /// True when there is no endpoint.
    pub fn is_empty(&self) -> bool {
        self.addrs.is_empty()
    }

    /// The distinct addresses, in order.
    pub fn distinct(&self) -> Vec<SocketAddr> {
        let mut out: Vec<SocketAddr> = Vec::new();
        for a in &self.addrs {
            if !out.contains(a) {
                out.push(*a);
            }
        }
        out
    }

    /// Picks a slot avoiding `avoid` when another exists, and marks the attempt sent (unless the
    /// slot picked, and every other, asked to be left alone: [`NotSent::PushedBack`]); with a
    /// probing balancer, also the slots it wants probed now (appended to `probes`). The first
    /// attempt of a request (`arrived`) also counts the request (the retry and hedge budgets'
    /// deposits), under the same lock. `None` when there are no endpoints.
    pub fn send(
        &self,
        now: Duration,
        avoid: Option<usize>,
        arrived: bool,
        probes: &mut Vec<usize>,
    ) -> Result<(usize, Sent), NotSent> {
        if self.is_empty() {
            return Err(NotSent::NoEndpoints);
        }
        let mut guard = self.lock();
        let Locked { client, rng } = &mut *guard;
        if arrived {
            client.on_request(now);
        }
        let i = client.pick(now, avoid, rng);
        if let Some(left) = client.pushed_back(i, now) {
            return Err(NotSent::PushedBack(i, left));
        }
        let sent = client.on_send(i, now);
        client.probe_targets(now, rng, probes);
        drop(guard);
        self.counters[i].pending.fetch_add(1, Ordering::Relaxed);
        Ok((i, sent))
    }

    /// A load probe of slot `i` came back at `now` (`None`: no usable answer); what the
    /// balancer made of it.
    pub fn probe_reply(
        &self,
        i: usize,
        reply: Option<tailguard_balance::ProbeReply>,
        now: Duration,
    ) -> tailguard_balance::ProbeVerdict {
        self.lock().client.on_probe(i, reply, now)
    }

    /// Counts a probe of slot `i` out, unless [`MAX_PROBES_IN_FLIGHT`] are out already
    /// (false: send none). Each `true` must be matched by [`Endpoints::probe_done`].
    pub fn probe_started(&self, i: usize) -> bool {
        let probing = &self.counters[i].probing;
        probing
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < MAX_PROBES_IN_FLIGHT).then_some(n + 1)
            })
            .is_ok()
    }

    /// A probe of slot `i` counted by [`Endpoints::probe_started`] has ended.
    pub fn probe_done(&self, i: usize) {
        self.counters[i].probing.fetch_sub(1, Ordering::AcqRel);
    }

    /// The attempt to slot `i` ended at `now` with `outcome`, `rtt` after it was sent; a
    /// failure is shown in `/endpoints` as `why` when given (`connect timeout (1s)`, a TLS
    /// certificate's problem), else as the outcome.
    pub fn complete(
        &self,
        attempt: (usize, Sent),
        rtt: Duration,
        method: Method,
        outcome: AttemptOutcome,
        now: Duration,
        why: Option<&str>,
    ) -> Completion {
        self.complete_pushed(attempt, rtt, method, outcome, None, now, why)
    }

    /// [`Endpoints::complete`] for an answer that may also ask to be left alone for `wait`
    /// (`Retry-After` on a 429 or 503).
    #[allow(clippy::too_many_arguments)] // complete's record and the wait asked
    pub fn complete_pushed(
        &self,
        attempt: (usize, Sent),
        rtt: Duration,
        method: Method,
        outcome: AttemptOutcome,
        wait: Option<Duration>,
        now: Duration,
        why: Option<&str>,
    ) -> Completion {
        let (i, sent) = attempt;
        let mut guard = self.lock();
        let Locked { client, rng } = &mut *guard;
        let end = match wait {
            None => client.on_complete(i, sent, rtt, method, outcome, now, rng),
            Some(w) => client.on_complete_pushed(i, sent, rtt, method, outcome, w, now, rng),
        };
        drop(guard);
        let class = end.class;
        let c = &self.counters[i];
        c.pending.fetch_sub(1, Ordering::Relaxed);
        let counter = if class.success {
            &c.successes
        } else {
            &c.failures
        };
        counter.fetch_add(1, Ordering::Relaxed);
        if !class.success {
            let what = why.map_or_else(|| describe(outcome), str::to_owned);
            *lock(&c.last_error) = Some((now, what));
        }
        if matches!(end.transition, Some(Transition::Tripped { .. })) {
            c.ejections.fetch_add(1, Ordering::Relaxed);
        }
        end
    }

    /// The endpoint began to answer the attempt to slot `i` at `now`, before its outcome is
    /// known (a gRPC stream's head): it no longer waits, for the balancer.
    pub fn answer(&self, attempt: &mut (usize, Sent), now: Duration) {
        let (i, sent) = attempt;
        self.lock().client.on_answer(*i, sent, now);
    }

    /// The attempt to slot `i` was abandoned at `now`.
    pub fn cancel(&self, attempt: (usize, Sent), now: Duration) {
        let (i, sent) = attempt;
        self.lock().client.on_cancel(i, sent, now);
        self.counters[i].pending.fetch_sub(1, Ordering::Relaxed);
    }

    /// The service's admission refused a request at `now`: the budgets' per-second floors
    /// pause for a second ([`tailguard_client::Client::on_overload`]).
    pub fn on_overload(&self, now: Duration) {
        self.lock().client.on_overload(now);
    }

    /// May a failed attempt be retried? Charges the budget when it may.
    pub fn may_retry(&self, now: Duration) -> bool {
        self.lock().client.may_retry(now)
    }

    /// The wait before retry number `tries` under `backoff`, its jitter drawn from this
    /// generation's seeded RNG (the one the balancer draws from), never from the clock.
    pub fn retry_delay(&self, backoff: &Backoff, tries: u32) -> Duration {
        let mut guard = self.lock();
        backoff.delay(tries, &mut guard.rng)
    }

    /// How long a hedged request's first attempt waits before its backup, as of `now`
    /// (`None`: no hedging, or not enough latencies yet).
    pub fn hedge_delay(&self, now: Duration) -> Option<Duration> {
        self.lock().client.hedge_delay(now)
    }

    /// How long after a first attempt to ask [`Endpoints::may_backup`] (`None`: never).
    pub fn backup_delay(&self, now: Duration) -> Option<Duration> {
        self.lock().client.backup_delay(now)
    }

    /// The first attempt to slot `i` is still out at `now`, its backup delay past (`first`:
    /// the first ask): a hedge, a rescue, or when to ask again ([`Client::may_backup`]).
    ///
    /// [`Client::may_backup`]: tailguard_client::Client::may_backup
    pub fn may_backup(&self, i: usize, first: bool, now: Duration) -> Backup {
        self.lock().client.may_backup(i, first, now)
    }

    /// A backup request went to slot `i`.
    pub fn hedged(&self, i: usize) {
        self.counters[i].hedges.fetch_add(1, Ordering::Relaxed);
    }

    /// The backup request to slot `i` answered first, with a success.
    pub fn hedge_won(&self, i: usize) {
        self.counters[i].hedge_wins.fetch_add(1, Ordering::Relaxed);
    }

    /// Attempts in flight to slot `i`.
    pub fn pending(&self, i: usize) -> u64 {
        self.counters[i].pending.load(Ordering::Relaxed)
    }

    /// Retries the client sent so far, and how many its budget would grant now (`None`:
    /// retries are off).
    pub fn retries(&self, now: Duration) -> (u64, Option<u64>) {
        let mut guard = self.lock();
        let sent = guard.client.stats().retries;
        (sent, guard.client.retries_left(now))
    }

    /// Every slot's attempts and failures so far, read from its counters alone (no balancer
    /// lock): what the dashboard's tick needs.
    pub fn counts(&self) -> Vec<EndpointCounts> {
        self.counters
            .iter()
            .zip(&self.addrs)
            .map(|(c, addr)| {
                let failures = c.failures.load(Ordering::Relaxed);
                EndpointCounts {
                    addr: addr.to_string(),
                    attempts: c.successes.load(Ordering::Relaxed) + failures,
                    failures,
                }
            })
            .collect()
    }

    /// Every slot as the admin page shows it, at `now`.
    pub fn views(&self, now: Duration) -> Vec<EndpointView> {
        // The balancer's figures are copied under its lock (the request path's); the rest,
        // strings included, is built after it is released.
        let balancer: Vec<_> = {
            let guard = self.lock();
            (0..self.addrs.len())
                .map(|i| {
                    let client = &guard.client;
                    let cost = client.load(i, now).map(|l| l.cost);
                    let ejected = client.is_ejected(i, now);
                    let signals = Signals {
                        health: client.health(i),
                        silence: client.silence(i, now),
                        pushed: client.pushed_back_for(i, now),
                        warming: client.warming_since(i, now).map(|s| now.saturating_sub(s)),
                    };
                    (cost, client.accrual_status(i), ejected, signals)
                })
                .collect()
        };
        balancer
            .into_iter()
            .enumerate()
            .map(|(i, (cost, status, ejected, signals))| {
                let c = &self.counters[i];
                let successes = c.successes.load(Ordering::Relaxed);
                let failures = c.failures.load(Ordering::Relaxed);
                let total = successes + failures;
                EndpointView {
                    addr: self.addrs[i].to_string(),
                    pending: c.pending.load(Ordering::Relaxed),
                    cost,
                    successes,
                    failures,
                    success_rate: if total == 0 {
                        1.0
                    } else {
                        successes as f64 / total as f64
                    },
                    state: match status {
                        None | Some(Status::Alive) if ejected => "ejected",
                        None | Some(Status::Alive) => "alive",
                        Some(Status::Dead { .. }) => "dead",
                        Some(Status::Probing { .. }) => "probing",
                    },
                    probe_in_ms: match status {
                        Some(Status::Dead { until, .. }) => Some(millis(until.saturating_sub(now))),
                        _ => None,
                    },
                    ejections: c.ejections.load(Ordering::Relaxed),
                    hedges: c.hedges.load(Ordering::Relaxed),
                    hedge_wins: c.hedge_wins.load(Ordering::Relaxed),
                    last_error: lock(&c.last_error).as_ref().map(|(at, what)| LastError {
                        what: what.clone(),
                        ago_ms: millis(now.saturating_sub(*at)),
                    }),
                    silence_ms: millis(signals.silence),
                    pushed_back_ms: signals.pushed.map(millis),
                    slow_start_ms: signals.warming.map(millis),
                    health: signals.health.map(|h| match h {
                        tailguard_resilience::HealthState::Unchecked => "unchecked",
                        tailguard_resilience::HealthState::Healthy => "healthy",
                        tailguard_resilience::HealthState::Unhealthy => "unhealthy",
                    }),
                }
            })
            .collect()
    }
}

/// What the client knows of one endpoint's health beyond accrual, copied under its lock.
struct Signals {
    health: Option<tailguard_resilience::HealthState>,
    silence: Duration,
    pushed: Option<Duration>,
    warming: Option<Duration>,
}

/// Locks `m`, keeping what a panicked holder left (plain values).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::Endpoints;
    use crate::config::Upstream;
    use std::time::Duration;
    use tailguard_balance::Policy;
    use tailguard_client::ArmConfig;
    use tailguard_resilience::Backoff;

    /// Retry jitter comes from the generation's seeded RNG: the same seed draws the same
    /// waits (as in the simulator), another seed others; the clock has no part in it.
    #[test]
    fn retry_waits_are_drawn_from_the_seeded_rng() {
        let upstreams = [Upstream::new("127.0.0.1:1".parse().unwrap())];
        let arm = ArmConfig::new("web", Policy::RoundRobin);
        let backoff = Backoff::FullJittered {
            start: Duration::from_millis(100),
            max: Duration::from_secs(10),
        };
        let waits = |seed: u64| -> Vec<Duration> {
            let e = Endpoints::new(&upstreams, &arm, Duration::ZERO, seed).unwrap();
            (1..=8).map(|t| e.retry_delay(&backoff, t)).collect()
        };
        assert_eq!(waits(7), waits(7));
        assert_ne!(waits(7), waits(8));
        assert!(waits(7).iter().all(|w| *w <= Duration::from_secs(10)));
    }
}
