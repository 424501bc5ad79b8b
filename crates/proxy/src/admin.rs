//! The admin server (127.0.0.1 by default): `/` (the dashboard, [`crate::dashboard`]),
//! `/dashboard.json` (its figures), `/metrics` (Prometheus text), `/ready` (200 when every
//! service has an endpoint, 503 while draining), `/live` (200 while the process serves), and
//! `/endpoints` (JSON: per service, each endpoint's address, pending attempts, balancer cost,
//! success rate, accrual state, ejections, hedges sent to it and won, and last error). Every page is read-only.
//!
//! The server is `tailguard_http`'s, on a thread of its own, within its default limits;
//! `/dashboard.json`, `/metrics` and `/endpoints` are its expensive pages (rate limited).
//! Each page copies what it needs under the locks the request path takes and renders after.

use crate::dashboard;
use crate::metrics::EndpointLabels;
use crate::shared::Shared;
use bytes::Bytes;
use http::{header, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use std::sync::Arc;
use tailguard_http::admin::{self, AdminServer, Limits};
use tokio::net::TcpListener;

/// The pages whose answers take real work to build: rate limited by the admin server.
pub const EXPENSIVE: &[&str] = &["/dashboard.json", "/metrics", "/endpoints"];

/// Serves the admin pages on `listener` (the shared admin server of `tailguard_http`).
pub(crate) fn serve(listener: TcpListener, shared: Arc<Shared>) -> std::io::Result<AdminServer> {
    let limits = Limits::default().expensive(EXPENSIVE);
    admin::serve_with(listener, limits, move |req: Request<Incoming>| {
        let page = page(&shared, &req);
        async move { page }
    })
}

fn page(shared: &Shared, req: &Request<Incoming>) -> Response<Full<Bytes>> {
    match req.uri().path() {
        "/" => reply(
            StatusCode::OK,
            "text/html; charset=utf-8",
            dashboard::page(),
        ),
        "/dashboard.json" => match dashboard::json(shared, req.uri().query()) {
            Ok(json) => reply(StatusCode::OK, "application/json", json),
            Err(why) => reply(StatusCode::BAD_REQUEST, "text/plain", why),
        },
        "/metrics" => {
            refresh_gauges(shared);
            shared.metrics.response(req.headers())
        }
        "/live" => reply(StatusCode::OK, "text/plain", "live\n"),
        "/ready" => {
            let ready = shared
                .services()
                .iter()
                .all(|s| s.split().is_some() || !s.endpoints().is_empty());
            let (status, text) = if shared.draining() {
                (StatusCode::SERVICE_UNAVAILABLE, "draining\n")
            } else if ready {
                (StatusCode::OK, "ready\n")
            } else {
                (
                    StatusCode::SERVICE_UNAVAILABLE,
                    "a service has no endpoints\n",
                )
            };
            reply(status, "text/plain", text)
        }
        "/endpoints" => reply(StatusCode::OK, "application/json", endpoints_json(shared)),
        _ => reply(
            StatusCode::NOT_FOUND,
            "text/plain",
            "try / (the dashboard), /dashboard.json, /metrics, /ready, /live or /endpoints\n",
        ),
    }
}

fn endpoints_json(shared: &Shared) -> String {
    let services: serde_json::Map<String, serde_json::Value> = shared
        .services()
        .iter()
        .map(|s| {
            let views = s.endpoints().views(shared.clock.now());
            (
                s.config.name.clone(),
                serde_json::to_value(views).unwrap_or_default(),
            )
        })
        .collect();
    serde_json::to_string_pretty(&services).unwrap_or_default()
}

/// The `/metrics` page in Prometheus text, gauges refreshed, built in the calling thread.
pub(crate) fn metrics_text(shared: &Shared) -> String {
    refresh_gauges(shared);
    shared.metrics.encode()
}

/// Sets the per-endpoint gauges (pending, cost) and the pools' sizes from the current endpoint generations, so a
/// scrape sees the balancer's state now and no series of a removed endpoint lingers. An address
/// listed with a weight fills several slots, joined as the dashboard joins them
/// ([`dashboard::by_address`]): pending attempts summed, the cost of the cheapest slot (the one
/// a picker would prefer; 0.0, an idle least-loaded endpoint, is a real value).
fn refresh_gauges(shared: &Shared) {
    let now = shared.clock.now();
    let m = &shared.metrics;
    m.pending.clear();
    m.cost.clear();
    m.hedge_delay.clear();
    m.pool_entries.clear();
    m.admission_limit.clear();
    m.admission_in_flight.clear();
    m.admission_waiting.clear();
    for service in shared.services().iter() {
        if let Some(gate) = service.gate() {
            let labels = crate::metrics::ServiceLabels {
                service: service.config.name.clone(),
            };
            let (bound, in_flight, waiting) = gate.figures();
            let gauge = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
            m.admission_limit
                .get_or_create(&labels)
                .set(gauge(u64::from(bound)));
            m.admission_in_flight
                .get_or_create(&labels)
                .set(gauge(u64::from(in_flight)));
            m.admission_waiting
                .get_or_create(&labels)
                .set(gauge(waiting as u64));
        }
        for (pool, n) in service.upstreams.sizes() {
            let labels = crate::metrics::PoolLabels {
                service: service.config.name.clone(),
                pool: pool.to_owned(),
            };
            m.pool_entries.get_or_create(&labels).set(n as i64);
        }
        if let Some(d) = service.endpoints().hedge_delay(now) {
            let labels = crate::metrics::ServiceLabels {
                service: service.config.name.clone(),
            };
            m.hedge_delay.get_or_create(&labels).set(d.as_secs_f64());
        }
        for view in dashboard::by_address(service.endpoints().views(now)) {
            let labels = EndpointLabels {
                service: service.config.name.clone(),
                endpoint: view.addr,
            };
            m.pending.get_or_create(&labels).set(view.pending as i64);
            if let Some(c) = view.cost {
                m.cost.get_or_create(&labels).set(c);
            }
        }
    }
}

fn reply(status: StatusCode, kind: &'static str, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(body.into()));
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(header::CONTENT_TYPE, header::HeaderValue::from_static(kind));
    resp
}
