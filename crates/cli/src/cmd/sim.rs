//! `tailguard sim`: run a scenario in virtual time and print the comparison.

use anyhow::Context;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;
use tailguard_sim::{render, Arrivals, Overrides, Report, Scenario};
use tailguard_text::duration::parse_duration;

/// Arguments of `tailguard sim`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Built-in scenarios: slow-middle (seed 002), add-steps (seed 000), herd (50 balancers x 1,000 endpoints), gc-pause (seed 004), capacity and capacity-ramp (backends that queue), antagonist (a noisy neighbour), stall (one backend paused 4 s: the proxy default before and after).\n\
Example: tailguard sim slow-middle --deadline 1s --svg slow-middle.svg"
)]
pub struct Args {
    /// A built-in scenario name or a scenario file (YAML).
    #[arg(value_name = "SCENARIO", required_unless_present_any = ["scenario", "list"])]
    name: Option<String>,
    /// A scenario file (the same as giving its path as SCENARIO).
    #[arg(long, value_name = "FILE.yaml", conflicts_with = "name")]
    scenario: Option<PathBuf>,
    /// List the built-in scenarios and exit.
    #[arg(long)]
    list: bool,
    /// Print the scenario as YAML (built-ins only) and exit: a start for your own file.
    #[arg(long)]
    print_scenario: bool,
    /// Seed for arrivals, endpoint behaviour and balancer choices (default: the scenario's).
    #[arg(long)]
    seed: Option<u64>,
    /// Count success within this deadline (e.g. 1s).
    #[arg(long, value_parser = parse_duration)]
    deadline: Option<Duration>,
    /// How long the load runs, in virtual time (e.g. 60s).
    #[arg(long, value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Open loop at this many requests per second, flat (replaces a closed loop or a ramp).
    #[arg(long)]
    rate: Option<f64>,
    /// Open-loop arrivals: constant or poisson.
    #[arg(long)]
    arrivals: Option<Arrivals>,
    /// Independent client-side balancers sharing the load.
    #[arg(long)]
    clients: Option<u32>,
    /// Run only these arms, in this order (comma-separated).
    #[arg(long, value_delimiter = ',')]
    arms: Vec<String>,
    /// Also write the report as JSON.
    #[arg(long, value_name = "PATH")]
    json: Option<PathBuf>,
    /// Also write the latency-by-percentile chart as SVG.
    #[arg(long, value_name = "PATH")]
    svg: Option<PathBuf>,
    /// Also write the chart and tables as an HTML page.
    #[arg(long, value_name = "PATH")]
    html: Option<PathBuf>,
}

/// Runs `tailguard sim`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.list {
        super::out!("{}\n", Scenario::builtin_names().join("\n"));
        return Ok(ExitCode::SUCCESS);
    }
    let name = match (&args.name, &args.scenario) {
        (Some(n), _) => n.clone(),
        (None, Some(p)) => p.display().to_string(),
        (None, None) => anyhow::bail!("give a scenario name or --scenario FILE"),
    };
    if args.print_scenario {
        let yaml = Scenario::builtin_yaml(&name)
            .with_context(|| format!("`{name}` is not a built-in scenario"))?;
        super::out!("{yaml}");
        return Ok(ExitCode::SUCCESS);
    }
    let mut scenario = Scenario::load(&name)?;
    scenario.apply(&overrides(&args))?;
    let report = tailguard_sim::run(&scenario)?;
    // The files are written even when the reader of the table went away.
    let shown = super::write_stdout(&render::text(&report));
    write_outputs(&args, &report)?;
    Ok(if shown {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(super::EXIT_PIPE)
    })
}

fn overrides(args: &Args) -> Overrides {
    Overrides {
        seed: args.seed,
        deadline: args.deadline,
        duration: args.duration,
        rate: args.rate,
        arrivals: args.arrivals,
        clients: args.clients,
        arms: args.arms.clone(),
    }
}

/// Turns a report into one output format.
type Renderer = fn(&Report) -> String;

fn write_outputs(args: &Args, report: &Report) -> anyhow::Result<()> {
    let outputs: [(&Option<PathBuf>, Renderer); 3] = [
        (&args.json, render::json),
        (&args.svg, render::svg),
        (&args.html, render::html),
    ];
    for (path, render) in outputs {
        if let Some(path) = path {
            write(path, &render(report))?;
        }
    }
    Ok(())
}

fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}
