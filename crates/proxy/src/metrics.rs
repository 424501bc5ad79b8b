//! Prometheus metrics of the proxy, per service and per endpoint, served on the admin
//! `/metrics` page.
//!
//! One [`Metrics`] lives for the whole process (it survives reloads); services and endpoints
//! are labels. Latencies are in seconds, with buckets from 100 µs to about 13 s.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// Labels of a per-service series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ServiceLabels {
    /// The service name.
    pub service: String,
}

/// Labels of a per-route series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabels {
    /// The service name.
    pub service: String,
    /// The route (`[default]`: the service's own policy).
    pub route: String,
}

/// Labels of a refusal by a service's admission.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AdmissionLabels {
    /// The service name.
    pub service: String,
    /// Why: `queue-full` (or no queue), `displaced`, `waited`, `deadline`.
    pub reason: String,
}

/// Labels of a per-route series split by response class (`2xx` .. `5xx`, `error`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ClassLabels {
    /// The service name.
    pub service: String,
    /// The route (`[default]`: the service's own policy).
    pub route: String,
    /// The status class.
    pub class: String,
}

/// Labels of a per-endpoint series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EndpointLabels {
    /// The service name.
    pub service: String,
    /// The endpoint address.
    pub endpoint: String,
}

/// Labels of a per-endpoint series split by class or state.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EndpointClassLabels {
    /// The service name.
    pub service: String,
    /// The endpoint address.
    pub endpoint: String,
    /// The status class, the accrual state entered, or a probe's result (`ok`, `failed`, `distrusted`, `skipped`).
    pub class: String,
}

/// Labels of a gRPC attempt.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GrpcLabels {
    /// The service.
    pub service: String,
    /// The endpoint.
    pub endpoint: String,
    /// The `grpc-status` code.
    pub grpc_status: String,
}

/// Labels of a request failed by its client.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ClientErrorLabels {
    /// The service (empty: refused before routing).
    pub service: String,
    /// `refused`, `malformed`, `aborted`, `idle`, `too_slow`.
    pub kind: String,
}

fn latency() -> Histogram {
    Histogram::new(exponential_buckets(0.0001, 2.0, 18))
}

/// Every metric family the proxy exports.
#[derive(Debug)]
pub struct Metrics {
    /// Downstream responses by class.
    pub requests: Family<ClassLabels, Counter>,
    /// Request latency, downstream view (first attempt sent to response headers).
    pub latency: Family<RouteLabels, Histogram, fn() -> Histogram>,
    /// Upstream attempts by endpoint and class.
    pub attempts: Family<EndpointClassLabels, Counter>,
    /// Attempt latency per endpoint.
    pub attempt_latency: Family<EndpointLabels, Histogram, fn() -> Histogram>,
    /// Retries sent.
    pub retries: Family<RouteLabels, Counter>,
    /// Retries refused by the budget.
    pub budget_exhausted: Family<RouteLabels, Counter>,
    /// Failure accrual transitions (`class` = `dead` or `alive`).
    pub accrual: Family<EndpointClassLabels, Counter>,
    /// Attempts in flight per endpoint (set when scraped, from the current endpoints).
    pub pending: Family<EndpointLabels, Gauge>,
    /// The balancer's cost per endpoint (set when scraped; absent for load-blind balancers).
    pub cost: Family<EndpointLabels, Gauge<f64, AtomicU64>>,
    /// gRPC attempts by endpoint and `grpc-status`.
    pub grpc_attempts: Family<GrpcLabels, Counter>,
    /// Requests refused or failed because of the client (never counted against an endpoint),
    /// by service (empty before routing) and kind.
    pub client_errors: Family<ClientErrorLabels, Counter>,
    /// Load probes of a probing balancer, by endpoint and result (`ok`, `failed`,
    /// `distrusted`, `skipped`).
    pub probes: Family<EndpointClassLabels, Counter>,
    /// Responses whose body was cut short after their head went downstream.
    pub truncated: Family<RouteLabels, Counter>,
    /// Backup requests sent.
    pub hedges: Family<RouteLabels, Counter>,
    /// Backup requests whose answer was the one used.
    pub hedge_wins: Family<RouteLabels, Counter>,
    /// Backups the hedge budget refused.
    pub hedge_budget_exhausted: Family<RouteLabels, Counter>,
    /// Backups that rescued an attempt at a silent endpoint.
    pub rescues: Family<RouteLabels, Counter>,
    /// Requests refused by a rate limit, by service and route.
    pub rate_limited: Family<RouteLabels, Counter>,
    /// Requests the service's admission refused, by reason.
    pub admission_refused: Family<AdmissionLabels, Counter>,
    /// Retries and backups not sent for want of room under the service's admission.
    pub admission_extra_refused: Family<RouteLabels, Counter>,
    /// The bound on attempts in flight per service (set when scraped).
    pub admission_limit: Family<ServiceLabels, Gauge>,
    /// Attempts holding a place per service (set when scraped).
    pub admission_in_flight: Family<ServiceLabels, Gauge>,
    /// Requests waiting in the admission queue per service (set when scraped).
    pub admission_waiting: Family<ServiceLabels, Gauge>,
    /// The current hedge delay per service (set when scraped; absent until it has data).
    pub hedge_delay: Family<ServiceLabels, Gauge<f64, AtomicU64>>,
    /// How late the event loop ran a timer due every 10 ms ([`crate::lag`]).
    pub event_loop_delay: Histogram,
    /// Access log lines dropped (the queue was full, or the file could not take them).
    pub access_log_dropped: Counter,
    /// Spans dropped (the queue was full, or the collector did not take them).
    pub trace_spans_dropped: Counter,
    /// Spans the collector took.
    pub trace_spans_exported: Counter,
    /// Entries the upstream pools keep, per service and map (set when scraped).
    pub pool_entries: Family<PoolLabels, Gauge>,
    /// The endpoints that have per-endpoint series, so that an endpoint gone from discovery
    /// and idle loses them ([`Metrics::retire`]).
    tracked: Mutex<HashMap<(String, SocketAddr), Tracked>>,
    registry: Registry,
}

/// Labels of an upstream pool's size.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PoolLabels {
    /// The service.
    pub service: String,
    /// `http1` (endpoints with a free list), `http2` (endpoints with a connection), `limit`
    /// (endpoints with a connection-limit semaphore) or `learned` (endpoints that chose `h2`).
    pub pool: String,
}

/// What [`Metrics::retire`] knows of one endpoint of one service with series.
#[derive(Debug, Default)]
struct Tracked {
    /// The `grpc-status` codes it has series of (a bit per code).
    grpc: [u64; 4],
    /// Its attempts and probes counted when last looked at.
    total: u64,
    /// Since when it has been absent from discovery with nothing counted (`None`: present,
    /// or active).
    quiet_since: Option<Duration>,
}

/// Accrual states with a series ([`Metrics::accrual`]).
const ACCRUAL_STATES: [&str; 2] = ["dead", "alive"];
/// Probe results with a series ([`Metrics::probes`]).
const PROBE_RESULTS: [&str; 4] = ["ok", "failed", "distrusted", "skipped"];

impl Metrics {
    /// Registers every family.
    pub fn new() -> Self {
        let mut m = Self {
            requests: Family::default(),
            latency: Family::new_with_constructor(latency),
            attempts: Family::default(),
            attempt_latency: Family::new_with_constructor(latency),
            retries: Family::default(),
            budget_exhausted: Family::default(),
            accrual: Family::default(),
            pending: Family::default(),
            cost: Family::default(),
            grpc_attempts: Family::default(),
            client_errors: Family::default(),
            probes: Family::default(),
            truncated: Family::default(),
            hedges: Family::default(),
            hedge_wins: Family::default(),
            hedge_budget_exhausted: Family::default(),
            rescues: Family::default(),
            rate_limited: Family::default(),
            hedge_delay: Family::default(),
            admission_refused: Family::default(),
            admission_extra_refused: Family::default(),
            admission_limit: Family::default(),
            admission_in_flight: Family::default(),
            admission_waiting: Family::default(),
            event_loop_delay: Histogram::new(exponential_buckets(0.000_05, 2.0, 16)),
            pool_entries: Family::default(),
            access_log_dropped: Counter::default(),
            trace_spans_dropped: Counter::default(),
            trace_spans_exported: Counter::default(),
            tracked: Mutex::new(HashMap::new()),
            registry: Registry::with_prefix("tailguard_proxy"),
        };
        // A macro so that each family is one line (name, help, field); the order is the
        // exposition's.
        macro_rules! register {
            ($($name:literal, $help:literal, $family:ident;)*) => {
                $(m.registry.register($name, $help, m.$family.clone());)*
            };
        }
        register! {
            "requests", "Responses whose head went downstream, by route and class (error: none did)", requests;
            "responses_truncated", "Responses whose body broke off after their head went downstream", truncated;
            "request_latency_seconds", "Request latency, by route", latency;
            "attempts", "Upstream attempts", attempts;
            "attempt_latency_seconds", "Upstream attempt latency", attempt_latency;
            "retries", "Retries sent", retries;
            "retry_budget_exhausted", "Retries refused by the budget", budget_exhausted;
            "accrual_transitions", "Accrual state changes", accrual;
            "endpoint_pending", "Attempts in flight", pending;
            "grpc_attempts", "Upstream gRPC attempts by grpc-status code", grpc_attempts;
            "client_errors", "Requests failed by the client (malformed, aborted, idle or too slow body; refused request)", client_errors;
            "probes", "Load probes of a probing balancer, by result (ok; failed: no answer, an error or bad JSON; distrusted: the answer contradicted what the proxy saw there; skipped: not sent, the endpoint had the most probes out already)", probes;
            "hedges", "Backup requests sent after the hedge delay", hedges;
            "hedge_wins", "Backup requests that answered first with a success", hedge_wins;
            "hedge_budget_exhausted", "Backup requests refused by the hedge budget", hedge_budget_exhausted;
            "rate_limited", "Requests answered 429 by a rate limit (rateLimit), by service and route", rate_limited;
            "rescues", "Backup requests for an attempt whose endpoint had answered nothing for the backup delay and ten times its own mean latency (a stall), charged to the retry budget and also counted in retries", rescues;
            "admission_refused", "Requests refused by the service's admission (503, gRPC UNAVAILABLE, Retry-After: 1; never an endpoint's fault), by reason: queue-full (no room and the queue full or absent), displaced (by a more critical request), waited (maxWaitMs), deadline (too near for the expected wait)", admission_refused;
            "admission_extra_refused", "Retries and backups not sent: no room under the service's admission, or requests waiting", admission_extra_refused;
            "admission_limit", "The bound on attempts in flight (the adaptive concurrencyLimit under maxConcurrentRequests)", admission_limit;
            "admission_in_flight", "Attempts holding a place under the service's admission", admission_in_flight;
            "admission_waiting", "Requests waiting in the service's admission queue", admission_waiting;
            "hedge_delay_seconds", "How long a hedged request waits before its backup (the live quantile of attempt latency)", hedge_delay;
            "endpoint_cost", "Balancer cost (pending requests, or peak EWMA nanoseconds x (pending + 1))", cost;
            "event_loop_delay_seconds", "How late the event loop ran a timer due every 10 ms (a stalled loop delays every request on it; includes 1 ms of timer rounding)", event_loop_delay;
            "upstream_pool_entries", "Endpoints the upstream pools keep an entry for (services that share pools show the same ones)", pool_entries;
            "trace_spans_dropped", "Spans dropped: the queue (8,192 spans) was full, or the collector refused a batch, failed or took over 5 s", trace_spans_dropped;
            "trace_spans_exported", "Spans the collector took", trace_spans_exported;
            "access_log_dropped", "Access log lines dropped: the queue (10,000 lines) was full because the writer could not keep up or its reader stopped, or the file refused them", access_log_dropped;
        }
        m
    }

    /// Counts a gRPC attempt to `endpoint` of `service` that ended with `code`.
    pub fn grpc_attempt(&self, service: &str, endpoint: SocketAddr, code: u8) {
        let labels = GrpcLabels {
            service: service.to_owned(),
            endpoint: endpoint.to_string(),
            grpc_status: code.to_string(),
        };
        // One lookup when the series exists (every call but the first); tracked when made.
        if let Some(c) = self.grpc_attempts.get(&labels) {
            c.inc();
            return;
        }
        let mut tracked = self.tracked();
        let t = tracked
            .entry((labels.service.clone(), endpoint))
            .or_default();
        t.grpc[usize::from(code / 64)] |= 1 << (code % 64);
        drop(tracked);
        self.grpc_attempts.get_or_create(&labels).inc();
    }

    /// Counts a load probe of `endpoint` of `service` by what became of it: `ok`, `failed`,
    /// `distrusted` or `skipped`.
    pub fn probe(&self, service: &str, endpoint: SocketAddr, class: &str) {
        let labels = EndpointClassLabels {
            service: service.to_owned(),
            endpoint: endpoint.to_string(),
            class: class.to_owned(),
        };
        if let Some(c) = self.probes.get(&labels) {
            c.inc();
            return;
        }
        self.track(service, endpoint);
        self.probes.get_or_create(&labels).inc();
    }

    fn tracked(&self) -> std::sync::MutexGuard<'_, HashMap<(String, SocketAddr), Tracked>> {
        self.tracked.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Notes that `endpoint` of `service` has (or is about to have) per-endpoint series.
    fn track(&self, service: &str, endpoint: SocketAddr) {
        self.tracked()
            .entry((service.to_owned(), endpoint))
            .or_default();
    }

    /// The endpoints (of any service) that have per-endpoint series now.
    pub fn tracked_endpoints(&self) -> usize {
        self.tracked().len()
    }

    /// Removes the per-endpoint series (`attempts`, `attempt_latency_seconds`,
    /// `accrual_transitions`, `grpc_attempts`, `probes`) of every endpoint that has been absent
    /// from `present` (the current endpoints, by service) with no attempt or probe counted for
    /// `retain`, looked at `now`; returns how many endpoints lost theirs. An endpoint comes back
    /// with new series, from zero. Called every fraction of `retain` ([`crate::retain`]), so an
    /// endpoint goes between `retain` and `retain` plus that period after its last use.
    pub fn retire(
        &self,
        present: &HashMap<String, HashSet<SocketAddr>>,
        now: Duration,
        retain: Duration,
    ) -> usize {
        let mut gone = Vec::new();
        let mut tracked = self.tracked();
        tracked.retain(|(service, endpoint), t| {
            let here = present.get(service).is_some_and(|a| a.contains(endpoint));
            let total = self.activity(service, *endpoint);
            if here || total != t.total {
                t.total = total;
                t.quiet_since = (!here).then_some(now);
                return true;
            }
            let since = *t.quiet_since.get_or_insert(now);
            if now.saturating_sub(since) < retain {
                return true;
            }
            gone.push((service.clone(), *endpoint, t.grpc));
            false
        });
        drop(tracked);
        for (service, endpoint, grpc) in &gone {
            self.remove_series(service, *endpoint, grpc);
        }
        gone.len()
    }

    /// Attempts and probes counted for `endpoint` of `service`, over every class.
    fn activity(&self, service: &str, endpoint: SocketAddr) -> u64 {
        let mut labels = EndpointClassLabels {
            service: service.to_owned(),
            endpoint: endpoint.to_string(),
            class: String::new(),
        };
        let mut total = 0;
        for class in CLASSES {
            class.clone_into(&mut labels.class);
            total += self.attempts.get(&labels).map_or(0, |c| c.get());
        }
        for class in PROBE_RESULTS {
            class.clone_into(&mut labels.class);
            total += self.probes.get(&labels).map_or(0, |c| c.get());
        }
        total
    }

    fn remove_series(&self, service: &str, endpoint: SocketAddr, grpc: &[u64; 4]) {
        let mut labels = EndpointClassLabels {
            service: service.to_owned(),
            endpoint: endpoint.to_string(),
            class: String::new(),
        };
        for class in CLASSES {
            class.clone_into(&mut labels.class);
            self.attempts.remove(&labels);
        }
        for state in ACCRUAL_STATES {
            state.clone_into(&mut labels.class);
            self.accrual.remove(&labels);
        }
        for class in PROBE_RESULTS {
            class.clone_into(&mut labels.class);
            self.probes.remove(&labels);
        }
        let EndpointClassLabels {
            service, endpoint, ..
        } = labels;
        let mut labels = GrpcLabels {
            service,
            endpoint,
            grpc_status: String::new(),
        };
        for code in 0..=u8::MAX {
            if grpc[usize::from(code / 64)] & (1 << (code % 64)) != 0 {
                labels.grpc_status = code.to_string();
                self.grpc_attempts.remove(&labels);
            }
        }
        let GrpcLabels {
            service, endpoint, ..
        } = labels;
        self.attempt_latency
            .remove(&EndpointLabels { service, endpoint });
    }

    /// Counts a request of `service` (empty: not routed yet) failed by its client.
    pub fn client_error(&self, service: &str, kind: &str) {
        let labels = ClientErrorLabels {
            service: service.to_owned(),
            kind: kind.to_owned(),
        };
        self.client_errors.get_or_create(&labels).inc();
    }

    /// Counts a request `service`'s admission refused, and why.
    pub fn admission_refused(&self, service: &str, reason: &str) {
        let labels = AdmissionLabels {
            service: service.to_owned(),
            reason: reason.to_owned(),
        };
        self.admission_refused.get_or_create(&labels).inc();
    }

    /// Counts a request `service`'s rate limit refused on `route`.
    pub fn rate_limited(&self, service: &str, route: &str) {
        let labels = RouteLabels {
            service: service.to_owned(),
            route: route.to_owned(),
        };
        self.rate_limited.get_or_create(&labels).inc();
    }

    /// The Prometheus text exposition.
    pub fn encode(&self) -> String {
        tailguard_http::exposition::encode(&self.registry, None).1
    }

    /// `/metrics`, in the format the request's `Accept` header prefers.
    pub fn response(
        &self,
        headers: &http::HeaderMap,
    ) -> http::Response<http_body_util::Full<bytes::Bytes>> {
        tailguard_http::exposition::response(&self.registry, headers)
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

/// The class labels, in [`class_index`] order: statuses by hundreds, then `error` (no
/// response).
pub const CLASSES: [&str; 6] = ["1xx", "2xx", "3xx", "4xx", "5xx", "error"];

/// The index in [`CLASSES`] of a status code (`None`: no response).
pub fn class_index(status: Option<u16>) -> usize {
    match status {
        Some(100..=199) => 0,
        Some(200..=299) => 1,
        Some(300..=399) => 2,
        Some(400..=499) => 3,
        Some(_) => 4,
        None => 5,
    }
}

/// One series per class, each looked up (label strings built) on first use only.
#[derive(Debug, Default)]
pub struct PerClass([OnceLock<Counter>; 6]);

impl PerClass {
    /// The counter of class `i` ([`class_index`]), from `make` the first time.
    pub fn get(&self, i: usize, make: impl FnOnce(&'static str) -> Counter) -> &Counter {
        self.0[i].get_or_init(|| make(CLASSES[i]))
    }
}

/// The metric handles of one route of one service, looked up once: the request path then
/// counts and observes without building label strings or hashing them.
#[derive(Debug)]
pub struct ServiceHandles {
    labels: RouteLabels,
    requests: PerClass,
    /// Request latency.
    pub latency: Histogram,
    /// Retries sent.
    pub retries: Counter,
    /// Retries refused by the budget.
    pub budget_exhausted: Counter,
    /// Responses cut short after their head.
    pub truncated: Counter,
    /// Backup requests sent.
    pub hedges: Counter,
    /// Backup requests that won.
    pub hedge_wins: Counter,
    /// Backups refused by the hedge budget.
    pub hedge_budget_exhausted: Counter,
    /// Backups that rescued an attempt at a silent endpoint.
    pub rescues: Counter,
    /// Retries and backups not sent for want of room under the service's admission.
    pub admission_no_room: Counter,
}

impl ServiceHandles {
    /// The handles of route `route` of service `name` in `m`.
    pub fn new(m: &Metrics, name: &str, route: &str) -> Self {
        let labels = RouteLabels {
            service: name.to_owned(),
            route: route.to_owned(),
        };
        Self {
            latency: m.latency.get_or_create(&labels).clone(),
            retries: m.retries.get_or_create(&labels).clone(),
            budget_exhausted: m.budget_exhausted.get_or_create(&labels).clone(),
            truncated: m.truncated.get_or_create(&labels).clone(),
            hedges: m.hedges.get_or_create(&labels).clone(),
            hedge_wins: m.hedge_wins.get_or_create(&labels).clone(),
            hedge_budget_exhausted: m.hedge_budget_exhausted.get_or_create(&labels).clone(),
            rescues: m.rescues.get_or_create(&labels).clone(),
            admission_no_room: m.admission_extra_refused.get_or_create(&labels).clone(),
            requests: PerClass::default(),
            labels,
        }
    }

    /// The downstream responses counter of `status`'s class (`None`: no head went down).
    pub fn requests(&self, m: &Metrics, status: Option<u16>) -> &Counter {
        self.requests.get(class_index(status), |class| {
            let labels = ClassLabels {
                service: self.labels.service.clone(),
                route: self.labels.route.clone(),
                class: class.to_owned(),
            };
            m.requests.get_or_create(&labels).clone()
        })
    }
}

/// The metric handles of one endpoint of one service, looked up once. Every series it makes
/// is tracked ([`Metrics::retire`]): one made again after its endpoint's were removed (by an
/// attempt that outlived the retention) is removed in its turn.
#[derive(Debug)]
pub struct EndpointHandles {
    labels: EndpointLabels,
    addr: SocketAddr,
    attempts: PerClass,
    /// Attempt latency.
    pub latency: Histogram,
}

impl EndpointHandles {
    /// The handles of `endpoint` of `service` in `m`.
    pub fn new(m: &Metrics, service: &str, endpoint: SocketAddr) -> Self {
        m.track(service, endpoint);
        let labels = EndpointLabels {
            service: service.to_owned(),
            endpoint: endpoint.to_string(),
        };
        Self {
            latency: m.attempt_latency.get_or_create(&labels).clone(),
            attempts: PerClass::default(),
            addr: endpoint,
            labels,
        }
    }

    /// The attempts counter of a status's class (`None`: no response).
    pub fn attempts(&self, m: &Metrics, status: Option<u16>) -> &Counter {
        self.attempts.get(class_index(status), |class| {
            m.track(&self.labels.service, self.addr);
            m.attempts.get_or_create(&self.labels(class)).clone()
        })
    }

    /// Counts an accrual transition into `state` (`dead` or `alive`).
    pub fn accrual(&self, m: &Metrics, state: &'static str) {
        debug_assert!(ACCRUAL_STATES.contains(&state));
        m.track(&self.labels.service, self.addr);
        m.accrual.get_or_create(&self.labels(state)).inc();
    }

    /// This endpoint's labels with a class or state.
    pub fn labels(&self, class: &str) -> EndpointClassLabels {
        EndpointClassLabels {
            service: self.labels.service.clone(),
            endpoint: self.labels.endpoint.clone(),
            class: class.to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(i: u8) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, i], 80))
    }

    fn present(addrs: &[SocketAddr]) -> HashMap<String, HashSet<SocketAddr>> {
        HashMap::from([("web".to_owned(), addrs.iter().copied().collect())])
    }

    /// Series lines naming `endpoint`.
    fn series_of(m: &Metrics, endpoint: SocketAddr) -> usize {
        let needle = format!("endpoint=\"{endpoint}\"");
        m.encode().lines().filter(|l| l.contains(&needle)).count()
    }

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    #[test]
    fn an_endpoint_gone_and_idle_loses_every_series_and_comes_back_from_zero() {
        let m = Metrics::new();
        let retain = Duration::from_secs(1);
        let (a, b) = (addr(1), addr(2));
        for e in [a, b] {
            let h = EndpointHandles::new(&m, "web", e);
            h.latency.observe(0.01);
            h.attempts(&m, Some(200)).inc();
            h.attempts(&m, None).inc();
            h.accrual(&m, "dead");
            m.grpc_attempt("web", e, 14);
            m.grpc_attempt("web", e, 200);
            m.probe("web", e, "ok");
        }
        let b_series = series_of(&m, b);
        assert!(b_series > 10, "{b_series} series");
        // Both present: nothing goes, however long.
        assert_eq!(m.retire(&present(&[a, b]), secs(0.0), retain), 0);
        assert_eq!(m.retire(&present(&[a, b]), secs(100.0), retain), 0);
        // b leaves discovery; it stays while younger than the retention...
        assert_eq!(m.retire(&present(&[a]), secs(100.0), retain), 0);
        assert_eq!(m.retire(&present(&[a]), secs(100.9), retain), 0);
        // ...and an attempt still in flight to it when it left, counted now, restarts the wait.
        let late = EndpointHandles::new(&m, "web", b);
        late.attempts(&m, Some(200)).inc();
        assert_eq!(m.retire(&present(&[a]), secs(101.5), retain), 0);
        assert_eq!(m.retire(&present(&[a]), secs(102.4), retain), 0);
        assert_eq!(series_of(&m, b), b_series);
        assert_eq!(m.retire(&present(&[a]), secs(102.5), retain), 1);
        assert_eq!(series_of(&m, b), 0, "{}", m.encode());
        assert_eq!(series_of(&m, a), b_series);
        assert_eq!(m.tracked_endpoints(), 1);
        // b comes back (a reused address): new series, from zero.
        let back = EndpointHandles::new(&m, "web", b);
        back.attempts(&m, Some(200)).inc();
        let text = m.encode();
        let line = text
            .lines()
            .find(|l| l.starts_with("tailguard_proxy_attempts_total") && l.contains("127.0.0.2"))
            .unwrap();
        assert!(line.ends_with(" 1"), "{line}");
        assert_eq!(m.tracked_endpoints(), 2);
    }

    #[test]
    fn a_series_made_again_after_removal_is_tracked_and_removed_again() {
        let m = Metrics::new();
        let retain = Duration::from_millis(10);
        let b = addr(2);
        // Handles looked up before the removal, used after it (an attempt that outlived
        // the retention).
        let h = EndpointHandles::new(&m, "web", b);
        h.attempts(&m, Some(200)).inc();
        assert_eq!(m.retire(&present(&[]), secs(0.0), retain), 0);
        assert_eq!(m.retire(&present(&[]), secs(1.0), retain), 1);
        assert_eq!(series_of(&m, b), 0);
        h.attempts(&m, Some(503)).inc();
        h.accrual(&m, "alive");
        assert!(series_of(&m, b) > 0);
        assert_eq!(m.retire(&present(&[]), secs(2.0), retain), 0);
        assert_eq!(m.retire(&present(&[]), secs(3.0), retain), 1);
        assert_eq!(series_of(&m, b), 0, "{}", m.encode());
    }
}
