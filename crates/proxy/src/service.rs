// A weighted split (`split: [{service, weight}]`): a service with no endpoints of its own
// whose requests each go to one leaf service, picked by smooth weighted round robin
// (`tailguard_balance::split`), one pick per process shared by every serving thread. The
// split service routes, picks the route, admits and bounds the request; from the pick on,
// the request is the leaf's (its endpoints, balancer, retries, hedging, budget, counters),
// and every attempt of it stays there. A reload that changes only weights keeps the leaves
// (`crate::start` keeps every service whose settings did not change).

//! A running service: its configuration, its current [`Endpoints`] generation, its admission
//! (`maxConcurrentRequests`, `concurrencyLimit`, `queue`: [`crate::admission`]), and routing of requests to services by host and path prefix.

use crate::admission::Gated;
use crate::clock::Clock;
use crate::config::{ServiceConfig, Upstream};
use crate::endpoints::Endpoints;
use crate::metrics::{Metrics, ServiceHandles};
use crate::route::DEFAULT_ROUTE;
use crate::upstream::Upstreams;
use arc_swap::ArcSwap;
use std::sync::{Arc, Mutex, OnceLock};
use tailguard_balance::split::{SmoothWeighted, SplitError};
use tailguard_client::ArmError;
use tailguard_record::live::{Board, Live};
use tailguard_resilience::rate::TokenBucket;

/// One named service, running.
#[derive(Debug)]
pub struct Service {
    /// Its configuration.
    pub config: ServiceConfig,
    /// Its upstream connection pools (kept across discovery updates, new on reload).
    pub upstreams: Upstreams,
    /// The current endpoint generation: read by every request without a lock.
    current: ArcSwap<Endpoints>,
    /// Held while a new generation replaces the current one (discovery updates, one at a time).
    replacing: Mutex<()>,
    /// Its bound on attempts in flight and its queue, one per process (`None`: unbounded).
    gate: Option<Arc<Gated>>,
    /// The rate limit's bucket, one per process (every serving thread takes from it).
    rate: Option<std::sync::Mutex<TokenBucket>>,
    /// Each route's rate limit bucket, by route index (`None`: no limit on that route).
    route_rates: Vec<Option<std::sync::Mutex<TokenBucket>>>,
    /// Metric handles by route (each configured route, then `[default]`) and by leaf (a
    /// split's, or this service as the one): `routes x leaves` cells, each filled on first use.
    handles: Vec<OnceLock<ServiceHandles>>,
    live: OnceLock<Arc<Live>>,
    /// The dashboard's figures of each route, then `[default]` (none without routes).
    route_live: Vec<Arc<Live>>,
    clock: Clock,
    seed: u64,
    /// Endpoint generations made so far: each draws from its own seed.
    generations: std::sync::atomic::AtomicU64,
    /// The leaves of a split service (`None`: the service has endpoints of its own).
    split: Option<Split>,
}

impl Service {
    /// A service over `upstreams` (its first endpoint set), served by `threads` threads.
    ///
    /// # Errors
    /// When the service's arm does not validate.
    pub fn new(
        config: ServiceConfig,
        upstreams: &[Upstream],
        clock: Clock,
        seed: u64,
        threads: usize,
    ) -> Result<Self, ArmError> {
        let pools = Upstreams::new(config.pool, threads);
        Self::over(config, upstreams, clock, seed, pools)
    }

    /// A service over `upstreams` whose connections come from `pools` (which other services
    /// may share: [`crate::start`] shares them between services with the same pool settings
    /// and no connection limit).
    ///
    /// # Errors
    /// When the service's arm does not validate.
    pub fn over(
        config: ServiceConfig,
        upstreams: &[Upstream],
        clock: Clock,
        seed: u64,
        pools: Upstreams,
    ) -> Result<Self, ArmError> {
        let endpoints = Endpoints::new(upstreams, &config.arm, clock.now(), seed)?;
        let gate = config.arm.admission.map(|a| Arc::new(Gated::new(a, clock)));
        let slots = config.routes.len() + 1;
        let handles = (0..slots).map(|_| OnceLock::new()).collect();
        let route_live = match config.routes.len() {
            0 => Vec::new(),
            _ => (0..slots)
                .map(|_| Arc::new(Live::new(clock.now())))
                .collect(),
        };
        let rate = config
            .rate_limit
            .map(|r| std::sync::Mutex::new(TokenBucket::new(r, clock.now())));
        let route_rates = config
            .routes
            .iter()
            .map(|r| {
                r.rate_limit
                    .map(|l| std::sync::Mutex::new(TokenBucket::new(l, clock.now())))
            })
            .collect();
        Ok(Self {
            upstreams: pools,
            config,
            current: ArcSwap::from_pointee(endpoints),
            replacing: Mutex::new(()),
            gate,
            rate,
            route_rates,
            handles,
            live: OnceLock::new(),
            route_live,
            clock,
            seed,
            generations: std::sync::atomic::AtomicU64::new(1),
            split: None,
        })
    }

    /// This service, sending each request to one of `split`'s leaves.
    #[must_use]
    pub fn with_split(mut self, split: Split) -> Self {
        let cells = (self.config.routes.len() + 1) * split.leaves().len();
        self.handles = (0..cells).map(|_| OnceLock::new()).collect();
        self.split = Some(split);
        self
    }

    /// The leaves of a split service (`None`: it has endpoints of its own).
    pub fn split(&self) -> Option<&Split> {
        self.split.as_ref()
    }

    /// The service the next request's attempts go to, and its index: the leaf whose turn it
    /// is for a split, else this one (index 0).
    pub fn leaf(self: &Arc<Self>) -> (usize, &Arc<Service>) {
        match &self.split {
            None => (0, self),
            Some(s) => s.pick(),
        }
    }

    /// The number of the current endpoint generation (1 at start, one more per update).
    pub fn generation(&self) -> u64 {
        self.generations.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The service's seed (mixed per generation and purpose).
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The proxy's clock.
    pub fn clock(&self) -> Clock {
        self.clock
    }

    /// The current endpoint generation.
    pub fn endpoints(&self) -> Arc<Endpoints> {
        self.current.load_full()
    }

    /// Replaces the endpoint set (a fresh balancer that keeps the accrual state, budget and
    /// counts of the addresses that remain; requests in flight finish on the old one).
    ///
    /// # Errors
    /// When the service's arm does not validate (it did at start, so only in theory).
    pub fn set_upstreams(&self, upstreams: &[Upstream]) -> Result<(), ArmError> {
        let now = self.clock.now();
        let generation = self
            .generations
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let seed = crate::seed::mix(self.seed, generation);
        let next = Endpoints::new(upstreams, &self.config.arm, now, seed)?;
        let _one = self.replacing.lock().unwrap_or_else(|p| p.into_inner());
        next.inherit(&self.current.load(), now);
        self.current.store(Arc::new(next));
        Ok(())
    }

    /// The metric handles of a request on `route` (its index; `None`: `[default]`) sent to
    /// leaf `leaf` (0 without a split), looked up in `metrics` the first time: labelled with
    /// the leaf's name (the service's own without a split) and the route's.
    pub fn handles(&self, metrics: &Metrics, route: Option<usize>, leaf: usize) -> &ServiceHandles {
        let routes = &self.config.routes;
        let slot = route.unwrap_or(routes.len());
        let leaves = self.split.as_ref().map_or(1, |s| s.leaves().len());
        self.handles[slot * leaves + leaf].get_or_init(|| {
            let name = match &self.split {
                None => &self.config.name,
                Some(s) => &s.leaves()[leaf].config.name,
            };
            let route = routes.get(slot).map_or(DEFAULT_ROUTE, |r| r.name.as_str());
            ServiceHandles::new(metrics, name, route)
        })
    }

    /// The dashboard's figures of `route` (`None`: `[default]`); `None` when the service has
    /// no routes (its own figures are the one route's).
    pub fn route_live(&self, route: Option<usize>) -> Option<&Arc<Live>> {
        self.route_live
            .get(route.unwrap_or(self.config.routes.len()))
    }

    /// Each route's name and dashboard figures, `[default]` last (none without routes).
    pub fn route_lives(&self) -> impl Iterator<Item = (&str, &Arc<Live>)> {
        let names = self
            .config
            .routes
            .iter()
            .map(|r| r.name.as_str())
            .chain(std::iter::once(DEFAULT_ROUTE));
        names.zip(&self.route_live)
    }

    /// This service's dashboard figures, looked up on `board` the first time (created at
    /// the clock's now when the board has none).
    pub fn live(&self, board: &Board) -> &Arc<Live> {
        self.live
            .get_or_init(|| board.service(&self.config.name, self.clock.now()))
    }

    /// Takes a token of the service's rate limit at `now`: `Err(wait)` when there is none (one
    /// comes after `wait`); always `Ok` without a limit.
    ///
    /// # Errors
    /// How long until a token, when the limit is reached.
    pub fn rate_admit(&self, now: std::time::Duration) -> Result<(), std::time::Duration> {
        take(self.rate.as_ref(), now)
    }

    /// Takes a token of route `route`'s rate limit at `now` (as [`Service::rate_admit`]).
    ///
    /// # Errors
    /// How long until a token, when the route's limit is reached.
    pub fn route_admit(
        &self,
        route: usize,
        now: std::time::Duration,
    ) -> Result<(), std::time::Duration> {
        take(self.route_rates.get(route).and_then(Option::as_ref), now)
    }

    /// The service's admission (`None`: attempts in flight are not bounded).
    pub fn gate(&self) -> Option<&Arc<Gated>> {
        self.gate.as_ref()
    }

    /// True when this service takes a request for `host` (no port) and `path`.
    pub fn matches(&self, host: Option<&str>, path: &str) -> bool {
        let host_ok = self
            .config
            .hosts
            .iter()
            .any(|h| h == "*" || host.is_some_and(|x| x.eq_ignore_ascii_case(h)));
        let path_ok = self
            .config
            .path_prefix
            .as_ref()
            .is_none_or(|p| prefix_matches(p, path));
        host_ok && path_ok
    }
}

/// A token from `bucket` at `now`, if there is a bucket.
fn take(
    bucket: Option<&std::sync::Mutex<TokenBucket>>,
    now: std::time::Duration,
) -> Result<(), std::time::Duration> {
    match bucket {
        None => Ok(()),
        Some(b) => b.lock().unwrap_or_else(|p| p.into_inner()).take(now),
    }
}

// A weighted split (`split: [{service, weight}]`): a service with no endpoints of its own
// whose requests each go to one leaf service, picked by smooth weighted round robin
// ([`tailguard_balance::split`]), one pick per process shared by every serving thread.
//
// The split service routes (hosts, path prefix), picks the route, admits (rate limits,
// in-flight limit) and bounds the request (`totalTimeoutMs`, a route's `timeoutMs`); from
// the pick on, the request is the leaf's: its endpoints, balancer, retries, hedging, budget
// and counters, and every attempt of the request stays in that leaf. A reload that changes
// only weights keeps the leaves (their pools and what they learned): see [`crate::start`].
/// The leaves of a split service and whose turn is next.
#[derive(Debug)]
pub struct Split {
    leaves: Vec<Arc<Service>>,
    order: Mutex<SmoothWeighted>,
}

impl Split {
    /// A split over `leaves`, each with its weight.
    ///
    /// # Errors
    /// When the weights cannot be split over (validated before, so only in theory).
    pub fn new(leaves: Vec<(Arc<Service>, u32)>) -> Result<Self, SplitError> {
        let weights: Vec<u32> = leaves.iter().map(|(_, w)| *w).collect();
        Ok(Self {
            order: Mutex::new(SmoothWeighted::new(&weights)?),
            leaves: leaves.into_iter().map(|(s, _)| s).collect(),
        })
    }

    /// The leaf of the next request, and its index.
    pub fn pick(&self) -> (usize, &Arc<Service>) {
        let i = self.order.lock().unwrap_or_else(|p| p.into_inner()).pick();
        (i, &self.leaves[i])
    }

    /// Every leaf, in the configured order.
    pub fn leaves(&self) -> &[Arc<Service>] {
        &self.leaves
    }
}

/// The first service of `services` taking `host` and `path`.
pub fn route<'a>(
    services: &'a [Arc<Service>],
    host: Option<&str>,
    path: &str,
) -> Option<&'a Arc<Service>> {
    services.iter().find(|s| s.matches(host, path))
}

/// True when `path` is under `prefix` on a segment boundary: `/api` takes `/api` and
/// `/api/x`, not `/apix` (a prefix ending in `/` is matched as it is).
pub fn prefix_matches(prefix: &str, path: &str) -> bool {
    match path.strip_prefix(prefix) {
        None => false,
        Some(rest) => prefix.ends_with('/') || rest.is_empty() || rest.starts_with('/'),
    }
}

/// The host part of a `Host` header or authority: `example.com:80` gives `example.com`,
/// `[::1]:80` gives `::1`.
pub fn host_only(authority: &str) -> &str {
    match authority.strip_prefix('[') {
        Some(rest) => before(rest, b']'),
        None => before(authority, b':'),
    }
}

/// `s` up to the first `end`, found by byte (an ASCII `end`, so the cut is a char boundary):
/// `str::split` sets up a UTF-8 searcher, about 130 instructions a request (issue 49).
fn before(s: &str, end: u8) -> &str {
    match s.bytes().position(|b| b == end) {
        Some(at) => &s[..at],
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::{host_only, prefix_matches};

    #[test]
    fn prefixes_match_on_segment_boundaries() {
        assert!(prefix_matches("/api", "/api"));
        assert!(prefix_matches("/api", "/api/x"));
        assert!(!prefix_matches("/api", "/apix"));
        assert!(prefix_matches("/api/", "/api/x"));
        assert!(!prefix_matches("/api/", "/api"));
        assert!(prefix_matches("/", "/anything"));
    }

    #[test]
    fn host_only_strips_ports_and_brackets() {
        assert_eq!(host_only("example.com:8080"), "example.com");
        assert_eq!(host_only("example.com"), "example.com");
        assert_eq!(host_only("[::1]:80"), "::1");
    }
}
