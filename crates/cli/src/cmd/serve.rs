//! `tailguard serve`.

use std::process::ExitCode;

/// Arguments of `tailguard serve`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `tailguard serve`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`tailguard serve` is not built yet")
}
