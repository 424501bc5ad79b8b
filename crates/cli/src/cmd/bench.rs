//! `tailguard bench`: run a scenario live on loopback and print the side-by-side table.

use anyhow::Context;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tailguard_bench::{BenchReport, Console, Options};
use tailguard_report::Unit;

const AFTER_HELP: &str = "\
Scenarios: add-steps (seed 000), slow-middle (seed 002), overhead (seed 003), nagle (seed 001),
gc-pause (seed 004), herd (sim's scale scenario, beyond one machine live), or a scenario file in
the `tailguard sim` format.
Each arm runs in turn on a fresh fleet on 127.0.0.1 (--together: all at once, each on its own
fleet); an arm that is plain round robin runs in the load generator itself (the baseline), any other
arm through a tailguard proxy. While it runs, a live page on 127.0.0.1:9902 shows every arm side by
side (--no-live to skip).
Example: tailguard bench add-steps --duration 30s --html add-steps.html
Exit codes: 0 done; 2 bad input; 130 interrupted by Ctrl-C (what was measured is reported).";

/// Arguments of `tailguard bench`.
#[derive(Debug, clap::Args)]
#[command(after_help = AFTER_HELP)]
pub struct Args {
    /// A built-in scenario name or a scenario file (YAML, the `tailguard sim` format).
    #[arg(value_name = "SCENARIO", required_unless_present = "list")]
    name: Option<String>,
    /// List the built-in scenarios and exit.
    #[arg(long)]
    list: bool,
    /// Run these arms (comma-separated), or `all`; default: the seed's comparison.
    #[arg(long, value_delimiter = ',')]
    arms: Vec<String>,
    /// Load length per arm (per phase and rate for overhead and nagle), e.g. 30s.
    #[arg(short, long, value_parser = tailguard_text::duration::parse_duration)]
    duration: Option<Duration>,
    /// Interval report period (default 5s; 1s for gc-pause).
    #[arg(short, long, value_parser = tailguard_text::duration::parse_duration)]
    interval: Option<Duration>,
    /// nagle: the rates to try, comma-separated (default 10,100,1000,10000).
    #[arg(long, value_delimiter = ',')]
    rates: Vec<f64>,
    /// overhead: interleaved rounds per phase; each path's median run is reported [default: 3].
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=100))]
    rounds: Option<u16>,
    /// overhead: leave HAProxy and nginx out even when installed.
    #[arg(long)]
    no_peers: bool,
    /// overhead: gRPC ping calls on one HTTP/2 connection instead of HTTP/1.1 requests (seed 003's
    /// gRPC half).
    #[arg(long)]
    grpc: bool,
    /// overhead: run the tailguard proxy in this process instead of a child process.
    #[arg(long)]
    in_process: bool,
    /// overhead: run the proxy under test on a CPU of its own (the last this process may use)
    /// and the load generator and backend on the others, so the scheduler cannot put them on
    /// the proxy's CPU; needs two CPUs.
    #[arg(long)]
    pin: bool,
    /// Do not run the simulator's prediction next to the live figures.
    #[arg(long)]
    no_sim: bool,
    /// Run a balancer scenario's arms at the same time, each on its own fleet (as seed 000's
    /// two clusters ran), instead of one after another.
    #[arg(long)]
    together: bool,
    #[command(flatten)]
    live: LiveArgs,
    /// Latency unit in reports: auto, us, ms or s.
    #[arg(long, default_value = "auto")]
    unit: Unit,
    /// Write the results as JSON (`tailguard report` reads it back).
    #[arg(long, value_name = "PATH")]
    json: Option<PathBuf>,
    /// Write a self-contained HTML report with charts.
    #[arg(long, value_name = "PATH")]
    html: Option<PathBuf>,
}

/// Where the live page goes (shared by `bench` and `demo`).
#[derive(Debug, clap::Args)]
pub struct LiveArgs {
    /// Do not serve the live page.
    #[arg(long, conflicts_with = "live_addr")]
    no_live: bool,
    /// Serve the live page here [default: 127.0.0.1:9902, or any free port when that is taken].
    #[arg(long, value_name = "ADDR")]
    live_addr: Option<std::net::SocketAddr>,
}

impl LiveArgs {
    pub(crate) fn addr(&self) -> Option<std::net::SocketAddr> {
        (!self.no_live).then(|| self.live_addr.unwrap_or(tailguard_bench::LIVE_ADDR))
    }

    pub(crate) fn fallback(&self) -> bool {
        self.live_addr.is_none()
    }
}

/// Runs `tailguard bench`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.list {
        for (name, what) in tailguard_bench::BUILTINS {
            super::out!("{name:12} {what}\n");
        }
        return Ok(ExitCode::SUCCESS);
    }
    let name = args.name.clone().unwrap_or_default();
    if args.together && matches!(name.as_str(), "overhead" | "nagle") {
        anyhow::bail!(
            "--together applies to balancer scenarios; overhead and nagle compare paths one at a \
             time so each measures alone"
        );
    }
    if args.pin && name != "overhead" {
        anyhow::bail!("--pin applies to the overhead scenario only");
    }
    if args.grpc && name != "overhead" {
        anyhow::bail!("--grpc applies to the overhead scenario only (nagle runs gRPC by itself)");
    }
    for path in [&args.json, &args.html].into_iter().flatten() {
        super::check_writable(path)?;
    }
    let opts = Options {
        arms: (!args.arms.is_empty()).then(|| args.arms.clone()),
        duration: args.duration,
        interval: args.interval,
        unit: args.unit,
        predict: !args.no_sim,
        progress: true,
        proxy_exe: if args.in_process {
            None
        } else {
            std::env::current_exe().ok()
        },
        peers: !args.no_peers,
        grpc: args.grpc,
        rates: (!args.rates.is_empty()).then(|| args.rates.clone()),
        rounds: args.rounds.map(usize::from),
        pin: args.pin,
        together: args.together,
        live: args.live.addr(),
        live_fallback: args.live.fallback(),
        stop: Arc::new(AtomicBool::new(false)),
    };
    let report = execute(&name, &opts)?;
    let path = write_outputs(&report, args.json.as_deref(), args.html.as_deref())?;
    if let Some(p) = path {
        super::out!("# HTML report: {}\n", p.display());
    }
    Ok(exit_code(&report))
}

/// Runs a scenario with Ctrl-C watched, prints the table, returns the report.
pub(crate) fn execute(name: &str, opts: &Options) -> anyhow::Result<BenchReport> {
    watch_ctrl_c(opts.stop.clone());
    let console = Console::new(Box::new(std::io::stdout()), opts.progress);
    let report = tailguard_bench::run(name, opts, &console)?;
    let mut out = std::io::stdout();
    let _ = writeln!(out);
    let _ = write!(out, "{}", tailguard_bench::table::text(&report, opts.unit));
    Ok(report)
}

/// Writes `--json` and `--html`; returns the HTML path for the caller to print.
pub(crate) fn write_outputs(
    report: &BenchReport,
    json: Option<&Path>,
    html: Option<&Path>,
) -> anyhow::Result<Option<PathBuf>> {
    if let Some(path) = json {
        let text = serde_json::to_string_pretty(report).context("serializing the report")?;
        std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))?;
    }
    if let Some(path) = html {
        std::fs::write(path, tailguard_bench::html::html(report))
            .with_context(|| format!("cannot write {}", path.display()))?;
        return Ok(Some(path.to_owned()));
    }
    Ok(None)
}

pub(crate) fn exit_code(report: &BenchReport) -> ExitCode {
    if report.interrupted {
        ExitCode::from(130)
    } else {
        ExitCode::SUCCESS
    }
}

/// Sets `stop` on Ctrl-C, so no further arm starts; the load generator running at that moment
/// sees the same signal and finishes its requests in flight.
fn watch_ctrl_c(stop: Arc<AtomicBool>) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build();
    if let Ok(rt) = rt {
        std::thread::spawn(move || {
            rt.block_on(async {
                while tokio::signal::ctrl_c().await.is_ok() {
                    stop.store(true, Ordering::Relaxed);
                }
            });
        });
    }
}
