//! Running one arm live: a fresh fleet, the path the traffic takes, the load, the figures.

use crate::board::{self, Arm, Board};
use crate::console::{Console, LoadLines};
use crate::error::BenchError;
use crate::peers::{self, Peer};
use crate::pin::Pin;
use crate::results::{curve, ArmRun, IntervalPoint, ProxyCost};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tailguard_client::ArmConfig;
use tailguard_fleet::Fleet;
use tailguard_histogram::{duration_us, Histogram};
use tailguard_load::{Config as LoadConfig, Target};
use tailguard_pacing::{Arrivals, Ramp};
use tailguard_proxy::config::{Config as ProxyConfig, ServiceConfig, Upstream};
use tailguard_record::{Class, Classifier, Record, RunSummary};
use tailguard_report::Unit;

/// Thread name of the in-process proxy's runtime: its CPU is read per thread.
const PROXY_THREAD: &str = "tg-proxy";

/// The traffic of one arm.
#[derive(Clone, Debug)]
pub(crate) struct Traffic {
    /// Requests per second; 0 = closed loop.
    pub rate: f64,
    /// Closed loop: at most one send per worker per this.
    pub closed_interval: Option<Duration>,
    /// Requests in flight at most (closed loop: the workers).
    pub concurrency: usize,
    /// How long to send.
    pub duration: Duration,
    /// Constant or Poisson.
    pub arrivals: Arrivals,
    /// Open loop: the rate climbs linearly from `ramp.from` to `rate` over `ramp.over`.
    pub ramp: Option<Ramp>,
    /// HTTP method.
    pub method: String,
    /// Per-request timeout.
    pub timeout: Duration,
    /// Interval report period.
    pub interval: Duration,
    /// A good response within this counts as within the deadline.
    pub deadline: Duration,
    /// Report units.
    pub unit: Unit,
    /// Stop this long after the end even if scheduled requests still wait for a connection.
    pub drain_limit: Option<Duration>,
    /// Make gRPC calls (`tailguard.serve.v1.Ping/Ping`) on one HTTP/2 connection instead of
    /// HTTP/1.1 requests.
    pub grpc: bool,
    /// Independent clients: a proxy arm runs this many proxies, each with its own balancer, and
    /// the load goes to them round robin (the scenario's `clients`, at most [`MAX_PROXIES`]).
    pub clients: usize,
    /// What the callers do beyond the rate (stages, criticality, deadlines, their own retry).
    pub callers: Callers,
}

/// The callers of an overload scenario: the offered rate's stages, the share of requests
/// marked critical, each request's deadline, and the caller's own retry of a failure.
#[derive(Clone, Debug, Default)]
pub(crate) struct Callers {
    /// The offered rate follows these (in place of `rate`, which is then their peak).
    pub stages: Option<tailguard_pacing::Stages>,
    /// The share of requests sent with `x-tailguard-criticality: critical` (the rest
    /// `default`); 0: no header.
    pub critical: f64,
    /// Each request carries `x-tailguard-timeout-ms` of this.
    pub request_deadline: Option<Duration>,
    /// A failed request is sent once more this long after it ended (`load --retry-after`).
    pub retry_after: Option<Duration>,
    /// Keep each second's figures (for the overload figures).
    pub per_second: bool,
}

impl Traffic {
    /// The requests an open loop offers over its duration (a real number; 0 for a closed loop).
    pub(crate) fn offered(&self) -> f64 {
        if let Some(st) = &self.callers.stages {
            return st.offered(st.total());
        }
        match self.ramp {
            Some(r) if self.rate > 0.0 => r.offered(self.rate, self.duration),
            _ => self.rate * self.duration.as_secs_f64(),
        }
    }

    /// The offered rate: `rate`, or with a ramp its mean over the duration.
    pub(crate) fn mean_rate(&self) -> f64 {
        if self.callers.stages.is_some() && !self.duration.is_zero() {
            return self.offered() / self.duration.as_secs_f64();
        }
        match self.ramp {
            Some(_) if self.rate > 0.0 && !self.duration.is_zero() => {
                self.offered() / self.duration.as_secs_f64()
            }
            _ => self.rate,
        }
    }
}

/// The most proxies one arm starts for a scenario's independent clients.
pub(crate) const MAX_PROXIES: usize = 16;

/// Where the traffic goes.
#[derive(Clone, Debug)]
pub(crate) enum Path {
    /// The load generator balances round robin itself over every backend (the seeds' baseline).
    ClientRoundRobin,
    /// A tailguard proxy in this process running this arm over the fleet.
    Proxy(Box<ArmConfig>),
    /// A tailguard proxy child process (its own CPU and memory are measured).
    ProxyProcess(PathBuf),
    /// A peer proxy process.
    Peer(Peer),
}

impl Path {
    fn via(&self, backends: usize) -> String {
        let s = if backends == 1 { "" } else { "s" };
        match self {
            Path::ClientRoundRobin if backends == 1 => "direct".to_owned(),
            Path::ClientRoundRobin => format!("client round robin over {backends} backend{s}"),
            Path::Proxy(arm) => format!("tailguard proxy: {}", arm.summary()),
            Path::ProxyProcess(_) => "tailguard proxy process (1 thread)".to_owned(),
            Path::Peer(p) => format!("{} (1 worker)", p.name()),
        }
    }
}

/// The fleet options for one arm.
#[derive(Clone, Debug)]
pub(crate) struct FleetSpec {
    pub fleet: Fleet,
    /// Seed 001: TCP_NODELAY off and two-part writes.
    pub nagle: bool,
    /// Backends with a capacity serve work whose client hung up (`serve --serve-abandoned`).
    pub serve_abandoned: bool,
}

/// Runtimes that outlive arms: the fleet's (which also runs the live page and its ticker) and
/// the in-process proxy's; and the live figures of the run.
pub(crate) struct Runtimes {
    fleet: tokio::runtime::Runtime,
    proxy: tokio::runtime::Runtime,
    pub board: Arc<Board>,
    ticker: tokio::task::JoinHandle<()>,
    page: Option<tailguard_http::admin::AdminServer>,
    /// `--pin`: where the proxy under test runs.
    pin: Option<Pin>,
}

impl std::fmt::Debug for Runtimes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Runtimes")
    }
}

impl Runtimes {
    /// Starts a proxy process with `start`: on the proxy's CPU with `--pin`.
    fn on_proxy_cpu<T>(
        &self,
        start: impl FnOnce() -> Result<T, BenchError>,
    ) -> Result<T, BenchError> {
        match &self.pin {
            Some(pin) => pin.on_proxy_cpu(start)?,
            None => start(),
        }
    }

    /// `--pin`'s description for the report (`None`: not pinned).
    pub(crate) fn pinned(&self) -> Option<String> {
        self.pin.as_ref().map(Pin::describe)
    }

    /// With `pin`, the in-process proxy's threads take the proxy's CPU as they start (the
    /// caller's thread, and so the fleet's, is on the others already: [`Pin::rest_here`]).
    pub(crate) fn new(board: Arc<Board>, pin: Option<Pin>) -> Result<Runtimes, BenchError> {
        let fleet = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("tg-fleet")
            .enable_all()
            .build()?;
        let mut proxy = tokio::runtime::Builder::new_multi_thread();
        proxy
            .worker_threads(1)
            .thread_name(PROXY_THREAD)
            .enable_all();
        if let Some(set) = pin.as_ref().map(Pin::proxy_set) {
            proxy.on_thread_start(move || crate::pin::take(&set));
        }
        let proxy = proxy.build()?;
        let ticker = fleet.spawn(board::ticker(Arc::downgrade(&board)));
        Ok(Runtimes {
            fleet,
            proxy,
            board,
            ticker,
            page: None,
            pin,
        })
    }

    /// Serves the live page on `addr` (any free port on the same host when `fallback` and the
    /// port is taken); returns where.
    pub(crate) fn serve_page(
        &mut self,
        addr: SocketAddr,
        fallback: bool,
    ) -> Result<SocketAddr, BenchError> {
        let board = Arc::clone(&self.board);
        let server = self.fleet.block_on(async move {
            let listener = match tailguard_http::tcp::bind(addr).await {
                Err(e) if fallback && e.kind() == std::io::ErrorKind::AddrInUse => {
                    tailguard_http::tcp::bind(SocketAddr::new(addr.ip(), 0)).await?
                }
                other => other?,
            };
            board.serve(listener)
        });
        let server = server.map_err(|e| {
            BenchError::Invalid(format!("cannot serve the live page on {addr}: {e}"))
        })?;
        let bound = server.addr();
        self.page = Some(server);
        Ok(bound)
    }

    /// Stops the live page (its last answer says the run is over) and the ticker.
    pub(crate) fn close_page(&mut self) {
        self.board.close();
        self.ticker.abort();
        if let Some(page) = self.page.take() {
            // Let a page that polls see `finished` once before the server goes.
            self.fleet.block_on(async {
                tokio::time::sleep(board::TICK + Duration::from_millis(200)).await;
                page.shutdown().await;
            });
        }
    }
}

/// Counts every record the load generator completes, failures included (the load report's
/// own latency leaves fast failures out; the bench table, like `sim`, counts every request).
#[derive(Debug, Default)]
struct Tally {
    latency: Mutex<Histogram>,
    good: AtomicU64,
    within_deadline: AtomicU64,
    /// Each second of the run by when its requests ended, as `sim` keeps them (for the
    /// overload figures).
    seconds: Mutex<Vec<tailguard_sim::Second>>,
    /// The run's last second: requests that end in the drain after it count in it (a few
    /// stragglers alone are no second of their own).
    last_second: usize,
}

impl Tally {
    /// Counts `r` (ended with `class`, within the deadline or not, critical or not) in the
    /// second it ended. A 503 is the proxy's refusal (the overload fleets never answer one):
    /// counted, kept out of the latency, as `sim` keeps refusals out.
    fn second(&self, r: &Record, good: bool, in_time: bool, critical: bool) {
        let i = (r.completed.as_secs() as usize)
            .min(self.last_second)
            .min(tailguard_sim::MAX_TIMELINE - 1);
        let mut seconds = self.seconds.lock().expect("tally lock is never poisoned");
        if seconds.len() <= i {
            seconds.resize_with(i + 1, tailguard_sim::Second::new);
        }
        let s = &mut seconds[i];
        s.ended += 1;
        s.critical += u64::from(critical);
        s.within_deadline += u64::from(good && in_time);
        s.critical_within_deadline += u64::from(critical && good && in_time);
        if r.outcome == tailguard_record::Outcome::Status(503) {
            s.refused += 1;
        } else {
            s.latency.record_us(duration_us(r.latency()));
        }
    }
}

/// One arm to run.
#[derive(Debug)]
pub(crate) struct ArmPlan<'a> {
    pub name: String,
    pub group: String,
    pub path: Path,
    pub fleet: &'a FleetSpec,
    pub traffic: Traffic,
    /// Put before each of the load generator's lines (arms that run at the same time).
    pub prefix: String,
    /// An overload scenario's reference and window: the arm's overload figures are measured
    /// against them.
    pub overload: Option<(tailguard_sim::Overload, (usize, usize))>,
}

/// What running an arm gave.
#[derive(Debug)]
pub(crate) struct Outcome {
    /// The measurements.
    pub arm: ArmRun,
    /// True when Ctrl-C ended it.
    pub interrupted: bool,
    /// Something the report must say about this arm.
    pub note: Option<String>,
}

/// Runs one arm on a fresh fleet.
pub(crate) fn run_arm(
    rts: &Runtimes,
    console: &Console,
    plan: &ArmPlan<'_>,
) -> Result<Outcome, BenchError> {
    let fleet = start_fleet(rts, plan.fleet)?;
    let backends: Vec<SocketAddr> = fleet.backends().iter().map(|(_, a)| *a).collect();
    let proxy_count = plan.traffic.clients.clamp(1, MAX_PROXIES);
    let via = announce(console, plan, backends.len(), proxy_count);
    let live = rts.board.start(
        (&plan.group, &plan.name, &via),
        plan.traffic.duration,
        fleet.tally(),
        backend_specs(plan.fleet),
    );
    let path = start_path(rts, console, plan, &backends, proxy_count)?;
    let sent = send_load(console, plan, &path, live.clone())?;
    path.shut_down(rts);
    drop(fleet);
    let report = sent.report?;
    let mut arm = arm_run(plan, via, &sent.tally, sent.usage, report.summary);
    arm.seconds = rts.board.finish(&live, &arm);
    let note = unsent_note(plan, sent.scheduled, arm.requests, report.interrupted);
    Ok(Outcome {
        arm,
        interrupted: report.interrupted,
        note,
    })
}

/// Starts the arm's fleet on any free local port.
fn start_fleet(rts: &Runtimes, spec: &FleetSpec) -> Result<tailguard_serve::Running, BenchError> {
    let fleet = rts.fleet.block_on(async {
        let mut opts = tailguard_serve::ServeOptions::new(spec.fleet.clone());
        opts.listen = SocketAddr::from(([127, 0, 0, 1], 0));
        opts.control = None;
        opts.nagle = spec.nagle;
        opts.serve_abandoned = spec.serve_abandoned;
        tailguard_serve::start(opts).await
    })?;
    Ok(fleet)
}

/// Says on the console which arm runs and how its traffic goes; returns the how.
fn announce(console: &Console, plan: &ArmPlan<'_>, backends: usize, proxy_count: usize) -> String {
    let mut via = plan.path.via(backends);
    if matches!(plan.path, Path::Proxy(_)) && proxy_count > 1 {
        via.push_str(&format!(", {proxy_count} proxies (one per client)"));
    }
    console.status(&format!("{} {}", plan.group, plan.name));
    console.line(&format!("## {} [{}]: {via}", plan.name, plan.group));
    via
}

/// Each backend's name and how the live page describes it.
fn backend_specs(spec: &FleetSpec) -> Vec<(String, String)> {
    spec.fleet
        .backends
        .iter()
        .map(|b| (b.name.clone(), describe_backend(b)))
        .collect()
}

/// The path the traffic takes, started: in-process proxies or a proxy process (or neither),
/// and the addresses the load generator sends to.
struct PathUnderTest {
    proxies: Vec<tailguard_proxy::Proxy>,
    child: Option<peers::Child>,
    targets: Vec<SocketAddr>,
}

impl PathUnderTest {
    /// A path through a proxy process.
    fn child(c: peers::Child) -> Self {
        PathUnderTest {
            proxies: Vec::new(),
            targets: vec![c.addr],
            child: Some(c),
        }
    }

    /// CPU used so far by the proxy process, or by the in-process proxies' runtime thread.
    fn cpu_ticks(&self) -> Option<peers::Ticks> {
        match (&self.child, self.proxies.is_empty()) {
            (Some(c), _) => peers::cpu_ticks(c.pid()),
            (None, false) => peers::thread_cpu_ticks(PROXY_THREAD),
            (None, true) => None,
        }
    }

    /// The proxy process's resident memory (in-process proxies share the bench's).
    fn rss_kib(&self) -> Option<u64> {
        self.child.as_ref().and_then(|c| peers::rss_kib(c.pid()))
    }

    /// Shuts the in-process proxies down, then ends the proxy process.
    fn shut_down(self, rts: &Runtimes) {
        for p in self.proxies {
            rts.proxy.block_on(p.shutdown());
        }
        drop(self.child);
    }
}

/// Starts what the plan's path puts between the load generator and the backends.
fn start_path(
    rts: &Runtimes,
    console: &Console,
    plan: &ArmPlan<'_>,
    backends: &[SocketAddr],
    proxy_count: usize,
) -> Result<PathUnderTest, BenchError> {
    Ok(match &plan.path {
        Path::ClientRoundRobin => PathUnderTest {
            proxies: Vec::new(),
            child: None,
            targets: backends.to_vec(),
        },
        Path::Proxy(arm) => {
            let proxies = start_proxies(rts, arm, backends, proxy_count)?;
            show_admin(console, &proxies);
            let targets = proxies.iter().map(tailguard_proxy::Proxy::addr).collect();
            PathUnderTest {
                proxies,
                child: None,
                targets,
            }
        }
        Path::ProxyProcess(exe) => {
            PathUnderTest::child(rts.on_proxy_cpu(|| peers::spawn_tailguard(exe, backends[0]))?)
        }
        Path::Peer(peer) => PathUnderTest::child(
            rts.on_proxy_cpu(|| peers::spawn(*peer, backends[0], plan.traffic.grpc))?,
        ),
    })
}

/// Starts one in-process proxy per independent client, each balancing on what it sees alone.
fn start_proxies(
    rts: &Runtimes,
    arm: &ArmConfig,
    backends: &[SocketAddr],
    count: usize,
) -> Result<Vec<tailguard_proxy::Proxy>, BenchError> {
    let mut proxies = Vec::new();
    for _ in 0..count {
        let upstreams = backends.iter().map(|a| Upstream::new(*a)).collect();
        let mut service = ServiceConfig::new("bench", upstreams);
        service.arm = arm.clone();
        let listen = SocketAddr::from(([127, 0, 0, 1], 0));
        let mut cfg = ProxyConfig::new(listen, vec![service]);
        cfg.admin = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
        proxies.push(rts.proxy.block_on(tailguard_proxy::start(cfg))?);
    }
    Ok(proxies)
}

/// Says where the (first) proxy's admin page is.
fn show_admin(console: &Console, proxies: &[tailguard_proxy::Proxy]) {
    if let Some(admin) = proxies[0].admin_addr() {
        let which = if proxies.len() > 1 {
            "first proxy"
        } else {
            "proxy"
        };
        console.line(&format!(
            "# {which} admin: http://{admin}/ (metrics: http://{admin}/metrics)"
        ));
    }
}

/// What sending an arm's load gave.
struct Sent {
    /// The load generator's own report.
    report: Result<tailguard_load::Report, tailguard_load::LoadError>,
    /// Every record the load generator completed.
    tally: Arc<Tally>,
    /// The schedule's own count (a Poisson draw is not `rate x duration`).
    scheduled: Option<u64>,
    usage: Usage,
}

/// What the proxy in the path used while the load ran, where it could be read.
struct Usage {
    cpu_before: Option<peers::Ticks>,
    cpu_after: Option<peers::Ticks>,
    rss_kib: Option<u64>,
}

impl Usage {
    /// The proxy's cost over `requests`; CPU only when both readings exist and requests were
    /// sent.
    fn cost(self, requests: u64) -> Option<ProxyCost> {
        let rss_kib = self.rss_kib;
        match (self.cpu_before, self.cpu_after) {
            (Some(a), Some(b)) if requests > 0 => {
                let used = b.since(a);
                let per_request =
                    |ticks: u64| ticks as f64 * 1e6 / peers::TICKS_PER_SEC as f64 / requests as f64;
                Some(ProxyCost {
                    cpu_us_per_request: Some(per_request(used.total())),
                    cpu_user_us_per_request: Some(per_request(used.user)),
                    rss_kib,
                })
            }
            _ if rss_kib.is_some() => Some(ProxyCost {
                cpu_us_per_request: None,
                cpu_user_us_per_request: None,
                rss_kib,
            }),
            _ => None,
        }
    }
}

/// Runs the load generator through the started path, reading the path's CPU either side.
fn send_load(
    console: &Console,
    plan: &ArmPlan<'_>,
    path: &PathUnderTest,
    live: Arc<Arm>,
) -> Result<Sent, BenchError> {
    let cpu_before = path.cpu_ticks();
    let tally = Arc::new(Tally {
        last_second: (plan.traffic.duration.as_secs_f64().ceil() as usize).saturating_sub(1),
        ..Tally::default()
    });
    let cfg = load_config(&plan.traffic, &path.targets, tally.clone(), live)?;
    let scheduled = cfg.scheduled();
    let mut lines = LoadLines::new(console, &plan.prefix, plan.traffic.interval);
    let report = tailguard_load::run(cfg, &mut lines);
    let usage = Usage {
        cpu_before,
        cpu_after: path.cpu_ticks(),
        rss_kib: path.rss_kib(),
    };
    // Bring the bar to the planned end of this arm (the last interval may be partial).
    let planned = plan.traffic.duration.as_secs();
    console.advance(planned.saturating_sub(lines.advanced));
    drop(lines);
    Ok(Sent {
        report,
        tally,
        scheduled,
        usage,
    })
}

/// The arm's measurements: every request the tally counted, with the load generator's summary.
fn arm_run(
    plan: &ArmPlan<'_>,
    via: String,
    tally: &Tally,
    usage: Usage,
    summary: RunSummary,
) -> ArmRun {
    let latency = tally
        .latency
        .lock()
        .expect("tally lock is never poisoned")
        .clone();
    let requests = latency.count();
    let good = tally.good.load(Ordering::Relaxed);
    let within = tally.within_deadline.load(Ordering::Relaxed);
    let ratio = |n: u64| {
        if requests == 0 {
            1.0
        } else {
            n as f64 / requests as f64
        }
    };
    let intervals = IntervalPoint::of_run(&summary);
    let overload = plan.overload.map(|(o, window)| {
        let seconds = tally.seconds.lock().expect("tally lock is never poisoned");
        crate::results::OverloadRun::of(&seconds, &o, window)
    });
    ArmRun {
        name: plan.name.clone(),
        group: plan.group.clone(),
        via,
        target_rate: plan.traffic.mean_rate(),
        achieved_rate: if summary.duration_s > 0.0 {
            requests as f64 / summary.duration_s
        } else {
            0.0
        },
        requests,
        good,
        success_rate: ratio(good),
        within_deadline_rate: ratio(within),
        latency_us: latency.percentiles(),
        mean_us: latency.mean_us(),
        curve: curve(&latency),
        intervals,
        proxy: usage.cost(requests),
        sim: None,
        load: summary,
        seconds: Vec::new(),
        overload,
    }
}

/// Says how many scheduled requests an open loop never sent, when the drain limit ended it
/// with some unsent (one short is the schedule's rounding).
fn unsent_note(
    plan: &ArmPlan<'_>,
    scheduled: Option<u64>,
    requests: u64,
    interrupted: bool,
) -> Option<String> {
    let scheduled = scheduled.unwrap_or_else(|| plan.traffic.offered().floor() as u64);
    (plan.traffic.rate > 0.0 && !interrupted && requests + 1 < scheduled).then(|| {
        format!(
            "{} [{}]: {} of {scheduled} scheduled requests were not sent: the path could not \
             keep up and the drain limit ended the arm",
            plan.name,
            plan.group,
            scheduled - requests
        )
    })
}

fn load_config(
    traffic: &Traffic,
    targets: &[SocketAddr],
    tally: Arc<Tally>,
    live: Arc<Arm>,
) -> Result<LoadConfig, BenchError> {
    let (targets, critical) = callers_targets(traffic, targets)?;
    // Each load worker may hold a connection to every target, and the in-process fleet holds
    // the other end of each: keep workers x targets x 2 inside the file descriptor limit.
    let per_worker = 2 * targets.len() as u64 + 2;
    let workers_fit = (open_files_limit() * 3 / 4 / per_worker).max(16) as usize;
    let mut cfg = LoadConfig::new(targets);
    cfg.method = traffic
        .method
        .parse()
        .map_err(|_| BenchError::Invalid(format!("bad method {:?}", traffic.method)))?;
    cfg.rate = traffic.rate;
    let callers = &traffic.callers;
    if let Some(d) = callers.request_deadline {
        let ms = http::HeaderValue::from(d.as_millis().max(1) as u64);
        cfg.headers
            .insert(http::HeaderName::from_static("x-tailguard-timeout-ms"), ms);
    }
    cfg.retry_after = callers.retry_after;
    cfg.closed_interval = traffic.closed_interval;
    cfg.drain_limit = traffic.drain_limit;
    cfg.concurrency = traffic.concurrency.min(workers_fit);
    cfg.arrivals = traffic.arrivals;
    cfg.ramp = traffic.ramp;
    cfg.duration = Some(traffic.duration);
    if let Some(stages) = &callers.stages {
        // The stages set the rate (their peak) and the length (their total).
        cfg.set_stages(stages.clone());
    }
    cfg.interval = traffic.interval;
    cfg.timeout = traffic.timeout;
    cfg.unit = traffic.unit;
    cfg.threads = 1;
    cfg.final_report = false;
    // The bench starts its own servers and counts every request: no uncounted extra one.
    cfg.preflight = false;
    if traffic.grpc {
        let call = tailguard_load::grpc::resolve(Some("ping"), &[], &[], None)
            .map_err(|e| BenchError::Invalid(e.to_string()))?;
        cfg.grpc = Some(call);
        cfg.protocol = tailguard_load::Protocol::Http2;
        cfg.h2_connections = 1;
    }
    let classifier = Classifier::default();
    let deadline_us = duration_us(traffic.deadline);
    let per_second = callers.per_second;
    cfg.on_record = Some(Arc::new(move |r: &Record| {
        let us = duration_us(r.latency());
        let good = classifier.classify(r.outcome) == Class::Good;
        live.record(r.latency(), good);
        if per_second {
            let is_critical = critical.get(r.target as usize).copied().unwrap_or(false);
            tally.second(r, good, us <= deadline_us, is_critical);
        }
        tally
            .latency
            .lock()
            .expect("tally lock is never poisoned")
            .record_us(us);
        if good {
            tally.good.fetch_add(1, Ordering::Relaxed);
            if us <= deadline_us {
                tally.within_deadline.fetch_add(1, Ordering::Relaxed);
            }
        }
    }));
    Ok(cfg)
}

/// The load's targets over `addrs`: one per address, or with a critical share, two (a
/// `critical` and a `default` request, weighted by the share, named so the report splits them);
/// and which targets are critical.
fn callers_targets(
    traffic: &Traffic,
    addrs: &[SocketAddr],
) -> Result<(Vec<Target>, Arc<[bool]>), BenchError> {
    let parse = |a: &SocketAddr| {
        Target::parse(&format!("http://{a}/")).map_err(|e| BenchError::Invalid(e.to_string()))
    };
    let share = traffic.callers.critical;
    if share <= 0.0 {
        let targets = addrs.iter().map(parse).collect::<Result<Vec<_>, _>>()?;
        let critical = vec![false; targets.len()].into();
        return Ok((targets, critical));
    }
    // Weights in hundredths: 20% critical is 20 of every 100 requests, spread evenly.
    let critical_weight = ((share * 100.0).round() as u32).clamp(1, 100);
    let method: http::Method = traffic
        .method
        .parse()
        .map_err(|_| BenchError::Invalid(format!("bad method {:?}", traffic.method)))?;
    let mut targets = Vec::new();
    let mut critical = Vec::new();
    for a in addrs {
        for (class, weight) in [
            ("critical", critical_weight),
            ("default", 100 - critical_weight),
        ] {
            if weight == 0 {
                continue;
            }
            let mut t = parse(a)?;
            let mut headers = http::HeaderMap::new();
            headers.insert(
                http::HeaderName::from_static("x-tailguard-criticality"),
                http::HeaderValue::from_static(class),
            );
            t.spec = Some(Arc::new(tailguard_load::target::RequestSpec {
                method: method.clone(),
                headers,
                body: bytes::Bytes::new(),
                name: class.to_owned(),
                weight,
            }));
            targets.push(t);
            critical.push(class == "critical");
        }
    }
    Ok((targets, critical.into()))
}

/// The soft limit on open files, raised to the hard limit first (once a run holds a fleet, a
/// proxy and a load generator in one process, the usual 1,024 is soon reached).
fn open_files_limit() -> u64 {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return 1024;
    };
    if soft < hard && setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
        return hard;
    }
    soft
}

/// A backend as the live page lists it: its latency, then how often it fails, if it does
/// (`1s, 40% 500s`).
fn describe_backend(b: &tailguard_fleet::BackendSpec) -> String {
    let f = &b.failure;
    let mut text = b.latency.to_string();
    for (ratio, what) in [
        (f.error().get(), format!("{}s", f.status())),
        (f.close().get(), "closed".to_owned()),
        (f.reset().get(), "reset".to_owned()),
    ] {
        if ratio > 0.0 {
            text += &format!(", {}% {what}", tailguard_report::svg::number(ratio * 100.0));
        }
    }
    if let Some(c) = b.capacity {
        text += &format!(", {}", c.workers);
        text += if c.workers == 1 {
            " worker"
        } else {
            " workers"
        };
    }
    text
}
