//! `tailguard demo`: seed 000 live with no configuration: ten misbehaving backends, client
//! round robin against the tailguard proxy, about 30 s (25 s of load, both arms at once), then
//! the table and an HTML report.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;
use tailguard_bench::Options;
use tailguard_report::Unit;

/// Arguments of `tailguard demo`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Load length per arm (two arms).
    #[arg(short, long, default_value = "25s", value_parser = tailguard_text::duration::parse_duration)]
    duration: Duration,
    /// Where to write the HTML report (default: tailguard-demo.html in the temp directory).
    #[arg(long, value_name = "PATH")]
    html: Option<PathBuf>,
    /// Also write the results as JSON.
    #[arg(long, value_name = "PATH")]
    json: Option<PathBuf>,
    /// Run the two arms one after another instead of at the same time.
    #[arg(long)]
    one_at_a_time: bool,
    #[command(flatten)]
    live: super::bench::LiveArgs,
}

/// Runs `tailguard demo`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let order = if args.one_at_a_time {
        "one after the other"
    } else {
        "at the same time, each on its own fleet"
    };
    super::out!(
        "# tailguard demo: seed 000 (add-steps) live on 127.0.0.1: ten backends from 0 ms to 2 s,\n\
         # the slowest two failing often; 50 clients, each at most 10 req/s. The baseline clients\n\
         # balance round robin themselves; the others go through tailguard proxy (peak EWMA,\n\
         # retries under a budget, failure accrual). Both arms run {order}, {}s each.\n\n",
        args.duration.as_secs_f64()
    );
    let opts = Options {
        duration: Some(args.duration),
        interval: Some(Duration::from_secs(5)),
        unit: Unit::Auto,
        progress: true,
        together: !args.one_at_a_time,
        live: args.live.addr(),
        live_fallback: args.live.fallback(),
        stop: Arc::new(AtomicBool::new(false)),
        ..Options::default()
    };
    let html = args
        .html
        .unwrap_or_else(|| std::env::temp_dir().join("tailguard-demo.html"));
    for path in [Some(&html), args.json.as_ref()].into_iter().flatten() {
        super::check_writable(path)?;
    }
    let report = super::bench::execute("add-steps", &opts)?;
    super::bench::write_outputs(&report, args.json.as_deref(), Some(&html))?;
    super::out!("# HTML report: {}\n", html.display());
    super::out!(
        "# next: tailguard bench slow-middle, tailguard bench overhead, tailguard bench --list\n"
    );
    Ok(super::bench::exit_code(&report))
}
