//! `tailguard proxy`: a YAML file (`--config`) or the flags of the simple case, parsed into
//! [`tailguard_proxy::config::Config`], then [`tailguard_proxy::run`].

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use tailguard_proxy::config::{
    Config, Discovery, Entry, H1Server, H1Upstream, ServiceConfig, TlsConfig, UpstreamProtocol,
};
use tailguard_proxy::Source;

/// Arguments of `tailguard proxy`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Defaults (each a key in the file; docs/proxy.md):
  balancer      P2C peak EWMA (decay 10 s, default round trip 30 ms), which also prices an
                endpoint's silence (pendingAge): a backend that stops answering costs more at once
  retries       GET, HEAD, OPTIONS, TRACE (and gRPC UNAVAILABLE) failures, under a 20% + 10/s
                budget, at most 3 per request, on another endpoint
  rescue        a request still waiting at an endpoint that has answered nothing for the p99 of
                attempts (at most 10x the typical endpoint's mean) and for 10x its own mean gets a
                backup elsewhere, charged to the retry budget (rescueStalled; --no-rescue)
  accrual       5 failures in a row take an endpoint out, back off 5 s to 300 s
  pushback      a 429/503 Retry-After keeps its endpoint out, at most 10 s (pushbackMaxMs), at
                most half the endpoints; gRPC's grpc-retry-pushback-ms delays or stops a retry
  penalty       a failure costs the load estimate at least 1 s (failurePenaltyMs)
  off           attempt and total timeouts, hedging, outlier ejection, health checks, slow start

Examples:
  tailguard proxy --listen 127.0.0.1:4140 --upstream 127.0.0.1:9001,127.0.0.1:9002 --balancer ewma
  tailguard proxy --config proxy.yaml        (SIGHUP reloads it; SIGTERM drains and exits)")]
pub struct Args {
    /// A configuration file (Linkerd-1-style keys; see docs/proxy.md).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["upstream", "balancer", "listen", "admin", "no_admin", "attempt_timeout", "timeout", "no_retries", "no_accrual", "no_rescue", "tls_cert", "tls_key", "max_connections_per_endpoint", "protocol", "connect_timeout", "h1_upstream", "h1_server"])]
    config: Option<PathBuf>,
    /// Where to listen (HTTP/1.1 and h2c on one port; with --tls-cert, HTTP/1.1 and h2 over TLS).
    #[arg(long, default_value = "127.0.0.1:4140")]
    listen: SocketAddr,
    /// Upstreams, IP:PORT or HOST:PORT (every address the name resolves to, resolved again
    /// every 5 s), comma separated.
    #[arg(long, value_delimiter = ',', required_unless_present = "config", value_parser = Entry::parse)]
    upstream: Vec<Entry>,
    /// roundRobin, random, p2c (least loaded), ewma (P2C peak EWMA, pricing an endpoint's
    /// silence), heap, bestOf, fullScan, aperture, prequal (probing, after Google's Prequal).
    #[arg(long, default_value = "ewma")]
    balancer: String,
    /// The admin server (metrics, ready, live, endpoints).
    #[arg(long, default_value = "127.0.0.1:9990")]
    admin: SocketAddr,
    /// Run without the admin server.
    #[arg(long)]
    no_admin: bool,
    /// Per-attempt timeout, e.g. 1s.
    #[arg(long, value_parser = tailguard_text::duration::parse_duration)]
    attempt_timeout: Option<Duration>,
    /// How long a new upstream connection may take to establish.
    #[arg(long, default_value = "1s", value_parser = tailguard_text::duration::parse_duration)]
    connect_timeout: Duration,
    /// Total timeout per request, e.g. 3s.
    #[arg(long, value_parser = tailguard_text::duration::parse_duration)]
    timeout: Option<Duration>,
    /// Do not retry (by default failed reads are retried under a 20% + 10/s budget).
    #[arg(long)]
    no_retries: bool,
    /// No failure accrual (by default: 5 failures in a row, backoff 5 s to 300 s).
    #[arg(long)]
    no_accrual: bool,
    /// Do not rescue requests waiting at a stalled endpoint (by default a GET, HEAD, OPTIONS or
    /// TRACE whose endpoint has answered nothing for the p99 of attempts (at most 10 times the
    /// typical endpoint's mean) and for 10 times its own mean gets a backup elsewhere, charged
    /// to the retry budget; --no-retries turns it off too).
    #[arg(long)]
    no_rescue: bool,
    /// Serve TLS (HTTP/1.1 and h2 by ALPN) with this PEM certificate chain.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Connections per upstream endpoint at most; requests beyond wait up to 1 s for one,
    /// then get 503.
    #[arg(long, value_name = "N")]
    max_connections_per_endpoint: Option<usize>,
    /// HTTP version to the upstreams: auto (the client's: HTTP/2 and gRPC over h2c, HTTP/1.1
    /// over HTTP/1.1), http1 or h2.
    #[arg(long, default_value = "auto", value_parser = parse_protocol)]
    protocol: UpstreamProtocol,
    /// The HTTP/1.1 client to the upstreams: lean (tailguard's own, on httparse, no task per
    /// connection) or hyper (hyper's client connection, the reference it is tested against).
    #[arg(long, default_value = "lean", value_parser = parse_h1_upstream)]
    h1_upstream: H1Upstream,
    /// The HTTP/1.1 server to the clients: lean (tailguard's own for the common request
    /// shapes on cleartext connections, handing anything else to hyper's) or hyper (hyper's
    /// server connection alone, the reference the lean one is tested against).
    #[arg(long, default_value = "lean", value_parser = parse_h1_server)]
    h1_server: H1Server,
    /// Serving threads (1 to 1024), each with its own listener on the address (SO_REUSEPORT),
    /// runtime and upstream connections.
    #[arg(long, default_value_t = 1, value_parser = super::parse_threads)]
    threads: usize,
}

/// Runs `tailguard proxy`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let source = match &args.config {
        Some(path) => Source::File(path.clone()),
        None => Source::Fixed(Box::new(from_flags(&args)?)),
    };
    tailguard_proxy::run(source, args.threads)?;
    Ok(ExitCode::SUCCESS)
}

fn parse_protocol(s: &str) -> Result<UpstreamProtocol, String> {
    s.parse()
}

fn parse_h1_upstream(s: &str) -> Result<H1Upstream, String> {
    match s {
        "lean" => Ok(H1Upstream::Lean),
        "hyper" => Ok(H1Upstream::Hyper),
        other => Err(format!("{other:?}: expected lean or hyper")),
    }
}

fn parse_h1_server(s: &str) -> Result<H1Server, String> {
    match s {
        "lean" => Ok(H1Server::Lean),
        "hyper" => Ok(H1Server::Hyper),
        other => Err(format!("{other:?}: expected lean or hyper")),
    }
}

fn from_flags(args: &Args) -> anyhow::Result<Config> {
    let mut service = ServiceConfig::new("default", Vec::new());
    service.discovery = Discovery::of_entries(args.upstream.clone());
    service.arm.policy = tailguard_proxy::yaml::balancer_kind(&args.balancer)?;
    service.arm.timeouts.attempt = args.attempt_timeout;
    service.arm.timeouts.total = args.timeout;
    if args.no_retries {
        service.arm.retries = None;
    }
    if args.no_accrual {
        service.arm.accrual = None;
    }
    if args.no_rescue {
        service.arm.rescue = false;
    }
    service.pool.max_per_endpoint = args.max_connections_per_endpoint;
    service.protocol = args.protocol;
    service.pool.connect_timeout = args.connect_timeout;
    service.pool.h1 = args.h1_upstream;
    anyhow::ensure!(
        !args.connect_timeout.is_zero(),
        "--connect-timeout must be above zero"
    );
    let mut config = Config::new(args.listen, vec![service]);
    if let (Some(cert), Some(key)) = (&args.tls_cert, &args.tls_key) {
        config.tls = Some(TlsConfig {
            cert: cert.clone(),
            key: key.clone(),
        });
    }
    config.admin = (!args.no_admin).then_some(args.admin);
    config.limits.h1_server = args.h1_server;
    config.validate()?;
    Ok(config)
}
