//! The live state of one backend: its current spec, run state, counters and clock origin.
//!
//! The spec sits behind a lock holding an `Arc`, so a request takes a cheap snapshot and the
//! control endpoint swaps in a changed copy (run-time changes are edits of the same
//! [`BackendSpec`] the fleet file produced, so live behaviour stays what `decide` says).
//!
//! A backend with a capacity keeps the fleet's waiting [`Line`] here: a request takes a
//! [`Worker`] ([`Backend::worker`]) before its service starts, and gives it back when dropped
//! (answered, or its connection gone), which hands the worker to the first request still
//! waiting. A waiting request's client that hangs up is skipped.

use crate::gate::{Gate, RunState};
use crate::metrics::Counters;
use bytes::Bytes;
use http::HeaderValue;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::Duration;
use tailguard_fleet::backend::MAX_BODY_BYTES;
use tailguard_fleet::capacity::{Arrival, Line};
use tailguard_fleet::probe::{ProbeAnswer, Recent};
use tailguard_fleet::{BackendSpec, Body};
use tokio::sync::oneshot;
use tokio::sync::Notify;
use tokio::time::Instant;
use tonic_health::pb::health_server::HealthServer;
use tonic_health::server::{HealthReporter, HealthService};

/// Settings shared by every backend of a fleet.
#[derive(Clone, Copy, Debug)]
pub struct Shared {
    /// When the fleet started: `elapsed` in the behaviour model counts from here.
    pub start: Instant,
    /// Nagle demo mode (TCP_NODELAY off, two-part writes).
    pub nagle: bool,
    /// Whether `?delay=` and friends are honoured.
    pub overrides: bool,
    /// Finish latency waits on the precise timer thread ([`crate::timer`]); off only under a
    /// paused test clock ([`crate::ServeOptions::precise_timer`]).
    pub precise: bool,
    /// Serve to the end what a client left behind ([`crate::ServeOptions::serve_abandoned`]).
    pub serve_abandoned: bool,
}

/// One live backend.
#[derive(Debug)]
pub struct Backend {
    /// Position in the fleet.
    pub index: usize,
    /// The listening address.
    pub addr: SocketAddr,
    /// Fleet-wide settings.
    pub shared: Shared,
    /// Run state read by sockets.
    pub gate: Arc<Gate>,
    /// Request counters.
    pub counters: Counters,
    /// Woken when the spec changes, so the driver recomputes the run state.
    pub changed: Notify,
    /// Whether the listener is open (false while down), for callers that must know the
    /// kernel refuses connections before they go on.
    pub listening: tokio::sync::watch::Sender<bool>,
    /// The gRPC health service.
    pub health: HealthServer<HealthService>,
    spec: RwLock<Arc<BackendSpec>>,
    original: Arc<BackendSpec>,
    /// Requests waiting for a worker: each is handed its worker through its channel.
    line: Mutex<Line<oneshot::Sender<Worker>>>,
    /// Set by the first load probe: from then on requests feed the latency estimate.
    probed: AtomicBool,
    /// Recent requests' RIF at arrival and latency, for probe answers.
    recent: Mutex<Recent>,
    seed: u64,
    connections: AtomicU64,
    body: Bytes,
    name_header: HeaderValue,
}

impl Backend {
    /// A backend serving `spec` on `addr`.
    pub fn new(
        (index, addr): (usize, SocketAddr),
        spec: BackendSpec,
        seed: u64,
        shared: Shared,
        counters: Counters,
    ) -> Self {
        let body = fixed_body(&spec);
        let name_header = HeaderValue::from_str(&spec.name)
            .unwrap_or_else(|_| HeaderValue::from_static("unnamed"));
        let spec = Arc::new(spec);
        Backend {
            index,
            addr,
            shared,
            gate: Arc::new(Gate::default()),
            counters,
            changed: Notify::new(),
            listening: tokio::sync::watch::Sender::new(true),
            // Always `SERVING`: a paused or down backend does not answer at all.
            health: HealthServer::new(HealthService::from_health_reporter(HealthReporter::new())),
            spec: RwLock::new(spec.clone()),
            original: spec,
            line: Mutex::new(Line::default()),
            probed: AtomicBool::new(false),
            recent: Mutex::new(Recent::default()),
            seed,
            connections: AtomicU64::new(0),
            body,
            name_header,
        }
    }

    /// The backend's name.
    pub fn name(&self) -> &str {
        &self.original.name
    }

    /// A snapshot of the current spec.
    pub fn spec(&self) -> Arc<BackendSpec> {
        match self.spec.read() {
            Ok(guard) => guard.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Applies `edit` to a copy of the current spec and installs it.
    pub fn update(&self, edit: impl FnOnce(&mut BackendSpec)) {
        let mut guard = match self.spec.write() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        let mut next = BackendSpec::clone(&guard);
        edit(&mut next);
        *guard = Arc::new(next);
        drop(guard);
        self.changed.notify_one();
    }

    /// Sets the gate from the spec now (the driver would do it too, a moment later) and waits,
    /// at most `limit`, until the listener matches: closed when down, open otherwise.
    pub async fn settle(&self, limit: Duration) {
        let state = self.state_at(self.elapsed());
        self.gate.set(state);
        let want = state != RunState::Down;
        let mut rx = self.listening.subscribe();
        let _ = tokio::time::timeout(limit, rx.wait_for(|open| *open == want)).await;
    }

    /// Puts back the spec from the fleet file.
    pub fn restore(&self) {
        self.update(|spec| *spec = BackendSpec::clone(&self.original));
    }

    /// Time since the fleet started.
    pub fn elapsed(&self) -> Duration {
        self.shared.start.elapsed()
    }

    /// The run state the spec says for `elapsed`.
    pub fn state_at(&self, elapsed: Duration) -> RunState {
        let spec = self.spec();
        if spec.is_down(elapsed) {
            RunState::Down
        } else if spec.paused_until(elapsed).is_some() {
            RunState::Paused
        } else {
            RunState::Running
        }
    }

    /// A worker for a request that arrived at `arrival`, once one is free, and when its service
    /// starts: at once (`None`, `arrival`) without a capacity; `Err(status)` when the line is
    /// full (or the backend gave up on the request).
    pub async fn worker(
        self: &Arc<Self>,
        arrival: Instant,
    ) -> Result<(Option<Worker>, Instant), u16> {
        let spec = self.spec();
        let Some(capacity) = spec.capacity else {
            return Ok((None, arrival));
        };
        let elapsed = arrival.saturating_duration_since(self.shared.start);
        let workers = spec.workers(elapsed).unwrap_or(capacity.workers);
        let (tx, rx) = oneshot::channel();
        let (arrived, ready) = {
            let mut line = lock(&self.line);
            if capacity.queue.is_some_and(|q| line.waiting() >= q as usize) {
                line.forget(|w| !w.is_closed());
            }
            let ready = line.admit(workers, |w| !w.is_closed());
            (line.arrive(&capacity, workers, tx), ready)
        };
        self.hand_out(ready);
        match arrived {
            Arrival::Start(_) => Ok((Some(Worker(Arc::clone(self))), arrival)),
            Arrival::Reject(_, status) => Err(status),
            Arrival::Wait => match rx.await {
                Ok(worker) => Ok((Some(worker), Instant::now())),
                Err(_) => Err(capacity.status),
            },
        }
    }

    /// Requests here now: in service and waiting for a worker.
    pub fn rif(&self) -> u32 {
        match self.load() {
            Some((busy, waiting)) => {
                busy.saturating_add(u32::try_from(waiting).unwrap_or(u32::MAX))
            }
            None => u32::try_from(self.counters.in_flight.get().max(0)).unwrap_or(u32::MAX),
        }
    }

    /// The answer to a load probe: requests here now and the latency estimate for that many
    /// (see [`tailguard_fleet::probe`]). The first probe starts the estimate: until a backend
    /// is probed, requests do not pay for keeping it.
    pub fn probe(&self) -> ProbeAnswer {
        self.probed.store(true, Ordering::Relaxed);
        lock(&self.recent).answer(self.rif())
    }

    /// For the latency estimate: the RIF a request found when it arrived (`None` until the
    /// backend is probed).
    pub(crate) fn arrival_rif(&self) -> Option<u32> {
        self.probed.load(Ordering::Relaxed).then(|| self.rif())
    }

    /// A request that found `rif` on arrival was answered after `latency`.
    pub(crate) fn served(&self, rif: Option<u32>, latency: Duration) {
        if let Some(rif) = rif {
            lock(&self.recent).record(rif, latency);
        }
    }

    /// Requests in service and waiting (`None`: no capacity).
    pub fn load(&self) -> Option<(u32, usize)> {
        self.spec().capacity?;
        let line = lock(&self.line);
        Some((line.busy(), line.waiting()))
    }

    /// Gives each request whose turn came its worker; one whose client has just gone gives it
    /// straight back.
    fn hand_out(self: &Arc<Self>, ready: Vec<oneshot::Sender<Worker>>) {
        for tx in ready {
            // A failed send returns the worker, which is dropped: released again.
            let _ = tx.send(Worker(Arc::clone(self)));
        }
    }

    fn release(self: &Arc<Self>) {
        let spec = self.spec();
        let workers = spec
            .workers(self.elapsed())
            .or(spec.capacity.map(|c| c.workers))
            .unwrap_or(u32::MAX);
        let ready = lock(&self.line).finish(workers, |w| !w.is_closed());
        self.hand_out(ready);
    }

    /// A seed for the next connection's RNG: the backend's seed and the connection's sequence
    /// number mixed, so one connection's decisions reproduce run to run.
    pub fn next_connection_seed(&self) -> u64 {
        let n = self.connections.fetch_add(1, Ordering::Relaxed);
        tailguard_fleet::fleet::derive_seed(self.seed, n)
    }

    /// The backend's name as a header value.
    pub fn name_header(&self) -> HeaderValue {
        self.name_header.clone()
    }

    /// True when the response body echoes the request's.
    pub fn echoes(&self) -> bool {
        self.original.body == Body::Echo
    }

    /// The body for `Body::Name`, `Text` and `Size` (built once; `Echo` is per request).
    pub fn fixed_body(&self) -> Bytes {
        self.body.clone()
    }
}

/// A busy worker of a backend with a capacity: the next request in line gets it when this is
/// dropped.
#[derive(Debug)]
pub struct Worker(Arc<Backend>);

impl Drop for Worker {
    fn drop(&mut self) {
        self.0.release();
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// `n` bytes of `x` (at most [`MAX_BODY_BYTES`]), sliced from one buffer filled once, so
/// concurrent `?size=` requests share it instead of allocating their own.
pub(crate) fn filler(n: usize) -> Bytes {
    static FILLER: std::sync::OnceLock<Bytes> = std::sync::OnceLock::new();
    let all = FILLER.get_or_init(|| Bytes::from(vec![b'x'; MAX_BODY_BYTES]));
    all.slice(..n.min(MAX_BODY_BYTES))
}

fn fixed_body(spec: &BackendSpec) -> Bytes {
    match &spec.body {
        Body::Name => Bytes::from(format!("{}\n", spec.name)),
        Body::Text(text) => Bytes::from(text.clone()),
        Body::Size(n) => Bytes::from(vec![b'x'; *n]),
        Body::Echo => Bytes::new(),
    }
}
