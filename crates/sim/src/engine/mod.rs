//! The discrete-event engine: one arm of a scenario in virtual time.
//!
//! # What
//! A min-heap of timed events (`queue.rs`) drives three actors:
//! 1. the load: open-loop arrivals from `tailguard_pacing` (constant or Poisson), dealt to the
//!    clients in turn, or closed-loop workers (worker `w` belongs to client `w % clients`) that
//!    send, wait for the response, and wait out their interval;
//! 2. the clients: one [`Client`] per client-side balancer, the same request path the proxy
//!    runs (pick, accrual, retries, hedges, timeouts; see `request.rs`);
//! 3. the endpoints: each asks the fleet model what a request does (`is_down`, `paused_until`,
//!    `decide`), optionally behind a capacity limit with a FIFO queue (see `server.rs`).
//!
//! # Determinism
//! Every random draw comes from a seeded stream: arrivals, one stream per endpoint (derived from
//! the fleet's per-backend seeds), and one for the clients' choices. Every arm starts from the
//! same seeds (common random numbers), events at equal times run in scheduling order, and no
//! output depends on hash iteration: the same seed gives the same report, byte for byte.

mod queue;
mod request;
mod server;
mod slab;

use crate::client::{Client, ClientStats};
use crate::results::ArmResult;
use crate::scenario::{LoadShape, Scenario};
use queue::{Event, Queue};
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use request::{Attempt, Request};
use server::Server;
use slab::Slab;
use std::time::Duration;
use tailguard_histogram::Histogram;
use tailguard_pacing::Schedule;

/// A scenario that cannot run.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// An arm's configuration.
    #[error("arm `{arm}`: {source}")]
    Arm {
        /// The arm.
        arm: String,
        /// What is wrong.
        source: crate::client::ArmError,
    },
    /// The arrival schedule.
    #[error("load: {0}")]
    Pacing(String),
    /// No endpoints.
    #[error("the fleet has no endpoints")]
    NoEndpoints,
}

/// Seeds of the independent random streams, from the scenario seed.
fn stream_seed(seed: u64, stream: u64) -> u64 {
    tailguard_fleet::fleet::derive_seed(seed, stream)
}

/// The state of one arm's run.
struct Engine<'a> {
    scenario: &'a Scenario,
    arm: usize,
    now: Duration,
    queue: Queue,
    clients: Vec<Client>,
    rng: Xoshiro256PlusPlus,
    servers: Vec<Server>,
    requests: Slab<Request>,
    attempts: Slab<Attempt>,
    arrivals: Option<Schedule>,
    next_arrival: u64,
    /// Closed loop: when each worker last sent.
    worker_sent: Vec<Duration>,
    /// `clients x endpoints`: did this client ever send to this endpoint?
    used: Vec<bool>,
    out: ArmResult,
}

/// Runs arm `arm` of `scenario` to completion.
///
/// # Errors
/// When the arm or the load cannot be built.
pub fn run_arm(scenario: &Scenario, arm: usize) -> Result<ArmResult, RunError> {
    let mut engine = Engine::new(scenario, arm)?;
    engine.start();
    while let Some((at, event)) = engine.queue.pop() {
        engine.now = at;
        engine.dispatch(event);
    }
    engine.abandon_stuck();
    Ok(engine.finish())
}

impl<'a> Engine<'a> {
    fn new(scenario: &'a Scenario, arm: usize) -> Result<Self, RunError> {
        let config = &scenario.arms[arm];
        let n = scenario.fleet.backends.len();
        if n == 0 {
            return Err(RunError::NoEndpoints);
        }
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(stream_seed(scenario.seed, 1));
        let clients = (0..scenario.load.clients)
            .map(|_| Client::new(config, n, Duration::ZERO, &mut rng))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|source| RunError::Arm {
                arm: config.name.clone(),
                source,
            })?;
        let servers = (0..n)
            .map(|i| Server::new(stream_seed(scenario.seed, scenario.fleet.backend_seed(i))))
            .collect();
        let workers = match scenario.load.shape {
            LoadShape::Closed { workers, .. } => workers as usize,
            LoadShape::Open { .. } => 0,
        };
        Ok(Self {
            scenario,
            arm,
            now: Duration::ZERO,
            queue: Queue::default(),
            used: vec![false; clients.len() * n],
            clients,
            rng,
            servers,
            requests: Slab::new(),
            attempts: Slab::new(),
            arrivals: arrival_schedule(scenario)?,
            next_arrival: 0,
            worker_sent: vec![Duration::ZERO; workers],
            out: empty_result(scenario, arm),
        })
    }

    /// Schedules the first arrival, or starts every worker (spread over one interval, so 50
    /// workers do not fire in lockstep).
    fn start(&mut self) {
        match self.scenario.load.shape {
            LoadShape::Open { .. } => self.schedule_arrival(),
            LoadShape::Closed { workers, interval } => {
                for w in 0..workers {
                    let at = interval.mul_f64(f64::from(w) / f64::from(workers));
                    self.queue.push(at, Event::WorkerSend(w));
                }
            }
        }
    }

    /// The arm being run (borrowed from the scenario, not from the engine).
    fn arm_config(&self) -> &'a crate::client::ArmConfig {
        &self.scenario.arms[self.arm]
    }

    fn dispatch(&mut self, event: Event) {
        match event {
            Event::Arrival => self.on_arrival(),
            Event::WorkerSend(w) => self.on_worker_send(w),
            Event::Done {
                attempt,
                endpoint,
                slot,
            } => self.on_done(attempt, endpoint as usize, slot),
            Event::AttemptTimeout(a) => self.on_attempt_timeout(a),
            Event::Hedge(r) => self.on_hedge(r),
            Event::RequestTimeout(r) => self.on_request_timeout(r),
            Event::Retry(r) => self.on_retry(r),
        }
    }

    fn schedule_arrival(&mut self) {
        let Some(schedule) = self.arrivals.as_mut() else {
            return;
        };
        let at = schedule.next_send(self.next_arrival);
        if at < self.scenario.load.duration {
            self.queue.push(at, Event::Arrival);
        }
    }

    fn on_arrival(&mut self) {
        let client = (self.next_arrival % u64::from(self.scenario.load.clients)) as usize;
        self.next_arrival += 1;
        self.new_request(client, None);
        self.schedule_arrival();
    }

    fn on_worker_send(&mut self, worker: u32) {
        self.worker_sent[worker as usize] = self.now;
        let client = worker as usize % self.clients.len();
        self.new_request(client, Some(worker));
    }

    /// Closed loop: the worker's request ended; it sends again after its interval, if the run
    /// is still on.
    fn worker_next(&mut self, worker: u32) {
        let LoadShape::Closed { interval, .. } = self.scenario.load.shape else {
            return;
        };
        let at = self.now.max(self.worker_sent[worker as usize] + interval);
        if at < self.scenario.load.duration {
            self.queue.push(at, Event::WorkerSend(worker));
        }
    }

    fn finish(mut self) -> ArmResult {
        let mut stats = ClientStats::default();
        for c in &self.clients {
            let s = c.stats();
            stats.trips += s.trips;
            stats.retries += s.retries;
            stats.retries_refused += s.retries_refused;
            stats.hedges += s.hedges;
        }
        self.out.stats = stats;
        let used = self.used.iter().filter(|&&u| u).count();
        self.out.endpoints_per_client = used as f64 / self.clients.len() as f64;
        self.out
    }
}

/// The open-loop schedule, from its own seeded stream; `None` for a closed loop.
fn arrival_schedule(scenario: &Scenario) -> Result<Option<Schedule>, RunError> {
    let LoadShape::Open { arrivals, rate } = scenario.load.shape else {
        return Ok(None);
    };
    let seed = stream_seed(scenario.seed, 2);
    Schedule::new(arrivals, rate, seed)
        .map(Some)
        .map_err(|e| RunError::Pacing(e.to_string()))
}

fn empty_result(scenario: &Scenario, arm: usize) -> ArmResult {
    let config = &scenario.arms[arm];
    ArmResult {
        name: config.name.clone(),
        description: config.summary(),
        latency: Histogram::new(),
        requests: 0,
        successes: 0,
        within_deadline: 0,
        attempts: vec![0; scenario.fleet.backends.len()],
        stats: ClientStats::default(),
        endpoints_per_client: 0.0,
        duration: scenario.load.duration,
    }
}
