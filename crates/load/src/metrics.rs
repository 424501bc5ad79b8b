//! `--metrics-addr`: the run's figures as Prometheus metrics, updated at each interval end (so
//! the per-request path pays nothing for them).

use bytes::Bytes;
use http_body_util::Full;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use tailguard_http::admin::{self, AdminServer, Limits};
use tailguard_http::tcp;
use tailguard_record::IntervalSummary;

type Labels = Vec<(&'static str, String)>;

/// The run's metrics.
pub(crate) struct Metrics {
    registry: Registry,
    requests: Family<Labels, Counter>,
    errors: Family<Labels, Counter>,
    latency: Family<Labels, Gauge<f64, AtomicU64>>,
    achieved: Gauge<f64, AtomicU64>,
    target: Gauge<f64, AtomicU64>,
}

impl Metrics {
    pub(crate) fn new() -> Self {
        let mut registry = Registry::with_prefix("tailguard_load");
        let requests = Family::<Labels, Counter>::default();
        let errors = Family::<Labels, Counter>::default();
        let latency = Family::<Labels, Gauge<f64, AtomicU64>>::default();
        let achieved = Gauge::<f64, AtomicU64>::default();
        let target = Gauge::<f64, AtomicU64>::default();
        registry.register(
            "requests",
            "Requests completed, by class (good, bad, failed)",
            requests.clone(),
        );
        registry.register(
            "errors",
            "Requests without a response, by error kind",
            errors.clone(),
        );
        registry.register(
            "latency_seconds",
            "Latency from the scheduled send over the last interval, by percentile (p50 to max)",
            latency.clone(),
        );
        registry.register(
            "achieved_rate",
            "Requests per second completed in the last interval",
            achieved.clone(),
        );
        registry.register(
            "target_rate",
            "Requests per second asked for (0: closed loop)",
            target.clone(),
        );
        Metrics {
            registry,
            requests,
            errors,
            latency,
            achieved,
            target,
        }
    }

    /// Folds one interval into the metrics.
    pub(crate) fn update(&self, iv: &IntervalSummary) {
        let t = &iv.totals;
        for (class, n) in [("good", t.good), ("bad", t.bad), ("failed", t.failed)] {
            self.requests
                .get_or_create(&vec![("class", class.to_string())])
                .inc_by(n);
        }
        for (kind, n) in &t.errors {
            self.errors
                .get_or_create(&vec![("kind", kind.clone())])
                .inc_by(*n);
        }
        // A gauge per percentile, labelled `percentile` as the reports name them: `quantile`
        // is reserved for summaries, which also carry a sum and count this interval lacks.
        // An interval without a timed request has no latency: NaN, Prometheus's "no value",
        // rather than a zero that reads as instant answers.
        let l = t.latency_us;
        let percentiles = [
            ("p50", l.map(|l| l.p50)),
            ("p90", l.map(|l| l.p90)),
            ("p99", l.map(|l| l.p99)),
            ("p99.9", l.map(|l| l.p999)),
            ("max", l.map(|l| l.max)),
        ];
        for (p, us) in percentiles {
            self.latency
                .get_or_create(&vec![("percentile", p.to_string())])
                .set(us.map_or(f64::NAN, |us| us as f64 / 1e6));
        }
        self.achieved.set(t.achieved_rate);
        self.target.set(t.target_rate);
    }

    fn response(&self, headers: &http::HeaderMap) -> hyper::Response<Full<Bytes>> {
        tailguard_http::exposition::response(&self.registry, headers)
    }
}

/// Serves `/metrics` (any path, in fact) on `addr` until the returned server is shut down:
/// the shared admin server, on its own thread and within its default limits (`/metrics` its
/// expensive page).
pub(crate) async fn serve(addr: SocketAddr, metrics: Arc<Metrics>) -> std::io::Result<AdminServer> {
    let listener = tcp::bind(addr).await?;
    // Every path answers the metrics here: none is a cheap health check.
    let limits = Limits {
        health: &[],
        ..Limits::default().expensive(&["/metrics"])
    };
    admin::serve_with(listener, limits, move |req: hyper::Request<_>| {
        let resp = metrics.response(req.headers());
        async move { resp }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tailguard_record::Totals;

    #[tokio::test]
    async fn serves_the_last_interval_as_prometheus_text() {
        let metrics = Arc::new(Metrics::new());
        let mut iv = IntervalSummary {
            totals: Totals {
                good: 90,
                bad: 7,
                failed: 3,
                achieved_rate: 100.0,
                target_rate: 100.0,
                ..Totals::default()
            },
            ..IntervalSummary::default()
        };
        iv.totals.latency_us = Some(tailguard_histogram::Percentiles {
            p99: 2_500,
            ..Default::default()
        });
        iv.totals.errors.insert("timeout".into(), 3);
        metrics.update(&iv);
        let server = serve("127.0.0.1:0".parse().unwrap(), metrics)
            .await
            .unwrap();
        let addr = server.addr();
        let (kind, text) =
            tokio::task::spawn_blocking(move || tailguard_testsupport::promtool::scrape(addr))
                .await
                .unwrap();
        assert_eq!(kind, "text/plain; version=0.0.4; charset=utf-8");
        tailguard_testsupport::promtool::assert_clean(&text);
        for line in [
            "tailguard_load_requests_total{class=\"good\"} 90",
            "tailguard_load_requests_total{class=\"bad\"} 7",
            "tailguard_load_errors_total{kind=\"timeout\"} 3",
            "tailguard_load_latency_seconds{percentile=\"p99\"} 0.0025",
            "tailguard_load_achieved_rate 100.0",
        ] {
            assert!(text.contains(line), "missing {line}\n{text}");
        }
    }
}
