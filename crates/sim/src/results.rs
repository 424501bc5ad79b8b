//! What a run measured: one [`ArmResult`] per arm, gathered in a [`Report`].
//!
//! Every request is counted (seed 002's original analysis sampled 1,000 per balancer, which
//! makes its p99.9 noise). A request's latency runs from its scheduled arrival (open loop) or
//! its send (closed loop) to its final outcome, good or not: a failure after 2 s costs the
//! caller 2 s. (slow_cooker's histogram, behind seed 000's table, counted only good responses.)

use crate::client::ClientStats;
use std::time::Duration;
use tailguard_histogram::Histogram;

/// The measurements of one arm.
#[derive(Clone, Debug, PartialEq)]
pub struct ArmResult {
    /// The arm's name.
    pub name: String,
    /// What the arm does, in words.
    pub description: String,
    /// Latency of every request, microseconds.
    pub latency: Histogram,
    /// Requests sent.
    pub requests: u64,
    /// Requests that got a good response.
    pub successes: u64,
    /// Requests that got a good response within the deadline.
    pub within_deadline: u64,
    /// Requests the arm's admission refused (its queue full, or their wait over): counted in
    /// `requests`, never sent, and kept out of `latency` (a refusal is not a fast answer).
    pub refused: u64,
    /// Requests marked critical, and those of them answered well within the deadline.
    pub critical: u64,
    /// Critical requests that got a good response within the deadline.
    pub critical_within_deadline: u64,
    /// Requests the caller sent again after a failure (`load.retry_after`), counted in
    /// `requests` too.
    pub caller_retries: u64,
    /// Attempts sent to each endpoint, in fleet order.
    pub attempts: Vec<u64>,
    /// What retries, accrual and hedging did, summed over clients.
    pub stats: ClientStats,
    /// Mean number of distinct endpoints each client sent to (connections a proxy would open).
    pub endpoints_per_client: f64,
    /// How long the load ran (the denominator of the achieved rate).
    pub duration: Duration,
    /// Each second of the run, by when its requests ended (at most [`MAX_TIMELINE`] seconds;
    /// later ones count in the last).
    pub timeline: Vec<Second>,
}

/// What an overload scenario's figures are measured against (`overload:` in a scenario).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Overload {
    /// What the backends serve, requests per second.
    pub capacity: f64,
    /// Their p99 unloaded: recovery is a p99 within twice this.
    pub unloaded_p99: Duration,
}

/// An arm's figures under overload (issue 48's).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OverloadFigures {
    /// The seconds of the run offered more than capacity, `from..to`.
    pub window: (usize, usize),
    /// Good answers within the deadline per second during the overload, over capacity.
    pub goodput_ratio: f64,
    /// Critical requests that ended during the overload answered well within the deadline,
    /// as a fraction (1.0 when there were none).
    pub critical_success: f64,
    /// Seconds after the overload until the p99 of the next five seconds together is within
    /// twice the unloaded p99 ([`recovery`]) (`None`: never within the run).
    pub recovery_s: Option<usize>,
    /// The p99 of the requests sent (admitted) that ended during the overload (refusals are
    /// not in it; compact histograms, 2 significant digits).
    pub admitted_p99: Duration,
    /// Requests refused by admission after the recovery (after the overload when there was
    /// none): a limit that recovered refuses nobody at half the capacity.
    pub refused_after: u64,
}

/// The seconds of a run whose offered rate is above `capacity`: from the first such second
/// to the first one after it that is not (`rate_at` gives the rate at a time in seconds).
pub fn overload_window(
    seconds: usize,
    capacity: f64,
    rate_at: impl Fn(f64) -> f64,
) -> (usize, usize) {
    let over = |s: usize| rate_at(s as f64 + 0.5) > capacity;
    let from = (0..seconds).find(|&s| over(s)).unwrap_or(seconds);
    let to = (from..seconds).find(|&s| !over(s)).unwrap_or(seconds);
    (from, to)
}

/// Good answers within the deadline per second of `timeline` from second `from` to `to`
/// (excluded).
pub fn goodput(timeline: &[Second], from: usize, to: usize) -> f64 {
    let secs = to.saturating_sub(from).max(1) as f64;
    let good: u64 = timeline
        .iter()
        .skip(from)
        .take(to.saturating_sub(from))
        .map(|s| s.within_deadline)
        .sum();
    good as f64 / secs
}

/// Seconds of `timeline` from second `from` until the p99 of the next [`RECOVERY_HOLD`]
/// seconds together (or of those to the end of the timeline, when fewer remain) is within
/// `bound`; `None` when it never is. A few slow requests in one second (a live machine's
/// hiccup) are not a relapse; an overload that keeps coming back is.
pub fn recovery(timeline: &[Second], from: usize, bound: Duration) -> Option<usize> {
    let mut held = Histogram::compact();
    (from..timeline.len())
        .find(|&start| {
            let end = (start + RECOVERY_HOLD).min(timeline.len());
            held.reset();
            for s in &timeline[start..end] {
                held.merge(&s.latency);
            }
            held.is_empty() || held.quantile(0.99) <= bound
        })
        .map(|start| start - from)
}

/// How long a recovered p99 must hold ([`recovery`]).
pub const RECOVERY_HOLD: usize = 5;

/// The overload figures of `timeline` over `window` (seconds `from..to`) against `o`: what
/// `sim` reports per arm, and `bench` per live arm from its own seconds.
pub fn overload_figures(
    timeline: &[Second],
    o: &Overload,
    window: (usize, usize),
) -> OverloadFigures {
    let (from, to) = window;
    let seconds = || timeline.iter().skip(from).take(to.saturating_sub(from));
    let critical: u64 = seconds().map(|s| s.critical).sum();
    let critical_ok: u64 = seconds().map(|s| s.critical_within_deadline).sum();
    let mut admitted = Histogram::compact();
    for s in seconds() {
        admitted.merge(&s.latency);
    }
    let recovery_s = recovery(timeline, to, o.unloaded_p99 * 2);
    let after = to + recovery_s.unwrap_or(0);
    OverloadFigures {
        admitted_p99: admitted.quantile(0.99),
        window,
        goodput_ratio: goodput(timeline, from, to) / o.capacity,
        critical_success: ratio(critical_ok, critical),
        recovery_s,
        refused_after: timeline.iter().skip(after).map(|s| s.refused).sum(),
    }
}

/// The longest timeline kept, in seconds.
pub const MAX_TIMELINE: usize = 3600;

/// The requests that ended in one second of a run.
#[derive(Clone, Debug, PartialEq)]
pub struct Second {
    /// Requests that ended (answered, failed or refused).
    pub ended: u64,
    /// Of which refused by admission.
    pub refused: u64,
    /// Good answers within the deadline.
    pub within_deadline: u64,
    /// Critical requests that ended, and those answered well within the deadline.
    pub critical: u64,
    /// Critical good answers within the deadline.
    pub critical_within_deadline: u64,
    /// Latency of the requests that were sent (refusals are not in it), compact.
    pub latency: Histogram,
}

impl Default for Second {
    fn default() -> Self {
        Second::new()
    }
}

impl Second {
    /// A second in which nothing ended yet.
    pub fn new() -> Self {
        Second {
            ended: 0,
            refused: 0,
            within_deadline: 0,
            critical: 0,
            critical_within_deadline: 0,
            latency: Histogram::compact(),
        }
    }
}

impl ArmResult {
    /// The second `at` falls in, made when first reached.
    pub fn second_mut(&mut self, at: Duration) -> &mut Second {
        let i = (at.as_secs() as usize).min(MAX_TIMELINE - 1);
        while self.timeline.len() <= i {
            self.timeline.push(Second::new());
        }
        &mut self.timeline[i]
    }

    /// Good answers within the deadline per second from second `from` to `to` (excluded).
    pub fn goodput(&self, from: usize, to: usize) -> f64 {
        goodput(&self.timeline, from, to)
    }

    /// Seconds from second `from` until a second's p99 is within `bound` (and stays within it
    /// for the rest of the timeline); `None` when it never is.
    pub fn recovery(&self, from: usize, bound: Duration) -> Option<usize> {
        recovery(&self.timeline, from, bound)
    }

    /// The overload figures over `window` (seconds `from..to`) against `o`.
    pub fn overload(&self, o: &Overload, window: (usize, usize)) -> OverloadFigures {
        overload_figures(&self.timeline, o, window)
    }

    /// Good responses over requests (1.0 when there were none).
    pub fn success_rate(&self) -> f64 {
        ratio(self.successes, self.requests)
    }

    /// Good responses within the deadline over requests.
    pub fn within_deadline_rate(&self) -> f64 {
        ratio(self.within_deadline, self.requests)
    }

    /// Requests per second of load.
    pub fn achieved_rate(&self) -> f64 {
        let secs = self.duration.as_secs_f64();
        if secs > 0.0 {
            self.requests as f64 / secs
        } else {
            0.0
        }
    }

    /// Each endpoint's share of all attempts, in fleet order.
    pub fn shares(&self) -> Vec<f64> {
        let total: u64 = self.attempts.iter().sum();
        self.attempts.iter().map(|&a| ratio(a, total)).collect()
    }
}

fn ratio(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        1.0
    } else {
        part as f64 / whole as f64
    }
}

/// The whole run.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// The scenario's name.
    pub scenario: String,
    /// The scenario's description.
    pub description: String,
    /// The seed used.
    pub seed: u64,
    /// The load, in words (which loop was used).
    pub load: String,
    /// The deadline of "success within deadline".
    pub deadline: Duration,
    /// Endpoint names, in fleet order.
    pub endpoints: Vec<String>,
    /// One result per arm, in scenario order.
    pub arms: Vec<ArmResult>,
    /// The overload figures' reference and window, for an overload scenario.
    pub overload: Option<(Overload, (usize, usize))>,
}
