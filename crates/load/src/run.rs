//! A whole run: check the targets, start workers and the pacer, report every interval, then
//! the final report, JSON and SLO verdicts.

use crate::clock::Clock;
use crate::config::{Config, ConfigError, Protocol};
use crate::conn::Connector;
use crate::metrics::{self, Metrics};
use crate::pacer::{Limits, PacerState};
use crate::reporter::{epoch_secs, DueCounter, IntervalEnd, Reporter};
use crate::request::Template;
use crate::selfcheck;
use crate::slo::Verdict;
use crate::target::TargetError;
use crate::threads::{Feed, OpenLoop, WorkerThreads};
use crate::worker::{ClosedLoop, H2Pool, Job, Shared};
use std::io::{BufWriter, Write};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tailguard_histogram::log;
use tailguard_http::admin::AdminServer;
use tailguard_pacing::{Arrivals, Ramp};
use tailguard_record::{Encoded, RunSummary, Stats, Totals};
use tailguard_report::{interval, text};
use tokio::signal::unix::{signal, Signal, SignalKind};

/// Why a run could not start or finish.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A URL is invalid.
    #[error(transparent)]
    Target(#[from] TargetError),
    /// A target failed the pre-flight request: the run could not succeed, and nothing was sent.
    #[error("pre-flight request to {url} failed: {cause}")]
    Preflight {
        /// The URL.
        url: String,
        /// The cause and the fix.
        cause: String,
    },
    /// A flag value that is well-formed but unusable (e.g. a bad host override).
    #[error("{0}")]
    Invalid(String),
    /// An output file could not be written.
    #[error("cannot write {path}: {reason}")]
    Output {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
    /// The runtime or a listener could not start.
    #[error("cannot start: {0}")]
    Io(#[from] std::io::Error),
    /// A replay file that cannot be used (found before anything is sent).
    #[error(transparent)]
    Replay(#[from] crate::replay::ReplayError),
    /// Ctrl-C (SIGINT) came before the first request: nothing was sent.
    #[error("interrupted before the run began: nothing was sent")]
    Interrupted,
}

/// What a finished run produced.
#[derive(Debug)]
pub struct Report {
    /// The machine-readable summary (what `--json` writes).
    pub summary: RunSummary,
    /// One verdict per `--slo` objective.
    pub verdicts: Vec<Verdict>,
    /// True when Ctrl-C ended the run early, or a closed output did.
    pub interrupted: bool,
    /// True when the report's reader went away (a closed pipe): the run stopped quietly.
    pub output_closed: bool,
}

impl Report {
    /// True when every objective was met.
    pub fn slo_met(&self) -> bool {
        self.verdicts.iter().all(|v| v.met)
    }
}

/// Runs the load described by `cfg`, printing the interval report to `out`. Blocks until done.
///
/// # Errors
/// Bad configuration, unusable URLs, unreachable targets and unwritable output files are
/// reported before any request is sent.
pub fn run(mut cfg: Config, out: &mut dyn Write) -> Result<Report, LoadError> {
    cfg.validate()?;
    let replay = match cfg.replay.clone() {
        Some(spec) => Some(prepare_replay(&mut cfg, &spec)?),
        None => None,
    };
    if cfg.grpc.is_some() {
        cfg.protocol = Protocol::Http2;
    }
    let threads = match cfg.threads {
        0 => default_threads(
            &cfg.targets,
            std::thread::available_parallelism().map_or(2, |n| n.get()),
        ),
        n => n,
    }
    .clamp(1, cfg.concurrency.max(1));
    // The control runtime (reporting, metrics, Ctrl-C); workers run on their own threads.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(run_async(cfg, threads, replay, out))
}

/// Reads a replay file through (nothing is sent yet) and sets the run from it: its origins
/// are the targets, its span the duration, its mean rate the rate shown; one worker thread
/// unless `--threads` says otherwise, so the file's order holds.
fn prepare_replay(
    cfg: &mut Config,
    spec: &crate::replay::ReplaySpec,
) -> Result<crate::replay::Scan, LoadError> {
    let scan = crate::replay::scan(spec, cfg.interval, cfg.total_requests)?;
    cfg.targets = scan.targets.clone();
    let span = scan.last_due.max(Duration::from_millis(1));
    cfg.rate = (scan.count as f64 / span.as_secs_f64())
        .clamp(tailguard_pacing::MIN_RATE, tailguard_pacing::MAX_RATE);
    cfg.duration = Some(scan.last_due + Duration::from_nanos(1));
    if cfg.threads == 0 {
        cfg.threads = 1;
    }
    cfg.validate()?;
    Ok(scan)
}

/// Worker threads when `--threads` is not given: every core for remote targets; half of them
/// when every target is on this machine, whose server needs the other half. On 2 cores against
/// a one-worker nginx on loopback, `-r 0 -c 50` made 114k req/s on one thread and 88k on two
/// (medians of three interleaved 5 s runs).
fn default_threads(targets: &[crate::Target], cores: usize) -> usize {
    let local = targets.iter().all(|t| t.addr.ip().is_loopback());
    if local {
        (cores / 2).max(1)
    } else {
        cores.max(1)
    }
}

async fn run_async(
    cfg: Config,
    threads: usize,
    replay: Option<crate::replay::Scan>,
    out: &mut dyn Write,
) -> Result<Report, LoadError> {
    // Output paths first: a bad one is bad input, found before anything is sent.
    let json = open_json(&cfg)?;
    let hdr = open_hdr_log(&cfg)?;
    let records = create(cfg.output.as_deref())?;
    check_start(&cfg)?;
    // Ctrl-C is ours from here on: during the pre-flight and the wait for `--start-at` it
    // ends the run at once, later it stops the sending (see `drive`).
    let mut sigint = signal(SignalKind::interrupt())?;
    let (metrics, metrics_server) = get_ready(&cfg, &mut sigint).await?;
    // A replay's reader fills each thread's queue before the clock starts: the schedule's
    // first due times are not spent reading the file.
    let replay = match (replay, &cfg.replay) {
        (Some(scan), Some(spec)) => {
            let state = Arc::new(PacerState::default());
            let started = crate::replay::start(&cfg, spec, scan, threads, state.clone()).await;
            Some((started, state))
        }
        _ => None,
    };
    let clock = Clock::start();
    let start_unix_s = epoch_secs();
    let hdr = begin_hdr_log(hdr, start_unix_s)?;
    let send_end = SendEnd::of(&cfg);
    let output = start_output(&cfg, records, start_unix_s)?;
    let shared = Arc::new(shared(&cfg, clock, send_end, threads, output)?);
    let urls: Vec<String> = cfg.targets.iter().map(|t| t.url.clone()).collect();
    if !cfg.quiet {
        print_header(&cfg, &urls, out);
    }
    let cpu_start = selfcheck::cpu_time();
    let due_counts = replay.as_ref().map(|(r, _)| r.due_per_interval.clone());
    let mut control = start_load(&cfg, clock, threads, &shared, replay);
    let mut reporter = start_reporter(
        &cfg,
        threads,
        &mut control,
        hdr,
        metrics,
        send_end,
        due_counts,
    );
    let (interrupted, unsent) = drive(
        &cfg,
        clock,
        send_end.expected,
        &mut control,
        &mut reporter,
        sigint,
        out,
    )
    .await;
    let elapsed = wind_down(control.workers, clock, &mut reporter, metrics_server, out).await;
    if let Some(reader) = control.reader {
        match reader.join() {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => crate::say(&format!("the replay stopped early: {e}")),
            Err(_) => crate::say("the replay's reader failed"),
        }
    }
    let output_closed = reporter.output_closed;
    let cpu = cpu_start
        .zip(selfcheck::cpu_time())
        .map(|(a, b)| b.saturating_sub(a));
    if let Some(note) = selfcheck::delayed_ack_note(&reporter.total.service) {
        crate::say(&note);
    }
    let mut summary = summarize(&cfg, urls, &reporter, elapsed, cpu);
    summary.per_name = shared.names.as_ref().map_or_else(Vec::new, |n| n.summary());
    summary.records = shared.output.as_ref().map(|o| {
        let w = o.finish(
            summary.duration_s,
            summary.send_phase_s,
            summary.totals.target_rate,
        );
        tailguard_record::RecordsFile {
            path: w.path.display().to_string(),
            written: w.records,
            dropped: w.dropped,
            error: w.error,
        }
    });
    summary.start_unix_s = start_unix_s;
    summary.interrupted = interrupted;
    summary.unsent = unsent;
    let ends = Ending {
        interrupted,
        output_closed,
        json,
    };
    finish(&cfg, summary, ends, out)
}

/// Runs the pre-flight, starts the metrics server and waits for `--start-at`; Ctrl-C meanwhile
/// ends the run before anything is sent.
async fn get_ready(
    cfg: &Config,
    sigint: &mut Signal,
) -> Result<(Option<Arc<Metrics>>, Option<AdminServer>), LoadError> {
    tokio::select! {
        ready = async {
            preflight(cfg).await?;
            let metrics = start_metrics(cfg).await?.unzip();
            wait_for_start(cfg).await;
            Ok::<_, LoadError>(metrics)
        } => ready,
        _ = sigint.recv() => Err(LoadError::Interrupted),
    }
}

/// Prints the interval report's header: the load, then the column titles.
fn print_header(cfg: &Config, urls: &[String], out: &mut dyn Write) {
    let header = interval::header(
        cfg.own_rate(),
        cfg.closed_interval,
        request_name(cfg),
        cfg.concurrency as u64,
        urls,
    );
    let _ = writeln!(out, "{header}");
    if let Some(ramp) = cfg.ramp {
        let _ = writeln!(out, "{}", ramp_line(cfg.rate, ramp));
    }
    if let Some(st) = &cfg.stages {
        let _ = writeln!(
            out,
            "# stages {st}: {} requests offered over {}, peak {} req/s; each interval says its own rate",
            st.offered(st.total()).round(),
            tailguard_text::duration::format_duration(st.total()),
            interval::trim_float(st.peak())
        );
    }
    if !cfg.part.is_whole() {
        let _ = writeln!(
            out,
            "# part {} of a {} req/s schedule shared by {} generators (seed {})",
            cfg.part, cfg.rate, cfg.part.of, cfg.seed
        );
    }
    let _ = writeln!(out, "{}", interval::titles());
}

/// The reporter of the started load, taking over the workers' statistics.
fn start_reporter(
    cfg: &Config,
    threads: usize,
    control: &mut Control,
    hdr: Option<log::Writer<BufWriter<std::fs::File>>>,
    metrics: Option<Arc<Metrics>>,
    send_end: SendEnd,
    replay_due: Option<Vec<u64>>,
) -> Reporter {
    let due = control.pacer.as_ref().map(|_| match replay_due {
        Some(counts) => DueCounter::counted(counts, cfg.interval),
        None => DueCounter::new(cfg.schedule(cfg.arrivals), cfg.total_requests, cfg.duration)
            .part(cfg.part),
    });
    let stats = std::mem::take(&mut control.stats);
    let mut reporter = Reporter::new(
        stats,
        due,
        cfg.own_rate(),
        cfg.unit,
        cfg.quiet,
        threads,
        hdr,
        metrics,
        control.pacer.clone(),
    );
    // Encoded histograms cost a few KB per interval: only a summary that is written keeps them.
    reporter.keep_histograms = cfg.json.is_some();
    reporter.send_end = send_end.exact.filter(|_| cfg.open_loop());
    reporter
}

/// Waits for the workers, closes the last interval and stops the metrics server; returns how
/// long the run took.
async fn wind_down(
    workers: WorkerThreads,
    clock: Clock,
    reporter: &mut Reporter,
    metrics_server: Option<AdminServer>,
    out: &mut dyn Write,
) -> Duration {
    let _ = tokio::task::spawn_blocking(move || workers.join()).await;
    let elapsed = clock.elapsed();
    let end = IntervalEnd {
        now: elapsed,
        dispatched: 0,
        last: true,
    };
    reporter.close_interval(end, out);
    if let Some(server) = metrics_server {
        server.shutdown().await;
    }
    elapsed
}

/// The header's second line for a ramped run: `# ramping from 50 to 200 req/s over 2s, then
/// 200 req/s`.
fn ramp_line(rate: f64, ramp: Ramp) -> String {
    format!(
        "# ramping from {} to {} req/s over {}, then {} req/s",
        interval::trim_float(ramp.from),
        interval::trim_float(rate),
        tailguard_text::duration::format_duration(ramp.over),
        interval::trim_float(rate)
    )
}

/// The HTTP method, or the gRPC method called.
/// What the run sends: the gRPC method, else the HTTP method (`mixed` when a request file's
/// requests have several).
fn request_name(cfg: &Config) -> &str {
    if let Some(call) = &cfg.grpc {
        return call.method.as_str();
    }
    fn method<'a>(cfg: &'a Config, t: &'a crate::Target) -> &'a str {
        t.spec.as_ref().map_or(&cfg.method, |s| &s.method).as_str()
    }
    let method = |t| method(cfg, t);
    let first = cfg.targets.first().map_or(cfg.method.as_str(), method);
    match cfg.targets.iter().all(|t| method(t) == first) {
        true => first,
        false => "mixed",
    }
}

/// How the run is being driven: the pacer (open loop) or the closed-loop control.
struct Control {
    workers: WorkerThreads,
    stats: Vec<Arc<Mutex<Stats>>>,
    pacer: Option<Arc<PacerState>>,
    closed: Option<Arc<ClosedLoop>>,
    /// A replay's reader thread: the requests it read, or why it stopped.
    reader: Option<std::thread::JoinHandle<Result<u64, String>>>,
    /// Each thread's queue of released requests (open loop).
    jobs: Vec<async_channel::Receiver<Job>>,
}

fn start_load(
    cfg: &Config,
    clock: Clock,
    threads: usize,
    shared: &Arc<Shared>,
    replay: Option<(crate::replay::Started, Arc<PacerState>)>,
) -> Control {
    if !cfg.open_loop() {
        let ctl = Arc::new(ClosedLoop::new(cfg.total_requests, cfg.closed_interval));
        let feed = Feed::Closed(ctl.clone());
        let (workers, stats) = WorkerThreads::start(threads, cfg.concurrency, shared, &feed);
        return Control {
            workers,
            stats,
            pacer: None,
            closed: Some(ctl),
            jobs: Vec::new(),
            reader: None,
        };
    }
    let (state, streams, reader) = match replay {
        Some((started, state)) => {
            let streams = started.streams.into_iter().map(|s| Mutex::new(Some(s)));
            (state, Some(streams.collect()), Some(started.reader))
        }
        None => (Arc::new(PacerState::default()), None, None),
    };
    let threads = threads.clamp(1, cfg.concurrency);
    let open = Arc::new(OpenLoop {
        schedule: cfg.schedule(cfg.arrivals),
        part: cfg.part,
        limits: Limits {
            total: cfg.total_requests,
            duration: cfg.duration,
        },
        busy_poll: cfg.busy_poll,
        clock,
        state: state.clone(),
        queues: (0..threads).map(|_| async_channel::unbounded()).collect(),
        streams,
        resends: cfg.retry_after.map(|after| {
            (0..threads)
                .map(|_| Arc::new(crate::resend::Resends::new(after)))
                .collect()
        }),
    });
    let jobs = open.queues.iter().map(|(_, rx)| rx.clone()).collect();
    let (workers, stats) =
        WorkerThreads::start(threads, cfg.concurrency, shared, &Feed::Open(open));
    Control {
        workers,
        stats,
        pacer: Some(state),
        closed: None,
        jobs,
        reader,
    }
}

/// Reports intervals until every worker is done; returns whether Ctrl-C (or a closed output)
/// stopped the run, and how many due requests were then never sent.
///
/// When the sending ends at or within a tenth of an interval after a boundary, that boundary
/// waits up to a tenth of an interval for the last responses: a short tail folds into the last
/// line (printed with its real length) instead of making a line of its own.
async fn drive(
    cfg: &Config,
    clock: Clock,
    send_end: Option<Duration>,
    control: &mut Control,
    reporter: &mut Reporter,
    mut sigint: Signal,
    out: &mut dyn Write,
) -> (bool, u64) {
    let origin = tokio::time::Instant::from_std(clock.origin());
    let end = cfg.duration.map(|d| origin + d);
    let drain_end = end.zip(cfg.drain_limit).map(|(e, d)| e + d);
    let fold = cfg.interval / 10;
    let mut drained = false;
    let (mut k, mut interrupted, mut ended) = (1u32, false, false);
    let mut unsent = 0;
    let mut hold: Option<tokio::time::Instant> = None;
    loop {
        let boundary = origin + cfg.interval * k;
        tokio::select! {
            _ = tokio::time::sleep_until(boundary), if hold.is_none() => {
                let over = send_end.is_some_and(|e| e <= cfg.interval * k + fold)
                    || control.closed.as_ref().is_some_and(|c| c.exhausted());
                if over {
                    hold = Some(boundary + fold);
                } else {
                    close(control, reporter, clock.elapsed().min(cfg.interval * k), out);
                    k += 1;
                }
            }
            _ = sleep_until_opt(hold) => {
                hold = None;
                close(control, reporter, clock.elapsed(), out);
                k += 1;
            }
            _ = sleep_until_opt(end), if !ended => {
                ended = true;
                if let Some(c) = &control.closed { c.stop.store(true, Ordering::Relaxed) }
            }
            _ = sleep_until_opt(drain_end), if !drained => {
                drained = true;
                crate::say("the drain limit passed: stopping");
                unsent += stop(control, false);
            }
            _ = control.workers.finished() => return (interrupted, unsent),
            _ = sigint.recv(), if !interrupted => {
                interrupted = true;
                crate::say("interrupted: finishing the requests in flight");
                unsent += stop(control, false);
            }
        }
        if reporter.output_closed && !interrupted {
            // Nobody reads the report any more (`| head`): stop sending, quietly.
            interrupted = true;
            unsent += stop(control, true);
        }
    }
}

/// Closes the interval ending at `now`.
fn close(control: &Control, reporter: &mut Reporter, now: Duration, out: &mut dyn Write) {
    let dispatched = match (&control.pacer, &control.closed) {
        (Some(p), _) => p.released.load(Ordering::Relaxed),
        (None, Some(c)) => c.dispatched(),
        (None, None) => 0,
    };
    let end = IntervalEnd {
        now,
        dispatched,
        last: false,
    };
    reporter.close_interval(end, out);
}

/// When the sending ends, as far as known before the run.
#[derive(Clone, Copy, Debug)]
struct SendEnd {
    /// Exactly: the duration, or the due time of the last request of a count (Poisson gaps
    /// drawn as the pacers draw them, for counts up to ten million).
    exact: Option<Duration>,
    /// The exact end, or where it is unknown (a longer Poisson count) the count's end at evenly
    /// spaced arrivals: when the reporter expects the last interval.
    expected: Option<Duration>,
}

impl SendEnd {
    fn of(cfg: &Config) -> SendEnd {
        if cfg.replay.is_some() {
            // The last request's offset (the duration ends just after it).
            return SendEnd {
                exact: cfg.duration,
                expected: cfg.duration,
            };
        }
        let within = |by_count: Option<Duration>| match (cfg.duration, by_count) {
            (Some(d), Some(c)) => Some(d.min(c)),
            (d, c) => d.or(c),
        };
        let Some(n) = cfg.total_requests.filter(|_| cfg.open_loop()) else {
            return SendEnd {
                exact: cfg.duration,
                expected: cfg.duration,
            };
        };
        let mut schedule = cfg.schedule(cfg.arrivals);
        let last = n.saturating_sub(1);
        let exact = match cfg.arrivals {
            Arrivals::Constant => Some(schedule.next_send(last)),
            Arrivals::Poisson if n <= 10_000_000 => (0..n).map(|i| schedule.next_send(i)).last(),
            Arrivals::Poisson => None,
        };
        let evenly = cfg.schedule(Arrivals::Constant).next_send(last);
        SendEnd {
            exact: within(exact),
            expected: within(exact.or(Some(evenly))),
        }
    }

    /// No request outlives the end of the sending plus the timeout, whatever the server does:
    /// requests in flight then are timeouts, and requests still waiting for a connection are
    /// never sent (`no-connection`). A closed loop's sending ends with its duration.
    fn hard_end(self, timeout: Duration) -> Option<Duration> {
        self.exact.map(|end| end + timeout)
    }
}

async fn sleep_until_opt(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Stops sending; returns how many released requests were then never sent (`quiet` leaves
/// out saying so). Requests the pacer had not yet released are not counted.
fn stop(control: &Control, quiet: bool) -> u64 {
    if let Some(p) = &control.pacer {
        p.stop.store(true, Ordering::Relaxed);
    }
    if let Some(c) = &control.closed {
        c.stop.store(true, Ordering::Relaxed);
    }
    // Closing lets receivers take what is queued; what is not taken now is not sent.
    let mut unsent = 0;
    for jobs in &control.jobs {
        jobs.close();
        while jobs.try_recv().is_ok() {
            unsent += 1;
        }
    }
    if unsent > 0 && !quiet {
        crate::say(&format!("{unsent} scheduled requests were not sent"));
    }
    unsent
}

fn shared(
    cfg: &Config,
    clock: Clock,
    send_end: SendEnd,
    threads: usize,
    output: Option<crate::output::Output>,
) -> Result<Shared, LoadError> {
    let any_tls = cfg.targets.iter().any(|t| t.tls);
    let templates = cfg
        .targets
        .iter()
        .map(|t| Template::new(cfg, t))
        .collect::<Result<Vec<_>, _>>()
        .map_err(LoadError::Invalid)?;
    let (origins, origin_of) = origins(&cfg.targets);
    let pooled = cfg.protocol == Protocol::Http2 || (cfg.protocol == Protocol::Auto && any_tls);
    let h2_pools = if pooled && cfg.reuse {
        origins
            .iter()
            .map(|_| H2Pool::new(cfg.h2_connections))
            .collect()
    } else {
        Vec::new()
    };
    let connector = Connector::new(
        cfg.protocol,
        cfg.insecure,
        any_tls,
        cfg.largest_body(),
        cfg.h1_client,
        &templates,
    );
    Ok(Shared {
        clock,
        templates,
        pick: cfg.pick(),
        origin_of,
        origins,
        connector,
        h2_pools,
        timeout: cfg.timeout,
        hard_end: send_end.hard_end(cfg.timeout),
        reuse: cfg.reuse,
        classifier: cfg.classifier,
        body_checks: cfg.body_checks.clone(),
        names: crate::worker::Names::of(cfg, threads),
        output,
        on_record: cfg.on_record.clone(),
        grpc: cfg.grpc.is_some(),
        stream: crate::stream::Plan::of(cfg),
    })
}

/// The distinct origins of `targets` (scheme, address, TLS name), in first-seen order, and
/// each target's origin.
pub(crate) fn origins(targets: &[crate::Target]) -> (Vec<crate::Target>, Vec<usize>) {
    let mut seen = std::collections::HashMap::new();
    let mut origins = Vec::new();
    let of = targets
        .iter()
        .map(|t| {
            *seen.entry(t.origin()).or_insert_with(|| {
                origins.push(t.clone());
                origins.len() - 1
            })
        })
        .collect();
    (origins, of)
}

/// One real request per target before the clock starts (see [`crate::preflight`]).
async fn preflight(cfg: &Config) -> Result<(), LoadError> {
    if !cfg.preflight {
        return Ok(());
    }
    let notes = crate::preflight::check(cfg)
        .await
        .map_err(|r| LoadError::Preflight {
            url: r.url,
            cause: r.cause,
        })?;
    for note in notes {
        crate::say(&note);
    }
    Ok(())
}

/// Creates `--hdr-log`'s file before the run, so an unwritable path stops it before it starts.
fn open_hdr_log(cfg: &Config) -> Result<Option<(String, std::fs::File)>, LoadError> {
    create(cfg.hdr_log.as_deref())
}

/// Starts `--output`'s writer on the file made before the run, its header first.
fn start_output(
    cfg: &Config,
    file: Option<(String, std::fs::File)>,
    start_unix_s: f64,
) -> Result<Option<crate::output::Output>, LoadError> {
    let Some((path, file)) = file else {
        return Ok(None);
    };
    let header = tailguard_record::records::Header {
        tailguard_records: tailguard_record::records::FORMAT,
        tool: crate::USER_AGENT.to_string(),
        start_unix_s,
        targets: cfg
            .targets
            .iter()
            .map(|t| t.name(t.spec.as_ref().map_or(&cfg.method, |s| &s.method)))
            .collect(),
        four_xx_bad: cfg.classifier.four_xx_bad,
        expect_status: cfg.classifier.expect.map(|e| e.to_string()),
        rate: if cfg.open_loop() { cfg.own_rate() } else { 0.0 },
        arrivals: if cfg.open_loop() {
            cfg.arrivals.to_string()
        } else {
            "closed".into()
        },
        concurrency: cfg.concurrency as u64,
    };
    crate::output::Output::start(file, std::path::Path::new(&path), &header)
        .map(Some)
        .map_err(|e| LoadError::Output {
            path,
            reason: e.to_string(),
        })
}

/// Creates an output file before the run, so an unwritable path stops it before it starts.
fn create(path: Option<&std::path::Path>) -> Result<Option<(String, std::fs::File)>, LoadError> {
    let Some(path) = path else {
        return Ok(None);
    };
    let path = path.display().to_string();
    match std::fs::File::create(&path) {
        Ok(file) => Ok(Some((path, file))),
        Err(e) => Err(LoadError::Output {
            path,
            reason: e.to_string(),
        }),
    }
}

/// Writes the log's headers, its StartTime the run's start (what `tailguard merge` and the
/// HdrHistogram tools align logs by).
fn begin_hdr_log(
    file: Option<(String, std::fs::File)>,
    start_unix_s: f64,
) -> Result<Option<log::Writer<BufWriter<std::fs::File>>>, LoadError> {
    let Some((path, file)) = file else {
        return Ok(None);
    };
    log::Writer::new(BufWriter::new(file), start_unix_s, crate::USER_AGENT)
        .map(Some)
        .map_err(|e| LoadError::Output {
            path,
            reason: e.to_string(),
        })
}

/// Refuses a `--start-at` more than a second past (the requests due since would all go at
/// once) or more than a day ahead (a wrong date or time zone), before anything is sent.
#[allow(clippy::disallowed_methods)] // The start is a wall-clock time shared by machines.
fn check_start(cfg: &Config) -> Result<(), LoadError> {
    let Some(at) = cfg.start_at else {
        return Ok(());
    };
    match at.duration_since(std::time::SystemTime::now()) {
        Ok(wait) if wait > Duration::from_secs(24 * 3600) => {
            Err(LoadError::Config(ConfigError::StartAtFar(wait)))
        }
        Err(e) if e.duration() > Duration::from_secs(1) => {
            Err(LoadError::Config(ConfigError::StartAtPast(e.duration())))
        }
        _ => Ok(()),
    }
}

/// Waits for `--start-at`, so generators on several machines start one schedule together.
#[allow(clippy::disallowed_methods)] // The start is a wall-clock time shared by machines.
async fn wait_for_start(cfg: &Config) {
    let Some(at) = cfg.start_at else {
        return;
    };
    if let Ok(wait) = at.duration_since(std::time::SystemTime::now()) {
        crate::say(&format!(
            "starting at {} (in {:.1} s)",
            humantime::format_rfc3339_millis(at),
            wait.as_secs_f64()
        ));
        tokio::time::sleep(wait).await;
    }
}

/// The `--metrics-addr` figures and the server showing them.
async fn start_metrics(cfg: &Config) -> Result<Option<(Arc<Metrics>, AdminServer)>, LoadError> {
    let Some(addr) = cfg.metrics_addr else {
        return Ok(None);
    };
    let m = Arc::new(Metrics::new());
    let server = metrics::serve(addr, m.clone())
        .await
        .map_err(|e| LoadError::Output {
            path: format!("metrics address {addr}"),
            reason: e.to_string(),
        })?;
    let _ = writeln!(
        std::io::stderr(),
        "# metrics at http://{}/metrics",
        server.addr()
    );
    Ok(Some((m, server)))
}

fn summarize(
    cfg: &Config,
    urls: Vec<String>,
    r: &Reporter,
    elapsed: Duration,
    cpu: Option<Duration>,
) -> RunSummary {
    let requests = r.total.requests();
    // An open loop's rate is judged over its sending, not over the wait for the last
    // responses: the last send's slot ends one inter-arrival gap after it.
    let send_phase = if cfg.open_loop() && requests > 0 {
        r.total.last_sent + Duration::from_secs_f64(1.0 / cfg.own_rate())
    } else {
        elapsed
    };
    RunSummary {
        tool: crate::USER_AGENT.to_string(),
        urls,
        method: request_name(cfg).to_string(),
        concurrency: cfg.concurrency as u64,
        arrivals: if cfg.open_loop() {
            cfg.arrivals.to_string()
        } else {
            "closed".to_string()
        },
        duration_s: elapsed.as_secs_f64(),
        send_phase_s: send_phase.as_secs_f64(),
        totals: Totals {
            hdr: r
                .keep_histograms
                .then(|| Encoded::of(&r.total).ok())
                .flatten(),
            ..Totals::from_stats(&r.total, target_rate(cfg, send_phase), send_phase)
        },
        per_target: r.total.per_target().to_vec(),
        per_name: Vec::new(),
        histogram: r
            .total
            .latency
            .log_buckets()
            .iter()
            .map(|b| [b.from_us, b.to_us, b.count])
            .collect(),
        client_cpu_us_per_request: cpu
            .filter(|_| requests > 0)
            .map(|c| c.as_secs_f64() * 1e6 / requests as f64),
        intervals: r.intervals.clone(),
        start_unix_s: 0.0,
        interval_s: cfg.interval.as_secs_f64(),
        part: (!cfg.part.is_whole()).then(|| cfg.part.to_string()),
        seed: cfg.open_loop().then_some(cfg.seed),
        merged_from: Vec::new(),
        interrupted: false,
        planned_duration_s: cfg.duration.map(|d| d.as_secs_f64()),
        unsent: 0,
        records: None,
        slo: Vec::new(),
        percentiles: cfg
            .percentiles
            .iter()
            .map(|&p| {
                let at = |h: &tailguard_histogram::Histogram| {
                    (!h.is_empty()).then(|| h.quantile_us(p / 100.0))
                };
                tailguard_record::Quantile {
                    percentile: p,
                    latency_us: at(&r.total.latency),
                    service_time_us: at(&r.total.service),
                }
            })
            .collect(),
    }
}

/// The rate the run is judged against: `--rate`, or with a ramp its mean over the sending
/// (what the schedule offered in `send_phase`, over `send_phase`).
fn target_rate(cfg: &Config, send_phase: Duration) -> f64 {
    match cfg.ramp.is_some() || cfg.stages.is_some() {
        true if cfg.open_loop() && !send_phase.is_zero() => {
            cfg.schedule(Arrivals::Constant).expected(send_phase)
                / send_phase.as_secs_f64()
                / cfg.part.of as f64
        }
        _ => cfg.own_rate(),
    }
}

/// Where the JSON summary goes, opened before the run.
enum JsonOut {
    Stdout,
    File(std::path::PathBuf, std::fs::File),
}

/// Opens `--json`'s file for writing (created if missing, emptied only when the summary is
/// written), so an unwritable path stops the run before it starts.
fn open_json(cfg: &Config) -> Result<Option<JsonOut>, LoadError> {
    let Some(path) = &cfg.json else {
        return Ok(None);
    };
    if path.as_os_str() == "-" {
        return Ok(Some(JsonOut::Stdout));
    }
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| LoadError::Output {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
    Ok(Some(JsonOut::File(path.clone(), file)))
}

/// How the run ended, and what is left to write.
struct Ending {
    interrupted: bool,
    output_closed: bool,
    json: Option<JsonOut>,
}

fn finish(
    cfg: &Config,
    mut summary: RunSummary,
    ends: Ending,
    out: &mut dyn Write,
) -> Result<Report, LoadError> {
    let verdicts: Vec<Verdict> = cfg.slo.iter().map(|o| o.judge(&summary)).collect();
    summary.slo.clone_from(&verdicts);
    if !ends.output_closed {
        if cfg.final_report {
            // The report ends with the verdicts.
            let _ = write!(out, "{}", text::final_report(&summary, cfg.unit));
        } else {
            for v in &verdicts {
                let _ = writeln!(out, "{v}");
            }
        }
        let _ = out.flush();
    }
    if let Some(json) = ends.json {
        write_json(json, &summary)?;
    }
    Ok(Report {
        summary,
        verdicts,
        interrupted: ends.interrupted,
        output_closed: ends.output_closed,
    })
}

fn write_json(json: JsonOut, summary: &RunSummary) -> Result<(), LoadError> {
    use std::io::Seek as _;
    let text = serde_json::to_string_pretty(summary).expect("summaries always serialize") + "\n";
    match json {
        // A closed stdout is the reader's choice (`| head`), not an error.
        JsonOut::Stdout => {
            let _ = std::io::stdout().write_all(text.as_bytes());
            Ok(())
        }
        JsonOut::File(path, mut file) => file
            .set_len(0)
            .and_then(|_| file.rewind())
            .and_then(|_| file.write_all(text.as_bytes()))
            .map_err(|e| LoadError::Output {
                path: path.display().to_string(),
                reason: e.to_string(),
            }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Target;

    #[test]
    fn local_targets_leave_half_the_cores_to_the_server() {
        let local = [Target::parse("http://127.0.0.1:9/").unwrap()];
        assert_eq!(default_threads(&local, 2), 1);
        assert_eq!(default_threads(&local, 8), 4);
        assert_eq!(default_threads(&local, 1), 1);
        let mut remote = Target::parse("http://127.0.0.1:9/").unwrap();
        remote.addr = "192.0.2.1:80".parse().unwrap(); // never dialled
        assert_eq!(default_threads(&[remote.clone()], 2), 2);
        assert_eq!(default_threads(&[local[0].clone(), remote], 8), 8);
    }
}
