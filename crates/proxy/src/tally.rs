//! A downstream response as the dashboard counts it ([`crate::live`]): its latency to the
//! response headers (as the `request_latency_seconds` metric), and whether it succeeded by
//! the service's own classifier, the rule failure accrual applies to attempts.
//!
//! A gRPC call's verdict is its `grpc-status`: in the headers of a trailers-only response,
//! else in the trailers, so such a call is counted when its body ends: by the status in its
//! trailers, as a failure when it ends without one (or the upstream fails mid-body), and as
//! a request but not a failure when the client drops it first (its choice, not the
//! service's failure). The proxy's answer to a request the client failed
//! ([`ClientsFault`]) is not the service's failure either.

use crate::body::{BoxError, ProxyBody};
use crate::grpc;
use crate::response::{ClientsFault, Reply};
use bytes::Bytes;
use http::Response;
use hyper::body::{Body, Frame, SizeHint};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tailguard_record::live::Live;
use tailguard_resilience::{AttemptOutcome, Classifier, Method};

/// Counts `resp` on `live`, `latency` after its request came; returns it, its body watched
/// when the verdict comes with the trailers.
pub fn count(
    resp: Response<ProxyBody>,
    reply: Reply,
    method: Method,
    classifier: Classifier,
    live: &Arc<Live>,
    latency: Duration,
) -> Response<ProxyBody> {
    let status = resp.status().as_u16();
    if resp.extensions().get::<ClientsFault>().is_some() {
        live.record(latency, true);
        return resp;
    }
    if reply != Reply::Grpc || status != 200 {
        let ok = classifier
            .classify(method, AttemptOutcome::Status(status))
            .success;
        live.record(latency, ok);
        return resp;
    }
    if let Some(code) = grpc::status(resp.headers()) {
        let ok = classifier
            .classify(method, AttemptOutcome::Grpc(code))
            .success;
        live.record(latency, ok);
        return resp;
    }
    let watch = Verdict {
        live: Some(Arc::clone(live)),
        latency,
        method,
        classifier,
    };
    resp.map(|inner| ProxyBody::new(Watched { inner, watch }))
}

#[derive(Debug)]
struct Verdict {
    /// Taken when the call is counted.
    live: Option<Arc<Live>>,
    latency: Duration,
    method: Method,
    classifier: Classifier,
}

impl Verdict {
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
    }
}

/// A gRPC response body whose trailers carry the call's verdict.
struct Watched {
    inner: ProxyBody,
    watch: Verdict,
}

impl Body for Watched {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(t) = frame.trailers_ref() {
                    this.watch.grpc(grpc::status_at_end(t));
                }
            }
            // The upstream failed mid-body.
            Poll::Ready(Some(Err(_))) => this.watch.count(false),
            // Ended without trailers: no status, which gRPC reads as a failure.
            Poll::Ready(None) => this.watch.grpc(grpc::MISSING_STATUS),
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for Watched {
    /// Not counted yet: either the body ended without trailers (hyper stops polling once
    /// `is_end_stream` says so), which gRPC reads as a failure, or the client went away first.
    fn drop(&mut self) {
        if self.inner.is_end_stream() {
            self.watch.grpc(grpc::MISSING_STATUS);
        } else {
            self.watch.count(true);
        }
    }
}
