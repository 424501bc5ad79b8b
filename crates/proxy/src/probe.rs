//! Load probes for the probing balancer (`loadBalancer: {kind: prequal}`): after a pick the
//! balancer names a few endpoints; each gets `GET <probePath>` off the request path, on the
//! service's own upstream pools (a kept-alive connection, HTTP/2 when the service speaks it),
//! bounded by the balancer's `maxAgeMs` (a later answer would be too old to use). The answer,
//! `{"rif": N, "latency_us": N}` (`tailguard_fleet::probe::ProbeAnswer`, what `tailguard serve`
//! answers), goes back to the balancer as an event. Anything else (a refused connection, a
//! timeout, a non-200 status, a body over 1 KiB or not that JSON) is reported as no answer, and
//! the balancer judges that endpoint by what the proxy sees itself.
//!
//! At most [`crate::endpoints::MAX_PROBES_IN_FLIGHT`] probes are out to an endpoint at once; a
//! probe asked for beyond that is not sent, so a probe path that hangs costs that many
//! connections, not one per request. The balancer checks each answer against what the proxy
//! sees at that endpoint itself and distrusts one that contradicts it
//! ([`tailguard_balance::prequal`], "Lying replies").
//!
//! Probes are counted per endpoint in `tailguard_proxy_probes_total{class}` (`ok`, `failed`,
//! `distrusted`, `skipped`); they never count as requests, attempts or failures of the endpoint.

use crate::endpoints::Endpoints;
use crate::service::Service;
use crate::shared::Shared;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use std::sync::Arc;
use std::time::Duration;
use tailguard_balance::{Policy, ProbeReply, ProbeVerdict};
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
        if !endpoints.probe_started(slot) {
            let addr = endpoints.addr(slot);
            shared.metrics.probe(&service.config.name, addr, "skipped");
            continue;
        }
        let probing = Probing {
            endpoints: Arc::clone(endpoints),
            slot,
        };
        let (shared, service) = (Arc::clone(shared), Arc::clone(service));
        tokio::spawn(async move {
            let endpoints = &probing.endpoints;
            let answer = tokio::time::timeout(limit, ask(&service, endpoints, slot, h2))
                .await
                .ok()
                .flatten();
            let reply = answer.map(|a| ProbeReply {
                rif: a.rif,
                latency: Duration::from_micros(a.latency_us),
            });
            let verdict = endpoints.probe_reply(slot, reply, shared.clock.now());
            let class = match verdict {
                ProbeVerdict::Distrusted => "distrusted",
                _ if reply.is_some() => "ok",
                _ => "failed",
            };
            let addr = endpoints.addr(slot);
            shared.metrics.probe(&service.config.name, addr, class);
        });
    }
}

/// A probe counted out to its endpoint until it ends, however it ends.
struct Probing {
    endpoints: Arc<Endpoints>,
    slot: usize,
}

impl Drop for Probing {
    fn drop(&mut self) {
        self.endpoints.probe_done(self.slot);
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
    let uri = http::Uri::try_from(uri).ok()?;
    let host = http::HeaderValue::from_str(&authority).ok()?;
    // Made in the form chosen above, whatever the connection turns out to speak (as before).
    let make = |_| {
        let mut req = http::Request::new(
            Empty::<Bytes>::new()
                .map_err(|never| match never {})
                .boxed(),
        );
        *req.uri_mut() = uri.clone();
        if !h2 {
            req.headers_mut().insert(http::header::HOST, host.clone());
        }
        req
    };
    let conn = service.upstreams.checkout(h2, addr).await.ok()?;
    let resp = conn.send(&make).await.ok()?;
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
