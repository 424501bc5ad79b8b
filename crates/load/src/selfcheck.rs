//! Generator self-check: is the generator, not the server, the bottleneck?
//!
//! At each interval end the run weighs three signals, and says so on stderr only when one
//! changes state (once when it starts, once when it ends), never once per interval:
//! 1. the pacers' own lateness (due time to release): when a tenth of the interval's requests
//!    were released more than 1 ms late, the pacers cannot keep the schedule (CPU starved, or
//!    the rate is beyond the worker threads). A p99 over 1 ms alone is the scheduler noise of a
//!    busy machine, not a bottleneck;
//! 2. the process CPU time over the interval: at 90% of the worker threads or more, the
//!    generator is CPU-bound and its measurements include its own queueing;
//! 3. requests that waited for a free worker after the pacer released them (every worker busy:
//!    the concurrency cap). That is the server being slower than rate x latency allows (the
//!    wait is counted in latency, as it should be), and the note says to raise `--concurrency`.
//!    Connection set-up is not such a wait: it is service time.
//!
//! At the end of the run one more look, at the service times: a tight cluster at the delayed-ACK
//! time ([`delayed_ack_note`]) is the mark of Nagle's algorithm meeting delayed ACKs (seed 001).

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
    /// Requests that waited for a free worker after their release.
    pub queued: u64,
    pub requests: u64,
}

/// The generator's state as last reported, so each change is said once.
#[derive(Debug, Default)]
pub(crate) struct SelfCheck {
    behind: bool,
    cpu_bound: bool,
    capped: bool,
}

impl SelfCheck {
    /// The lines this interval's evidence calls for: one per signal that changed state.
    pub(crate) fn observe(&mut self, e: &Evidence<'_>) -> Vec<String> {
        let mut out = Vec::new();
        let lateness_p90 = e.pacer_lateness.quantile(0.9);
        let behind = !e.pacer_lateness.is_empty() && lateness_p90 > Duration::from_millis(1);
        if behind != self.behind {
            self.behind = behind;
            out.push(if behind {
                format!(
                    "warning: the load generator is behind its schedule (a tenth of its releases over {}µs late): results include its own delay; lower --rate or add --threads",
                    lateness_p90.as_micros()
                )
            } else {
                "note: the load generator keeps its schedule again".to_string()
            });
        }
        if let Some(cpu) = e.cpu {
            let busy = cpu.as_secs_f64() / e.wall.as_secs_f64().max(1e-9);
            let cpu_bound = busy >= 0.9 * e.threads as f64;
            if cpu_bound != self.cpu_bound {
                self.cpu_bound = cpu_bound;
                out.push(if cpu_bound {
                    format!(
                        "warning: the load generator used {:.0}% CPU ({} threads): it may be the bottleneck",
                        busy * 100.0,
                        e.threads
                    )
                } else {
                    "note: the load generator's CPU use is below 90% again".to_string()
                });
            }
        }
        // An idle interval (nothing completed) says nothing about the cap.
        if e.requests > 0 {
            let capped = !behind && e.queued * 100 > e.requests;
            if capped != self.capped {
                self.capped = capped;
                out.push(if capped {
                    format!(
                        "note: {} of {} requests waited for a free connection (concurrency cap): the server is slower than rate x latency allows; the wait is counted in latency (raise --concurrency to offer the full rate)",
                        e.queued, e.requests
                    )
                } else {
                    "note: requests no longer wait for a free connection".to_string()
                });
            }
        }
        out
    }
}

/// Linux delays an ACK by 40 ms at least; a response held back by Nagle's algorithm until that
/// ACK arrives takes 40 to 44 ms on loopback, and up to about 50 ms on a busy machine (48 ms
/// measured on this project's 2-core machine under a parallel build).
const DELAYED_ACK_BAND_US: (u64, u64) = (38_000, 52_000);
/// The neighbourhood the band must stand out from.
const NEIGHBOURS_US: (u64, u64) = (20_000, 100_000);

/// A note when service times cluster at the delayed-ACK time: at least 1% of requests inside
/// 38-52 ms, and that band at least four times as full as the rest of 20-100 ms, which is
/// over four times its width. A server whose latency merely spreads across tens of milliseconds does not
/// cluster; one that really takes 40 ms does, so the note says so.
pub(crate) fn delayed_ack_note(service: &Histogram) -> Option<String> {
    let n = service.count();
    if n < 20 {
        return None;
    }
    let share = |lo: u64, hi: u64| {
        (service.fraction_at_or_below_us(hi) - service.fraction_at_or_below_us(lo)).max(0.0)
    };
    let (lo, hi) = DELAYED_ACK_BAND_US;
    let band = share(lo, hi);
    let around = share(NEIGHBOURS_US.0, lo) + share(hi, NEIGHBOURS_US.1);
    (band >= 0.01 && band >= 4.0 * around).then(|| {
        format!(
            "note: {:.1}% of responses took 38-52 ms of service time, the delayed-ACK time of \
             Linux: the mark of Nagle's algorithm (a peer writing a response in parts without \
             TCP_NODELAY) waiting for the client's delayed ACK, worst at low rates. Unless the \
             server is meant to take 40 ms, set TCP_NODELAY on it and on any proxy between \
             (tailguard's own sockets all set it)",
            band * 100.0
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn histogram(late_us: &[u64]) -> Histogram {
        let mut h = Histogram::new();
        for &us in late_us {
            h.record_us(us);
        }
        h
    }

    fn evidence(lateness: &Histogram, cpu_ms: u64, queued: u64) -> Evidence<'_> {
        Evidence {
            pacer_lateness: lateness,
            cpu: Some(Duration::from_millis(cpu_ms)),
            wall: Duration::from_secs(1),
            threads: 1,
            queued,
            requests: 1000,
        }
    }

    #[test]
    fn tells_a_slow_generator_from_a_slow_server() {
        let on_time = histogram(&[20; 100]);
        let behind = histogram(&[5_000; 100]);
        assert!(SelfCheck::default()
            .observe(&evidence(&on_time, 100, 0))
            .is_empty());
        let w = SelfCheck::default().observe(&evidence(&behind, 100, 500));
        assert_eq!(w.len(), 1, "a late pacer explains the queueing: {w:?}");
        assert!(w[0].contains("behind its schedule"), "{w:?}");
        let w = SelfCheck::default().observe(&evidence(&on_time, 1_900, 0));
        assert!(w[0].contains("190% CPU"), "{w:?}");
        let w = SelfCheck::default().observe(&evidence(&on_time, 100, 50));
        assert!(w[0].contains("50 of 1000 requests waited"), "{w:?}");
        assert!(cpu_time().is_some());
    }

    #[test]
    fn scheduler_noise_is_not_a_bottleneck() {
        // 2 of 100 releases 3 ms late: the p99 is over 1 ms, the p90 is not.
        let mut late = vec![30; 98];
        late.extend([3_000, 3_000]);
        let noisy = histogram(&late);
        assert!(noisy.quantile(0.99) > Duration::from_millis(1));
        assert!(SelfCheck::default()
            .observe(&evidence(&noisy, 100, 0))
            .is_empty());
    }

    #[test]
    fn each_change_of_state_is_said_once() {
        let behind = histogram(&[5_000; 100]);
        let on_time = histogram(&[20; 100]);
        let mut check = SelfCheck::default();
        let said: Vec<usize> = [&behind, &behind, &behind, &on_time, &on_time, &behind]
            .iter()
            .map(|h| check.observe(&evidence(h, 100, 0)).len())
            .collect();
        assert_eq!(said, [1, 0, 0, 1, 0, 1]);
        let mut check = SelfCheck::default();
        let capped: Vec<Vec<String>> = [50, 60, 0, 0]
            .iter()
            .map(|&q| check.observe(&evidence(&on_time, 100, q)))
            .collect();
        assert_eq!(capped[1].len() + capped[3].len(), 0);
        assert!(capped[2][0].contains("no longer wait"), "{capped:?}");
    }

    #[test]
    fn a_cluster_at_the_delayed_ack_time_is_named() {
        let mut h = Histogram::new();
        h.record_n_us(300, 950);
        h.record_n_us(41_500, 50);
        let note = delayed_ack_note(&h).expect("5% at 41.5 ms");
        assert!(note.contains("5.0% of responses took 38-52 ms"), "{note}");
        assert!(note.contains("Nagle"), "{note}");
        // Every request waiting (one request at a time, Nagle on): still a cluster.
        let mut all = Histogram::new();
        all.record_n_us(43_900, 100);
        assert!(delayed_ack_note(&all).is_some());
        // A busy machine: ACKs at 44 to 48 ms (measured under a parallel build).
        let mut busy = Histogram::new();
        busy.record_n_us(44_000, 50);
        busy.record_n_us(48_100, 50);
        assert!(delayed_ack_note(&busy).is_some());
    }

    #[test]
    fn a_spread_or_a_fast_server_is_not_a_cluster() {
        let mut fast = Histogram::new();
        fast.record_n_us(300, 1_000);
        assert!(delayed_ack_note(&fast).is_none());
        // 10% spread evenly over 10-200 ms: the band holds its share, no more.
        let mut spread = Histogram::new();
        spread.record_n_us(300, 900);
        for ms in (10..200).step_by(2) {
            spread.record_n_us(ms * 1_000, 1);
        }
        assert!(delayed_ack_note(&spread).is_none());
        // A few stragglers at 40 ms among many: under 1%.
        let mut rare = Histogram::new();
        rare.record_n_us(300, 1_000);
        rare.record_n_us(41_000, 5);
        assert!(delayed_ack_note(&rare).is_none());
    }
}
