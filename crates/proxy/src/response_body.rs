//! The upstream response body as the proxy streams it downstream: the frames an attempt
//! already read (a gRPC response is peeked for its trailers), then the rest, watched for
//! idleness, and, for a gRPC call whose `grpc-status` was not yet known when its headers came,
//! the attempt's outcome reported when the trailers arrive.
//!
//! An upstream that stops sending mid-body for [`Watched`]'s idle time ends the body with an
//! error (the client sees its stream reset or its connection closed), and a deferred gRPC
//! attempt is reported as a timeout: the endpoint's fault. A body dropped before its end (the
//! client went away) reports a deferred attempt as cancelled.

use crate::idle::IdleTimer;
use crate::in_flight::InFlight;
use crate::upstream::UpstreamBody;
use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tailguard_resilience::AttemptOutcome;

use crate::body::BoxError;

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

/// See the module docs.
#[derive(Debug)]
pub struct Watched {
    peeked: VecDeque<Frame<Bytes>>,
    inner: UpstreamBody,
    idle: IdleTimer,
    deferred: Option<Deferred>,
}

impl Watched {
    /// `peeked` frames first, then `inner`; `idle` bounds each wait for a frame.
    pub fn new(
        peeked: VecDeque<Frame<Bytes>>,
        inner: UpstreamBody,
        idle: Option<Duration>,
        deferred: Option<Deferred>,
    ) -> Self {
        Self {
            peeked,
            inner,
            idle: IdleTimer::new(idle),
            deferred,
        }
    }

    fn report(&mut self, outcome: AttemptOutcome) {
        if let Some(d) = self.deferred.take() {
            d.pending.finish(outcome, d.rtt);
        }
    }
}

impl Body for Watched {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        if let Some(f) = this.peeked.pop_front() {
            return Poll::Ready(Some(Ok(f)));
        }
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                this.idle.activity();
                if let Some(t) = frame.trailers_ref() {
                    this.report(AttemptOutcome::Grpc(crate::grpc::status_at_end(t)));
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => {
                this.report(AttemptOutcome::Reset);
                Poll::Ready(Some(Err(e.into())))
            }
            Poll::Ready(None) => {
                this.report(AttemptOutcome::Grpc(crate::grpc::MISSING_STATUS));
                Poll::Ready(None)
            }
            Poll::Pending => match this.idle.poll_expired(cx) {
                Some(idle) => {
                    this.report(AttemptOutcome::Timeout);
                    Poll::Ready(Some(Err(Box::new(ResponseIdle(idle)))))
                }
                None => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.peeked.is_empty() && self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        if self.peeked.is_empty() {
            self.inner.size_hint()
        } else {
            SizeHint::default()
        }
    }
}
