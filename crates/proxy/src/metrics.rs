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
use std::sync::atomic::AtomicU64;
use std::sync::OnceLock;

/// Labels of a per-service series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ServiceLabels {
    /// The service name.
    pub service: String,
}

/// Labels of a per-service series split by response class (`2xx` .. `5xx`, `error`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ClassLabels {
    /// The service name.
    pub service: String,
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
    pub latency: Family<ServiceLabels, Histogram, fn() -> Histogram>,
    /// Upstream attempts by endpoint and class.
    pub attempts: Family<EndpointClassLabels, Counter>,
    /// Attempt latency per endpoint.
    pub attempt_latency: Family<EndpointLabels, Histogram, fn() -> Histogram>,
    /// Retries sent.
    pub retries: Family<ServiceLabels, Counter>,
    /// Retries refused by the budget.
    pub budget_exhausted: Family<ServiceLabels, Counter>,
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
    pub truncated: Family<ServiceLabels, Counter>,
    /// Backup requests sent.
    pub hedges: Family<ServiceLabels, Counter>,
    /// Backup requests whose answer was the one used.
    pub hedge_wins: Family<ServiceLabels, Counter>,
    /// Backups the hedge budget refused.
    pub hedge_budget_exhausted: Family<ServiceLabels, Counter>,
    /// The current hedge delay per service (set when scraped; absent until it has data).
    pub hedge_delay: Family<ServiceLabels, Gauge<f64, AtomicU64>>,
    /// How late the event loop ran a timer due every 10 ms ([`crate::lag`]).
    pub event_loop_delay: Histogram,
    registry: Registry,
}

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
            hedge_delay: Family::default(),
            event_loop_delay: Histogram::new(exponential_buckets(0.000_05, 2.0, 16)),
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
            "requests", "Responses whose head went downstream, by class (error: none did)", requests;
            "responses_truncated", "Responses whose body broke off after their head went downstream", truncated;
            "request_latency_seconds", "Request latency", latency;
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
            "hedge_delay_seconds", "How long a hedged request waits before its backup (the live quantile of attempt latency)", hedge_delay;
            "endpoint_cost", "Balancer cost (pending requests, or peak EWMA nanoseconds x (pending + 1))", cost;
            "event_loop_delay_seconds", "How late the event loop ran a timer due every 10 ms (a stalled loop delays every request on it; includes 1 ms of timer rounding)", event_loop_delay;
        }
        m
    }

    /// Counts a gRPC attempt to `endpoint` of `service` that ended with `code`.
    pub fn grpc_attempt(&self, service: &str, endpoint: std::net::SocketAddr, code: u8) {
        let labels = GrpcLabels {
            service: service.to_owned(),
            endpoint: endpoint.to_string(),
            grpc_status: code.to_string(),
        };
        self.grpc_attempts.get_or_create(&labels).inc();
    }

    /// Counts a load probe of `endpoint` of `service` by what became of it: `ok`, `failed`,
    /// `distrusted` or `skipped`.
    pub fn probe(&self, service: &str, endpoint: std::net::SocketAddr, class: &str) {
        let labels = EndpointClassLabels {
            service: service.to_owned(),
            endpoint: endpoint.to_string(),
            class: class.to_owned(),
        };
        self.probes.get_or_create(&labels).inc();
    }

    /// Counts a request of `service` (empty: not routed yet) failed by its client.
    pub fn client_error(&self, service: &str, kind: &str) {
        let labels = ClientErrorLabels {
            service: service.to_owned(),
            kind: kind.to_owned(),
        };
        self.client_errors.get_or_create(&labels).inc();
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

/// The metric handles of one service, looked up once: the request path then counts and
/// observes without building label strings or hashing them.
#[derive(Debug)]
pub struct ServiceHandles {
    labels: ServiceLabels,
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
}

impl ServiceHandles {
    /// The handles of service `name` in `m`.
    pub fn new(m: &Metrics, name: &str) -> Self {
        let labels = ServiceLabels {
            service: name.to_owned(),
        };
        Self {
            latency: m.latency.get_or_create(&labels).clone(),
            retries: m.retries.get_or_create(&labels).clone(),
            budget_exhausted: m.budget_exhausted.get_or_create(&labels).clone(),
            truncated: m.truncated.get_or_create(&labels).clone(),
            hedges: m.hedges.get_or_create(&labels).clone(),
            hedge_wins: m.hedge_wins.get_or_create(&labels).clone(),
            hedge_budget_exhausted: m.hedge_budget_exhausted.get_or_create(&labels).clone(),
            requests: PerClass::default(),
            labels,
        }
    }

    /// The downstream responses counter of `status`'s class (`None`: no head went down).
    pub fn requests(&self, m: &Metrics, status: Option<u16>) -> &Counter {
        self.requests.get(class_index(status), |class| {
            let labels = ClassLabels {
                service: self.labels.service.clone(),
                class: class.to_owned(),
            };
            m.requests.get_or_create(&labels).clone()
        })
    }
}

/// The metric handles of one endpoint of one service, looked up once.
#[derive(Debug)]
pub struct EndpointHandles {
    labels: EndpointLabels,
    attempts: PerClass,
    /// Attempt latency.
    pub latency: Histogram,
}

impl EndpointHandles {
    /// The handles of `endpoint` of `service` in `m`.
    pub fn new(m: &Metrics, service: &str, endpoint: std::net::SocketAddr) -> Self {
        let labels = EndpointLabels {
            service: service.to_owned(),
            endpoint: endpoint.to_string(),
        };
        Self {
            latency: m.attempt_latency.get_or_create(&labels).clone(),
            attempts: PerClass::default(),
            labels,
        }
    }

    /// The attempts counter of a status's class (`None`: no response).
    pub fn attempts(&self, m: &Metrics, status: Option<u16>) -> &Counter {
        self.attempts.get(class_index(status), |class| {
            m.attempts.get_or_create(&self.labels(class)).clone()
        })
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
