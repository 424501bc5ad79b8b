//! The one observer of a response on its way downstream ([`ResponseBody`]): the proxy's own
//! answer, or an endpoint's body (the frames an attempt already read while peeking for a gRPC
//! call's trailers, then the rest), watched for three things:
//!
//! 1. **Idleness**: an upstream that stops sending mid-body for the response idle time ends
//!    the body with an error (the client sees its stream reset or its connection closed).
//! 2. **A deferred attempt**: a gRPC call whose `grpc-status` was not known when its headers
//!    came reports its attempt's outcome when the trailers arrive: their status (none: gRPC's
//!    reading of a missing status), a body that failed or went idle as the endpoint's fault,
//!    and, dropped before its end (the client went away), its cancellation.
//! 3. **The dashboard's count** ([`count`], into [`tailguard_record::live`]): the request's
//!    latency to the response headers, and whether it succeeded by the service's classifier,
//!    the rule failure accrual applies to attempts. A gRPC call is counted by the status in
//!    its trailers, as a failure when it ends without one or the upstream fails mid-body, and
//!    as a request but not a failure when the client drops it first (its choice, not the
//!    service's failure). The proxy's answer to a request the client failed ([`ClientsFault`])
//!    is not the service's failure either.
//! 4. **The head and a body cut short** ([`ResponseBody::count_head`]): `requests_total` counts
//!    the class of the head the downstream server took (it asks `is_end_stream` as it writes
//!    the head: hyper's servers and the lean one alike), or `error` for a response dropped
//!    before that; an endpoint's body that breaks off counts in `responses_truncated_total`.
//!    An endpoint that sends a head and then closes used to leave some clients with no status
//!    at all: a body that fails before its first frame holds the error back for one turn, so
//!    the server writes the head first (it writes what it has when the body makes it wait);
//!    the client then sees the head and a close before the declared length (over HTTP/2,
//!    HEADERS and then RST_STREAM), as HAProxy does.

use crate::body::{BoxError, ProxyBody};
use crate::fault::{EndpointFault, Failure};
use crate::grpc;
use crate::idle::IdleTimer;
use crate::in_flight::{Answer, InFlight};
use crate::response::{ClientsFault, Reply};
use crate::upstream::UpstreamBody;
use bytes::Bytes;
use http::Response;
use hyper::body::{Body, Frame, SizeHint};
use prometheus_client::metrics::counter::Counter;
use std::cell::Cell;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tailguard_record::live::Live;
use tailguard_resilience::{AttemptOutcome, Classifier, Method};

/// The upstream stopped sending mid-body.
#[derive(Debug, thiserror::Error)]
#[error("upstream response body idle for {0:?}")]
pub struct ResponseIdle(pub Duration);

/// A gRPC attempt whose outcome comes with the trailers: reported with the round trip to its
/// response headers (what the load estimate learns), whenever the stream ends.
#[derive(Debug)]
pub struct Deferred {
    /// The attempt.
    pub pending: InFlight,
    /// From send to response headers.
    pub rtt: Duration,
}

/// A response body on its way downstream; see the module docs.
///
/// Boxed: the response goes up through every stage's return by value, about a dozen moves a
/// request, and a pointer moves in one word where the body's 328 bytes moved in memcpy, into
/// destinations mostly out of cache (issue 49: a quarter of the hop's L1 data misses). One
/// allocation a response pays for it.
#[derive(Debug)]
pub struct ResponseBody(Box<Inner>);

/// What [`ResponseBody`] holds.
#[derive(Debug)]
struct Inner {
    source: Source,
    /// The dashboard's verdict, when it comes with the trailers.
    tally: Option<Tally>,
    /// The metrics of the head and of a body cut short (step 4).
    counts: Option<Counts>,
    /// Some frame went downstream.
    yielded: bool,
    /// An error held back so the head goes out first (step 4); boxed, as it is rare: every
    /// response's box stays smaller.
    held: Option<Box<Held>>,
    /// The request's access log line, written when this body drops (`None`: no log).
    line: Option<Box<crate::access_log::Line>>,
    /// The request's SERVER span, ended when this body drops (`None`: not sampled).
    span: Option<Box<crate::trace::ServerSpan>>,
}

/// An error held back for [`HOLD`] before the stream is reset: the head goes out first, and
/// reaches the client apart from the reset. HTTP/2 drops the HEADERS still queued when a stream
/// is reset (a wake at once, or a yield, let the stream's task run again first), and curl 7.88
/// drops a head that comes in one read with its stream's reset: with a hold of 1 ms it saw no
/// head in 1 of 40 tries, with 5 ms in none of 100. A body that fails before its first byte
/// pays the hold once, on its way to failing anyway.
const HOLD: Duration = Duration::from_millis(10);

/// A body's first error, held for [`HOLD`].
struct Held {
    error: BoxError,
    /// The hold.
    turn: Pin<Box<dyn Future<Output = ()> + Send>>,
}

impl std::fmt::Debug for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Held").field("error", &self.error).finish()
    }
}

/// Step 4's counters of one response.
#[derive(Debug)]
struct Counts {
    /// The class of its head, counted when the server takes the head.
    head: Counter,
    /// `error`: counted when the response is dropped before the server took its head.
    no_head: Counter,
    /// Counted when an endpoint's body breaks off.
    truncated: Counter,
    /// The head was counted (one way or the other).
    counted: Cell<bool>,
}

impl Counts {
    fn head_taken(&self) {
        if !self.counted.replace(true) {
            self.head.inc();
        }
    }
}

#[derive(Debug)]
#[allow(
    clippy::large_enum_variant,
    reason = "an endpoint's body is the common case; boxing it would cost an allocation per request"
)]
enum Source {
    /// The proxy's own answer (or a stand-in stage's).
    Local(ProxyBody),
    /// An endpoint's body.
    Upstream {
        peeked: VecDeque<Frame<Bytes>>,
        inner: UpstreamBody,
        idle: IdleTimer,
        /// Boxed: only gRPC's calls have one (128 B off every HTTP response's box; before the
        /// body itself was boxed, off every stage's return).
        deferred: Option<Box<Deferred>>,
    },
}

impl ResponseBody {
    /// The proxy's own answer.
    pub fn local(body: ProxyBody) -> Self {
        Self(Box::new(Inner {
            source: Source::Local(body),
            tally: None,
            counts: None,
            yielded: false,
            held: None,
            line: None,
            span: None,
        }))
    }

    /// An endpoint's body: `peeked` frames first, then `inner`; `idle` bounds each wait for a
    /// frame; `deferred` is reported when the body ends.
    pub fn upstream(
        peeked: VecDeque<Frame<Bytes>>,
        inner: UpstreamBody,
        idle: Option<Duration>,
        deferred: Option<Deferred>,
    ) -> Self {
        Self(Box::new(Inner {
            source: Source::Upstream {
                peeked,
                inner,
                idle: IdleTimer::new(idle),
                deferred: deferred.map(Box::new),
            },
            tally: None,
            counts: None,
            yielded: false,
            held: None,
            line: None,
            span: None,
        }))
    }

    /// Counts the response's head in `head` when the downstream server takes it, in `no_head`
    /// if it is dropped first, and a body cut short in `truncated` (step 4).
    pub fn count_head(&mut self, head: Counter, no_head: Counter, truncated: Counter) {
        // Inline, not boxed: 32 bytes more in the body, one allocation less per request.
        self.0.counts = Some(Counts {
            head,
            no_head,
            truncated,
            counted: Cell::new(false),
        });
    }

    /// The proxy's own answer (not an endpoint's body).
    pub fn is_local(&self) -> bool {
        matches!(self.0.source, Source::Local(_))
    }

    /// Writes `line` to the access log when this body drops, with the bytes it sent and how
    /// it ended.
    pub fn log(&mut self, line: Box<crate::access_log::Line>) {
        self.0.line = Some(line);
    }

    /// Ends `span` when this body drops.
    pub fn trace(&mut self, span: Box<crate::trace::ServerSpan>) {
        self.0.span = Some(span);
    }

    /// The end of the call as the attempt and the dashboard hear of it.
    fn ended(&mut self, end: End) {
        if let Source::Upstream { deferred, .. } = &mut self.0.source {
            if let Some(d) = deferred.take() {
                match &end {
                    End::Grpc(code) => {
                        d.pending.answered(Answer::Grpc(*code), d.rtt);
                    }
                    End::Failed(failure) => {
                        let fault = EndpointFault {
                            addr: d.pending.endpoints.addr(d.pending.slot),
                            failure: failure.clone(),
                        };
                        d.pending.failed(&fault, d.rtt);
                    }
                }
            }
        }
        if let Some(t) = &mut self.0.tally {
            match end {
                End::Grpc(code) => t.grpc(code),
                End::Failed(_) => t.count(false),
            }
        }
    }

    fn poll_source(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let (peeked, inner, idle) = match &mut self.0.source {
            Source::Local(b) => return Pin::new(b).poll_frame(cx),
            Source::Upstream {
                peeked,
                inner,
                idle,
                ..
            } => (peeked, inner, idle),
        };
        if let Some(f) = peeked.pop_front() {
            return Poll::Ready(Some(Ok(f)));
        }
        match Pin::new(&mut *inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                idle.activity();
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Pending => match idle.poll_expired(cx) {
                Some(after) => Poll::Ready(Some(Err(Box::new(ResponseIdle(after))))),
                None => Poll::Pending,
            },
            other => other,
        }
    }
}

/// How a call's body ended.
enum End {
    /// With this `grpc-status` (or gRPC's reading of none).
    Grpc(u8),
    /// The endpoint's body failed or went idle.
    Failed(Failure),
}

impl Body for ResponseBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        if let Some(held) = &mut this.0.held {
            std::task::ready!(held.turn.as_mut().poll(cx));
            let error = this.0.held.take().map(|h| h.error);
            return Poll::Ready(error.map(Err));
        }
        let polled = this.poll_source(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                this.0.yielded = true;
                if let (Some(l), Some(d)) = (&mut this.0.line, frame.data_ref()) {
                    l.body_bytes(d.len());
                }
                if let Some(t) = frame.trailers_ref() {
                    this.ended(End::Grpc(grpc::status_at_end(t)));
                }
            }
            Poll::Ready(Some(Err(e))) => {
                let failure = if e.is::<ResponseIdle>() {
                    Failure::Timeout
                } else {
                    Failure::Broken(
                        crate::fault::Reason::broken(&**e),
                        tailguard_http::error_chain(&**e),
                    )
                };
                this.ended(End::Failed(failure));
                if let Some(c) = &this.0.counts {
                    c.truncated.inc();
                }
                if let Some(l) = &mut this.0.line {
                    l.fault("response body broken");
                }
            }
            Poll::Ready(None) => this.ended(End::Grpc(grpc::MISSING_STATUS)),
            Poll::Pending => {}
        }
        match polled {
            Poll::Ready(Some(Err(error))) if !this.0.yielded => {
                // Step 4: the head goes out before the close.
                this.0.yielded = true;
                let mut turn: Pin<Box<dyn Future<Output = ()> + Send>> =
                    Box::pin(tokio::time::sleep(HOLD));
                let _ = turn.as_mut().poll(cx);
                this.0.held = Some(Box::new(Held { error, turn }));
                Poll::Pending
            }
            polled => polled,
        }
    }

    fn is_end_stream(&self) -> bool {
        // Asked by the downstream server as it writes the head (step 4).
        if let Some(c) = &self.0.counts {
            c.head_taken();
        }
        if self.0.held.is_some() {
            return false;
        }
        match &self.0.source {
            Source::Local(b) => b.is_end_stream(),
            Source::Upstream { peeked, inner, .. } => peeked.is_empty() && inner.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.0.source {
            Source::Local(b) => b.size_hint(),
            Source::Upstream { peeked, inner, .. } if peeked.is_empty() => inner.size_hint(),
            Source::Upstream { .. } => SizeHint::default(),
        }
    }
}

impl Drop for ResponseBody {
    /// A call not counted yet: either its body ended without trailers (hyper stops polling
    /// once `is_end_stream` says so), which gRPC reads as a failure, or the client went away
    /// first (counted, not as a failure). A deferred attempt still out is cancelled as its
    /// [`InFlight`] drops.
    fn drop(&mut self) {
        let mut head = true;
        if let Some(c) = &self.0.counts {
            if !c.counted.replace(true) {
                c.no_head.inc();
                head = false;
            }
        }
        let ended = self.is_end_stream();
        if let (Some(s), false) = (&mut self.0.span, head) {
            s.status(0);
        }
        if let Some(l) = &mut self.0.line {
            if !head {
                l.status(0);
            }
            if !ended && !l.has_fault() {
                l.fault("client went away");
            }
        }
        if let Some(t) = &mut self.0.tally {
            if ended {
                t.grpc(grpc::MISSING_STATUS);
            } else {
                t.count(true);
            }
        }
    }
}

/// Counts `resp` on `live` (and on its route's figures, when the service has routes),
/// `latency` after its request came, by `classifier`; a gRPC call whose status comes with the
/// trailers is counted when they do.
pub fn count(
    resp: &mut Response<ResponseBody>,
    reply: Reply,
    method: Method,
    classifier: Classifier,
    (live, route): (&Arc<Live>, Option<&Arc<Live>>),
    latency: Duration,
) {
    let status = resp.status().as_u16();
    let record = |ok| {
        live.record(latency, ok);
        if let Some(r) = route {
            r.record(latency, ok);
        }
    };
    if resp.extensions().get::<ClientsFault>().is_some() {
        record(true);
        return;
    }
    let outcome = if reply != Reply::Grpc || status != 200 {
        AttemptOutcome::Status(status)
    } else if let Some(code) = grpc::status(resp.headers()) {
        AttemptOutcome::Grpc(code)
    } else {
        resp.body_mut().0.tally = Some(Tally {
            live: Some(Arc::clone(live)),
            route: route.map(Arc::clone),
            latency,
            method,
            classifier,
        });
        return;
    };
    record(classifier.classify(method, outcome).success);
}

/// The dashboard's verdict of one gRPC call, counted once.
#[derive(Debug)]
struct Tally {
    /// Taken when the call is counted.
    live: Option<Arc<Live>>,
    /// Its route's figures, when the service has routes.
    route: Option<Arc<Live>>,
    latency: Duration,
    method: Method,
    classifier: Classifier,
}

impl Tally {
    fn grpc(&mut self, code: u8) {
        let ok = self
            .classifier
            .classify(self.method, AttemptOutcome::Grpc(code))
            .success;
        self.count(ok);
    }

    fn count(&mut self, ok: bool) {
        if let Some(live) = self.live.take() {
            live.record(self.latency, ok);
        }
        if let Some(route) = self.route.take() {
            route.record(self.latency, ok);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{BodyExt, Empty};

    fn counted() -> (ResponseBody, [Counter; 3]) {
        let empty = Empty::<Bytes>::new().map_err(|n| match n {}).boxed();
        let mut body = ResponseBody::local(empty);
        let counters = [Counter::default(), Counter::default(), Counter::default()];
        let [head, no_head, cut] = counters.clone();
        body.count_head(head, no_head, cut);
        (body, counters)
    }

    /// The head counts when the server takes it (it asks `is_end_stream`), once; a response
    /// dropped before that counts as `error`.
    #[test]
    fn a_head_counts_when_the_server_takes_it_and_error_when_it_never_does() {
        let (body, [head, no_head, _]) = counted();
        assert!(body.is_end_stream() && body.is_end_stream());
        drop(body);
        assert_eq!((head.get(), no_head.get()), (1, 0));
        let (body, [head, no_head, _]) = counted();
        drop(body);
        assert_eq!((head.get(), no_head.get()), (0, 1));
    }
}
