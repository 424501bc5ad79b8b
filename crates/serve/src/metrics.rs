//! Per-backend request counters, shown as JSON by the control endpoint and as Prometheus text
//! on its `/metrics`.
//!
//! Counter handles are created once per backend at start, so counting a request is one atomic
//! add (no label lookup on the request path).

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tailguard_fleet::Outcome;

type Labels = Vec<(&'static str, String)>;

/// The fleet's metric families and their registry.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    requests: Family<Labels, Counter>,
    in_flight: Family<Labels, Gauge>,
    messages: Family<Labels, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("tailguard_serve");
        let requests = Family::<Labels, Counter>::default();
        let in_flight = Family::<Labels, Gauge>::default();
        let messages = Family::<Labels, Counter>::default();
        registry.register(
            "requests",
            "Requests decided, by backend and outcome (ok, error, close, reset)",
            requests.clone(),
        );
        registry.register(
            "in_flight",
            "Requests received and not yet answered, by backend",
            in_flight.clone(),
        );
        registry.register(
            "grpc_messages",
            "gRPC messages of the ping service's calls, by backend and direction (received, sent)",
            messages.clone(),
        );
        Metrics {
            registry,
            requests,
            in_flight,
            messages,
        }
    }
}

impl Metrics {
    /// The counters of backend `name`.
    pub fn backend(&self, name: &str) -> Counters {
        let outcome = |o: &str| {
            self.requests
                .get_or_create(&vec![
                    ("backend", name.to_owned()),
                    ("outcome", o.to_owned()),
                ])
                .clone()
        };
        let messages = |d: &str| {
            self.messages
                .get_or_create(&vec![
                    ("backend", name.to_owned()),
                    ("direction", d.to_owned()),
                ])
                .clone()
        };
        Counters {
            received: messages("received"),
            sent: messages("sent"),
            ok: outcome("ok"),
            error: outcome("error"),
            close: outcome("close"),
            reset: outcome("reset"),
            in_flight: self
                .in_flight
                .get_or_create(&vec![("backend", name.to_owned())])
                .clone(),
        }
    }

    /// `/metrics`, in the format the request's `Accept` header prefers.
    pub fn response(
        &self,
        headers: &http::HeaderMap,
    ) -> http::Response<http_body_util::Full<bytes::Bytes>> {
        tailguard_http::exposition::response(&self.registry, headers)
    }
}

/// One backend's counters.
#[derive(Clone, Debug, Default)]
pub struct Counters {
    ok: Counter,
    error: Counter,
    close: Counter,
    reset: Counter,
    /// gRPC messages read from ping calls (every kind, unary too).
    pub received: Counter,
    /// gRPC messages answered on ping calls.
    pub sent: Counter,
    /// Requests in progress.
    pub in_flight: Gauge,
}

impl Counters {
    /// Counts a decided request. Success is any status below 500 (the slow_cooker "good").
    pub fn record(&self, outcome: Outcome) {
        match outcome {
            Outcome::Respond { status } if status < 500 => self.ok.inc(),
            Outcome::Respond { .. } => self.error.inc(),
            Outcome::Close => self.close.inc(),
            Outcome::Reset => self.reset.inc(),
        };
    }

    /// `(ok, error, close, reset)` so far.
    pub fn totals(&self) -> (u64, u64, u64, u64) {
        (
            self.ok.get(),
            self.error.get(),
            self.close.get(),
            self.reset.get(),
        )
    }
}
