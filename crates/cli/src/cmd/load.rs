//! `tailguard load`.

use std::process::ExitCode;

/// Arguments of `tailguard load`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `tailguard load`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`tailguard load` is not built yet")
}
