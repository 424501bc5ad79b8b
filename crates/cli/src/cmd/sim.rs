//! `tailguard sim`.

use std::process::ExitCode;

/// Arguments of `tailguard sim`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `tailguard sim`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`tailguard sim` is not built yet")
}
