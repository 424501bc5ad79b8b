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
use std::time::Duration;

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
    /// The status class, or the accrual state entered.
    pub class: String,
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
    /// Attempts in flight per endpoint.
    pub pending: Family<EndpointLabels, Gauge>,
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
            registry: Registry::with_prefix("tailguard_proxy"),
        };
        let r = &mut m.registry;
        r.register("requests", "Responses sent downstream", m.requests.clone());
        r.register(
            "request_latency_seconds",
            "Request latency",
            m.latency.clone(),
        );
        r.register("attempts", "Upstream attempts", m.attempts.clone());
        let al = m.attempt_latency.clone();
        r.register("attempt_latency_seconds", "Upstream attempt latency", al);
        r.register("retries", "Retries sent", m.retries.clone());
        let be = m.budget_exhausted.clone();
        r.register(
            "retry_budget_exhausted",
            "Retries refused by the budget",
            be,
        );
        r.register(
            "accrual_transitions",
            "Accrual state changes",
            m.accrual.clone(),
        );
        r.register("endpoint_pending", "Attempts in flight", m.pending.clone());
        m
    }

    /// The text exposition format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

/// The class label of a status code.
pub fn status_class(status: u16) -> &'static str {
    match status {
        100..=199 => "1xx",
        200..=299 => "2xx",
        300..=399 => "3xx",
        400..=499 => "4xx",
        _ => "5xx",
    }
}

/// Seconds as the histograms take them.
pub fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}
