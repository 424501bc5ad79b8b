//! The typed configuration of a run, parsed once at the edge (the CLI) and validated here.

use crate::slo::Objective;
use crate::target::Target;
use bytes::Bytes;
use http::{HeaderMap, Method};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tailguard_pacing::{Arrivals, PacingError, Ramp, Schedule, Stages};
use tailguard_record::{Classifier, Record};
use tailguard_report::Unit;

/// Which HTTP version to speak.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Protocol {
    /// HTTP/1.1 on `http://`; on `https://`, whatever ALPN picks (h2 preferred).
    #[default]
    Auto,
    /// HTTP/1.1 only.
    Http1,
    /// HTTP/2: prior knowledge (h2c) on `http://`, required through ALPN on `https://`.
    Http2,
}

/// Which client speaks HTTP/1.1 on plain TCP.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum H1Client {
    /// tailguard's own ([`tailguard_http::h1`]): prebuilt request bytes, the response head
    /// read by `httparse`, no driver task. Used unless a request needs what only hyper does
    /// (a `Content-Length`, `Transfer-Encoding`, `Connection`, `Upgrade` or `Expect` header
    /// given with `-H`).
    #[default]
    Lean,
    /// hyper's client, as over TLS (for comparison: `bench/load/run.sh` measures both).
    Hyper,
}

/// One generator's part of a schedule shared by several (`--shard I/N`): the requests `i` with
/// `i % of == index`. N generators with the same rate, arrivals, seed and duration, parts 0 to
/// N-1, send together exactly the schedule one generator would, Poisson gaps included (each
/// draws the whole schedule and sends its part, as the threads of one run do).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Part {
    /// Which part, from 0.
    pub index: u64,
    /// How many parts.
    pub of: u64,
}

impl Part {
    /// The whole schedule: part 0 of 1.
    pub const WHOLE: Part = Part { index: 0, of: 1 };

    /// True when request `i` of the schedule is this part's.
    pub fn owns(&self, i: u64) -> bool {
        i % self.of == self.index
    }

    /// True when this is the whole schedule.
    pub fn is_whole(&self) -> bool {
        self.of == 1
    }
}

impl std::fmt::Display for Part {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.of)
    }
}

impl std::str::FromStr for Part {
    type Err = String;

    /// `I/N` with `0 <= I < N`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || format!("{s:?}: expected I/N, a part from 0 to N-1 of N (e.g. 2/4)");
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let index: u64 = i.trim().parse().map_err(|_| bad())?;
        let of: u64 = n.trim().parse().map_err(|_| bad())?;
        if of == 0 || index >= of || of > 10_000 {
            return Err(bad());
        }
        Ok(Part { index, of })
    }
}

/// The most requests in flight (`--concurrency`): far above what a generator's descriptors
/// allow (an HTTP/1.1 connection each), far below what the workers' memory would exhaust.
pub const MAX_CONCURRENCY: usize = 100_000;

/// The most HTTP/2 connections per origin (`--h2-connections`).
pub const MAX_H2_CONNECTIONS: usize = 1_000;

/// The shortest report interval (`--interval`): a line, a log entry and a self-check each.
pub const MIN_INTERVAL: Duration = Duration::from_millis(10);

/// The most targets (URLs) a run spreads its requests over.
pub const MAX_TARGETS: usize = 10_000;

/// What `--replay` and `--speed` ask for.
#[derive(Clone, Debug, PartialEq)]
pub struct ReplaySpec {
    /// The file.
    pub path: PathBuf,
    /// How much faster than recorded (2: twice as fast).
    pub speed: f64,
}

/// The largest sum of a request file's weights: requests are picked from one precomputed
/// round of this length at most (4 MB).
pub const MAX_WEIGHT_SUM: u64 = 1_000_000;

/// A callback that sees every record as it completes (tests, custom sinks).
pub type RecordHook = Arc<dyn Fn(&Record) + Send + Sync>;

/// Everything a run needs.
#[derive(Clone)]
pub struct Config {
    /// Where requests go: request `i` goes to `targets[i % len]`, or by the request file's
    /// weights; targets with one origin share connections.
    pub targets: Vec<Target>,
    /// HTTP method.
    pub method: Method,
    /// Extra request headers.
    pub headers: HeaderMap,
    /// Request body.
    pub body: Bytes,
    /// Overrides the Host header (HTTP/1.1) or `:authority` (HTTP/2).
    pub host: Option<String>,
    /// Total requests per second across all connections; 0 = closed loop, as fast as possible.
    pub rate: f64,
    /// Constant or Poisson arrivals.
    pub arrivals: Arrivals,
    /// Open loop only: the offered rate climbs linearly from `ramp.from` to `rate` over
    /// `ramp.over`, then holds (`None`: `rate` from the start).
    pub ramp: Option<Ramp>,
    /// Open loop only: the offered rate follows these stages (k6's ramping arrival rate);
    /// `rate` is then their peak and `duration` their total ([`Config::set_stages`]).
    pub stages: Option<Stages>,
    /// Open loop only: send this part of the schedule (`rate` stays the whole schedule's; this
    /// generator offers `rate / part.of`).
    pub part: Part,
    /// Start the schedule at this wall-clock time (`--start-at`), so generators on several
    /// machines send their parts of one schedule together.
    pub start_at: Option<std::time::SystemTime>,
    /// Maximum requests in flight (and HTTP/1.1 connections per origin).
    pub concurrency: usize,
    /// Closed loop only: each worker waits at least this long between two of its sends
    /// (slow_cooker's per-worker `-qps` ticker); `None` sends again at once.
    pub closed_interval: Option<Duration>,
    /// Stop waiting this long after `duration`: requests still queued for a connection are
    /// not sent (counted as `unsent`). `None`: the run still ends by `duration` plus `timeout`
    /// (requests that found no connection within the timeout of their due time count as
    /// `no-connection`). For benches against servers that cannot keep up (the Nagle demo).
    pub drain_limit: Option<Duration>,
    /// HTTP/2 connections per origin (streams share them).
    pub h2_connections: usize,
    /// Open loop: poll instead of sleeping this long before each due time, so a sleeping
    /// thread's wake-up latency does not delay sends (costs a busy core at high rates).
    pub busy_poll: Duration,
    /// Stop sending after this long.
    pub duration: Option<Duration>,
    /// Stop after exactly this many requests.
    pub total_requests: Option<u64>,
    /// Interval report period.
    pub interval: Duration,
    /// Per-request timeout, from the actual send.
    pub timeout: Duration,
    /// Keep connections open between requests.
    pub reuse: bool,
    /// HTTP version.
    pub protocol: Protocol,
    /// The HTTP/1.1 client on plain TCP.
    pub h1_client: H1Client,
    /// Accept any TLS certificate (self-signed test servers).
    pub insecure: bool,
    /// Good, bad or failed (and `--expect-status`).
    pub classifier: Classifier,
    /// Checks on every answer's body (`--expect-body-*`); a body that fails one makes a good
    /// answer bad. Bodies are then read through hyper's client.
    pub body_checks: crate::check::BodyChecks,
    /// Latency units in reports.
    pub unit: Unit,
    /// Seed for Poisson arrivals.
    pub seed: u64,
    /// Runtime worker threads.
    pub threads: usize,
    /// Write the JSON summary here (`-` = stdout).
    pub json: Option<PathBuf>,
    /// Write an HdrHistogram interval log here.
    pub hdr_log: Option<PathBuf>,
    /// Write every request's record here, as NDJSON (`--output`).
    pub output: Option<PathBuf>,
    /// Serve Prometheus metrics of the run here.
    pub metrics_addr: Option<SocketAddr>,
    /// Service level objectives checked at the end.
    pub slo: Vec<Objective>,
    /// Percentiles the report shows instead of its default ones (`--percentiles`), each
    /// above 0 and below 100.
    pub percentiles: Vec<f64>,
    /// Skip the interval lines; print only the final report.
    pub quiet: bool,
    /// Print the final report (a caller with its own, such as `tailguard bench`, turns it off).
    pub final_report: bool,
    /// Send a recorded file's requests at their recorded times (`--replay`); the run's targets,
    /// rate and duration come from the file.
    pub replay: Option<ReplaySpec>,
    /// Make this gRPC call instead of an HTTP request (HTTP/2 only; the URLs name the servers).
    pub grpc: Option<crate::grpc::GrpcCall>,
    /// A client or bidirectional stream's messages per call (`--stream-messages`, cycling
    /// through the call's messages); `None`: each of them once.
    pub stream_messages: Option<u32>,
    /// The pause between two messages a call sends (`--stream-interval`).
    pub stream_interval: Duration,
    /// Send one uncounted request per target before the run, and refuse to start when it
    /// shows the run cannot succeed (on by default).
    pub preflight: bool,
    /// Called with every record (off by default: it runs on the hot path).
    pub on_record: Option<RecordHook>,
    /// Open loop: a request that failed is sent once more, this long after it ended
    /// (`--retry-after`, [`crate::resend`]); `None`: never.
    pub retry_after: Option<Duration>,
}

/// The most messages one streaming call may send.
pub const MAX_STREAM_MESSAGES: u32 = 1_000_000;

impl Config {
    /// The stream flags fit the call.
    fn check_stream(&self) -> Result<(), ConfigError> {
        if let Some(call) = &self.grpc {
            if call.kind != crate::grpc::CallKind::Unary && self.body_checks.any() {
                return Err(ConfigError::ChecksOnStream(call.method.clone()));
            }
        }
        if let Some(n) = self.stream_messages {
            if n == 0 || n > MAX_STREAM_MESSAGES {
                return Err(ConfigError::BadStreamMessages(n));
            }
        }
        let flag = match (self.stream_messages, self.stream_interval.is_zero()) {
            (Some(_), _) => "--stream-messages",
            (None, false) => "--stream-interval",
            (None, true) => return Ok(()),
        };
        match &self.grpc {
            Some(call) if call.kind.client_streams() => Ok(()),
            Some(call) => Err(ConfigError::NotClientStreaming(flag, call.method.clone())),
            None => Err(ConfigError::NotClientStreaming(
                flag,
                "(none: not gRPC)".into(),
            )),
        }
    }
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("targets", &self.targets)
            .field("method", &self.method)
            .field("retry_after", &self.retry_after)
            .field("rate", &self.rate)
            .field("ramp", &self.ramp)
            .field("stages", &self.stages.as_ref().map(ToString::to_string))
            .field("concurrency", &self.concurrency)
            .field("duration", &self.duration)
            .field("total_requests", &self.total_requests)
            .finish_non_exhaustive()
    }
}

/// A configuration that cannot run.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ConfigError {
    /// No URL given.
    #[error("no target URL given")]
    NoTargets,
    /// A rate that is neither 0 nor in the schedule's range.
    #[error("--rate must be 0 (as fast as possible) or from 0.001 to 10000000, got {}", tailguard_pacing::show_rate(*.0))]
    BadRate(f64),
    /// Concurrency of zero, or beyond [`MAX_CONCURRENCY`].
    #[error("--concurrency must be from 1 to {MAX_CONCURRENCY}, got {0}")]
    BadConcurrency(usize),
    /// HTTP/2 connections per origin of zero, or beyond [`MAX_H2_CONNECTIONS`].
    #[error("--h2-connections must be from 1 to {MAX_H2_CONNECTIONS}, got {0}")]
    BadH2Connections(usize),
    /// More targets than [`MAX_TARGETS`].
    #[error("at most {MAX_TARGETS} target URLs, got {0}")]
    TooManyTargets(usize),
    /// A request body larger than [`crate::files::MAX_BODY_BYTES`].
    #[error("--data must be at most {max} bytes, got {0}", max = crate::files::MAX_BODY_BYTES)]
    BodyTooLarge(usize),
    /// Neither a duration nor a request count: the run would not end.
    #[error("give --duration or --total-requests (or both), or the run never ends")]
    Endless,
    /// A zero duration: the run would send nothing.
    #[error("--duration must be longer than zero")]
    ZeroDuration,
    /// A request count of zero: the run would send nothing.
    #[error("--total-requests must be at least 1")]
    ZeroRequests,
    /// An interval shorter than [`MIN_INTERVAL`]: report lines as fast as the CPU goes.
    #[error("--interval must be at least 10ms")]
    ShortInterval,
    /// A zero timeout.
    #[error("--timeout must be longer than zero")]
    ZeroTimeout,
    /// gRPC over HTTP/1.1.
    #[error("gRPC needs HTTP/2: drop --http1")]
    GrpcOverHttp1,
    /// `--retry-after` outside an open loop, with a replay, or out of range.
    #[error("--retry-after {0}")]
    RetryAfter(&'static str),
    /// A stream flag for a call that sends one message.
    #[error(
        "{0} applies to client and bidirectional streaming calls; --call {1} sends one message"
    )]
    NotClientStreaming(&'static str, String),
    /// A body check on a streaming call, whose answer is many messages.
    #[error("--expect-body-* checks read one answer's body; --call {0} streams")]
    ChecksOnStream(String),
    /// Too many messages per stream, or none.
    #[error("--stream-messages must be from 1 to {MAX_STREAM_MESSAGES}, got {0}")]
    BadStreamMessages(u32),
    /// A gRPC URL with a path: the call names the path.
    #[error("a gRPC URL names only the server ({0:?} has a path); the method is --call")]
    GrpcPath(String),
    /// A worker interval given for an open-loop run, where the schedule already sets the pace.
    #[error("--closed-interval applies to closed loop only (--rate 0)")]
    IntervalWithRate,
    /// A ramp for a closed loop, which has no rate to ramp.
    #[error("--ramp-from applies to an open loop only (a --rate above 0)")]
    RampClosedLoop,
    /// Stages and a ramp at once.
    #[error("--stages and --ramp-from both shape the rate: give one")]
    RampAndStages,
    /// A ramp the schedule refuses.
    #[error("--ramp-from/--ramp-over: {0}")]
    BadRamp(PacingError),
    /// Busy polling for a closed loop, which has no due times to poll for.
    #[error("--busy-poll applies to an open loop only (a --rate above 0)")]
    BusyPollClosedLoop,
    /// A part of a closed loop, which has no schedule to share.
    #[error("--shard applies to an open loop only (a --rate above 0)")]
    ShardClosedLoop,
    /// A part that does not exist.
    #[error("--shard {0}: the part must be from 0 to N-1 of N")]
    BadShard(Part),
    /// A request file's weights that cannot be shared out.
    #[error("the requests' weights add up to {0}: give a sum from 1 to {max}", max = MAX_WEIGHT_SUM)]
    Weights(u64),
    /// A start time already past: the requests due since would all be sent at once.
    #[error("--start-at was {} ago: give a time still to come", humantime::format_duration(Duration::from_secs(.0.as_secs())))]
    StartAtPast(Duration),
    /// A start time so far ahead it is surely a mistake (a wrong day, a time zone).
    #[error("--start-at is {} ahead, more than a day: check the date and the time zone", humantime::format_duration(Duration::from_secs(.0.as_secs())))]
    StartAtFar(Duration),
}

impl Config {
    /// A configuration with the defaults of `tailguard load`: GET, 1 req/s... callers set the
    /// rest. Defaults: concurrency 10, interval 10 s, timeout 10 s, keep-alive, constant arrivals.
    pub fn new(targets: Vec<Target>) -> Config {
        Config {
            targets,
            method: Method::GET,
            headers: HeaderMap::new(),
            body: Bytes::new(),
            host: None,
            rate: 100.0,
            arrivals: Arrivals::Constant,
            ramp: None,
            stages: None,
            part: Part::WHOLE,
            start_at: None,
            concurrency: 10,
            closed_interval: None,
            drain_limit: None,
            h2_connections: 1,
            busy_poll: Duration::ZERO,
            duration: Some(Duration::from_secs(10)),
            total_requests: None,
            interval: Duration::from_secs(10),
            timeout: Duration::from_secs(10),
            reuse: true,
            protocol: Protocol::Auto,
            h1_client: H1Client::Lean,
            insecure: false,
            classifier: Classifier::default(),
            body_checks: crate::check::BodyChecks::default(),
            unit: Unit::Auto,
            seed: 1,
            threads: 0,
            json: None,
            hdr_log: None,
            output: None,
            metrics_addr: None,
            slo: Vec::new(),
            percentiles: Vec::new(),
            quiet: false,
            final_report: true,
            preflight: true,
            grpc: None,
            stream_messages: None,
            stream_interval: Duration::ZERO,
            replay: None,
            on_record: None,
            retry_after: None,
        }
    }

    /// How many requests an open-loop run schedules: every request of its part due before the
    /// duration (and within `total_requests`), counted on the run's own schedule, so a Poisson run's
    /// count is its draw, not `rate x duration`. `None` for a closed loop, a run bounded by
    /// neither, or a configuration that does not validate. Replays the schedule: one step per
    /// request.
    pub fn scheduled(&self) -> Option<u64> {
        if self.rate <= 0.0 || (self.duration.is_none() && self.total_requests.is_none()) {
            return None;
        }
        let mut schedule = match &self.stages {
            Some(st) => Schedule::staged(self.arrivals, st.clone(), self.seed).ok()?,
            None => Schedule::new(self.arrivals, self.rate, self.seed).ok()?,
        };
        if let Some(r) = self.ramp {
            schedule = schedule.with_ramp(r).ok()?;
        }
        let past = |i: u64, due: Duration| {
            self.total_requests.is_some_and(|n| i >= n) || self.duration.is_some_and(|d| due >= d)
        };
        let (mut i, mut mine) = (0, 0);
        while !past(i, schedule.next_send(i)) {
            mine += u64::from(self.part.owns(i));
            i += 1;
        }
        Some(mine)
    }

    /// Checks the constraints a run depends on.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.validate_sizes()?;
        if !(self.rate == 0.0 || tailguard_pacing::rate_in_range(self.rate)) {
            return Err(ConfigError::BadRate(self.rate));
        }
        if self.duration.is_none() && self.total_requests.is_none() && self.replay.is_none() {
            return Err(ConfigError::Endless);
        }
        if self.duration.is_some_and(|d| d.is_zero()) {
            return Err(ConfigError::ZeroDuration);
        }
        if self.total_requests == Some(0) {
            return Err(ConfigError::ZeroRequests);
        }
        if self.interval < MIN_INTERVAL {
            return Err(ConfigError::ShortInterval);
        }
        if self.timeout.is_zero() {
            return Err(ConfigError::ZeroTimeout);
        }
        if self.grpc.is_some() {
            if self.protocol == Protocol::Http1 {
                return Err(ConfigError::GrpcOverHttp1);
            }
            if let Some(t) = self.targets.iter().find(|t| t.path.as_str() != "/") {
                return Err(ConfigError::GrpcPath(t.url.clone()));
            }
        }
        self.check_stream()?;
        if self.closed_interval.is_some() && self.open_loop() {
            return Err(ConfigError::IntervalWithRate);
        }
        if self.part.of == 0 || self.part.index >= self.part.of {
            return Err(ConfigError::BadShard(self.part));
        }
        if !self.part.is_whole() && !self.open_loop() {
            return Err(ConfigError::ShardClosedLoop);
        }
        match self.retry_after {
            Some(d) if d.is_zero() || d > Duration::from_secs(3600) => {
                return Err(ConfigError::RetryAfter("must be from 1ms to 1h"))
            }
            Some(_) if !self.open_loop() => {
                return Err(ConfigError::RetryAfter(
                    "needs an open loop (--rate): a closed loop's worker sends again itself",
                ))
            }
            Some(_) if self.replay.is_some() => {
                return Err(ConfigError::RetryAfter(
                    "does not go with --replay (the file says what was sent)",
                ))
            }
            _ => {}
        }
        if !self.busy_poll.is_zero() && !self.open_loop() {
            return Err(ConfigError::BusyPollClosedLoop);
        }
        if self.stages.is_some() && self.ramp.is_some() {
            return Err(ConfigError::RampAndStages);
        }
        if let Some(ramp) = self.ramp {
            if !self.open_loop() {
                return Err(ConfigError::RampClosedLoop);
            }
            let even = Schedule::new(Arrivals::Constant, self.rate, self.seed);
            even.and_then(|s| s.with_ramp(ramp))
                .map_err(ConfigError::BadRamp)?;
        }
        Ok(())
    }

    /// Targets, workers, connections and body within their limits.
    fn validate_sizes(&self) -> Result<(), ConfigError> {
        // A replay's targets come from its file, read when the run starts.
        if self.targets.is_empty() && self.replay.is_none() {
            return Err(ConfigError::NoTargets);
        }
        if self.targets.len() > MAX_TARGETS {
            return Err(ConfigError::TooManyTargets(self.targets.len()));
        }
        if !(1..=MAX_CONCURRENCY).contains(&self.concurrency) {
            return Err(ConfigError::BadConcurrency(self.concurrency));
        }
        if !(1..=MAX_H2_CONNECTIONS).contains(&self.h2_connections) {
            return Err(ConfigError::BadH2Connections(self.h2_connections));
        }
        if self.body.len() as u64 > crate::files::MAX_BODY_BYTES {
            return Err(ConfigError::BodyTooLarge(self.body.len()));
        }
        let weights = self
            .targets
            .iter()
            .map(|t| t.spec.as_ref().map_or(1, |s| s.weight));
        let sum: u64 = weights.map(u64::from).sum();
        if !self.targets.is_empty() && (sum == 0 || sum > MAX_WEIGHT_SUM) {
            return Err(ConfigError::Weights(sum));
        }
        Ok(())
    }

    /// The open loop's schedule, ramp included.
    ///
    /// # Panics
    /// When the configuration did not [validate](Config::validate) or is a closed loop.
    pub(crate) fn schedule(&self, arrivals: Arrivals) -> Schedule {
        if let Some(st) = &self.stages {
            return Schedule::staged(arrivals, st.clone(), self.seed).expect("validated stages");
        }
        let schedule = Schedule::new(arrivals, self.rate, self.seed).expect("validated rate");
        match self.ramp {
            None => schedule,
            Some(r) => schedule.with_ramp(r).expect("validated ramp"),
        }
    }

    /// Follows `stages`: the rate becomes their peak and the duration their total (an open
    /// loop that ends with them).
    pub fn set_stages(&mut self, stages: Stages) {
        self.rate = stages.peak().max(tailguard_pacing::MIN_RATE);
        self.duration = Some(stages.total());
        self.stages = Some(stages);
    }

    /// The largest request body of the run (it decides how hyper writes HTTP/1.1 requests).
    pub(crate) fn largest_body(&self) -> usize {
        let specs = self.targets.iter().filter_map(|t| t.spec.as_ref());
        specs
            .map(|s| s.body.len())
            .fold(self.body.len(), usize::max)
    }

    /// Which target request `i` goes to: in turn, or by the request file's weights.
    pub(crate) fn pick(&self) -> crate::pick::Pick {
        let weights: Vec<u32> = self
            .targets
            .iter()
            .map(|t| t.spec.as_ref().map_or(1, |s| s.weight))
            .collect();
        crate::pick::Pick::new(&weights)
    }

    /// True when requests follow a schedule (open loop).
    pub fn open_loop(&self) -> bool {
        self.rate > 0.0
    }

    /// The rate this generator offers: its part of `rate`.
    pub fn own_rate(&self) -> f64 {
        self.rate / self.part.of as f64
    }
}
