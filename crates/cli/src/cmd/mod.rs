//! One module per subcommand. Each exposes `Args` (clap) and `run(Args) -> Result<ExitCode>`.

pub mod load;
pub mod serve;
pub mod sim;

/// Exit code for bad input: a bad flag, a bad file, an unreachable target.
pub const EXIT_USAGE: u8 = 2;
