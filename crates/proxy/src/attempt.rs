//! The attempts of one request (step 4 and 5 of [`crate::forward`]): each goes to the endpoint
//! the service's [`tailguard_client::Client`] picks, and every outcome goes back to it.
//!
//! Each attempt checks out a connection before it builds its request, so an attempt that could
//! not connect (refused, connect timeout) leaves even a streamed body unread, and the request,
//! whatever its method, may go to another endpoint: nothing reached the first (Linkerd's
//! requeues, Envoy's `connect-failure`).
//!
//! # Whose fault
//! Only the endpoint's faults reach its accrual, load estimate and success rate:
//! - an attempt that failed because the *client's* body failed (malformed, aborted, idle, too
//!   slow; [`crate::request_body`]) is cancelled, not failed, and answered 400 or 408 naming
//!   the client;
//! - an attempt that found its endpoint at its connection limit is the proxy's own limit: 503,
//!   cancelled;
//! - an attempt abandoned midway (the total timeout fired, or the client went away) is
//!   cancelled when its [`InFlight`] drops, so the balancer's pending count never leaks.
//!
//! # Hedging
//! With `service.hedge`, the first attempt of a request whose method the classifier would
//! retry, and whose body is buffered, races a timer set to the hedger's delay (the live
//! `1 - maxExtraLoad` quantile of attempt latencies). When the timer fires first and the hedge
//! budget allows, a backup goes to another endpoint; the first success wins and the other
//! attempt is dropped, which cancels it (its connection is abandoned, the balancer hears of the
//! cancellation). A failure of one waits for the other. Retries after that are not hedged, as in
//! the simulator. gRPC calls (POST) are not hedged: a call may not be idempotent.
//!
//! # gRPC
//! A gRPC call's outcome is its `grpc-status`. A trailers-only response carries it in its
//! headers. Otherwise the frames the endpoint has already delivered are read without waiting
//! (as linkerd2-proxy peeks a response's trailers): a unary call's message and trailers
//! usually arrive together, so its status is known before anything is sent downstream and an
//! UNAVAILABLE can be retried. When the trailers are not there yet (a stream), the response
//! streams on and the attempt's outcome is reported when they come
//! ([`crate::response_body`]).

use crate::body::{BoxError, ProxyBody};
use crate::endpoints::Endpoints;
use crate::in_flight::InFlight;
use crate::replay::{NotReplayable, Replay};
use crate::request_body::FaultCell;
use crate::response::Reply;
use crate::response_body::{Deferred, Watched};
use crate::service::Service;
use crate::shared::Shared;
use crate::upstream::{SendError, UpstreamBody};
use crate::{grpc, hygiene};
use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty, StreamBody};
use hyper::body::{Body, Frame};
use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;
use tailguard_resilience::{AttemptOutcome, Class, Method};

/// A request body, as attempts use it.
#[derive(Debug)]
pub enum AttemptBody {
    /// Empty: every attempt sends nothing.
    Empty,
    /// Copied as it streams, up to the retry buffer: every attempt may send it while the copy
    /// is whole ([`Replay`]).
    Replay(Replay),
    /// Streamed: only the attempt that sends it can use it; attempts that found no connection
    /// leave it for the next.
    Streaming(Option<ProxyBody>),
}

impl AttemptBody {
    fn take(&mut self) -> ProxyBody {
        match self {
            AttemptBody::Empty => Empty::new().map_err(|never| match never {}).boxed(),
            AttemptBody::Replay(r) => r.body().boxed(),
            AttemptBody::Streaming(b) => b.take().unwrap_or_else(|| {
                // `available` said no: an attempt went ahead anyway. Fail it loudly rather
                // than send an empty body in the client's name.
                let gone: Result<Frame<Bytes>, BoxError> = Err(Box::new(NotReplayable));
                StreamBody::new(futures_util::stream::once(std::future::ready(gone))).boxed()
            }),
        }
    }

    /// Whether another attempt can send the body: an empty one always, a copied one while the
    /// copy is whole, a streamed one until an attempt took it (an attempt that found no
    /// connection never does).
    fn available(&self) -> bool {
        match self {
            AttemptBody::Empty => true,
            AttemptBody::Replay(r) => r.replayable(),
            AttemptBody::Streaming(b) => b.is_some(),
        }
    }

    /// A retry is decided: whether it can send the body, the earlier attempts giving it up
    /// ([`Replay::retire`]).
    fn retire(&self) -> bool {
        match self {
            AttemptBody::Replay(r) => r.retire(),
            other => other.available(),
        }
    }

    /// Whether two attempts may send the body at once (a backup): the whole of it is known.
    fn complete(&self) -> bool {
        match self {
            AttemptBody::Empty => true,
            AttemptBody::Replay(r) => r.complete(),
            AttemptBody::Streaming(_) => false,
        }
    }
}

/// A request ready for its attempts (cleaned, its body prepared; not sent yet). A hedged request
/// has two attempts in flight at once, each reading this through a shared reference.
#[derive(Debug)]
pub struct Outgoing {
    /// Method, path, cleaned headers, upstream version.
    pub parts: http::request::Parts,
    /// The body (behind a lock only ever held to take a copy).
    pub body: std::sync::Mutex<AttemptBody>,
    /// The method as the classifier sees it.
    pub method: Method,
    /// Over HTTP/2.
    pub h2: bool,
    /// A gRPC call: its outcome is its `grpc-status`, its errors gRPC responses.
    pub reply: Reply,
    /// Where a streamed body writes the client's fault (`None`: a buffered body).
    pub fault: Option<FaultCell>,
}

impl Outgoing {
    fn body(&self) -> std::sync::MutexGuard<'_, AttemptBody> {
        // Taking a copy cannot panic midway; keep what a panicked holder left.
        self.body.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether a backup may be sent: the classifier would repeat the method and the body can
    /// be sent again (whether all of it is known yet is checked when the backup is due).
    fn hedgeable(&self, service: &Service) -> bool {
        let arm = &service.config.arm;
        arm.hedge.is_some() && arm.classifier.retries(self.method) && self.body().available()
    }
}

enum Ended {
    Response(Response<ProxyBody>),
    Failed(StatusCode, String),
}

/// One attempt's end: its endpoint slot, its class, and what to answer if it is final.
type Done = (usize, Class, Ended);

/// Runs attempts until one is final.
pub async fn run(
    shared: &Arc<Shared>,
    service: &Arc<Service>,
    request: Outgoing,
) -> Response<ProxyBody> {
    let endpoints = service.endpoints();
    if endpoints.is_empty() {
        return request
            .reply
            .error(StatusCode::SERVICE_UNAVAILABLE, "no endpoints");
    }
    let clock = shared.clock;
    endpoints.on_request(clock.now());
    let retries = service.config.arm.retries;
    let hedge = request
        .hedgeable(service)
        .then(|| endpoints.hedge_delay(clock.now()))
        .flatten();
    let attempts = Attempts {
        shared,
        service,
        endpoints: &endpoints,
        request: &request,
    };
    let (mut avoid, mut tries) = (None, 0u32);
    loop {
        let (slot, class, ended) = match hedge.filter(|_| tries == 0) {
            Some(delay) => attempts.hedged(delay).await,
            None => attempts.once(attempts.pick(avoid)).await,
        };
        let may = !class.success
            && class.retryable
            && request.body().available()
            && retries.is_some_and(|r| tries < r.max_retries);
        if !may {
            return finish(ended, request.reply);
        }
        if !endpoints.may_retry(clock.now()) {
            service.handles(&shared.metrics).budget_exhausted.inc();
            return finish(ended, request.reply);
        }
        if !request.body().retire() {
            return finish(ended, request.reply);
        }
        drop(ended);
        service.handles(&shared.metrics).retries.inc();
        tries += 1;
        if let Some(backoff) = retries.and_then(|r| r.backoff) {
            tokio::time::sleep(endpoints.retry_delay(&backoff, tries)).await;
        }
        avoid = Some(slot);
    }
}

/// What every attempt of one request works with.
#[derive(Clone, Copy)]
struct Attempts<'a> {
    shared: &'a Arc<Shared>,
    service: &'a Arc<Service>,
    endpoints: &'a Arc<Endpoints>,
    request: &'a Outgoing,
}

impl Attempts<'_> {
    /// The first attempt of a hedged request: a backup to another endpoint when the first is
    /// still out after `delay` and the budget allows; the first success wins, and dropping the
    /// other attempt cancels it. When one fails, the other's answer decides.
    async fn hedged(self, delay: Duration) -> Done {
        let pending = self.pick(None);
        let first_slot = pending.slot;
        let first = self.once(pending);
        tokio::pin!(first);
        tokio::select! {
            done = &mut first => return done,
            () = tokio::time::sleep(delay) => {}
        }
        let (shared, endpoints) = (self.shared, self.endpoints);
        let handles = self.service.handles(&shared.metrics);
        // A backup sends the body alongside the first attempt: all of it must be in the copy.
        if !self.request.body().complete() {
            return first.await;
        }
        if !endpoints.may_hedge(shared.clock.now()) {
            handles.hedge_budget_exhausted.inc();
            return first.await;
        }
        handles.hedges.inc();
        let pending = self.pick(Some(first_slot));
        endpoints.hedged(pending.slot);
        let backup = self.once(pending);
        tokio::pin!(backup);
        let (done, backup_first) = tokio::select! {
            done = &mut first => (done, false),
            done = &mut backup => (done, true),
        };
        let (done, from_backup) = if done.1.success {
            (done, backup_first)
        } else if backup_first {
            (first.await, false)
        } else {
            (backup.await, true)
        };
        if from_backup && done.1.success {
            handles.hedge_wins.inc();
            endpoints.hedge_won(done.0);
        }
        done
    }

    /// Picks the endpoint of the next attempt (avoiding `avoid` when another exists) and sends
    /// the probes a probing balancer asks for with it; the attempt is in flight from here.
    fn pick(self, avoid: Option<usize>) -> InFlight {
        let (shared, service, endpoints) = (self.shared, self.service, self.endpoints);
        let clock = shared.clock;
        let now = clock.now();
        let mut probes = Vec::new();
        let (slot, ticket) = endpoints
            .send(now, avoid, &mut probes)
            .expect("checked non-empty");
        if !probes.is_empty() {
            crate::probe::send(shared, service, endpoints, probes, self.request.h2);
        }
        InFlight {
            shared: Arc::clone(shared),
            service: Arc::clone(service),
            endpoints: Arc::clone(endpoints),
            attempt: Some((slot, ticket)),
            slot,
            method: self.request.method,
            sent: now,
            clock,
        }
    }

    // long: send, classify and report in the order they happen, each branch ending the
    // in-flight guard its own way.
    /// One attempt, picked: send, classify, report.
    async fn once(self, pending: InFlight) -> Done {
        let Attempts {
            shared,
            service,
            endpoints,
            request,
        } = self;
        let clock = shared.clock;
        let (slot, now) = (pending.slot, pending.sent);
        let addr = endpoints.addr(slot);
        // The connection first, then the request: a request whose connection could not be made
        // keeps its body, so even a streamed body may go to another endpoint.
        let deadline = service
            .config
            .arm
            .timeouts
            .attempt
            .map(|t| tokio::time::Instant::now() + t);
        let result = match within(deadline, service.upstreams.checkout(request.h2, addr)).await {
            None => None,
            Some(Err(e)) => Some(Err(e)),
            Some(Ok(conn)) => {
                let body = request.body().take();
                let req = build(&request.parts, body, endpoints, slot, request.h2);
                within(deadline, conn.send(req)).await
            }
        };
        let rtt = || clock.now().saturating_sub(now);
        // The client's body failed, so the upstream request did, or the endpoint answered a
        // request it never got whole: the client's fault either way.
        if let (Some(_), Some(fault)) = (&result, client_fault(request)) {
            drop(pending);
            shared
                .metrics
                .client_error(&service.config.name, fault.kind());
            let answer = request
                .reply
                .client_fault(fault.status(), &fault.to_string());
            return (slot, FAILED_HERE, Ended::Response(answer));
        }
        let (outcome, ended) = match result {
            None => (
                AttemptOutcome::Timeout,
                Ended::Failed(
                    StatusCode::GATEWAY_TIMEOUT,
                    format!("upstream {addr}: attempt timeout"),
                ),
            ),
            Some(Ok(resp)) => {
                let rtt = rtt();
                return respond(service, request, slot, resp, pending, rtt);
            }
            Some(Err(e @ SendError::Exhausted(_))) => {
                // Nothing was sent: not the endpoint's failure, so the attempt is cancelled (the
                // balancer sees it end, accrual sees nothing), and the request gets a 503.
                let reason = format!("upstream {addr}: {e}");
                drop(pending);
                return (
                    slot,
                    FAILED_HERE,
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
                    format!("upstream {addr}: {}", tailguard_http::error_chain(&e)),
                ),
            ),
        };
        let class = pending.finish(outcome, rtt());
        (slot, class, ended)
    }
}

fn finish(ended: Ended, reply: Reply) -> Response<ProxyBody> {
    match ended {
        Ended::Failed(status, reason) => reply.error(status, &reason),
        Ended::Response(resp) => resp,
    }
}

/// Not a success, not retryable: a request the proxy answers itself.
const FAILED_HERE: Class = Class {
    success: false,
    retryable: false,
};

fn client_fault(request: &Outgoing) -> Option<crate::request_body::ClientFault> {
    request.fault.as_ref().and_then(|c| c.get().cloned())
}

/// A response came: classify it (a gRPC call by its status, peeked if need be), report it,
/// and wrap its body for the trip downstream.
fn respond(
    service: &Service,
    request: &Outgoing,
    slot: usize,
    resp: Response<UpstreamBody>,
    pending: InFlight,
    rtt: Duration,
) -> (usize, Class, Ended) {
    let (mut parts, mut body) = resp.into_parts();
    hygiene::strip_hop_by_hop(&mut parts.headers);
    hygiene::add_via(&mut parts.headers, parts.version);
    let idle = service.config.body.response_idle;
    let grpc_call = request.reply == Reply::Grpc && parts.status == StatusCode::OK;
    let mut peeked = VecDeque::new();
    let verdict = if !grpc_call {
        Some(AttemptOutcome::Status(parts.status.as_u16()))
    } else if let Some(code) = grpc::status(&parts.headers) {
        Some(AttemptOutcome::Grpc(code))
    } else {
        peek(&mut body, &mut peeked, service.config.retry_buffer)
    };
    let (class, deferred) = match verdict {
        Some(outcome) => (pending.finish(outcome, rtt), None),
        // Not known yet: a success for now (nothing to retry), reported at the stream's end.
        None => (SUCCESS, Some(Deferred { pending, rtt })),
    };
    let body = Watched::new(peeked, body, idle, deferred).boxed();
    (
        slot,
        class,
        Ended::Response(Response::from_parts(parts, body)),
    )
}

const SUCCESS: Class = Class {
    success: true,
    retryable: false,
};

/// Reads the frames `body` has ready, without waiting, into `into` (at most about `limit`
/// bytes of data), and returns the call's outcome if they include its end.
fn peek(
    body: &mut UpstreamBody,
    into: &mut VecDeque<Frame<Bytes>>,
    limit: usize,
) -> Option<AttemptOutcome> {
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    let mut bytes = 0;
    loop {
        match Pin::new(&mut *body).poll_frame(&mut cx) {
            Poll::Ready(Some(Ok(frame))) => {
                let code = frame.trailers_ref().map(grpc::status_at_end);
                bytes += frame.data_ref().map_or(0, Bytes::len);
                into.push_back(frame);
                if let Some(code) = code {
                    return Some(AttemptOutcome::Grpc(code));
                }
                if bytes > limit {
                    return None;
                }
            }
            Poll::Ready(Some(Err(_))) => return Some(AttemptOutcome::Reset),
            Poll::Ready(None) => return Some(AttemptOutcome::Grpc(grpc::MISSING_STATUS)),
            Poll::Pending => return None,
        }
    }
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
    match tailguard_http::error::io_cause(e) {
        Some(io) if io.kind() == std::io::ErrorKind::ConnectionRefused => {
            "connection refused".to_owned()
        }
        Some(io) if io.kind() == std::io::ErrorKind::TimedOut => io.to_string(),
        _ => tailguard_http::error_chain(e),
    }
}
