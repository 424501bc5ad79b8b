//! What the dashboard knows of a service: its requests as they end, and, once a second, a
//! sample of the second that ended, kept for five minutes.
//!
//! The request path only records into the second being filled (one short lock and a
//! histogram record per request). Once a second, [`Live::tick`] closes that second: it joins
//! the rolling window of the last [`WINDOW`] seconds (latency percentiles from the project's
//! histogram, not Prometheus buckets; rates over the time the window really spans) and
//! becomes a [`Sample`] of the history the charts draw. Endpoints are counted by address from
//! their cumulative attempt counts, so a new endpoint generation (discovery, reload) does not
//! break a line.
//!
//! Nothing here reads a clock: the tick's time comes in as `at`.

use serde::Serialize;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tailguard_histogram::Histogram;

/// Seconds in the rolling window of the current figures.
pub const WINDOW: usize = 10;
/// Samples kept: five minutes of seconds.
pub const HISTORY: usize = 300;

/// The requests of the second being filled.
#[derive(Debug, Default)]
struct Second {
    latency: Histogram,
    requests: u64,
    failures: u64,
}

/// One closed second of the window: its requests and how long it really lasted.
#[derive(Debug)]
struct Closed {
    second: Second,
    span: Duration,
}

/// An endpoint's cumulative counts at a tick, as [`Live::tick`] takes them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndpointCounts {
    /// Its address.
    pub addr: String,
    /// Attempts that ended, successes and failures.
    pub attempts: u64,
    /// Of which failed.
    pub failures: u64,
}

/// One endpoint's attempts in one sample.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct EndpointSecond {
    /// Its address.
    pub addr: String,
    /// Attempts that ended in the second.
    pub attempts: u64,
    /// Of which failed.
    pub failures: u64,
}

/// One second of a service, as the charts draw it. Latencies are of the rolling window that
/// ends with this second, so a line moves smoothly instead of jumping with each second's few
/// slow requests.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Sample {
    /// Its number, counting from 1 (`?since=` asks for the samples after one).
    pub seq: u64,
    /// When it ended, in milliseconds since the proxy started.
    pub at_ms: u64,
    /// Requests per second in this second.
    pub rps: f64,
    /// Successful requests over all that ended in this second (`null`: none ended).
    pub success: Option<f64>,
    /// Window percentiles in microseconds (`null`: no request in the window).
    pub p50_us: Option<u64>,
    /// See `p50_us`.
    pub p99_us: Option<u64>,
    /// See `p50_us`.
    pub p999_us: Option<u64>,
    /// Retries sent in this second.
    pub retries: u64,
    /// Each endpoint's attempts in this second.
    pub endpoints: Vec<EndpointSecond>,
}

/// The service's figures over the rolling window.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Window {
    /// How long the window spans, in milliseconds (up to [`WINDOW`] seconds).
    pub span_ms: u64,
    /// Requests that ended in it.
    pub requests: u64,
    /// Requests per second.
    pub rps: f64,
    /// Successful requests over all (`null`: none).
    pub success: Option<f64>,
    /// Latency percentiles in microseconds (`null`: no request).
    pub p50_us: Option<u64>,
    /// See `p50_us`.
    pub p99_us: Option<u64>,
    /// See `p50_us`.
    pub p999_us: Option<u64>,
    /// Retries per second.
    pub retries_per_s: f64,
}

/// One endpoint over the rolling window.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct EndpointWindow {
    /// Its share of the service's attempts (`null`: no attempt in the window).
    pub share: Option<f64>,
    /// Attempts per second.
    pub rps: f64,
    /// Successful attempts over all (`null`: none).
    pub success: Option<f64>,
}

/// The window, the history and what the next tick compares against.
#[derive(Debug, Default)]
struct Kept {
    window: VecDeque<Closed>,
    history: VecDeque<Sample>,
    /// Cumulative attempts and failures per address at the last tick.
    last: HashMap<String, (u64, u64)>,
    last_retries: Option<u64>,
    last_at: Option<Duration>,
    current: Window,
}

/// The live figures of one service (see the module docs).
#[derive(Debug, Default)]
pub struct Live {
    filling: Mutex<Second>,
    in_flight: AtomicU64,
    kept: Mutex<Kept>,
}

/// One request in flight; counted out when dropped.
#[derive(Debug)]
pub struct Started(Arc<Live>);

impl Drop for Started {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock leaves plain counters behind: keep counting.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Live {
    /// A request of this service started: in flight until the returned value drops.
    pub fn start(self: &Arc<Self>) -> Started {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        Started(Arc::clone(self))
    }

    /// Requests of this service in flight now.
    pub fn in_flight(&self) -> u64 {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// A request ended after `latency`, successfully or not.
    pub fn record(&self, latency: Duration, success: bool) {
        let mut s = lock(&self.filling);
        s.latency.record(latency);
        s.requests += 1;
        s.failures += u64::from(!success);
    }

    /// A request already recorded turned out to fail (a gRPC status in its trailers).
    pub fn fail(&self) {
        lock(&self.filling).failures += 1;
    }

    /// Closes the second that ends at `at` as sample number `seq` (one count for every
    /// service, so `?since=` means the same moment for all): `endpoints` are the endpoints'
    /// cumulative counts now and `retries` the retries sent so far.
    pub fn tick(&self, at: Duration, seq: u64, endpoints: &[EndpointCounts], retries: u64) {
        let second = std::mem::take(&mut *lock(&self.filling));
        let mut kept = lock(&self.kept);
        let k = &mut *kept;
        let span = k.last_at.map_or(Duration::ZERO, |t| at.saturating_sub(t));
        let first = k.last_at.is_none();
        k.last_at = Some(at);

        // Attempts since the last tick, by address (several slots of one address add up).
        let mut now: Vec<EndpointSecond> = Vec::new();
        let mut totals: HashMap<String, (u64, u64)> = HashMap::new();
        for e in endpoints {
            let t = totals.entry(e.addr.clone()).or_default();
            t.0 += e.attempts;
            t.1 += e.failures;
            if !now.iter().any(|n| n.addr == e.addr) {
                now.push(EndpointSecond {
                    addr: e.addr.clone(),
                    attempts: 0,
                    failures: 0,
                });
            }
        }
        for n in &mut now {
            let (a, f) = totals[&n.addr];
            // Counts only grow; a smaller one is an address that left and came back fresh.
            let (la, lf) = k.last.get(&n.addr).copied().unwrap_or((0, 0));
            let (la, lf) = if a < la || f < lf { (0, 0) } else { (la, lf) };
            if !first {
                n.attempts = a - la;
                n.failures = f - lf;
            }
        }
        k.last = totals;
        let retried = k
            .last_retries
            .map_or(0, |last| retries.saturating_sub(last));
        k.last_retries = Some(retries);

        let rps = per_second(second.requests, span);
        let success = ratio(
            second.requests.saturating_sub(second.failures),
            second.requests,
        );
        k.window.push_back(Closed { second, span });
        while k.window.len() > WINDOW {
            k.window.pop_front();
        }
        let mut merged = Histogram::new();
        let (mut requests, mut failures, mut window_span) = (0, 0, Duration::ZERO);
        for c in &k.window {
            merged.merge(&c.second.latency);
            requests += c.second.requests;
            failures += c.second.failures;
            window_span += c.span;
        }
        let q = |p: f64| (!merged.is_empty()).then(|| merged.quantile_us(p));
        let sample = Sample {
            seq,
            at_ms: millis(at),
            rps,
            success,
            p50_us: q(0.5),
            p99_us: q(0.99),
            p999_us: q(0.999),
            retries: retried,
            endpoints: now,
        };
        let retried_in_window: u64 = k
            .history
            .iter()
            .rev()
            .take(WINDOW - 1)
            .map(|s| s.retries)
            .sum::<u64>()
            + retried;
        k.current = Window {
            span_ms: millis(window_span),
            requests,
            rps: per_second(requests, window_span),
            success: ratio(requests.saturating_sub(failures), requests),
            p50_us: sample.p50_us,
            p99_us: sample.p99_us,
            p999_us: sample.p999_us,
            retries_per_s: per_second(retried_in_window, window_span),
        };
        k.history.push_back(sample);
        while k.history.len() > HISTORY {
            k.history.pop_front();
        }
    }

    /// The figures over the rolling window, as of the last tick.
    pub fn window(&self) -> Window {
        lock(&self.kept).current.clone()
    }

    /// Each address's figures over the rolling window, as of the last tick.
    pub fn endpoint_windows(&self) -> HashMap<String, EndpointWindow> {
        let kept = lock(&self.kept);
        let recent: Vec<&Sample> = kept.history.iter().rev().take(WINDOW).collect();
        let span: Duration = kept.window.iter().map(|c| c.span).sum();
        let mut sums: HashMap<String, (u64, u64)> = HashMap::new();
        for s in &recent {
            for e in &s.endpoints {
                let t = sums.entry(e.addr.clone()).or_default();
                t.0 += e.attempts;
                t.1 += e.failures;
            }
        }
        let all: u64 = sums.values().map(|(a, _)| a).sum();
        sums.into_iter()
            .map(|(addr, (a, f))| {
                let w = EndpointWindow {
                    share: ratio(a, all),
                    rps: per_second(a, span),
                    success: ratio(a - f, a),
                };
                (addr, w)
            })
            .collect()
    }

    /// The samples after number `since`, oldest first.
    pub fn history_since(&self, since: u64) -> Vec<Sample> {
        let kept = lock(&self.kept);
        kept.history
            .iter()
            .filter(|s| s.seq > since)
            .cloned()
            .collect()
    }
}

fn ratio(part: u64, whole: u64) -> Option<f64> {
    (whole > 0).then(|| part as f64 / whole as f64)
}

fn per_second(count: u64, span: Duration) -> f64 {
    if span.is_zero() {
        0.0
    } else {
        count as f64 / span.as_secs_f64()
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The live figures of every service by name: they outlive a reload, as the metrics do.
#[derive(Debug, Default)]
pub struct Board {
    services: Mutex<HashMap<String, Arc<Live>>>,
    seq: AtomicU64,
}

impl Board {
    /// The number of the next sample, counting from 1.
    pub fn next_seq(&self) -> u64 {
        self.seq.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// The live figures of service `name`, created the first time.
    pub fn service(&self, name: &str) -> Arc<Live> {
        let mut map = lock(&self.services);
        if let Some(live) = map.get(name) {
            return Arc::clone(live);
        }
        Arc::clone(map.entry(name.to_owned()).or_default())
    }

    /// Forgets services not in `names` (a reload removed them).
    pub fn retain(&self, names: &[&str]) {
        lock(&self.services).retain(|n, _| names.contains(&n.as_str()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(list: &[(&str, u64, u64)]) -> Vec<EndpointCounts> {
        list.iter()
            .map(|&(addr, attempts, failures)| EndpointCounts {
                addr: addr.into(),
                attempts,
                failures,
            })
            .collect()
    }

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn a_tick_closes_the_second_with_rates_percentiles_and_shares() {
        let live = Live::default();
        live.tick(secs(1), 1, &counts(&[("a", 5, 0), ("b", 5, 0)]), 2);
        for ms in 1..=100 {
            live.record(Duration::from_millis(ms), ms != 100);
        }
        live.tick(secs(2), 2, &counts(&[("a", 35, 1), ("b", 85, 0)]), 5);
        let h = live.history_since(0);
        assert_eq!(h.len(), 2);
        // The first tick has nothing to compare against: no attempts counted.
        assert_eq!(h[0].endpoints[0].attempts, 0);
        let s = &h[1];
        assert_eq!((s.seq, s.at_ms), (2, 2000));
        assert_eq!(s.rps, 100.0);
        assert_eq!(s.success, Some(0.99));
        assert_eq!(s.retries, 3);
        let p50 = s.p50_us.unwrap();
        assert!((49_900..=50_100).contains(&p50), "p50 {p50}");
        assert!(s.p999_us.unwrap() >= 99_900);
        let a = &s.endpoints[0];
        assert_eq!((a.addr.as_str(), a.attempts, a.failures), ("a", 30, 1));
        assert_eq!(s.endpoints[1].attempts, 80);
        let w = live.endpoint_windows();
        assert_eq!(w["a"].share, Some(30.0 / 110.0));
        assert_eq!(w["a"].success, Some(29.0 / 30.0));
        assert_eq!(
            live.history_since(1).len(),
            1,
            "since asks for what is newer"
        );
        let cur = live.window();
        assert_eq!(cur.requests, 100);
        // The first tick spans nothing: the window is one second long.
        assert_eq!(cur.span_ms, 1000);
        assert_eq!(cur.retries_per_s, 3.0);
    }

    #[test]
    fn the_window_keeps_ten_seconds_and_the_history_five_minutes() {
        let live = Live::default();
        for t in 0..400u64 {
            // One slow request in second 5 only.
            let ms = if t == 5 { 900 } else { 10 };
            live.record(Duration::from_millis(ms), true);
            live.tick(secs(t), t + 1, &[], 0);
        }
        assert_eq!(live.history_since(0).len(), HISTORY);
        assert_eq!(live.history_since(0)[0].seq, 101);
        let all = live.history_since(0);
        assert!(
            all.iter().all(|s| s.p999_us.unwrap() < 20_000),
            "{:?}",
            all[0]
        );
        let w = live.window();
        assert_eq!((w.requests, w.span_ms), (10, 10_000));
        assert_eq!(w.rps, 1.0);
    }

    #[test]
    fn an_address_that_comes_back_fresh_counts_from_zero_and_slots_of_one_address_add_up() {
        let live = Live::default();
        live.tick(secs(1), 1, &counts(&[("a", 50, 0), ("a", 50, 0)]), 0);
        live.tick(secs(2), 2, &counts(&[("a", 60, 0), ("a", 55, 0)]), 0);
        // A new generation without the old counts: 7 attempts, not a negative number.
        live.tick(secs(3), 3, &counts(&[("a", 7, 1)]), 0);
        let h = live.history_since(0);
        assert_eq!(h[1].endpoints.len(), 1);
        assert_eq!(h[1].endpoints[0].attempts, 15);
        assert_eq!(
            (h[2].endpoints[0].attempts, h[2].endpoints[0].failures),
            (7, 1)
        );
    }

    #[test]
    fn in_flight_counts_started_requests_until_they_drop() {
        let live = Arc::new(Live::default());
        let a = live.start();
        let b = live.start();
        assert_eq!(live.in_flight(), 2);
        drop(a);
        assert_eq!(live.in_flight(), 1);
        drop(b);
        assert_eq!(live.in_flight(), 0);
    }
}
