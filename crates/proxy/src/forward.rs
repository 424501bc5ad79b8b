//! Stage 1 of the request path (**forward** -> [`crate::attempts`] -> [`crate::balanced`] ->
//! [`crate::upstream`]): one request, checked, routed, cleaned, bounded in time, counted.
//!
//! 1. Refuse what must not be forwarded and normalise the rest ([`hygiene::admit`]); route by
//!    host and path (segment-wise prefix) to a service; none: 404 with `x-tailguard-error`.
//! 2. Admit under the service's in-flight limit; over it: 503.
//! 3. Pick the upstream protocol: `auto` sends gRPC over HTTP/2 and everything else over
//!    HTTP/1.1, which every backend speaks, so an HTTP/2 client in front of an HTTP/1.1-only
//!    backend (nginx's default) just works.
//! 4. Keep a copy of the body as it streams (bounded by `retry_buffer`, [`crate::replay`])
//!    only when a retry or a backup could need it: the method is retryable (or the call is gRPC
//!    and some gRPC codes are) and retries are on, or the method may be hedged and hedging is
//!    on. Every body is watched for the client's faults ([`crate::request_body`]). A body
//!    without a copy, or one that outgrew it, is retried only when an attempt could not
//!    connect (nothing was sent).
//! 5. Hand it to the attempts stage, bounded by the total timeout and by the caller's own
//!    deadline (`grpc-timeout`, `x-tailguard-timeout-ms`: [`crate::deadline`]), whichever is
//!    sooner (one already expired is answered at once); answer a [`Fault`] in the form the
//!    client expects.
//! 6. Count the answer for the metrics and the dashboard ([`crate::response_body::count`]).

use crate::access_log::{Line, Taps};
use crate::attempts::{self, Answered, AttemptBody, Outgoing, Policy};
use crate::balanced::Balancer;
use crate::body::BoxError;
use crate::config::{EscapedSlashes, Limits, ServiceConfig, UpstreamProtocol};
use crate::deadline::{self, Deadline};
use crate::fault::{Fault, ProxyFault};
use crate::metrics::ServiceHandles;
use crate::replay::Replay;
use crate::request_body::{BodyRules, ClientBody, FaultCell};
use crate::response::Reply;
use crate::response_body::{self, ResponseBody};
use crate::route::DEFAULT_ROUTE;
use crate::service::{host_only, route, Service};
use crate::shared::Shared;
use crate::trace::{ServerSpan, Traced};
use crate::{grpc, hygiene};
use bytes::Bytes;
use futures_util::future::Either;
use http::header::{HeaderValue, HOST};
use http::{Request, Response, StatusCode, Version};
use http_body_util::BodyExt;
use hyper::body::Body;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tailguard_resilience::Method;

/// The client of a downstream connection.
#[derive(Clone, Debug)]
pub struct Peer {
    /// Its IP as the `X-Forwarded-For` entry, formatted once per connection.
    pub forwarded_for: HeaderValue,
    /// What its paths' encoded slashes get.
    pub escaped_slashes: EscapedSlashes,
    /// How much of a failure the proxy's own answers tell it.
    pub error_detail: crate::config::ErrorDetail,
}

impl Peer {
    /// The client at `addr`, held to `limits`.
    pub fn new(addr: SocketAddr, limits: &Limits) -> Self {
        Self {
            forwarded_for: hygiene::client_value(addr.ip()),
            escaped_slashes: limits.escaped_slashes,
            error_detail: limits.client_error_detail,
        }
    }
}

/// The stages below this one ([`crate::attempts`] over [`crate::balanced`] over the service's
/// [`crate::upstream`] pools), as this stage calls them, so its tests can stand in for them.
pub trait Next: Sync {
    /// The attempts of `request` to `service` (the leaf a split picked, or the service
    /// routed to), counted in `handles` (its route's at that service).
    fn attempts<'a>(
        &'a self,
        shared: &'a Arc<Shared>,
        service: &'a Arc<Service>,
        handles: &'a ServiceHandles,
        request: &'a Outgoing,
    ) -> impl Future<Output = Result<Response<ResponseBody>, Fault>> + Send + 'a;
}

/// The stages below, as they run in the proxy.
#[derive(Clone, Copy, Debug)]
pub struct Stages;

impl Next for Stages {
    // Not boxed: the request's future holds it (the lean server boxes each exchange whole).
    async fn attempts(
        &self,
        shared: &Arc<Shared>,
        service: &Arc<Service>,
        handles: &ServiceHandles,
        request: &Outgoing,
    ) -> Result<Response<ResponseBody>, Fault> {
        let endpoints = service.endpoints();
        let policy = Policy {
            arm: &service.config.arm,
            endpoints: &endpoints,
            handles,
            clock: shared.clock,
        };
        let balancer = Balancer {
            shared,
            service,
            endpoints: &endpoints,
            upstream: &service.upstreams,
        };
        attempts::run(policy, &balancer, request).await
    }
}

/// Handles one downstream request from `peer`, through `next`; with an access log, its line
/// goes with the response body and is written when that drops.
///
/// Not an `async fn`, nor are the stages below it that take the request by value: an `async fn`
/// copies its arguments into its state when first polled (rust-lang/rust#62958), so each would
/// move the request (264 B) once more, into a part of the exchange's future no other layer
/// touches, and hold room for both copies; an `async move` block uses what it captured in place.
pub fn handle<'a, B, N: Next>(
    shared: Arc<Shared>,
    peer: &'a Peer,
    req: Request<B>,
    next: &'a N,
) -> impl Future<Output = Response<ResponseBody>> + use<'a, B, N>
where
    B: Body<Data = Bytes> + Send + Sync + Unpin + 'static,
    B::Error: Into<BoxError>,
{
    if shared.access_log.is_none() && shared.tracer.is_none() {
        // Neither: no clock read, allocation or lock for them, and no layer of its own around
        // the request's future.
        return Either::Left(routed(shared, peer, req, next, Observed::default()));
    }
    Either::Right(async move {
        let mut line = shared.access_log.as_ref().map(|log| {
            let now = shared.clock.now();
            Box::new(Line::new(log, shared.clock, now, req.method(), req.uri()))
        });
        let mut span = shared.tracer.as_ref().and_then(|t| {
            let (traced, parent) = t.sample(req.headers())?;
            Some(Box::new(ServerSpan::new(
                traced,
                parent,
                req.method(),
                req.uri(),
            )))
        });
        let observed = Observed {
            line: line.as_deref_mut(),
            span: span.as_deref_mut(),
        };
        let mut resp = routed(Arc::clone(&shared), peer, req, next, observed).await;
        let status = resp.status().as_u16();
        if let Some(mut line) = line {
            line.status(status);
            if resp.body().is_local() {
                if let Some(why) = resp.headers().get(crate::response::ERROR_HEADER) {
                    line.fault(&String::from_utf8_lossy(why.as_bytes()));
                }
            }
            resp.body_mut().log(line);
        }
        if let Some(mut span) = span {
            span.status(status);
            resp.body_mut().trace(span);
        }
        resp
    })
}

/// What a request's observers want filled in as it goes: its access log line and its
/// SERVER span (each `None` when off, or for a span, when the request is not sampled).
#[derive(Default)]
struct Observed<'a> {
    line: Option<&'a mut Line>,
    span: Option<&'a mut ServerSpan>,
}

/// [`handle`] without the log line's bookkeeping: route, admit, forward, count.
/// Not an `async fn`: see [`handle`].
#[allow(
    clippy::manual_async_fn,
    reason = "an async fn copies its arguments into its state"
)]
fn routed<'a, 'o, B, N: Next>(
    shared: Arc<Shared>,
    peer: &'a Peer,
    mut req: Request<B>,
    next: &'a N,
    mut observed: Observed<'o>,
) -> impl Future<Output = Response<ResponseBody>> + use<'a, 'o, B, N>
where
    B: Body<Data = Bytes> + Send + Sync + Unpin + 'static,
    B::Error: Into<BoxError>,
{
    async move {
        let reply = if grpc::is_grpc(req.headers()) {
            Reply::Grpc
        } else {
            Reply::Http
        };
        if let Err((status, reason)) = hygiene::admit(&mut req, peer.escaped_slashes) {
            shared.metrics.client_error("", "refused");
            return reply.error(status, reason).map(ResponseBody::local);
        }
        // The service, or the answer at once (built here: a response held in a local would take
        // its room in this future for the whole request).
        let routed = {
            let services = shared.services.load();
            route(
                &services,
                request_host(&req).map(host_only),
                req.uri().path(),
            )
            .map(Arc::clone)
        };
        let Some(service) = routed else {
            let host = request_host(&req).unwrap_or_default();
            let reason = format!("no service for host {host:?}");
            return reply
                .error(StatusCode::NOT_FOUND, &reason)
                .map(ResponseBody::local);
        };
        let started = shared.clock.now();
        let method: Method = req.method().as_str().parse().unwrap_or(Method::Other);
        let route = crate::route::pick(&service.config.routes, req.method(), req.uri().path());
        let route_name = route.map_or(DEFAULT_ROUTE, |(_, r)| r.name.as_str());
        if let Some(l) = &mut observed.line {
            l.route(route_name);
        }
        if let Some(s) = &mut observed.span {
            s.route(route_name);
        }
        // Admission, one order: the route's rate limit, the service's, then (in `forward`, once
        // the request's deadline is known) the service's bound on attempts in flight and its
        // queue; a request refused at one step takes nothing from the later ones, and none is
        // an endpoint's fault.
        let admitted = match route {
            Some((i, _)) => service.route_admit(i, started),
            None => Ok(()),
        }
        .and_then(|()| service.rate_admit(started));
        // Whose figures count the request: the leaf a split sent it to, else the service.
        let (mut counted, mut leaf_index) = (&service, 0);
        let route_index = route.map(|(i, _)| i);
        let (result, answered) = match admitted {
            Err(wait) => {
                shared
                    .metrics
                    .rate_limited(&service.config.name, route_name);
                (Err(Fault::Proxy(ProxyFault::RateLimited(wait))), None)
            }
            Ok(()) => {
                let (index, leaf) = service.leaf();
                (counted, leaf_index) = (leaf, index);
                // No reference count changes per request: the service holds its figures.
                let _in_flight = leaf.live(&shared.live).start();
                let route = route.map(|(_, r)| r);
                let taps = observed.line.map(|l| l.taps());
                let traced = observed.span.map(|s| s.traced());
                let to = To {
                    service: &service,
                    leaf,
                    route,
                    handles: service.handles(&shared.metrics, route_index, index),
                    taps,
                    traced,
                    arrived: started,
                };
                forward(&shared, to, peer, req, reply, next).await
            }
        };
        // A response ends the request's time when its attempt read the clock for its round
        // trip; the proxy's own answers read it here.
        let ended = match (&result, answered) {
            (Ok(_), Some(at)) => at,
            _ => shared.clock.now(),
        };
        let mut resp = result.unwrap_or_else(|fault| {
            if let Fault::Client(f) = &fault {
                shared.metrics.client_error(&counted.config.name, f.kind());
            }
            fault
                .answer(reply, peer.error_detail)
                .map(ResponseBody::local)
        });
        let m = &shared.metrics;
        let handles = service.handles(m, route_index, leaf_index);
        let head = handles.requests(m, Some(resp.status().as_u16())).clone();
        let no_head = handles.requests(m, None).clone();
        resp.body_mut()
            .count_head(head, no_head, handles.truncated.clone());
        let elapsed = ended.saturating_sub(started);
        handles.latency.observe(elapsed.as_secs_f64());
        let classifier = counted.config.arm.classifier;
        let live = counted.live(&shared.live);
        let lives = (live, service.route_live(route_index));
        response_body::count(&mut resp, reply, method, classifier, lives, elapsed);
        resp
    }
}

/// The request's host: the `Host` header, else the URI's authority (HTTP/2).
fn request_host<B>(req: &Request<B>) -> Option<&str> {
    let from_header = req.headers().get(HOST).and_then(|h| h.to_str().ok());
    from_header.or_else(|| req.uri().authority().map(|a| a.as_str()))
}

/// Where an admitted request goes.
struct To<'a> {
    /// The service it was routed to.
    service: &'a Arc<Service>,
    /// The service its attempts go to: `service`, or the leaf its split picked.
    leaf: &'a Arc<Service>,
    /// Its route (`None`: `[default]`).
    route: Option<&'a crate::route::Route>,
    /// The counters of its route at its leaf.
    handles: &'a ServiceHandles,
    /// What its access log line wants filled in (`None`: no log).
    taps: Option<Taps>,
    /// Its trace, when it is sampled.
    traced: Option<Arc<Traced>>,
    /// When it arrived, on the proxy's clock.
    arrived: Duration,
}

/// Forwards `req` (routed to `to.service`, admitted) to `to.leaf`'s endpoints: the service's
/// body rules and total timeout bound it; the leaf's settings (the same service unless a
/// split picked it) decide the upstream protocol, the host, and what may be retried or hedged.
/// With the result, when its last attempt ended (`None`: no attempt did), read once by that
/// attempt. Not an `async fn`: see [`handle`].
#[allow(
    clippy::manual_async_fn,
    reason = "an async fn copies its arguments into its state"
)]
fn forward<'a, 't, B, N: Next>(
    shared: &'a Arc<Shared>,
    to: To<'t>,
    peer: &'a Peer,
    req: Request<B>,
    reply: Reply,
    next: &'a N,
) -> impl Future<Output = (Result<Response<ResponseBody>, Fault>, Option<Duration>)> + use<'a, 't, B, N>
where
    B: Body<Data = Bytes> + Send + Sync + Unpin + 'static,
    B::Error: Into<BoxError>,
{
    async move {
        let To {
            service,
            leaf,
            route,
            handles,
            taps,
            traced,
            arrived,
        } = to;
        let (trail, req_bytes) = match taps {
            Some(Taps { trail, req_bytes }) => (Some(trail), Some(req_bytes)),
            None => (None, None),
        };
        let config = &leaf.config;
        let (mut parts, body) = req.into_parts();
        let caller = deadline::Caller::read(&mut parts.headers);
        let method: Method = parts.method.as_str().parse().unwrap_or(Method::Other);
        let h2 = forwarded_head(&mut parts, peer, config, reply);
        let retry = route.and_then(|r| r.retryable);
        let (may_replay, hedge) = replays(config, method, reply, parts.uri.path());
        // A route that retries whatever the method needs its body kept; one that never retries
        // does not (an attempt that could not connect sent nothing, body included).
        let may_replay = match retry {
            Some(true) => config.arm.retries.is_some() || hedge,
            Some(false) => hedge,
            None => may_replay,
        };
        let body_rules = &service.config.body;
        let rules = BodyRules {
            idle: body_rules.request_idle,
            min_rate: body_rules.request_min_rate.filter(|_| reply == Reply::Http),
            grace: body_rules.request_rate_grace,
        };
        // The total timeout counts from here, so it includes reading a body that is buffered.
        let total = route
            .and_then(|r| r.timeout)
            .or(service.config.arm.timeouts.total)
            .or(config.arm.timeouts.total);
        let deadline = match deadline_of(total, caller) {
            Ok(deadline) => deadline,
            Err(fault) => return (Err(fault), None),
        };
        // Made here, not in `run`: there it was the block's to capture and then moved with it
        // into the timeout, the request's parts copied twice more into memory no other stage
        // touches. The admission's place and the body are set in it once known.
        let mut sent = Outgoing {
            parts,
            body: std::sync::Mutex::new(AttemptBody::Empty),
            method,
            h2,
            reply,
            fault: None,
            deadline,
            hedge,
            retry,
            trail,
            trace: traced,
            admission: None,
            arrived: Some(arrived),
            answered: Answered::default(),
        };
        // The body made ready for the attempts, set in the request once known.
        let ready = move |sent: &mut Outgoing, body: B| {
            let (body, fault) =
                prepare_body(body, may_replay, config.retry_buffer, rules, req_bytes);
            sent.body = std::sync::Mutex::new(body);
            sent.fault = fault;
        };
        let result = if deadline.is_none() && service.gate().is_none() {
            // Nothing to wait for first and no deadline around them (the default): the
            // attempts' future is awaited here, not in a block of its own.
            ready(&mut sent, body);
            next.attempts(shared, leaf, handles, &sent).await
        } else {
            let run = async {
                // The service's bound on attempts in flight: a place for the first attempt, at
                // once or after a wait in the queue (within the deadline, which the wait counts
                // toward).
                if let Some(gate) = service.gate() {
                    // Read only where a gate uses it (a header lookup hashes the name).
                    let class = crate::admission::criticality(&sent.parts.headers);
                    sent.admission =
                        Some(admit(shared, service, leaf, gate, class, deadline).await?);
                    // It may have waited in the queue: the attempts read the clock for their
                    // start.
                    sent.arrived = None;
                }
                ready(&mut sent, body);
                next.attempts(shared, leaf, handles, &sent).await
            };
            match deadline {
                None => run.await,
                Some(d) => match tokio::time::timeout_at(d.at, run).await {
                    Ok(result) => result,
                    Err(_) => Err(Fault::Proxy(ProxyFault::Deadline(d.why))),
                },
            }
        };
        // Every attempt is done with the request's header map: the thread's to lend again.
        tailguard_http::spare::give_map(std::mem::take(&mut sent.parts.headers));
        (result, sent.answered.get())
    }
}

/// A place for a request's first attempt under `service`'s admission (`gate`), waiting in its
/// queue if need be; a refusal is the proxy's fault (503, `Retry-After`), counted by reason,
/// and pauses the budgets' per-second floors of `leaf`'s endpoints.
async fn admit(
    shared: &Arc<Shared>,
    service: &Arc<Service>,
    leaf: &Arc<Service>,
    gate: &Arc<crate::admission::Gated>,
    class: tailguard_resilience::admission::Criticality,
    deadline: Option<Deadline>,
) -> Result<crate::admission::Entry, Fault> {
    // The deadline on the proxy's clock, which the gate runs on.
    let due = deadline.map(|d| {
        let left = d.at.saturating_duration_since(tokio::time::Instant::now());
        shared.clock.now() + left
    });
    match gate.enter(class, due).await {
        Ok(place) => Ok(crate::admission::Entry::new(Arc::clone(gate), place)),
        Err(why) => {
            shared
                .metrics
                .admission_refused(&service.config.name, why.name());
            leaf.endpoints().on_overload(shared.clock.now());
            let no_queue = service
                .config
                .arm
                .admission
                .is_none_or(|a| a.queue.max_size == 0);
            Err(Fault::Proxy(ProxyFault::Overloaded {
                why,
                adaptive: gate.adaptive(),
                no_queue,
            }))
        }
    }
}

/// Steps 1 and 3 for the head: hop-by-hop fields out, `via` and `x-forwarded-for` in, the
/// host rule, and the version of the upstream protocol. True when attempts go over HTTP/2.
fn forwarded_head(
    parts: &mut http::request::Parts,
    peer: &Peer,
    config: &ServiceConfig,
    reply: Reply,
) -> bool {
    hygiene::strip_hop_by_hop(&mut parts.headers);
    hygiene::add_via(&mut parts.headers, parts.version);
    hygiene::append_forwarded_for(&mut parts.headers, &peer.forwarded_for);
    set_host(parts, &config.host_header);
    let h2 = match config.protocol {
        UpstreamProtocol::Http1 => false,
        UpstreamProtocol::Http2 => true,
        UpstreamProtocol::Auto => reply == Reply::Grpc,
    };
    parts.version = if h2 {
        Version::HTTP_2
    } else {
        Version::HTTP_11
    };
    h2
}

/// Step 4's question: may the request be sent more than once, and may it be hedged? A gRPC
/// call (a POST) is hedged only when its method (`path`) is listed as safe to repeat.
fn replays(config: &ServiceConfig, method: Method, reply: Reply, path: &str) -> (bool, bool) {
    let classifier = config.arm.classifier;
    let retryable = match reply {
        Reply::Grpc => classifier.retries_grpc() || classifier.retries(method),
        Reply::Http => classifier.retries(method),
    };
    let backups = config.arm.hedge.is_some() || (config.arm.rescue && config.arm.retries.is_some());
    let hedges = backups
        && (classifier.retries(method)
            || (reply == Reply::Grpc && config.grpc_hedge.contains(path)));
    (
        (config.arm.retries.is_some() && retryable) || hedges,
        hedges,
    )
}

/// Step 5's bound: the total timeout or the caller's deadline, whichever is sooner, from now;
/// one already expired is the proxy's fault at once (nothing is sent).
fn deadline_of(
    total: Option<Duration>,
    caller: deadline::Caller,
) -> Result<Option<Deadline>, Fault> {
    let (limit, why) = match (total, caller.limit()) {
        (Some(t), Some((c, header))) if c < t => (Some(c), header),
        (None, Some((c, header))) => (Some(c), header),
        (t, _) => (t, crate::fault::Reason::TotalTimeout.as_str()),
    };
    match limit {
        Some(std::time::Duration::ZERO) => Err(Fault::Proxy(ProxyFault::Deadline(why))),
        limit => Ok(limit.map(|limit| Deadline {
            at: tokio::time::Instant::now() + limit,
            why,
            caller,
        })),
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

/// Step 4: the body as attempts send it: nothing for an empty one; copied as it streams, up
/// to `limit` bytes, when a retry or a backup may need it again ([`crate::replay`]: whatever
/// its size hint, so a client that sends no `content-length`, as grpc-go never does, is
/// retried like one that does); streamed once otherwise. A non-empty body is watched by
/// `rules`, with the cell its fault is written to.
fn prepare_body<B>(
    body: B,
    may_replay: bool,
    limit: usize,
    rules: BodyRules,
    tally: Option<Arc<std::sync::atomic::AtomicU64>>,
) -> (AttemptBody, Option<FaultCell>)
where
    B: Body<Data = Bytes> + Send + Sync + Unpin + 'static,
    B::Error: Into<BoxError>,
{
    if body.is_end_stream() {
        // The common case (a GET): nothing to copy, nothing to watch.
        return (AttemptBody::Empty, None);
    }
    let cell = FaultCell::default();
    let watched = ClientBody::new(body, Arc::clone(&cell), rules)
        .counting(tally)
        .map_err(Into::into)
        .boxed();
    let body = if may_replay {
        AttemptBody::Replay(Replay::new(watched, limit))
    } else {
        AttemptBody::Streaming(Some(watched))
    };
    (body, Some(cell))
}

#[cfg(test)]
mod tests;
