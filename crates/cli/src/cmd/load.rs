//! `tailguard load`: parse flags into a [`tailguard_load::Config`] and run it.

use super::{EXIT_FAILED, EXIT_PIPE, EXIT_SLO};
use anyhow::{bail, Context};
use bytes::Bytes;
use http::{HeaderName, HeaderValue, Method};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use tailguard_load::{slo, target, Config, LoadError, Protocol, Target};
use tailguard_pacing::{Arrivals, Ramp};
use tailguard_record::Classifier;
use tailguard_report::Unit;

/// Arguments of `tailguard load`.
#[derive(Debug, clap::Args)]
#[command(after_help = EXIT_CODES)]
pub struct Args {
    /// Target URLs (http:// or https://), or @FILE with one URL per line; requests go to them in turn.
    #[arg(required_unless_present_any = ["targets", "replay"], value_name = "URL")]
    urls: Vec<String>,
    /// A file of requests, each with its own method, headers and body, in vegeta's formats:
    /// http (`METHOD URL`, header lines, `@BODY-FILE`, a blank line between requests) or JSON
    /// lines (`{"method", "url", "header": {"K": ["v"]}, "body": BASE64, "name", "weight"}`).
    /// Requests go in turn, or by weight; -H adds to each.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["urls", "method", "data", "grpc"])]
    targets: Option<PathBuf>,
    /// Replay recorded traffic: JSON lines `{"offset_ms": 12.5, "method", "url", "header": {"K":
    /// ["v"]}, "body": BASE64}`, each request sent at its offset (offsets must not decrease),
    /// latency measured from it; the file is streamed, in bounded memory.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["urls", "targets", "rate", "duration", "stages", "ramp_from", "sweep", "shard", "method", "data", "grpc", "closed_interval"])]
    replay: Option<PathBuf>,
    /// --replay at this speed: 2 sends twice as fast (0.001 to 1000).
    #[arg(long, default_value = "1", value_parser = tailguard_load::replay::parse_speed, requires = "replay")]
    speed: f64,
    /// The --targets file's format: auto (JSON when it starts with `{`), http or json.
    #[arg(
        long,
        value_name = "FORMAT",
        default_value = "auto",
        requires = "targets"
    )]
    targets_format: tailguard_load::requests::Format,
    /// TOTAL requests per second, across all connections (not per worker, unlike slow_cooker's -qps); 0 = closed loop, as fast as possible.
    #[arg(short, long, default_value_t = 100.0)]
    rate: f64,
    /// Maximum requests in flight; also the HTTP/1.1 connections per origin (scheme, address, TLS name).
    #[arg(short, long, default_value_t = 10)]
    concurrency: usize,
    /// Closed loop (--rate 0) only: each of the --concurrency workers sends at most once per this interval (slow_cooker's per-worker ticker; a slow response delays the next send).
    #[arg(long, value_parser = tailguard_text::duration::parse_duration)]
    closed_interval: Option<Duration>,
    /// How long to send (e.g. 30s, 5m). Default 10s unless --total-requests is given.
    #[arg(short, long, value_parser = tailguard_text::duration::parse_duration)]
    duration: Option<Duration>,
    /// Send exactly this many requests, then stop.
    #[arg(short = 'n', long)]
    total_requests: Option<u64>,
    /// Interval report period.
    #[arg(short, long, default_value = "10s", value_parser = tailguard_text::duration::parse_duration)]
    interval: Duration,
    /// Arrival process: constant (evenly spaced) or poisson.
    #[arg(long, default_value = "constant")]
    arrivals: Arrivals,
    /// Open loop: start at RATE req/s and climb linearly to --rate over --ramp-over, then hold
    /// (as vegeta's linear pacer; a RATE above --rate descends).
    #[arg(long, value_name = "RATE")]
    ramp_from: Option<f64>,
    /// How long the --ramp-from climb lasts [default: the whole --duration; needed when only
    /// --total-requests bounds the run].
    #[arg(long, requires = "ramp_from", value_name = "DURATION", value_parser = tailguard_text::duration::parse_duration)]
    ramp_over: Option<Duration>,
    /// Open loop whose rate follows stages, k6's ramping arrival rate:
    /// `30s:0->1000,2m:1000,30s:1000->0` (DURATION:RATE holds it, DURATION:FROM->TO changes it
    /// linearly, 0 allowed); the run lasts their total, and each interval reports the rate it
    /// was offered.
    #[arg(long, value_name = "STAGES", conflicts_with_all = ["rate", "duration", "total_requests", "sweep", "ramp_from"])]
    stages: Option<tailguard_pacing::Stages>,
    /// Seed for Poisson arrivals.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Open loop: send part I (from 0) of N of the --rate schedule, so N generators started
    /// with the same --rate, --arrivals, --seed and --duration send together exactly the
    /// schedule one would (in a Kubernetes Indexed Job: --shard $(JOB_COMPLETION_INDEX)/N).
    #[arg(long, value_name = "I/N")]
    shard: Option<tailguard_load::Part>,
    /// Start the schedule at this wall-clock time, RFC 3339 in UTC (2026-11-26T12:00:00Z) or @UNIX
    /// seconds, so generators on several machines send their parts together (and their
    /// intervals line up for `tailguard merge`). Up to a day ahead; a time past is refused.
    #[arg(long, value_name = "TIME", value_parser = parse_start_at)]
    start_at: Option<std::time::SystemTime>,
    /// HTTP method.
    #[arg(short = 'X', long, default_value = "GET")]
    method: String,
    /// Request header 'Name: value' (repeatable); 'Host: x' sets the Host header (HTTP/1.1) or
    /// :authority (HTTP/2), as in curl.
    #[arg(short = 'H', long = "header", value_name = "NAME: VALUE")]
    headers: Vec<String>,
    /// Request body, or @FILE to read it from a file; with --grpc, the request message as JSON
    /// (a client or bidirectional stream: an array, one element per message).
    #[arg(long)]
    data: Option<String>,
    /// Make gRPC calls (HTTP/2: h2c on http://, ALPN on https://) instead of HTTP requests;
    /// outcomes are counted by gRPC status, one request per call.
    #[arg(long, conflicts_with_all = ["http1", "method"])]
    grpc: bool,
    /// The gRPC method, package.Service/Method [default: grpc.health.v1.Health/Check], unary or
    /// streaming. Built in: grpc.health.v1.Health/Check (alias health),
    /// tailguard.serve.v1.Ping/{Ping,Stream,Collect,Echo} (ping: Ping), fgrpc.PingServer/Ping
    /// (fortio); others from --proto, or without --proto from the server's reflection service.
    #[arg(long, requires = "grpc", value_name = "METHOD")]
    call: Option<String>,
    /// Messages each client or bidirectional streaming call sends, cycling through --data's
    /// array [default: each message of --data once].
    #[arg(long, requires = "grpc", value_name = "N")]
    stream_messages: Option<u32>,
    /// Open loop: send a request that failed (not a good answer) once more, this long after it
    /// ended, as a client that retries would (`sim`'s `retry_after`); a second send that fails
    /// is not sent again. Shows how retries turn an overload into a lasting one.
    #[arg(long, value_name = "DURATION", value_parser = tailguard_text::duration::parse_duration)]
    retry_after: Option<Duration>,
    /// The pause between two messages of a client or bidirectional streaming call.
    #[arg(long, requires = "grpc", value_name = "DURATION", value_parser = tailguard_text::duration::parse_duration)]
    stream_interval: Option<Duration>,
    /// A .proto file declaring the --call method, compiled at start (repeatable).
    #[arg(long, requires = "grpc", value_name = "FILE")]
    proto: Vec<PathBuf>,
    /// A directory the --proto files' imports are looked up in (repeatable; each file's own
    /// directory is always searched).
    #[arg(long, requires = "proto", value_name = "DIR")]
    import_path: Vec<PathBuf>,
    /// Per-request timeout, from the actual send.
    #[arg(long, default_value = "10s", value_parser = tailguard_text::duration::parse_duration)]
    timeout: Duration,
    /// Host header (HTTP/1.1) or :authority (HTTP/2) to send instead of the URL's; wins over
    /// -H 'Host: ...'.
    #[arg(long)]
    host: Option<String>,
    /// Open a new connection for every request.
    #[arg(long)]
    no_reuse: bool,
    /// Speak HTTP/1.1 only (also over TLS).
    #[arg(long, conflicts_with = "h2")]
    http1: bool,
    /// Speak HTTP/2: prior knowledge (h2c) on http://, required via ALPN on https://.
    #[arg(long)]
    h2: bool,
    /// Open loop: poll instead of sleeping for this long before each due time (e.g. 120us),
    /// so the machine's wake-up latency stays out of send lag and latency; costs CPU (a whole
    /// core at 10,000 req/s per thread).
    #[arg(long, default_value = "0s", value_parser = tailguard_text::duration::parse_duration)]
    busy_poll: Duration,
    /// The HTTP/1.1 client on plain TCP: `lean` (tailguard's own, on httparse) or `hyper`
    /// (for comparison; always used over TLS).
    #[arg(long, default_value = "lean", value_parser = ["lean", "hyper"])]
    h1_client: String,
    /// HTTP/2 connections per origin (streams are spread over them).
    #[arg(long, default_value_t = 1)]
    h2_connections: usize,
    /// Accept any TLS certificate (self-signed test servers).
    #[arg(long)]
    insecure: bool,
    /// Skip the pre-flight request (one uncounted request per target before the clock starts,
    /// which stops a run that cannot succeed).
    #[arg(long)]
    no_preflight: bool,
    /// Count 4xx responses as bad (default: good, as slow_cooker does).
    #[arg(long)]
    four_xx_bad: bool,
    /// The statuses that count as good, and no other: `2xx,304`, `200-204`, gRPC names (`OK,NOT_FOUND`).
    /// Without it 1xx-4xx are good (and gRPC statuses as their HTTP mapping); the pre-flight
    /// then stops on a 4xx.
    #[arg(long, value_name = "STATUSES", conflicts_with = "four_xx_bad")]
    expect_status: Option<tailguard_record::StatusSet>,
    /// An answer whose body's SHA-256 is not HEX (64 hex digits, as sha256sum prints) counts as bad (slow_cooker's checksum).
    #[arg(long, value_name = "HEX", value_parser = tailguard_load::check::parse_sha256)]
    expect_body_sha256: Option<[u8; 32]>,
    /// An answer whose body does not contain TEXT (up to 64 KiB) counts as bad.
    #[arg(long, value_name = "TEXT", value_parser = parse_contains)]
    expect_body_contains: Option<Bytes>,
    /// Latency unit in reports: auto, us, ms or s.
    #[arg(long, default_value = "auto")]
    unit: Unit,
    /// Runtime threads (default 0: one per core, or half the cores when every target is on this
    /// machine and its server needs the rest; at most 1024).
    #[arg(long, default_value_t = 0, value_parser = super::parse_threads_or_auto)]
    threads: usize,
    /// Write the run summary as JSON to PATH (- for stdout; the text report then goes to stderr).
    #[arg(long, value_name = "PATH")]
    json: Option<PathBuf>,
    /// Write an HdrHistogram interval log (latency and service time per interval) to PATH.
    #[arg(long, value_name = "PATH")]
    hdr_log: Option<PathBuf>,
    /// Write every request's record to PATH as NDJSON (due and send times, latency, service
    /// time, status or error, target), through a bounded writer that drops and counts what it
    /// cannot keep up with; `tailguard report PATH` reads it back.
    #[arg(long, value_name = "PATH")]
    output: Option<PathBuf>,
    /// Write the HTML report of the run to PATH (what `tailguard report run.json --html` draws).
    #[arg(long, value_name = "PATH")]
    html: Option<PathBuf>,
    /// Find the knee: steps of --duration at rates from FROM to TO (e.g. 400..1200), climbing
    /// until the --slo is missed, then narrowing; reports the highest rate that met it.
    #[arg(long, value_name = "FROM..TO", value_parser = parse_sweep, conflicts_with_all = ["total_requests", "ramp_from", "shard"])]
    sweep: Option<(f64, f64)>,
    /// Rates on the sweep's climb, FROM and TO included (2 to 100).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(2..=100), requires = "sweep")]
    sweep_steps: u16,
    /// Serve Prometheus metrics of the run at ADDR (e.g. 127.0.0.1:9102).
    #[arg(long, value_name = "ADDR")]
    metrics_addr: Option<SocketAddr>,
    /// The percentiles the report shows (text, JSON, HTML) instead of its default ones, e.g.
    /// 50,90,98,99.9 (each above 0 and below 100, at most 20); --slo may then name them (p98).
    #[arg(long, value_name = "LIST", value_parser = parse_percentiles)]
    percentiles: Option<PercentileList>,
    /// Objectives checked at the end, e.g. 'p99<=5ms,p999<=20ms,success>=99.9%'; exit 1 if missed.
    #[arg(long)]
    slo: Option<String>,
    /// Print only the final report.
    #[arg(short, long)]
    quiet: bool,
}

const EXIT_CODES: &str =
    "Exit status: 0 done (every --slo objective met); 1 an --slo objective missed; \
2 bad input (flag, URL, file); 3 the target cannot be served (the pre-flight request failed, \
or every request failed); 130 interrupted by Ctrl-C; 141 the report's reader went away \
(a closed pipe: sending stops quietly).";

/// A run that ended before its report: the pre-flight failed (exit 3), Ctrl-C came first
/// (exit 130), or bad input (an error: exit 2).
fn stopped_early(err: LoadError) -> anyhow::Result<ExitCode> {
    match err {
        LoadError::Preflight { .. } => {
            super::say(&format!("error: {err}"));
            Ok(ExitCode::from(EXIT_FAILED))
        }
        LoadError::Interrupted => {
            super::say(&err.to_string());
            Ok(ExitCode::from(130))
        }
        err => Err(err.into()),
    }
}

/// Opens `path` for writing (created, not emptied) so an unwritable output is found before
/// anything is sent.
fn writable(path: &std::path::Path) -> anyhow::Result<()> {
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

/// `--percentiles`' list.
#[derive(Clone, Debug)]
struct PercentileList(Vec<f64>);

/// `--percentiles 50,90,98,99.9`: 1 to 20 percentiles, each above 0 and below 100.
fn parse_percentiles(s: &str) -> Result<PercentileList, String> {
    let list: Vec<f64> = s
        .split(',')
        .map(|p| match p.trim().trim_start_matches('p').parse::<f64>() {
            Ok(v) if v > 0.0 && v < 100.0 => Ok(v),
            _ => Err(format!("{p:?} is not a percentile above 0 and below 100")),
        })
        .collect::<Result<_, _>>()?;
    if list.len() > 20 {
        return Err(format!("at most 20 percentiles, got {}", list.len()));
    }
    Ok(PercentileList(list))
}

/// `--expect-body-contains`: text of 1 byte to 64 KiB.
fn parse_contains(s: &str) -> Result<Bytes, String> {
    match s.len() {
        0 => Err("give the text the body must contain".into()),
        n if n > tailguard_load::check::MAX_CONTAINS_BYTES => Err(format!(
            "at most {} bytes, got {n}",
            tailguard_load::check::MAX_CONTAINS_BYTES
        )),
        _ => Ok(Bytes::copy_from_slice(s.as_bytes())),
    }
}

/// `400..1200`: two rates, the first the lower.
fn parse_sweep(s: &str) -> Result<(f64, f64), String> {
    let (a, b) = s
        .split_once("..")
        .ok_or_else(|| format!("{s:?} is not FROM..TO (e.g. 400..1200)"))?;
    let rate = |v: &str| -> Result<f64, String> {
        let r: f64 = v
            .trim()
            .parse()
            .map_err(|_| format!("{v:?} is not a rate"))?;
        if r > 0.0 && tailguard_pacing::rate_in_range(r) {
            Ok(r)
        } else {
            Err(format!("{v:?} is not a rate from 0.001 to 10,000,000"))
        }
    };
    let (from, to) = (rate(a)?, rate(b)?);
    if from >= to {
        return Err(format!("{s:?}: FROM must be below TO"));
    }
    Ok((from, to))
}

/// `tailguard load --sweep`: the knee search (`tailguard_load::sweep`).
fn sweep(args: Args, (from, to): (f64, f64)) -> anyhow::Result<ExitCode> {
    use tailguard_load::sweep::{self, Knee, Sweep};
    if args.slo.is_none() {
        bail!("--sweep needs --slo: the objective whose highest met rate is the knee");
    }
    let (json, html) = (args.json.clone(), args.html.clone());
    for path in json.iter().chain(&html) {
        writable(path)?;
    }
    let plan = Sweep {
        from,
        to,
        steps: usize::from(args.sweep_steps),
    };
    let mut cfg = config(args)?;
    cfg.json = None;
    let title = format!(
        "tailguard load --sweep: {}",
        cfg.targets
            .iter()
            .map(|t| t.url.as_str())
            .collect::<Vec<_>>()
            .join(" ")
    );
    let report = match sweep::sweep(cfg, plan, &mut std::io::stdout()) {
        Ok(r) => r,
        Err(err) => return stopped_early(err),
    };
    if let Some(path) = &json {
        let text = serde_json::to_string_pretty(&report).context("serializing the sweep")? + "\n";
        std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))?;
    }
    if let Some(path) = &html {
        std::fs::write(path, sweep::html(&report, &title))
            .with_context(|| format!("cannot write {}", path.display()))?;
        super::out!("# HTML report: {}\n", path.display());
    }
    Ok(if report.interrupted {
        ExitCode::from(130)
    } else if matches!(report.knee, Knee::BelowRange { .. }) {
        super::say("no rate met the objective");
        ExitCode::from(EXIT_SLO)
    } else {
        ExitCode::SUCCESS
    })
}

/// Runs `tailguard load`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if let Some(range) = args.sweep {
        return sweep(args, range);
    }
    let json_to_stdout = args.json.as_deref().is_some_and(|p| p.as_os_str() == "-");
    let html = args.html.clone();
    // Checked before anything is sent: an unwritable path is bad input.
    if let Some(path) = &html {
        writable(path)?;
    }
    let cfg = config(args)?;
    let result = if json_to_stdout {
        tailguard_load::run(cfg, &mut std::io::stderr())
    } else {
        tailguard_load::run(cfg, &mut std::io::stdout())
    };
    let report = match result {
        Ok(report) => report,
        Err(err) => return stopped_early(err),
    };
    if let Some(path) = &html {
        let label = path
            .file_stem()
            .map_or_else(|| "load".to_owned(), |s| s.to_string_lossy().into_owned());
        let page = tailguard_bench::saved::from_load(&label, report.summary.clone());
        super::bench::write_outputs(&page, None, Some(path))?;
    }
    let totals = &report.summary.totals;
    Ok(if report.output_closed {
        // The reader went away (`| head`): what `yes | head` reports, without a word.
        ExitCode::from(EXIT_PIPE)
    } else if report.interrupted {
        ExitCode::from(130)
    } else if totals.requests > 0 && totals.good + totals.bad == 0 {
        super::say(&format!(
            "every request failed ({})",
            top_errors(&totals.errors)
        ));
        ExitCode::from(EXIT_FAILED)
    } else if !report.slo_met() {
        super::say("an objective was missed");
        ExitCode::from(EXIT_SLO)
    } else {
        ExitCode::SUCCESS
    })
}

/// The three most frequent error kinds, most frequent first: `tls=20, timeout=3`.
fn top_errors(errors: &std::collections::BTreeMap<String, u64>) -> String {
    let mut kinds: Vec<(&String, &u64)> = errors.iter().collect();
    kinds.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let top: Vec<String> = kinds
        .iter()
        .take(3)
        .map(|(k, n)| format!("{k}={n}"))
        .collect();
    top.join(", ")
}

fn config(args: Args) -> anyhow::Result<Config> {
    let targets = match &args.targets {
        _ if args.replay.is_some() => Vec::new(),
        Some(file) => tailguard_load::requests::read(file, args.targets_format)?,
        None => target::expand_args(&args.urls)?
            .iter()
            .map(|u| Target::parse(u))
            .collect::<Result<Vec<_>, _>>()?,
    };
    let mut cfg = Config::new(targets);
    set_request(&mut cfg, &args)?;
    cfg.host = args.host;
    cfg.rate = args.rate;
    cfg.arrivals = args.arrivals;
    cfg.seed = args.seed;
    cfg.concurrency = args.concurrency;
    cfg.closed_interval = args.closed_interval;
    cfg.h2_connections = args.h2_connections;
    cfg.total_requests = args.total_requests;
    cfg.duration = match (args.duration, args.total_requests) {
        (None, Some(_)) => None,
        (d, _) => Some(d.unwrap_or(Duration::from_secs(10))),
    };
    cfg.ramp = ramp(args.ramp_from, args.ramp_over.or(cfg.duration))?;
    if let Some(st) = args.stages.clone() {
        cfg.set_stages(st);
    }
    cfg.part = args.shard.unwrap_or(tailguard_load::Part::WHOLE);
    cfg.start_at = args.start_at;
    cfg.interval = args.interval;
    cfg.timeout = args.timeout;
    cfg.reuse = !args.no_reuse;
    cfg.protocol = match (args.http1, args.h2 || args.grpc) {
        (true, _) => Protocol::Http1,
        (_, true) => Protocol::Http2,
        _ => Protocol::Auto,
    };
    cfg.busy_poll = args.busy_poll;
    cfg.retry_after = args.retry_after;
    cfg.h1_client = if args.h1_client == "hyper" {
        tailguard_load::H1Client::Hyper
    } else {
        tailguard_load::H1Client::Lean
    };
    cfg.insecure = args.insecure;
    cfg.preflight = !args.no_preflight;
    cfg.classifier = Classifier {
        four_xx_bad: args.four_xx_bad,
        expect: args.expect_status,
    };
    cfg.body_checks = tailguard_load::check::BodyChecks {
        sha256: args.expect_body_sha256,
        contains: args.expect_body_contains.clone(),
    };
    cfg.unit = args.unit;
    cfg.threads = args.threads;
    cfg.json = args.json;
    cfg.hdr_log = args.hdr_log;
    cfg.output = args.output;
    cfg.replay = args.replay.map(|path| tailguard_load::replay::ReplaySpec {
        path,
        speed: args.speed,
    });
    cfg.metrics_addr = args.metrics_addr;
    cfg.slo = match &args.slo {
        Some(spec) => slo::parse(spec)?,
        None => Vec::new(),
    };
    cfg.percentiles = args.percentiles.clone().map(|p| p.0).unwrap_or_default();
    // An objective on a percentile the report does not measure would only say `no data`.
    for o in &cfg.slo {
        if let Some(p) = o.percentile() {
            if !cfg.percentiles.iter().any(|&q| (q - p).abs() < 1e-9) {
                bail!(
                    "--slo {o}: {} is not measured; add it to --percentiles",
                    tailguard_record::percentile_name(p)
                );
            }
        }
    }
    cfg.quiet = args.quiet;
    cfg.validate()?;
    Ok(cfg)
}

/// The request to send: method, headers, and the body or the gRPC call.
fn set_request(cfg: &mut Config, args: &Args) -> anyhow::Result<()> {
    cfg.method = Method::from_bytes(args.method.as_bytes())
        .with_context(|| format!("bad --method {:?}", args.method))?;
    for h in &args.headers {
        let (name, value) = parse_header(h)?;
        cfg.headers.append(name, value);
    }
    if args.grpc {
        let data = match args.data.as_deref() {
            Some(d) => Some(
                String::from_utf8(body(Some(d))?.to_vec()).context("--data is not UTF-8 JSON")?,
            ),
            None => None,
        };
        let call = args.call.as_deref();
        let reflect =
            args.proto.is_empty() && tailguard_load::grpc::needs_reflection(call).is_some();
        cfg.grpc = Some(match cfg.targets.first() {
            // Neither built in nor in a --proto file: the server says what it is.
            Some(first) if reflect => tailguard_load::reflection::resolve(
                first,
                args.insecure,
                args.timeout,
                call,
                data.as_deref(),
            )?,
            _ => tailguard_load::grpc::resolve(
                call,
                &args.proto,
                &args.import_path,
                data.as_deref(),
            )?,
        });
        cfg.stream_messages = args.stream_messages;
        cfg.stream_interval = args.stream_interval.unwrap_or_default();
    } else {
        cfg.body = body(args.data.as_deref())?;
    }
    Ok(())
}

/// `--ramp-from`'s ramp, lasting `over` (`--ramp-over`, else the run's duration).
fn ramp(from: Option<f64>, over: Option<Duration>) -> anyhow::Result<Option<Ramp>> {
    Ok(match (from, over) {
        (None, _) => None,
        (Some(from), Some(over)) => Some(Ramp { from, over }),
        (Some(_), None) => {
            bail!("--ramp-from needs --ramp-over or --duration: the ramp lasts the whole run by default")
        }
    })
}

fn parse_header(h: &str) -> anyhow::Result<(HeaderName, HeaderValue)> {
    let Some((name, value)) = h.split_once(':') else {
        bail!("bad --header {h:?}: expected 'Name: value'");
    };
    let name = HeaderName::from_bytes(name.trim().as_bytes())
        .with_context(|| format!("bad --header {h:?}: invalid header name"))?;
    let value = HeaderValue::from_str(value.trim())
        .with_context(|| format!("bad --header {h:?}: invalid header value"))?;
    Ok((name, value))
}

fn body(data: Option<&str>) -> anyhow::Result<Bytes> {
    Ok(match data {
        None => Bytes::new(),
        Some(d) => match d.strip_prefix('@') {
            Some(path) => Bytes::from(
                tailguard_load::files::read_limited(
                    std::path::Path::new(path),
                    tailguard_load::files::MAX_BODY_BYTES,
                )
                .with_context(|| format!("cannot read --data file {path:?}"))?,
            ),
            None => Bytes::from(d.to_string()),
        },
    })
}

/// `--start-at`: RFC 3339 in UTC (`2026-11-26T12:00:00Z`, fractions allowed) or `@` and
/// seconds since the Unix epoch.
fn parse_start_at(s: &str) -> Result<std::time::SystemTime, String> {
    if let Some(secs) = s.strip_prefix('@') {
        return secs
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && *v > 0.0 && *v < 1e11)
            .map(|v| std::time::UNIX_EPOCH + Duration::from_secs_f64(v))
            .ok_or_else(|| format!("{s:?}: expected @ and seconds since the Unix epoch"));
    }
    humantime::parse_rfc3339_weak(s)
        .map_err(|e| format!("{s:?}: {e}: expected RFC 3339, e.g. 2026-11-26T12:00:00Z"))
}
