//! Live figures of a stream of requests, for dashboards (the proxy's, per service): the
//! requests as they end, and, once a second, a sample of the second that ended, kept for five
//! minutes.
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
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tailguard_histogram::Histogram;

/// Seconds in the rolling window of the current figures.
pub const WINDOW: usize = 10;
/// Samples kept: five minutes of seconds.
pub const HISTORY: usize = 300;

/// The requests of the second being filled. Its histogram is compact (2 significant digits,
/// 26 KiB instead of 188 KiB): one per service is filled, one rebuilt for the window.
#[derive(Debug)]
struct Second {
    latency: Histogram,
    requests: u64,
    failures: u64,
}

impl Default for Second {
    fn default() -> Self {
        Self {
            latency: Histogram::compact(),
            requests: 0,
            failures: 0,
        }
    }
}

impl Second {
    fn clear(&mut self) {
        self.latency.reset();
        self.requests = 0;
        self.failures = 0;
    }
}

/// One closed second of the window: its latencies as `(µs, count)` pairs (a second holds
/// few distinct values, so this is a few hundred bytes where the histogram is 26 KiB), its
/// requests and how long it really lasted.
#[derive(Debug)]
struct Closed {
    latency: Vec<(u64, u64)>,
    requests: u64,
    failures: u64,
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

/// One endpoint's attempts in one sample, written `[addr, attempts, failures]` (five minutes
/// of samples of many endpoints are most of `/dashboard.json`).
#[derive(Clone, Debug, PartialEq)]
pub struct EndpointSecond {
    /// Its address, shared by every sample that names it (five minutes of 20 endpoints in 10
    /// services are 60,000 of these).
    pub addr: Arc<str>,
    /// Attempts that ended in the second (`u32`: 24 bytes an entry instead of 32; a second
    /// of more than four billion attempts is counted as `u32::MAX`).
    pub attempts: u32,
    /// Of which failed.
    pub failures: u32,
}

impl Serialize for EndpointSecond {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        (&*self.addr, self.attempts, self.failures).serialize(s)
    }
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
    /// The addresses of the last tick, shared by the samples.
    names: HashSet<Arc<str>>,
    last_retries: u64,
    /// When the last tick closed (or the figures began).
    last_at: Duration,
    current: Window,
    /// The window's seconds merged, rebuilt at each tick.
    merged: Second,
}

/// The window's requests and failures, and the time its seconds really spanned.
struct WindowTotals {
    requests: u64,
    failures: u64,
    span: Duration,
}

impl Kept {
    /// Each address's attempts since the last tick (an address without any is left out), and
    /// remembers this tick's counts and names for the next.
    fn endpoint_seconds(&mut self, totals: &[(&str, u64, u64)]) -> Vec<EndpointSecond> {
        // Sized once: five minutes of samples keep these (grown by pushes, 20 endpoints took
        // room for 32).
        let mut now: Vec<EndpointSecond> = Vec::with_capacity(totals.len());
        let mut names = HashSet::new();
        let mut last = HashMap::new();
        for &(addr, a, f) in totals {
            let (la, lf) = self.last.get(addr).copied().unwrap_or((0, 0));
            last.insert(addr.to_owned(), (a, f));
            let name = self
                .names
                .get(addr)
                .cloned()
                .unwrap_or_else(|| Arc::from(addr));
            names.insert(Arc::clone(&name));
            // Counts only grow within a generation. A smaller one is a new generation that
            // did not inherit them (a reload, an address back after leaving, a slot fewer):
            // nothing is known of this second, so it counts none rather than a spike.
            if a < la || f < lf || a == la {
                continue;
            }
            let attempts = a - la;
            let count = |n: u64| u32::try_from(n).unwrap_or(u32::MAX);
            now.push(EndpointSecond {
                addr: name,
                attempts: count(attempts),
                failures: count((f - lf).min(attempts)),
            });
        }
        self.names = names;
        self.last = last;
        now
    }

    /// Adds a closed second to the window, dropping the oldest past [`WINDOW`], and rebuilds
    /// the merged latency from the window's seconds.
    fn push_to_window(&mut self, closed: Closed) -> WindowTotals {
        self.window.push_back(closed);
        while self.window.len() > WINDOW {
            self.window.pop_front();
        }
        let merged = &mut self.merged.latency;
        merged.reset();
        let mut totals = WindowTotals {
            requests: 0,
            failures: 0,
            span: Duration::ZERO,
        };
        for c in &self.window {
            for &(us, n) in &c.latency {
                merged.record_n_us(us, n);
            }
            totals.requests += c.requests;
            totals.failures += c.failures;
            totals.span += c.span;
        }
        totals
    }

    /// The window's figures once `sample` closes it (its percentiles are the window's; its
    /// retries are not yet in the history).
    fn window_figures(&self, totals: &WindowTotals, sample: &Sample) -> Window {
        let retried_in_window: u64 = self
            .history
            .iter()
            .rev()
            .take(WINDOW - 1)
            .map(|s| s.retries)
            .sum::<u64>()
            + sample.retries;
        let (requests, span) = (totals.requests, totals.span);
        Window {
            span_ms: millis(span),
            requests,
            rps: per_second(requests, span),
            success: ratio(requests.saturating_sub(totals.failures), requests),
            p50_us: sample.p50_us,
            p99_us: sample.p99_us,
            p999_us: sample.p999_us,
            retries_per_s: per_second(retried_in_window, span),
        }
    }
}

/// Attempts and failures by address (several slots of one address add up).
fn totals_by_addr(endpoints: &[EndpointCounts]) -> Vec<(&str, u64, u64)> {
    let mut totals: Vec<(&str, u64, u64)> = Vec::new();
    for e in endpoints {
        match totals.iter_mut().find(|t| t.0 == e.addr) {
            Some(t) => {
                t.1 += e.attempts;
                t.2 += e.failures;
            }
            None => totals.push((&e.addr, e.attempts, e.failures)),
        }
    }
    totals
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
pub struct Started<'a>(&'a Live);

impl Drop for Started<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock leaves plain counters behind: keep counting.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Live {
    /// The figures of a service that begins at `at`: its first second ends at the first tick.
    pub fn new(at: Duration) -> Self {
        let live = Self::default();
        lock(&live.kept).last_at = at;
        live
    }

    /// A request of this service started: in flight until the returned value drops.
    pub fn start(&self) -> Started<'_> {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        Started(self)
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

    /// Closes the second that ends at `at` as sample number `seq` (one count for every
    /// service, so `?since=` means the same moment for all): `endpoints` are the endpoints'
    /// cumulative counts now and `retries` the retries sent so far.
    pub fn tick(&self, at: Duration, seq: u64, endpoints: &[EndpointCounts], retries: u64) {
        let mut kept = lock(&self.kept);
        let k = &mut *kept;
        let second = self.close_filling();
        let span = at.saturating_sub(k.last_at);
        k.last_at = at;
        let now = k.endpoint_seconds(&totals_by_addr(endpoints));
        let retried = retries.saturating_sub(k.last_retries);
        k.last_retries = retries;

        let rps = per_second(second.requests, span);
        let success = ratio(
            second.requests.saturating_sub(second.failures),
            second.requests,
        );
        let totals = k.push_to_window(Closed { span, ..second });
        let merged = &k.merged.latency;
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
        k.current = k.window_figures(&totals, &sample);
        k.history.push_back(sample);
        while k.history.len() > HISTORY {
            k.history.pop_front();
        }
    }

    /// Takes the second being filled, leaving an empty one (its span is set by the caller).
    fn close_filling(&self) -> Closed {
        let mut filling = lock(&self.filling);
        let closed = Closed {
            latency: filling.latency.recorded_us(),
            requests: filling.requests,
            failures: filling.failures,
            span: Duration::ZERO,
        };
        filling.clear();
        closed
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
                let t = sums.entry(e.addr.to_string()).or_default();
                t.0 += u64::from(e.attempts);
                t.1 += u64::from(e.failures);
            }
        }
        let all: u64 = sums.values().map(|(a, _)| a).sum();
        sums.into_iter()
            .map(|(addr, (a, f))| {
                let w = EndpointWindow {
                    share: ratio(a, all),
                    rps: per_second(a, span),
                    success: ratio(a.saturating_sub(f), a),
                };
                (addr, w)
            })
            .collect()
    }

    /// The sample the last tick closed.
    pub fn last_sample(&self) -> Option<Sample> {
        lock(&self.kept).history.back().cloned()
    }

    /// The samples after number `since` up to number `upto`, oldest first.
    #[cfg(test)]
    pub fn history_since(&self, since: u64, upto: u64) -> Vec<Sample> {
        let kept = lock(&self.kept);
        kept.history
            .iter()
            .filter(|s| s.seq > since && s.seq <= upto)
            .cloned()
            .collect()
    }

    /// How many samples come after number `since` up to number `upto`, and how many endpoint
    /// entries they hold, counting at most `max_endpoints` a sample: what a copy of them
    /// ([`Live::history_copy`]) would cost, read without copying.
    pub fn history_shape(&self, since: u64, upto: u64, max_endpoints: usize) -> (usize, usize) {
        let kept = lock(&self.kept);
        kept.history
            .iter()
            .filter(|s| s.seq > since && s.seq <= upto)
            .fold((0, 0), |(n, e), s| {
                (n + 1, e + s.endpoints.len().min(max_endpoints))
            })
    }

    /// The newest `newest` samples after number `since` up to number `upto`, oldest first,
    /// each with its first `max_endpoints` endpoints: a copy taken under the lock (which
    /// [`Live::tick`] takes), to be rendered after it is released.
    pub fn history_copy(
        &self,
        since: u64,
        upto: u64,
        newest: usize,
        max_endpoints: usize,
    ) -> Vec<Sample> {
        let kept = lock(&self.kept);
        let mut out: Vec<Sample> = kept
            .history
            .iter()
            .rev()
            .filter(|s| s.seq > since && s.seq <= upto)
            .take(newest)
            .map(|s| Sample {
                endpoints: s.endpoints.iter().take(max_endpoints).cloned().collect(),
                ..*s
            })
            .collect();
        drop(kept);
        out.reverse();
        out
    }

    /// The samples after number `since` up to number `upto`, to be written as JSON straight
    /// from the history (no copy of five minutes of samples per request).
    pub fn history(self: &Arc<Self>, since: u64, upto: u64) -> History {
        History {
            live: Arc::clone(self),
            since,
            upto,
        }
    }
}

/// See [`Live::history`].
#[derive(Debug)]
pub struct History {
    live: Arc<Live>,
    since: u64,
    upto: u64,
}

impl Serialize for History {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let kept = lock(&self.live.kept);
        let (since, upto) = (self.since, self.upto);
        s.collect_seq(
            kept.history
                .iter()
                .filter(|x| x.seq > since && x.seq <= upto),
        )
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
    /// The number of the last sample every service has (a tick publishes it when it has
    /// closed them all, so `?since=` never skips one a poll saw half of).
    published: AtomicU64,
}

impl Board {
    /// The number of the next sample, counting from 1.
    pub fn next_seq(&self) -> u64 {
        self.published.load(Ordering::Acquire) + 1
    }

    /// Sample `seq` is in every service's history.
    pub fn publish(&self, seq: u64) {
        self.published.store(seq, Ordering::Release);
    }

    /// The number of the last sample every service has.
    pub fn published(&self) -> u64 {
        self.published.load(Ordering::Acquire)
    }

    /// The live figures of service `name`, created at `now` the first time.
    pub fn service(&self, name: &str, now: Duration) -> Arc<Live> {
        let mut map = lock(&self.services);
        if let Some(live) = map.get(name) {
            return Arc::clone(live);
        }
        let live = Arc::new(Live::new(now));
        map.insert(name.to_owned(), Arc::clone(&live));
        live
    }

    /// Forgets the services that are not in `names` (a reload removed them) and that no
    /// running service holds any more (requests of a removed one may still be finishing; a
    /// new one may have taken its figures since `names` was read).
    pub fn retain(&self, names: &[&str]) {
        lock(&self.services)
            .retain(|n, live| names.contains(&n.as_str()) || Arc::strong_count(live) > 1);
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

    const ALL: u64 = u64::MAX;

    #[test]
    fn a_tick_closes_the_second_with_rates_percentiles_and_shares() {
        let live = Live::new(secs(0));
        live.tick(secs(1), 1, &counts(&[("a", 5, 0), ("b", 5, 0)]), 2);
        for ms in 1..=100 {
            live.record(Duration::from_millis(ms), ms != 100);
        }
        live.tick(secs(2), 2, &counts(&[("a", 35, 1), ("b", 85, 0)]), 5);
        let h = live.history_since(0, ALL);
        assert_eq!(h.len(), 2);
        // The first second counts from the figures' start: 5 attempts each, 2 retries.
        assert_eq!((h[0].endpoints[0].attempts, h[0].retries), (5, 2));
        assert_eq!(h[0].rps, 0.0);
        let s = &h[1];
        assert_eq!((s.seq, s.at_ms), (2, 2000));
        assert_eq!(s.rps, 100.0);
        assert_eq!(s.success, Some(0.99));
        assert_eq!(s.retries, 3);
        let p50 = s.p50_us.unwrap();
        assert!(
            (49_500..=50_500).contains(&p50),
            "p50 {p50} (compact: within 1%)"
        );
        assert!(s.p999_us.unwrap() >= 99_000);
        let a = &s.endpoints[0];
        assert_eq!((&*a.addr, a.attempts, a.failures), ("a", 30, 1));
        assert_eq!(s.endpoints[1].attempts, 80);
        let w = live.endpoint_windows();
        assert_eq!(w["a"].share, Some(35.0 / 120.0));
        assert_eq!(w["a"].success, Some(34.0 / 35.0));
        assert_eq!(
            live.history_since(1, ALL).len(),
            1,
            "since asks for what is newer"
        );
        assert_eq!(
            live.history_since(0, 1).len(),
            1,
            "nothing past what is published"
        );
        let live = Arc::new(live);
        let json = serde_json::to_value(live.history(1, ALL)).unwrap();
        assert_eq!(json[0]["seq"], 2);
        assert_eq!(json[0]["endpoints"][0], serde_json::json!(["a", 30, 1]));
        let cur = live.window();
        assert_eq!(cur.requests, 100);
        assert_eq!(cur.span_ms, 2000);
        assert_eq!(
            cur.rps, 50.0,
            "100 requests over the two seconds the window spans"
        );
        assert_eq!(cur.retries_per_s, 2.5);
    }

    #[test]
    fn a_copy_of_the_history_keeps_the_newest_samples_and_the_first_endpoints() {
        let live = Live::new(secs(0));
        for t in 1..=10u64 {
            live.tick(
                secs(t),
                t,
                &counts(&[("a", t, 0), ("b", t, 0), ("c", t, 0)]),
                0,
            );
        }
        assert_eq!(live.history_shape(0, ALL, 2), (10, 20));
        assert_eq!(live.history_shape(7, 9, 5), (2, 6));
        let copy = live.history_copy(0, 9, 3, 2);
        let seqs: Vec<u64> = copy.iter().map(|s| s.seq).collect();
        assert_eq!(seqs, [7, 8, 9]);
        assert!(copy
            .iter()
            .all(|s| s.endpoints.len() == 2 && &*s.endpoints[0].addr == "a"));
    }

    #[test]
    fn the_window_keeps_ten_seconds_and_the_history_five_minutes() {
        let live = Live::new(secs(0));
        for t in 1..=400u64 {
            // One slow request in second 5 only.
            let ms = if t == 5 { 900 } else { 10 };
            live.record(Duration::from_millis(ms), true);
            live.tick(secs(t), t, &[], 0);
        }
        let all = live.history_since(0, ALL);
        assert_eq!(all.len(), HISTORY);
        assert_eq!(all[0].seq, 101);
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
    fn a_new_generation_without_the_counts_counts_none_rather_than_a_spike() {
        let live = Live::new(secs(0));
        // Two slots of one address add up.
        live.tick(secs(1), 1, &counts(&[("a", 50, 0), ("a", 50, 0)]), 0);
        live.tick(secs(2), 2, &counts(&[("a", 60, 0), ("a", 55, 0)]), 0);
        // A slot fewer (or a reload): the total drops; this second is not known.
        live.tick(secs(3), 3, &counts(&[("a", 60, 3)]), 0);
        live.tick(secs(4), 4, &counts(&[("a", 67, 4)]), 0);
        let h = live.history_since(0, ALL);
        assert_eq!(h[0].endpoints[0].attempts, 100);
        assert_eq!(h[1].endpoints[0].attempts, 15);
        assert!(h[2].endpoints.is_empty(), "{:?}", h[2]);
        let e = &h[3].endpoints[0];
        assert_eq!((e.attempts, e.failures), (7, 1));
        // Failures never exceed attempts, so a success rate stays within 0 and 1.
        live.tick(secs(5), 5, &counts(&[("a", 68, 9)]), 0);
        let last = live.history_since(4, ALL);
        assert_eq!(
            (last[0].endpoints[0].attempts, last[0].endpoints[0].failures),
            (1, 1)
        );
        let w = live.endpoint_windows();
        assert!(w["a"].success.unwrap() >= 0.0);
        // A second's counts are kept in 32 bits; more is counted as the most they hold.
        live.tick(
            secs(6),
            6,
            &counts(&[("a", 68 + (1 << 33), 9 + (1 << 33))]),
            0,
        );
        let big = &live.history_since(5, ALL)[0].endpoints[0];
        assert_eq!((big.attempts, big.failures), (u32::MAX, u32::MAX));
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

    #[test]
    fn the_board_forgets_a_removed_service_only_when_nothing_holds_it() {
        let board = Board::default();
        let held = board.service("kept", secs(0));
        let _ = board.service("gone", secs(0));
        board.retain(&[]);
        assert!(
            Arc::ptr_eq(&held, &board.service("kept", secs(1))),
            "still held"
        );
        let fresh = board.service("gone", secs(2));
        assert_eq!(fresh.window().span_ms, 0, "created afresh");
        assert_eq!(board.next_seq(), 1);
        board.publish(1);
        assert_eq!((board.published(), board.next_seq()), (1, 2));
    }
}
