//! Forwarding one request: route it, clean its headers, then send attempts through the
//! service's balancer until one succeeds or no retry is allowed.
//!
//! 1. Route by host (and path prefix) to a service; none: 404 with `x-tailguard-error`.
//! 2. Admit under the service's in-flight limit; over it: 503.
//! 3. Keep the body replayable (bounded buffer) only when a retry could need it: the method is
//!    retryable, retries are on, and the body's exact length is within `retry_buffer`.
//!    Otherwise the body streams through, and the request is retried only when an attempt
//!    could not connect (the body was not sent).
//! 4. Each attempt: pick (avoiding the previous endpoint), connect, send under the attempt
//!    timeout, classify, feed the balancer and accrual ([`crate::attempt`]).
//! 5. A failed, retryable attempt is retried while the budget allows; the last response is
//!    returned as is, or 502/504 with `x-tailguard-error` when there was none.

use crate::attempt::{self, Attempt, Sent};
use crate::hygiene;
use crate::service::{host_only, route, Service};
use crate::upstream::ProxyBody;
use crate::Shared;
use bytes::Bytes;
use http::header::{HeaderValue, HOST};
use http::{Request, Response, StatusCode, Version};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Body, Incoming};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tailguard_resilience::Method;

/// The header naming why the proxy answered itself.
pub const ERROR_HEADER: &str = "x-tailguard-error";

/// A response the proxy makes itself.
pub fn local(status: StatusCode, reason: &str) -> Response<ProxyBody> {
    let body = Full::new(Bytes::from(format!("{reason}\n")))
        .map_err(|never| match never {})
        .boxed();
    let mut resp = Response::new(body);
    *resp.status_mut() = status;
    if let Ok(v) = HeaderValue::from_str(reason) {
        resp.headers_mut().insert(ERROR_HEADER, v);
    }
    resp
}

/// The client of a downstream connection.
#[derive(Clone, Debug)]
pub struct Peer {
    /// Its address.
    pub addr: SocketAddr,
    /// Its IP as the `X-Forwarded-For` entry, formatted once per connection.
    pub forwarded_for: HeaderValue,
    /// How long it may take to send a request body the proxy buffers (the header read
    /// timeout: a client that stalls mid-body is as slow as one that stalls mid-headers).
    pub read_timeout: Duration,
}

impl Peer {
    /// The client at `addr`, given `read_timeout` for a body the proxy buffers.
    pub fn new(addr: SocketAddr, read_timeout: Duration) -> Self {
        Self {
            addr,
            forwarded_for: hygiene::client_value(addr.ip()),
            read_timeout,
        }
    }
}

/// Handles one downstream request from `peer`.
pub async fn handle(
    shared: Arc<Shared>,
    peer: &Peer,
    req: Request<Incoming>,
) -> Response<ProxyBody> {
    let services = shared.services();
    let routed = {
        let host = request_host(&req);
        route(&services, host.map(host_only), req.uri().path()).ok_or_else(|| {
            let reason = format!("no service for host {:?}", host.unwrap_or_default());
            local(StatusCode::NOT_FOUND, &reason)
        })
    };
    let service = match routed {
        Ok(s) => Arc::clone(s),
        Err(resp) => return resp,
    };
    let started = shared.clock.now();
    let resp = match service.admit() {
        None => local(
            StatusCode::SERVICE_UNAVAILABLE,
            "too many requests in flight",
        ),
        Some(_permit) => forward(&shared, &service, peer, req).await,
    };
    let m = &shared.metrics;
    let handles = service.handles(m);
    handles.requests(m, resp.status().as_u16()).inc();
    let elapsed = shared.clock.now().saturating_sub(started);
    handles.latency.observe(elapsed.as_secs_f64());
    resp
}

/// The request's host: the `Host` header, else the URI's authority (HTTP/2).
fn request_host(req: &Request<Incoming>) -> Option<&str> {
    let from_header = req.headers().get(HOST).and_then(|h| h.to_str().ok());
    from_header.or_else(|| req.uri().authority().map(|a| a.as_str()))
}

async fn forward(
    shared: &Arc<Shared>,
    service: &Arc<Service>,
    peer: &Peer,
    req: Request<Incoming>,
) -> Response<ProxyBody> {
    let (mut parts, body) = req.into_parts();
    let method: Method = parts.method.as_str().parse().unwrap_or(Method::Other);
    hygiene::strip_hop_by_hop(&mut parts.headers);
    hygiene::add_via(&mut parts.headers, parts.version);
    hygiene::append_forwarded_for(&mut parts.headers, &peer.forwarded_for);
    set_host(&mut parts, &service.config.host_header);
    let h2 = match service.config.protocol {
        crate::config::UpstreamProtocol::Http1 => false,
        crate::config::UpstreamProtocol::Http2 => true,
        crate::config::UpstreamProtocol::Auto => parts.version == Version::HTTP_2,
    };
    parts.version = if h2 {
        Version::HTTP_2
    } else {
        Version::HTTP_11
    };
    let arm = &service.config.arm;
    let may_replay = arm.retries.is_some() && arm.classifier.retries(method);
    // The total timeout counts from here, so it includes reading a body that is buffered.
    let run = async {
        let limit = service.config.retry_buffer;
        let body = match prepare_body(body, may_replay, limit, peer.read_timeout).await {
            Ok(b) => b,
            Err(resp) => return resp,
        };
        let sent = Sent {
            parts,
            body,
            method,
            h2,
        };
        attempt::run(shared, service, sent).await
    };
    match arm.timeouts.total {
        None => run.await,
        Some(limit) => match tokio::time::timeout(limit, run).await {
            Ok(resp) => resp,
            Err(_) => local(StatusCode::GATEWAY_TIMEOUT, "total timeout"),
        },
    }
}

/// The forwarded `Host`: the client's (from `:authority` over HTTP/2, where there is no `Host`
/// header), or the configured rewrite.
fn set_host(parts: &mut http::request::Parts, rule: &crate::config::HostHeader) {
    let value = match rule {
        crate::config::HostHeader::Preserve if parts.headers.contains_key(HOST) => return,
        crate::config::HostHeader::Preserve => parts.uri.authority().map(|a| a.as_str()),
        crate::config::HostHeader::Rewrite(h) => Some(h.as_str()),
    };
    if let Some(v) = value.and_then(|h| HeaderValue::from_str(h).ok()) {
        parts.headers.insert(HOST, v);
    }
}

/// Step 3: a replayable body when it may be needed and fits, else the stream itself. A body
/// to buffer must arrive within `read_timeout` (408 otherwise); an empty one costs nothing.
async fn prepare_body(
    body: Incoming,
    may_replay: bool,
    limit: usize,
    read_timeout: Duration,
) -> Result<Attempt, Response<ProxyBody>> {
    let exact = body.size_hint().exact();
    let fits = exact.is_some_and(|n| n <= limit as u64);
    if !(may_replay && fits) {
        return Ok(Attempt::Streaming(Some(body.boxed())));
    }
    if body.is_end_stream() {
        // The common case (a GET): no timer, no collecting.
        return Ok(Attempt::Replayable(Bytes::new()));
    }
    match tokio::time::timeout(read_timeout, Limited::new(body, limit).collect()).await {
        Ok(Ok(collected)) => Ok(Attempt::Replayable(collected.to_bytes())),
        Ok(Err(err)) => {
            tracing::debug!(%err, "request body failed");
            Err(local(
                StatusCode::BAD_REQUEST,
                "request body could not be read",
            ))
        }
        Err(_) => {
            let reason = format!("request body not received within {read_timeout:?}");
            Err(local(StatusCode::REQUEST_TIMEOUT, &reason))
        }
    }
}
