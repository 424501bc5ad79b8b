//! The dashboard: the admin root (`/`) serves one self-contained page, which polls
//! `/dashboard.json` once a second; scripts read the same JSON.
//!
//! `/dashboard.json?since=N` holds, per service, the figures over the rolling window
//! ([`crate::live`]), requests in flight, the retry budget left, each endpoint's row (what
//! `/endpoints` shows, one row per address, plus its share of traffic and success over the
//! window), and the history samples after number `N` (all five minutes without `since`), so
//! the page fetches the history once and then only what is new.
//!
//! An answer is bounded whatever the proxy holds ([`answer`]): at most 256 endpoint rows a
//! service, 64 endpoints a sample, 64,000 samples and endpoint entries in all (the oldest
//! samples are left out first) and 2 MiB; what is left out is counted, and `cut` says why.
//!
//! A [`ticker`] task closes each service's second once a second. The page is read-only: it
//! has no control, and the admin server binds to 127.0.0.1 unless configured otherwise.

use crate::endpoints::{EndpointView, LastError};
use crate::shared::Shared;
use serde::Serialize;
use std::collections::HashMap;
use std::sync::Weak;
use std::time::Duration;
use tailguard_balance::{LoadKind, Policy};
use tailguard_record::live::{EndpointWindow, Sample, Window};

mod answer;

pub use answer::json;

/// How often the ticker closes a second, and the page polls.
pub const TICK: Duration = Duration::from_secs(1);

/// The page, with its script and style inline: nothing is fetched from elsewhere.
const PAGE: &str = include_str!("dashboard.html");

/// `/dashboard.json`.
#[derive(Debug, Serialize)]
pub struct Board {
    /// The proxy's process id: a page that sees it change starts its history afresh.
    pub boot: u32,
    /// When, in milliseconds since the proxy started.
    pub at_ms: u64,
    /// Milliseconds between samples.
    pub tick_ms: u64,
    /// Seconds in the rolling window.
    pub window_s: usize,
    /// Samples kept.
    pub history_len: usize,
    /// True while the proxy drains (shutting down).
    pub draining: bool,
    /// Why this answer holds less than was asked (`null`: all of it).
    pub cut: Option<String>,
    /// Every service, in routing order.
    pub services: Vec<ServiceBoard>,
}

/// One service on the dashboard.
#[derive(Debug, Serialize)]
pub struct ServiceBoard {
    /// Its name.
    pub name: String,
    /// Its balancer and resilience, in words.
    pub client: String,
    /// What an endpoint's `cost` counts: `ns` (peak EWMA round trip times `pending + 1`),
    /// `requests` (in flight), or `null` (the balancer ignores load).
    pub cost_unit: Option<&'static str>,
    /// The figures over the rolling window.
    pub window: Window,
    /// Requests in flight now.
    pub in_flight: u64,
    /// Retries the budget would grant now (`null`: retries are off).
    pub retries_left: Option<u64>,
    /// Every endpoint fails its health checks, so they are ignored (Envoy's panic mode).
    pub health_panic: bool,
    /// Each route's figures over the window, `[default]` last, as `linkerd viz routes`
    /// shows them (empty: the service has no routes).
    pub routes: Vec<RouteRow>,
    /// One row per endpoint address, [`answer::MAX_ROWS`] at most.
    pub endpoints: Vec<EndpointRow>,
    /// Endpoint addresses left out of `endpoints`.
    pub endpoints_omitted: usize,
    /// The samples after `since`, oldest first, each with [`answer::MAX_SERIES`] endpoints at
    /// most.
    pub history: Vec<Sample>,
    /// Samples after `since` left out of `history` (the oldest ones).
    pub history_omitted: usize,
}

/// One route of a service on the dashboard.
#[derive(Debug, Serialize)]
pub struct RouteRow {
    /// Its name (`[default]`: requests no route took).
    pub name: String,
    /// Its figures over the rolling window (requests a second, success, p50/p99/p99.9).
    pub window: Window,
}

/// One endpoint address on the dashboard: its `/endpoints` view (slots of one address
/// joined) and its figures over the window.
#[derive(Debug, Serialize)]
pub struct EndpointRow {
    /// What `/endpoints` shows.
    #[serde(flatten)]
    pub view: EndpointView,
    /// Over the rolling window.
    pub window: EndpointWindow,
}

/// The page, built once.
pub fn page() -> bytes::Bytes {
    static BUILT: std::sync::OnceLock<bytes::Bytes> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| tailguard_report::web::inline(PAGE).into())
        .clone()
}

/// What the balancer's cost counts.
fn cost_unit(policy: &Policy) -> Option<&'static str> {
    let load = match policy {
        Policy::RoundRobin | Policy::Random => return None,
        Policy::Heap => return Some("requests"),
        // Its own round trips times requests in flight, the fallback it picks by.
        Policy::Prequal(_) => return Some("ns"),
        Policy::BestOf { load, .. } | Policy::Aperture { load, .. } => load,
    };
    Some(match load {
        LoadKind::Pending => "requests",
        LoadKind::PeakEwma(_) => "ns",
    })
}

/// Joins the slots of one address (an upstream with a weight fills several): counts add up,
/// the cost is the cheapest slot's (the one a picker prefers), the state the most alive one.
pub fn by_address(views: Vec<EndpointView>) -> Vec<EndpointView> {
    let mut out: Vec<EndpointView> = Vec::new();
    // Where each address is in `out`: thousands of endpoints join in linear time.
    let mut at: HashMap<String, usize> = HashMap::new();
    for v in views {
        let Some(&i) = at.get(&v.addr) else {
            at.insert(v.addr.clone(), out.len());
            out.push(v);
            continue;
        };
        let o = &mut out[i];
        o.pending += v.pending;
        o.successes += v.successes;
        o.failures += v.failures;
        let total = o.successes + o.failures;
        o.success_rate = if total == 0 {
            1.0
        } else {
            o.successes as f64 / total as f64
        };
        o.cost = match (o.cost, v.cost) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let rank = |s: &str| match s {
            "alive" => 0,
            "probing" => 1,
            _ => 2,
        };
        if rank(v.state) < rank(o.state) {
            o.state = v.state;
            o.probe_in_ms = v.probe_in_ms;
        }
        o.ejections += v.ejections;
        o.last_error = newest(o.last_error.take(), v.last_error);
    }
    out
}

fn newest(a: Option<LastError>, b: Option<LastError>) -> Option<LastError> {
    match (a, b) {
        (Some(a), Some(b)) => Some(if b.ago_ms < a.ago_ms { b } else { a }),
        (a, b) => a.or(b),
    }
}

/// Closes every service's second once a [`TICK`] while the proxy lives: [`crate::Proxy`]
/// aborts it after its admin server stops, so the figures keep moving while it drains, and
/// it ends by itself once nothing else holds `shared`.
pub async fn ticker(shared: Weak<Shared>) {
    let mut every = tokio::time::interval(TICK);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        let Some(shared) = shared.upgrade() else {
            return;
        };
        tick(&shared);
    }
}

/// Closes every service's second now.
pub fn tick(shared: &Shared) {
    let now = shared.clock.now();
    let seq = shared.live.next_seq();
    let services = shared.services();
    for s in services.iter() {
        let endpoints = s.endpoints();
        let (retries, _) = endpoints.retries(now);
        s.live(&shared.live)
            .tick(now, seq, &endpoints.counts(), retries);
        for (_, live) in s.route_lives() {
            live.tick(now, seq, &[], 0);
        }
    }
    shared.live.publish(seq);
    let names: Vec<&str> = services.iter().map(|s| s.config.name.as_str()).collect();
    shared.live.retain(&names);
}
