//! Generator self-check: is the generator, not the server, the bottleneck?
//!
//! At each interval end the run compares three signals and warns on stderr:
//! 1. the pacers' own lateness (due time to release): if its p99 exceeds 1 ms, the pacers
//!    themselves cannot keep the schedule (CPU starved, or the rate is beyond the worker threads);
//! 2. the process CPU time over the interval: above 90% of the runtime's threads, the generator
//!    is CPU-bound and its measurements include its own queueing;
//! 3. requests sent late while the pacer was on time: the concurrency cap was reached, so
//!    requests waited for a free connection. That is the server being slow (the wait is counted
//!    in latency, as it should be), and the note says to raise `--concurrency` to offer the load.

use std::time::Duration;
use tailguard_histogram::Histogram;

/// Process CPU time (user + system) so far.
pub(crate) fn cpu_time() -> Option<Duration> {
    use nix::sys::resource::{getrusage, UsageWho};
    let usage = getrusage(UsageWho::RUSAGE_SELF).ok()?;
    let tv = |t: nix::sys::time::TimeVal| {
        Duration::from_secs(t.tv_sec() as u64) + Duration::from_micros(t.tv_usec() as u64)
    };
    Some(tv(usage.user_time()) + tv(usage.system_time()))
}

/// One interval's evidence.
#[derive(Debug)]
pub(crate) struct Evidence<'a> {
    pub pacer_lateness: &'a Histogram,
    pub cpu: Option<Duration>,
    pub wall: Duration,
    pub threads: usize,
    pub late_sends: u64,
    pub requests: u64,
}

/// The warnings an interval deserves (empty when the generator kept up).
pub(crate) fn warnings(e: &Evidence<'_>) -> Vec<String> {
    let mut out = Vec::new();
    let pacer_p99 = e.pacer_lateness.quantile(0.99);
    let pacer_behind = pacer_p99 > Duration::from_millis(1);
    if pacer_behind {
        out.push(format!(
            "warning: the pacer ran behind schedule (p99 {}µs late): the load generator cannot keep up; results include its own delay",
            pacer_p99.as_micros()
        ));
    }
    if let Some(cpu) = e.cpu {
        let busy = cpu.as_secs_f64() / e.wall.as_secs_f64().max(1e-9);
        if busy >= 0.9 * e.threads as f64 {
            out.push(format!(
                "warning: the load generator used {:.0}% CPU ({} threads): it may be the bottleneck",
                busy * 100.0,
                e.threads
            ));
        }
    }
    if !pacer_behind && e.requests > 0 && e.late_sends * 100 > e.requests {
        out.push(format!(
            "note: {} of {} requests waited for a free connection (concurrency cap): the server is slower than rate x latency allows; the wait is counted in latency (raise --concurrency to offer the full rate)",
            e.late_sends, e.requests
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tells_a_slow_generator_from_a_slow_server() {
        let mut on_time = Histogram::new();
        on_time.record_us(20);
        let mut behind = Histogram::new();
        behind.record_us(5_000);
        let ev = |lateness, cpu_ms, late| Evidence {
            pacer_lateness: lateness,
            cpu: Some(Duration::from_millis(cpu_ms)),
            wall: Duration::from_secs(1),
            threads: 1,
            late_sends: late,
            requests: 1000,
        };
        assert!(warnings(&ev(&on_time, 100, 0)).is_empty());
        let w = warnings(&ev(&behind, 100, 500));
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("pacer ran behind"));
        assert!(warnings(&ev(&on_time, 1_900, 0))[0].contains("190% CPU"));
        assert!(warnings(&ev(&on_time, 100, 50))[0].contains("concurrency cap"));
        assert!(cpu_time().is_some());
    }
}
