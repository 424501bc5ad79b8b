//! The endpoints: what the fleet model says each request does, and the capacity queue.
//!
//! The fleet's protocol (see `tailguard_fleet::backend`), for an attempt arriving at `t`:
//! 1. the endpoint is down: the connection is refused at once;
//! 2. with a capacity limit and every slot busy, the attempt waits in a FIFO queue, and its
//!    service starts when a slot frees (attempts abandoned while queued are skipped, as a
//!    server skips a request whose client hung up);
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
use std::collections::VecDeque;
use std::time::Duration;
use tailguard_fleet::{Fleet, Outcome};
use tailguard_resilience::AttemptOutcome;

/// Pauses chained back to back are followed this many times before giving up on a response.
const MAX_PAUSE_CHAIN: usize = 64;

/// One endpoint's random stream and capacity state.
#[derive(Debug)]
struct Server {
    rng: Xoshiro256PlusPlus,
    busy: u32,
    waiting: VecDeque<Key>,
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
    /// Each endpoint's capacity (`None`: unlimited).
    concurrency: Option<u32>,
}

impl Endpoints {
    /// One endpoint per seed.
    pub(super) fn new(seeds: impl IntoIterator<Item = u64>, concurrency: Option<u32>) -> Self {
        let servers = seeds
            .into_iter()
            .map(|seed| Server {
                rng: Xoshiro256PlusPlus::seed_from_u64(seed),
                busy: 0,
                waiting: VecDeque::new(),
            })
            .collect();
        Self {
            servers,
            concurrency,
        }
    }

    /// Steps 1 and 2.
    pub(super) fn accept(&mut self, endpoint: usize, attempt: Key, step: Step<'_>) {
        if step.fleet.backends[endpoint].is_down(step.now) {
            if let Some(a) = step.attempts.get_mut(attempt) {
                a.outcome = AttemptOutcome::Refused;
            }
            step.queue.push(step.now, done(attempt, endpoint, false));
            return;
        }
        match self.concurrency {
            Some(limit) if self.servers[endpoint].busy >= limit => {
                self.servers[endpoint].waiting.push_back(attempt);
            }
            _ => self.start_service(endpoint, attempt, step),
        }
    }

    /// Step 3.
    fn start_service(&mut self, endpoint: usize, attempt: Key, step: Step<'_>) {
        let spec = &step.fleet.backends[endpoint];
        let server = &mut self.servers[endpoint];
        let start = spec.paused_until(step.now).unwrap_or(step.now);
        let decision = spec.decide(start, &mut server.rng);
        let slot = self.concurrency.is_some();
        server.busy += u32::from(slot);
        if let Some(a) = step.attempts.get_mut(attempt) {
            a.outcome = match decision.outcome {
                Outcome::Respond { status } => AttemptOutcome::Status(status),
                Outcome::Close | Outcome::Reset => AttemptOutcome::Reset,
            };
        }
        if let Some(at) = response_time(spec, start, decision.latency) {
            step.queue.push(at, done(attempt, endpoint, slot));
        }
    }

    /// The endpoint finished an attempt: free its slot and serve the next in line (the engine
    /// then delivers the outcome if the client still waits for it).
    pub(super) fn on_done(&mut self, endpoint: usize, slot: bool, step: Step<'_>) {
        if !slot {
            return;
        }
        self.servers[endpoint].busy -= 1;
        while let Some(next) = self.servers[endpoint].waiting.pop_front() {
            if step.attempts.get(next).is_some_and(|a| a.live) {
                self.start_service(endpoint, next, step);
                break;
            }
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
