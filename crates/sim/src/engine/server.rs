//! The endpoints: what the fleet model says each request does, and the capacity queue.
//!
//! The fleet's protocol (see `tailguard_fleet::backend`), for an attempt arriving at `t`:
//! 1. the endpoint is down: the connection is refused at once;
//! 2. with a capacity (the backend's own, `tailguard_fleet::capacity`, or the scenario's
//!    `servers.concurrency` for backends without one) and every worker busy, the attempt waits
//!    in the fleet's FIFO `Line`, and its service starts when a worker frees (attempts abandoned
//!    while queued are skipped, as a server skips a request whose client hung up, unless the
//!    scenario says `servers: {abandoned: serve}`: a server that does not notice); when the
//!    line is full it is rejected at once with the capacity's status;
//! 3. service starting at `s`: if paused at `s`, it starts when the pause ends; the fleet's
//!    `decide` gives the latency and outcome; a response falling due during a pause leaves
//!    when the pause ends. A pause that never ends means no response at all.
//!
//! An abandoned attempt already in service keeps its slot until it completes: the endpoint
//! does not know the client gave up.

use super::queue::{Event, Queue};
use super::request::Attempt;
use super::slab::{Key, Slab};
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use std::time::Duration;
use tailguard_fleet::capacity::{Arrival, Line};
use tailguard_fleet::probe::{ProbeAnswer, Recent};
use tailguard_fleet::{Capacity, Fleet, Outcome};
use tailguard_resilience::AttemptOutcome;

/// Pauses chained back to back are followed this many times before giving up on a response.
const MAX_PAUSE_CHAIN: usize = 64;

/// One endpoint's random stream and capacity state.
#[derive(Debug)]
struct Server {
    rng: Xoshiro256PlusPlus,
    capacity: Option<Capacity>,
    line: Line<Key>,
    /// Attempts in service (the line's busy workers, or any number without a capacity).
    in_service: u32,
    /// Recent attempts' RIF at arrival and latency: what a probe's latency estimate reads.
    recent: Recent,
}

/// The engine's state that an endpoint step reads and writes.
pub(super) struct Step<'e> {
    pub(super) now: Duration,
    pub(super) fleet: &'e Fleet,
    pub(super) queue: &'e mut Queue,
    pub(super) attempts: &'e mut Slab<Attempt>,
}

/// Every endpoint of the fleet.
#[derive(Debug)]
pub(super) struct Endpoints {
    servers: Vec<Server>,
    /// Serve attempts abandoned while waiting in a line (else skip them).
    serve_abandoned: bool,
}

impl Endpoints {
    /// One endpoint per seed and backend of `fleet`; `concurrency` is the capacity of the
    /// backends that have none of their own.
    pub(super) fn new(
        seeds: impl IntoIterator<Item = u64>,
        fleet: &Fleet,
        concurrency: Option<u32>,
        serve_abandoned: bool,
    ) -> Self {
        let servers = seeds
            .into_iter()
            .zip(&fleet.backends)
            .map(|(seed, spec)| Server {
                rng: Xoshiro256PlusPlus::seed_from_u64(seed),
                capacity: spec.capacity.or(concurrency.map(Capacity::new)),
                line: Line::default(),
                in_service: 0,
                recent: Recent::default(),
            })
            .collect();
        Self {
            servers,
            serve_abandoned,
        }
    }

    /// Endpoint `endpoint`'s workers at `now`, if it has a capacity.
    fn workers(&self, endpoint: usize, fleet: &Fleet, now: Duration) -> Option<u32> {
        let cap = self.servers[endpoint].capacity?;
        Some(fleet.backends[endpoint].workers(now).unwrap_or(cap.workers))
    }

    /// Steps 1 and 2.
    pub(super) fn accept(&mut self, endpoint: usize, attempt: Key, mut step: Step<'_>) {
        if step.fleet.backends[endpoint].is_down(step.now) {
            if let Some(a) = step.attempts.get_mut(attempt) {
                a.outcome = AttemptOutcome::Refused;
            }
            step.queue.push(step.now, done(attempt, endpoint, false));
            return;
        }
        let rif = self.rif(endpoint);
        if let Some(a) = step.attempts.get_mut(attempt) {
            a.rif_at_arrival = rif;
        }
        let (Some(cap), Some(workers)) = (
            self.servers[endpoint].capacity,
            self.workers(endpoint, step.fleet, step.now),
        ) else {
            return self.start_service(endpoint, attempt, &mut step);
        };
        // A raised capacity serves those already waiting first.
        let attempts = &*step.attempts;
        let line = &mut self.servers[endpoint].line;
        let all = self.serve_abandoned;
        let mut ready = line.admit(workers, |k| all || attempts.get(*k).is_some_and(|a| a.live));
        match line.arrive(&cap, workers, attempt) {
            Arrival::Start(a) => ready.push(a),
            Arrival::Wait => {}
            Arrival::Reject(a, status) => {
                if let Some(a) = step.attempts.get_mut(a) {
                    a.outcome = AttemptOutcome::Status(status);
                }
                step.queue.push(step.now, done(attempt, endpoint, false));
            }
        }
        for a in ready {
            self.start_service(endpoint, a, &mut step);
        }
    }

    /// Step 3 (a worker, if the endpoint has a capacity, is already taken for it).
    fn start_service(&mut self, endpoint: usize, attempt: Key, step: &mut Step<'_>) {
        let spec = &step.fleet.backends[endpoint];
        let server = &mut self.servers[endpoint];
        let start = spec.paused_until(step.now).unwrap_or(step.now);
        let decision = spec.decide(start, &mut server.rng);
        server.in_service += 1;
        if let Some(a) = step.attempts.get_mut(attempt) {
            a.outcome = match decision.outcome {
                Outcome::Respond { status } => AttemptOutcome::Status(status),
                Outcome::Close | Outcome::Reset => AttemptOutcome::Reset,
            };
        }
        if let Some(at) = response_time(spec, start, decision.latency) {
            step.queue.push(at, done(attempt, endpoint, true));
        }
    }

    /// Requests at `endpoint` now: in service and waiting.
    pub(super) fn rif(&self, endpoint: usize) -> u32 {
        let s = &self.servers[endpoint];
        s.in_service
            .saturating_add(u32::try_from(s.line.waiting()).unwrap_or(u32::MAX))
    }

    /// What `endpoint` answers a load probe at `now`: `None` when it is down; when paused, the
    /// answer comes when the pause ends (as a request's would) and this returns that time.
    pub(super) fn probe(
        &self,
        endpoint: usize,
        fleet: &Fleet,
        now: Duration,
    ) -> Option<(ProbeAnswer, Duration)> {
        let spec = &fleet.backends[endpoint];
        if spec.is_down(now) {
            return None;
        }
        let at = spec.paused_until(now).unwrap_or(now);
        let rif = self.rif(endpoint);
        Some((self.servers[endpoint].recent.answer(rif), at))
    }

    /// The endpoint finished an attempt (`served`: it was in service, not refused or turned
    /// away): free its worker and serve the next in line (the engine then delivers the outcome
    /// if the client still waits for it).
    pub(super) fn on_done(
        &mut self,
        endpoint: usize,
        attempt: Key,
        served: bool,
        mut step: Step<'_>,
    ) {
        if !served {
            return;
        }
        let server = &mut self.servers[endpoint];
        server.in_service = server.in_service.saturating_sub(1);
        if let Some(a) = step.attempts.get(attempt) {
            server
                .recent
                .record(a.rif_at_arrival, step.now.saturating_sub(a.sent));
        }
        if server.capacity.is_none() {
            return;
        }
        let workers = self
            .workers(endpoint, step.fleet, step.now)
            .unwrap_or(u32::MAX);
        let attempts = &*step.attempts;
        let all = self.serve_abandoned;
        let ready = self.servers[endpoint]
            .line
            .finish(workers, |k| all || attempts.get(*k).is_some_and(|a| a.live));
        for a in ready {
            self.start_service(endpoint, a, &mut step);
        }
    }
}

fn done(attempt: Key, endpoint: usize, slot: bool) -> Event {
    Event::Done {
        attempt,
        endpoint: u32::try_from(endpoint).expect("fewer than 2^32 endpoints"),
        slot,
    }
}

/// When a response started at `start` with `latency` leaves, pauses included; `None` if never.
fn response_time(
    spec: &tailguard_fleet::BackendSpec,
    start: Duration,
    latency: Duration,
) -> Option<Duration> {
    if start == Duration::MAX {
        return None;
    }
    let mut at = start.checked_add(latency)?;
    for _ in 0..MAX_PAUSE_CHAIN {
        match spec.paused_until(at) {
            None => return Some(at),
            Some(Duration::MAX) => return None,
            Some(resume) => at = resume,
        }
    }
    None
}
