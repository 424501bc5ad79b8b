//! The `tailguard` binary: parses arguments and hands them to one library function per verb.
//!
//! Each subcommand lives in its own file under `cmd/`; this file only dispatches.

mod alloc;
mod cmd;
#[cfg(test)]
mod docs_check;

use clap::{Parser, Subcommand};
use std::io::IsTerminal;
use std::process::ExitCode;

/// Fix tail latency, and prove it.
#[derive(Debug, Parser)]
#[command(name = "tailguard", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
#[allow(clippy::large_enum_variant)] // Parsed once at start; boxing would only add noise.
enum Command {
    /// Open-loop load tester: constant-rate traffic, corrected percentiles, interval reports.
    Load(cmd::load::Args),
    /// Test backends that misbehave on purpose: one, or a whole fleet from one process.
    Serve(cmd::serve::Args),
    /// Deterministic simulation of balancers in virtual time.
    Sim(cmd::sim::Args),
    /// Latency-aware HTTP/1.1, HTTP/2 and gRPC proxy.
    Proxy(cmd::proxy::Args),
    /// Run a seed experiment live on loopback: baseline against proxy, side by side.
    Bench(cmd::bench::Args),
    /// Seed 000 live in about 30 s (25 s of load, both arms at once), no configuration: the
    /// first thing to run.
    Demo(cmd::demo::Args),
    /// Render saved bench or load results, or compare several side by side.
    Report(cmd::report::Args),
    /// Merge several generators' results (JSON summaries or interval logs) into one, exactly.
    Merge(cmd::merge::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing();
    // Every verb holds many sockets: the proxy and serve accept them, load dials them.
    if let Err(err) = tailguard_http::fds::raise() {
        tracing::warn!(%err, "cannot raise the file descriptor limit");
    }
    let result = match cli.command {
        Command::Load(args) => cmd::load::run(args),
        Command::Serve(args) => cmd::serve::run(args),
        Command::Sim(args) => cmd::sim::run(args),
        Command::Proxy(args) => cmd::proxy::run(args),
        Command::Bench(args) => cmd::bench::run(args),
        Command::Demo(args) => cmd::demo::run(args),
        Command::Report(args) => cmd::report::run(args),
        Command::Merge(args) => cmd::merge::run(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            cmd::say(&format!("error: {}", cmd::describe(&err)));
            ExitCode::from(cmd::EXIT_USAGE)
        }
    }
}

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("TAILGUARD_LOG")
        // kube's watcher warns on every retry; tailguard says it once, as an error.
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,kube_runtime=error"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(colour(
            std::io::stderr().is_terminal(),
            std::env::var_os("NO_COLOR"),
        ))
        .init();
}

/// Logs are coloured only on a terminal, and never when `NO_COLOR` is set to anything but
/// the empty string (no-color.org): a log redirected to a file stays plain text.
fn colour(terminal: bool, no_color: Option<std::ffi::OsString>) -> bool {
    terminal && no_color.is_none_or(|v| v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::colour;

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        assert!(colour(true, None));
        assert!(colour(true, Some("".into())));
        assert!(!colour(true, Some("1".into())));
        assert!(!colour(false, None));
    }
}
