//! Load probes for the probing balancer (`loadBalancer: {kind: prequal}`): after a pick the
//! balancer names a few endpoints; each gets `GET <probePath>` off the request path, on the
//! service's own upstream pools (a kept-alive connection, HTTP/2 when the service speaks it),
//! bounded by the balancer's `maxAgeMs` (a later answer would be too old to use). The answer,
//! `{"rif": N, "latency_us": N}` (`tailguard_fleet::probe::ProbeAnswer`, what `tailguard serve`
//! answers), goes back to the balancer as an event. Anything else (a refused connection, a
//! timeout, a non-200 status, a body over 1 KiB or not that JSON) is reported as no answer, and
//! the balancer judges that endpoint by what the proxy sees itself.
//!
//! Probes are counted per endpoint in `tailguard_proxy_probes_total{class="ok"|"failed"}`; they
//! never count as requests, attempts or failures of the endpoint.

use crate::endpoints::Endpoints;
use crate::service::Service;
use crate::shared::Shared;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use std::sync::Arc;
use std::time::Duration;
use tailguard_balance::{Policy, ProbeReply};
use tailguard_fleet::probe::ProbeAnswer;

/// The largest answer read.
const MAX_ANSWER: usize = 1024;

/// Sends one probe to each of `slots`, each in a task of its own.
pub(crate) fn send(
    shared: &Arc<Shared>,
    service: &Arc<Service>,
    endpoints: &Arc<Endpoints>,
    slots: Vec<usize>,
    h2: bool,
) {
    let limit = match service.config.arm.policy {
        Policy::Prequal(c) => c.max_age,
        _ => Duration::from_secs(1),
    };
    for slot in slots {
        let (shared, service, endpoints) = (
            Arc::clone(shared),
            Arc::clone(service),
            Arc::clone(endpoints),
        );
        tokio::spawn(async move {
            let answer = tokio::time::timeout(limit, ask(&service, &endpoints, slot, h2))
                .await
                .ok()
                .flatten();
            let addr = endpoints.addr(slot);
            shared
                .metrics
                .probe(&service.config.name, addr, answer.is_some());
            let reply = answer.map(|a| ProbeReply {
                rif: a.rif,
                latency: Duration::from_micros(a.latency_us),
            });
            endpoints.probe_reply(slot, reply, shared.clock.now());
        });
    }
}

/// One probe of `slot`: its answer, or `None`.
async fn ask(
    service: &Service,
    endpoints: &Endpoints,
    slot: usize,
    h2: bool,
) -> Option<ProbeAnswer> {
    let addr = endpoints.addr(slot);
    let authority = endpoints
        .authority(slot)
        .map_or_else(|| addr.to_string(), |a| a.as_str().to_owned());
    let uri = if h2 {
        format!("http://{authority}{}", service.config.probe_path)
    } else {
        service.config.probe_path.clone()
    };
    let mut req = http::Request::get(uri)
        .body(
            Empty::<Bytes>::new()
                .map_err(|never| match never {})
                .boxed(),
        )
        .ok()?;
    if !h2 {
        let host = http::HeaderValue::from_str(&authority).ok()?;
        req.headers_mut().insert(http::header::HOST, host);
    }
    let conn = service.upstreams.checkout(h2, addr).await.ok()?;
    let resp = conn.send(req).await.ok()?;
    if resp.status() != http::StatusCode::OK {
        return None;
    }
    let body = Limited::new(resp.into_body(), MAX_ANSWER)
        .collect()
        .await
        .ok()?
        .to_bytes();
    serde_json::from_slice(&body).ok()
}
