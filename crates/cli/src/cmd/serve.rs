//! `tailguard serve`: flags to [`tailguard_serve::ServeOptions`], then [`tailguard_serve::run`].
//!
//! Either `--fleet NAME|FILE` or the single-backend behaviour flags; every value is parsed
//! here, before anything listens, so a bad flag or fleet file exits non-zero at once.

use std::net::SocketAddr;
use std::process::ExitCode;
use tailguard_serve::fleet::{BackendSpec, Body, Failure, Fleet, LatencyDist, Ratio, Schedule};

/// Arguments of `tailguard serve`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  tailguard serve --latency 50ms --error-rate 10%
  tailguard serve --latency '{normal: {mean: 167ms, sd: 5ms, max: 200ms}}' --fault 'every 10s pause 5s'
  tailguard serve --fleet add-steps          (built-ins: add-steps, slow-middle, echo, gc-pause, stall)
  tailguard serve --fleet my-fleet.yaml --listen 127.0.0.1:8000 --control 127.0.0.1:8999")]
pub struct Args {
    /// A fleet file, or a built-in fleet name. Without it, one backend from the flags below.
    #[arg(long, value_name = "NAME|FILE", conflicts_with_all = ["name", "latency", "error_rate", "error_status", "close_rate", "reset_rate", "fault", "body"])]
    fleet: Option<String>,
    /// Address of the first backend; the others take the next ports (port 0: any free port).
    #[arg(long, default_value = "127.0.0.1:9000")]
    listen: SocketAddr,
    /// Address of the control and metrics endpoint [default: 127.0.0.1:9900, or any free port
    /// when another serve holds it; the address is printed at start].
    #[arg(long)]
    control: Option<SocketAddr>,
    /// Run without a control endpoint.
    #[arg(long, conflicts_with = "control")]
    no_control: bool,
    /// Seed for every backend's RNG (default: the fleet file's, else 0).
    #[arg(long)]
    seed: Option<u64>,
    /// Name of the single backend.
    #[arg(long, default_value = "backend")]
    name: String,
    /// Latency: a duration (`50ms`) or a fleet-file distribution (`{uniform: {min: 1ms, max: 5ms}}`).
    #[arg(long, default_value = "0s", value_name = "DIST")]
    latency: LatencyDist,
    /// Probability of an error status: a fraction (0.1) or a percentage (10%).
    #[arg(long, default_value = "0", value_name = "RATIO")]
    error_rate: Ratio,
    /// The error status.
    #[arg(long, default_value_t = 500, value_name = "STATUS")]
    error_status: u16,
    /// Probability of closing the connection without a response.
    #[arg(long, default_value = "0", value_name = "RATIO")]
    close_rate: Ratio,
    /// Probability of resetting the connection (TCP RST).
    #[arg(long, default_value = "0", value_name = "RATIO")]
    reset_rate: Ratio,
    /// A scheduled fault, e.g. 'from 15s to 45s latency x10', 'every 10s pause 5s' (repeatable).
    #[arg(long, value_name = "FAULT")]
    fault: Vec<String>,
    /// Response body: name, echo, size:BYTES or text:TEXT.
    #[arg(long, default_value = "name")]
    body: Body,
    /// Honour per-request query overrides (?delay=150ms, ?status=503:10, ?close=5, ?size=100).
    #[arg(long)]
    overrides: bool,
    /// Turn TCP_NODELAY off and write responses in two parts, to show the Nagle + delayed-ACK trap.
    #[arg(long)]
    nagle: bool,
    /// A backend with a capacity serves to the end a request whose client hung up, holding its
    /// worker (as a server that does not notice; `sim`'s `servers: {abandoned: serve}`).
    #[arg(long)]
    serve_abandoned: bool,
    /// Runtime worker threads. One is the default: a test backend shares the machine with the
    /// load generator (and the proxy under test), and on loopback one thread already answers as
    /// fast as one nginx worker (bench/serve).
    #[arg(long, default_value_t = 1, value_parser = super::parse_threads)]
    threads: usize,
}

/// Runs `tailguard serve`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut fleet = match &args.fleet {
        Some(name) => Fleet::load(name)?,
        None => Fleet::single(single_backend(&args)?, 0),
    };
    if let Some(seed) = args.seed {
        fleet.seed = seed;
    }
    let mut options = tailguard_serve::ServeOptions::new(fleet);
    options.listen = args.listen;
    options.control_fallback = args.control.is_none();
    options.control = (!args.no_control).then(|| {
        args.control
            .unwrap_or(SocketAddr::from(([127, 0, 0, 1], 9900)))
    });
    options.nagle = args.nagle;
    options.overrides = args.overrides;
    options.serve_abandoned = args.serve_abandoned;
    tailguard_serve::run(options, args.threads)?;
    Ok(ExitCode::SUCCESS)
}

fn single_backend(args: &Args) -> anyhow::Result<BackendSpec> {
    let failure = Failure::new(
        args.error_rate,
        args.error_status,
        args.close_rate,
        args.reset_rate,
    )
    .map_err(|e| anyhow::anyhow!("--error-rate/--close-rate/--reset-rate/--error-status: {e}"))?;
    let schedule = Schedule::parse(&args.fault).map_err(|e| anyhow::anyhow!("--fault: {e}"))?;
    let mut spec = BackendSpec::new(args.name.clone(), args.latency.clone());
    spec.failure = failure;
    spec.schedule = schedule;
    spec.body = args.body.clone();
    Ok(spec)
}
