//! The upstream response body, which hands its HTTP/1.1 connection back to the pool when it
//! has been read to the end.

use super::h1::{Free, Sender};
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
    pub(super) inner: Incoming,
    pub(super) back: Option<Back>,
}

impl UpstreamBody {
    /// Gives the connection back at once when there is no body to read.
    pub(super) fn check_end(mut self) -> Self {
        if self.inner.is_end_stream() {
            if let Some(b) = self.back.take() {
                b.free.put(b.tx);
            }
        }
        self
    }
}

impl Body for UpstreamBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        let ended = match &polled {
            Poll::Ready(None) => true,
            Poll::Ready(Some(Ok(_))) => self.inner.is_end_stream(),
            _ => false,
        };
        if ended {
            if let Some(b) = self.back.take() {
                b.free.put(b.tx);
            }
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
