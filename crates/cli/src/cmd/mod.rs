//! One module per subcommand. Each exposes `Args` (clap) and `run(Args) -> Result<ExitCode>`.

pub mod bench;
pub mod demo;
pub mod load;
pub mod proxy;
pub mod report;
pub mod serve;
pub mod sim;

/// Exit status when a `--slo` objective is missed.
pub const EXIT_SLO: u8 = 1;
/// Exit status for bad input: a bad flag, a bad file, an unreachable target.
pub const EXIT_USAGE: u8 = 2;
