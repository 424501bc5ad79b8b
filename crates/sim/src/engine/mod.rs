//! The discrete-event engine: one arm of a scenario in virtual time.
//!
//! # What
//! A min-heap of timed events (`queue.rs`) drives three actors:
//! 1. the load: open-loop arrivals from `tailguard_pacing` (constant or Poisson, with an
//!    optional linear ramp of the rate), dealt to the
//!    clients in turn, or closed-loop workers (worker `w` belongs to client `w % clients`) that
//!    send, wait for the response, and wait out their interval;
//! 2. the clients: one [`Client`] per client-side balancer, the same request path the proxy
//!    runs (pick, accrual, retries, hedges, timeouts; see the request's life below);
//! 3. the endpoints: each asks the fleet model what a request does (`is_down`, `paused_until`,
//!    `decide`), optionally behind a capacity limit with a FIFO queue (see `server.rs`).
//!
//! # Determinism
//! Every random draw comes from a seeded stream: arrivals, one stream per endpoint (derived from
//! the fleet's per-backend seeds), and one for the clients' choices. Every arm starts from the
//! same seeds (common random numbers), events at equal times run in scheduling order, and no
//! output depends on hash iteration: the same seed gives the same report, byte for byte.

mod guard;
mod queue;
mod request;
mod server;
mod slab;

use crate::client::{Backup, Client, ClientStats};
use crate::results::ArmResult;
use crate::scenario::{LoadShape, Scenario};
use guard::Guard;
use queue::{Event, Queue};
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use request::{Attempt, Request};
use server::{Endpoints, Step};
use slab::{Key, Slab};
use std::time::Duration;
use tailguard_client::gate::{Admitted, Gate};
use tailguard_histogram::Histogram;
use tailguard_pacing::Schedule;
use tailguard_resilience::admission::Criticality;
use tailguard_resilience::AttemptOutcome;

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
    /// An arm that sends more than the simulator runs (see [`Guard`]).
    #[error("arm `{arm}`: {reason}")]
    Runaway {
        /// The arm.
        arm: String,
        /// What it did.
        reason: String,
    },
}

/// How long a probe waits for a paused endpoint before it counts as unanswered.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

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
    endpoints: Endpoints,
    requests: Slab<Request>,
    attempts: Slab<Attempt>,
    arrivals: Option<Schedule>,
    next_arrival: u64,
    /// Closed loop: when each worker last sent.
    worker_sent: Vec<Duration>,
    /// Probe targets of the last pick (kept to reuse its allocation).
    probes: Vec<usize>,
    /// `clients x endpoints`: did this client ever send to this endpoint?
    used: Vec<bool>,
    guard: Guard,
    /// Each client's admission, when the arm bounds attempts in flight.
    gates: Vec<Option<Gate<Key>>>,
    /// Requests admission lets go (or refuses) at once, reused.
    go: Vec<Key>,
    /// Requests made so far (the next one's ordinal: its class depends on it alone).
    made: u64,
    /// Why the arm stopped early, if it did.
    runaway: Option<String>,
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
        if let Some(reason) = engine.runaway.take() {
            return Err(RunError::Runaway {
                arm: scenario.arms[arm].name.clone(),
                reason,
            });
        }
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
        let seeds = (0..n).map(|i| stream_seed(scenario.seed, scenario.fleet.backend_seed(i)));
        let endpoints = Endpoints::new(
            seeds,
            &scenario.fleet,
            scenario.servers.concurrency,
            scenario.servers.serve_abandoned,
        );
        let workers = match scenario.load.shape {
            LoadShape::Closed { workers, .. } => workers as usize,
            LoadShape::Open { .. } => 0,
        };
        let gates = (0..clients.len())
            .map(|_| config.admission.map(|a| Gate::new(a, Duration::ZERO)))
            .collect();
        Ok(Self {
            gates,
            go: Vec::new(),
            made: 0,
            scenario,
            arm,
            now: Duration::ZERO,
            queue: Queue::default(),
            used: vec![false; clients.len() * n],
            clients,
            rng,
            endpoints,
            requests: Slab::new(),
            attempts: Slab::new(),
            arrivals: arrival_schedule(scenario)?,
            next_arrival: 0,
            worker_sent: vec![Duration::ZERO; workers],
            probes: Vec::new(),
            guard: Guard::default(),
            runaway: None,
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
            Event::QueueExpiry(c) => self.on_queue_expiry(c as usize),
            Event::CallerRetry { client, class } => {
                let class = Criticality::ALL[usize::from(class).min(2)];
                self.out.caller_retries += 1;
                self.make_request(client as usize, None, class, true);
            }
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
            Event::ProbeAt { client, endpoint } => self.on_probe_at(client, endpoint),
            Event::ProbeReply {
                client,
                endpoint,
                rif,
                latency_us,
            } => {
                let reply = (rif != u32::MAX).then(|| tailguard_balance::ProbeReply {
                    rif,
                    latency: Duration::from_micros(latency_us),
                });
                self.clients[client as usize].on_probe(endpoint as usize, reply, self.now);
            }
        }
    }

    /// A probe reaches its endpoint: the answer leaves when the endpoint can give it (a paused
    /// one answers when it resumes, within [`PROBE_TIMEOUT`]) and takes the other half of the
    /// probe's round trip back; a down endpoint's refusal comes back at once.
    fn on_probe_at(&mut self, client: u32, endpoint: u32) {
        let half = self.scenario.servers.probe_delay / 2;
        let sent = self.now.saturating_sub(half);
        let (rif, latency_us, at) =
            match self
                .endpoints
                .probe(endpoint as usize, &self.scenario.fleet, self.now)
            {
                Some((answer, at)) if at.saturating_sub(sent) <= PROBE_TIMEOUT => {
                    (answer.rif, answer.latency_us, at + half)
                }
                Some(_) => (u32::MAX, 0, sent + PROBE_TIMEOUT),
                None => (u32::MAX, 0, self.now + half),
            };
        self.queue.push(
            at,
            Event::ProbeReply {
                client,
                endpoint,
                rif,
                latency_us,
            },
        );
    }

    /// An endpoint finished an attempt: it frees the slot, and the outcome reaches the client
    /// if it still waits for it.
    fn on_done(&mut self, attempt: Key, endpoint: usize, slot: bool) {
        let (endpoints, step) = self.endpoint_step();
        endpoints.on_done(endpoint, attempt, slot, step);
        let outcome = match self.attempts.get(attempt) {
            Some(a) if a.live => a.outcome,
            _ => return,
        };
        self.complete_attempt(attempt, outcome);
    }

    /// The endpoints, and the engine state an endpoint step reads and writes.
    fn endpoint_step(&mut self) -> (&mut Endpoints, Step<'_>) {
        let step = Step {
            now: self.now,
            fleet: &self.scenario.fleet,
            queue: &mut self.queue,
            attempts: &mut self.attempts,
        };
        (&mut self.endpoints, step)
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
            stats.probes += s.probes;
            stats.probes_distrusted += s.probes_distrusted;
        }
        self.out.stats = stats;
        let used = self.used.iter().filter(|&&u| u).count();
        self.out.endpoints_per_client = used as f64 / self.clients.len() as f64;
        self.out
    }
}

// A request's life: attempts, retries, hedges, timeouts, and the final outcome.
// 1. A request arrives: the client deposits into its budgets, a total timeout is armed, and
//    the first attempt goes out.
// 2. Each attempt goes to the endpoint the client picks; an attempt timeout is armed; the
//    first attempt also arms the hedge timer when the arm hedges and the method may be
//    repeated.
// 3. An attempt ends (response, refusal, reset, timeout). A success ends the request. A
//    retryable failure is retried on another endpoint when retries remain, the total deadline
//    has not passed and the budget allows; otherwise the request fails once nothing else is in
//    flight for it.
// 4. The hedge timer fires while the request is still waiting: one backup attempt to another
//    endpoint, if the hedge budget allows. The first success wins.
// 5. The request ends: its latency is recorded, its other attempts are cancelled (the
//    balancer and accrual hear of it), and a closed-loop worker schedules its next send.
impl Engine<'_> {
    /// Step 1.
    fn new_request(&mut self, client: usize, worker: Option<u32>) {
        let class = self.class_of(self.made);
        self.made += 1;
        self.make_request(client, worker, class, false);
    }

    /// A request of `class` from `client` (a worker's, or a caller's second send when `again`).
    fn make_request(
        &mut self,
        client: usize,
        worker: Option<u32>,
        class: Criticality,
        again: bool,
    ) {
        if let Err(reason) = self.guard.count(self.now) {
            self.runaway = Some(reason);
            return;
        }
        self.clients[client].on_request(self.now);
        if class == Criticality::Critical {
            self.out.critical += 1;
        }
        let key = self.requests.insert(Request {
            class,
            again,
            client,
            worker,
            scheduled: self.now,
            head: None,
            outstanding: 0,
            pending_retries: 0,
            retries: 0,
            hedged: false,
            asked: false,
            last_endpoint: usize::MAX,
            ticket: None,
        });
        // The arm's total timeout, and the request's own deadline: the sooner ends it.
        let own = self.scenario.load.request_deadline;
        let total = match (self.arm_config().timeouts.total, own) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if let Some(total) = total {
            self.queue
                .push(self.now + total, Event::RequestTimeout(key));
        }
        let deadline = own.map(|d| self.now + d);
        let Some(gate) = self.gates[client].as_mut() else {
            return self.send_attempt(key, None, false);
        };
        match gate.arrive(self.now, key, class, deadline) {
            Admitted::Now => self.send_attempt(key, None, true),
            Admitted::Waits(ticket, displaced) => {
                self.requests.get_mut(key).expect("just made").ticket = Some(ticket);
                if let Some(d) = displaced {
                    self.refuse(d);
                }
                self.arm_expiry(client);
            }
            Admitted::Refused(_) => self.refuse(key),
        }
    }

    /// Admission refused request `key` (never sent): counted, kept out of the latencies.
    fn refuse(&mut self, key: Key) {
        let Some(req) = self.requests.remove(key) else {
            return;
        };
        debug_assert!(req.head.is_none(), "a refused request was never sent");
        // The limit refuses: the budgets' floors pause (what requests earn still pays).
        self.clients[req.client].on_overload(self.now);
        self.out.requests += 1;
        self.out.refused += 1;
        let second = self.out.second_mut(self.now);
        second.ended += 1;
        second.refused += 1;
        second.critical += u64::from(req.class == Criticality::Critical);
        self.send_again(&req);
        if let Some(worker) = req.worker {
            self.worker_next(worker);
        }
    }

    /// The caller sends a failed request once more, `load.retry_after` later (open loop; the
    /// second send is never sent a third time).
    fn send_again(&mut self, req: &Request) {
        let Some(after) = self.scenario.load.retry_after else {
            return;
        };
        if req.again || req.worker.is_some() {
            return;
        }
        let client = u32::try_from(req.client).expect("fewer than 2^32 clients");
        let class = req.class as u8;
        self.queue
            .push(self.now + after, Event::CallerRetry { client, class });
    }

    /// Makes sure an expiry event is pending for `client`'s next queue wait to end.
    fn arm_expiry(&mut self, client: usize) {
        let Some(gate) = self.gates[client].as_mut() else {
            return;
        };
        let Some(at) = gate.next_expiry() else {
            return;
        };
        if gate.expiry_at.is_none_or(|pending| at < pending) {
            gate.expiry_at = Some(at);
            let who = u32::try_from(client).expect("fewer than 2^32 clients");
            self.queue.push(at, Event::QueueExpiry(who));
        }
    }

    fn on_queue_expiry(&mut self, client: usize) {
        let mut refused = std::mem::take(&mut self.go);
        if let Some(gate) = self.gates[client].as_mut() {
            if gate.expiry_at.is_some_and(|at| at <= self.now) {
                gate.expiry_at = None;
            }
            let mut out = Vec::new();
            gate.expire(self.now, &mut out);
            refused.extend(out.into_iter().map(|(key, _)| key));
        }
        for key in refused.drain(..) {
            if let Some(req) = self.requests.get_mut(key) {
                req.ticket = None;
            }
            self.refuse(key);
        }
        self.go = refused;
        self.arm_expiry(client);
    }

    /// Sends the first attempts of the requests admission let go.
    fn start_admitted(&mut self, mut go: Vec<Key>) {
        for key in go.drain(..) {
            if let Some(req) = self.requests.get_mut(key) {
                req.ticket = None;
                self.send_attempt(key, None, true);
            }
        }
        self.go = go;
    }

    /// An attempt that held a place ended: the place goes to whoever waits, and those that
    /// can no longer make their deadline are refused.
    fn release(&mut self, client: usize) {
        let mut go = std::mem::take(&mut self.go);
        let mut refused = Vec::new();
        if let Some(gate) = self.gates[client].as_mut() {
            gate.release(self.now, &mut go, &mut refused);
        }
        for (key, _) in refused {
            if let Some(req) = self.requests.get_mut(key) {
                req.ticket = None;
            }
            self.refuse(key);
        }
        self.start_admitted(go);
    }

    /// The class of the `n`-th request of the run: the same for every arm (common random
    /// numbers), drawn from the scenario's seed and `n` alone.
    fn class_of(&self, n: u64) -> Criticality {
        let load = &self.scenario.load;
        if load.critical == 0.0 && load.sheddable == 0.0 {
            return Criticality::Default;
        }
        let x = stream_seed(stream_seed(self.scenario.seed, 3), n);
        let u = (x >> 11) as f64 / (1u64 << 53) as f64;
        if u < load.critical {
            Criticality::Critical
        } else if u < load.critical + load.sheddable {
            Criticality::Sheddable
        } else {
            Criticality::Default
        }
    }

    /// A retry or a backup of `client`'s: `Some(holds a place)` when it may go.
    fn extra_place(&mut self, client: usize) -> Option<bool> {
        match self.gates[client].as_mut() {
            None => Some(false),
            Some(gate) => gate.try_extra().then_some(true),
        }
    }

    /// Step 2.
    fn send_attempt(&mut self, key: Key, avoid: Option<usize>, slot: bool) {
        let now = self.now;
        let attempt_timeout = self.arm_config().timeouts.attempt;
        let Some(req) = self.requests.get_mut(key) else {
            return;
        };
        let client = &mut self.clients[req.client];
        let endpoint = client.pick(now, avoid, &mut self.rng);
        // A probing balancer's probes for the next picks, off this request's path.
        client.probe_targets(now, &mut self.rng, &mut self.probes);
        let half = self.scenario.servers.probe_delay / 2;
        let who = u32::try_from(req.client).expect("fewer than 2^32 clients");
        for target in self.probes.drain(..) {
            let endpoint = u32::try_from(target).expect("fewer than 2^32 endpoints");
            self.queue.push(
                now + half,
                Event::ProbeAt {
                    client: who,
                    endpoint,
                },
            );
        }
        let handle = client.on_send(endpoint, now);
        let first = req.head.is_none();
        let attempt = self.attempts.insert(Attempt {
            request: key,
            endpoint,
            sent: now,
            handle,
            outcome: AttemptOutcome::Timeout,
            live: true,
            previous: req.head,
            rif_at_arrival: 0,
            slot,
        });
        req.head = Some(attempt);
        req.outstanding += 1;
        req.last_endpoint = endpoint;
        let n = self.out.attempts.len();
        self.used[req.client * n + endpoint] = true;
        self.out.attempts[endpoint] += 1;
        if let Some(t) = attempt_timeout {
            self.queue.push(now + t, Event::AttemptTimeout(attempt));
        }
        if first {
            self.arm_hedge(key);
        }
        let (endpoints, step) = self.endpoint_step();
        endpoints.accept(endpoint, attempt, step);
    }

    fn arm_hedge(&mut self, key: Key) {
        let method = self.scenario.load.method;
        if !self.arm_config().classifier.retries(method) {
            return;
        }
        let Some(req) = self.requests.get(key) else {
            return;
        };
        if let Some(delay) = self.clients[req.client].backup_delay(self.now) {
            self.queue.push(self.now + delay, Event::Hedge(key));
        }
    }

    /// Step 3: an endpoint's answer (or a timeout) reaches the client.
    fn complete_attempt(&mut self, attempt: Key, outcome: AttemptOutcome) {
        let Some(a) = self.attempts.get_mut(attempt).filter(|a| a.live) else {
            return;
        };
        a.live = false;
        let (key, endpoint, sent, handle, slot) = (a.request, a.endpoint, a.sent, a.handle, a.slot);
        let Some(req) = self.requests.get_mut(key) else {
            return;
        };
        req.outstanding -= 1;
        let client = req.client;
        let method = self.scenario.load.method;
        let class = self.clients[client]
            .on_complete(
                endpoint,
                handle,
                self.now.saturating_sub(sent),
                method,
                outcome,
                self.now,
                &mut self.rng,
            )
            .class;
        if slot {
            // The place first: a request waiting goes before this one's retry.
            self.learn(client, sent, outcome);
            self.release(client);
        }
        if class.success {
            self.finish_request(key, true);
        } else if !(class.retryable && self.try_retry(key, endpoint)) {
            let req = &self.requests.get(key).expect("still open");
            if req.outstanding == 0 && req.pending_retries == 0 {
                self.finish_request(key, false);
            }
        }
    }

    /// Step 3: retry `key` away from `failed` if the arm, the deadline and the budget allow.
    fn try_retry(&mut self, key: Key, failed: usize) -> bool {
        let Some(retry) = self.arm_config().retries else {
            return false;
        };
        let total = self.arm_config().timeouts.total;
        let req = self.requests.get_mut(key).expect("still open");
        let time_left = total.is_none_or(|t| self.now < req.scheduled + t);
        if req.retries >= retry.max_retries || !time_left {
            return false;
        }
        if !self.clients[req.client].may_retry(self.now) {
            return false;
        }
        let client = req.client;
        if retry.backoff.is_none() {
            // An immediate retry needs a place now (a later one asks when it is due).
            let Some(slot) = self.extra_place(client) else {
                return false;
            };
            self.requests.get_mut(key).expect("still open").retries += 1;
            self.send_attempt(key, Some(failed), slot);
            return true;
        }
        let req = self.requests.get_mut(key).expect("still open");
        req.retries += 1;
        if let Some(b) = retry.backoff {
            req.pending_retries += 1;
            let delay = b.delay(req.retries, &mut self.rng);
            self.queue.push(self.now + delay, Event::Retry(key));
        }
        true
    }

    fn on_retry(&mut self, key: Key) {
        let Some(req) = self.requests.get_mut(key) else {
            return;
        };
        req.pending_retries -= 1;
        let (avoid, client) = (req.last_endpoint, req.client);
        match self.extra_place(client) {
            Some(slot) => self.send_attempt(key, Some(avoid), slot),
            // No place: the retry is not sent; the request ends if nothing else is out.
            None => {
                let req = self.requests.get(key).expect("still open");
                if req.outstanding == 0 && req.pending_retries == 0 {
                    self.finish_request(key, false);
                }
            }
        }
    }

    /// Step 4.
    fn on_hedge(&mut self, key: Key) {
        let max_retries = self.arm_config().retries.map_or(0, |r| r.max_retries);
        let Some(req) = self.requests.get_mut(key) else {
            return;
        };
        if req.outstanding == 0 || (req.hedged && req.retries >= max_retries) {
            return;
        }
        // The first ask may hedge; later ones (and any after a hedge) may only rescue, each a
        // retry, within the retry limit.
        let first = !req.asked;
        req.asked = true;
        if !first && req.retries >= max_retries {
            return;
        }
        let endpoint = req.last_endpoint;
        let client = req.client;
        match self.clients[client].may_backup(endpoint, first, self.now) {
            Backup::Hedge => {
                req.hedged = true;
                if let Some(slot) = self.extra_place(client) {
                    self.send_attempt(key, Some(endpoint), slot);
                }
                self.rearm_backup(key, client);
            }
            Backup::Rescue => {
                if let Some(slot) = self.extra_place(client) {
                    self.requests.get_mut(key).expect("still open").retries += 1;
                    self.send_attempt(key, Some(endpoint), slot);
                }
                self.rearm_backup(key, client);
            }
            Backup::Wait(after) => self.queue.push(self.now + after, Event::Hedge(key)),
            Backup::No => {}
        }
    }

    /// After a backup, the new attempt may itself need rescue: ask again a delay later.
    fn rearm_backup(&mut self, key: Key, client: usize) {
        if let Some(delay) = self.clients[client].backup_delay(self.now) {
            self.queue.push(self.now + delay, Event::Hedge(key));
        }
    }

    fn on_attempt_timeout(&mut self, attempt: Key) {
        self.complete_attempt(attempt, AttemptOutcome::Timeout);
    }

    fn on_request_timeout(&mut self, key: Key) {
        let Some(req) = self.requests.get_mut(key) else {
            return;
        };
        // Still waiting for admission: it leaves the queue.
        if let Some(ticket) = req.ticket.take() {
            let client = req.client;
            if let Some(gate) = self.gates[client].as_mut() {
                gate.cancel(ticket);
            }
        }
        self.finish_request(key, false);
    }

    /// Step 5.
    fn finish_request(&mut self, key: Key, success: bool) {
        let req = self.requests.remove(key).expect("finished once");
        let latency = self.now.saturating_sub(req.scheduled);
        self.out.latency.record(latency);
        self.out.requests += 1;
        if !success {
            self.send_again(&req);
        }
        let critical = req.class == Criticality::Critical;
        let in_time = success && latency <= self.scenario.deadline;
        let second = self.out.second_mut(self.now);
        second.ended += 1;
        second.latency.record(latency);
        second.critical += u64::from(critical);
        second.within_deadline += u64::from(in_time);
        second.critical_within_deadline += u64::from(in_time && critical);
        if success {
            self.out.successes += 1;
            if in_time {
                self.out.within_deadline += 1;
                if critical {
                    self.out.critical_within_deadline += 1;
                }
            }
        }
        let mut next = req.head;
        let mut places = 0;
        while let Some(k) = next {
            let a = self
                .attempts
                .remove(k)
                .expect("attempts live as long as their request");
            if a.live {
                self.clients[req.client].on_cancel(a.endpoint, a.handle, self.now);
                places += u32::from(a.slot);
            }
            next = a.previous;
        }
        for _ in 0..places {
            self.release(req.client);
        }
        if let Some(worker) = req.worker {
            self.worker_next(worker);
        }
    }

    /// What an attempt that held a place says of the backend: a success's round trip, or a
    /// timeout (a drop); a higher limit lets waiting requests go.
    fn learn(&mut self, client: usize, sent: Duration, outcome: AttemptOutcome) {
        let rtt = match outcome {
            AttemptOutcome::Timeout => None,
            o if self
                .arm_config()
                .classifier
                .classify(self.scenario.load.method, o)
                .success =>
            {
                Some(self.now.saturating_sub(sent))
            }
            _ => return,
        };
        let mut go = std::mem::take(&mut self.go);
        if let Some(gate) = self.gates[client].as_mut() {
            gate.learn(self.now, rtt, &mut go);
        }
        self.start_admitted(go);
    }

    /// Requests that can never end (an endpoint paused for good, and no timeout) fail when the
    /// event queue runs dry.
    fn abandon_stuck(&mut self) {
        let stuck: Vec<Key> = self.requests.keys().collect();
        for key in stuck {
            self.finish_request(key, false);
        }
    }
}

/// The open-loop schedule, from its own seeded stream; `None` for a closed loop.
fn arrival_schedule(scenario: &Scenario) -> Result<Option<Schedule>, RunError> {
    let LoadShape::Open {
        arrivals,
        rate,
        ramp,
    } = scenario.load.shape
    else {
        return Ok(None);
    };
    let seed = stream_seed(scenario.seed, 2);
    if let Some(stages) = &scenario.stages {
        return Schedule::staged(arrivals, stages.clone(), seed)
            .map(Some)
            .map_err(|e| RunError::Pacing(e.to_string()));
    }
    let schedule = Schedule::new(arrivals, rate, seed);
    match ramp {
        None => schedule,
        Some(r) => schedule.and_then(|s| s.with_ramp(r)),
    }
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
        refused: 0,
        critical: 0,
        critical_within_deadline: 0,
        caller_retries: 0,
        timeline: Vec::new(),
        attempts: vec![0; scenario.fleet.backends.len()],
        stats: ClientStats::default(),
        endpoints_per_client: 0.0,
        duration: scenario.load.duration,
    }
}
