//! Active health checks (`client.healthCheck`): each endpoint of a service is checked every
//! `intervalMs` (jittered by ±10% from a seeded stream), on a connection of its own (never the
//! pools', never counted as a request, an attempt or an endpoint failure), with the service's
//! `Host` and TLS; the verdicts go to the service's client
//! ([`tailguard_client::Client::on_health_check`]), which keeps unhealthy endpoints out of
//! picks unless every endpoint is (panic mode), and warms one up when it comes back.
//!
//! A check passes on a 2xx answered within `timeoutMs` (the head; the body is not read), or,
//! with `grpcService`, on `grpc.health.v1.Health/Check` answering SERVING with `grpc-status`
//! 0 over HTTP/2. Anything else fails it: another status, a refused or reset connection, a
//! timeout, a gRPC answer over 1 KiB or not SERVING. A check path that hangs costs one
//! connection per endpoint until its timeout, as a check is only sent after the last ended.
//!
//! The checkers of an endpoint generation stop at their next turn once discovery has replaced
//! it (the next generation's take over, the verdicts of the endpoints kept carried over) or
//! once the service is gone (a reload).

use crate::endpoints::Endpoints;
use crate::service::Service;
use bytes::{Buf, Bytes};
use http_body_util::{BodyExt, Full, Limited};
use rand::{Rng, SeedableRng};
use std::sync::{Arc, Weak};
use tailguard_resilience::health::jittered;
use tailguard_resilience::HealthCheckConfig;

/// The largest gRPC health answer read.
const MAX_GRPC_ANSWER: usize = 1024;

/// Starts the checkers of `service`'s current endpoint generation, when it has health checks.
pub(crate) fn spawn(service: &Arc<Service>) {
    let Some(config) = service.config.arm.health_check.clone() else {
        return;
    };
    let endpoints = service.endpoints();
    let generation = service.generation();
    for slot in 0..endpoints.len() {
        let (svc, eps) = (Arc::downgrade(service), Arc::downgrade(&endpoints));
        let seed = crate::seed::mix(service.seed(), generation.rotate_left(32) ^ slot as u64);
        let config = config.clone();
        tokio::spawn(checker(svc, eps, slot, config, seed));
    }
}

/// Checks slot `slot` of one generation until it is replaced or its service is gone.
async fn checker(
    service: Weak<Service>,
    endpoints: Weak<Endpoints>,
    slot: usize,
    config: HealthCheckConfig,
    seed: u64,
) {
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
    // The first check within the first tenth of an interval, so a fleet of endpoints (and of
    // proxies) is not checked all at once.
    let mut wait = config.interval.mul_f64(rng.random_range(0.0..0.1));
    loop {
        tokio::time::sleep(wait).await;
        let (Some(service), Some(endpoints)) = (service.upgrade(), endpoints.upgrade()) else {
            return;
        };
        if !Arc::ptr_eq(&service.endpoints(), &endpoints) {
            return;
        }
        let passed =
            tokio::time::timeout(config.timeout, check(&service, &endpoints, slot, &config))
                .await
                .unwrap_or(false);
        let now = service.clock().now();
        if let Some(state) = endpoints.health_checked(slot, passed, now) {
            let endpoint = endpoints.addr(slot);
            let name = &service.config.name;
            tracing::info!(%endpoint, service = %name, "health check: endpoint {state:?}");
        }
        wait = jittered(config.interval, &mut rng);
    }
}

/// One check of `slot`: passed or not (a failure to connect, or to speak, is a failed check).
async fn check(
    service: &Service,
    endpoints: &Endpoints,
    slot: usize,
    config: &HealthCheckConfig,
) -> bool {
    let addr = endpoints.addr(slot);
    let authority = endpoints
        .authority(slot)
        .map_or_else(|| addr.to_string(), |a| a.as_str().to_owned());
    let grpc = config.grpc_service.as_deref();
    let h2 = grpc.is_some() || service.config.protocol == crate::config::UpstreamProtocol::Http2;
    let Ok(conn) = service.upstreams.dial_check(addr, h2).await else {
        return false;
    };
    let body = match grpc {
        Some(name) => Full::new(health_request(name)),
        None => Full::new(Bytes::new()),
    };
    let path = match grpc {
        Some(_) => "/grpc.health.v1.Health/Check",
        None => config.path.as_str(),
    };
    let req = match (h2, grpc) {
        (true, Some(_)) => http::Request::post(format!("http://{authority}{path}"))
            .header("content-type", "application/grpc")
            .header("te", "trailers"),
        (true, None) => http::Request::get(format!("http://{authority}{path}")),
        (false, _) => http::Request::get(path)
            .header(http::header::HOST, authority.as_str())
            .header(http::header::CONNECTION, "close"),
    }
    .header(http::header::USER_AGENT, "tailguard-health-check")
    .body(body);
    let Ok(req) = req else {
        return false;
    };
    let resp = if h2 {
        let Ok(mut send) = tailguard_http::client::h2(conn, addr).await else {
            return false;
        };
        send.send_request(req).await
    } else {
        let writes = tailguard_http::client::Writes::Flat;
        let Ok((mut send, interim)) = tailguard_http::client::h1(conn, writes, addr).await else {
            return false;
        };
        let mut req = req;
        interim.watch(&mut req);
        send.send_request(req).await
    };
    let Ok(resp) = resp else {
        return false;
    };
    match grpc {
        None => resp.status().is_success(),
        Some(_) => serving(resp).await,
    }
}

/// A `HealthCheckRequest { service }`, framed as one gRPC message.
fn health_request(service: &str) -> Bytes {
    let name = &service.as_bytes()[..service.len().min(1024)];
    let mut message = Vec::with_capacity(name.len() + 3);
    if !name.is_empty() {
        message.push(0x0a); // field 1, length-delimited
        let mut len = name.len();
        while len >= 0x80 {
            message.push((len as u8 & 0x7f) | 0x80);
            len >>= 7;
        }
        message.push(len as u8);
        message.extend_from_slice(name);
    }
    let mut framed = Vec::with_capacity(message.len() + 5);
    framed.push(0);
    framed.extend_from_slice(&(message.len() as u32).to_be_bytes());
    framed.extend_from_slice(&message);
    Bytes::from(framed)
}

/// True when `resp` is a gRPC health answer of SERVING with `grpc-status` 0.
async fn serving(resp: http::Response<hyper::body::Incoming>) -> bool {
    if resp.status() != http::StatusCode::OK {
        return false;
    }
    if tailguard_http::grpc::status(resp.headers()).is_some() {
        return false; // trailers-only: no message, so no SERVING
    }
    let Ok(collected) = Limited::new(resp.into_body(), MAX_GRPC_ANSWER)
        .collect()
        .await
    else {
        return false;
    };
    let ok = collected.trailers().and_then(tailguard_http::grpc::status) == Some(0);
    ok && status_is_serving(collected.to_bytes())
}

/// True when the framed `HealthCheckResponse` in `body` says SERVING (`status`, field 1, = 1).
fn status_is_serving(mut body: Bytes) -> bool {
    if body.len() < 5 || body[0] != 0 {
        return false;
    }
    let len = u32::from_be_bytes([body[1], body[2], body[3], body[4]]) as usize;
    body.advance(5);
    if body.len() != len {
        return false;
    }
    // The message: field 1 as a varint; the last value of field 1 wins (protobuf's rule).
    let mut serving = false;
    let mut i = 0;
    while i < body.len() {
        let key = body[i];
        i += 1;
        match key {
            0x08 => {
                let (value, used) = varint(&body[i..]);
                let Some(value) = value else { return false };
                serving = value == 1;
                i += used;
            }
            _ => return false, // anything else: not the answer we know
        }
    }
    serving
}

/// A protobuf varint at the start of `b` (`None`: cut short or over 10 bytes), and its length.
fn varint(b: &[u8]) -> (Option<u64>, usize) {
    let mut value = 0u64;
    for (k, byte) in b.iter().take(10).enumerate() {
        value |= u64::from(byte & 0x7f) << (7 * k);
        if byte & 0x80 == 0 {
            return (Some(value), k + 1);
        }
    }
    (None, b.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_frames_the_service_name() {
        assert_eq!(&health_request("")[..], &[0, 0, 0, 0, 0]);
        assert_eq!(
            &health_request("ab")[..],
            &[0, 0, 0, 0, 4, 0x0a, 2, b'a', b'b']
        );
    }

    #[test]
    fn only_serving_passes() {
        let framed = |m: &[u8]| {
            let mut v = vec![0];
            v.extend_from_slice(&(m.len() as u32).to_be_bytes());
            v.extend_from_slice(m);
            Bytes::from(v)
        };
        assert!(status_is_serving(framed(&[0x08, 1])));
        assert!(!status_is_serving(framed(&[0x08, 2])), "NOT_SERVING");
        assert!(!status_is_serving(framed(&[])), "UNKNOWN (the default)");
        assert!(!status_is_serving(framed(&[0x08])), "cut short");
        assert!(!status_is_serving(framed(&[0x10, 1])), "another field");
        assert!(
            status_is_serving(framed(&[0x08, 2, 0x08, 1])),
            "the last wins"
        );
        let mut lying_length = framed(&[0x08, 1]).to_vec();
        lying_length[4] = 9;
        assert!(!status_is_serving(Bytes::from(lying_length)));
        assert!(
            !status_is_serving(Bytes::from_static(&[1, 0, 0, 0, 2, 0x08, 1])),
            "compressed"
        );
    }
}
