//! The upstream response body, which hands its HTTP/1.1 connection back to the pool when it
//! has been read to the end.

use super::h1::{Free, Sender};
use super::h2_stream::RecvBody;
use super::lean::LeanBody;
use crate::body::{BoxError, ProxyBody};
use bytes::Bytes;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// A connection to hand back when its response body ends.
#[derive(Debug)]
pub(super) struct Back {
    pub(super) tx: Sender,
    pub(super) free: Arc<Free>,
}

/// An upstream response body. Over HTTP/1.1 it gives its connection back to the pool when it
/// has been read to the end.
#[derive(Debug)]
pub struct UpstreamBody {
    inner: Inner,
}

#[derive(Debug)]
#[allow(
    clippy::large_enum_variant,
    reason = "the lean body carries its connection and reader; boxing it would cost an allocation per request"
)]
enum Inner {
    /// From hyper's client connection, and the connection to hand back when it ends (kept
    /// in this variant: beside `inner` it would add its size to every response's body).
    Hyper(Incoming, Option<Back>),
    /// From the lean HTTP/1.1 client, which hands its connection back itself.
    Lean(LeanBody),
    /// From an HTTP/2 stream.
    H2(RecvBody),
    /// From another implementation of the upstream stage (a stage test's).
    Given(ProxyBody),
}

impl UpstreamBody {
    /// A body from an HTTP/2 stream (nothing to hand back).
    pub(super) fn h2(inner: RecvBody) -> Self {
        Self {
            inner: Inner::H2(inner),
        }
    }

    /// A body from an HTTP/1.1 connection, handed back at once when there is no body to read.
    pub(super) fn over_h1(inner: Incoming, back: Back) -> Self {
        let mut body = Self {
            inner: Inner::Hyper(inner, Some(back)),
        };
        if body.is_end_stream() {
            body.hand_back();
        }
        body
    }

    /// A body from the lean HTTP/1.1 client; its connection goes back at once when there is
    /// no body to read.
    pub(super) fn lean(mut inner: LeanBody) -> Self {
        inner.settle();
        Self {
            inner: Inner::Lean(inner),
        }
    }

    /// A body that did not come from a pooled connection: what a stand-in for the upstream
    /// stage answers with.
    pub fn given(body: ProxyBody) -> Self {
        Self {
            inner: Inner::Given(body),
        }
    }

    fn hand_back(&mut self) {
        if let Inner::Hyper(_, back) = &mut self.inner {
            if let Some(b) = back.take() {
                b.free.put(b.tx);
            }
        }
    }
}

impl Body for UpstreamBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let polled = match &mut self.inner {
            Inner::Hyper(b, _) => Pin::new(b).poll_frame(cx).map_err(Into::into),
            Inner::Lean(b) => Pin::new(b).poll_frame(cx),
            Inner::H2(b) => Pin::new(b).poll_frame(cx),
            Inner::Given(b) => Pin::new(b).poll_frame(cx),
        };
        let ended = match &polled {
            Poll::Ready(None) => true,
            Poll::Ready(Some(Ok(_))) => self.is_end_stream(),
            _ => false,
        };
        if ended {
            self.hand_back();
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        match &self.inner {
            Inner::Hyper(b, _) => b.is_end_stream(),
            Inner::Lean(b) => b.is_end_stream(),
            Inner::H2(b) => b.is_end_stream(),
            Inner::Given(b) => b.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.inner {
            Inner::Hyper(b, _) => b.size_hint(),
            Inner::Lean(b) => b.size_hint(),
            Inner::H2(b) => b.size_hint(),
            Inner::Given(b) => b.size_hint(),
        }
    }
}
