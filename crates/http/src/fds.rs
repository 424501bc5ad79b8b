//! File descriptors: the process's limit, how many connections it allows, and what an accept
//! loop does when they run out.
//!
//! Distributions start processes with a soft `RLIMIT_NOFILE` of 1,024 under a hard limit of
//! half a million or more; a proxy that keeps the soft one runs out at a few hundred clients.
//! `tailguard` raises the soft limit to the hard one at start ([`raise`]), as Envoy's and
//! HAProxy's packaging do, and sizes its default connection limit from the result
//! ([`connection_budget`]). Should descriptors still run out, [`AcceptBackoff`] pauses the
//! accept loop (the pending connections wait in the kernel's backlog) instead of letting it
//! spin on `EMFILE`, and logs the episode once.

use nix::sys::resource::{getrlimit, setrlimit, Resource, RLIM_INFINITY};
use std::io;
use std::time::Duration;
use tokio::time::Instant;

/// The descriptor limit, soft and hard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NoFile {
    /// The limit in force.
    pub soft: u64,
    /// The ceiling an unprivileged process may raise the soft limit to.
    pub hard: u64,
}

/// The process's descriptor limit.
///
/// # Errors
/// The OS error of `getrlimit`.
pub fn current() -> io::Result<NoFile> {
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).map_err(io::Error::from)?;
    Ok(NoFile { soft, hard })
}

/// Raises the soft descriptor limit to the hard one; returns the limit now in force.
///
/// # Errors
/// The OS error of `getrlimit` or `setrlimit`; the limit is then unchanged.
pub fn raise() -> io::Result<NoFile> {
    let now = current()?;
    if now.soft >= now.hard {
        return Ok(now);
    }
    setrlimit(Resource::RLIMIT_NOFILE, now.hard, now.hard).map_err(io::Error::from)?;
    current()
}

/// Descriptors kept back from connections, for listeners, the resolver, files and the runtime:
/// an eighth of the limit, at least 16 and at most 256.
fn reserve(soft: u64) -> u64 {
    (soft / 8).clamp(16, 256)
}

/// How many connections a soft limit of `soft` descriptors allows at `per_connection`
/// descriptors each (a proxy holds a client's socket and, pooled, an upstream's: 2), after
/// a reserve for everything else. At least 1.
///
/// ```
/// use tailguard_http::fds::connection_budget;
/// assert_eq!(connection_budget(1024, 2), 448);
/// assert_eq!(connection_budget(64, 2), 24);
/// ```
pub fn connection_budget(soft: u64, per_connection: u64) -> usize {
    if soft == RLIM_INFINITY {
        return usize::MAX;
    }
    let usable = soft.saturating_sub(reserve(soft)) / per_connection.max(1);
    usize::try_from(usable.max(1)).unwrap_or(usize::MAX)
}

/// The first pause after a failed accept; each further failure doubles it.
const FIRST_PAUSE: Duration = Duration::from_millis(5);
/// The longest pause: how late a freed descriptor is noticed, at worst.
const MAX_PAUSE: Duration = Duration::from_secs(1);
/// An episode starting sooner than this after the last warning is not logged again.
const WARN_EVERY: Duration = Duration::from_secs(60);

/// What an accept loop does after an accept fails.
///
/// An error that concerns one connection only (the client reset it while it waited in the
/// backlog) is skipped at once. Any other error, `EMFILE` and `ENFILE` above all, would repeat
/// at once, since the pending connection is still there: the loop pauses, 5 ms doubling up to
/// 1 s, and the episode is logged once (at most once a minute), with the count of failed
/// accepts when it ends.
#[derive(Debug, Default)]
pub struct AcceptBackoff {
    failures: u32,
    warned: Option<Instant>,
}

impl AcceptBackoff {
    /// Records a failed accept; returns how long to wait before accepting again.
    pub fn failed(&mut self, err: &io::Error, now: Instant) -> Duration {
        if per_connection(err) {
            tracing::debug!(%err, "accept failed for one connection");
            return Duration::ZERO;
        }
        if self.failures == 0 && self.warned.is_none_or(|at| now - at >= WARN_EVERY) {
            self.warned = Some(now);
            tracing::warn!(
                %err,
                "cannot accept connections{}; pausing accepts until it clears",
                hint(err)
            );
        }
        self.failures = self.failures.saturating_add(1);
        pause(self.failures)
    }

    /// Records a successful accept, ending an episode of failures.
    pub fn accepted(&mut self) {
        if self.failures > 0 {
            tracing::info!(failures = self.failures, "accepting connections again");
            self.failures = 0;
        }
    }

    /// Failed accepts in the current episode.
    pub fn failures(&self) -> u32 {
        self.failures
    }
}

/// The pause after the `n`th failure in a row (`n` from 1).
fn pause(n: u32) -> Duration {
    let doublings = n.saturating_sub(1).min(16);
    (FIRST_PAUSE * (1u32 << doublings)).min(MAX_PAUSE)
}

fn per_connection(err: &io::Error) -> bool {
    matches!(
        err.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionRefused
            | io::ErrorKind::Interrupted
    )
}

fn hint(err: &io::Error) -> &'static str {
    const EMFILE: i32 = nix::libc::EMFILE;
    const ENFILE: i32 = nix::libc::ENFILE;
    match err.raw_os_error() {
        Some(EMFILE) => {
            " (out of file descriptors: raise `ulimit -n` or lower limits.maxConnections)"
        }
        Some(ENFILE) => " (the system is out of file descriptors: fs.file-max)",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn emfile() -> io::Error {
        io::Error::from_raw_os_error(nix::libc::EMFILE)
    }

    #[test]
    fn exhaustion_backs_off_doubling_to_a_second() {
        let mut b = AcceptBackoff::default();
        let now = Instant::now();
        let pauses: Vec<_> = (0..10).map(|_| b.failed(&emfile(), now)).collect();
        assert_eq!(pauses[0], Duration::from_millis(5));
        assert_eq!(pauses[1], Duration::from_millis(10));
        assert_eq!(pauses[7], Duration::from_millis(640));
        assert_eq!(pauses[8], MAX_PAUSE);
        assert_eq!(pauses[9], MAX_PAUSE);
        assert_eq!(b.failures(), 10);
        b.accepted();
        assert_eq!(b.failures(), 0);
        assert_eq!(b.failed(&emfile(), now), FIRST_PAUSE);
        for _ in 0..100 {
            assert_eq!(b.failed(&emfile(), now).max(MAX_PAUSE), MAX_PAUSE);
        }
    }

    #[test]
    fn a_reset_client_is_skipped_at_once() {
        let mut b = AcceptBackoff::default();
        let reset = io::Error::from(io::ErrorKind::ConnectionAborted);
        assert_eq!(b.failed(&reset, Instant::now()), Duration::ZERO);
        assert_eq!(b.failures(), 0);
    }

    #[test]
    fn one_warning_a_minute_at_most() {
        let mut b = AcceptBackoff::default();
        let start = Instant::now();
        b.failed(&emfile(), start);
        assert_eq!(b.warned, Some(start));
        b.accepted();
        b.failed(&emfile(), start + Duration::from_secs(30));
        assert_eq!(
            b.warned,
            Some(start),
            "a second episode within a minute is not logged"
        );
        b.accepted();
        let later = start + Duration::from_secs(61);
        b.failed(&emfile(), later);
        assert_eq!(b.warned, Some(later));
    }

    #[test]
    fn the_budget_keeps_a_reserve_and_at_least_one() {
        assert_eq!(connection_budget(1024, 2), (1024 - 128) / 2);
        assert_eq!(connection_budget(1_048_576, 2), (1_048_576 - 256) / 2);
        assert_eq!(connection_budget(20, 2), 2);
        assert_eq!(connection_budget(10, 2), 1);
        assert_eq!(connection_budget(RLIM_INFINITY, 2), usize::MAX);
        for soft in [40, 100, 1024, 65_536] {
            let n = connection_budget(soft, 2) as u64;
            assert!(2 * n + reserve(soft) <= soft, "{soft}");
        }
    }

    #[test]
    fn the_limit_is_readable_and_raising_never_lowers_it() {
        let before = current().unwrap();
        let after = raise().unwrap();
        assert!(after.soft >= before.soft);
        assert_eq!(after.hard, before.hard);
    }
}
