//! The attempts of one request (step 4 and 5 of [`crate::forward`]): each goes to the endpoint
//! the service's [`tailguard_client::Client`] picks, and every outcome goes back to it.
//!
//! Each attempt checks out a connection before it builds its request, so an attempt that could
//! not connect (refused, connect timeout) leaves even a streamed body unread, and the request,
//! whatever its method, may go to another endpoint: nothing reached the first (Linkerd's
//! requeues, Envoy's `connect-failure`).
//!
//! An attempt abandoned midway (the total timeout fired, or the client went away) is reported
//! as cancelled when its guard drops, so the balancer's pending count never leaks.

use crate::clock::Clock;
use crate::endpoints::{Change, Endpoints};
use crate::forward::local;
use crate::hygiene;
use crate::service::Service;
use crate::upstream::{ProxyBody, SendError, UpstreamBody};
use crate::Shared;
use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use rand::SeedableRng;
use std::sync::Arc;
use std::time::Duration;
use tailguard_resilience::{AttemptOutcome, Class, Method, Ticket};

/// A request body, as attempts use it.
#[derive(Debug)]
pub enum Attempt {
    /// Buffered: every attempt sends a copy.
    Replayable(Bytes),
    /// Streamed: only the attempt that sends it can use it; attempts that found no connection
    /// leave it for the next.
    Streaming(Option<ProxyBody>),
}

impl Attempt {
    fn take(&mut self) -> ProxyBody {
        match self {
            Attempt::Replayable(b) => Full::new(b.clone()).map_err(|never| match never {}).boxed(),
            Attempt::Streaming(b) => b.take().unwrap_or_else(|| {
                // Unreachable: a streamed body is never retried; send nothing rather than panic.
                Full::new(Bytes::new())
                    .map_err(|never| match never {})
                    .boxed()
            }),
        }
    }

    /// Whether another attempt can send the body: a buffered one always, a streamed one until
    /// an attempt took it (an attempt that found no connection never does).
    fn available(&self) -> bool {
        match self {
            Attempt::Replayable(_) => true,
            Attempt::Streaming(b) => b.is_some(),
        }
    }
}

/// A request ready for its attempts.
#[derive(Debug)]
pub struct Sent {
    /// Method, path, cleaned headers, upstream version.
    pub parts: http::request::Parts,
    /// The body.
    pub body: Attempt,
    /// The method as the classifier sees it.
    pub method: Method,
    /// Over HTTP/2.
    pub h2: bool,
}

/// Reports an abandoned attempt as cancelled when dropped before [`Guard::finish`].
struct Guard<'a> {
    endpoints: &'a Endpoints,
    attempt: Option<(usize, Option<Ticket>)>,
    sent: Duration,
    clock: Clock,
}

impl Guard<'_> {
    fn finish(mut self, outcome: AttemptOutcome, method: Method) -> (Class, Change) {
        let attempt = self.attempt.take().expect("finished once");
        let now = self.clock.now();
        self.endpoints
            .complete(attempt, self.sent, method, outcome, now)
    }
}

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        if let Some(a) = self.attempt.take() {
            self.endpoints.cancel(a, self.sent, self.clock.now());
        }
    }
}

enum Ended {
    Response(Response<UpstreamBody>),
    Failed(StatusCode, String),
}

/// Runs attempts until one is final.
pub async fn run(
    shared: &Arc<Shared>,
    service: &Arc<Service>,
    mut sent: Sent,
) -> Response<ProxyBody> {
    let endpoints = service.endpoints();
    if endpoints.is_empty() {
        return local(StatusCode::SERVICE_UNAVAILABLE, "no endpoints");
    }
    let clock = shared.clock;
    endpoints.on_request(clock.now());
    let retries = service.config.arm.retries;
    let (mut avoid, mut tries) = (None, 0u32);
    loop {
        let (slot, class, ended) = once(shared, service, &endpoints, &mut sent, avoid).await;
        let may = !class.success
            && class.retryable
            && sent.body.available()
            && retries.is_some_and(|r| tries < r.max_retries);
        if !may {
            return finish(ended);
        }
        if !endpoints.may_retry(clock.now()) {
            service.handles(&shared.metrics).budget_exhausted.inc();
            return finish(ended);
        }
        drop(ended);
        service.handles(&shared.metrics).retries.inc();
        tries += 1;
        if let Some(backoff) = retries.and_then(|r| r.backoff) {
            let seed = clock.now().as_nanos() as u64;
            let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
            tokio::time::sleep(backoff.delay(tries, &mut rng)).await;
        }
        avoid = Some(slot);
    }
}

fn finish(ended: Ended) -> Response<ProxyBody> {
    match ended {
        Ended::Failed(status, reason) => local(status, &reason),
        Ended::Response(resp) => {
            let (mut parts, body) = resp.into_parts();
            hygiene::strip_hop_by_hop(&mut parts.headers);
            hygiene::add_via(&mut parts.headers, parts.version);
            Response::from_parts(parts, body.boxed())
        }
    }
}

/// One attempt: pick, send, classify, report.
async fn once(
    shared: &Arc<Shared>,
    service: &Arc<Service>,
    endpoints: &Endpoints,
    sent: &mut Sent,
    avoid: Option<usize>,
) -> (usize, Class, Ended) {
    let clock = shared.clock;
    let now = clock.now();
    let (slot, ticket) = endpoints.send(now, avoid).expect("checked non-empty");
    let addr = endpoints.addr(slot);
    let guard = Guard {
        endpoints,
        attempt: Some((slot, ticket)),
        sent: now,
        clock,
    };
    // The connection first, then the request: a request whose connection could not be made
    // keeps its body, so even a streamed body may go to another endpoint.
    let deadline = service
        .config
        .arm
        .timeouts
        .attempt
        .map(|t| tokio::time::Instant::now() + t);
    let result = match within(deadline, service.upstreams.checkout(sent.h2, addr)).await {
        None => None,
        Some(Err(e)) => Some(Err(e)),
        Some(Ok(conn)) => {
            let req = build(&sent.parts, sent.body.take(), endpoints, slot, sent.h2);
            within(deadline, conn.send(req)).await
        }
    };
    let (outcome, ended) = match result {
        None => (
            AttemptOutcome::Timeout,
            Ended::Failed(
                StatusCode::GATEWAY_TIMEOUT,
                format!("upstream {addr}: attempt timeout"),
            ),
        ),
        Some(Ok(resp)) => (
            AttemptOutcome::Status(resp.status().as_u16()),
            Ended::Response(resp),
        ),
        Some(Err(e @ SendError::Exhausted(_))) => {
            // Nothing was sent: not the endpoint's failure, so the attempt is cancelled (the
            // balancer sees it end, accrual sees nothing), and the request gets a 503.
            let reason = format!("upstream {addr}: {}", error_chain(&e));
            drop(guard);
            let class = Class {
                success: false,
                retryable: false,
            };
            return (
                slot,
                class,
                Ended::Failed(StatusCode::SERVICE_UNAVAILABLE, reason),
            );
        }
        Some(Err(e)) if e.is_connect() => (
            AttemptOutcome::Refused,
            Ended::Failed(
                StatusCode::BAD_GATEWAY,
                format!("upstream {addr}: {}", connect_failure(&e)),
            ),
        ),
        Some(Err(e)) => (
            AttemptOutcome::Reset,
            Ended::Failed(
                StatusCode::BAD_GATEWAY,
                format!("upstream {addr}: {}", error_chain(&e)),
            ),
        ),
    };
    let (class, change) = guard.finish(outcome, sent.method);
    record(
        shared,
        service,
        endpoints,
        slot,
        outcome,
        clock.now().saturating_sub(now),
        change,
    );
    (slot, class, ended)
}

/// The upstream request, from parts that are cheap to clone. Over HTTP/2: `http://HOST` and the
/// client's path and query, where HOST, sent as `:authority`, is the forwarded `Host` (the
/// client's or the rewrite; the endpoint's when there is none), and no `Host` header (RFC 9113
/// 8.3.1). Over HTTP/1.1: the path and query alone, with a `Host` header (the endpoint's when
/// the client sent none).
fn build(
    parts: &http::request::Parts,
    body: ProxyBody,
    endpoints: &Endpoints,
    slot: usize,
    h2: bool,
) -> Request<ProxyBody> {
    let path = parts
        .uri
        .path_and_query()
        .cloned()
        .unwrap_or_else(|| http::uri::PathAndQuery::from_static("/"));
    let mut req = Request::new(body);
    *req.method_mut() = parts.method.clone();
    *req.version_mut() = parts.version;
    *req.headers_mut() = parts.headers.clone();
    if h2 {
        let host = req.headers_mut().remove(http::header::HOST);
        let from_host = host.and_then(|h| http::uri::Authority::try_from(h.as_bytes()).ok());
        let mut uri = http::uri::Parts::default();
        uri.scheme = Some(http::uri::Scheme::HTTP);
        uri.authority = from_host.or_else(|| endpoints.authority(slot).cloned());
        uri.path_and_query = Some(path);
        *req.uri_mut() = http::Uri::from_parts(uri).unwrap_or_default();
    } else {
        *req.uri_mut() = http::Uri::from(path);
        if !req.headers().contains_key(http::header::HOST) {
            let host = endpoints.authority(slot).map(|a| a.as_str());
            if let Some(v) = host.and_then(|h| http::HeaderValue::from_str(h).ok()) {
                req.headers_mut().insert(http::header::HOST, v);
            }
        }
    }
    req
}

/// `work`'s output, or `None` when `deadline` passes first.
async fn within<T>(
    deadline: Option<tokio::time::Instant>,
    work: impl std::future::Future<Output = T>,
) -> Option<T> {
    match deadline {
        Some(d) => tokio::time::timeout_at(d, work).await.ok(),
        None => Some(work.await),
    }
}

/// Why no connection was made, in a few words: `connection refused`, `connect timeout (1s)`,
/// or the whole error chain for anything rarer.
fn connect_failure(e: &(dyn std::error::Error + 'static)) -> String {
    let mut next = Some(e);
    while let Some(err) = next {
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            return match io.kind() {
                std::io::ErrorKind::ConnectionRefused => "connection refused".to_owned(),
                std::io::ErrorKind::TimedOut => io.to_string(),
                _ => error_chain(e),
            };
        }
        next = err.source();
    }
    error_chain(e)
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

fn record(
    shared: &Shared,
    service: &Service,
    endpoints: &Endpoints,
    slot: usize,
    outcome: AttemptOutcome,
    rtt: Duration,
    change: Change,
) {
    let m = &shared.metrics;
    let handles = endpoints.handles(slot, m, &service.config.name);
    handles.latency.observe(rtt.as_secs_f64());
    let status = match outcome {
        AttemptOutcome::Status(s) => Some(s),
        _ => None,
    };
    handles.attempts(m, status).inc();
    let state = match change {
        Change::None => return,
        Change::Tripped => "dead",
        Change::Revived => "alive",
    };
    let (endpoint, service) = (endpoints.addr(slot), &service.config.name);
    if change == Change::Tripped {
        tracing::info!(%endpoint, %service, "failure accrual: endpoint out of rotation");
    } else {
        tracing::info!(%endpoint, %service, "failure accrual: endpoint back in rotation");
    }
    m.accrual.get_or_create(&handles.labels(state)).inc();
}
