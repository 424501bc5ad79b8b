//! Stage 3 of the request path ([`crate::forward`] -> [`crate::attempts`] -> **balanced** ->
//! [`crate::upstream`]): one attempt. The service's [`tailguard_client::Client`] picks its
//! endpoint (and the probes a probing balancer wants, sent off the request path); the attempt
//! is in flight from the pick ([`InFlight`]); the stage below connects and sends within the
//! attempt timeout; the end is classified and reported back to the same `Client`.
//!
//! The connection comes first, then the request: an attempt that could not connect (refused,
//! connect timeout) leaves even a streamed body unread, and the request, whatever its method,
//! may go to another endpoint: nothing reached the first (Linkerd's requeues, Envoy's
//! `connect-failure`).
//!
//! # Whose fault
//! The attempt ends as a [`Fault`] when there is no response to forward, and only a
//! [`Fault::Endpoint`] reaches the endpoint's accrual, load estimate and success rate
//! ([`InFlight::failed`] takes nothing else):
//! - the *client's* body failed (malformed, aborted, idle, too slow; [`crate::request_body`]),
//!   so the upstream request did, or the endpoint answered a request it never got whole:
//!   [`Fault::Client`], the attempt cancelled;
//! - the endpoint's pool is at its connection limit: [`Fault::Proxy`], cancelled;
//! - the deadline (the caller's, or the total timeout) passed before the attempt was sent or
//!   while it was out: [`Fault::Proxy`], cancelled; the attempt timeout is the time left when
//!   that is sooner, and each attempt forwards the time left in the caller's deadline header
//!   ([`crate::deadline`]);
//! - an attempt abandoned midway (the total timeout fired, the client went away, a backup
//!   won) is cancelled when its [`InFlight`] drops, so the balancer's pending count never
//!   leaks.
//!
//! # gRPC
//! A gRPC call's outcome is its `grpc-status`. A trailers-only response carries it in its
//! headers. Otherwise the frames the endpoint has already delivered are read without waiting
//! (as linkerd2-proxy peeks a response's trailers): a unary call's message and trailers
//! usually arrive together, so its status is known before anything is sent downstream and an
//! UNAVAILABLE can be retried. When the trailers are not there yet (a stream), the response
//! streams on and the attempt's outcome is reported when they come
//! ([`crate::response_body`]).

use crate::attempts::{Attempted, Balanced, Outgoing, Turn};
use crate::body::ProxyBody;
use crate::endpoints::{Endpoints, NotSent};
use crate::fault::{EndpointFault, Failure, Fault, ProxyFault};
use crate::in_flight::{Answer, InFlight};
use crate::response::Reply;
use crate::response_body::{Deferred, ResponseBody};
use crate::service::Service;
use crate::shared::Shared;
use crate::upstream::{self, UpstreamBody};
use crate::{grpc, hygiene};
use bytes::Bytes;
use futures_util::future::Either;
use http::{Request, Response, StatusCode};
use hyper::body::{Body, Frame};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;
use tailguard_resilience::Class;
use tokio::time::Instant;

/// The balanced stage of one service's endpoint generation, over `upstream`.
#[derive(Clone, Copy)]
pub struct Balancer<'a, S: upstream::Stage> {
    /// What every connection shares (clock, metrics).
    pub shared: &'a Arc<Shared>,
    /// The service.
    pub service: &'a Arc<Service>,
    /// The endpoint generation the request started on.
    pub endpoints: &'a Arc<Endpoints>,
    /// The stage below.
    pub upstream: &'a S,
}

impl<S: upstream::Stage> Balanced for Balancer<'_, S> {
    fn attempt<'a>(
        &'a self,
        request: &'a Outgoing,
        turn: Turn,
        now: Duration,
        slot: &mut usize,
    ) -> impl Future<Output = Attempted> + Send + 'a {
        let backup = matches!(turn, Turn::Backup { .. });
        let picked = match self.pick(request, turn, now) {
            Ok(pending) => {
                if let Some(trail) = &request.trail {
                    trail.sent(backup);
                }
                *slot = pending.slot;
                Ok(pending)
            }
            Err((pushed_back, left)) => {
                *slot = pushed_back;
                Err(left)
            }
        };
        // The usual attempt (picked, not traced) is the send's own future; the others go
        // through `once`, which answers a pushed-back one and spans a traced one.
        match (picked, &request.trace) {
            (Ok(pending), None) => Either::Left(self.send_once(request, pending, None)),
            (picked, _) => Either::Right(self.once(request, picked, backup)),
        }
    }
}

impl<S: upstream::Stage> Balancer<'_, S> {
    /// Picks the endpoint of attempt `turn` (avoiding the slot it names when another exists)
    /// and sends the probes a probing balancer asks for with it; the attempt is in flight from
    /// here (`now`). The first attempt also counts the request, under the same lock.
    fn pick(
        &self,
        request: &Outgoing,
        turn: Turn,
        now: Duration,
    ) -> Result<InFlight, (usize, Duration)> {
        let (shared, service, endpoints) = (self.shared, self.service, self.endpoints);
        let clock = shared.clock;
        let mut probes = Vec::new();
        let (slot, ticket) =
            match endpoints.send(now, turn.avoid(), turn == Turn::First, &mut probes) {
                Ok(sent) => sent,
                Err(NotSent::PushedBack(slot, left)) => return Err((slot, left)),
                Err(NotSent::NoEndpoints) => {
                    unreachable!("the attempts stage checked that there are endpoints")
                }
            };
        if !probes.is_empty() {
            crate::probe::send(shared, service, endpoints, probes, request.h2);
        }
        Ok(InFlight {
            shared: Arc::clone(shared),
            service: Arc::clone(service),
            endpoints: Arc::clone(endpoints),
            attempt: Some((slot, ticket)),
            slot,
            method: request.method,
            sent: now,
            clock,
        })
    }

    /// One attempt, picked (`backup`: a hedge or a rescue), in a CLIENT span of its own when
    /// the request is traced; or, when every endpoint asked to be left alone for `left` (the
    /// pick's `Err`), answered at once with nothing sent.
    ///
    /// Not an `async fn`, nor is [`Balancer::send_once`]: one copies its arguments (the
    /// attempt's `InFlight` among them) into its state when first polled
    /// (rust-lang/rust#62958; see `forward::handle`).
    #[allow(
        clippy::manual_async_fn,
        reason = "an async fn copies its arguments into its state"
    )]
    fn once<'a>(
        &'a self,
        request: &'a Outgoing,
        picked: Result<InFlight, Duration>,
        backup: bool,
    ) -> impl Future<Output = Attempted> + 'a {
        async move {
            let pending = match picked {
                Ok(pending) => pending,
                Err(left) => {
                    return Attempted {
                        class: Attempted::FINAL,
                        result: Err(Fault::Proxy(ProxyFault::PushedBack(left))),
                    };
                }
            };
            let Some(traced) = &request.trace else {
                return self.send_once(request, pending, None).await;
            };
            let addr = self.endpoints.addr(pending.slot);
            let (span, header) = traced.attempt();
            let done = self.send_once(request, pending, Some(header)).await;
            let outcome = match &done.result {
                Ok(resp) => Ok(resp.status().as_u16()),
                Err(fault) => Err(error_type(fault)),
            };
            traced.attempted(span, &request.parts.method, addr, backup, outcome);
            done
        }
    }

    /// One attempt, picked: send within the attempt timeout (with `traceparent`, the
    /// attempt's own span, when traced), classify, report.
    #[allow(
        clippy::manual_async_fn,
        reason = "an async fn copies its arguments into its state"
    )]
    fn send_once<'a>(
        &'a self,
        request: &'a Outgoing,
        pending: InFlight,
        traceparent: Option<http::HeaderValue>,
    ) -> impl Future<Output = Attempted> + 'a {
        async move {
            let endpoints = self.endpoints;
            let slot = pending.slot;
            let addr = endpoints.addr(slot);
            // The attempt timeout, or the time left before the deadline if that is sooner: then
            // running out is the caller's deadline (or the total timeout), not the endpoint's
            // fault.
            let attempt = self.service.config.arm.timeouts.attempt;
            let (limit, by_deadline) = match (attempt, request.deadline) {
                (a, Some(d)) => match (a, d.left(Instant::now())) {
                    (Some(a), left) if left >= a => (Some(a), None),
                    (_, left) => (Some(left), Some(d.why)),
                },
                (a, None) => (a, None),
            };
            if limit == Some(Duration::ZERO) && by_deadline.is_some() {
                return past_deadline(pending, by_deadline);
            }
            let make = Make {
                request,
                endpoints,
                slot,
                traceparent: traceparent.as_ref(),
                picked: self.shared.clock.at(pending.sent),
            };
            // The send's future made where it is awaited: one made first and then moved there
            // was copied into the attempt's state twice.
            let upstream = self.upstream;
            let result = match limit {
                Some(limit) => tokio::time::timeout(limit, upstream.send(addr, request.h2, &make))
                    .await
                    .ok(),
                None => Some(upstream.send(addr, request.h2, &make).await),
            };
            if result.is_none() && by_deadline.is_some() {
                return past_deadline(pending, by_deadline);
            }
            // The answer's (or the failure's) one reading: its round trip, and the end of the
            // request's time if this attempt's end is the one returned.
            let at = self.shared.clock.now();
            request.answered.set(at);
            let rtt = at.saturating_sub(pending.sent);
            // The client's body failed, so the upstream request did, or the endpoint answered a
            // request it never got whole: the client's fault either way.
            if let (Some(_), Some(fault)) = (&result, client_fault(request)) {
                drop(pending);
                return Attempted {
                    class: Attempted::FINAL,
                    result: Err(Fault::Client(fault)),
                };
            }
            let fault = match result {
                None => EndpointFault {
                    addr,
                    failure: Failure::Timeout,
                },
                Some(Ok(resp)) => return respond(self.service, request, resp, pending, rtt),
                Some(Err(e)) => match Fault::upstream(addr, &e) {
                    Fault::Endpoint(fault) => fault,
                    other => {
                        // Nothing was sent: not the endpoint's failure, so the attempt is
                        // cancelled (the balancer sees it end, accrual sees nothing).
                        drop(pending);
                        return Attempted {
                            class: Attempted::FINAL,
                            result: Err(other),
                        };
                    }
                },
            };
            let class = pending.failed_after(&fault, rtt);
            Attempted {
                class,
                result: Err(Fault::Endpoint(fault)),
            }
        }
    }
}

/// A failed attempt's `error.type`, in the words of the proxy's own answers.
fn error_type(fault: &Fault) -> String {
    match fault {
        Fault::Endpoint(f) => f.reason().as_str().to_owned(),
        Fault::Client(f) => format!("client {}", f.kind()),
        Fault::Proxy(ProxyFault::Deadline(why)) => format!("deadline ({why})"),
        Fault::Proxy(other) => format!("{other:?}")
            .split(['(', ' ', '{'])
            .next()
            .unwrap_or("proxy")
            .to_owned(),
    }
}

/// The deadline `why` passed before or while the attempt was out: cancelled, nobody's
/// failure (the balancer sees it end, accrual sees nothing).
fn past_deadline(pending: InFlight, why: Option<&'static str>) -> Attempted {
    drop(pending);
    Attempted {
        class: Attempted::FINAL,
        result: Err(Fault::Proxy(ProxyFault::Deadline(
            why.unwrap_or("deadline"),
        ))),
    }
}

fn client_fault(request: &Outgoing) -> Option<crate::request_body::ClientFault> {
    request.fault.as_ref().and_then(|c| c.get().cloned())
}

/// A response came: classify it (a gRPC call by its status, peeked if need be), report it,
/// and wrap its body for the trip downstream.
fn respond(
    service: &Service,
    request: &Outgoing,
    resp: Response<UpstreamBody>,
    pending: InFlight,
    rtt: Duration,
) -> Attempted {
    let (mut parts, mut body) = resp.into_parts();
    hygiene::strip_hop_by_hop(&mut parts.headers);
    hygiene::add_via(&mut parts.headers, parts.version);
    let idle = service.config.body.response_idle;
    let grpc_call = request.reply == Reply::Grpc && parts.status == StatusCode::OK;
    let mut peeked = VecDeque::new();
    let verdict = if !grpc_call {
        Some(Ok(Answer::Status(parts.status.as_u16())))
    } else if let Some(code) = grpc::status(&parts.headers) {
        Some(Ok(Answer::Grpc(code)))
    } else {
        peek(&mut body, &mut peeked, service.config.retry_buffer)
    };
    // A 429 or 503 that says when to come back keeps its endpoint out of picks that long.
    let wait = match parts.status.as_u16() {
        429 | 503 => crate::pushback::retry_after(&parts.headers, wall_clock()),
        _ => None,
    };
    let (class, deferred) = match verdict {
        Some(Ok(answer)) => (pending.answered_pushed(answer, rtt, wait), None),
        Some(Err((reason, why))) => {
            let fault = EndpointFault {
                addr: pending.endpoints.addr(pending.slot),
                failure: Failure::Broken(reason, why),
            };
            (pending.failed_after(&fault, rtt), None)
        }
        // Not known yet: a success for now (nothing to retry), reported at the stream's end;
        // the endpoint answered, so the stream is no stall while it lasts.
        None => {
            let mut pending = pending;
            pending.answer_began();
            (SUCCESS, Some(Deferred { pending, rtt }))
        }
    };
    let body = ResponseBody::upstream(peeked, body, idle, deferred);
    Attempted {
        class,
        result: Ok(Response::from_parts(parts, body)),
    }
}

/// The wall clock, for an HTTP-date in `Retry-After` (the one place the request path reads it).
#[allow(clippy::disallowed_methods)] // an HTTP-date is wall-clock time by definition
fn wall_clock() -> std::time::SystemTime {
    std::time::SystemTime::now()
}

const SUCCESS: Class = Class {
    success: true,
    retryable: false,
};

/// Reads the frames `body` has ready, without waiting, into `into` (at most about `limit`
/// bytes of data), and returns the call's answer if they include its end (`Err`: the body
/// failed, why).
fn peek(
    body: &mut UpstreamBody,
    into: &mut VecDeque<Frame<Bytes>>,
    limit: usize,
) -> Option<Result<Answer, (crate::fault::Reason, String)>> {
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
                    return Some(Ok(Answer::Grpc(code)));
                }
                if bytes > limit {
                    return None;
                }
            }
            Poll::Ready(Some(Err(e))) => {
                let reason = crate::fault::Reason::broken(&*e);
                return Some(Err((reason, tailguard_http::error_chain(&*e))));
            }
            Poll::Ready(None) => return Some(Ok(Answer::Grpc(grpc::MISSING_STATUS))),
            Poll::Pending => return None,
        }
    }
}

/// An attempt's request, made once its connection is known.
struct Make<'a> {
    request: &'a Outgoing,
    endpoints: &'a Endpoints,
    slot: usize,
    traceparent: Option<&'a http::HeaderValue>,
    /// When the attempt was picked (the pool's idle check reads no clock of its own).
    picked: Instant,
}

impl upstream::Make for Make<'_> {
    fn request(&self, h2: bool) -> Request<ProxyBody> {
        let request = self.request;
        let body = request.body().take();
        let mut req = build(&request.parts, body, self.endpoints, self.slot, h2);
        if let Some(d) = &request.deadline {
            d.stamp(req.headers_mut(), Instant::now());
        }
        if let Some(t) = self.traceparent {
            req.headers_mut()
                .insert(crate::trace::TRACEPARENT, t.clone());
        }
        req
    }

    /// A request with no body, no deadline to forward and no trace (the default GET) is
    /// written from the client's parts: one pass over its headers, where
    /// [`upstream::Make::request`] copies the header map (two allocations) for the lean client
    /// to write. (A `Transfer-Encoding` on a request without a body, which the lean client
    /// removes, goes that way too.)
    fn bare(&self, out: &mut Vec<u8>) -> Option<upstream::Bare> {
        let request = self.request;
        let parts = &request.parts;
        let stamps = request.deadline.as_ref().is_some_and(|d| d.stamps());
        if stamps
            || self.traceparent.is_some()
            || parts.headers.contains_key(http::header::TRANSFER_ENCODING)
            || !matches!(*request.body(), crate::attempts::AttemptBody::Empty)
        {
            return None;
        }
        let path = parts.uri.path_and_query().map_or("/", |pq| pq.as_str());
        let host = match parts.headers.contains_key(http::header::HOST) {
            true => None,
            false => endpoint_host(self.endpoints, self.slot),
        };
        Some(upstream::encode_bare(
            &parts.method,
            path,
            &parts.headers,
            host.as_ref(),
            out,
        ))
    }

    fn picked_at(&self) -> Option<Instant> {
        Some(self.picked)
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
    *req.version_mut() = match h2 {
        true => http::Version::HTTP_2,
        false => http::Version::HTTP_11,
    };
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
            if let Some(v) = endpoint_host(endpoints, slot) {
                req.headers_mut().insert(http::header::HOST, v);
            }
        }
        if !req.body().is_end_stream() {
            frame_h1_body(&mut req);
        }
    }
    req
}

/// The `Host` an HTTP/1.1 request to slot `slot` gets when the client sent none: the
/// endpoint's authority.
fn endpoint_host(endpoints: &Endpoints, slot: usize) -> Option<http::HeaderValue> {
    let authority = endpoints.authority(slot)?;
    http::HeaderValue::from_str(authority.as_str()).ok()
}

/// An HTTP/1.1 request that has a body, whatever its method:
/// 1. framed, so the body goes on: one of unknown length and no `Content-Length` is chunked.
///    Both HTTP/1.1 clients (hyper's and the lean one, by hyper's rules) send no body for a
///    `GET` or `HEAD` of unknown length otherwise, and the client's bytes were dropped while
///    it got a 200; HAProxy and nginx forward them.
/// 2. for a method whose body a server may not read (`GET`, `HEAD`, `DELETE`, `OPTIONS`,
///    `TRACE`: RFC 9110 gives it no meaning), sent with `Connection: close` and its connection
///    not reused: a backend that ignores such a body would read it as the next request.
fn frame_h1_body(req: &mut Request<ProxyBody>) {
    use http::header::{CONNECTION, CONTENT_LENGTH, TRANSFER_ENCODING};
    let unknown = req.body().size_hint().exact().is_none();
    let odd = matches!(
        *req.method(),
        http::Method::GET
            | http::Method::HEAD
            | http::Method::DELETE
            | http::Method::OPTIONS
            | http::Method::TRACE
    );
    let headers = req.headers_mut();
    if unknown && !headers.contains_key(CONTENT_LENGTH) && !headers.contains_key(TRANSFER_ENCODING)
    {
        headers.insert(TRANSFER_ENCODING, http::HeaderValue::from_static("chunked"));
    }
    if odd {
        headers.insert(CONNECTION, http::HeaderValue::from_static("close"));
    }
}

#[cfg(test)]
mod tests;
