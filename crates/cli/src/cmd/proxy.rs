//! `tailguard proxy`.

use std::process::ExitCode;

/// Arguments of `tailguard proxy`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `tailguard proxy`.
pub fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`tailguard proxy` is not built yet")
}
