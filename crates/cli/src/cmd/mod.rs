//! One module per subcommand. Each exposes `Args` (clap) and `run(Args) -> Result<ExitCode>`.

pub mod bench;
pub mod demo;
pub mod load;
pub mod merge;
pub mod proxy;
pub mod report;
pub mod serve;
pub mod sim;

/// Exit status when a `--slo` objective is missed.
pub const EXIT_SLO: u8 = 1;
/// Exit status for bad input: a bad flag, a bad file, a URL that does not resolve.
pub const EXIT_USAGE: u8 = 2;
/// Exit status of `load` when the target cannot be served: the pre-flight request failed, or
/// every request of the run failed (no response at all).
pub const EXIT_FAILED: u8 = 3;

/// Exit status when the report's reader went away (a closed pipe): 128 + SIGPIPE, what a
/// process killed by SIGPIPE reports in a shell.
pub const EXIT_PIPE: u8 = 141;

/// `print!` for a verb's output on stdout: when the reader has gone (`| head`), the verb
/// returns [`EXIT_PIPE`] at once, as `yes | head` ends, instead of panicking as `print!` does.
macro_rules! out {
    ($($arg:tt)*) => {
        if !$crate::cmd::write_stdout(&format!($($arg)*)) {
            return Ok(std::process::ExitCode::from($crate::cmd::EXIT_PIPE));
        }
    };
}
pub(crate) use out;

/// Writes `text` to stdout and flushes it; `false` when the reader has gone (or stdout failed
/// otherwise: nothing more can be shown either way).
pub fn write_stdout(text: &str) -> bool {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .is_ok()
}

/// Writes `tailguard: {line}` to stderr; a closed stderr (`2>&1 | head`) is no reason to panic.
pub fn say(line: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "tailguard: {line}");
}

/// Checks before a long run that `path` can be written (creating it when missing, leaving an
/// existing file as it is), so a typo does not cost the run.
pub fn check_writable(path: &std::path::Path) -> anyhow::Result<()> {
    use anyhow::Context as _;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map(drop)
        .with_context(|| format!("cannot write {}", path.display()))
}

/// The most runtime threads a verb accepts: far beyond any useful count, far below what makes
/// the OS refuse to create them (which aborts the runtime).
pub const MAX_THREADS: usize = 1024;

/// Parses `--threads` for the proxy and serve: 1 to [`MAX_THREADS`].
pub fn parse_threads(s: &str) -> Result<usize, String> {
    parse_thread_count(s, 1)
}

/// Parses `--threads` for load: 0 (one per core) to [`MAX_THREADS`].
pub fn parse_threads_or_auto(s: &str) -> Result<usize, String> {
    parse_thread_count(s, 0)
}

fn parse_thread_count(s: &str, min: usize) -> Result<usize, String> {
    let n: usize = s.parse().map_err(|e| format!("{e}"))?;
    if (min..=MAX_THREADS).contains(&n) {
        Ok(n)
    } else {
        Err(format!("must be from {min} to {MAX_THREADS}"))
    }
}

/// An error and its causes on one line, each cause once: a cause whose text the message
/// already contains (an error type that embeds its source in its own message) is skipped.
pub fn describe(err: &anyhow::Error) -> String {
    let mut out = err.to_string();
    for cause in err.chain().skip(1) {
        let text = cause.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("cannot listen on 127.0.0.1:1: {0}")]
    struct Embeds(#[source] std::io::Error);

    #[test]
    fn each_cause_is_said_once() {
        let os = || std::io::Error::from_raw_os_error(98);
        let embedded = anyhow::Error::new(Embeds(os())).context("proxy");
        assert_eq!(
            describe(&embedded),
            format!("proxy: cannot listen on 127.0.0.1:1: {}", os())
        );
        let chained = anyhow::Error::new(os()).context("reading a.yaml");
        assert_eq!(describe(&chained), format!("reading a.yaml: {}", os()));
    }

    #[test]
    fn threads_are_bounded() {
        assert_eq!(parse_threads("4"), Ok(4));
        assert!(parse_threads("0").is_err());
        assert_eq!(parse_threads_or_auto("0"), Ok(0));
        assert_eq!(
            parse_threads("100000"),
            Err("must be from 1 to 1024".to_string())
        );
        assert!(parse_threads("-1").is_err());
    }
}
