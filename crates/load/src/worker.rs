//! Workers: each owns its connections and its statistics, takes the next due request, sends it
//! and records what happened. A run has `concurrency` workers, so at most that many requests are
//! in flight; a request due while every worker is busy waits in the queue, and the wait counts
//! in its latency (it is measured from the schedule), never hidden.

use crate::clock::Clock;
use crate::config::RecordHook;
use crate::conn::{Conn, Connector};
use crate::request::Template;
use crate::target::Target;
use hyper::HeaderMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tailguard_record::{ByName, Class, Classifier, ErrorKind, Outcome, Record, Stats};

/// Told of each open-loop request that failed: its index and when it ended.
pub(crate) type Failed = Box<dyn Fn(u64, Duration) + Send>;

/// One request to send: its index in the run, when it was due, and when the pacer released it
/// (later than due when the pacer ran behind).
#[derive(Debug)]
pub(crate) struct Job {
    pub index: u64,
    pub scheduled: Duration,
    pub released: Duration,
    /// A replay's request (others are the run's own: `pick` says which).
    pub request: Option<Box<Replayed>>,
    /// A second send of a request that failed (`--retry-after`): never sent a third time.
    pub again: bool,
}

/// A request of the replay, ready for a worker: its template and its origin (also the index
/// of the target its figures count under).
#[derive(Debug)]
pub(crate) struct Replayed {
    pub template: Template,
    pub origin: usize,
}

/// What every worker of a run shares, read-only.
pub(crate) struct Shared {
    pub clock: Clock,
    /// Every request of the run's list (a URL, or a request file's request): request `i` sends
    /// `templates[pick.entry(i)]`.
    pub templates: Vec<Template>,
    pub pick: crate::pick::Pick,
    /// Each entry's origin, an index into `origins`: entries with one origin share connections.
    pub origin_of: Vec<usize>,
    /// One target per origin (scheme, address, TLS name), dialed for all of its entries.
    pub origins: Vec<Target>,
    pub connector: Connector,
    pub h2_pools: Vec<H2Pool>,
    pub timeout: Duration,
    /// No request outlives this (from the start): the end of the sending plus the timeout.
    pub hard_end: Option<Duration>,
    pub reuse: bool,
    pub classifier: Classifier,
    pub body_checks: crate::check::BodyChecks,
    /// Figures per request name, when the run has more than one target.
    pub names: Option<Names>,
    /// Every record's line in `--output`.
    pub output: Option<crate::output::Output>,
    pub on_record: Option<RecordHook>,
    /// Requests are gRPC calls: read `grpc-status`.
    pub grpc: bool,
    /// Requests are streaming gRPC calls: what each sends.
    pub stream: Option<crate::stream::Plan>,
}

/// Figures per request name: one [`ByName`] per worker thread (workers of one thread share
/// it, uncontended), merged at the end.
pub(crate) struct Names {
    /// Name, method and URL of each name (of its first target).
    pub info: Vec<(String, String, String)>,
    per_thread: Vec<Mutex<ByName>>,
}

impl Names {
    /// Names the targets of `cfg`; `None` for a run of one target (its totals are the name's).
    /// Past [`crate::requests::MAX_NAMES`] distinct names (many URLs), the rest share one.
    pub(crate) fn of(cfg: &crate::Config, threads: usize) -> Option<Names> {
        if cfg.targets.len() < 2 {
            return None;
        }
        let mut index = std::collections::HashMap::new();
        let mut info: Vec<(String, String, String)> = Vec::new();
        let mut name_of = Vec::with_capacity(cfg.targets.len());
        for t in &cfg.targets {
            let method = t.spec.as_ref().map_or(&cfg.method, |s| &s.method);
            let name = t.name(method);
            let next = info.len();
            let n = match index.get(&name) {
                Some(&n) => n,
                None if next < crate::requests::MAX_NAMES => {
                    index.insert(name.clone(), next);
                    info.push((name, method.to_string(), t.url.clone()));
                    next
                }
                None => {
                    let others = "(other requests)".to_string();
                    *index.entry(others.clone()).or_insert_with(|| {
                        info.push((others, method.to_string(), t.url.clone()));
                        next
                    })
                }
            };
            name_of.push(n as u32);
        }
        let name_of: Arc<[u32]> = Arc::from(name_of);
        let per_thread = (0..threads.max(1))
            .map(|_| Mutex::new(ByName::new(name_of.clone(), info.len())))
            .collect();
        Some(Names { info, per_thread })
    }

    fn record(&self, worker: usize, rec: &Record, class: Class) {
        let slot = &self.per_thread[worker % self.per_thread.len()];
        slot.lock()
            .expect("names lock is never poisoned")
            .record(rec, class);
    }

    /// Every thread's figures, merged, as the summary's `per_name`: most requests first.
    pub(crate) fn summary(&self) -> Vec<tailguard_record::NameSummary> {
        let mut all = self.per_thread[0].lock().expect("never poisoned").clone();
        for t in &self.per_thread[1..] {
            all.merge(&t.lock().expect("never poisoned"));
        }
        let mut out: Vec<_> = self
            .info
            .iter()
            .zip(all.names())
            .map(|((name, method, url), s)| {
                tailguard_record::NameSummary::of(name.clone(), method.clone(), url.clone(), s)
            })
            .collect();
        out.sort_by(|a, b| {
            b.requests
                .cmp(&a.requests)
                .then_with(|| a.name.cmp(&b.name))
        });
        out
    }
}

/// Closed-loop control: hands out request indexes until the count or the time runs out.
#[derive(Debug, Default)]
pub(crate) struct ClosedLoop {
    next: AtomicU64,
    pub total: Option<u64>,
    pub stop: AtomicBool,
    /// Shortest time between two sends of one worker.
    pub pace: Option<Duration>,
}

impl ClosedLoop {
    pub(crate) fn new(total: Option<u64>, pace: Option<Duration>) -> Self {
        ClosedLoop {
            total,
            pace,
            ..Self::default()
        }
    }

    /// Requests handed out so far.
    pub(crate) fn dispatched(&self) -> u64 {
        let next = self.next.load(Ordering::Relaxed);
        self.total.map_or(next, |n| next.min(n))
    }

    /// True once every request of a `--total-requests` run has been handed out.
    pub(crate) fn exhausted(&self) -> bool {
        self.total
            .is_some_and(|n| self.next.load(Ordering::Relaxed) >= n)
    }

    fn take(&self) -> Option<u64> {
        if self.stop.load(Ordering::Relaxed) {
            return None;
        }
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        match self.total {
            Some(n) if i >= n => None,
            _ => Some(i),
        }
    }
}

/// HTTP/2 connections per origin, shared by the workers (`slot = worker % len`).
pub(crate) struct H2Pool {
    slots: Vec<tokio::sync::Mutex<Option<Conn>>>,
}

impl H2Pool {
    pub(crate) fn new(connections: usize) -> Self {
        H2Pool {
            slots: (0..connections.max(1))
                .map(|_| tokio::sync::Mutex::new(None))
                .collect(),
        }
    }

    /// A handle on the worker's shared connection, dialing it when missing or closed. When ALPN
    /// settles on HTTP/1.1, the connection is the worker's own and is not pooled.
    async fn get(
        &self,
        worker: usize,
        connector: &Connector,
        target: &Target,
    ) -> Result<Conn, ErrorKind> {
        let mut slot = self.slots[worker % self.slots.len()].lock().await;
        if let Some(conn) = slot.as_mut() {
            if conn.ready().await.is_ok() {
                return Ok(conn.share().expect("only HTTP/2 connections are pooled"));
            }
        }
        let conn = connector.connect(target).await?;
        *slot = conn.share();
        Ok(conn)
    }
}

/// One worker: a connection per origin, its own statistics.
pub(crate) struct Worker {
    id: usize,
    shared: Arc<Shared>,
    conns: Vec<Option<Conn>>,
    stats: Arc<Mutex<Stats>>,
    /// The request timeout: one timer per worker, moved only when it fires (see [`expire`]).
    timer: Pin<Box<tokio::time::Sleep>>,
    /// The header map of the last response, emptied, for the next request.
    spare: Option<HeaderMap>,
}

impl Worker {
    pub(crate) fn new(id: usize, shared: Arc<Shared>, stats: Arc<Mutex<Stats>>) -> Self {
        let conns = shared.origins.iter().map(|_| None).collect();
        let timer = Box::pin(tokio::time::sleep(Duration::ZERO));
        Worker {
            id,
            shared,
            conns,
            stats,
            timer,
            spare: None,
        }
    }

    /// Open loop: sends queued jobs until the queue is closed and empty; a failed one is told
    /// to `failed` (its index and when it ended: `--retry-after`) unless it was a second send
    /// already.
    pub(crate) async fn run_open(
        mut self,
        jobs: async_channel::Receiver<crate::worker::Job>,
        failed: Option<Failed>,
    ) {
        while let Ok(job) = jobs.recv().await {
            let start = self.shared.clock.elapsed();
            let (index, again) = (job.index, job.again);
            let ended = self.execute(job, start).await;
            if let (Some(f), Some(ended), false) = (&failed, ended, again) {
                f(index, ended);
            }
        }
    }

    /// Closed loop: each request is due the moment the previous one completed, or, with a
    /// pace, no sooner than `pace` after the previous send (a slow response delays the next
    /// send; it is not made up for later, as slow_cooker's ticker).
    pub(crate) async fn run_closed(mut self, ctl: Arc<ClosedLoop>) {
        let mut due = Duration::ZERO;
        loop {
            if let Some(pace) = ctl.pace {
                let now = self.shared.clock.elapsed();
                if due > now {
                    tokio::time::sleep(due - now).await;
                }
                due = self.shared.clock.elapsed() + pace;
            }
            let Some(index) = ctl.take() else { break };
            let scheduled = self.shared.clock.elapsed();
            let job = Job {
                index,
                scheduled,
                released: scheduled,
                request: None,
                again: false,
            };
            self.execute(job, scheduled).await;
        }
    }

    /// Sends `job`, picked up at `start` (its due time in a closed loop, so the clock is read
    /// three times per request: due, sent, completed). Returns when it ended if it failed (not
    /// a good answer).
    async fn execute(&mut self, job: Job, start: Duration) -> Option<Duration> {
        // The request: a replay's own, or the run's target its index picks. Its figures count
        // under the target (a replay's: its origin).
        let (t, o) = match &job.request {
            Some(r) => (r.origin, r.origin),
            None => {
                let t = self.shared.pick.entry(job.index);
                (t, self.shared.origin_of[t])
            }
        };
        let record = if self.expired(job.scheduled, start) {
            // It waited a whole timeout for a connection: sending it now would only stretch
            // the run. Its latency (at least the timeout) still counts.
            Record {
                scheduled: job.scheduled,
                sent: start,
                completed: start,
                outcome: Outcome::Error(ErrorKind::NoConnection),
                bytes: 0,
                target: t as u32,
                failed_check: None,
            }
        } else {
            let replayed = job.request.as_ref().map(|r| &r.template);
            self.attempt(replayed, t, o, job.scheduled, start).await
        };
        if !self.shared.reuse {
            self.conns[o] = None;
        }
        if let Some(hook) = &self.shared.on_record {
            hook(&record);
        }
        let classifier = self.shared.classifier;
        let mut stats = self.stats.lock().expect("stats lock is never poisoned");
        let class = stats.record(&record, classifier);
        if let Some(names) = &self.shared.names {
            names.record(self.id, &record, class);
        }
        if let Some(output) = &self.shared.output {
            output.record(&record);
        }
        // Picked up late: every worker was busy when it was released (the concurrency cap).
        if start.saturating_sub(job.released) > tailguard_record::LATE_AFTER {
            stats.queued += 1;
        }
        stats.resent += u64::from(job.again);
        (class != Class::Good).then_some(record.completed)
    }

    /// A request picked up at `start` that was due at `scheduled` is not sent: no connection
    /// was free for a whole timeout, or the run's hard end has come.
    fn expired(&self, scheduled: Duration, start: Duration) -> bool {
        start.saturating_sub(scheduled) >= self.shared.timeout
            || self.shared.hard_end.is_some_and(|end| start >= end)
    }

    /// Sends the replayed request, else target `t`'s, on a connection to origin `o`; the
    /// record counts under target `t`.
    async fn attempt(
        &mut self,
        replayed: Option<&Template>,
        t: usize,
        o: usize,
        scheduled: Duration,
        start: Duration,
    ) -> Record {
        let clock = self.shared.clock;
        // The send time when no connection can be readied (the attempt's start).
        let mut sent = start;
        let own = sent + self.shared.timeout;
        let until = self.shared.hard_end.map_or(own, |end| own.min(end));
        let deadline = tokio::time::Instant::from_std(clock.origin() + until);
        let timer = &mut self.timer;
        let conns = &mut self.conns;
        let shared = &self.shared;
        let id = self.id;
        let spare = self.spare.take();
        let template = replayed.unwrap_or(&shared.templates[t]);
        let stats = &*self.stats;
        let exchange = async {
            let conn = ready_conn(&mut conns[o], shared, o, id).await?;
            let at = clock.elapsed();
            sent = at;
            match &shared.stream {
                Some(plan) => {
                    crate::stream::call(conn, template, spare, plan, clock, at, stats).await
                }
                None => {
                    conn.exchange(template, spare, shared.grpc, &shared.body_checks)
                        .await
                }
            }
        };
        // The timer first: an exchange that always has bytes to read (a server streaming
        // interim heads, or a body) spends the task's budget of tokio's cooperative
        // scheduling on every turn, and a timer polled after it would never fire (a 2 s
        // timeout once let a request run 21.8 s and count it good).
        let result = tokio::select! {
            biased;
            _ = expire(timer, deadline) => Err(ErrorKind::Timeout),
            r = exchange => r,
        };
        let (outcome, bytes, failed_check) = match result {
            Ok(reply) => {
                self.spare = Some(reply.spare);
                // A body check speaks only about an answer its status made good.
                let classifier = &self.shared.classifier;
                let failed = reply
                    .failed_check
                    .filter(|_| classifier.classify(reply.outcome) == Class::Good);
                (reply.outcome, reply.bytes, failed)
            }
            Err(kind) => {
                self.conns[o] = None;
                (Outcome::Error(kind), 0, None)
            }
        };
        Record {
            scheduled,
            sent,
            completed: clock.elapsed(),
            outcome,
            bytes,
            target: t as u32,
            failed_check,
        }
    }
}

/// Resolves once `deadline` has passed.
///
/// The worker's timer is re-armed only when it fires before the running request's deadline,
/// not once per request: deadlines only move forward, a timer fires at most once per timeout
/// period, and a request then costs no timer-wheel update.
async fn expire(timer: &mut Pin<Box<tokio::time::Sleep>>, deadline: tokio::time::Instant) {
    if timer.deadline() > deadline {
        timer.as_mut().reset(deadline);
    }
    loop {
        timer.as_mut().await;
        if timer.deadline() >= deadline {
            return;
        }
        timer.as_mut().reset(deadline);
    }
}

/// The worker's connection to origin `o`, ready for a request: the open one if it is still
/// usable, else a new (or pooled HTTP/2) one.
async fn ready_conn<'a>(
    slot: &'a mut Option<Conn>,
    shared: &Shared,
    o: usize,
    worker: usize,
) -> Result<&'a mut Conn, ErrorKind> {
    if let Some(conn) = slot.as_mut() {
        if conn.ready().await.is_ok() {
            return Ok(slot.as_mut().expect("checked above"));
        }
    }
    let conn = match shared.h2_pools.get(o) {
        Some(pool) => {
            pool.get(worker, &shared.connector, &shared.origins[o])
                .await?
        }
        None => shared.connector.connect(&shared.origins[o]).await?,
    };
    let conn = slot.insert(conn);
    conn.ready().await?;
    Ok(conn)
}
